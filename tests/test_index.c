/* tests/test_index.c — the indexing and mask ops beyond the golden values:
 * grad_fn names, dtypes (int32 indices, integer and bool data), in-place
 * rules of masked_fill_, saved-index version checks, and the determinism
 * of the accumulating backward passes (embedding, index_select,
 * scatter_add): the same bits for any thread count, equal to a serial sum
 * in index order. */
#include "util.h"

#include <tenet/testing.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tn_tensor *i64(int nd, const int64_t *shape, const int64_t *v) {
    tn_tensor *t = tn_tensor_from(v, TN_I64, nd, shape, false);
    assert_non_null(t);
    return t;
}

/* float32 tensor with smooth, distinct values (not in any scope). */
static tn_tensor *f32s(int nd, const int64_t *shape, int salt, bool rg) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)sin(0.37 * (double)i + salt) * 1.7f;
    tn_tensor *t = tt_f32(nd, shape, v, rg);
    free(v);
    return t;
}

static void grad_fn_names(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = f32s(2, (const int64_t[]){4, 3}, 0, true);
    tn_tensor *idx = i64(1, (const int64_t[]){2}, (const int64_t[]){1, 3});
    tn_tensor *g = i64(2, (const int64_t[]){1, 3}, (const int64_t[]){0, 3, 1});
    tn_tensor *m = tn_ones(1, (const int64_t[]){3}, TN_BOOL);
    tt_assert_grad_fn(tn_embedding(w, idx), "EmbeddingBackward0");
    tt_assert_grad_fn(tn_index_select(w, 0, idx), "IndexSelectBackward0");
    tt_assert_grad_fn(tn_gather(w, 0, g), "GatherBackward0");
    tt_assert_grad_fn(tn_scatter_add(w, 0, g, f32s(2, (const int64_t[]){1, 3}, 1, false)),
                      "ScatterAddBackward0");
    tt_assert_grad_fn(tn_where(m, w, w), "WhereBackward0");
    tt_assert_grad_fn(tn_masked_fill(w, m, 1), "MaskedFillBackward0");
    tt_assert_grad_fn(tn_tril(w, 0), "TrilBackward0");
    tt_assert_grad_fn(tn_triu(w, 0), "TriuBackward0");
    /* in place on a non-leaf, and through a view of it */
    tn_tensor *y = tn_mul_scalar(w, 2);
    int64_t v0 = tn_version(y);
    assert_int_equal(tn_masked_fill_(y, m, 0.5), TN_OK);
    assert_int_equal(tn_version(y), v0 + 1);
    tt_assert_grad_fn(y, "MaskedFillBackward0");
    tn_tensor *row = tn_select(y, 0, 1);
    assert_int_equal(tn_masked_fill_(row, m, -1), TN_OK);
    tt_assert_grad_fn(y, "CopySlices");
    assert_int_equal(tn_version(y), v0 + 2);
    /* no grad: no history */
    tn_tensor *c = f32s(2, (const int64_t[]){4, 3}, 2, false);
    tt_assert_grad_fn(tn_embedding(c, idx), NULL);
    tn_scope_end();
}

