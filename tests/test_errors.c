/* tests/test_errors.c — user mistakes: NULL handles, dtypes, shapes, dims,
 * overflow. Each failing call returns NULL / a negative status, sets the
 * thread-local status and message (PyTorch's text where PyTorch has the same
 * error), changes no input (values and version) and leaks nothing. */
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------- */

/* A tensor's values and version, to check that a failed call changed nothing. */
typedef struct {
    const tn_tensor *t;
    int64_t version, n;
    double v[64];
} snap;

static snap take(const tn_tensor *t) {
    snap s = {t, tn_version(t), tn_numel(t), {0}};
    assert_true(s.n <= 64);
    assert_int_equal(tn_copy_to_f64(t, s.v, s.n), TN_OK);
    return s;
}

static void unchanged(const snap *s) {
    assert_int_equal(tn_version(s->t), s->version);
    tt_assert_close(s->t, s->v, s->n, 0);
}

/* st == TN_OK: any error status (PyTorch's error has no obvious code). */
static void expect_error(const char *what, tn_status got_ret, tn_status st, const char *msg,
                         bool exact) {
    if (got_ret >= 0) fail_msg("%s: expected an error, got %d", what, (int)got_ret);
    if (got_ret != tn_last_status())
        fail_msg("%s: returned %d but tn_last_status() is %d", what, (int)got_ret,
                 (int)tn_last_status());
    if (st != TN_OK && tn_last_status() != st)
        fail_msg("%s: status %s, want %s (%s)", what, tn_status_string(tn_last_status()),
                 tn_status_string(st), tn_last_error());
    const char *e = tn_last_error();
    if (!e || !*e) fail_msg("%s: empty error message", what);
    if (msg && exact && strcmp(e, msg) != 0)
        fail_msg("%s: message\n  \"%s\"\nwant\n  \"%s\"", what, e, msg);
    if (msg && !exact && !strstr(e, msg))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", what, e, msg);
}

