/* The op table (tests/ops/) on empty inputs with huge other dims. Every row's cases whose inputs
 * are all empty run again with sizes made huge, in several ways: every size above 1 times 2^40
 * (any two of them multiply past int64), and, for each size v above 1 in turn, v alone made
 * v * 2^k in [2^62, 2^63) (it times any other size above 1 overflows, while the rest stay small,
 * so the op gets past the allocations its small sizes need). The same mapping holds for every
 * input, so equal sizes stay equal and broadcasting still lines up (docs/semantics.md §6c: a
 * shape with a zero dim holds no element, however large the others). The inputs expand tensors
 * whose sizes are 0 and 1, so nothing is allocated.
 *
 * Each op must either refuse (a negative status and a message) or give a result that holds at
 * most a few elements (an empty tensor, a sum's 0-d zero); a result that needs one of the huge
 * sizes is refused by the allocator. Where the result requires grad, its sum's backward must
 * return (either way) too. Nothing may leak. In the asan preset UBSan fails the test on any
 * signed overflow along the way: the point of it, since kernels and argument checks that form
 * products of sizes overflow exactly here (the fuzzer found three such). */
#include <stdlib.h>
#include <string.h>

#include "ops/op_table.h"
#include "util.h"

#define HUGE_SHIFT 40
#define ALL_SIZES 0 /* the mapping that makes every size above 1 huge */

static tn_dtype row_dtype(const tt_op *op) {
    static const tn_dtype pref[] = {TN_F32, TN_F64, TN_BF16, TN_F16,
                                    TN_I64, TN_I32, TN_I16,  TN_BOOL};
    for (size_t i = 0; i < sizeof pref / sizeof *pref; i++)
        if (op->dtypes & TT_DT(pref[i])) return pref[i];
    return TN_F32;
}

static bool all_empty(const tt_op *op, const tt_case *c) {
    for (int i = 0; i < op->arity; i++)
        if (tt_numel(c->ndim[i], c->shape[i]) != 0) return false;
    return op->arity > 0;
}

/* Size s under a mapping: ALL_SIZES, or the one size v made v * 2^k in [2^62, 2^63). */
static int64_t huge_size(int64_t s, int64_t v) {
    if (s <= 1) return s;
    if (v == ALL_SIZES) return s << HUGE_SHIFT;
    if (s != v) return s;
    while (s < ((int64_t)1 << 62))
        s <<= 1; /* into [2^62, 2^63): times 2 overflows */
    return s;
}

/* Input i of case c with its sizes mapped (huge_size), expanded from a tensor of zeros (a leaf
 * requiring grad when rg); NULL when the huge shape cannot be made. */
static tn_tensor *huge_input(const tt_case *c, int i, int64_t v, tn_dtype dt, bool rg) {
    int nd = c->ndim[i];
    int64_t base[TT_MAX_DIM], big[TT_MAX_DIM];
    for (int d = 0; d < nd; d++) {
        int64_t s = c->shape[i][d];
        base[d] = s == 0 ? 0 : 1;
        big[d] = huge_size(s, v);
    }
    tn_tensor *b = tn_zeros(nd, base, dt);
    if (!b || (rg && tn_requires_grad_(b, true) != TN_OK)) return NULL;
    return tn_expand(b, nd, big);
}

/* The mappings of case c: ALL_SIZES, then each distinct size above 1 (at most *n of them). */
static int mappings(const tt_op *op, const tt_case *c, int64_t *v, int n) {
    int k = 0;
    v[k++] = ALL_SIZES;
    for (int i = 0; i < op->arity; i++)
        for (int d = 0; d < c->ndim[i]; d++) {
            int64_t s = c->shape[i][d];
            bool seen = s <= 1;
            for (int j = 1; j < k && !seen; j++)
                seen = v[j] == s;
            if (!seen && k < n) v[k++] = s;
        }
    return k;
}

/* Runs op on case c with sizes mapped by v; false when the inputs could not be made. */
static bool run_case(const tt_op *op, const tt_case *c, int64_t v, int *refused) {
    const tn_dtype dt = row_dtype(op);
    const bool floating = dt == TN_F32 || dt == TN_F64 || dt == TN_BF16 || dt == TN_F16;
    tn_tensor *in[TT_MAX_IN] = {NULL};
    for (int i = 0; i < op->arity; i++) {
        tt_domain dom = op->domain[i];
        tn_dtype idt = dom == TT_MASK ? TN_BOOL : dom == TT_INDEX || dom == TT_TARGET ? TN_I64 : dt;
        bool rg = floating && (op->diff >> i & 1) && !(op->flags & TT_NO_GRAD) && idt == dt;
        in[i] = huge_input(c, i, v, idt, rg);
        if (!in[i]) return false;
    }
    tn_clear_error();
    tn_tensor *out = op->call(in, c->p);
    if (!out) {
        ++*refused;
        if (getenv("HUGE_EMPTY_VERBOSE"))
            print_message("%s [case %s, size %lld]: %s\n", op->name, c->tag, (long long)v,
                          tn_last_error());
        if (tn_last_status() >= 0 || !tn_last_error()[0])
            fail_msg("%s [case %s, size %lld]: NULL without an error", op->name, c->tag,
                     (long long)v);
        return true;
    }
    if (tn_numel(out) > 64)
        fail_msg("%s [case %s, size %lld]: a result of %lld elements", op->name, c->tag,
                 (long long)v, (long long)tn_numel(out));
    if (tn_requires_grad(out)) {
        tn_tensor *l = tn_sum(out);
        if (l && tn_backward(l, NULL, false) != TN_OK && !tn_last_error()[0])
            fail_msg("%s [case %s, size %lld]: backward failed without an error", op->name, c->tag,
                     (long long)v);
    }
    return true;
}

static int run_row(const tt_op *op, int *refused) {
    int ran = 0;
    for (int k = 0; k < op->ncases; k++) {
        const tt_case *c = &op->cases[k];
        if (!all_empty(op, c)) continue;
        int64_t v[1 + TT_MAX_IN * TT_MAX_DIM];
        for (int m = 0, nm = mappings(op, c, v, 1 + TT_MAX_IN * TT_MAX_DIM); m < nm; m++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            ran += run_case(op, c, v[m], refused);
            tn_scope_end();
        }
    }
    return ran;
}

static void huge_empty_inputs(void **state) {
    (void)state;
    int n, cases = 0, rows = 0, refused = 0;
    const tt_op *const *ops = tt_ops(&n);
    for (int i = 0; i < n; i++) {
        int r = run_row(ops[i], &refused);
        cases += r, rows += r > 0;
    }
    tn_clear_error();
    print_message("huge empty inputs: %d cases of %d rows (%d refused)\n", cases, rows, refused);
    assert_true(rows >= 30); /* the table's empty cases are many: this sweep must see them */
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(huge_empty_inputs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
