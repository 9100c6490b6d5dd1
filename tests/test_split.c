/* tests/test_split.c — split, split_with_sizes, chunk and unbind beyond the op table: the
 * pieces' shapes and counts (PyTorch 1.13's, incl. empty dims), the ownership API (count
 * query, capacity, scopes), grad_fn names, gradients into unused pieces, the multi-output view
 * rules of in-place writes, and the error texts. Also the *_like factories and min/argmin. */
#include "util.h"

#include <math.h>
#include <string.h>

static tn_tensor *arange_f64(int nd, const int64_t *shape, bool rg) {
    double v[64];
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i;
    return tt_f64(nd, shape, v, rg);
}

static void assert_shape(const tn_tensor *t, int nd, const int64_t *shape) {
    assert_non_null(t);
    assert_int_equal(tn_ndim(t), nd);
    for (int d = 0; d < nd; d++)
        assert_int_equal(tn_size(t, d), shape[d]);
}

static void split_shapes(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = arange_f64(2, (const int64_t[]){5, 3}, false), *out[8];
    int n = -1;
    assert_int_equal(tn_split(x, 2, 0, out, 8, &n), TN_OK);
    assert_int_equal(n, 3);
    assert_shape(out[2], 2, (const int64_t[]){1, 3});
    tt_assert_close(out[1], (const double[]){6, 7, 8, 9, 10, 11}, 6, 0);
    assert_true(tn_shares_storage(out[1], x));
    /* the count only */
    n = -1;
    assert_int_equal(tn_split(x, 2, 0, NULL, 0, &n), TN_OK);
    assert_int_equal(n, 3);
    /* too small an array: nothing made, the count said */
    out[0] = x;
    assert_int_equal(tn_split(x, 1, 0, out, 4, &n), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(n, 5);
    assert_null(out[0]);
    /* chunk: ceil-sized pieces, fewer when they run out */
    tn_tensor *v6 = arange_f64(1, (const int64_t[]){6}, false);
    assert_int_equal(tn_chunk(v6, 4, 0, out, &n), TN_OK);
    assert_int_equal(n, 3);
    assert_shape(out[2], 1, (const int64_t[]){2});
    tn_tensor *v5 = arange_f64(1, (const int64_t[]){5}, false);
    assert_int_equal(tn_chunk(v5, 4, -1, out, &n), TN_OK);
    assert_int_equal(n, 3);
    assert_shape(out[2], 1, (const int64_t[]){1});
    /* an empty dim: chunk gives `chunks` empty pieces, split one */
    tn_tensor *e = tn_zeros(1, (const int64_t[]){0}, TN_F32);
    assert_int_equal(tn_chunk(e, 4, 0, out, &n), TN_OK);
    assert_int_equal(n, 4);
    assert_shape(out[3], 1, (const int64_t[]){0});
    assert_int_equal(tn_split(e, 0, 0, out, 8, &n), TN_OK);
    assert_int_equal(n, 1);
    assert_int_equal(tn_split(e, 2, 0, out, 8, &n), TN_OK);
    assert_int_equal(n, 1);
    /* split larger than the dim: one piece */
    assert_int_equal(tn_split(v5, 9, 0, out, 8, &n), TN_OK);
    assert_int_equal(n, 1);
    assert_shape(out[0], 1, (const int64_t[]){5});
    /* ... however large (x.split(2**63 - 1): ceil(len / size) formed len + size, which overflowed)
     */
    assert_int_equal(tn_split(v5, INT64_MAX, 0, out, 8, &n), TN_OK);
    assert_int_equal(n, 1);
    assert_shape(out[0], 1, (const int64_t[]){5});
    /* with sizes */
    assert_int_equal(tn_split_with_sizes(x, 3, (const int64_t[]){1, 0, 2}, 1, out), TN_OK);
    assert_shape(out[1], 2, (const int64_t[]){5, 0});
    tt_assert_close(out[2], (const double[]){1, 2, 4, 5, 7, 8, 10, 11, 13, 14}, 10, 0);
    /* unbind */
    assert_int_equal(tn_unbind(x, 1, out, 8, &n), TN_OK);
    assert_int_equal(n, 3);
    tt_assert_close(out[2], (const double[]){2, 5, 8, 11, 14}, 5, 0);
    tn_tensor *e2 = tn_zeros(2, (const int64_t[]){0, 3}, TN_F32);
    assert_int_equal(tn_unbind(e2, 0, out, 8, &n), TN_OK);
    assert_int_equal(n, 0);
    tn_scope_end();
}

/* Outside any scope the caller owns each piece. */
static void pieces_owned_by_caller(void **state) {
    (void)state;
    tn_tensor *x = arange_f64(1, (const int64_t[]){4}, false), *out[4];
    int n;
    assert_int_equal(tn_unbind(x, 0, out, 4, &n), TN_OK);
    tn_release(x);
    double v;
    assert_int_equal(tn_item(out[3], &v), TN_OK);
    assert_true(v == 3);
    for (int k = 0; k < n; k++)
        tn_release(out[k]);
}

static void grad_fns_and_gradients(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = arange_f64(2, (const int64_t[]){5, 3}, true), *out[8];
    int n;
    assert_int_equal(tn_split(x, 2, 0, out, 8, &n), TN_OK);
    tt_assert_grad_fn(out[0], "SplitBackward0");
    tt_assert_grad_fn(out[2], "SplitBackward0");
    /* only the middle piece used: zeros elsewhere */
    assert_int_equal(tn_backward(tn_sum(out[1]), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0}, 15, 0);
    assert_int_equal(tn_chunk(x, 2, 1, out, &n), TN_OK);
    tt_assert_grad_fn(out[1], "SplitBackward0");
    assert_int_equal(tn_split_with_sizes(x, 2, (const int64_t[]){4, 1}, 0, out), TN_OK);
    tt_assert_grad_fn(out[1], "SplitWithSizesBackward0");
    assert_int_equal(tn_unbind(x, 1, out, 8, &n), TN_OK);
    tt_assert_grad_fn(out[1], "UnbindBackward0");
    tn_zero_grad(x);
    tn_tensor *s = tn_add(tn_mul_scalar(out[0], 2), out[2]);
    assert_int_equal(tn_backward(tn_sum(s), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1}, 15, 0);
    tn_scope_end();
}

#define MULTI_TAIL                                                                                 \
    "This view is the output of a function that returns multiple views. Such functions do not "  \
    "allow the output views to be modified inplace. You should replace the inplace operation by " \
    "an out-of-place one."

static void inplace_on_pieces(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = arange_f64(2, (const int64_t[]){5, 3}, true), *out[8];
    tn_tensor *y = tn_mul_scalar(x, 1);
    int n;
    assert_int_equal(tn_split(y, 2, 0, out, 8, &n), TN_OK);
    int64_t v0 = tn_version(y);
    assert_int_equal(tn_add_scalar_(out[0], 1), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "Output 0 of SplitBackward0 is a view and is being modified inplace. " MULTI_TAIL);
    assert_int_equal(tn_version(y), v0);
    /* a view of a piece keeps the rule */
    tn_tensor *row = tn_select(out[1], 0, 0);
    assert_int_equal(tn_mul_scalar_(row, 2), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "Output 0 of SelectBackward0 is a view and is being "
                                     "modified inplace. " MULTI_TAIL);
    /* the base written: using a piece fails */
    assert_int_equal(tn_add_scalar_(y, 1), TN_OK);
    assert_null(tn_sum(out[0]));
    tt_assert_error(TN_ERR_AUTOGRAD, "Output 0 of SplitBackward0 is a view and its base or "
                                     "another view of its base has been modified inplace. " MULTI_TAIL);
    /* nothing requires grad: allowed */
    tn_tensor *z = arange_f64(2, (const int64_t[]){5, 3}, false);
    assert_int_equal(tn_unbind(z, 0, out, 8, &n), TN_OK);
    assert_int_equal(tn_add_scalar_(out[0], 1), TN_OK);
    /* a piece of a tensor that needs no grad, written with one that does */
    tn_tensor *w = arange_f64(1, (const int64_t[]){3}, true);
    assert_int_equal(tn_add_(out[1], w), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "A view was created in no_grad mode and is being modified "
                                     "inplace with grad mode enabled. " MULTI_TAIL);
    /* in no-grad mode the write goes through */
    tn_set_grad_enabled(false);
    assert_int_equal(tn_split(y, 2, 0, out, 8, &n), TN_OK);
    tn_set_grad_enabled(true);
    assert_int_equal(tn_split(y, 2, 0, out, 8, &n), TN_OK);
    tn_set_grad_enabled(false);
    assert_int_equal(tn_add_scalar_(out[0], 1), TN_OK);
    tn_set_grad_enabled(true);
    tn_scope_end();
}

static void split_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *out[8];
    int n;
    tn_tensor *x = arange_f64(1, (const int64_t[]){3}, false);
    tn_tensor *s = tn_scalar(1, TN_F32);
    assert_int_equal(tn_split(x, 0, 0, out, 8, &n), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE,
                    "split_size can only be 0 if dimension size is 0, but got dimension size of 3");
    assert_null(out[0]);
    assert_int_equal(tn_split(x, -1, 0, out, 8, &n), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "split expects split_size be non-negative, but got split_size=-1");
    assert_int_equal(tn_split_with_sizes(x, 2, (const int64_t[]){1, 1}, 0, out), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "split_with_sizes expects split_sizes to sum exactly to 3 (input "
                                  "tensor's size at dimension 0), but got split_sizes=[1, 1]");
    assert_int_equal(tn_split_with_sizes(x, 2, (const int64_t[]){4, -1}, 0, out), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "split_with_sizes expects split_sizes have only non-negative "
                                  "entries, but got split_sizes=[4, -1]");
    assert_int_equal(tn_chunk(x, 0, 0, out, &n), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "chunk expects `chunks` to be greater than 0, got: 0");
    assert_int_equal(tn_chunk(s, 1, 0, out, &n), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "chunk expects at least a 1-dimensional tensor");
    assert_int_equal(tn_split(s, 1, 0, out, 8, &n), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "split expects at least a 1-dimensional tensor");
    assert_int_equal(tn_unbind(s, 0, out, 8, &n), TN_ERR_INDEX);
    tt_assert_error(TN_ERR_INDEX, "Dimension specified as 0 but tensor has no dimensions");
    assert_int_equal(tn_unbind(x, 1, out, 8, &n), TN_ERR_INDEX);
    tt_assert_error(TN_ERR_INDEX,
                    "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    /* a NULL input after a failure keeps the failure */
    assert_int_equal(tn_split(tn_add(x, tn_zeros(1, (const int64_t[]){2}, TN_F32)), 1, 0, out,
                              8, &n),
                     TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "The size of tensor a (3) must match");
    tn_clear_error();
    assert_int_equal(tn_unbind(NULL, 0, out, 8, &n), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_unbind: argument 'self' is NULL");
    tn_scope_end();
}

/* ---- *_like ------------------------------------------------------------------------------ */

static void like_factories(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tn_transpose(arange_f64(2, (const int64_t[]){2, 3}, true), 0, 1);
    tn_tensor *r[] = {tn_zeros_like(x), tn_ones_like(x), tn_full_like(x, 2.5), tn_empty_like(x),
                      tn_rand_like(x), tn_randn_like(x)};
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        assert_shape(r[k], 2, (const int64_t[]){3, 2});
        assert_int_equal(tn_dtype_of(r[k]), TN_F64);
        assert_false(tn_requires_grad(r[k]));
        assert_false(tn_shares_storage(r[k], x));
    }
    tt_assert_close(r[2], (const double[]){2.5, 2.5, 2.5, 2.5, 2.5, 2.5}, 6, 0);
    tt_assert_close(r[1], (const double[]){1, 1, 1, 1, 1, 1}, 6, 0);
    /* the generator: the same seed, the same values */
    tn_manual_seed(7);
    tn_tensor *a = tn_randn_like(x);
    tn_manual_seed(7);
    tn_tensor *b = tn_randn(2, (const int64_t[]){3, 2}, TN_F64);
    double va[6];
    assert_int_equal(tn_copy_to_f64(a, va, 6), TN_OK);
    tt_assert_close(b, va, 6, 0);
    /* integers: full_like rounds toward zero and refuses what does not fit */
    tn_tensor *i = tn_zeros(1, (const int64_t[]){2}, TN_I64);
    tt_assert_close(tn_full_like(i, 2.5), (const double[]){2, 2}, 2, 0);
    assert_null(tn_full_like(i, 1e30));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "value cannot be converted to type");
    assert_null(tn_rand_like(i));
    assert_int_equal(tn_last_status(), TN_ERR_DTYPE);
    tn_clear_error(); /* else the NULL below passes that failure on */
    assert_null(tn_zeros_like(NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_zeros_like: argument 'self' is NULL");
    tn_scope_end();
}

/* ---- min along a dim, argmin --------------------------------------------------------------- */

static void min_argmin(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double v[] = {1, 0, 0, 2, 2, -1, 5, NAN, 0};
    tn_tensor *x = tt_f64(2, (const int64_t[]){3, 3}, v, true), *idx = NULL;
    tn_tensor *m = tn_min_dim_with_indices(x, 1, false, &idx);
    tt_assert_grad_fn(m, "MinBackward0");
    tt_assert_close(m, (const double[]){0, -1, NAN}, 3, 0);
    assert_int_equal(tn_dtype_of(idx), TN_I64);
    assert_false(tn_requires_grad(idx));
    tt_assert_close(idx, (const double[]){1, 2, 1}, 3, 0);
    tn_tensor *M = tn_max_dim_with_indices(x, 0, true, &idx);
    tt_assert_grad_fn(M, "MaxBackward0");
    assert_shape(idx, 2, (const int64_t[]){1, 3});
    tt_assert_close(idx, (const double[]){2, 2, 0}, 3, 0);
    tt_assert_close(tn_argmin_dim(x, 1, false), (const double[]){1, 2, 1}, 3, 0);
    tt_assert_close(tn_argmin(x), (const double[]){7}, 1, 0);
    tt_assert_close(tn_min_dim(x, 0, false), (const double[]){1, NAN, -1}, 3, 0);
    /* the gradient goes to the first minimum */
    tn_tensor *y = tt_f64(2, (const int64_t[]){2, 3}, (const double[]){1, 0, 0, 2, 2, -1}, true);
    assert_int_equal(tn_backward(tn_sum(tn_min_dim(y, 1, false)), NULL, false), TN_OK);
    tt_assert_grad(y, (const double[]){0, 1, 0, 0, 0, 1}, 6, 0);
    /* errors */
    tn_tensor *b = tn_ones(1, (const int64_t[]){2}, TN_BOOL);
    assert_null(tn_argmin(b));
    tt_assert_error(TN_ERR_DTYPE, "\"argmin_cpu\" not implemented for 'bool'");
    tn_tensor *e = tn_zeros(2, (const int64_t[]){0, 3}, TN_F32);
    assert_null(tn_min_dim_with_indices(e, 0, false, &idx));
    assert_null(idx);
    tt_assert_error(TN_ERR_INDEX, "min(): Expected reduction dim 0 to have non-zero size.");
    assert_null(tn_argmin(e));
    tt_assert_error(TN_ERR_INDEX,
                    "argmin(): Expected reduction dim to be specified for input.numel() == 0.");
    assert_null(tn_max_dim_with_indices(x, 0, false, NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_max_dim_with_indices: argument 'indices'");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(split_shapes),   TT_TEST(pieces_owned_by_caller), TT_TEST(grad_fns_and_gradients),
        TT_TEST(inplace_on_pieces), TT_TEST(split_errors),       TT_TEST(like_factories),
        TT_TEST(min_argmin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
