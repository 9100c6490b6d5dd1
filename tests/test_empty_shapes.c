/* Stride, offset and size arithmetic on legal empty tensors with huge other
 * dims ({0, 2^62, 4} and every order of it). One rule: a shape with a zero
 * dim holds no element, whatever the product of the others, and every op
 * treats it so; a size that a result really needs and that does not fit
 * int64 is an error ("... overflows int64"). Run under UBSan in the asan
 * preset, where any signed overflow fails. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static const int64_t BIG = (int64_t)1 << 62;

static void check_shape(const tn_tensor *t, int ndim, const int64_t *shape, int line) {
    if (!t) fail_msg("line %d: NULL: %s", line, tn_last_error());
    bool same = tn_ndim(t) == ndim && tn_numel(t) == 0;
    for (int i = 0; same && i < ndim; i++) same = tn_shape(t)[i] == shape[i];
    if (!same) {
        char buf[256] = "";
        for (int i = 0, used = 0; i < tn_ndim(t) && used < 200; i++)
            used += snprintf(buf + used, sizeof buf - (size_t)used, "%lld ",
                             (long long)tn_shape(t)[i]);
        fail_msg("line %d: got shape [%s] (numel %lld)", line, buf, (long long)tn_numel(t));
    }
}
#define assert_shape(t, nd, ...) check_shape((t), (nd), (__VA_ARGS__), __LINE__)

/* Created in any order of dims; strides as PyTorch's contiguous rule
 * (products of max(size, 1), wrapping): torch.zeros(0, 2**62, 4).stride()
 * is (0, 4, 1). */
static void creation_any_order(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t orders[][3] = {{0, BIG, 4}, {BIG, 4, 0}, {4, 0, BIG}, {BIG, 0, BIG}};
    for (int i = 0; i < 4; i++) {
        tn_tensor *z = tn_zeros(3, orders[i], TN_F32);
        assert_shape(z, 3, orders[i]);
        tn_tensor *e = tn_empty(3, orders[i], TN_I64);
        assert_shape(e, 3, orders[i]);
        assert_shape(tn_full(3, orders[i], TN_F64, 2), 3, orders[i]);
        assert_shape(tn_rand(3, orders[i], TN_F32), 3, orders[i]);
    }
    tn_tensor *z = tn_zeros(3, orders[0], TN_F32);
    assert_int_equal(tn_stride(z)[0], 0);
    assert_int_equal(tn_stride(z)[1], 4);
    assert_int_equal(tn_stride(z)[2], 1);
    /* a non-empty size that overflows is still refused */
    assert_null(tn_zeros(2, (const int64_t[]){BIG, 4}, TN_F32));
    assert_int_equal(tn_last_status(), TN_ERR_SHAPE);
    tn_scope_end();
}

static void views_of_empty(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *f = tn_zeros(3, (const int64_t[]){0, BIG, 4}, TN_F32);
    assert_shape(tn_flatten(f, 0, -1), 1, (const int64_t[]){0});
    assert_shape(tn_flatten(f, 0, 1), 2, (const int64_t[]){0, 4});
    /* 2^62 * 4 elements in one dim: does not fit int64 */
    assert_null(tn_flatten(f, 1, 2));
    tt_assert_error(TN_ERR_SHAPE, "overflows int64");
    assert_shape(tn_reshape(f, 1, (const int64_t[]){0}), 1, (const int64_t[]){0});
    assert_shape(tn_view(f, 4, (const int64_t[]){0, BIG, 2, 2}), 4,
                 (const int64_t[]){0, BIG, 2, 2});
    assert_shape(tn_view(f, 2, (const int64_t[]){-1, 4}), 2, (const int64_t[]){0, 4});
    assert_null(tn_view(f, 2, (const int64_t[]){-1, 0}));
    tt_assert_error(TN_ERR_SHAPE, "the unspecified dimension size -1 can be any value");
    tn_tensor *p = tn_permute(f, 3, (const int[]){1, 2, 0});
    assert_shape(p, 3, (const int64_t[]){BIG, 4, 0});
    assert_shape(tn_transpose(f, 0, 2), 3, (const int64_t[]){4, BIG, 0});
    assert_shape(tn_contiguous(p), 3, (const int64_t[]){BIG, 4, 0});
    assert_shape(tn_clone(p), 3, (const int64_t[]){BIG, 4, 0});
    assert_shape(tn_flatten(p, 0, -1), 1, (const int64_t[]){0});
    assert_shape(tn_reshape(p, 2, (const int64_t[]){0, 7}), 2, (const int64_t[]){0, 7});
    assert_shape(tn_select(f, 1, BIG - 1), 2, (const int64_t[]){0, 4});
    assert_shape(tn_select(p, 0, BIG - 1), 2, (const int64_t[]){4, 0});
    assert_shape(tn_narrow(p, 0, BIG - 2, 2), 3, (const int64_t[]){2, 4, 0});
    assert_shape(tn_unsqueeze(p, 3), 4, (const int64_t[]){BIG, 4, 0, 1});
    assert_shape(tn_expand(f, 4, (const int64_t[]){BIG, 0, BIG, 4}), 4,
                 (const int64_t[]){BIG, 0, BIG, 4});
    assert_shape(tn_squeeze(tn_unsqueeze(f, 0)), 3, (const int64_t[]){0, BIG, 4});
    tn_scope_end();
}

