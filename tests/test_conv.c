/* tests/test_conv.c — conv2d, conv1d, conv_transpose2d and conv_transpose1d beyond the op table
 * (tests/ops/rows_conv.c, which checks values, gradients and the CUDA column): PyTorch 1.13's error
 * texts for every refusal (from /usr/bin/python3 with torch 1.13), nothing leaked and the operands
 * unchanged after one; the grad_fn names; second derivatives against finite differences of the
 * first; float32 against float64 on a larger case that takes several column chunks; the same bits
 * for any thread count. */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define T(dt, rg, k, ...)                                                                          \
    tt_filled(sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__}, dt, k, rg)


static void errors_conv2d(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F32, true, 0, 1, 3, 5, 5), *w = T(TN_F32, true, 1, 2, 3, 3, 3);
    int64_t one[2] = {1, 1}, zero[2] = {0, 0}, s2[2] = {2, 2};
    int64_t v0 = tn_version(x), v1 = tn_version(w);
    tt_assert_refused(
        tn_conv2d(T(TN_F32, 0, 0, 2, 3), w, NULL, one, zero, one, 1), TN_ERR_SHAPE,
        "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
        "[2, 3]");
    tt_assert_refused(tn_conv2d(x, T(TN_F32, 0, 0, 2, 3), NULL, one, zero, one, 1), TN_ERR_SHAPE,
                   "weight should have at least three dimensions");
    tt_assert_refused(tn_conv2d(x, T(TN_F32, 0, 0, 2, 3, 3), NULL, one, zero, one, 1), TN_ERR_SHAPE,
                   "expected stride to be a single integer value or a list of 1 values to match "
                   "the convolution dimensions, but got stride=[1, 1]");
    tt_assert_refused(tn_conv2d_mode(x, T(TN_F32, 0, 0, 2, 3, 3), NULL, s2, TN_CONV_PAD_SAME, one, 1),
                   TN_ERR_SHAPE,
                   "Expected 3-dimensional input for 3-dimensional weight[2, 3, 3], but got "
                   "4-dimensional input of size [1, 3, 5, 5] instead");
    tt_assert_refused(tn_conv2d(T(TN_F32, 0, 0, 1, 4, 5, 5), w, NULL, one, zero, one, 1), TN_ERR_SHAPE,
                   "Given groups=1, weight of size [2, 3, 3, 3], expected input[1, 4, 5, 5] to "
                   "have 3 channels, but got 4 channels instead");
    tt_assert_refused(tn_conv2d(T(TN_F32, 0, 0, 4, 5, 5), w, NULL, one, zero, one, 1), TN_ERR_SHAPE,
                   "Given groups=1, weight of size [2, 3, 3, 3], expected input[1, 4, 5, 5] to "
                   "have 3 channels, but got 4 channels instead");
    tn_tensor *x4 = T(TN_F32, 0, 0, 1, 4, 5, 5);
    tt_assert_refused(tn_conv2d(x4, T(TN_F32, 0, 0, 3, 2, 3, 3), NULL, one, zero, one, 2),
                   TN_ERR_SHAPE,
                   "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got "
                   "weight of size [[3, 2, 3, 3]] instead");
    tt_assert_refused(tn_conv2d(x4, T(TN_F32, 0, 0, 1, 1, 3, 3), NULL, one, zero, one, 4),
                   TN_ERR_SHAPE,
                   "Given groups=4, expected weight to be at least 4 at dimension 0, but got "
                   "weight of size [1, 1, 3, 3] instead");
    tt_assert_refused(tn_conv2d(x, w, NULL, one, zero, one, 0), TN_ERR_INVALID_ARGUMENT,
                   "non-positive groups is not supported");
    tt_assert_refused(tn_conv2d(T(TN_F32, 0, 0, 1, 3, 2, 5), w, NULL, one, zero, one, 1), TN_ERR_SHAPE,
                   "Calculated padded input size per channel: (2 x 5). Kernel size: (3 x 3). "
                   "Kernel size can't be greater than actual input size");
    tt_assert_refused(tn_conv2d(x, w, NULL, (int64_t[]){1, 0}, zero, one, 1), TN_ERR_INVALID_ARGUMENT,
                   "non-positive stride is not supported");
    tt_assert_refused(tn_conv2d(x, w, NULL, one, (int64_t[]){0, -1}, one, 1), TN_ERR_INVALID_ARGUMENT,
                   "negative padding is not supported");
    tt_assert_refused(tn_conv2d(x, w, NULL, one, zero, zero, 1), TN_ERR_INVALID_ARGUMENT,
                   "dilation should be greater than zero, but got [0, 0]");
    tt_assert_refused(tn_conv2d_mode(x, w, NULL, s2, TN_CONV_PAD_SAME, one, 1),
                   TN_ERR_INVALID_ARGUMENT,
                   "padding='same' is not supported for strided convolutions");
    tt_assert_refused(tn_conv2d(x, w, T(TN_F32, 0, 0, 3), one, zero, one, 1), TN_ERR_SHAPE,
                   "Given weight of size [2, 3, 3, 3], expected bias to be 1-dimensional with 2 "
                   "elements, but got bias of size [3] instead");
    tt_assert_refused(tn_conv2d(x, w, T(TN_F64, 0, 0, 2), one, zero, one, 1), TN_ERR_DTYPE,
                   "Input type (float) and bias type (double) should be the same");
    tt_assert_refused(tn_conv2d(x, T(TN_F64, 0, 0, 2, 3, 3, 3), NULL, one, zero, one, 1), TN_ERR_DTYPE,
                   "expected scalar type Float but found Double");
    tt_assert_refused(tn_conv2d(T(TN_F32, 0, 0, 1, 3, 0, 5), w, NULL, one, (int64_t[]){2, 2}, one, 1),
                   TN_ERR_SHAPE,
                   "Only zero batch or zero channel inputs are supported, but got input shape: "
                   "[1, 3, 0, 5]");
    tt_assert_refused(tn_conv2d(tn_to(x, TN_I64, TN_DEVICE_CPU), tn_to(w, TN_I64, TN_DEVICE_CPU), NULL,
                             one, zero, one, 1),
                   TN_ERR_DTYPE, "\"slow_conv2d_cpu\" not implemented for 'Long'");
    tn_clear_error();
    tt_assert_refused(tn_conv2d(NULL, w, NULL, one, zero, one, 1), TN_ERR_INVALID_ARGUMENT,
                   "tn_conv2d: argument 'input' is NULL");
    tn_clear_error();
    tt_assert_refused(tn_conv1d_mode(x, NULL, NULL, 1, TN_CONV_PAD_SAME, 1, 1),
                   TN_ERR_INVALID_ARGUMENT, "tn_conv1d_mode: argument 'weight' is NULL");
    /* the operands are unchanged and nothing was left behind */
    assert_int_equal(tn_version(x), v0);
    assert_int_equal(tn_version(w), v1);
    assert_null(tn_grad_fn_name(x));
    tn_scope_end();
}

