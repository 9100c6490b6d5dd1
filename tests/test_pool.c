/* tests/test_pool.c — the pooling family beyond the op table (tests/ops/rows_pool.c, which checks
 * values, indices, gradients and the CUDA column): PyTorch 1.13's error texts for every refusal
 * (from /usr/bin/python3 with torch 1.13), the operand unchanged after one; the grad_fn names; the
 * indices' type and grad; double backward (the adjoint and the gather, zeros for x); the saved
 * input's version check; the same bits for any thread count. */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define T(dt, rg, k, ...)                                                                          \
    tt_filled(sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__}, dt, k, rg)
#define P2(a, b)                                                                                   \
    (int64_t[]) { a, b }


static tn_tensor *mp(const tn_tensor *x, int64_t k, int64_t s, int64_t p, int64_t d) {
    return tn_max_pool2d(x, P2(k, k), P2(s, s), P2(p, p), P2(d, d), false);
}

static void errors_max_pool2d(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F32, true, 0, 2, 3, 5, 5);
    int64_t v0 = tn_version(x);
    const char *rank = "non-empty 3D or 4D (batch mode) tensor expected for input";
    tt_assert_refused(mp(T(TN_F32, 0, 0, 3, 5), 2, 2, 0, 1), TN_ERR_SHAPE, rank);
    tt_assert_refused(mp(T(TN_F32, 0, 0, 1, 1, 3, 5, 5), 2, 2, 0, 1), TN_ERR_SHAPE, rank);
    tt_assert_refused(mp(x, 2, 2, 2, 1), TN_ERR_INVALID_ARGUMENT,
                   "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
    tt_assert_refused(tn_max_pool2d(x, P2(4, 2), NULL, P2(1, 2), NULL, false), TN_ERR_INVALID_ARGUMENT,
                   "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
    tt_assert_refused(mp(x, 2, 2, 3, 0), TN_ERR_INVALID_ARGUMENT,
                   "pad should be at most half of kernel size, but got pad=3 and kernel_size=2");
    tt_assert_refused(mp(x, 2, 0, 3, 1), TN_ERR_INVALID_ARGUMENT, "stride should not be zero");
    tt_assert_refused(tn_max_pool2d(x, P2(0, 0), NULL, NULL, NULL, false), TN_ERR_INVALID_ARGUMENT,
                   "stride should not be zero");
    tt_assert_refused(mp(x, 0, 1, 0, 1), TN_ERR_INVALID_ARGUMENT,
                   "kernel size should be greater than zero, but got kH: 0 kW: 0");
    tt_assert_refused(mp(x, -1, 1, 0, 1), TN_ERR_INVALID_ARGUMENT,
                   "kernel size should be greater than zero, but got kH: -1 kW: -1");
    tt_assert_refused(mp(x, 2, -1, 0, 1), TN_ERR_INVALID_ARGUMENT,
                   "stride should be greater than zero, but got dH: -1 dW: -1");
    tt_assert_refused(mp(x, 2, 2, 0, 0), TN_ERR_INVALID_ARGUMENT,
                   "dilation should be greater than zero, but got dilationH: 0 dilationW: 0");
    tt_assert_refused(mp(x, 2, 2, -1, 0), TN_ERR_INVALID_ARGUMENT,
                   "pad must be non-negative, but got pad: -1");
    tt_assert_refused(mp(T(TN_F32, 0, 0, 2, 0, 4, 4), 2, 2, 0, 1), TN_ERR_SHAPE,
                   "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                   "input, but got:[2, 0, 4, 4]");
    tt_assert_refused(mp(T(TN_F32, 0, 0, 0, 4, 4), 2, 2, 0, 1), TN_ERR_SHAPE,
                   "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                   "input, but got:[0, 4, 4]");
    tt_assert_refused(mp(T(TN_F32, 0, 0, 2, 3, 2, 2), 3, 3, 0, 1), TN_ERR_SHAPE,
                   "Given input size: (3x2x2). Calculated output size: (3x0x0). Output size is too "
                   "small");
    tt_assert_refused(mp(T(TN_F32, 0, 0, 3, 2, 7), 3, 3, 0, 1), TN_ERR_SHAPE,
                   "Given input size: (3x2x7). Calculated output size: (3x0x2). Output size is too "
                   "small");
    tt_assert_refused(mp(T(TN_I64, 0, 0, 1, 1, 4, 4), 2, 2, 0, 1), TN_ERR_DTYPE,
                   "\"max_pool2d\" not implemented for 'Long'");
    assert_non_null(mp(x, 2, 2, 0, 1)); /* a NULL after a failed call keeps its error */
    tt_assert_refused(mp(NULL, 2, 2, 0, 1), TN_ERR_INVALID_ARGUMENT,
                   "tn_max_pool2d: argument 'input' is NULL");
    tt_assert_refused(tn_max_pool2d(x, NULL, NULL, NULL, NULL, false), TN_ERR_INVALID_ARGUMENT,
                   "tn_max_pool2d: argument 'kernel_size' is NULL");
    tt_assert_refused(tn_max_pool2d_with_indices(x, P2(2, 2), NULL, NULL, NULL, false, NULL),
                   TN_ERR_INVALID_ARGUMENT,
                   "tn_max_pool2d_with_indices: argument 'indices' is NULL");
    tn_tensor *idx = x;
    tt_assert_refused(tn_max_pool2d_with_indices(x, P2(2, 2), NULL, P2(2, 2), NULL, false, &idx),
                   TN_ERR_INVALID_ARGUMENT,
                   "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
    assert_null(idx);
    tt_assert_refused(mp(x, (int64_t)1 << 40, 1, 0, 1), TN_ERR_INVALID_ARGUMENT,
                   "max_pool2d: sizes, kernel sizes, strides, paddings and dilations must be "
                   "below 2^31");
    assert_int_equal(tn_version(x), v0);
    tn_scope_end();
}

static tn_tensor *ap(const tn_tensor *x, int64_t k, int64_t s, int64_t p, int64_t div) {
    return tn_avg_pool2d(x, P2(k, k), P2(s, s), P2(p, p), false, true, div);
}

static void errors_avg_pool2d(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, true, 0, 2, 3, 5, 5);
    tt_assert_refused(ap(T(TN_F32, 0, 0, 3, 5), 2, 2, 0, 0), TN_ERR_INDEX,
                   "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    tt_assert_refused(ap(T(TN_F32, 0, 0, 5), 2, 2, 0, 0), TN_ERR_INDEX,
                   "Dimension out of range (expected to be in range of [-1, 0], but got -3)");
    tt_assert_refused(ap(T(TN_F32, 0, 0, 1, 2, 3, 5, 5), 2, 2, 0, 0), TN_ERR_SHAPE,
                   "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                   "input, but got:[1, 2, 3, 5, 5]");
    tt_assert_refused(ap(T(TN_F32, 0, 0, 2, 3, 0, 4), 2, 2, 0, 0), TN_ERR_SHAPE,
                   "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                   "input, but got:[2, 3, 0, 4]");
    tt_assert_refused(ap(x, 2, 2, 2, 0), TN_ERR_INVALID_ARGUMENT,
                   "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
    tt_assert_refused(ap(x, 2, 2, -3, 0), TN_ERR_INVALID_ARGUMENT,
                   "pad must be non-negative, but got pad: -3");
    tt_assert_refused(ap(x, 2, 0, 0, 0), TN_ERR_INVALID_ARGUMENT, "stride should not be zero");
    tt_assert_refused(ap(x, 0, 1, 0, 0), TN_ERR_INVALID_ARGUMENT,
                   "kernel size should be greater than zero, but got kH: 0 kW: 0");
    tt_assert_refused(ap(T(TN_F32, 0, 0, 3, 2, 2), 3, 3, 0, 0), TN_ERR_SHAPE,
                   "Given input size: (3x2x2). Calculated output size: (3x0x0). Output size is too "
                   "small");
    tt_assert_refused(ap(T(TN_I32, 0, 0, 1, 1, 4, 4), 2, 2, 0, 0), TN_ERR_DTYPE,
                   "\"avg_pool2d\" not implemented for 'Int'");
    tt_assert_refused(tn_avg_pool2d(x, NULL, NULL, NULL, false, true, 0), TN_ERR_INVALID_ARGUMENT,
                   "tn_avg_pool2d: argument 'kernel_size' is NULL");
    /* a negative divisor divides, as PyTorch's */
    tn_tensor *y = ap(T(TN_F64, 0, 0, 1, 1, 2, 2), 2, 2, 0, -2);
    double v = 0, want = -(sin(0) + sin(0.37) + sin(0.74) + sin(1.11)) / 2;
    assert_int_equal(tn_item(y, &v), TN_OK);
    assert_true(fabs(v - want) < 1e-15);
    tn_scope_end();
}

static void errors_adaptive(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F32, true, 0, 2, 3, 5, 5);
    tt_assert_refused(tn_adaptive_avg_pool2d(x, P2(-1, 2)), TN_ERR_INVALID_ARGUMENT,
                   "adaptive_avg_pool2d: elements of output_size must be greater than or equal "
                   "to 0 but received {-1, 2}");
    tt_assert_refused(tn_adaptive_avg_pool2d(T(TN_F32, 0, 0, 3, 5), P2(2, 2)), TN_ERR_SHAPE,
                   "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [3, 5]");
    tt_assert_refused(tn_adaptive_avg_pool2d(T(TN_F32, 0, 0, 2, 3, 0, 4), P2(2, 2)), TN_ERR_SHAPE,
                   "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                   "dimensions, but input has sizes [2, 3, 0, 4] with dimension 2 being empty");
    tt_assert_refused(tn_adaptive_avg_pool2d(T(TN_I64, 0, 0, 1, 1, 4, 4), P2(2, 2)), TN_ERR_DTYPE,
                   "\"adaptive_avg_pool2d\" not implemented for 'Long'");
    tt_assert_refused(tn_adaptive_max_pool2d(T(TN_F32, 0, 0, 3, 5), P2(2, 2)), TN_ERR_SHAPE,
                   "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: [3, 5]");
    tt_assert_refused(tn_adaptive_max_pool2d(T(TN_F32, 0, 0, 2, 0, 4, 4), P2(2, 2)), TN_ERR_SHAPE,
                   "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch "
                   "dimensions, but input has sizes [2, 0, 4, 4] with dimension 1 being empty");
    tt_assert_refused(tn_adaptive_max_pool2d(x, P2(-1, 2)), TN_ERR_SHAPE,
                   "Trying to create tensor with negative dimension -1: [2, 3, -1, 2]");
    tt_assert_refused(tn_adaptive_max_pool2d(T(TN_F32, 0, 0, 3, 4, 4), P2(-1, 2)), TN_ERR_SHAPE,
                   "Trying to create tensor with negative dimension -1: [3, -1, 2]");
    tt_assert_refused(tn_adaptive_max_pool2d(T(TN_I16, 0, 0, 1, 1, 4, 4), P2(2, 2)), TN_ERR_DTYPE,
                   "\"adaptive_max_pool2d\" not implemented for 'Short'");
    tt_assert_refused(tn_adaptive_max_pool2d(x, NULL), TN_ERR_INVALID_ARGUMENT,
                   "tn_adaptive_max_pool2d: argument 'output_size' is NULL");
    /* accepted: an unbatched empty C (max), an empty C (average), a (1, 1) output of any rank */
    tn_tensor *y = tn_adaptive_max_pool2d(T(TN_F32, 0, 0, 0, 4, 4), P2(2, 2));
    assert_non_null(y);
    assert_int_equal(tn_shape(y)[0], 0);
    assert_non_null(tn_adaptive_avg_pool2d(T(TN_F32, 0, 0, 2, 0, 4, 4), P2(2, 2)));
    y = tn_adaptive_avg_pool2d(T(TN_F32, true, 0, 3, 5), P2(1, 1));
    assert_non_null(y);
    assert_int_equal(tn_ndim(y), 2);
    tt_assert_grad_fn(y, "MeanBackward1");
    tn_scope_end();
}

static void names_and_indices(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, true, 0, 1, 2, 4, 4), *idx = NULL;
    tn_tensor *y = tn_max_pool2d_with_indices(x, P2(2, 2), NULL, NULL, NULL, false, &idx);
    tt_assert_grad_fn(y, "MaxPool2DWithIndicesBackward0");
    assert_non_null(idx);
    assert_int_equal(tn_dtype_of(idx), TN_I64);
    assert_false(tn_requires_grad(idx));
    tt_assert_grad_fn(tn_avg_pool2d(x, P2(2, 2), NULL, NULL, false, true, 0), "AvgPool2DBackward0");
    tt_assert_grad_fn(tn_adaptive_avg_pool2d(x, P2(3, 2)), "AdaptiveAvgPool2DBackward0");
    tt_assert_grad_fn(tn_adaptive_max_pool2d(x, P2(3, 2)), "AdaptiveMaxPool2DBackward0");
    tt_assert_grad_fn(
        tn_max_pool2d(T(TN_F64, false, 0, 1, 2, 4, 4), P2(2, 2), NULL, NULL, NULL, false), NULL);
    tn_tensor *gx = NULL, *s = tn_sum(y);
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &x, &gx, false, true), TN_OK);
    tt_assert_grad_fn(gx, "MaxPool2DWithIndicesBackwardBackward0");
    s = tn_sum(tn_adaptive_avg_pool2d(x, P2(3, 2)));
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &x, &gx, false, true), TN_OK);
    tt_assert_grad_fn(gx, "AdaptiveAvgPool2DBackwardBackward0");
    tn_scope_end();
}

/* The pooled x's gradient for the output gradient u, with create_graph; then d/du of
 * sum(gx * v), which must be the adjoint: avg_pool(v) for average, v at the indices for max,
 * and d/dx of it zeros (PyTorch's). */
static void double_backward(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, true, 0, 2, 2, 7, 6), *v = T(TN_F64, false, 3, 2, 2, 7, 6);
    for (int family = 0; family < 3; family++) {
        tn_tensor *idx = NULL, *y;
        if (family == 0)
            y = tn_max_pool2d_with_indices(x, P2(3, 2), P2(2, 1), P2(1, 0), P2(2, 1), true, &idx);
        else if (family == 1)
            y = tn_avg_pool2d(x, P2(3, 2), P2(2, 1), P2(1, 1), true, false, 0);
        else
            y = tn_adaptive_avg_pool2d(x, P2(4, 5));
        tn_tensor *u = tn_detach(tn_cos(y));
        assert_int_equal(tn_requires_grad_(u, true), TN_OK);
        tn_tensor *l = tn_sum(tn_mul(y, u)), *gx = NULL;
        assert_int_equal(tn_autograd_grad(1, &l, NULL, 1, &x, &gx, false, true), TN_OK);
        tn_tensor *s = tn_sum(tn_mul(gx, v)), *g2[2] = {0};
        assert_int_equal(tn_autograd_grad(1, &s, NULL, 2, (tn_tensor *[]){u, x}, g2, false, false),
                         TN_OK);
        tn_tensor *want;
        if (family == 0)
            want = tn_reshape(tn_gather(tn_reshape(v, 2, P2(4, 42)), 1,
                                        tn_reshape(idx, 2, P2(4, tn_numel(idx) / 4))),
                              4, tn_shape(y));
        else if (family == 1)
            want = tn_avg_pool2d(v, P2(3, 2), P2(2, 1), P2(1, 1), true, false, 0);
        else
            want = tn_adaptive_avg_pool2d(v, P2(4, 5));
        int64_t n = tn_numel(want);
        double *w = malloc((size_t)n * sizeof *w);
        assert_int_equal(tn_copy_to_f64(want, w, n), TN_OK);
        tt_assert_close(g2[0], w, n, 1e-12);
        free(w);
        double z = 1;
        assert_int_equal(tn_item(tn_sum(tn_abs(g2[1])), &z), TN_OK);
        assert_true(z == 0);
    }
    tn_scope_end();
}

