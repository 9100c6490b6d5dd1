/* tests/test_loss.c — nll_loss and cross_entropy_ex beyond the op table and the goldens:
 * grad_fn names (PyTorch 1.13's), the mean over no target, the fused path for the defaults,
 * and the error texts. */
#include "util.h"

#include <math.h>

static tn_tensor *logits(int nd, const int64_t *shape, bool rg) {
    double v[64];
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n; i++)
        v[i] = sin(1.3 * (double)i + 0.1);
    return tt_f64(nd, shape, v, rg);
}

static tn_tensor *targets(int nd, const int64_t *shape, const int64_t *v) {
    tn_tensor *t = tn_tensor_from(v, TN_I64, nd, shape, false);
    assert_non_null(t);
    return t;
}

static void grad_fn_names(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = logits(2, (const int64_t[]){4, 3}, true);
    tn_tensor *t = targets(1, (const int64_t[]){4}, (const int64_t[]){0, 2, 1, -100});
    tt_assert_grad_fn(tn_nll_loss(x, t, NULL, TN_REDUCTION_MEAN, -100), "NllLossBackward0");
    tt_assert_grad_fn(tn_nll_loss(x, t, NULL, TN_REDUCTION_NONE, -100), "NllLossBackward0");
    tn_tensor *x4 = logits(4, (const int64_t[]){2, 3, 2, 2}, true);
    tn_tensor *t3 = targets(3, (const int64_t[]){2, 2, 2}, (const int64_t[]){0, 1, 2, 0, 1, 1, 2, 0});
    tt_assert_grad_fn(tn_nll_loss(x4, t3, NULL, TN_REDUCTION_NONE, -100), "NllLoss2DBackward0");
    tn_tensor *x3 = logits(3, (const int64_t[]){2, 3, 4}, true);
    tn_tensor *t2 = targets(2, (const int64_t[]){2, 4}, (const int64_t[]){0, 1, 2, 0, 1, 1, 2, 0});
    tt_assert_grad_fn(tn_nll_loss(x3, t2, NULL, TN_REDUCTION_MEAN, -100), "NllLoss2DBackward0");
    tt_assert_grad_fn(tn_nll_loss(x3, t2, NULL, TN_REDUCTION_NONE, -100), "ViewBackward0");
    tt_assert_grad_fn(tn_cross_entropy_ex(x, t, NULL, TN_REDUCTION_MEAN, -100, 0.1), "AddBackward0");
    /* the defaults take the fused kernel: tn_cross_entropy's values and node */
    tn_tensor *a = tn_cross_entropy_ex(x, t, NULL, TN_REDUCTION_MEAN, -100, 0);
    tt_assert_grad_fn(a, "NllLossBackward0");
    double va, vb;
    assert_int_equal(tn_item(a, &va), TN_OK);
    assert_int_equal(tn_item(tn_cross_entropy(x, t), &vb), TN_OK);
    assert_true(va == vb);
    /* everything ignored: mean is NaN, sum 0; no target gets a gradient */
    tn_tensor *none = targets(1, (const int64_t[]){4}, (const int64_t[]){-100, -100, -100, -100});
    assert_int_equal(tn_item(tn_nll_loss(x, none, NULL, TN_REDUCTION_MEAN, -100), &va), TN_OK);
    assert_true(isnan(va));
    tn_tensor *s = tn_nll_loss(x, none, NULL, TN_REDUCTION_SUM, -100);
    assert_int_equal(tn_item(s, &va), TN_OK);
    assert_true(va == 0);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 12, 0);
    tn_scope_end();
}

static void check_error(tn_tensor *r, tn_status st, const char *text) {
    assert_null(r);
    tt_assert_error(st, text);
    tn_clear_error();
}

