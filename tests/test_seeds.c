/* tests/test_seeds.c — docs/semantics.md §1: what aliases share, and every
 * "Consequences" scenario, with the values real PyTorch (1.13) gives. */
#include "util.h"

#include <string.h>

#define SIGMOID_MSG_PREFIX                                                                         \
    "one of the variables needed for gradient computation has been modified by an "                \
    "inplace operation: [float32 [3]], which is output 0 of SigmoidBackward0, is at "              \
    "version 1; expected version 0 instead."

static tn_tensor *vec3(float x, float y, float z, bool rg) {
    const int64_t shape[] = {3};
    const float v[] = {x, y, z};
    return tt_f32(1, shape, v, rg);
}

/* torch.tensor(v, requires_grad=rg): a 0-dim float32 leaf. */
static tn_tensor *scalar(double v, bool rg) {
    tn_tensor *t = tn_scalar(v, TN_F32);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

static double item(const tn_tensor *t) {
    double v = 0;
    assert_int_equal(tn_item(t, &v), TN_OK);
    return v;
}

static void assert_prefix(const char *msg, const char *prefix) {
    if (strncmp(msg, prefix, strlen(prefix)) != 0)
        fail_msg("message \"%s\" does not start with \"%s\"", msg, prefix);
}

/* ---- the alias table ------------------------------------------------------- */

static void view_shares_storage_and_version(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *v = tn_narrow(a, 0, 1, 2);
    assert_non_null(v);
    assert_true(tn_shares_storage(a, v));
    assert_true(tn_requires_grad(v));
    assert_false(tn_is_leaf(v));
    assert_string_equal(tn_grad_fn_name(v), "SliceBackward0");
    tn_tensor *d = tn_detach(a);
    tn_tensor *dv = tn_narrow(d, 0, 0, 2);
    assert_int_equal(tn_add_scalar_(dv, 1), TN_OK); /* bumps the shared counter */
    assert_int_equal(tn_version(a), 1);
    assert_int_equal(tn_version(v), 1);
    assert_int_equal(tn_version(dv), 1);
    tn_scope_end();
}

static void detach_shares_storage_and_version(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    tn_tensor *d = tn_detach(h);
    assert_non_null(d);
    assert_true(tn_shares_storage(h, d));
    assert_false(tn_requires_grad(d));
    assert_true(tn_is_leaf(d));
    assert_null(tn_grad_fn_name(d));
    assert_int_equal(tn_mul_scalar_(d, 3), TN_OK);
    assert_int_equal(tn_version(h), 1);
    assert_int_equal(tn_version(d), 1);
    tt_assert_close(h, (double[]){6, 12, 18}, 3, 0);
    tn_scope_end();
}

static void data_shares_storage_not_version(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, false);
    assert_int_equal(tn_add_scalar_(a, 1), TN_OK);
    assert_int_equal(tn_requires_grad_(a, true), TN_OK);
    tn_tensor *d = tn_data(a);
    assert_non_null(d);
    assert_true(tn_shares_storage(a, d));
    assert_int_equal(tn_version(d), 0); /* a new counter at 0 */
    assert_false(tn_requires_grad(d));
    assert_true(tn_is_leaf(d));
    assert_null(tn_grad_fn_name(d));
    assert_int_equal(tn_zero_(d), TN_OK);
    assert_int_equal(tn_version(d), 1);
    assert_int_equal(tn_version(a), 1); /* untouched by the write through .data */
    tt_assert_close(a, (double[]){0, 0, 0}, 3, 0);
    tn_scope_end();
}

static void clone_is_a_deep_copy_with_history(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, false);
    assert_int_equal(tn_add_scalar_(a, 1), TN_OK);
    assert_int_equal(tn_requires_grad_(a, true), TN_OK);
    tn_tensor *c = tn_clone(a);
    assert_non_null(c);
    assert_false(tn_shares_storage(a, c));
    assert_int_equal(tn_version(c), 0);
    assert_true(tn_requires_grad(c));
    assert_false(tn_is_leaf(c));
    assert_string_equal(tn_grad_fn_name(c), "CloneBackward0");
    tn_tensor *n = tn_clone(tn_detach(a)); /* clone of a no-grad tensor: plain leaf */
    assert_false(tn_requires_grad(n));
    assert_null(tn_grad_fn_name(n));
    tn_scope_end();
}

static void new_tensor_is_a_fresh_leaf(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, false);
    assert_int_equal(tn_add_scalar_(a, 1), TN_OK);
    assert_int_equal(tn_requires_grad_(a, true), TN_OK);
    tn_tensor *n = tn_new_tensor(a, TN_DTYPE_SAME, TN_DEVICE_KEEP, false);
    assert_non_null(n);
    assert_false(tn_shares_storage(a, n));
    assert_int_equal(tn_version(n), 0);
    assert_false(tn_requires_grad(n));
    assert_true(tn_is_leaf(n));
    assert_null(tn_grad_fn_name(n));
    assert_int_equal(tn_dtype_of(n), TN_F32);
    tt_assert_close(n, (double[]){2, 3, 4}, 3, 0);
    tn_tensor *r = tn_new_tensor(a, TN_F64, TN_DEVICE_KEEP, true);
    assert_non_null(r);
    assert_true(tn_requires_grad(r));
    assert_true(tn_is_leaf(r));
    assert_int_equal(tn_dtype_of(r), TN_F64);
    tn_scope_end();
}