/* A pointer-returning call that must fail with status st and message msg. */
#define FAILS_PTR(call, st, msg, exact)                                                            \
    do {                                                                                           \
        tn_clear_error();                                                                          \
        const void *r_ = (const void *)(call);                                                     \
        if (r_) fail_msg("%s: expected NULL", #call);                                              \
        expect_error(#call, tn_last_status() < 0 ? tn_last_status() : (tn_status)1, st, msg,       \
                     exact);                                                                       \
    } while (0)
/* A status-returning call. */
#define FAILS_ST(call, st, msg, exact)                                                             \
    do {                                                                                           \
        tn_clear_error();                                                                          \
        tn_status r_ = (call);                                                                     \
        expect_error(#call, r_, st, msg, exact);                                                   \
    } while (0)

#define NULL_PTR(call) FAILS_PTR(call, TN_ERR_INVALID_ARGUMENT, "NULL", false)
#define NULL_ST(call) FAILS_ST(call, TN_ERR_INVALID_ARGUMENT, "NULL", false)

static const int64_t S3[] = {3}, S23[] = {2, 3}, S4[] = {4};

static tn_tensor *f32(int ndim, const int64_t *shape, bool rg) {
    float v[64];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i + 1) * 0.5f;
    return tt_f32(ndim, shape, v, rg);
}

/* ---- NULL handles --------------------------------------------------------- */

static void null_args_binary_and_unary(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(1, S3, true);
    snap sa = take(a);
    NULL_PTR(tn_add(NULL, a));
    NULL_PTR(tn_add(a, NULL));
    NULL_PTR(tn_sub(NULL, a));
    NULL_PTR(tn_mul(a, NULL));
    NULL_PTR(tn_div(NULL, a));
    NULL_PTR(tn_pow(a, NULL));
    NULL_PTR(tn_maximum(NULL, a));
    NULL_PTR(tn_minimum(a, NULL));
    NULL_PTR(tn_add_alpha(a, NULL, 2));
    NULL_PTR(tn_add_scalar(NULL, 1));
    NULL_PTR(tn_sub_scalar(NULL, 1));
    NULL_PTR(tn_mul_scalar(NULL, 1));
    NULL_PTR(tn_div_scalar(NULL, 1));
    NULL_PTR(tn_pow_scalar(NULL, 2));
    NULL_PTR(tn_rsub_scalar(NULL, 1));
    NULL_PTR(tn_eq(NULL, a));
    NULL_PTR(tn_ne(a, NULL));
    NULL_PTR(tn_lt(NULL, a));
    NULL_PTR(tn_le(a, NULL));
    NULL_PTR(tn_gt(NULL, a));
    NULL_PTR(tn_ge(a, NULL));
    NULL_PTR(tn_neg(NULL));
    NULL_PTR(tn_exp(NULL));
    NULL_PTR(tn_log(NULL));
    NULL_PTR(tn_sqrt(NULL));
    NULL_PTR(tn_abs(NULL));
    NULL_PTR(tn_sigmoid(NULL));
    NULL_PTR(tn_tanh(NULL));
    NULL_PTR(tn_relu(NULL));
    NULL_PTR(tn_sin(NULL));
    NULL_PTR(tn_cos(NULL));
    NULL_PTR(tn_clamp(NULL, 0, 1));
    unchanged(&sa);
    tn_scope_end();
}

static void null_args_reductions_nn_views(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(2, S23, true);
    snap sa = take(a);
    const int64_t shp[] = {3, 2};
    const int perm[] = {1, 0};
    NULL_PTR(tn_sum(NULL));
    NULL_PTR(tn_mean(NULL));
    NULL_PTR(tn_max(NULL));
    NULL_PTR(tn_min(NULL));
    NULL_PTR(tn_sum_dim(NULL, 0, false));
    NULL_PTR(tn_mean_dim(NULL, 0, true));
    NULL_PTR(tn_max_dim(NULL, 0, false));
    NULL_PTR(tn_argmax(NULL));
    NULL_PTR(tn_argmax_dim(NULL, 0, false));
    NULL_PTR(tn_matmul(NULL, a));
    NULL_PTR(tn_matmul(a, NULL));
    NULL_PTR(tn_linear(NULL, a, NULL));
    NULL_PTR(tn_linear(a, NULL, NULL));
    NULL_PTR(tn_softmax(NULL, 0));
    NULL_PTR(tn_log_softmax(NULL, 0));
    NULL_PTR(tn_cross_entropy(NULL, a));
    NULL_PTR(tn_cross_entropy(a, NULL));
    NULL_PTR(tn_mse_loss(NULL, a));
    NULL_PTR(tn_mse_loss(a, NULL));
    NULL_PTR(tn_view(NULL, 2, shp));
    NULL_PTR(tn_view(a, 2, NULL));
    NULL_PTR(tn_reshape(NULL, 2, shp));
    NULL_PTR(tn_reshape(a, 2, NULL));
    NULL_PTR(tn_transpose(NULL, 0, 1));
    NULL_PTR(tn_permute(NULL, 2, perm));
    NULL_PTR(tn_permute(a, 2, NULL));
    NULL_PTR(tn_narrow(NULL, 0, 0, 1));
    NULL_PTR(tn_select(NULL, 0, 0));
    NULL_PTR(tn_expand(NULL, 2, S23));
    NULL_PTR(tn_expand(a, 2, NULL));
    NULL_PTR(tn_squeeze(NULL));
    NULL_PTR(tn_squeeze_dim(NULL, 0));
    NULL_PTR(tn_unsqueeze(NULL, 0));
    NULL_PTR(tn_flatten(NULL, 0, 1));
    NULL_PTR(tn_contiguous(NULL));
    NULL_PTR(tn_cat(2, NULL, 0));
    NULL_PTR(tn_cat(2, (tn_tensor *const[]){a, NULL}, 0));
    NULL_PTR(tn_stack(2, NULL, 0));
    NULL_PTR(tn_stack(2, (tn_tensor *const[]){NULL, a}, 0));
    unchanged(&sa);
    tn_scope_end();
}

static void null_args_inplace_and_autograd(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(1, S3, false), *r = f32(1, S3, true);
    snap sa = take(a), sr = take(r);
    NULL_ST(tn_add_(NULL, a));
    NULL_ST(tn_add_(a, NULL));
    NULL_ST(tn_sub_(a, NULL));
    NULL_ST(tn_mul_(NULL, a));
    NULL_ST(tn_div_(a, NULL));
    NULL_ST(tn_add_scalar_(NULL, 1));
    NULL_ST(tn_mul_scalar_(NULL, 1));
    NULL_ST(tn_zero_(NULL));
    NULL_ST(tn_fill_(NULL, 1));
    NULL_ST(tn_clamp_(NULL, 0, 1));
    NULL_ST(tn_relu_(NULL));
    NULL_ST(tn_sigmoid_(NULL));
    NULL_ST(tn_exp_(NULL));
    NULL_ST(tn_neg_(NULL));
    NULL_ST(tn_copy_(NULL, a));
    NULL_ST(tn_copy_(a, NULL));
    NULL_ST(tn_add_out(NULL, a, a));
    NULL_ST(tn_add_out(a, NULL, a));
    NULL_ST(tn_mul_out(a, a, NULL));
    NULL_ST(tn_requires_grad_(NULL, true));
    NULL_ST(tn_retain_grad(NULL));
    NULL_ST(tn_backward(NULL, NULL, false));
    NULL_ST(tn_backward_ex(NULL, NULL, false, true));
    NULL_ST(tn_set_grad(NULL, a));
    NULL_ST(tn_zero_grad(NULL));
    tn_tensor *g = NULL;
    NULL_ST(tn_autograd_grad(1, NULL, NULL, 1, &r, &g, false, false));
    NULL_ST(tn_autograd_grad(1, &r, NULL, 1, NULL, &g, false, false));
    NULL_ST(tn_autograd_grad(1, (tn_tensor *const[]){NULL}, NULL, 1, &r, &g, false, false));
    NULL_ST(tn_autograd_grad(1, &r, NULL, 1, (tn_tensor *const[]){NULL}, &g, false, false));
    NULL_PTR(tn_detach(NULL));
    NULL_PTR(tn_detach_(NULL));
    NULL_PTR(tn_data(NULL));
    NULL_PTR(tn_clone(NULL));
    NULL_PTR(tn_grad(NULL));
    NULL_PTR(tn_new_tensor(NULL, TN_DTYPE_SAME, TN_DEVICE_KEEP, false));
    NULL_PTR(tn_to(NULL, TN_F64, TN_DEVICE_KEEP));
    unchanged(&sa);
    unchanged(&sr);
    assert_null(tn_grad(r));
    tn_scope_end();
}

static void null_args_creation_and_metadata(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(1, S3, false);
    double d;
    char buf[16];
    NULL_PTR(tn_tensor_from(NULL, TN_F32, 1, S3, false));
    NULL_PTR(tn_zeros(1, NULL, TN_F32));
    NULL_PTR(tn_ones(2, NULL, TN_F32));
    NULL_PTR(tn_empty(1, NULL, TN_F64));
    NULL_PTR(tn_full(1, NULL, TN_F64, 1));
    NULL_ST(tn_item(NULL, &d));
    NULL_ST(tn_item(tn_sum(a), NULL));
    NULL_ST(tn_copy_to(NULL, buf, sizeof buf));
    NULL_ST(tn_copy_to(a, NULL, 12));
    NULL_ST(tn_copy_to_f64(NULL, &d, 1));
    NULL_ST(tn_memory_stats(NULL));
    NULL_ST(tn_print(NULL, stderr));
    /* metadata: NULL-safe defaults plus an error */
    tn_clear_error();
    assert_int_equal(tn_ndim(NULL), -1);
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_numel(NULL), -1);
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_null(tn_shape(NULL));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_null(tn_stride(NULL));
    assert_int_equal(tn_size(NULL, 0), -1);
    assert_int_equal(tn_version(NULL), -1);
    assert_false(tn_requires_grad(NULL));
    assert_false(tn_is_leaf(NULL));
    assert_false(tn_is_contiguous(NULL));
    assert_false(tn_shares_storage(NULL, a));
    assert_null(tn_grad_fn_name(NULL));
    assert_null(tn_data_ptr(NULL));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    /* lifetime functions are NULL-safe no-ops */
    tn_clear_error();
    assert_null(tn_retain(NULL));
    tn_release(NULL);
    tn_scope_end();
}

/* ---- dtypes ------------------------------------------------------------------ */

#define INT_GRAD_MSG "Only Tensors of floating point and complex dtype can require gradients"

