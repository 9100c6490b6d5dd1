/* View ops, cat and stack: geometry, sharing, gradients and errors, checked
 * against PyTorch 1.13 / 2.x (values computed with /usr/bin/python3). */
#include <math.h>
#include <string.h>

#include "util.h"
#include "engine/core/internal.h" /* tn__dense_block */

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})
#define N(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* float32 tensor start, start+1, ... of the given shape (torch.arange(...).reshape). */
static tn_tensor *seq(int nd, const int64_t *shape, double start, bool rg) {
    float v[256];
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    assert_true(n <= 256);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(start + (double)i);
    return tt_f32(nd, shape, v, rg);
}

static void assert_geom(const tn_tensor *t, int nd, const int64_t *shape, const int64_t *stride) {
    assert_non_null(t);
    assert_int_equal(tn_ndim(t), nd);
    for (int i = 0; i < nd; i++) {
        assert_int_equal(tn_shape(t)[i], shape[i]);
        if (stride) assert_int_equal(tn_stride(t)[i], stride[i]);
    }
}

/* backward of y with upstream gradient 1, 2, 3, ... (y's shape). */
static void backward_seq(tn_tensor *y) {
    tn_tensor *w = seq(tn_ndim(y), tn_shape(y), 1, false);
    assert_int_equal(tn_backward(y, w, false), TN_OK);
    tn_release(w);
}

/* ---- view / reshape --------------------------------------------------------------------- */

static void test_view_shares(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, false);
    tn_tensor *v = tn_view(x, 2, S(3, -1));
    assert_geom(v, 2, S(3, 2), S(2, 1));
    assert_true(tn_shares_storage(x, v));
    tt_assert_grad_fn(v, NULL);
    assert_int_equal(tn_mul_scalar_(v, 2), TN_OK);
    assert_int_equal(tn_version(x), 1);
    assert_int_equal(tn_version(v), 1);
    tt_assert_close(x, D(0, 2, 4, 6, 8, 10), 6, 0);
    /* a view of a view shares the same counter */
    tn_tensor *vv = tn_view(v, 1, S(-1));
    assert_geom(vv, 1, S(6), S(1));
    assert_int_equal(tn_add_scalar_(vv, 1), TN_OK);
    assert_int_equal(tn_version(x), 2);
    tt_assert_close(v, D(1, 3, 5, 7, 9, 11), 6, 0);
    /* 0-dim <-> 1-element */
    tn_tensor *s = tn_scalar(3, TN_F32), *s1 = tn_view(s, 2, S(1, -1)), *s0 = tn_view(s1, 0, NULL);
    assert_geom(s1, 2, S(1, 1), S(1, 1));
    assert_geom(s0, 0, NULL, NULL);
    tt_assert_close(s0, D(3), 1, 0);
    tn_release(s0);
    tn_release(s1);
    tn_release(s);
    tn_release(vv);
    tn_release(v);
    tn_release(x);
}

static void test_view_grad(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, true);
    tn_tensor *v = tn_view(x, 2, S(3, 2));
    tt_assert_grad_fn(v, "ViewBackward0");
    assert_true(tn_requires_grad(v));
    assert_false(tn_is_leaf(v));
    backward_seq(v);
    tt_assert_grad(x, D(1, 2, 3, 4, 5, 6), 6, 0);
    tn_release(v);
    tn_release(x);
}

static void test_view_errors(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, false);
    tn_tensor *t = tn_transpose(x, 0, 1);
    assert_null(tn_view(t, 1, S(6)));
    tt_assert_error(TN_ERR_SHAPE,
                    "view size is not compatible with input tensor's size and stride "
                    "(at least one dimension spans across two contiguous subspaces).");
    assert_null(tn_view(x, 2, S(2, 4)));
    tt_assert_error(TN_ERR_SHAPE, "shape '[2, 4]' is invalid for input of size 6");
    assert_null(tn_reshape(x, 2, S(-1, 4)));
    tt_assert_error(TN_ERR_SHAPE, "shape '[-1, 4]' is invalid for input of size 6");
    assert_null(tn_view(x, 2, S(-1, -1)));
    tt_assert_error(TN_ERR_SHAPE, "only one dimension can be inferred");
    assert_null(tn_view(x, 2, S(-2, 3)));
    tt_assert_error(TN_ERR_SHAPE, "invalid shape dimension -2");
    tn_tensor *e = tn_zeros(2, S(0, 3), TN_F32);
    assert_null(tn_reshape(e, 2, S(-1, 0)));
    tt_assert_error(TN_ERR_SHAPE,
                    "cannot reshape tensor of 0 elements into shape [-1, 0] because "
                    "the unspecified dimension size -1 can be any value and is ambiguous");
    tn_tensor *e2 = tn_view(e, 3, S(3, 0, 5));
    assert_geom(e2, 3, S(3, 0, 5), NULL);
    assert_null(tn_view(NULL, 1, S(6)));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    assert_null(tn_view(x, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 6)));
    assert_int_equal(tn_last_status(), TN_ERR_SHAPE);
    assert_int_equal(tn_version(x), 0);
    tn_release(e2);
    tn_release(e);
    tn_release(t);
    tn_release(x);
}