static void errors_conv1d(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, false, 0, 1, 3, 5), *w = T(TN_F64, false, 1, 2, 3, 3);
    tt_assert_refused(
        tn_conv1d(T(TN_F64, 0, 0, 3), w, NULL, 1, 0, 1, 1), TN_ERR_SHAPE,
        "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
        "[3]");
    tt_assert_refused(tn_conv1d(T(TN_F64, 0, 0, 4, 5), w, NULL, 1, 0, 1, 1), TN_ERR_SHAPE,
                   "Given groups=1, weight of size [2, 3, 3], expected input[1, 4, 5] to have 3 "
                   "channels, but got 4 channels instead");
    tt_assert_refused(tn_conv1d(T(TN_F64, 0, 0, 1, 3, 2), w, NULL, 1, 0, 1, 1), TN_ERR_SHAPE,
                   "Calculated padded input size per channel: (2). Kernel size: (3). Kernel size "
                   "can't be greater than actual input size");
    tt_assert_refused(tn_conv1d(x, T(TN_F64, 0, 0, 2, 3, 3, 3), NULL, 1, 0, 1, 1), TN_ERR_SHAPE,
                   "Expected 4-dimensional input for 4-dimensional weight [2, 3, 3, 3], but got "
                   "3-dimensional input of size [1, 3, 5] instead");
    tt_assert_refused(tn_conv1d(x, w, NULL, 1, 0, 0, 1), TN_ERR_INVALID_ARGUMENT,
                   "dilation should be greater than zero, but got [1, 0]");
    tt_assert_refused(tn_conv1d_mode(x, w, NULL, 2, TN_CONV_PAD_SAME, 1, 1), TN_ERR_INVALID_ARGUMENT,
                   "padding='same' is not supported for strided convolutions");
    tt_assert_refused(tn_conv1d(x, w, NULL, 0, 0, 1, 1), TN_ERR_INVALID_ARGUMENT,
                   "non-positive stride is not supported");
    tt_assert_refused(tn_conv1d(x, w, NULL, 1, -2, 1, 1), TN_ERR_INVALID_ARGUMENT,
                   "negative padding is not supported");
    tt_assert_refused(tn_conv1d_mode(x, w, NULL, 1, (tn_conv_padding)7, 1, 1), TN_ERR_INVALID_ARGUMENT,
                   "Invalid padding: conv1d takes TN_CONV_PAD_VALID or TN_CONV_PAD_SAME");
    tn_scope_end();
}