/* Backward checks the saved input's version, as PyTorch does (it saves self). */
static void saved_input_version(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, true, 0, 1, 1, 4, 4);
    tn_tensor *z = tn_mul_scalar(x, 1), *y = tn_avg_pool2d(z, P2(2, 2), NULL, NULL, false, true, 0);
    assert_int_equal(tn_add_scalar_(z, 1), TN_OK);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "which is output 0 of AddBackward0, is at version 1; expected "
                    "version 0 instead");
    tn_scope_end();
}

/* max and average pooling's values and input gradients with nt op threads (n values). */
static double *run_with_threads(int nt, int64_t *n) {
    tn_set_num_threads(nt);
    tn_tensor *x = T(TN_F32, true, 0, 8, 16, 30, 30);
    tn_tensor *y[3] = {
        tn_max_pool2d(x, P2(3, 3), P2(2, 2), P2(1, 1), NULL, true),
        tn_avg_pool2d(x, P2(3, 3), P2(2, 2), P2(1, 1), true, false, 0),
        tn_adaptive_avg_pool2d(x, P2(7, 9)),
    };
    tn_tensor *all[6];
    for (int i = 0; i < 3; i++) {
        tn_tensor *g = tn_sin(y[i]);
        all[2 * i] = y[i];
        assert_int_equal(tn_autograd_grad(1, &y[i], &g, 1, &x, &all[2 * i + 1], false, false),
                         TN_OK);
    }
    *n = 0;
    for (int i = 0; i < 6; i++)
        *n += tn_numel(all[i]);
    double *v = malloc((size_t)*n * sizeof *v), *p = v;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(tn_copy_to_f64(all[i], p, tn_numel(all[i])), TN_OK);
        p += tn_numel(all[i]);
    }
    return v;
}

static void same_bits_any_thread_count(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    int keep = tn_get_num_threads();
    int64_t n1, n4;
    double *a = run_with_threads(1, &n1), *b = run_with_threads(4, &n4);
    tn_set_num_threads(keep);
    assert_int_equal(n1, n4);
    assert_memory_equal(a, b, (size_t)n1 * sizeof *a);
    free(a);
    free(b);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(errors_max_pool2d),
        TT_TEST(errors_avg_pool2d),
        TT_TEST(errors_adaptive),
        TT_TEST(names_and_indices),
        TT_TEST(double_backward),
        TT_TEST(saved_input_version),
        TT_TEST(same_bits_any_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
