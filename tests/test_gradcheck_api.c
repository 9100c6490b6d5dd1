/* tests/test_gradcheck_api.c — the public tn_gradcheck / tn_gradgradcheck (tenet/testing.h):
 * they pass on correct ops (one and several inputs, inputs that need no grad), report a wrong
 * custom backward in PyTorch's words, and leave the caller's tensors as they were. */
#include "util.h"

#include <math.h>
#include <tenet/testing.h>

/* x * y + sin(x), summed along the last dim */
static tn_tensor *f_ok(tn_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx;
    return tn_sum_dim(tn_add(tn_mul(x[0], x[1]), tn_sin(x[0])), -1, false);
}

/* a custom function x^2 whose backward is wrong by a factor 2 */
static int sq_fw(tn_function_ctx *c, int n_in, tn_tensor *const *in, int n_out, tn_tensor **out) {
    (void)n_in, (void)n_out;
    out[0] = tn_mul(in[0], in[0]);
    return out[0] ? tn_function_save_for_backward(c, 1, in) : tn_last_status();
}
static int sq_bw(tn_function_ctx *c, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    (void)n_out, (void)n_in;
    tn_tensor *x, *t;
    tn_status st = tn_function_saved_tensors(c, 1, &x);
    if (st < 0) return st;
    t = tn_mul(go[0], x);
    gi[0] = t ? tn_mul_scalar(t, 4) : NULL; /* should be 2 */
    tn_release(t), tn_release(x);
    return gi[0] ? 1 : tn_last_status();
}
static const tn_function bad_square = {.name = "BadSquareBackward", .forward = sq_fw,
                                       .backward = sq_bw};
static tn_tensor *f_custom(tn_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx;
    return tn_function_apply1(&bad_square, 1, x);
}
static tn_tensor *f_null(tn_tensor *const *x, int n, void *ctx) {
    (void)x, (void)n, (void)ctx;
    return NULL;
}

static void passes(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f64(2, (const int64_t[]){2, 3}, (const double[]){0.1, -0.5, 1, 2, -1.5, 0.3}, true);
    tn_tensor *y = tt_f64(2, (const int64_t[]){2, 3}, (const double[]){1, 2, 3, -1, 0.5, 0.25}, false);
    int64_t v0 = tn_version(x);
    assert_int_equal(tn_gradcheck(f_ok, NULL, 2, (tn_tensor *[]){x, y}, 1e-6, 1e-5, 1e-3), TN_OK);
    assert_int_equal(tn_requires_grad_(y, true), TN_OK);
    assert_int_equal(tn_gradcheck(f_ok, NULL, 2, (tn_tensor *[]){x, y}, 1e-6, 1e-5, 1e-3), TN_OK);
    assert_int_equal(tn_gradgradcheck(f_ok, NULL, 2, (tn_tensor *[]){x, y}, 1e-6, 1e-5, 1e-3), TN_OK);
    assert_int_equal(tn_version(x), v0);
    assert_null(tn_grad(x)); /* nothing accumulated */
    tn_scope_end();
}

static void reports(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f64(1, (const int64_t[]){2}, (const double[]){1, 2}, true);
    tn_tensor *c = tt_f64(1, (const int64_t[]){2}, (const double[]){1, 2}, false);
    assert_int_equal(tn_gradcheck(f_ok, NULL, 2, (tn_tensor *[]){c, c}, 1e-6, 1e-5, 1e-3),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "gradcheck expects at least one input tensor to "
                                             "require gradient");
    assert_int_equal(tn_gradcheck(f_custom, NULL, 1, &x, 1e-6, 1e-5, 1e-3), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "Jacobian mismatch for output 0 with respect to input 0,\n"
                                     "numerical:tensor([[2.0000, 0.0000],\n        [0.0000, 4.0000]]");
    tt_assert_error(TN_ERR_AUTOGRAD, "\nanalytical:tensor([[4., 0.],\n        [0., 8.]]");
    assert_int_equal(tn_gradcheck(f_null, NULL, 1, &x, 1e-6, 1e-5, 1e-3), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "gradcheck: the function returned NULL");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(passes), TT_TEST(reports)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