static void joins_of_empty(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *e = tn_zeros(2, (const int64_t[]){0, BIG}, TN_F32);
    tn_tensor *two[] = {e, e};
    assert_shape(tn_stack(2, two, 0), 3, (const int64_t[]){2, 0, BIG});
    assert_shape(tn_stack(2, two, 2), 3, (const int64_t[]){0, BIG, 2});
    assert_shape(tn_cat(2, two, 0), 2, (const int64_t[]){0, BIG});
    /* 2^62 + 2^62 = 2^63 does not fit int64 */
    assert_null(tn_cat(2, two, 1));
    tt_assert_error(TN_ERR_SHAPE, "overflows int64");
    tn_tensor *s = tn_stack(2, two, 1);
    assert_shape(s, 3, (const int64_t[]){0, 2, BIG});
    tn_scope_end();
}

static void math_on_empty(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *f = tn_zeros(3, (const int64_t[]){BIG, 4, 0}, TN_F32);
    assert_int_equal(tn_requires_grad_(f, true), TN_OK);
    tn_tensor *g = tn_zeros(3, (const int64_t[]){BIG, 4, 0}, TN_F32);
    assert_shape(tn_add(f, g), 3, (const int64_t[]){BIG, 4, 0});
    assert_shape(tn_mul_scalar(tn_exp(f), 3), 3, (const int64_t[]){BIG, 4, 0});
    assert_shape(tn_sum_dim(f, 1, false), 2, (const int64_t[]){BIG, 0});
    /* reducing the empty dim leaves 2^64 elements: refused, nothing made */
    assert_null(tn_sum_dim(f, 2, false));
    tt_assert_error(TN_ERR_SHAPE, "overflows int64");
    assert_shape(tn_sum_dim(f, 0, true), 3, (const int64_t[]){1, 4, 0});
    tn_tensor *s = tn_sum(f);
    assert_non_null(s);
    tt_assert_close(s, (double[]){0}, 1, 0);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tn_tensor *gr = tn_grad(f);
    assert_shape(gr, 3, (const int64_t[]){BIG, 4, 0});
    assert_int_equal(tn_copy_(g, f), TN_OK);
    assert_int_equal(tn_zero_(g), TN_OK);
    /* matmul with an empty inner or outer dim */
    tn_tensor *a = tn_zeros(2, (const int64_t[]){3, 0}, TN_F32);
    tn_tensor *b = tn_ones(2, (const int64_t[]){0, 5}, TN_F32);
    tn_tensor *c = tn_matmul(a, b);
    assert_non_null(c);
    assert_int_equal(tn_numel(c), 15);
    tt_assert_close(tn_sum(c), (double[]){0}, 1, 0);
    tn_tensor *a2 = tn_zeros(2, (const int64_t[]){0, BIG}, TN_F32);
    tn_tensor *b2 = tn_zeros(2, (const int64_t[]){BIG, 0}, TN_F32);
    assert_shape(tn_matmul(a2, b2), 2, (const int64_t[]){0, 0});
    /* batched: (0, 2^33, 2^33) @ itself, and broadcast against a huge batch */
    const int64_t big3[] = {0, (int64_t)1 << 33, (int64_t)1 << 33};
    tn_tensor *e3 = tn_zeros(3, big3, TN_F32);
    assert_shape(tn_matmul(e3, e3), 3, big3);
    tn_tensor *w = tn_zeros(2, (const int64_t[]){(int64_t)1 << 33, 0}, TN_F32);
    assert_shape(tn_matmul(e3, w), 3, (const int64_t[]){0, (int64_t)1 << 33, 0});
    assert_shape(tn_linear(e3, tn_zeros(2, (const int64_t[]){0, (int64_t)1 << 33}, TN_F32), NULL),
                 3, (const int64_t[]){0, (int64_t)1 << 33, 0});
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    assert_int_equal(tn_print(f, tmp), TN_OK);
    char buf[512] = "";
    rewind(tmp);
    size_t got = fread(buf, 1, sizeof buf - 1, tmp);
    buf[got] = 0;
    fclose(tmp);
    assert_non_null(strstr(buf, "size=(4611686018427387904, 4, 0)"));
    tn_scope_end();
}