static void errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = logits(2, (const int64_t[]){4, 3}, true);
    tn_tensor *t = targets(1, (const int64_t[]){4}, (const int64_t[]){0, 2, 1, 2});
    tn_tensor *t3 = targets(1, (const int64_t[]){3}, (const int64_t[]){0, 2, 1});
    tn_tensor *bad = targets(1, (const int64_t[]){4}, (const int64_t[]){0, 1, 2, 5});
    tn_tensor *neg = targets(1, (const int64_t[]){4}, (const int64_t[]){0, 1, 2, -1});
    tn_tensor *w4 = tn_ones(1, (const int64_t[]){4}, TN_F64);
    check_error(tn_nll_loss(x, t3, NULL, TN_REDUCTION_MEAN, -100), TN_ERR_SHAPE,
                "Expected input batch_size (4) to match target batch_size (3).");
    check_error(tn_nll_loss(x, bad, NULL, TN_REDUCTION_MEAN, -100), TN_ERR_INDEX,
                "Target 5 is out of bounds.");
    check_error(tn_nll_loss(x, neg, NULL, TN_REDUCTION_SUM, -100), TN_ERR_INDEX,
                "Target -1 is out of bounds.");
    check_error(tn_nll_loss(x, tn_to(t, TN_F32, TN_DEVICE_KEEP), NULL, TN_REDUCTION_MEAN, -100),
                TN_ERR_DTYPE, "expected scalar type Long but found Float");
    check_error(tn_nll_loss(x, t, w4, TN_REDUCTION_MEAN, -100), TN_ERR_SHAPE,
                "weight tensor should be defined either for all 3 classes or no classes but got "
                "weight tensor of shape: [4]");
    check_error(tn_nll_loss(x, t, NULL, (tn_reduction)7, -100), TN_ERR_INVALID_ARGUMENT,
                "7 is not a valid value for reduction");
    check_error(tn_nll_loss(tn_to(x, TN_I32, TN_DEVICE_KEEP), t, NULL, TN_REDUCTION_MEAN, -100),
                TN_ERR_DTYPE, "\"nll_loss_out_frame\" not implemented for 'Int'");
    tn_tensor *x4 = logits(4, (const int64_t[]){2, 3, 2, 2}, false);
    tn_tensor *t2 = targets(2, (const int64_t[]){2, 2}, (const int64_t[]){0, 1, 2, 0});
    check_error(tn_nll_loss(x4, t2, NULL, TN_REDUCTION_MEAN, -100), TN_ERR_SHAPE,
                "only batches of spatial targets supported (3D tensors) but got targets of "
                "dimension: 2");
    tn_tensor *x5 = logits(3, (const int64_t[]){2, 3, 4}, false);
    tn_tensor *t5 = targets(2, (const int64_t[]){2, 3}, (const int64_t[]){0, 1, 2, 0, 1, 2});
    check_error(tn_nll_loss(x5, t5, NULL, TN_REDUCTION_MEAN, -100), TN_ERR_SHAPE,
                "Expected target size [2, 4], got [2, 3]");
    check_error(tn_cross_entropy_ex(x, t, NULL, TN_REDUCTION_MEAN, -100, 1.5),
                TN_ERR_INVALID_ARGUMENT, "label_smoothing must be between 0.0 and 1.0. Got: 1.5");
    tn_tensor *prob = tn_full(2, (const int64_t[]){4, 3}, TN_F64, 1.0 / 3);
    check_error(tn_cross_entropy_ex(x, prob, NULL, TN_REDUCTION_MEAN, 1, 0),
                TN_ERR_INVALID_ARGUMENT, "ignore_index is not supported for floating point target");
    check_error(tn_cross_entropy_ex(x, t3, NULL, TN_REDUCTION_SUM, -100, 0.1), TN_ERR_SHAPE,
                "Expected input batch_size (4) to match target batch_size (3).");
    check_error(tn_nll_loss(NULL, t, NULL, TN_REDUCTION_MEAN, -100), TN_ERR_INVALID_ARGUMENT,
                "tn_nll_loss: argument 'input' is NULL");
    assert_false(tn_requires_grad(t)); /* inputs untouched */
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(grad_fn_names), TT_TEST(errors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