static void test_reshape(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, true);
    tn_tensor *r = tn_reshape(x, 2, S(3, 2)); /* viewable: a view */
    tt_assert_grad_fn(r, "ViewBackward0");
    assert_true(tn_shares_storage(r, x));
    tn_tensor *t = tn_transpose(x, 0, 1);
    tn_tensor *c = tn_reshape(t, 1, S(6)); /* not viewable: a copy */
    tt_assert_grad_fn(c, "UnsafeViewBackward0");
    assert_false(tn_shares_storage(c, x));
    assert_geom(c, 1, S(6), S(1));
    tt_assert_close(c, D(0, 3, 1, 4, 2, 5), 6, 0);
    backward_seq(c);
    tt_assert_grad(x, D(1, 3, 5, 2, 4, 6), 6, 0);
    /* reshape of a non-contiguous tensor that still allows a view */
    tn_tensor *n = tn_narrow(x, 1, 1, 2);
    tn_tensor *nv = tn_reshape(n, 3, S(2, 1, 2));
    tt_assert_grad_fn(nv, "ViewBackward0");
    assert_geom(nv, 3, S(2, 1, 2), S(3, 2, 1));
    tn_release(nv);
    tn_release(n);
    tn_release(c);
    tn_release(t);
    tn_release(r);
    tn_release(x);
}

static void test_flatten_contiguous(void **state) {
    tn_tensor *x = seq(3, S(2, 3, 4), 0, true);
    tn_tensor *t = tn_transpose(x, 1, 2);
    tn_tensor *f = tn_flatten(t, 1, -1);
    tt_assert_grad_fn(f, "UnsafeViewBackward0");
    assert_geom(f, 2, S(2, 12), S(12, 1));
    tt_assert_close(
        f, D(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23),
        24, 0);
    backward_seq(f);
    tt_assert_grad(
        x, D(1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12, 13, 16, 19, 22, 14, 17, 20, 23, 15, 18, 21, 24),
        24, 0);
    tn_tensor *f2 = tn_flatten(x, 0, 1);
    tt_assert_grad_fn(f2, "ViewBackward0");
    assert_geom(f2, 2, S(6, 4), S(4, 1));
    tn_tensor *same = tn_flatten(x, 1, 1); /* torch returns self */
    assert_ptr_equal(same, x);
    tn_tensor *s = tn_scalar(2, TN_F32), *s1 = tn_flatten(s, 0, -1);
    assert_geom(s1, 1, S(1), S(1));
    assert_null(tn_flatten(x, 2, 1));
    tt_assert_error(TN_ERR_INDEX,
                    "flatten() has invalid args: start_dim cannot come after end_dim");
    assert_null(tn_flatten(x, 0, 3));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-3, 2], but "
                                  "got 3)");
    /* contiguous: the same tensor when already contiguous, else a copy */
    tn_tensor *c0 = tn_contiguous(x);
    assert_ptr_equal(c0, x);
    tn_tensor *c1 = tn_contiguous(t);
    tt_assert_grad_fn(c1, "CloneBackward0");
    assert_false(tn_shares_storage(c1, x));
    assert_true(tn_is_contiguous(c1));
    assert_geom(c1, 3, S(2, 4, 3), S(12, 3, 1));
    tt_assert_close(
        c1, D(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23),
        24, 0);
    tn_release(c1);
    tn_release(c0);
    tn_release(s1);
    tn_release(s);
    tn_release(same);
    tn_release(f2);
    tn_release(f);
    tn_release(t);
    tn_release(x);
}

/* ---- transpose / permute ---------------------------------------------------------------- */