static void dtype_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t iv[] = {1, 2, 3};
    FAILS_PTR(tn_tensor_from(iv, TN_I64, 1, S3, true), TN_ERR_DTYPE, INT_GRAD_MSG, true);
    tn_tensor *i = tn_tensor_from(iv, TN_I64, 1, S3, false);
    assert_non_null(i);
    snap si = take(i);
    FAILS_ST(tn_requires_grad_(i, true), TN_ERR_DTYPE, INT_GRAD_MSG, true);
    assert_false(tn_requires_grad(i));
    assert_int_equal(tn_requires_grad_(i, false), TN_OK);
    FAILS_PTR(tn_zeros(1, S3, (tn_dtype)42), TN_ERR_DTYPE, NULL, false);
    FAILS_PTR(tn_tensor_from(iv, (tn_dtype)-7, 1, S3, false), TN_ERR_DTYPE, NULL, false);
    /* in-place / out= cannot narrow float into int */
    tn_tensor *f = f32(1, S3, false);
    snap sf = take(f);
    FAILS_ST(tn_add_(i, f), TN_ERR_DTYPE, NULL, false);
    FAILS_ST(tn_add_out(i, f, f), TN_ERR_DTYPE, NULL, false);
    /* mean needs a floating dtype; cross_entropy needs int64 targets */
    FAILS_PTR(tn_mean(i), TN_ERR_DTYPE, NULL, false);
    tn_tensor *logits = f32(2, S23, false);
    tn_tensor *ft = tt_f32(1, (const int64_t[]){2}, (const float[]){0, 1}, false);
    FAILS_PTR(tn_cross_entropy(logits, ft), TN_ERR_DTYPE, NULL, false);
    /* grad of another dtype */
    tn_tensor *r = f32(1, S3, true);
    FAILS_ST(tn_set_grad(r, tn_zeros(1, S3, TN_F64)), TN_ERR_DTYPE,
             "assigned grad has data of a different type", true);
    /* bool arithmetic PyTorch refuses */
    tn_tensor *b = tn_ones(1, S3, TN_BOOL);
    FAILS_PTR(tn_sub(b, b), TN_ERR_DTYPE,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
              "`^` or `logical_xor()` operator instead.",
              true);
    FAILS_PTR(tn_neg(b), TN_ERR_DTYPE,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
              "to invert a mask, use the `~` or `logical_not()` operator instead.",
              true);
    unchanged(&si);
    unchanged(&sf);
    assert_null(tn_grad(r));
    tn_scope_end();
}

/* ---- shapes ------------------------------------------------------------------ */

static void broadcast_mismatch(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(1, S3, true), *b = f32(1, S4, false);
    tn_tensor *m23 = f32(2, S23, false), *m43 = f32(2, (const int64_t[]){4, 3}, false);
    tn_tensor *m24 = f32(2, (const int64_t[]){2, 4}, false);
    snap sa = take(a), sb = take(b), sm = take(m23);
    FAILS_PTR(tn_add(a, b), TN_ERR_SHAPE,
              "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
              "dimension 0",
              true);
    FAILS_PTR(tn_mul(m23, m43), TN_ERR_SHAPE,
              "The size of tensor a (2) must match the size of tensor b (4) at non-singleton "
              "dimension 0",
              true);
    FAILS_PTR(tn_mul(m23, m24), TN_ERR_SHAPE,
              "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
              "dimension 1",
              true);
    FAILS_PTR(tn_sub(a, b), TN_ERR_SHAPE, "must match the size of tensor b", false);
    FAILS_PTR(tn_div(a, b), TN_ERR_SHAPE, "must match the size of tensor b", false);
    FAILS_PTR(tn_pow(a, b), TN_ERR_SHAPE, "must match the size of tensor b", false);
    FAILS_PTR(tn_maximum(a, b), TN_ERR_SHAPE, "must match the size of tensor b", false);
    FAILS_PTR(tn_eq(a, b), TN_ERR_SHAPE, "must match the size of tensor b", false);
    FAILS_PTR(tn_mse_loss(a, b), TN_ERR_SHAPE, "must match the size of tensor b", false);
    /* in place: the result must keep self's shape */
    FAILS_ST(tn_add_(m23, f32(3, (const int64_t[]){4, 2, 3}, false)), TN_ERR_SHAPE,
             "output with shape [2, 3] doesn't match the broadcast shape [4, 2, 3]", true);
    FAILS_ST(tn_mul_(m23, m43), TN_ERR_SHAPE, NULL, false);
    FAILS_ST(tn_copy_(m23, b), TN_ERR_SHAPE, NULL, false);
    tn_tensor *m21 = f32(2, (const int64_t[]){2, 1}, false);
    FAILS_ST(tn_copy_(m21, f32(2, (const int64_t[]){1, 3}, false)), TN_ERR_SHAPE,
             "output with shape [2, 1] doesn't match the broadcast shape [2, 3]", true);
    FAILS_ST(tn_add_out(m23, tn_detach(a), b), TN_ERR_SHAPE, NULL, false);
    FAILS_ST(tn_backward(tn_mul_scalar(a, 2), b, false), TN_ERR_SHAPE, NULL, false);
    unchanged(&sa);
    unchanged(&sb);
    unchanged(&sm);
    assert_null(tn_grad(a));
    tn_scope_end();
}

static void matmul_and_nn_shape_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(2, S23, true), *w = f32(2, (const int64_t[]){4, 2}, true);
    snap sa = take(a), sw = take(w);
    FAILS_PTR(tn_matmul(a, w), TN_ERR_SHAPE,
              "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)", true);
    FAILS_PTR(tn_matmul(f32(1, S3, false), f32(1, S4, false)), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_matmul(f32(3, (const int64_t[]){3, 3, 4}, false),
                        f32(3, (const int64_t[]){2, 4, 2}, false)),
              TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_linear(a, f32(2, (const int64_t[]){2, 4}, false), NULL), TN_ERR_SHAPE,
              "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)", true);
    FAILS_PTR(tn_linear(a, f32(2, (const int64_t[]){4, 3}, false), f32(1, S3, false)), TN_ERR_SHAPE,
              NULL, false);
    const int64_t tv[] = {0, 1, 2};
    FAILS_PTR(tn_cross_entropy(a, tn_tensor_from(tv, TN_I64, 1, S3, false)), TN_ERR_SHAPE,
              "Expected input batch_size (2) to match target batch_size (3).", true);
    const int64_t bad[] = {0, 3};
    FAILS_PTR(tn_cross_entropy(a, tn_tensor_from(bad, TN_I64, 1, (const int64_t[]){2}, false)),
              TN_ERR_INDEX, "Target 3 is out of bounds.", true);
    const int64_t neg[] = {-1, 0};
    FAILS_PTR(tn_cross_entropy(a, tn_tensor_from(neg, TN_I64, 1, (const int64_t[]){2}, false)),
              TN_ERR_INDEX, "Target -1 is out of bounds.", true);
    /* cat / stack */
    FAILS_PTR(tn_cat(2, (tn_tensor *const[]){a, f32(2, (const int64_t[]){2, 4}, false)}, 0),
              TN_ERR_SHAPE,
              "Sizes of tensors must match except in dimension 0. Expected size 3 but got size "
              "4 for tensor number 1 in the list.",
              true);
    FAILS_PTR(tn_stack(2, (tn_tensor *const[]){a, f32(2, (const int64_t[]){2, 4}, false)}, 0),
              TN_ERR_SHAPE,
              "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] "
              "at entry 1",
              true);
    FAILS_PTR(tn_cat(2, (tn_tensor *const[]){a, f32(1, S3, false)}, 0), TN_ERR_SHAPE,
              "Tensors must have same number of dimensions: got 2 and 1", true);
    FAILS_PTR(tn_cat(0, (tn_tensor *const[]){a}, 0), TN_OK, NULL, false);
    unchanged(&sa);
    unchanged(&sw);
    tn_scope_end();
}