/* ---- the consequences ---------------------------------------------------- */

/* out.data.zero_(): no error, silently wrong gradient [0, 0, 0]. */
static void data_zero_gives_silently_wrong_grad(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = tn_sigmoid(a);
    tn_tensor *d = tn_data(out);
    assert_int_equal(tn_zero_(d), TN_OK);
    assert_int_equal(tn_version(d), 1);
    assert_int_equal(tn_version(out), 0);
    assert_string_equal(tn_grad_fn_name(out), "SigmoidBackward0");
    assert_int_equal(tn_backward(tn_sum(out), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){0, 0, 0}, 3, 0);
    tn_scope_end();
}

/* The same graph without the write: the correct gradient. */
static void sigmoid_grad_reference(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    assert_int_equal(tn_backward(tn_sum(tn_sigmoid(a)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){0.1966119259595871, 0.10499362647533417, 0.04517665505409241}, 3,
                   1e-6);
    tn_scope_end();
}

/* out.detach().zero_(): the shared counter moves, backward refuses. */
static void detach_zero_is_detected(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = tn_sigmoid(a);
    assert_int_equal(tn_zero_(tn_detach(out)), TN_OK);
    assert_int_equal(tn_version(out), 1);
    tn_tensor *s = tn_sum(out);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_int_equal(tn_last_status(), TN_ERR_INPLACE_MODIFIED);
    assert_prefix(tn_last_error(), SIGMOID_MSG_PREFIX);
    assert_non_null(strstr(tn_last_error(), "Hint: "));
    assert_null(tn_grad(a)); /* nothing reached the leaf */
    tn_scope_end();
}

/* b = a*2 saves nothing of b; b.detach().zero_() then backward is fine;
 * b.zero_() rebases b's history onto ZeroBackward0. */
static void scalar_mul_then_zero_rebases(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = scalar(1, true);
    tn_tensor *b = tn_mul_scalar(a, 2);
    assert_int_equal(tn_zero_(tn_detach(b)), TN_OK);
    assert_int_equal(tn_version(b), 1);
    assert_int_equal(tn_backward(b, NULL, true), TN_OK);
    tt_assert_grad(a, (double[]){2}, 1, 0);

    assert_int_equal(tn_zero_(b), TN_OK); /* non-leaf: allowed */
    assert_string_equal(tn_grad_fn_name(b), "ZeroBackward0");
    assert_int_equal(tn_version(b), 2);
    assert_false(tn_is_leaf(b));
    tn_tensor *g = tn_grad(a); /* a.grad.zero_() */
    assert_non_null(g);
    assert_int_equal(tn_zero_(g), TN_OK);
    tt_assert_grad(a, (double[]){0}, 1, 0);
    assert_int_equal(tn_backward(b, NULL, true), TN_OK);
    tt_assert_grad(a, (double[]){0}, 1, 0);

    assert_int_equal(tn_zero_grad(a), TN_OK); /* a.grad = None: backward gives a zero grad */
    assert_null(tn_grad(a));
    assert_int_equal(tn_backward(b, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){0}, 1, 0);
    tn_scope_end();
}

/* y = a**2; a_ = a.clone(); z = a_*3; y.backward(); z.backward() -> a.grad 5. */
static void clone_gradient_flows_to_source(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = scalar(1, true);
    tn_tensor *y = tn_pow_scalar(a, 2);
    tn_tensor *a_ = tn_clone(a);
    tn_tensor *z = tn_mul_scalar(a_, 3);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){2}, 1, 0);
    assert_int_equal(tn_backward(z, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){5}, 1, 0);
    tn_clear_error();
    assert_null(tn_grad(a_)); /* non-leaf: None (warns), not an error */
    assert_int_equal(tn_last_status(), TN_OK);
    tn_scope_end();
}

/* a_ = a.clone(); a_.add_(1): a 1, a_ 2 (AddBackward0); a_.backward() -> 1. */
static void clone_then_inplace(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = scalar(1, true);
    tn_tensor *a_ = tn_clone(a);
    assert_int_equal(tn_add_scalar_(a_, 1), TN_OK);
    assert_true(item(a) == 1);
    assert_true(item(a_) == 2);
    assert_int_equal(tn_version(a), 0);
    assert_int_equal(tn_version(a_), 1);
    assert_string_equal(tn_grad_fn_name(a_), "AddBackward0");
    assert_int_equal(tn_backward(a_, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){1}, 1, 0);
    tn_scope_end();
}