static void test_transpose_permute(void **state) {
    tn_tensor *x = seq(3, S(2, 3, 4), 0, true);
    tn_tensor *t = tn_transpose(x, 0, -1);
    tt_assert_grad_fn(t, "TransposeBackward0");
    assert_geom(t, 3, S(4, 3, 2), S(1, 4, 12));
    assert_true(tn_shares_storage(t, x));
    assert_false(tn_is_contiguous(t));
    backward_seq(t);
    tt_assert_grad(
        x, D(1, 7, 13, 19, 3, 9, 15, 21, 5, 11, 17, 23, 2, 8, 14, 20, 4, 10, 16, 22, 6, 12, 18, 24),
        24, 0);
    tn_set_grad(x, NULL);
    tn_tensor *p = tn_permute(x, 3, (const int[]){2, 0, 1});
    tt_assert_grad_fn(p, "PermuteBackward0");
    assert_geom(p, 3, S(4, 2, 3), S(1, 12, 4));
    double pv[24];
    assert_int_equal(tn_copy_to_f64(p, pv, 24), TN_OK);
    assert_true(pv[1] == 4 && pv[6] == 1 && pv[7] == 5);
    backward_seq(p);
    tt_assert_grad(
        x, D(1, 7, 13, 19, 2, 8, 14, 20, 3, 9, 15, 21, 4, 10, 16, 22, 5, 11, 17, 23, 6, 12, 18, 24),
        24, 0);
    /* 0-dim transpose is allowed */
    tn_tensor *s = tn_scalar(1, TN_F32), *st = tn_transpose(s, 0, -1);
    assert_geom(st, 0, NULL, NULL);
    assert_null(tn_transpose(x, 0, 3));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-3, 2], but "
                                  "got 3)");
    assert_null(tn_permute(x, 2, (const int[]){1, 0}));
    tt_assert_error(TN_ERR_SHAPE,
                    "number of dimensions in the tensor input does not match the "
                    "length of the desired ordering of dimensions i.e. input.dim() = 3 is not "
                    "equal to len(dims) = 2");
    assert_null(tn_permute(x, 3, (const int[]){1, 1, 0}));
    tt_assert_error(TN_ERR_SHAPE, "permute(): duplicate dims are not allowed.");
    assert_null(tn_permute(x, 3, (const int[]){0, 1, 3}));
    assert_int_equal(tn_last_status(), TN_ERR_INDEX);
    assert_null(tn_permute(x, 3, NULL));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_release(st);
    tn_release(s);
    tn_release(p);
    tn_release(t);
    tn_release(x);
}

/* ---- narrow / select -------------------------------------------------------------------- */

static void test_narrow_select(void **state) {
    tn_tensor *x = seq(2, S(3, 4), 0, true);
    tn_tensor *n = tn_narrow(x, 1, 1, 2);
    tt_assert_grad_fn(n, "SliceBackward0");
    assert_geom(n, 2, S(3, 2), S(4, 1));
    tt_assert_close(n, D(1, 2, 5, 6, 9, 10), 6, 0);
    backward_seq(n);
    tt_assert_grad(x, D(0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0), 12, 0);
    tn_set_grad(x, NULL);
    tn_tensor *s = tn_select(x, 0, -1);
    tt_assert_grad_fn(s, "SelectBackward0");
    assert_geom(s, 1, S(4), S(1));
    tt_assert_close(s, D(8, 9, 10, 11), 4, 0);
    backward_seq(s);
    tt_assert_grad(x, D(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4), 12, 0);
    /* narrow with a negative start, of length 0 at the end, select of a narrow */
    tn_tensor *n2 = tn_narrow(x, 0, -1, 1), *n3 = tn_narrow(x, 0, 3, 0);
    tt_assert_close(n2, D(8, 9, 10, 11), 4, 0);
    assert_geom(n3, 2, S(0, 4), NULL);
    tn_tensor *sn = tn_select(n, 1, 1);
    tt_assert_close(sn, D(2, 6, 10), 3, 0);
    assert_true(tn_shares_storage(sn, x));
    tn_release(sn);
    tn_release(n3);
    tn_release(n2);
    tn_release(s);
    tn_release(n);
    tn_release(x);
}