static void dtypes(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = f32s(2, (const int64_t[]){4, 3}, 0, false);
    const int32_t i32v[] = {3, 0, 3};
    tn_tensor *i32 = tn_tensor_from(i32v, TN_I32, 1, (const int64_t[]){3}, false);
    tn_tensor *i64t = i64(1, (const int64_t[]){3}, (const int64_t[]){3, 0, 3});
    tn_tensor *e32 = tn_embedding(w, i32), *e64 = tn_embedding(w, i64t);
    tn_tensor *eq = tn_eq(e32, e64);
    double all;
    assert_int_equal(tn_item(tn_sum(eq), &all), TN_OK);
    assert_true(all == 9);
    assert_true(tn_index_select(w, 0, i32) != NULL);
    /* integer data: where promotes, masked_fill truncates, scatter_add of bools is or */
    tn_tensor *a =
        tn_tensor_from((const int64_t[]){1, 2, 3}, TN_I64, 1, (const int64_t[]){3}, false);
    tn_tensor *b =
        tn_tensor_from((const int32_t[]){7, 8, 9}, TN_I32, 1, (const int64_t[]){3}, false);
    tn_tensor *c =
        tn_tensor_from((const uint8_t[]){1, 0, 1}, TN_BOOL, 1, (const int64_t[]){3}, false);
    tn_tensor *r = tn_where(c, a, b);
    assert_int_equal(tn_dtype_of(r), TN_I64);
    tt_assert_close(r, (const double[]){1, 8, 3}, 3, 0);
    tn_tensor *f = tn_where(c, a, tn_scalar(0.5, TN_F32));
    assert_int_equal(tn_dtype_of(f), TN_F32);
    tt_assert_close(f, (const double[]){1, 0.5, 3}, 3, 0);
    tt_assert_close(tn_masked_fill(a, c, 2.7), (const double[]){2, 2, 2}, 3, 0);
    tn_tensor *bz = tn_zeros(1, (const int64_t[]){3}, TN_BOOL);
    tn_tensor *sidx = i64(1, (const int64_t[]){3}, (const int64_t[]){0, 0, 2});
    tn_tensor *sb = tn_scatter_add(bz, 0, sidx, c);
    assert_int_equal(tn_dtype_of(sb), TN_BOOL);
    tt_assert_close(sb, (const double[]){1, 0, 1}, 3, 0);
    tn_tensor *si = tn_scatter_add(a, 0, sidx, a);
    tt_assert_close(si, (const double[]){1 + 1 + 2, 2, 3 + 3}, 3, 0);
    /* tril / triu on integers and bools, batched */
    tn_tensor *ones = tn_ones(3, (const int64_t[]){2, 2, 3}, TN_BOOL);
    tt_assert_close(tn_tril(ones, 0), (const double[]){1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0}, 12, 0);
    tn_tensor *i = tn_ones(2, (const int64_t[]){2, 3}, TN_I16);
    tt_assert_close(tn_triu(i, 1), (const double[]){0, 1, 1, 0, 0, 1}, 6, 0);
    tt_assert_close(tn_triu(i, -5), (const double[]){1, 1, 1, 1, 1, 1}, 6, 0);
    /* the causal mask of attention: -inf above the diagonal, then softmax */
    tn_tensor *ones33 = tn_ones(2, (const int64_t[]){3, 3}, TN_F32);
    tn_tensor *above = tn_eq(tn_tril(ones33, 0), tn_scalar(0, TN_F32));
    tn_tensor *sm = tn_softmax(tn_masked_fill(ones33, above, -INFINITY), -1);
    tt_assert_close(sm, (const double[]){1, 0, 0, 0.5, 0.5, 0, 1 / 3., 1 / 3., 1 / 3.}, 9, 1e-6);
    /* 0-dim indices and inputs act as shape [1] (PyTorch) */
    tn_tensor *v3 = tt_f64(1, (const int64_t[]){3}, (const double[]){1, 2, 3}, false);
    tn_tensor *i0 = tn_tensor_from((const int64_t[]){2}, TN_I64, 0, NULL, false);
    tn_tensor *g0 = tn_gather(v3, 0, i0);
    assert_int_equal(tn_ndim(g0), 0);
    tt_assert_close(g0, (const double[]){3}, 1, 0);
    tt_assert_close(tn_scatter_add(v3, 0, i0, tn_scalar(5, TN_F64)), (const double[]){1, 2, 8}, 3,
                    0);
    /* a 0-D self or src counts as size 1 against the index (PyTorch's check; scatter_add
     * once read past a 3-element src for an index of 1000 into a 0-D self) */
    tn_tensor *sz = tn_scalar(0, TN_F64), *i1000 = tn_zeros(1, (const int64_t[]){1000}, TN_I64);
    assert_null(tn_scatter_add(sz, 0, i1000, v3));
    tt_assert_error(TN_ERR_SHAPE, "Expected index [1000] to be smaller than self [] apart from "
                                  "dimension 0 and to be smaller size than src [3]");
    assert_null(tn_scatter_add(v3, 0, tn_zeros(1, (const int64_t[]){5}, TN_I64), sz));
    tt_assert_error(TN_ERR_SHAPE, "Expected index [5] to be smaller than self [3] apart from "
                                  "dimension 0 and to be smaller size than src []");
    /* the mixes that are allowed, forward and backward (values from PyTorch 1.13) */
    tn_tensor *sa = tt_f64(0, NULL, (const double[]){0}, true);
    tn_tensor *ss = tt_f64(0, NULL, (const double[]){1}, true);
    tn_tensor *r0 = tn_scatter_add(sa, 0, tn_zeros(1, (const int64_t[]){1}, TN_I64), ss);
    tt_assert_close(r0, (const double[]){1}, 1, 0);
    assert_int_equal(tn_backward(r0, NULL, false), TN_OK);
    tt_assert_close(tn_grad(sa), (const double[]){1}, 1, 0);
    assert_int_equal(tn_ndim(tn_grad(ss)), 0);
    tt_assert_close(tn_grad(ss), (const double[]){1}, 1, 0);
    tn_tensor *a3 = tt_f64(1, (const int64_t[]){3}, (const double[]){0, 0, 0}, true);
    tn_tensor *s2 = tt_f64(1, (const int64_t[]){2}, (const double[]){5, 1}, true);
    tn_tensor *r1 = tn_scatter_add(a3, 0, i0, s2); /* index 2 (0-D) takes s2[0] */
    tt_assert_close(r1, (const double[]){0, 0, 5}, 3, 0);
    assert_int_equal(tn_backward(tn_sum(r1), NULL, false), TN_OK);
    tt_assert_close(tn_grad(a3), (const double[]){1, 1, 1}, 3, 0);
    tt_assert_close(tn_grad(s2), (const double[]){1, 0}, 2, 0); /* padded to src's shape */
    tn_tensor *se = tt_f64(0, NULL, (const double[]){4}, true);
    tn_tensor *r2 = tn_scatter_add(sa, 0, tn_zeros(1, (const int64_t[]){0}, TN_I64), se);
    tt_assert_close(r2, (const double[]){0}, 1, 0); /* an empty index adds nothing */
    assert_int_equal(tn_backward(r2, NULL, false), TN_OK);
    assert_int_equal(tn_ndim(tn_grad(se)), 0);
    tt_assert_close(tn_grad(se), (const double[]){0}, 1, 0);
    tn_tensor *s7 = tn_scalar(7, TN_F64);
    tt_assert_close(tn_gather(s7, 0, tn_zeros(1, (const int64_t[]){2}, TN_I64)),
                    (const double[]){7, 7}, 2, 0);
    tn_tensor *s7g = tt_f64(0, NULL, (const double[]){7}, true); /* its backward: scatter_add */
    tn_tensor *gg = tn_gather(s7g, 0, tn_zeros(1, (const int64_t[]){2}, TN_I64));
    assert_int_equal(tn_backward(tn_sum(gg), NULL, false), TN_OK);
    tt_assert_close(tn_grad(s7g), (const double[]){2}, 1, 0);
    /* empty tensors whose other dims are huge: nothing to do, no overflow */
    const int64_t big = (int64_t)1 << 62;
    tn_tensor *eb = tn_zeros(3, (const int64_t[]){big, 0, 4}, TN_F32);
    assert_int_equal(tn_requires_grad_(eb, true), TN_OK);
    tn_tensor *i2 = i64(1, (const int64_t[]){2}, (const int64_t[]){3, 0});
    tn_tensor *sel = tn_index_select(eb, 2, i2);
    assert_non_null(sel);
    assert_int_equal(tn_shape(sel)[0], big);
    assert_int_equal(tn_shape(sel)[2], 2);
    assert_int_equal(tn_backward(tn_sum(sel), NULL, false), TN_OK);
    tn_tensor *gbig = tn_zeros(3, (const int64_t[]){big, 0, 2}, TN_I64);
    assert_non_null(tn_gather(eb, 2, gbig));
    assert_non_null(tn_scatter_add(eb, 2, gbig, tn_zeros(3, (const int64_t[]){big, 0, 2}, TN_F32)));
    assert_non_null(tn_tril(eb, 0));
    assert_non_null(tn_masked_fill(eb, tn_ones(1, (const int64_t[]){4}, TN_BOOL), 1));
    /* empty shapes */
    tn_tensor *e0 = tn_embedding(w, tn_zeros(1, (const int64_t[]){0}, TN_I64));
    assert_int_equal(tn_shape(e0)[0], 0);
    assert_int_equal(tn_shape(e0)[1], 3);
    tn_scope_end();
}