#define DIM_MSG(lo, hi, got)                                                                       \
    "Dimension out of range (expected to be in range of [" #lo ", " #hi "], but got " #got ")"

static void bad_dims(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(2, S23, true);
    snap sa = take(a);
    FAILS_PTR(tn_transpose(a, 0, 5), TN_ERR_INDEX, DIM_MSG(-2, 1, 5), true);
    FAILS_PTR(tn_transpose(a, -3, 0), TN_ERR_INDEX, DIM_MSG(-2, 1, -3), true);
    FAILS_PTR(tn_sum_dim(a, 2, false), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_sum_dim(a, -3, true), TN_ERR_INDEX, DIM_MSG(-2, 1, -3), true);
    FAILS_PTR(tn_mean_dim(a, 2, false), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_max_dim(a, 2, false), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_argmax_dim(a, 2, false), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_softmax(a, 2), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_log_softmax(a, -3), TN_ERR_INDEX, DIM_MSG(-2, 1, -3), true);
    FAILS_PTR(tn_squeeze_dim(a, 3), TN_ERR_INDEX, DIM_MSG(-2, 1, 3), true);
    FAILS_PTR(tn_unsqueeze(a, 3), TN_ERR_INDEX, DIM_MSG(-3, 2, 3), true);
    FAILS_PTR(tn_narrow(a, 2, 0, 1), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_select(a, 2, 0), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_cat(2, (tn_tensor *const[]){a, a}, 2), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_stack(2, (tn_tensor *const[]){a, a}, 3), TN_ERR_INDEX, DIM_MSG(-3, 2, 3), true);
    FAILS_PTR(tn_flatten(a, 0, 2), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_flatten(a, 1, 0), TN_OK,
              "flatten() has invalid args: start_dim cannot come after end_dim", true);
    FAILS_PTR(tn_permute(a, 2, (const int[]){0, 0}), TN_OK,
              "permute(): duplicate dims are not allowed.", true);
    FAILS_PTR(tn_permute(a, 2, (const int[]){0, 2}), TN_ERR_INDEX, DIM_MSG(-2, 1, 2), true);
    FAILS_PTR(tn_permute(a, 1, (const int[]){0}), TN_OK, NULL, false);
    /* ranges */
    FAILS_PTR(tn_narrow(a, 1, 2, 2), TN_OK, "start (2) + length (2) exceeds dimension size (3).",
              true);
    FAILS_PTR(tn_narrow(a, 1, 0, -1), TN_OK, NULL, false);
    FAILS_PTR(tn_select(a, 0, 2), TN_ERR_INDEX,
              "select(): index 2 out of range for tensor of size [2, 3] at dimension 0", true);
    FAILS_PTR(tn_select(a, 1, -4), TN_ERR_INDEX,
              "select(): index -4 out of range for tensor of size [2, 3] at dimension 1", true);
    unchanged(&sa);
    assert_int_equal(tn_size(a, 2), -1);
    assert_int_equal(tn_last_status(), TN_ERR_INDEX);
    tn_scope_end();
}

static void wrong_numel_in_view(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(2, S23, true);
    snap sa = take(a);
    FAILS_PTR(tn_view(a, 1, (const int64_t[]){5}), TN_ERR_SHAPE,
              "shape '[5]' is invalid for input of size 6", true);
    FAILS_PTR(tn_view(a, 2, (const int64_t[]){-1, 4}), TN_ERR_SHAPE,
              "shape '[-1, 4]' is invalid for input of size 6", true);
    FAILS_PTR(tn_view(a, 2, (const int64_t[]){-1, -1}), TN_ERR_SHAPE,
              "only one dimension can be inferred", true);
    FAILS_PTR(tn_view(a, 2, (const int64_t[]){-2, 3}), TN_ERR_SHAPE, "invalid shape dimension -2",
              true);
    FAILS_PTR(tn_reshape(a, 1, (const int64_t[]){7}), TN_ERR_SHAPE,
              "shape '[7]' is invalid for input of size 6", true);
    tn_tensor *t = tn_transpose(f32(3, (const int64_t[]){2, 3, 4}, false), 1, 2);
    FAILS_PTR(tn_view(t, 1, (const int64_t[]){24}), TN_ERR_SHAPE,
              "view size is not compatible with input tensor's size and stride (at least one "
              "dimension spans across two contiguous subspaces). Use ",
              false); /* the hint names our API: tn_reshape */
    assert_non_null(strstr(tn_last_error(), "reshape(...) instead."));
    FAILS_PTR(tn_expand(a, 2, (const int64_t[]){4, 3}), TN_ERR_SHAPE,
              "The expanded size of the tensor (4) must match the existing size (2) at "
              "non-singleton dimension 0.  Target sizes: [4, 3].  Tensor sizes: [2, 3]",
              true);
    FAILS_PTR(tn_expand(a, 1, (const int64_t[]){3}), TN_ERR_SHAPE,
              "the number of sizes provided (1) must be greater or equal to the number of "
              "dimensions in the tensor (2)",
              false);
    double d;
    FAILS_ST(tn_item(a, &d), TN_OK, NULL, false);
    float small[2];
    FAILS_ST(tn_copy_to(a, small, sizeof small), TN_ERR_INVALID_ARGUMENT, NULL, false);
    unchanged(&sa);
    tn_scope_end();
}

static void overflow_and_negative_shapes(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t huge[] = {INT64_MAX / 2, 4}, huge2[] = {INT64_MAX, INT64_MAX},
                  big[] = {(int64_t)1 << 40, (int64_t)1 << 40}, nearly[] = {INT64_MAX / 8, 2};
    float one = 1;
    FAILS_PTR(tn_zeros(2, huge, TN_F32), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_ones(2, huge2, TN_F64), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_empty(2, big, TN_I64), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_full(2, nearly, TN_F64, 1), TN_ERR_SHAPE, NULL, false); /* bytes overflow */
    FAILS_PTR(tn_tensor_from(&one, TN_F32, 2, huge, false), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_rand(2, huge, TN_F32), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_zeros(1, (const int64_t[]){-1}, TN_F32), TN_ERR_SHAPE,
              "Trying to create tensor with negative dimension -1", false);
    FAILS_PTR(tn_ones(2, (const int64_t[]){2, -3}, TN_F64), TN_ERR_SHAPE,
              "Trying to create tensor with negative dimension -3", false);
    FAILS_PTR(tn_tensor_from(&one, TN_F32, 1, (const int64_t[]){-1}, false), TN_ERR_SHAPE,
              "negative dimension", false);
    FAILS_PTR(tn_zeros(TN_MAX_DIMS + 1, (const int64_t[TN_MAX_DIMS + 1]){1}, TN_F32), TN_ERR_SHAPE,
              NULL, false);
    FAILS_PTR(tn_zeros(-1, S3, TN_F32), TN_ERR_SHAPE, NULL, false);
    /* views to overflowing shapes */
    tn_tensor *a = f32(1, S3, false);
    snap sa = take(a);
    FAILS_PTR(tn_view(a, 2, huge), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_reshape(a, 2, huge2), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_view(a, 2, (const int64_t[]){-3, -1}), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_arange(0, 1e300, 1e-300, TN_F64), TN_ERR_SHAPE, NULL, false);
    FAILS_PTR(tn_arange(0, 10, 0, TN_F64), TN_ERR_INVALID_ARGUMENT, NULL, false);
    unchanged(&sa);
    /* zero-size dims are fine */
    tn_tensor *z = tn_zeros(2, (const int64_t[]){0, 4}, TN_F32);
    assert_non_null(z);
    assert_int_equal(tn_numel(z), 0);
    tn_scope_end();
}