static void test_narrow_select_errors(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, false), *s = tn_scalar(1, TN_F32);
    assert_null(tn_narrow(x, 0, 2, 1));
    tt_assert_error(TN_ERR_SHAPE, "start (2) + length (1) exceeds dimension size (2).");
    assert_null(tn_narrow(x, 0, 3, 0));
    tt_assert_error(TN_ERR_INDEX, "start out of range (expected to be in range of [-2, 2], but got "
                                  "3)");
    assert_null(tn_narrow(x, 0, 1, -1));
    tt_assert_error(TN_ERR_SHAPE, "narrow(): length must be non-negative.");
    assert_null(tn_narrow(s, 0, 0, 1));
    tt_assert_error(TN_ERR_SHAPE, "narrow() cannot be applied to a 0-dim tensor.");
    assert_null(tn_narrow(x, 2, 0, 1));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-2, 1], but "
                                  "got 2)");
    assert_null(tn_select(x, 1, 3));
    tt_assert_error(TN_ERR_INDEX, "select(): index 3 out of range for tensor of size [2, 3] at "
                                  "dimension 1");
    assert_null(tn_select(x, 1, -4));
    tt_assert_error(TN_ERR_INDEX, "select(): index -4 out of range for tensor of size [2, 3] at "
                                  "dimension 1");
    assert_null(tn_select(s, 0, 0));
    tt_assert_error(TN_ERR_INDEX, "select() cannot be applied to a 0-dim tensor.");
    tn_clear_error();
    assert_null(tn_select(NULL, 0, 0));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_release(s);
    tn_release(x);
}

/* Double backward: the backward of narrow/select is itself differentiable. */
static void test_slice_double_backward(void **state) {
    for (int sel = 0; sel < 2; sel++) {
        tn_tensor *x = seq(2, S(3, 4), 0, true);
        tn_tensor *s = sel ? tn_select(x, 1, 2) : tn_narrow(x, 1, 1, 2);
        tn_tensor *y = tn_mul(s, s);
        tn_tensor *ones = tn_ones(tn_ndim(y), tn_shape(y), TN_F32), *g = NULL;
        assert_int_equal(tn_autograd_grad(1, &y, &ones, 1, &x, &g, false, true), TN_OK);
        tt_assert_grad_fn(g, sel ? "SelectBackwardBackward0" : "SliceBackwardBackward0");
        if (sel)
            tt_assert_close(g, D(0, 0, 4, 0, 0, 0, 12, 0, 0, 0, 20, 0), 12, 0);
        else
            tt_assert_close(g, D(0, 2, 4, 0, 0, 10, 12, 0, 0, 18, 20, 0), 12, 0);
        backward_seq(g);
        if (sel)
            tt_assert_grad(x, D(0, 0, 6, 0, 0, 0, 14, 0, 0, 0, 22, 0), 12, 0);
        else
            tt_assert_grad(x, D(0, 4, 6, 0, 0, 12, 14, 0, 0, 20, 22, 0), 12, 0);
        tn_release(g);
        tn_release(ones);
        tn_release(y);
        tn_release(s);
        tn_release(x);
    }
}

/* ---- expand ----------------------------------------------------------------------------- */

static void test_expand(void **state) {
    tn_tensor *x = seq(2, S(3, 1), 0, true);
    tn_tensor *e = tn_expand(x, 3, S(2, -1, 4));
    tt_assert_grad_fn(e, "ExpandBackward0");
    assert_geom(e, 3, S(2, 3, 4), S(0, 1, 0));
    assert_true(tn_shares_storage(e, x));
    backward_seq(e);
    tt_assert_grad(x, D(68, 100, 132), 3, 0);
    tn_tensor *s = tn_scalar(5, TN_F32), *se = tn_expand(s, 2, S(2, 2));
    assert_geom(se, 2, S(2, 2), S(0, 0));
    tt_assert_close(se, D(5, 5, 5, 5), 4, 0);
    tn_tensor *same = tn_expand(x, 2, S(-1, -1));
    assert_geom(same, 2, S(3, 1), S(1, 1));
    tn_tensor *lead = tn_expand(x, 3, S(1, 3, 1));
    assert_geom(lead, 3, S(1, 3, 1), S(3, 1, 1));
    tn_tensor *zero = tn_expand(x, 3, S(0, 3, 2));
    assert_geom(zero, 3, S(0, 3, 2), S(0, 1, 0));

    assert_null(tn_expand(x, 3, S(-1, 3, 1)));
    tt_assert_error(TN_ERR_SHAPE,
                    "The expanded size of the tensor (-1) isn't allowed in a leading, "
                    "non-existing dimension 0");
    assert_null(tn_expand(x, 1, S(3)));
    tt_assert_error(TN_ERR_SHAPE,
                    "expand(float32{[3, 1]}, size=[3]): the number of sizes provided "
                    "(1) must be greater or equal to the number of dimensions in the tensor (2)");
    assert_null(tn_expand(x, 2, S(4, 2)));
    tt_assert_error(
        TN_ERR_SHAPE,
        "The expanded size of the tensor (4) must match the existing size "
        "(3) at non-singleton dimension 0.  Target sizes: [4, 2].  Tensor sizes: [3, 1]");
    assert_null(tn_expand(x, 2, S(3, -2)));
    assert_int_equal(tn_last_status(), TN_ERR_SHAPE);
    tn_release(zero);
    tn_release(lead);
    tn_release(same);
    tn_release(se);
    tn_release(s);
    tn_release(e);
    tn_release(x);
}