/* a_ = a.detach(); a_.requires_grad_(); z = a_*3 -> a_.grad 3, a.grad None. */
static void detach_then_requires_grad(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = scalar(1, true);
    tn_tensor *a_ = tn_detach(a);
    assert_int_equal(tn_requires_grad_(a_, true), TN_OK);
    assert_true(tn_is_leaf(a_));
    assert_true(tn_requires_grad(a_));
    tn_tensor *z = tn_mul_scalar(a_, 3);
    assert_int_equal(tn_backward(z, NULL, false), TN_OK);
    tt_assert_grad(a_, (double[]){3}, 1, 0);
    assert_null(tn_grad(a));
    tn_scope_end();
}

/* a_ = a.detach(); a_.add_(1): a is 2, a._version 1; a_.backward() fails. */
static void detach_then_inplace(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = scalar(1, true);
    tn_tensor *a_ = tn_detach(a);
    assert_int_equal(tn_add_scalar_(a_, 1), TN_OK);
    assert_true(item(a) == 2);
    assert_int_equal(tn_version(a), 1);
    assert_int_equal(tn_version(a_), 1);
    assert_true(tn_requires_grad(a));
    assert_int_equal(tn_backward(a_, NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "element 0 of tensors does not require grad and does not have a grad_fn");
    tn_scope_end();
}

/* a.copy_(b), a not requiring grad, b requiring it: CopyBackwards, not a
 * leaf, version +1, a keeps its dtype; backward reaches b. */
static void copy_from_requires_grad_source(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t shape[] = {3};
    tn_tensor *a = tn_zeros(1, shape, TN_F32);
    tn_tensor *b = tt_f64(1, shape, (double[]){1, 2, 3}, true);
    assert_int_equal(tn_copy_(a, b), TN_OK);
    assert_true(tn_requires_grad(a));
    assert_string_equal(tn_grad_fn_name(a), "CopyBackwards");
    assert_false(tn_is_leaf(a));
    assert_int_equal(tn_version(a), 1);
    assert_int_equal(tn_dtype_of(a), TN_F32);
    assert_false(tn_shares_storage(a, b));
    tt_assert_close(a, (double[]){1, 2, 3}, 3, 0);
    tn_tensor *w = vec3(1, 2, 3, false);
    assert_int_equal(tn_backward(tn_sum(tn_mul(a, w)), NULL, false), TN_OK);
    tn_tensor *g = tn_grad(b);
    assert_non_null(g);
    assert_int_equal(tn_dtype_of(g), TN_F64);
    tt_assert_close(g, (double[]){1, 2, 3}, 3, 0);
    tn_scope_end();
}

/* The seed-004 correction: copy_ into a leaf that requires grad fails. */
static void copy_into_grad_leaf_fails(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *b = vec3(4, 5, 6, false);
    assert_true(tn_copy_(a, b) < 0);
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "a leaf Variable that requires grad is being used in an in-place operation.");
    tt_assert_close(a, (double[]){1, 2, 3}, 3, 0);
    assert_int_equal(tn_version(a), 0);
    tn_scope_end();
}

/* y.detach_() on a leaf: returns y itself, requires_grad false, leaf. */
static void detach_inplace_on_leaf(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = vec3(1, 2, 3, true);
    tn_tensor *r = tn_detach_(y);
    assert_ptr_equal(r, y);
    assert_false(tn_requires_grad(y));
    assert_true(tn_is_leaf(y));
    assert_null(tn_grad_fn_name(y));
    assert_int_equal(tn_version(y), 0);
    tn_scope_end();
}

static void detach_inplace_on_nonleaf(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    assert_ptr_equal(tn_detach_(h), h);
    assert_false(tn_requires_grad(h));
    assert_true(tn_is_leaf(h));
    assert_null(tn_grad_fn_name(h));
    assert_int_equal(tn_version(h), 0);
    tt_assert_close(h, (double[]){2, 4, 6}, 3, 0);
    tn_scope_end();
}

static void detach_inplace_on_view_fails(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = vec3(1, 2, 3, true);
    tn_tensor *v = tn_narrow(y, 0, 0, 2);
    assert_non_null(v);
    assert_null(tn_detach_(v));
    tt_assert_error(TN_ERR_AUTOGRAD, "Can't detach views in-place. Use detach() instead.");
    assert_true(tn_requires_grad(v)); /* unchanged */
    assert_string_equal(tn_grad_fn_name(v), "SliceBackward0");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(view_shares_storage_and_version),
        TT_TEST(detach_shares_storage_and_version),
        TT_TEST(data_shares_storage_not_version),
        TT_TEST(clone_is_a_deep_copy_with_history),
        TT_TEST(new_tensor_is_a_fresh_leaf),
        TT_TEST(data_zero_gives_silently_wrong_grad),
        TT_TEST(sigmoid_grad_reference),
        TT_TEST(detach_zero_is_detected),
        TT_TEST(scalar_mul_then_zero_rebases),
        TT_TEST(clone_gradient_flows_to_source),
        TT_TEST(clone_then_inplace),
        TT_TEST(detach_then_requires_grad),
        TT_TEST(detach_then_inplace),
        TT_TEST(copy_from_requires_grad_source),
        TT_TEST(copy_into_grad_leaf_fails),
        TT_TEST(detach_inplace_on_leaf),
        TT_TEST(detach_inplace_on_nonleaf),
        TT_TEST(detach_inplace_on_view_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