/* PyTorch's full text names the requested shape. */
static void negative_dims_message(void **state) {
    FAILS_PTR(tn_zeros(1, (const int64_t[]){-1}, TN_F32), TN_ERR_SHAPE,
              "Trying to create tensor with negative dimension -1: [-1]", true);
    FAILS_PTR(tn_empty(2, (const int64_t[]){2, -3}, TN_F32), TN_ERR_SHAPE,
              "Trying to create tensor with negative dimension -3: [2, -3]", true);
}

/* Autograd misuse (beyond docs/semantics.md §4's, tested in test_autograd.c). */
static void autograd_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(1, S3, true), *c = f32(1, S3, false);
    snap sa = take(a);
    tn_tensor *h = tn_mul_scalar(a, 2);
    FAILS_ST(tn_requires_grad_(h, false), TN_ERR_AUTOGRAD,
             "you can only change requires_grad flags of leaf variables. If you want to use a "
             "computed variable in a subgraph that doesn't require differentiation use "
             "var_no_grad = var.detach().",
             true);
    assert_true(tn_requires_grad(h));
    FAILS_ST(tn_retain_grad(c), TN_ERR_AUTOGRAD,
             "can't retain_grad on Tensor that has requires_grad=False", true);
    FAILS_ST(tn_add_out(tn_zeros(1, S3, TN_F32), a, c), TN_ERR_AUTOGRAD,
             "add(): functions with out=... arguments don't support automatic differentiation, "
             "but one of the arguments requires grad.",
             true);
    FAILS_ST(tn_mul_out(tn_zeros(1, S3, TN_F32), c, a), TN_ERR_AUTOGRAD,
             "mul(): functions with out=... arguments don't support automatic differentiation, "
             "but one of the arguments requires grad.",
             true);
    FAILS_ST(tn_set_grad(a, f32(1, S4, false)), TN_ERR_SHAPE,
             "assigned grad has data of a different size", true);
    tn_tensor *g = NULL, *s = tn_sum(tn_mul(c, c));
    FAILS_ST(tn_autograd_grad(1, &s, NULL, 1, &c, &g, false, false), TN_ERR_AUTOGRAD,
             "element 0 of tensors does not require grad and does not have a grad_fn", true);
    assert_null(g);
    FAILS_ST(tn_autograd_grad(0, &s, NULL, 1, &a, &g, false, false), TN_ERR_INVALID_ARGUMENT, NULL,
             false);
    unchanged(&sa);
    assert_null(tn_grad(a));
    tn_scope_end();
}

/* A failed call leaves the previous status readable until cleared, and a
 * later success does not reset it (errno-like). */
static void error_state_is_sticky(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_clear_error();
    assert_int_equal(tn_last_status(), TN_OK);
    assert_string_equal(tn_last_error(), "");
    assert_null(tn_add(NULL, NULL));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_tensor *a = f32(1, S3, false);
    assert_non_null(tn_add(a, a));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_last_status(), TN_OK);
    /* a message that quotes the last one (context added by a caller) keeps it whole */
    assert_null(tn_add(NULL, NULL));
    char want[512];
    snprintf(want, sizeof want, "while adding: %s", tn_last_error());
    assert_int_equal(tn_set_error(TN_ERR_SHAPE, "while adding: %s", tn_last_error()), TN_ERR_SHAPE);
    assert_string_equal(tn_last_error(), want);
    tn_clear_error();
    assert_string_equal(tn_status_string(TN_ERR_SHAPE), "TN_ERR_SHAPE");
    assert_string_equal(tn_status_string(TN_OK), "TN_OK");
    assert_non_null(tn_status_string((tn_status)-12345));
    tn_scope_end();
}

/* tn_arange's refusals, PyTorch 1.13's texts (torch.arange from /usr/bin/python3); an infinite
 * step gives an empty range. */
static void arange_errors(void **state) {
    (void)state;
    tt_assert_refused(tn_arange(0, 10, 0, TN_F32), TN_ERR_INVALID_ARGUMENT, "step must be nonzero");
    tt_assert_refused(tn_arange(0, 10, -0.0, TN_F32), TN_ERR_INVALID_ARGUMENT,
                      "step must be nonzero");
    tt_assert_refused(tn_arange(0, 10, NAN, TN_F32), TN_ERR_INVALID_ARGUMENT,
                      "step must be nonzero");
    tt_assert_refused(tn_arange(0, NAN, 1, TN_F32), TN_ERR_INVALID_ARGUMENT,
                      "unsupported range: 0 -> nan");
    tt_assert_refused(tn_arange(-INFINITY, 0, 1, TN_F32), TN_ERR_INVALID_ARGUMENT,
                      "unsupported range: -inf -> 0");
    tt_assert_refused(tn_arange(0, -5, 1, TN_F32), TN_ERR_INVALID_ARGUMENT,
                      "upper bound and larger bound inconsistent with step sign");
    tt_assert_refused(tn_arange(0, 1e308, 1, TN_F64), TN_ERR_SHAPE,
                      "invalid size, possible overflow?");
    tt_assert_refused(tn_arange(0, 10, 2.2e-308, TN_F64), TN_ERR_SHAPE,
                      "invalid size, possible overflow?");
    tt_assert_refused(tn_arange(0, 9.3e18, 1, TN_I64), TN_ERR_INVALID_ARGUMENT,
                      "value cannot be converted to type int64_t without overflow");
    tn_tensor *e = tn_arange(0, 10, INFINITY, TN_F32);
    assert_non_null(e);
    assert_int_equal(tn_numel(e), 0);
    tn_release(e);
    tn_clear_error();
}

/* Reference cycles: a tensor cannot be its own grad (PyTorch's check); the
 * failed call changes nothing and the teardown's leak check passes. */