static void errors_conv_transpose(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F32, true, 0, 2, 4, 5, 5), *w = T(TN_F32, true, 1, 4, 3, 3, 3);
    tn_tensor *b = T(TN_F32, true, 2, 3);
    int64_t one[2] = {1, 1}, zero[2] = {0, 0}, s2[2] = {2, 2};
    int64_t v0 = tn_version(x), v1 = tn_version(w);
    tt_assert_refused(tn_conv_transpose2d(T(TN_F32, 0, 0, 2, 3), w, b, one, zero, zero, 1, one),
                      TN_ERR_SHAPE,
                      "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got "
                      "input of size: [2, 3]");
    tt_assert_refused(tn_conv_transpose2d(x, w, b, s2, zero, s2, 1, one), TN_ERR_INVALID_ARGUMENT,
                      "output padding must be smaller than either stride or dilation, but got "
                      "output_padding_height: 2 output_padding_width: 2 stride_height: 2 "
                      "stride_width: 2 dilation_height: 1 dilation_width: 1");
    tt_assert_refused(tn_conv_transpose2d(x, w, b, one, zero, (int64_t[]){0, -1}, 1, one),
                      TN_ERR_INVALID_ARGUMENT, "negative output_padding is not supported");
    tt_assert_refused(tn_conv_transpose2d(x, w, b, one, zero, zero, 1, zero),
                      TN_ERR_INVALID_ARGUMENT,
                      "dilation should be greater than zero, but got dilation_height: 0, "
                      "dilation_width: 0");
    tt_assert_refused(
        tn_conv_transpose2d(x, T(TN_F32, 0, 0, 5, 3, 3, 3), b, one, zero, zero, 1, one),
        TN_ERR_SHAPE,
        "Given transposed=1, weight of size [5, 3, 3, 3], expected input[2, 4, 5, "
        "5] to have 5 channels, but got 4 channels instead");
    tt_assert_refused(tn_conv_transpose2d(x, w, T(TN_F32, 0, 0, 4), one, zero, zero, 1, one),
                      TN_ERR_SHAPE,
                      "Given transposed=1, weight of size [4, 3, 3, 3], expected bias to be "
                      "1-dimensional with 3 elements, but got bias of size [4] instead");
    tt_assert_refused(tn_conv_transpose2d(x, w, NULL, one, zero, zero, 3, one), TN_ERR_SHAPE,
                      "Given groups=3, expected weight to be divisible by 3 at dimension 0, but "
                      "got weight of size [[4, 3, 3, 3]] instead");
    tt_assert_refused(
        tn_conv_transpose2d(x, T(TN_F32, 0, 0, 4, 3, 0, 3), b, one, zero, zero, 1, one),
        TN_ERR_SHAPE,
        "kernel size should be greater than zero, but got kernel_height: 0 "
        "kernel_width: 3");
    tt_assert_refused(
        tn_conv_transpose2d(x, T(TN_F32, 0, 0, 4, 0, 3, 3), NULL, one, zero, zero, 1, one),
        TN_ERR_SHAPE, "non-empty 2D or 4D weight tensor expected, but got: [4, 0, 3, 3]");
    tt_assert_refused(tn_conv_transpose2d(T(TN_F32, 0, 0, 2, 4, 4, 4), w, b, one, (int64_t[]){3, 3},
                                          zero, 1, one),
                      TN_ERR_SHAPE,
                      "Given input size per channel: (4 x 4). Calculated output size per "
                      "channel: (0 x 0). Output size is too small");
    tt_assert_refused(tn_conv_transpose2d(x, w, T(TN_F64, 0, 0, 3), one, zero, zero, 1, one),
                      TN_ERR_DTYPE, "expected scalar type Float but found Double");
    tt_assert_refused(tn_conv_transpose2d(tn_to(x, TN_I32, TN_DEVICE_CPU),
                                          tn_to(w, TN_I32, TN_DEVICE_CPU), NULL, one, zero, zero, 1,
                                          one),
                      TN_ERR_DTYPE, "\"slow_conv_transpose2d_out_cpu\" not implemented for 'Int'");
    tt_assert_refused(tn_conv_transpose1d(T(TN_F32, 0, 0, 2, 4, 5), T(TN_F32, 0, 0, 4, 3, 3), NULL,
                                          1, 0, 0, 1, 0),
                      TN_ERR_INVALID_ARGUMENT,
                      "dilation should be greater than zero, but got dilation_height: 1, "
                      "dilation_width: 0");
    tt_assert_refused(tn_conv_transpose1d(T(TN_F32, 0, 0, 2, 4, 4), T(TN_F32, 0, 0, 4, 3, 3), NULL,
                                          1, 3, 0, 1, 1),
                      TN_ERR_SHAPE,
                      "Given input size per channel: (1 x 4). Calculated output size per "
                      "channel: (1 x 0). Output size is too small");
    tn_clear_error();
    tt_assert_refused(tn_conv_transpose1d(NULL, w, NULL, 1, 0, 0, 1, 1), TN_ERR_INVALID_ARGUMENT,
                      "tn_conv_transpose1d: argument 'input' is NULL");
    /* an empty batch skips PyTorch's kernel checks */
    tn_tensor *e = tn_conv_transpose2d(T(TN_F32, 0, 0, 0, 4, 5, 5), w, b, one, zero, one, 1, one);
    assert_non_null(e);
    assert_int_equal(tn_shape(e)[2], 8);
    assert_int_equal(tn_version(x), v0);
    assert_int_equal(tn_version(w), v1);
    assert_null(tn_grad_fn_name(x));
    tn_scope_end();
}

