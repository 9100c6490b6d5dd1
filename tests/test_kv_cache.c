/* tests/test_kv_cache.c — tenet/kv_cache.h: attention over a cache filled
 * by a prompt and then by steps of one or a few positions equals causal
 * attention over the whole context (float32, float64, bfloat16 and float16, shapes across the
 * kernel's 32-row tiles); left padding equals each row's own causal attention
 * over its real positions, padding queries give 0, position ids start at 0
 * on each row's first real slot; error paths (overflow, shapes, dtype,
 * grad mode, layer, padding of a filled cache) refuse and change nothing. */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* Fills a 2-layer cache with q, k, v (B, H, T, D) in chunks of the given
 * sizes (cycled) and checks each chunk's attention against the full causal
 * attention's rows; layer 1 holds k and v swapped. */
static void incremental(tn_dtype dt, int64_t B, int64_t H, int64_t T, int64_t D, const int *chunks,
                        int nchunks, double tol) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *q = tn_randn(4, S(B, H, T, D), dt), *k = tn_randn(4, S(B, H, T, D), dt);
    tn_tensor *v = tn_randn(4, S(B, H, T, D), dt);
    tn_tensor *ref[2] = {tn_scaled_dot_product_attention(q, k, v, NULL, 0, true),
                         tn_scaled_dot_product_attention(q, v, k, NULL, 0, true)};
    tn_kv_cache *c = tn_kv_cache_new(2, B, H, T + 3, D, dt, TN_DEVICE_CPU);
    assert_non_null(c);
    assert_int_equal(tn_kv_cache_max_length(c), T + 3);
    for (int64_t t0 = 0, ci = 0; t0 < T; ci++) {
        int64_t n = chunks[ci % nchunks] < T - t0 ? chunks[ci % nchunks] : T - t0;
        tn_tensor *qn = tn_narrow(q, 2, t0, n), *kn = tn_narrow(k, 2, t0, n);
        tn_tensor *vn = tn_narrow(v, 2, t0, n);
        for (int l = 0; l < 2; l++) {
            assert_int_equal(tn_kv_cache_append(c, l, l ? vn : kn, l ? kn : vn), TN_OK);
            assert_int_equal(tn_kv_cache_length(c, l), t0 + n);
            tt_assert_close_tensors(tn_kv_cache_attention(c, l, qn), tn_narrow(ref[l], 2, t0, n),
                                    tol);
        }
        t0 += n;
    }
    tt_assert_close_tensors(tn_kv_cache_keys(c, 0), k, 0);
    tt_assert_close_tensors(tn_kv_cache_values(c, 0), v, 0);
    tn_kv_cache_free(c);
    tn_set_grad_enabled(prev);
    tn_scope_end();
}

static void matches_full_context(void **state) {
    (void)state;
    tn_manual_seed(3);
    incremental(TN_F32, 2, 3, 67, 16, (const int[]){5, 1, 1, 3, 1}, 5, 2e-6);
    incremental(TN_F32, 1, 2, 40, 40, (const int[]){33, 1}, 2, 2e-6);
    incremental(TN_F64, 2, 2, 35, 24, (const int[]){1}, 1, 1e-13);
    incremental(TN_F32, 3, 1, 9, 8, (const int[]){9}, 1, 2e-6); /* a prompt only */
    /* half caches (a model converted to bfloat16 / float16): within one rounding of the output */
    incremental(TN_BF16, 2, 3, 37, 16, (const int[]){5, 1, 1}, 3, 1e-2);
    incremental(TN_F16, 1, 2, 33, 32, (const int[]){1, 4}, 2, 2e-3);
}

/* Rows with pad {0, 2, 5}: each row's real slots attend as the causal
 * attention over that row alone; padding queries give 0. */