static void reference_cycles_set_grad_self(void **state) {
    (void)state;
    tn_tensor *x = tn_zeros(1, (const int64_t[]){3}, TN_F32);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    assert_int_equal(tn_set_grad(x, x), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "can't assign Variable as its own grad");
    assert_null(tn_grad(x));
    tn_tensor *g = tn_ones(1, (const int64_t[]){3}, TN_F32);
    assert_int_equal(tn_set_grad(x, g), TN_OK);
    assert_int_equal(tn_set_grad(x, x), TN_ERR_AUTOGRAD);
    tn_tensor *kept = tn_grad(x);
    assert_ptr_equal(kept, g); /* the earlier grad stays */
    tn_release(kept);
    tn_release(g);
    tn_release(x);
}

/* ---- indexing and masks -------------------------------------------------------- */

static void index_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = f32(2, (const int64_t[]){3, 4}, true);
    const int64_t ok[] = {0, 2}, oob[] = {0, 3}, neg[] = {-1, 0}, i2[] = {0, 1, 2, 0};
    tn_tensor *iok = tn_tensor_from(ok, TN_I64, 1, (const int64_t[]){2}, false);
    tn_tensor *ioob = tn_tensor_from(oob, TN_I64, 1, (const int64_t[]){2}, false);
    tn_tensor *ineg = tn_tensor_from(neg, TN_I64, 1, (const int64_t[]){2}, false);
    tn_tensor *ifl = f32(1, (const int64_t[]){2}, false);
    tn_tensor *ib = tn_ones(1, (const int64_t[]){2}, TN_BOOL);
    snap sw = take(w), so = take(ioob);
    NULL_PTR(tn_embedding(NULL, iok));
    NULL_PTR(tn_embedding(w, NULL));
    NULL_PTR(tn_index_select(NULL, 0, iok));
    NULL_PTR(tn_index_select(w, 0, NULL));
    NULL_PTR(tn_gather(NULL, 0, iok));
    NULL_PTR(tn_gather(w, 0, NULL));
    NULL_PTR(tn_scatter_add(NULL, 0, iok, w));
    NULL_PTR(tn_scatter_add(w, 0, NULL, w));
    NULL_PTR(tn_scatter_add(w, 0, iok, NULL));
    /* out of range, negative: found before anything is written */
    FAILS_PTR(tn_embedding(w, ioob), TN_ERR_INDEX, "index out of range in self", true);
    FAILS_PTR(tn_embedding(w, ineg), TN_ERR_INDEX, "index out of range in self", true);
    FAILS_PTR(tn_index_select(w, 0, ioob), TN_ERR_INDEX, "index out of range in self", true);
    FAILS_PTR(tn_index_select(w, 1, ineg), TN_ERR_INDEX, "index out of range in self", true);
    tn_tensor *g5 = tn_tensor_from((const int64_t[]){5}, TN_I64, 2, (const int64_t[]){1, 1}, false);
    tn_tensor *gm =
        tn_tensor_from((const int64_t[]){-1}, TN_I64, 2, (const int64_t[]){1, 1}, false);
    FAILS_PTR(tn_gather(w, 0, g5), TN_ERR_INDEX,
              "index 5 is out of bounds for dimension 0 with size 3", true);
    FAILS_PTR(tn_gather(w, -1, gm), TN_ERR_INDEX,
              "index -1 is out of bounds for dimension 1 with size 4", true);
    tn_tensor *src = f32(2, (const int64_t[]){1, 1}, true);
    FAILS_PTR(tn_scatter_add(w, 0, g5, src), TN_ERR_INDEX,
              "index 5 is out of bounds for dimension 0 with size 3", true);
    /* index dtypes */
    FAILS_PTR(tn_embedding(w, ifl), TN_ERR_DTYPE,
              "Expected tensor for argument #1 'indices' to have one of the following scalar "
              "types: Long, Int; but got float32 instead (while checking arguments for embedding)",
              true);
    FAILS_PTR(tn_embedding(w, ib), TN_ERR_DTYPE, "but got bool instead", false);
    FAILS_PTR(tn_index_select(w, 0, ifl), TN_ERR_DTYPE,
              "index_select(): Expected dtype int32 or int64 for index", false);
    tn_tensor *g32 = tn_zeros(2, (const int64_t[]){1, 1}, TN_I32);
    FAILS_PTR(tn_gather(w, 0, g32), TN_ERR_DTYPE, "gather(): Expected dtype int64 for index", true);
    FAILS_PTR(tn_scatter_add(w, 0, g32, src), TN_ERR_DTYPE,
              "scatter(): Expected dtype int64 for index", true);
    /* shapes and dims */
    FAILS_PTR(tn_embedding(f32(1, S3, false), iok), TN_ERR_SHAPE, "'weight' must be 2-D", true);
    FAILS_PTR(tn_index_select(w, 2, iok), TN_ERR_INDEX, "Dimension out of range", false);
    tn_tensor *i22 = tn_tensor_from(i2, TN_I64, 2, (const int64_t[]){2, 2}, false);
    FAILS_PTR(tn_index_select(w, 0, i22), TN_ERR_INDEX,
              "index_select(): Index is supposed to be a vector", true);
    FAILS_PTR(tn_gather(w, 0, iok), TN_ERR_SHAPE,
              "Index tensor must have the same number of dimensions as input tensor", true);
    tn_tensor *i15 = tn_zeros(2, (const int64_t[]){1, 5}, TN_I64);
    FAILS_PTR(tn_gather(w, 0, i15), TN_ERR_SHAPE,
              "Size does not match at dimension 1 expected index [1, 5] to be smaller than self "
              "[3, 4] apart from dimension 0",
              true);
    tn_tensor *i33 = tn_zeros(2, (const int64_t[]){3, 3}, TN_I64);
    tn_tensor *s23 = f32(2, S23, false);
    FAILS_PTR(tn_scatter_add(w, 0, i33, s23), TN_ERR_SHAPE,
              "Expected index [3, 3] to be smaller than self [3, 4] apart from dimension 0 and to "
              "be smaller size than src [2, 3]",
              true);
    FAILS_PTR(tn_scatter_add(w, 0, iok, s23), TN_ERR_SHAPE,
              "Index tensor must have the same number of dimensions as self tensor", true);
    tn_tensor *s64 = tn_zeros(2, (const int64_t[]){1, 1}, TN_F64);
    FAILS_PTR(tn_scatter_add(w, 0, g5, s64), TN_ERR_DTYPE,
              "scatter(): Expected self.dtype to be equal to src.dtype", true);
    unchanged(&sw);
    unchanged(&so);
    assert_null(tn_grad(w));
    tn_scope_end();
}