/* ---- squeeze / unsqueeze ---------------------------------------------------------------- */

static void test_squeeze_unsqueeze(void **state) {
    tn_tensor *x = seq(4, S(2, 1, 3, 1), 0, true);
    tn_tensor *a = tn_squeeze(x), *b = tn_squeeze_dim(x, 1), *c = tn_squeeze_dim(x, 0);
    tt_assert_grad_fn(a, "SqueezeBackward0");
    tt_assert_grad_fn(b, "SqueezeBackward1");
    tt_assert_grad_fn(c, "SqueezeBackward1");
    assert_geom(a, 2, S(2, 3), S(3, 1));
    assert_geom(b, 3, S(2, 3, 1), S(3, 1, 1));
    assert_geom(c, 4, S(2, 1, 3, 1), S(3, 3, 1, 1));
    backward_seq(a);
    tt_assert_grad(x, D(1, 2, 3, 4, 5, 6), 6, 0);
    tn_tensor *u = tn_unsqueeze(a, 1), *u2 = tn_unsqueeze(x, -1), *u3 = tn_unsqueeze(b, 1);
    tt_assert_grad_fn(u, "UnsqueezeBackward0");
    assert_geom(u, 3, S(2, 1, 3), S(3, 3, 1));
    assert_geom(u2, 5, S(2, 1, 3, 1, 1), S(3, 3, 1, 1, 1));
    assert_geom(u3, 4, S(2, 1, 3, 1), S(3, 3, 1, 1));
    tn_set_grad(x, NULL);
    backward_seq(u);
    tt_assert_grad(x, D(1, 2, 3, 4, 5, 6), 6, 0);
    tn_tensor *s = tn_scalar(1, TN_F32), *s1 = tn_unsqueeze(s, -1), *s0 = tn_squeeze_dim(s, 0);
    assert_geom(s1, 1, S(1), S(1));
    assert_geom(s0, 0, NULL, NULL);
    assert_null(tn_squeeze_dim(x, 4));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-4, 3], but "
                                  "got 4)");
    assert_null(tn_unsqueeze(x, 5));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-5, 4], but "
                                  "got 5)");
    tn_tensor *big = tn_zeros(8, S(1, 1, 1, 1, 1, 1, 1, 1), TN_F32);
    assert_null(tn_unsqueeze(big, 0));
    assert_int_equal(tn_last_status(), TN_ERR_SHAPE);
    tn_release(big);
    tn_release(s0);
    tn_release(s1);
    tn_release(s);
    tn_release(u3);
    tn_release(u2);
    tn_release(u);
    tn_release(c);
    tn_release(b);
    tn_release(a);
    tn_release(x);
}

/* ---- in place through a view ------------------------------------------------------------ */