/* Ops that see a tensor as (outer, dim, inner): reductions along a dim,
 * softmax, max/argmax, with the huge dims on either side of the empty one. */
static void dim_ops_on_empty(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s4[] = {0, 2, BIG, 4}, s3[] = {BIG, 0, 4};
    tn_tensor *a = tn_zeros(4, s4, TN_F32), *b = tn_zeros(3, s3, TN_F64);
    assert_int_equal(tn_requires_grad_(a, true), TN_OK);
    assert_int_equal(tn_requires_grad_(b, true), TN_OK);
    for (int d = 0; d < 4; d++) {
        assert_shape(tn_softmax(a, d), 4, s4);
        assert_shape(tn_log_softmax(a, d), 4, s4);
    }
    assert_shape(tn_softmax(b, 0), 3, s3);
    assert_shape(tn_log_softmax(b, 2), 3, s3);
    assert_shape(tn_max_dim(a, 1, false), 3, (const int64_t[]){0, BIG, 4});
    assert_shape(tn_argmax_dim(a, 3, true), 4, (const int64_t[]){0, 2, BIG, 1});
    assert_shape(tn_mean_dim(a, 2, false), 3, (const int64_t[]){0, 2, 4});
    assert_shape(tn_sum_dim(b, 2, true), 3, (const int64_t[]){BIG, 0, 1});
    tn_tensor *m = tn_max_dim(a, 1, false);
    assert_int_equal(tn_backward(tn_sum(tn_mul(m, m)), NULL, false), TN_OK);
    tn_tensor *l = tn_sum(tn_log_softmax(b, 0));
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    assert_shape(tn_grad(b), 3, s3);
    /* a batch of none: the mean of no loss is NaN, as PyTorch's */
    tn_tensor *logits = tn_zeros(2, (const int64_t[]){0, 5}, TN_F32);
    tn_tensor *targets = tn_zeros(1, (const int64_t[]){0}, TN_I64);
    assert_int_equal(tn_requires_grad_(logits, true), TN_OK);
    tn_tensor *ce = tn_cross_entropy(logits, targets);
    assert_non_null(ce);
    double v = 0;
    assert_int_equal(tn_item(ce, &v), TN_OK);
    assert_true(isnan(v));
    assert_int_equal(tn_backward(ce, NULL, false), TN_OK);
    assert_shape(tn_grad(logits), 2, (const int64_t[]){0, 5});
    /* an empty dim cannot be reduced to a max */
    assert_null(tn_max_dim(b, 1, false));
    tn_scope_end();
}

/* Attention whose batch dims around an empty sequence multiply past int64: forward, backward
 * (the fused kernels) and backward under create_graph (the composed path and its dense masks)
 * make empty results at once, without walking the batch. */
static void attention_on_empty(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {BIG, BIG, 2, 0, 1};
    tn_tensor *q = tn_zeros(5, s, TN_F32);
    assert_int_equal(tn_requires_grad_(q, true), TN_OK);
    for (int pass = 0; pass < 4; pass++) {
        bool create = pass & 1, causal = pass & 2;
        tn_tensor *o = tn_scaled_dot_product_attention(q, q, q, NULL, 0, causal);
        assert_shape(o, 5, s);
        tn_tensor *l = tn_sum(o);
        assert_non_null(l);
        assert_int_equal(tn_backward_ex(l, NULL, create, create), TN_OK);
        assert_shape(tn_grad(q), 5, s);
        assert_int_equal(tn_zero_grad(q), TN_OK);
    }
    /* no key: each query row takes part with no key (its output is 0) */
    tn_tensor *k = tn_zeros(3, (const int64_t[]){2, 0, 4}, TN_F32);
    tn_tensor *q2 = tn_ones(3, (const int64_t[]){2, 3, 4}, TN_F32);
    assert_int_equal(tn_requires_grad_(q2, true), TN_OK);
    tn_tensor *o2 = tn_scaled_dot_product_attention(q2, k, k, NULL, 0, false);
    assert_non_null(o2);
    assert_int_equal(tn_numel(o2), 24);
    tt_assert_close(tn_sum(tn_abs(o2)), (double[]){0}, 1, 0);
    assert_int_equal(tn_backward_ex(tn_sum(o2), NULL, true, true), TN_OK);
    assert_non_null(tn_grad(q2));
    tt_assert_close(tn_sum(tn_abs(tn_grad(q2))), (double[]){0}, 1, 0);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(creation_any_order),
        TT_TEST(views_of_empty),
        TT_TEST(joins_of_empty),
        TT_TEST(math_on_empty),
        TT_TEST(dim_ops_on_empty),
        TT_TEST(attention_on_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