static void mask_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = f32(2, S23, true), *b = f32(1, S4, false), *c = f32(1, S3, false);
    tn_tensor *m3 = tn_ones(1, S3, TN_BOOL), *m4 = tn_ones(1, S4, TN_BOOL);
    tn_tensor *m23 = tn_ones(2, (const int64_t[]){2, 3}, TN_BOOL);
    snap sa = take(a);
    NULL_PTR(tn_where(NULL, a, a));
    NULL_PTR(tn_where(m3, NULL, a));
    NULL_PTR(tn_where(m3, a, NULL));
    NULL_PTR(tn_masked_fill(NULL, m3, 1));
    NULL_PTR(tn_masked_fill(a, NULL, 1));
    NULL_ST(tn_masked_fill_(NULL, m3, 1));
    NULL_ST(tn_masked_fill_(a, NULL, 1));
    NULL_PTR(tn_tril(NULL, 0));
    NULL_PTR(tn_triu(NULL, 0));
    FAILS_PTR(tn_where(c, a, a), TN_ERR_DTYPE,
              "where expected condition to be a boolean tensor, but got a tensor with dtype "
              "float32",
              true);
    FAILS_PTR(tn_where(m3, a, b), TN_ERR_SHAPE,
              "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
              "dimension 1",
              true);
    FAILS_PTR(tn_masked_fill(a, c, 1), TN_ERR_DTYPE,
              "masked_fill_ only supports boolean masks, but got mask with dtype float32", true);
    FAILS_PTR(tn_masked_fill(a, m4, 1), TN_ERR_SHAPE, "must match the size", false);
    FAILS_PTR(tn_masked_fill(tn_zeros(1, S3, TN_I16), m3, 1e9), TN_ERR_INVALID_ARGUMENT, NULL,
              false);
    /* in place: a leaf that requires grad; a mask that does not broadcast into self */
    FAILS_ST(tn_masked_fill_(a, m3, 1), TN_ERR_AUTOGRAD,
             "a leaf Variable that requires grad is being used in an in-place operation.", true);
    tn_tensor *d = tn_detach(a);
    snap sd = take(d);
    FAILS_ST(tn_masked_fill_(tn_select(d, 0, 0), m23, 1), TN_ERR_SHAPE,
             "output with shape [3] doesn't match the broadcast shape [2, 3]", true);
    FAILS_ST(tn_masked_fill_(d, c, 1), TN_ERR_DTYPE, "only supports boolean masks", false);
    FAILS_PTR(tn_tril(c, 0), TN_ERR_SHAPE, "tril: input tensor must have at least 2 dimensions",
              true);
    FAILS_PTR(tn_triu(tn_scalar(1, TN_F32), 0), TN_ERR_SHAPE,
              "triu: input tensor must have at least 2 dimensions", true);
    unchanged(&sa);
    unchanged(&sd);
    assert_null(tn_grad(a));
    tn_scope_end();
}

static void norm_activation_stats_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s234[] = {2, 3, 4}, n5[] = {5}, n35[] = {3, 5}, n4[] = {4}, n34[] = {3, 4};
    tn_tensor *x = f32(3, s234, true), *w = f32(1, n4, true), *b = f32(1, n4, true);
    snap sx = take(x), sw = take(w), sb = take(b);
    /* NULL handles and shape */
    NULL_PTR(tn_layer_norm(NULL, 1, n4, w, b, 1e-5));
    NULL_PTR(tn_layer_norm(x, 1, NULL, w, b, 1e-5));
    NULL_PTR(tn_gelu(NULL, false));
    NULL_PTR(tn_gelu(NULL, true));
    NULL_PTR(tn_silu(NULL));
    NULL_PTR(tn_dropout(NULL, 0.5, true));
    NULL_PTR(tn_logsumexp(NULL, 0, false));
    NULL_PTR(tn_var_dim(NULL, 0, 1, false));
    NULL_PTR(tn_std_dim(NULL, 0, 1, false));
    /* layer_norm: PyTorch's texts */
    FAILS_PTR(tn_layer_norm(x, 1, n5, NULL, NULL, 1e-5), TN_ERR_SHAPE,
              "Given normalized_shape=[5], expected input with shape [*, 5], but got input of "
              "size[2, 3, 4]",
              true);
    FAILS_PTR(tn_layer_norm(x, 2, n35, NULL, NULL, 1e-5), TN_ERR_SHAPE,
              "Given normalized_shape=[3, 5], expected input with shape [*, 3, 5], but got input "
              "of size[2, 3, 4]",
              true);
    FAILS_PTR(tn_layer_norm(x, 4, (const int64_t[]){2, 2, 3, 4}, NULL, NULL, 1e-5), TN_ERR_SHAPE,
              "Given normalized_shape=[2, 2, 3, 4], expected input with shape [*, 2, 2, 3, 4], "
              "but got input of size[2, 3, 4]",
              true);
    FAILS_PTR(tn_layer_norm(x, 0, n4, NULL, NULL, 1e-5), TN_ERR_SHAPE,
              "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
              "one element, but got normalized_shape = []",
              true);
    FAILS_PTR(tn_layer_norm(x, 1, n4, f32(1, n5, false), b, 1e-5), TN_ERR_SHAPE,
              "Expected weight to be of same shape as normalized_shape, but got weight of shape "
              "[5] and normalized_shape = [4]",
              true);
    FAILS_PTR(tn_layer_norm(x, 1, n4, w, f32(1, S3, false), 1e-5), TN_ERR_SHAPE,
              "Expected bias to be of same shape as normalized_shape, but got bias of shape [3] "
              "and normalized_shape = [4]",
              true);
    FAILS_PTR(tn_layer_norm(x, 2, n34, w, NULL, 1e-5), TN_ERR_SHAPE,
              "Expected weight to be of same shape as normalized_shape, but got weight of shape "
              "[4] and normalized_shape = [3, 4]",
              true);
    FAILS_PTR(tn_layer_norm(x, 1, n4, tn_zeros(1, n4, TN_F64), NULL, 1e-5), TN_ERR_DTYPE,
              "expected scalar type float32 but found float64", true);
    tn_tensor *xi = tn_zeros(3, s234, TN_I64);
    FAILS_PTR(tn_layer_norm(xi, 1, n4, NULL, NULL, 1e-5), TN_ERR_DTYPE,
              "\"LayerNormKernelImpl\" not implemented for 'int64'", true);
    /* activations: float only */
    FAILS_PTR(tn_gelu(xi, false), TN_ERR_DTYPE, "\"GeluKernelImpl\" not implemented for 'int64'",
              true);
    FAILS_PTR(tn_gelu(xi, true), TN_ERR_DTYPE, "\"GeluKernelImpl\" not implemented for 'int64'",
              true);
    FAILS_PTR(tn_silu(xi), TN_ERR_DTYPE, "\"silu_cpu\" not implemented for 'int64'", true);
    /* dropout */
    FAILS_PTR(tn_dropout(x, 1.5, true), TN_ERR_INVALID_ARGUMENT,
              "dropout probability has to be between 0 and 1, but got 1.5", true);
    FAILS_PTR(tn_dropout(x, -0.1, false), TN_ERR_INVALID_ARGUMENT,
              "dropout probability has to be between 0 and 1, but got -0.1", true);
    FAILS_PTR(tn_dropout(x, 2.0, true), TN_ERR_INVALID_ARGUMENT,
              "dropout probability has to be between 0 and 1, but got 2.0", true);
    FAILS_PTR(tn_dropout(x, NAN, true), TN_ERR_INVALID_ARGUMENT,
              "dropout probability has to be between 0 and 1, but got nan", true);
    FAILS_PTR(tn_dropout(xi, 0.5, true), TN_ERR_DTYPE,
              "result type float32 can't be cast to the desired output type int64", true);
    /* statistics */
    FAILS_PTR(tn_logsumexp(x, 3, false), TN_ERR_INDEX, DIM_MSG(-3, 2, 3), true);
    FAILS_PTR(tn_var_dim(x, -4, 1, false), TN_ERR_INDEX, DIM_MSG(-3, 2, -4), true);
    FAILS_PTR(tn_std_dim(x, 3, 1, true), TN_ERR_INDEX, DIM_MSG(-3, 2, 3), true);
    FAILS_PTR(tn_var_dim(xi, 0, 1, false), TN_ERR_DTYPE,
              "std and var only support floating point and complex dtypes", true);
    FAILS_PTR(tn_std_dim(xi, 0, 0, false), TN_ERR_DTYPE,
              "std and var only support floating point and complex dtypes", true);
    unchanged(&sx);
    unchanged(&sw);
    unchanged(&sb);
    tn_scope_end();
}