static void test_inplace_through_view(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, true);
    tn_tensor *base = tn_clone(x), *v = tn_narrow(base, 0, 0, 1);
    assert_int_equal(tn_mul_scalar_(v, 2), TN_OK);
    tt_assert_grad_fn(base, "CopySlices");
    tt_assert_grad_fn(v, "AsStridedBackward0");
    assert_int_equal(tn_version(base), 1);
    assert_int_equal(tn_version(v), 1);
    tt_assert_close(base, D(0, 2, 4, 3, 4, 5), 6, 0);
    tn_tensor *ones = tn_ones(2, S(2, 3), TN_F32);
    assert_int_equal(tn_backward(base, ones, false), TN_OK);
    tt_assert_grad(x, D(2, 2, 2, 1, 1, 1), 6, 0);
    tn_release(ones);
    tn_release(v);
    tn_release(base);
    tn_release(x);

    /* the brief's example, with a sum at the end */
    x = seq(1, S(4), 0, true);
    base = tn_clone(x);
    v = tn_narrow(base, 0, 0, 2);
    assert_int_equal(tn_mul_scalar_(v, 2), TN_OK);
    tn_tensor *sum = tn_sum(base);
    assert_int_equal(tn_backward(sum, NULL, false), TN_OK);
    tt_assert_grad(x, D(2, 2, 1, 1), 4, 0);
    tn_release(sum);
    tn_release(v);
    tn_release(base);
    tn_release(x);

    /* through a select of a transpose, with a multiplier that requires grad */
    x = seq(2, S(2, 3), 0, true);
    tn_tensor *one = tn_scalar(1, TN_F32);
    base = tn_mul(x, one);
    tn_tensor *t = tn_transpose(base, 0, 1), *col = tn_select(t, 0, 1), *m = tn_select(x, 1, 1);
    assert_int_equal(tn_mul_(col, m), TN_OK);
    tt_assert_close(base, D(0, 1, 2, 3, 16, 5), 6, 0);
    backward_seq(base);
    tt_assert_grad(x, D(1, 4, 3, 4, 40, 6), 6, 0);
    tn_release(m);
    tn_release(col);
    tn_release(t);
    tn_release(base);
    tn_release(one);
    tn_release(x);

    /* a view of a leaf that requires grad cannot be written */
    x = seq(1, S(4), 0, true);
    v = tn_narrow(x, 0, 0, 2);
    assert_int_equal(tn_mul_scalar_(v, 2), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "a view of a leaf Variable that requires grad is being used "
                                     "in an in-place operation.");
    assert_int_equal(tn_version(x), 0);
    tn_release(v);
    tn_release(x);
}

/* ---- cat / stack ------------------------------------------------------------------------ */

static void test_cat(void **state) {
    tn_tensor *a = seq(2, S(2, 3), 0, true);
    double bv[] = {10, 11, 12};
    tn_tensor *b = tt_f64(2, S(1, 3), bv, true);
    tn_tensor *c = tn_cat(2, (tn_tensor *[]){a, b}, 0);
    tt_assert_grad_fn(c, "CatBackward0");
    assert_int_equal(tn_dtype_of(c), TN_F64);
    assert_geom(c, 2, S(3, 3), S(3, 1));
    tt_assert_close(c, D(0, 1, 2, 3, 4, 5, 10, 11, 12), 9, 0);
    tn_tensor *w = tn_arange(1, 10, 1, TN_F64), *w2 = tn_reshape(w, 2, S(3, 3));
    assert_int_equal(tn_backward(c, w2, false), TN_OK);
    tt_assert_grad(a, D(1, 2, 3, 4, 5, 6), 6, 0);
    tt_assert_grad(b, D(7, 8, 9), 3, 0);
    tn_tensor *ga = tn_grad(a);
    assert_int_equal(tn_dtype_of(ga), TN_F32);
    tn_release(ga);
    tn_set_grad(a, NULL);

    /* along the last dim, from a non-contiguous input */
    tn_tensor *d = seq(2, S(2, 2), 10, true), *dt = tn_transpose(d, 0, 1);
    tn_tensor *c1 = tn_cat(2, (tn_tensor *[]){a, dt}, -1);
    assert_geom(c1, 2, S(2, 5), S(5, 1));
    tt_assert_close(c1, D(0, 1, 2, 10, 12, 3, 4, 5, 11, 13), 10, 0);
    backward_seq(c1);
    tt_assert_grad(a, D(1, 2, 3, 6, 7, 8), 6, 0);
    tt_assert_grad(d, D(4, 9, 5, 10), 4, 0);

    /* 1-d empty tensors are skipped, and still take part in dtype promotion */
    tn_tensor *e = tn_zeros(1, S(0), TN_F64), *z = tn_zeros(1, S(0), TN_F32);
    tn_requires_grad_(z, true);
    tn_tensor *c2 = tn_cat(3, (tn_tensor *[]){e, a, z}, 1);
    assert_int_equal(tn_dtype_of(c2), TN_F64);
    assert_geom(c2, 2, S(2, 3), NULL);
    tn_tensor *w6 = tn_ones(2, S(2, 3), TN_F64);
    assert_int_equal(tn_backward(c2, w6, false), TN_OK);
    tn_tensor *gz = tn_grad(z);
    assert_geom(gz, 1, S(0), NULL);
    tn_release(gz);
    tn_tensor *c3 = tn_cat(2, (tn_tensor *[]){e, z}, 5); /* all skipped: [0] */
    assert_geom(c3, 1, S(0), NULL);
    tn_tensor *i16 = tn_ones(1, S(2), TN_I16), *bo = tn_ones(1, S(2), TN_BOOL);
    tn_tensor *c4 = tn_cat(2, (tn_tensor *[]){bo, i16}, 0);
    assert_int_equal(tn_dtype_of(c4), TN_I16);
    tt_assert_grad_fn(c4, NULL);
    tn_release(c4);
    tn_release(bo);
    tn_release(i16);
    tn_release(c3);
    tn_release(w6);
    tn_release(c2);
    tn_release(z);
    tn_release(e);
    tn_release(c1);
    tn_release(dt);
    tn_release(d);
    tn_release(w2);
    tn_release(w);
    tn_release(c);
    tn_release(b);
    tn_release(a);
}