/* conv_transpose2d(g, w) is conv2d's input gradient for g, to the bit; its own gradients and
 * grad_fn. */
/* Sizes and parameters of 2^31 and above are refused before any arithmetic on them (the node
 * keeps 32-bit fields): huge dilations, strides and paddings, 'same' padding of a huge dilation,
 * an empty weight with huge sizes and groups. Under UBSan (asan preset) none overflows on the
 * way, which each of these did before. */
static void huge_parameters(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t big = (int64_t)1 << 62, one[2] = {1, 1}, zero[2] = {0, 0};
    const char *msg = "conv: sizes, strides, paddings and dilations must be below 2^31";
    tn_tensor *x = T(TN_F32, true, 0, 1, 1, 4, 4), *w = T(TN_F32, true, 1, 1, 1, 3, 3);
    tt_assert_refused(tn_conv2d(x, w, NULL, one, zero, (int64_t[]){big, 1}, 1),
                      TN_ERR_INVALID_ARGUMENT, msg);
    tt_assert_refused(tn_conv2d(x, w, NULL, (int64_t[]){big, 1}, (int64_t[]){big, 0}, one, 1),
                      TN_ERR_INVALID_ARGUMENT, msg);
    tt_assert_refused(tn_conv2d_mode(x, w, NULL, one, TN_CONV_PAD_SAME, (int64_t[]){big, 1}, 1),
                      TN_ERR_INVALID_ARGUMENT, msg);
    tt_assert_refused(
        tn_conv1d(T(TN_F32, 0, 0, 1, 1, 4), T(TN_F32, 0, 0, 1, 1, 3), NULL, 1, 0, big, 1),
        TN_ERR_INVALID_ARGUMENT, msg);
    tt_assert_refused(tn_conv_transpose2d(x, w, NULL, (int64_t[]){big, 1}, NULL, NULL, 1, NULL),
                      TN_ERR_INVALID_ARGUMENT, msg);
    tt_assert_refused(tn_conv_transpose2d(x, w, NULL, NULL, (int64_t[]){big, 0}, NULL, 1, NULL),
                      TN_ERR_INVALID_ARGUMENT, msg);
    /* an empty weight of huge sizes: its channels times the groups overflowed */
    const int64_t g = (int64_t)1 << 40;
    tn_tensor *we =
        tn_expand(tn_zeros(4, (int64_t[]){1, 1, 0, 1}, TN_F32), 4, (int64_t[]){g, g, 0, 3});
    tt_assert_refused(tn_conv2d(T(TN_F32, 0, 0, 1, 5, 4, 4), we, NULL, one, zero, one, g),
                      TN_ERR_INVALID_ARGUMENT, msg);
    tn_tensor *xe =
        tn_expand(tn_zeros(4, (int64_t[]){1, 1, 4, 4}, TN_F32), 4, (int64_t[]){1, g, 4, 4});
    tt_assert_refused(tn_conv_transpose2d(xe, we, T(TN_F32, 0, 0, 3), NULL, NULL, NULL, g, NULL),
                      TN_ERR_INVALID_ARGUMENT, msg);
    assert_null(tn_grad_fn_name(x));
    tn_scope_end();
}