static void left_padding(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    tn_manual_seed(5);
    const int64_t B = 3, H = 2, T = 12, D = 8, pad[3] = {0, 2, 5};
    tn_tensor *q = tn_randn(4, S(B, H, T, D), TN_F32), *k = tn_randn(4, S(B, H, T, D), TN_F32);
    tn_tensor *v = tn_randn(4, S(B, H, T, D), TN_F32);
    tn_kv_cache *c = tn_kv_cache_new(1, B, H, 16, D, TN_F32, TN_DEVICE_CPU);
    assert_non_null(c);
    assert_int_equal(tn_kv_cache_set_padding(c, pad), TN_OK);
    /* positions of the prompt: 0 on padding, then 0, 1, ... */
    tn_tensor *pos = tn_kv_cache_positions(c, 7);
    const double want_pos[] = {0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 1};
    tt_assert_close(pos, want_pos, 21, 0);
    tn_tensor *out[2];
    const int64_t split[2] = {7, T - 7};
    for (int s = 0, t0 = 0; s < 2; t0 += (int)split[s], s++) {
        assert_int_equal(
            tn_kv_cache_append(c, 0, tn_narrow(k, 2, t0, split[s]), tn_narrow(v, 2, t0, split[s])),
            TN_OK);
        out[s] = tn_kv_cache_attention(c, 0, tn_narrow(q, 2, t0, split[s]));
        assert_non_null(out[s]);
    }
    tn_tensor *pos2 = tn_kv_cache_positions(c, 1); /* the next slot */
    tt_assert_close(pos2, (const double[]){12, 10, 7}, 3, 0);
    tn_tensor *all = tn_cat(2, (tn_tensor *const[]){out[0], out[1]}, 2);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = T - pad[b];
        tn_tensor *qb = tn_narrow(tn_narrow(q, 0, b, 1), 2, pad[b], n);
        tn_tensor *kb = tn_narrow(tn_narrow(k, 0, b, 1), 2, pad[b], n);
        tn_tensor *vb = tn_narrow(tn_narrow(v, 0, b, 1), 2, pad[b], n);
        tn_tensor *ref = tn_scaled_dot_product_attention(qb, kb, vb, NULL, 0, true);
        tt_assert_close_tensors(tn_narrow(tn_narrow(all, 0, b, 1), 2, pad[b], n), ref, 2e-6);
        if (pad[b])
            tt_assert_close_tensors(tn_narrow(tn_narrow(all, 0, b, 1), 2, 0, pad[b]),
                                    tn_zeros(4, S(1, H, pad[b], D), TN_F32), 0);
    }
    /* reset: empty, no padding */
    assert_int_equal(tn_kv_cache_reset(c), TN_OK);
    assert_int_equal(tn_kv_cache_length(c, 0), 0);
    tt_assert_close(tn_kv_cache_positions(c, 1), (const double[]){0, 0, 0}, 3, 0);
    tn_kv_cache_free(c);
    tn_set_grad_enabled(prev);
    tn_scope_end();
}

/* A half cache's steps of 1-5 queries (up to 4: the CPU's few-query forward, reading the cache
 * in place; 5: core's float32 copies) give the bits of the same steps over a float32 cache of
 * the widened values, rounded once: with left padding, on 1 and 2 threads. */
static void half_steps_equal_float32_rounded(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    const int nthreads = tn_get_num_threads();
    tn_manual_seed(9);
    const int64_t B = 3, H = 2, T = 40, D = 24, pad[3] = {0, 3, 6};
    const int steps[] = {7, 1, 2, 3, 4, 5, 1, 1}; /* a prompt, then steps */
    for (int di = 0; di < 2; di++) {
        tn_dtype dt = di ? TN_F16 : TN_BF16;
        tn_tensor *q = tn_randn(4, S(B, H, T, D), dt), *k = tn_randn(4, S(B, H, T, D), dt);
        tn_tensor *v = tn_randn(4, S(B, H, T, D), dt);
        tn_tensor *q32 = tn_to(q, TN_F32, TN_DEVICE_KEEP), *k32 = tn_to(k, TN_F32, TN_DEVICE_KEEP);
        tn_tensor *v32 = tn_to(v, TN_F32, TN_DEVICE_KEEP);
        for (int threads = 1; threads <= 2; threads++) {
            tn_set_num_threads(threads);
            tn_kv_cache *c = tn_kv_cache_new(1, B, H, T, D, dt, TN_DEVICE_CPU);
            tn_kv_cache *c32 = tn_kv_cache_new(1, B, H, T, D, TN_F32, TN_DEVICE_CPU);
            assert_non_null(c), assert_non_null(c32);
            assert_int_equal(tn_kv_cache_set_padding(c, pad), TN_OK);
            assert_int_equal(tn_kv_cache_set_padding(c32, pad), TN_OK);
            for (int64_t t0 = 0, si = 0; si < (int64_t)(sizeof steps / sizeof *steps); si++) {
                int64_t n = steps[si];
                assert_int_equal(
                    tn_kv_cache_append(c, 0, tn_narrow(k, 2, t0, n), tn_narrow(v, 2, t0, n)),
                    TN_OK);
                assert_int_equal(
                    tn_kv_cache_append(c32, 0, tn_narrow(k32, 2, t0, n), tn_narrow(v32, 2, t0, n)),
                    TN_OK);
                tn_tensor *y = tn_kv_cache_attention(c, 0, tn_narrow(q, 2, t0, n));
                tn_tensor *y32 = tn_kv_cache_attention(c32, 0, tn_narrow(q32, 2, t0, n));
                assert_non_null(y), assert_non_null(y32);
                assert_int_equal(tn_dtype_of(y), dt);
                tt_assert_close_tensors(y, tn_to(y32, dt, TN_DEVICE_KEEP), 0);
                t0 += n;
            }
            tn_kv_cache_free(c), tn_kv_cache_free(c32);
        }
    }
    tn_set_num_threads(nthreads);
    tn_set_grad_enabled(prev);
    tn_scope_end();
}

