/* tests/test_vector_norm.c — linalg.vector_norm beyond the op table and the goldens: the
 * grad_fn, PyTorch 1.13's gradient at a zero norm and for ord 0, double backward, and the
 * error texts. */
#include "util.h"

#include <math.h>

static void grads_at_zero(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const double v[] = {0, 0, 0, 1, -2, 2};
    const double ords[] = {2, 1, INFINITY, -INFINITY, 3, 0.5, 1.5};
    /* d/dx of the row norms summed, the zero row first (PyTorch 1.13's values) */
    const double want[][3] = {{1.0 / 3, -2.0 / 3, 2.0 / 3}, {1, -1, 1}, {0, -0.5, 0.5},
                              {1, 0, 0}, {0.15125185251235962, -0.6050074100494385,
                                          0.6050074100494385},
                              {3.828427314758301, -2.707106828689575, 2.707106828689575},
                              {0.5315902233123779, -0.7517821192741394, 0.7517821192741394}};
    for (int k = 0; k < 7; k++) {
        tn_tensor *x = tt_f64(2, (const int64_t[]){2, 3}, v, true);
        tn_tensor *n = tn_vector_norm(x, ords[k], 1, (const int[]){1}, false);
        tt_assert_grad_fn(n, "LinalgVectorNormBackward0");
        assert_int_equal(tn_backward(tn_sum(n), NULL, false), TN_OK);
        tt_assert_grad(x, (const double[]){0, 0, 0, want[k][0], want[k][1], want[k][2]}, 6, 1e-6);
    }
    /* ord 0: no gradient at all */
    tn_tensor *x = tt_f64(2, (const int64_t[]){2, 3}, v, true);
    tn_tensor *n0 = tn_vector_norm(x, 0, 0, NULL, false);
    tt_assert_close(n0, (const double[]){3}, 1, 0);
    assert_int_equal(tn_backward(n0, NULL, false), TN_OK);
    assert_null(tn_grad(x));
    tn_clear_error();
    /* double backward of the 2-norm: d2/dx2 sum(|x|) at x = (3, 4) */
    tn_tensor *y = tt_f64(1, (const int64_t[]){2}, (const double[]){3, 4}, true);
    tn_tensor *g = NULL;
    tn_tensor *ny = tn_vector_norm(y, 2, 0, NULL, false);
    assert_int_equal(tn_autograd_grad(1, &ny, NULL, 1, &y, &g, true, true), TN_OK);
    tt_assert_close(g, (const double[]){0.6, 0.8}, 2, 1e-12);
    assert_int_equal(tn_backward(tn_sum(tn_mul(g, g)), NULL, false), TN_OK);
    tt_assert_grad(y, (const double[]){0, 0}, 2, 1e-12); /* |g| = 1 everywhere */
    tn_scope_end();
}

static void errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *i = tn_ones(1, (const int64_t[]){2}, TN_I64);
    assert_null(tn_vector_norm(i, 2, 0, NULL, false));
    tt_assert_error(TN_ERR_DTYPE, "linalg.vector_norm: Expected a floating point or complex tensor "
                                  "as input. Got Long");
    tn_clear_error();
    tn_tensor *e = tn_zeros(2, (const int64_t[]){0, 3}, TN_F32);
    assert_null(tn_vector_norm(e, INFINITY, 0, NULL, false));
    tt_assert_error(TN_ERR_INDEX, "linalg.vector_norm cannot compute the inf norm on an empty "
                                  "tensor because the operation does not have an identity");
    tn_clear_error();
    assert_null(tn_vector_norm(e, -INFINITY, 1, (const int[]){0}, false));
    tt_assert_error(TN_ERR_INDEX, "cannot compute the -inf norm on the dimension 0because");
    tn_clear_error();
    tt_assert_close(tn_vector_norm(e, INFINITY, 1, (const int[]){0 + 1}, false), NULL, 0, 0);
    assert_null(tn_vector_norm(e, 2, 2, (const int[]){0, -2}, false));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "dim 0 appears multiple times in the list of dims");
    tn_clear_error();
    assert_null(tn_vector_norm(e, 2, 1, (const int[]){2}, false));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-2, 1], but "
                                  "got 2)");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(grads_at_zero), TT_TEST(errors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