static void test_cat_errors(void **state) {
    tn_tensor *a = seq(2, S(2, 3), 0, false), *b = seq(2, S(1, 3), 0, false);
    tn_tensor *v = seq(1, S(3), 0, false), *s = tn_scalar(1, TN_F32);
    assert_null(tn_cat(2, (tn_tensor *[]){a, b}, 1));
    tt_assert_error(TN_ERR_SHAPE,
                    "Sizes of tensors must match except in dimension 1. Expected size "
                    "2 but got size 1 for tensor number 1 in the list.");
    assert_null(tn_cat(2, (tn_tensor *[]){a, v}, 0));
    tt_assert_error(TN_ERR_SHAPE, "Tensors must have same number of dimensions: got 2 and 1");
    assert_null(tn_cat(2, (tn_tensor *[]){a, s}, 0));
    tt_assert_error(TN_ERR_SHAPE, "zero-dimensional tensor (at position 1) cannot be concatenated");
    assert_null(tn_cat(0, NULL, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "expected a non-empty list of Tensors");
    assert_null(tn_cat(2, (tn_tensor *[]){a, NULL}, 0));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    assert_null(tn_cat(2, (tn_tensor *[]){a, a}, -3));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-2, 1], but "
                                  "got -3)");
    assert_null(tn_stack(2, (tn_tensor *[]){a, b}, 0));
    tt_assert_error(TN_ERR_SHAPE, "stack expects each tensor to be equal size, but got [2, 3] at "
                                  "entry 0 and [1, 3] at entry 1");
    assert_null(tn_stack(0, NULL, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "stack expects a non-empty TensorList");
    assert_null(tn_stack(2, (tn_tensor *[]){a, a}, 3));
    tt_assert_error(TN_ERR_INDEX, "Dimension out of range (expected to be in range of [-3, 2], but "
                                  "got 3)");
    tn_release(s);
    tn_release(v);
    tn_release(b);
    tn_release(a);
}

static void test_stack(void **state) {
    tn_tensor *a = seq(2, S(2, 3), 0, true), *b = seq(2, S(2, 3), 10, true);
    tn_tensor *st = tn_stack(2, (tn_tensor *[]){a, b}, 1);
    tt_assert_grad_fn(st, "StackBackward0");
    assert_geom(st, 3, S(2, 2, 3), S(6, 3, 1));
    tt_assert_close(st, D(0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15), 12, 0);
    backward_seq(st);
    tt_assert_grad(a, D(1, 2, 3, 7, 8, 9), 6, 0);
    tt_assert_grad(b, D(4, 5, 6, 10, 11, 12), 6, 0);
    tn_tensor *l = tn_stack(2, (tn_tensor *[]){a, b}, -1);
    assert_geom(l, 3, S(2, 3, 2), S(6, 2, 1));
    tn_tensor *s0 = tn_scalar(1, TN_F32), *s1 = tn_scalar(2, TN_F64);
    tn_tensor *ss = tn_stack(2, (tn_tensor *[]){s0, s1}, 0);
    assert_geom(ss, 1, S(2), S(1));
    assert_int_equal(tn_dtype_of(ss), TN_F64);
    tt_assert_close(ss, D(1, 2), 2, 0);
    tn_release(ss);
    tn_release(s1);
    tn_release(s0);
    tn_release(l);
    tn_release(st);
    tn_release(b);
    tn_release(a);
}

/* Scopes: views made inside a scope are released at its end, the base lives on. */
static void test_scope(void **state) {
    tn_tensor *x = seq(2, S(2, 3), 0, true);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = tn_reshape(tn_transpose(tn_narrow(x, 1, 0, 2), 0, 1), 1, S(4));
    assert_non_null(y);
    tn_tensor *z =
        tn_cat(2,
               (tn_tensor *[]){
                   y, tn_flatten(tn_contiguous(tn_expand(tn_select(x, 0, 0), 2, S(1, 3))), 0, -1)},
               0);
    assert_geom(z, 1, S(7), NULL);
    tt_assert_close(z, D(0, 3, 1, 4, 0, 1, 2), 7, 0);
    tn_scope_end();
    tn_release(x);
}