/* The same for tn_scaled_dot_product_attention's half queries of 1-4 rows with an additive mask
 * (half, broadcast over the heads) or a boolean one, over keys and values that are views. */
static void half_few_queries_with_masks(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(11);
    for (int di = 0; di < 2; di++) {
        tn_dtype dt = di ? TN_F16 : TN_BF16;
        for (int64_t L = 1; L <= 4; L++) {
            tn_tensor *q = tn_randn(4, S(2, 3, L, 16), dt);
            tn_tensor *kf = tn_randn(4, S(2, 3, 50, 16), dt), *vf = tn_randn(4, S(2, 3, 50, 8), dt);
            tn_tensor *k = tn_narrow(kf, 2, 3, 37), *v = tn_narrow(vf, 2, 3, 37); /* strided */
            tn_tensor *madd = tn_randn(4, S(2, 1, L, 37), dt);
            tn_tensor *mbool =
                tn_gt(tn_randn(4, S(2, 3, L, 37), TN_F32), tn_full(0, NULL, TN_F32, -1.0));
            tn_tensor *masks[3] = {NULL, madd, mbool};
            for (int mi = 0; mi < 3; mi++) {
                tn_tensor *m32 =
                    masks[mi] && mi == 1 ? tn_to(madd, TN_F32, TN_DEVICE_KEEP) : masks[mi];
                for (int causal = 0; causal < 2; causal++) {
                    if (causal && masks[mi]) continue; /* PyTorch refuses both */
                    tn_tensor *y = tn_scaled_dot_product_attention(q, k, v, masks[mi], 0, causal);
                    tn_tensor *y32 = tn_scaled_dot_product_attention(
                        tn_to(q, TN_F32, TN_DEVICE_KEEP), tn_to(k, TN_F32, TN_DEVICE_KEEP),
                        tn_to(v, TN_F32, TN_DEVICE_KEEP), m32, 0, causal);
                    assert_non_null(y), assert_non_null(y32);
                    tt_assert_close_tensors(y, tn_to(y32, dt, TN_DEVICE_KEEP), 0);
                }
            }
        }
    }
    tn_scope_end();
}

/* A step over a long half cache reads it in place: no float32 copy of the cache (64 MiB for
 * these keys and values) is made, so the peak of live bytes grows by far less. */
static void half_step_copies_no_cache(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    const int64_t B = 1, H = 16, T = 8192, D = 64;
    tn_kv_cache *c = tn_kv_cache_new(1, B, H, T, D, TN_BF16, TN_DEVICE_CPU);
    assert_non_null(c);
    tn_tensor *kv = tn_randn(4, S(B, H, 3, D), TN_BF16), *q = tn_randn(4, S(B, H, 1, D), TN_BF16);
    assert_int_equal(tn_kv_cache_append(c, 0, kv, kv), TN_OK);
    tn_memory_stats_t before, after;
    assert_int_equal(tn_memory_stats(&before), TN_OK);
    tn_tensor *y = tn_kv_cache_attention(c, 0, q);
    assert_non_null(y);
    assert_int_equal(tn_memory_stats(&after), TN_OK);
    size_t base = before.bytes_peak > before.bytes_live ? before.bytes_peak : before.bytes_live;
    assert_true(after.bytes_peak < base + (1u << 20));
    tn_kv_cache_free(c);
    tn_set_grad_enabled(prev);
    tn_scope_end();
}