/* scaled_dot_product_attention: PyTorch 2.x's texts (attention.cpp's
 * validate_sdpa_input, the math path's causal check, dropout's range). */
static void attention_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t sq[] = {2, 3, 4}, sk[] = {2, 5, 4}, sv[] = {2, 5, 3};
    tn_tensor *q = f32(3, sq, true), *k = f32(3, sk, true), *v = f32(3, sv, true);
    snap s[3] = {take(q), take(k), take(v)};
    NULL_PTR(tn_scaled_dot_product_attention(NULL, k, v, NULL, 0, false));
    NULL_PTR(tn_scaled_dot_product_attention(q, NULL, v, NULL, 0, false));
    NULL_PTR(tn_scaled_dot_product_attention(q, k, NULL, NULL, 0, false));
    tn_tensor *k64 = tn_to(k, TN_F64, TN_DEVICE_KEEP);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k64, v, NULL, 0, false), TN_ERR_DTYPE,
              "Expected query, key, and value to have the same dtype, but got query.dtype: float "
              "key.dtype: double and value.dtype: float instead.",
              true);
    FAILS_PTR(tn_scaled_dot_product_attention(f32(1, S4, false), k, v, NULL, 0, false),
              TN_ERR_SHAPE,
              "Expected query, key, and value to all be  at least 2 dimensional, but got "
              "query.dim: 1 key.dim: 3 and value.dim: 3 instead.",
              true);
    tn_tensor *mi = tn_zeros(2, (const int64_t[]){3, 5}, TN_I64);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, v, mi, 0, false), TN_ERR_DTYPE,
              "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
              "attn_mask.dtype: long int and  query.dtype: float instead.",
              true);
    tn_tensor *md = tn_zeros(2, (const int64_t[]){3, 5}, TN_F64);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, v, md, 0, false), TN_ERR_DTYPE,
              "attn_mask.dtype: double", false);
    tn_tensor *mb = tn_ones(2, (const int64_t[]){3, 5}, TN_BOOL);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, v, mb, 0, true), TN_ERR_INVALID_ARGUMENT,
              "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
              "is_causal=True",
              true);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, v, NULL, 1.5, false), TN_ERR_INVALID_ARGUMENT,
              "dropout probability has to be between 0 and 1, but got 1.5", true);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, v, NULL, NAN, false), TN_ERR_INVALID_ARGUMENT,
              "dropout probability has to be between 0 and 1", false);
    /* masks that do not broadcast into (2, 3, 5), or would grow it */
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, v, tn_ones(2, (const int64_t[]){3, 4}, TN_BOOL),
                                              0, false),
              TN_ERR_SHAPE, "must match the size of tensor", false);
    FAILS_PTR(tn_scaled_dot_product_attention(
                  q, k, v, tn_zeros(4, (const int64_t[]){2, 2, 3, 5}, TN_F32), 0, false),
              TN_ERR_SHAPE,
              "output with shape [2, 3, 5] doesn't match the broadcast shape [2, 2, 3, 5]", true);
    /* q, k, v shapes */
    FAILS_PTR(tn_scaled_dot_product_attention(q, f32(3, (const int64_t[]){2, 5, 3}, false), v, NULL,
                                              0, false),
              TN_ERR_SHAPE, "query.size(-1): 4 and key.size(-1): 3", false);
    FAILS_PTR(tn_scaled_dot_product_attention(q, k, f32(3, (const int64_t[]){2, 6, 3}, false), NULL,
                                              0, false),
              TN_ERR_SHAPE, "key.size(-2): 5 and value.size(-2): 6", false);
    FAILS_PTR(tn_scaled_dot_product_attention(q, f32(3, (const int64_t[]){3, 5, 4}, false), v, NULL,
                                              0, false),
              TN_ERR_SHAPE, "must match the size of tensor", false);
    tn_tensor *qi = tn_zeros(3, sq, TN_I64);
    FAILS_PTR(tn_scaled_dot_product_attention(qi, qi, qi, NULL, 0, false), TN_ERR_DTYPE,
              "not implemented for", false);
    for (int i = 0; i < 3; i++)
        unchanged(&s[i]);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(null_args_binary_and_unary),
        TT_TEST(null_args_reductions_nn_views),
        TT_TEST(null_args_inplace_and_autograd),
        TT_TEST(null_args_creation_and_metadata),
        TT_TEST(dtype_errors),
        TT_TEST(broadcast_mismatch),
        TT_TEST(matmul_and_nn_shape_errors),
        TT_TEST(bad_dims),
        TT_TEST(wrong_numel_in_view),
        TT_TEST(overflow_and_negative_shapes),
        TT_TEST(arange_errors),
        TT_TEST(negative_dims_message),
        TT_TEST(autograd_errors),
        TT_TEST(error_state_is_sticky),
        TT_TEST(reference_cycles_set_grad_self),
        TT_TEST(index_errors),
        TT_TEST(mask_errors),
        TT_TEST(norm_activation_stats_errors),
        TT_TEST(attention_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