static void transpose_is_input_gradient(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t st[2] = {2, 1}, pd[2] = {1, 0}, dl[2] = {1, 2}, op[2] = {1, 0};
    tn_tensor *x = T(TN_F64, true, 0, 2, 4, 8, 7), *w = T(TN_F64, true, 1, 6, 2, 3, 2);
    tn_tensor *y = tn_conv2d(x, w, NULL, st, pd, dl, 2); /* (2, 6, 4, 5) */
    tn_tensor *g = T(TN_F64, true, 2, 2, 6, 4, 5), *gx = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, &g, 1, &x, &gx, false, false), TN_OK);
    tn_tensor *t = tn_conv_transpose2d(g, w, NULL, st, pd, op, 2, dl);
    assert_non_null(t);
    tt_assert_grad_fn(t, "ConvolutionBackward0");
    assert_int_equal(tn_numel(t), tn_numel(gx));
    double a[448], b[448];
    assert_int_equal(tn_copy_to_f64(t, a, 448), TN_OK);
    assert_int_equal(tn_copy_to_f64(gx, b, 448), TN_OK);
    assert_memory_equal(a, b, sizeof a);
    /* create_graph: the gradients are recorded primitives */
    tn_tensor *s = tn_sum(tn_mul(t, tn_sin(t))), *gg = NULL;
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &g, &gg, false, true), TN_OK);
    tt_assert_grad_fn(gg, "ConvolutionBackwardBackward0");
    tn_scope_end();
}

static void grad_fn_names(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, true, 0, 2, 3, 5, 5), *w = T(TN_F64, true, 1, 2, 3, 3, 3);
    tt_assert_grad_fn(tn_conv2d(x, w, NULL, NULL, NULL, NULL, 1), "ConvolutionBackward0");
    tt_assert_grad_fn(
        tn_conv1d(T(TN_F64, true, 0, 2, 3, 5), T(TN_F64, false, 1, 2, 3, 3), NULL, 1, 0, 1, 1),
        "ConvolutionBackward0");
    tt_assert_grad_fn(tn_conv2d(T(TN_F64, false, 0, 2, 3, 5, 5), T(TN_F64, false, 1, 2, 3, 3, 3),
                                NULL, NULL, NULL, NULL, 1),
                      NULL);
    /* create_graph: the input gradient has a history of its own */
    tn_tensor *y = tn_sum(tn_conv2d(x, w, NULL, NULL, NULL, NULL, 1));
    tn_tensor *gx = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &gx, false, true), TN_OK);
    tt_assert_grad_fn(gx, "ConvolutionBackwardBackward0");
    tn_scope_end();
}

/* d/dw of sum(dL/dx * v) by central differences against double backward, for
 * L = sum(conv(x, w) * u): a second derivative that crosses the primitives. */