static void errors_change_nothing(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(7);
    assert_null(tn_kv_cache_new(0, 1, 1, 4, 4, TN_F32, TN_DEVICE_CPU));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "must be positive");
    assert_null(tn_kv_cache_new(1, 1, 1, 4, 4, TN_I64, TN_DEVICE_CPU));
    tt_assert_error(TN_ERR_DTYPE, "float32, float64, bfloat16 or float16, not int64");
    /* sizes whose product overflows, and layers that fit one by one but not together: refused
     * before anything is allocated (the second used to allocate until the OOM killer came) */
    assert_null(tn_kv_cache_new(1, 1, INT64_MAX, 4, 2, TN_F32, TN_DEVICE_CPU));
    assert_string_equal(tn_last_error(), "tn_kv_cache_new: the number of elements of shape [1, "
                                         "9223372036854775807, 4, 2] overflows int64");
    assert_null(tn_kv_cache_new(INT32_MAX, 1, 1, 1 << 20, 64, TN_F32, TN_DEVICE_CPU));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "tn_kv_cache_new: out of memory: needs "
                                          "1152923703093230592 bytes in all");
    assert_null(
        tn_kv_cache_new(INT32_MAX, (int64_t)1 << 30, 1, 1 << 20, 64, TN_F32, TN_DEVICE_CPU));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "the sizes ask for more than 2^64 bytes");
    tn_kv_cache *c = tn_kv_cache_new(2, 2, 3, 6, 4, TN_F32, TN_DEVICE_CPU);
    assert_non_null(c);
    tn_tensor *k = tn_randn(4, S(2, 3, 4, 4), TN_F32), *v = tn_randn(4, S(2, 3, 4, 4), TN_F32);
    assert_int_equal(tn_kv_cache_append(c, 0, k, v), TN_OK);
    /* overflow: 4 + 4 > 6, nothing appended, the cached values intact */
    tn_tensor *k2 = tn_randn(4, S(2, 3, 4, 4), TN_F32);
    assert_int_equal(tn_kv_cache_append(c, 0, k2, k2), TN_ERR_INDEX);
    tt_assert_error(TN_ERR_INDEX,
                    "tn_kv_cache_append: layer 0 holds 4 of its 6 positions: 4 more do not fit");
    assert_int_equal(tn_kv_cache_length(c, 0), 4);
    tt_assert_close_tensors(tn_kv_cache_keys(c, 0), k, 0);
    /* shapes, dtype, layer */
    tn_tensor *bad = tn_randn(4, S(2, 2, 1, 4), TN_F32);
    assert_int_equal(tn_kv_cache_append(c, 0, bad, bad), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "k of shape [2, 2, 1, 4], the cache expects [2, 3, n, 4]");
    assert_int_equal(tn_kv_cache_append(c, 0, tn_narrow(k2, 2, 0, 1), tn_narrow(k2, 2, 0, 2)),
                     TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "k holds 1 positions and v 2");
    tn_tensor *k64 = tn_randn(4, S(2, 3, 1, 4), TN_F64);
    assert_int_equal(tn_kv_cache_append(c, 0, k64, k64), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE, "k is float64, the cache holds float32");
    assert_int_equal(tn_kv_cache_append(c, 2, k, v), TN_ERR_INDEX);
    tt_assert_error(TN_ERR_INDEX, "layer 2 out of range for a cache of 2 layers");
    assert_int_equal(tn_kv_cache_length(c, 0), 4);
    /* more queries than cached positions; a query that requires grad */
    tt_assert_refused(tn_kv_cache_attention(c, 1, tn_narrow(k, 2, 0, 1)), TN_ERR_SHAPE,
                      "tn_kv_cache_attention: 1 queries but layer 1 holds 0 positions (append "
                      "the new keys and values first)");
    tn_tensor *qg = tn_randn(4, S(2, 3, 1, 4), TN_F32);
    assert_int_equal(tn_requires_grad_(qg, true), TN_OK);
    assert_null(tn_kv_cache_attention(c, 0, qg));
    tt_assert_error(TN_ERR_AUTOGRAD, "q requires grad: call it under no-grad");
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *y = tn_kv_cache_attention(c, 0, qg);
    assert_non_null(y);
    assert_false(tn_requires_grad(y));
    tn_set_grad_enabled(prev);
    /* padding only on an empty cache, within [0, max_len] */
    assert_int_equal(tn_kv_cache_set_padding(c, (const int64_t[]){1, 0}), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "layer 0 already holds 4 positions");
    assert_int_equal(tn_kv_cache_reset(c), TN_OK);
    assert_int_equal(tn_kv_cache_set_padding(c, (const int64_t[]){7, 0}), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "pad[0] = 7 outside [0, 6]");
    assert_int_equal(tn_kv_cache_append(c, 0, NULL, v), TN_ERR_INVALID_ARGUMENT);
    tn_kv_cache_free(c);
    tn_kv_cache_free(NULL);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(half_step_copies_no_cache), /* first: the peak of live bytes is the process's */
        TT_TEST(matches_full_context),        TT_TEST(half_steps_equal_float32_rounded),
        TT_TEST(half_few_queries_with_masks), TT_TEST(left_padding),
        TT_TEST(errors_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