/* Double backward through an in-place op that saves its output (exp_,
 * sigmoid_, relu_) on a view: c = clone(p), exp_ of c[1:4], s = sum(c*c).
 * ds/dp = [2 p0, 2 e^(2 p_i)], and d/dp sum((ds/dp)^2) = [8 p0, 16 e^(4 p_i)]
 * (torch gives the same). The saved output unpacks with the view's history
 * after the write, so the wrapped node never runs outside its CopySlices. */
static void test_double_backward_inplace_on_view(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const double pv[] = {0.5, -0.25, 0.1, 0.3};
    tn_tensor *p = tn_tensor_from(pv, TN_F64, 1, (const int64_t[]){4}, true);
    tn_tensor *c = tn_clone(p), *v = tn_narrow(c, 0, 1, 3);
    assert_int_equal(tn_exp_(v), TN_OK);
    tn_tensor *s = tn_sum(tn_mul(c, c)), *g = NULL, *gg = NULL;
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &p, &g, false, true), TN_OK);
    double want1[4] = {2 * pv[0]}, want2[4] = {8 * pv[0]};
    for (int i = 1; i < 4; i++) {
        want1[i] = 2 * exp(2 * pv[i]);
        want2[i] = 16 * exp(4 * pv[i]);
    }
    tt_assert_close(g, want1, 4, 1e-12);
    tn_tensor *s2 = tn_sum(tn_mul(g, g));
    assert_int_equal(tn_autograd_grad(1, &s2, NULL, 1, &p, &gg, false, false), TN_OK);
    tt_assert_close(gg, want2, 4, 1e-12);
    tn_release(g);
    tn_release(gg);
    tn_scope_end();
}

/* tn__dense_block: permuted contiguous views are one dense block (checked in place by the debug
 * modes on a device); slices, steps and broadcasts are not, unless broadcasts are skipped. */
static void test_dense_block(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = tn_zeros(3, (int64_t[]){2, 3, 4}, TN_F32);
    int64_t n = -1;
    assert_true(tn__dense_block(a, false, &n) && n == 24);
    tn_tensor *t = tn_transpose(a, 0, 2); /* (4, 3, 2), strides (1, 4, 12) */
    assert_false(tn_is_contiguous(t));
    assert_true(tn__dense_block(t, false, &n) && n == 24);
    tn_tensor *p = tn_permute(a, 3, (int[]){1, 2, 0});
    assert_true(tn__dense_block(p, false, &n) && n == 24);
    assert_true(tn__dense_block(tn_unsqueeze(t, 1), false, &n) && n == 24); /* size-1 dims */
    assert_false(tn__dense_block(tn_narrow(a, 2, 0, 3), false, &n));        /* a gap per row */
    assert_true(tn__dense_block(tn_narrow(a, 0, 1, 1), false, &n) && n == 12); /* a whole block */
    tn_tensor *e = tn_expand(tn_zeros(2, (int64_t[]){1, 4}, TN_F32), 2, (int64_t[]){5, 4});
    assert_false(tn__dense_block(e, false, &n)); /* stride 0: values repeat */
    assert_true(tn__dense_block(e, true, &n) && n == 4);
    assert_false(tn__dense_block(tn_zeros(2, (int64_t[]){0, 3}, TN_F32), true, &n)); /* empty */
    tn_tensor *s0 = tn_zeros(0, NULL, TN_F32);
    assert_true(tn__dense_block(s0, false, &n) && n == 1); /* a scalar */
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_view_shares),
        TT_TEST(test_view_grad),
        TT_TEST(test_view_errors),
        TT_TEST(test_reshape),
        TT_TEST(test_flatten_contiguous),
        TT_TEST(test_transpose_permute),
        TT_TEST(test_narrow_select),
        TT_TEST(test_narrow_select_errors),
        TT_TEST(test_slice_double_backward),
        TT_TEST(test_expand),
        TT_TEST(test_squeeze_unsqueeze),
        TT_TEST(test_inplace_through_view),
        TT_TEST(test_cat),
        TT_TEST(test_cat_errors),
        TT_TEST(test_stack),
        TT_TEST(test_scope),
        TT_TEST(test_double_backward_inplace_on_view),
        TT_TEST(test_dense_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
