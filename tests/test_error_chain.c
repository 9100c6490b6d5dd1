/* tests/test_error_chain.c — the first failure of a chain of calls survives to its end, and
 * every NULL-argument message names the public function the program called.
 *
 * README's "Conventions" promise that ops accept NULL inputs and fail, so that a nested
 * expression such as tn_mean(tn_tanh(tn_add(a, b))) can be checked once at the end. That end
 * must then report the first failure, in PyTorch's words ("The size of tensor a (3) must match
 * ..."), not "argument 'self' is NULL" of the call that received the NULL. And a message about
 * a NULL argument must name a function the user can find in the headers, not an internal one.
 */
#include "util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_table.h"

#define BROADCAST_MSG "The size of tensor a (3) must match the size of tensor b (2)"

static tn_tensor *vec(int64_t n, double v) {
    double x[8];
    for (int64_t i = 0; i < n; i++) x[i] = v + (double)i;
    return tt_f64(1, (int64_t[]){n}, x, false);
}

/* A failure (shapes 3 and 2 that do not broadcast) at position `fail_at` (0 .. len-1) of a chain
 * of `len` unary steps; the steps before it succeed. The chain's result must be NULL with the
 * failure's status and message, whatever ran after it. */
static tn_tensor *chain(int len, int fail_at, tn_tensor *a3, tn_tensor *b2) {
    tn_tensor *x = a3;
    for (int k = 0; k < len; k++) {
        if (k == fail_at)
            x = tn_add(x, b2); /* x has 3 elements (or is NULL): fails here */
        else if (k % 4 == 0)
            x = tn_tanh(x);
        else if (k % 4 == 1)
            x = tn_mul_scalar(x, 2.0);
        else if (k % 4 == 2)
            x = tn_exp(x);
        else
            x = tn_neg(x);
    }
    return x;
}

static void test_first_failure_survives_chains(void **state) {
    (void)state;
    tn_tensor *a = vec(3, 0.5), *b = vec(2, 1.0);
    for (int len = 2; len <= 5; len++)
        for (int at = 0; at < len; at++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_clear_error();
            tn_tensor *r = tn_mean(chain(len, at, a, b));
            assert_null(r);
            assert_int_equal(tn_last_status(), TN_ERR_SHAPE);
            if (!strstr(tn_last_error(), BROADCAST_MSG))
                fail_msg("chain of %d, failing at %d: '%s'", len, at, tn_last_error());
            tn_scope_end();
        }
    tn_release(a);
    tn_release(b);
}

/* The issue's own example, and a reduction and backward at the end of it. */
static void test_nested_expression(void **state) {
    (void)state;
    tn_tensor *a = vec(3, 0.5), *b = vec(2, 1.0);
    assert_int_equal(tn_scope_begin(), TN_OK);
    assert_null(tn_mean(tn_tanh(tn_add(a, b))));
    tt_assert_error(TN_ERR_SHAPE, BROADCAST_MSG);
    assert_true(tn_backward(tn_sum(tn_mul(tn_add(a, b), a)), NULL, false) == TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, BROADCAST_MSG);
    tn_scope_end();
    tn_release(a);
    tn_release(b);
}

/* A successful call in between ends the chain: a NULL passed later is the caller's mistake. */
static void test_success_ends_the_chain(void **state) {
    (void)state;
    tn_tensor *a = vec(3, 0.5), *b = vec(2, 1.0);
    assert_null(tn_add(a, b));
    tn_tensor *ok = tn_neg(a);
    assert_non_null(ok);
    assert_null(tn_sum(NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_sum: argument 'self' is NULL");
    /* and tn_clear_error ends it too */
    assert_null(tn_add(a, b));
    tn_clear_error();
    assert_null(tn_tanh(NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_tanh: argument");
    tn_release(ok);
    tn_release(a);
    tn_release(b);
}

/* Without an earlier failure a NULL argument is TN_ERR_INVALID_ARGUMENT, also in status-returning
 * functions (tn_backward used to name tn_backward_ex). */
static void test_null_names_public_function(void **state) {
    (void)state;
    tn_clear_error();
    assert_int_equal(tn_backward(NULL, NULL, false), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_backward: argument 't' is NULL");
    tn_clear_error();
    assert_null(tn_mean(NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_mean: argument 'self' is NULL");
    tn_clear_error();
    assert_null(tn_max_dim(NULL, 0, false));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_max_dim: argument 'self' is NULL");
}

/* ---- every row of the op table, with a NULL at each input ---------------------------------- */

/* The public functions: every `tn_xxx(` declared in the public headers (include/tenet/). */
static char publics[1 << 15];

static void read_publics(void) {
    static const char *const headers[] = {"tensor.h", "ops.h", "autograd.h", "function.h",
                                          "io.h",     "optim.h", "debug.h", "runtime.h"};
    size_t k = 0;
    publics[k++] = ' ';
    for (size_t h = 0; h < sizeof headers / sizeof *headers; h++) {
        char path[256], line[512];
        snprintf(path, sizeof path, "../include/tenet/%s", headers[h]);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof line, f)) {
            for (char *p = line; (p = strstr(p, "tn_")); p++) {
                if (p > line && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) continue;
                size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
                if (p[n] != '(' || k + n + 2 >= sizeof publics) continue;
                memcpy(publics + k, p, n);
                k += n;
                publics[k++] = ' ';
            }
        }
        fclose(f);
    }
    publics[k] = '\0';
}

/* Whether msg starts with "tn_xxx: " for a public tn_xxx. */
static bool names_public(const char *msg) {
    size_t n = strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (n < 4 || strncmp(msg, "tn_", 3) || msg[n] != ':' || n > 120) return false;
    char word[128];
    snprintf(word, sizeof word, " %.*s ", (int)n, msg);
    return strstr(publics, word) != NULL;
}

static tn_tensor *row_input(const tt_op *op, const tt_case *c, int k) {
    tn_dtype dt = (op->dtypes & TT_DT(TN_F64)) ? TN_F64 : TN_I64;
    if (op->domain[k] == TT_MASK) dt = TN_BOOL;
    if (op->domain[k] == TT_INDEX || op->domain[k] == TT_TARGET) dt = TN_I64;
    return tn_zeros(c->ndim[k], c->shape[k], dt);
}

static void test_every_row_names_public_function(void **state) {
    (void)state;
    read_publics();
    int n, bad = 0, calls = 0;
    const tt_op *const *ops = tt_ops(&n);
    for (int r = 0; r < n; r++) {
        const tt_op *op = ops[r];
        const tt_case *c = &op->cases[0];
        for (int hole = 0; hole < op->arity; hole++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_tensor *in[TT_MAX_IN] = {NULL};
            for (int k = 0; k < op->arity; k++)
                if (k != hole) assert_non_null(in[k] = row_input(op, c, k));
            tn_clear_error();
            tn_tensor *out = op->call(in, c->p);
            calls++;
            const char *msg = tn_last_error();
            /* an optional input (layer_norm's weight, linear's bias) may be NULL */
            if (!out && (tn_last_status() != TN_ERR_INVALID_ARGUMENT || !names_public(msg))) {
                print_error("tn_%s with input %d NULL: status %s, message '%s'\n", op->name,
                            hole, tn_status_string(tn_last_status()), msg);
                bad++;
            }
            tn_scope_end();
        }
    }
    assert_true(calls > 50);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_failure_survives_chains),
        cmocka_unit_test(test_nested_expression),
        cmocka_unit_test(test_success_ends_the_chain),
        cmocka_unit_test(test_null_names_public_function),
        cmocka_unit_test(test_every_row_names_public_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