/* The saved index is checked at backward like any saved tensor. */
static void saved_index_modified(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = f32s(2, (const int64_t[]){4, 3}, 0, true);
    tn_tensor *idx = i64(1, (const int64_t[]){2}, (const int64_t[]){1, 3});
    tn_tensor *g = i64(2, (const int64_t[]){1, 3}, (const int64_t[]){0, 3, 1});
    tn_tensor *e = tn_sum(tn_embedding(w, idx)), *h = tn_sum(tn_gather(w, 0, g));
    assert_int_equal(tn_zero_(idx), TN_OK);
    assert_int_equal(tn_zero_(g), TN_OK);
    assert_int_equal(tn_backward(e, NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_int_equal(tn_backward(h, NULL, false), TN_ERR_INPLACE_MODIFIED);
    tn_scope_end();
}

/* Gradient of sum(out * gw) w.r.t. x, copied out as floats. */
static void grad_of(tn_tensor *out, tn_tensor *x, float *dst, int64_t n) {
    tn_tensor *gw = f32s(tn_ndim(out), tn_shape(out), 5, false);
    tn_tensor *l = tn_sum(tn_mul(out, gw));
    assert_non_null(l);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    tn_tensor *g = tn_grad(x);
    assert_non_null(g);
    assert_int_equal(tn_dtype_of(g), TN_F32);
    memcpy(dst, tn_data_ptr(g), (size_t)n * sizeof *dst);
    tn_release(g);
    assert_int_equal(tn_set_grad(x, NULL), TN_OK);
}

/* Embedding backward into a (96, 128) weight from 16*64 indices, most of
 * them repeated (a skewed distribution): bit-identical for 1, 2 and 4
 * threads, and equal to the serial float sum in index order. */
static void embedding_backward_deterministic(void **state) {
    enum { V = 96, D = 128, N = 16 * 64 };
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t *iv = malloc(N * sizeof *iv);
    float *g1 = malloc(V * D * sizeof *g1), *gn = malloc(V * D * sizeof *gn);
    float *ref = calloc(V * D, sizeof *ref);
    assert_true(iv && g1 && gn && ref);
    for (int j = 0; j < N; j++)
        iv[j] = j % 3 == 0 ? 7 : (j * j + 5) % V;
    tn_tensor *w = f32s(2, (const int64_t[]){V, D}, 0, true);
    tn_tensor *idx = i64(2, (const int64_t[]){16, 64}, iv);
    int saved = tn_get_num_threads();
    for (int nt = 1; nt <= 4; nt *= 2) {
        tn_set_num_threads(nt);
        grad_of(tn_embedding(w, idx), w, nt == 1 ? g1 : gn, V * D);
        if (nt > 1) assert_memory_equal(g1, gn, V * D * sizeof *g1);
    }
    tn_set_num_threads(saved);
    tn_tensor *gw = f32s(3, (const int64_t[]){16, 64, D}, 5, false);
    const float *gp = tn_data_ptr(gw);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < D; i++)
            ref[iv[j] * D + i] += gp[j * D + i];
    assert_memory_equal(g1, ref, V * D * sizeof *g1);
    free(iv);
    free(g1);
    free(gn);
    free(ref);
    tn_scope_end();
}

/* index_select (dim 1, outer > 1) and scatter_add into repeated indices:
 * the same bits for 1 and 4 threads. */
static void index_select_scatter_deterministic(void **state) {
    enum { O = 8, S = 50, N = 400, I = 24 };
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t *iv = malloc(N * sizeof *iv);
    float *a1 = malloc(O * S * I * sizeof *a1), *a4 = malloc(O * S * I * sizeof *a4);
    assert_true(iv && a1 && a4);
    for (int j = 0; j < N; j++)
        iv[j] = (j * 13) % 7 == 0 ? 3 : (j * 31) % S;
    tn_tensor *x = f32s(3, (const int64_t[]){O, S, I}, 1, true);
    tn_tensor *idx = i64(1, (const int64_t[]){N}, iv);
    int saved = tn_get_num_threads();
    tn_set_num_threads(1);
    grad_of(tn_index_select(x, 1, idx), x, a1, O * S * I);
    tn_set_num_threads(4);
    grad_of(tn_index_select(x, 1, idx), x, a4, O * S * I);
    assert_memory_equal(a1, a4, O * S * I * sizeof *a1);
    /* scatter_add along dim 1 with an index of src's shape */
    int64_t *sv = malloc(O * N * I * sizeof *sv);
    assert_non_null(sv);
    for (int64_t k = 0; k < (int64_t)O * N * I; k++)
        sv[k] = (k * 7 + k / 5) % S;
    tn_tensor *sidx = i64(3, (const int64_t[]){O, N, I}, sv);
    tn_tensor *src = f32s(3, (const int64_t[]){O, N, I}, 2, false);
    tn_set_num_threads(1);
    tn_tensor *r1 = tn_scatter_add(x, 1, sidx, src);
    tn_set_num_threads(4);
    tn_tensor *r4 = tn_scatter_add(x, 1, sidx, src);
    tn_set_num_threads(saved);
    assert_memory_equal(tn_data_ptr(r1), tn_data_ptr(r4), O * S * I * sizeof(float));
    free(iv);
    free(sv);
    free(a1);
    free(a4);
    tn_scope_end();
}

/* Fails the 1st, 2nd, ... allocation of a program using every op of this
 * family (forward and backward) until a run completes: each failure must be
 * a clean TN_ERR_OUT_OF_MEMORY, and nothing may leak. */
/* Each step must succeed; on the first failure the program stops there
 * (the scope releases what it made) and returns that failure's status. */
#define STEP(var, expr)                                                                            \
    tn_tensor *var = (expr);                                                                       \
    if (!var) return tn_last_status()

static tn_status oom_program(tn_tensor *w) {
    STEP(idx,
         tn_tensor_from((const int64_t[]){1, 3, 1, 0}, TN_I64, 1, (const int64_t[]){4}, false));
    STEP(m, tn_ones(1, (const int64_t[]){4}, TN_BOOL));
    STEP(e, tn_embedding(w, idx)); /* (4, 4) */
    STEP(s, tn_index_select(e, 1, idx));
    STEP(gi, tn_ones(2, (const int64_t[]){2, 4}, TN_I64));
    STEP(g, tn_gather(s, 0, gi));
    STEP(zi, tn_zeros(2, (const int64_t[]){2, 4}, TN_I64));
    STEP(sa, tn_scatter_add(s, 0, zi, g));
    STEP(wh, tn_where(m, sa, e));
    STEP(mf, tn_masked_fill(wh, m, 0.5));
    STEP(tr, tn_tril(mf, 0));
    tn_status st = tn_masked_fill_(tr, m, -1);
    if (st < 0) return st;
    STEP(tu, tn_triu(tr, -1));
    STEP(l, tn_sum(tu));
    return tn_backward(l, NULL, false);
}

static void alloc_failures(void **state) {
    float wv[24];
    for (int i = 0; i < 24; i++)
        wv[i] = (float)i / 7 - 1;
    tn_tensor *w = tt_f32(2, (const int64_t[]){6, 4}, wv, true);
    int64_t live = tt_live_tensors();
    for (int64_t n = 1; n < 5000; n++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_clear_error();
        tn_test_fail_alloc_at(n);
        tn_status st = oom_program(w);
        bool failed = tn_test_alloc_failed();
        tn_test_fail_alloc_at(0);
        tn_scope_end();
        assert_int_equal(tn_set_grad(w, NULL), TN_OK);
        assert_int_equal(tt_live_tensors(), live);
        if (!failed) {
            assert_int_equal(st, TN_OK);
            print_message("alloc_failures: each of %lld allocations failed in turn\n",
                          (long long)n - 1);
            tn_release(w);
            return;
        }
        if (st != TN_OK && st != TN_ERR_OUT_OF_MEMORY)
            fail_msg("allocation %lld: %s", (long long)n, tn_last_error());
    }
    fail_msg("the program never completed");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(grad_fn_names),
        TT_TEST(dtypes),
        TT_TEST(saved_index_modified),
        TT_TEST(embedding_backward_deterministic),
        TT_TEST(index_select_scatter_deterministic),
        TT_TEST(alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