static double mixed(tn_tensor *x, tn_tensor *w, tn_tensor *u, tn_tensor *v) {
    tn_tensor *y = tn_sum(tn_mul(
        tn_conv2d(x, w, NULL, (int64_t[]){2, 1}, (int64_t[]){1, 0}, (int64_t[]){1, 2}, 1), u));
    tn_tensor *gx = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &gx, false, true), TN_OK);
    double r = 0;
    assert_int_equal(tn_item(tn_sum(tn_mul(gx, v)), &r), TN_OK);
    return r;
}

static void double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, true, 0, 2, 2, 5, 6), *w = T(TN_F64, true, 1, 3, 2, 3, 2);
    tn_tensor *y0 =
        tn_conv2d(x, w, NULL, (int64_t[]){2, 1}, (int64_t[]){1, 0}, (int64_t[]){1, 2}, 1);
    tn_tensor *u = tn_detach(tn_sin(y0)), *v = T(TN_F64, false, 3, 2, 2, 5, 6);
    tn_tensor *y = tn_sum(tn_mul(y0, u));
    tn_tensor *gx = NULL, *gw = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &gx, false, true), TN_OK);
    tn_tensor *s = tn_sum(tn_mul(gx, v));
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &w, &gw, false, false), TN_OK);
    double *g = malloc(36 * sizeof *g);
    assert_int_equal(tn_copy_to_f64(gw, g, 36), TN_OK);
    double *wd = tn_data_ptr(w), h = 1e-6;
    for (int i = 0; i < 36; i++) {
        double keep = wd[i];
        wd[i] = keep + h;
        double a = mixed(x, w, u, v);
        wd[i] = keep - h;
        double b = mixed(x, w, u, v);
        wd[i] = keep;
        assert_true(fabs((a - b) / (2 * h) - g[i]) < 1e-6);
    }
    free(g);
    tn_scope_end();
}

/* float32 against float64 on a case of several column chunks (2^21 elements each). */
static void f32_chunks(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = T(TN_F64, false, 0, 5, 8, 40, 40), *w = T(TN_F64, false, 1, 6, 4, 3, 3);
    tn_tensor *b = T(TN_F64, false, 2, 6);
    int64_t one[2] = {1, 1};
    tn_tensor *y64 = tn_conv2d(x, w, b, one, one, one, 2);
    tn_tensor *y32 = tn_conv2d(tn_to(x, TN_F32, TN_DEVICE_CPU), tn_to(w, TN_F32, TN_DEVICE_CPU),
                               tn_to(b, TN_F32, TN_DEVICE_CPU), one, one, one, 2);
    assert_non_null(y64);
    assert_non_null(y32);
    int64_t n = tn_numel(y64);
    double *a = malloc((size_t)n * sizeof *a), *e = malloc((size_t)n * sizeof *e);
    assert_int_equal(tn_copy_to_f64(y32, a, n), TN_OK);
    assert_int_equal(tn_copy_to_f64(y64, e, n), TN_OK);
    for (int64_t i = 0; i < n; i++)
        assert_true(fabs(a[i] - e[i]) < 1e-4);
    free(a);
    free(e);
    tn_scope_end();
}

/* conv2d (no bias) of x (1, C, H, W), w (OC, C, K, K) by the definition, into y. */
static void naive_conv(const double *x, const double *w, int64_t c, int64_t h, int64_t wd,
                       int64_t oc, int64_t k, const int64_t geo[3][2], int64_t oh, int64_t ow,
                       double *y) {
    const int64_t *st = geo[0], *pd = geo[1], *dl = geo[2];
    for (int64_t o = 0; o < oc; o++)
        for (int64_t yy = 0; yy < oh; yy++)
            for (int64_t xx = 0; xx < ow; xx++) {
                double s = 0;
                for (int64_t ci = 0; ci < c; ci++)
                    for (int64_t i = 0; i < k; i++)
                        for (int64_t j = 0; j < k; j++) {
                            int64_t iy = yy * st[0] - pd[0] + i * dl[0];
                            int64_t ix = xx * st[1] - pd[1] + j * dl[1];
                            if (iy >= 0 && iy < h && ix >= 0 && ix < wd)
                                s += x[(ci * h + iy) * wd + ix] * w[((o * c + ci) * k + i) * k + j];
                        }
                y[(o * oh + yy) * ow + xx] = s;
            }
}

/* One image whose columns exceed a chunk's budget (a chunk of its own per thread), with the
 * stride, padding and dilation of each dim apart, against the definition. */
static void big_image_matches_definition(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    enum { C = 16, H = 100, W = 90, OC = 3, K = 3 };
    tn_tensor *x = T(TN_F64, false, 0, 1, C, H, W), *w = T(TN_F64, false, 1, OC, C, K, K);
    double *xv = malloc(C * H * W * sizeof *xv), *wv = malloc(OC * C * K * K * sizeof *wv);
    assert_int_equal(tn_copy_to_f64(x, xv, C * H * W), TN_OK);
    assert_int_equal(tn_copy_to_f64(w, wv, OC * C * K * K), TN_OK);
    const int64_t geo[2][3][2] = {{{1, 1}, {1, 1}, {1, 1}}, {{2, 1}, {1, 0}, {2, 1}}};
    for (int t = 0; t < 2; t++) {
        const int64_t *st = geo[t][0], *pd = geo[t][1], *dl = geo[t][2];
        int64_t oh = (H + 2 * pd[0] - dl[0] * (K - 1) - 1) / st[0] + 1;
        int64_t ow = (W + 2 * pd[1] - dl[1] * (K - 1) - 1) / st[1] + 1, n = OC * oh * ow;
        tn_tensor *y = tn_conv2d(x, w, NULL, st, pd, dl, 1);
        assert_non_null(y);
        assert_int_equal(tn_numel(y), n);
        double *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
        assert_int_equal(tn_copy_to_f64(y, got, n), TN_OK);
        naive_conv(xv, wv, C, H, W, OC, K, geo[t], oh, ow, want);
        for (int64_t i = 0; i < n; i++)
            assert_true(fabs(got[i] - want[i]) < 1e-10);
        free(got);
        free(want);
    }
    free(xv);
    free(wv);
    tn_scope_end();
}

/* out, dx, dw and db of one conv with nt op threads, as float64 values (n of them). big: images
 * whose columns (1.08 M elements each) fill the CPU's column budget, so that the forward's and
 * the input gradient's chunks of images follow the thread count, the weight gradient's (summed
 * by chunk) the shape alone; else 4 small images in one chunk. */
static double *run_with_threads(int nt, bool big, int64_t *n) {
    tn_set_num_threads(nt);
    tn_tensor *x = big ? T(TN_F32, true, 0, 6, 6, 200, 200) : T(TN_F32, true, 0, 4, 6, 40, 40);
    tn_tensor *w = T(TN_F32, true, 1, 8, 3, 3, 3);
    tn_tensor *b = T(TN_F32, true, 2, 8);
    tn_tensor *y = tn_conv2d(x, w, b, (int64_t[]){1, big ? 1 : 2}, (int64_t[]){1, 1}, NULL, 2);
    tn_tensor *g = tn_sin(y), *gi[3] = {0};
    assert_int_equal(tn_autograd_grad(1, &y, &g, 3, (tn_tensor *[]){x, w, b}, gi, false, false),
                     TN_OK);
    tn_tensor *all[4] = {y, gi[0], gi[1], gi[2]};
    *n = 0;
    for (int i = 0; i < 4; i++)
        *n += tn_numel(all[i]);
    double *v = malloc((size_t)*n * sizeof *v), *p = v;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tn_copy_to_f64(all[i], p, tn_numel(all[i])), TN_OK);
        p += tn_numel(all[i]);
    }
    return v;
}

/* The values and every gradient do not depend on the thread count. */
static void same_bits_any_thread_count(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    int keep = tn_get_num_threads();
    for (int big = 0; big < 2; big++) {
        int64_t n1, n4;
        double *a = run_with_threads(1, big, &n1), *b = run_with_threads(4, big, &n4);
        assert_int_equal(n1, n4);
        assert_memory_equal(a, b, (size_t)n1 * sizeof *a);
        free(a);
        free(b);
    }
    tn_set_num_threads(keep);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(errors_conv2d),
        TT_TEST(errors_conv1d),
        TT_TEST(grad_fn_names),
        TT_TEST(double_backward),
        TT_TEST(f32_chunks),
        TT_TEST(same_bits_any_thread_count),
        TT_TEST(errors_conv_transpose),
        TT_TEST(huge_parameters),
        TT_TEST(transpose_is_input_gradient),
        TT_TEST(big_image_matches_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
