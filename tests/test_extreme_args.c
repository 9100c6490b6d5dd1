/* Integer arguments at the ends of their types: every public entry that takes a size, an index,
 * a count or a dim is called with INT64_MAX, INT64_MIN, 2^62 and their neighbours (int dims with
 * INT_MIN and INT_MAX). Each call must return a result, or NULL / a negative status with a
 * message, and leave nothing behind (the teardown's leak check); under UBSan (the asan preset)
 * no signed overflow may happen on the way. What this caught: split's piece count and the
 * sampler's count formed size + step and overflowed, conv's extents and channels overflowed
 * (test_conv covers those), a cache of 2^31 small layers allocated until the OOM killer came. */
#include <limits.h>
#include <string.h>

#include "util.h"

static const int64_t V[] = {INT64_MAX,
                            INT64_MAX - 1,
                            INT64_MIN,
                            INT64_MIN + 1,
                            (int64_t)1 << 62,
                            -((int64_t)1 << 62),
                            (int64_t)1 << 32,
                            -((int64_t)1 << 32),
                            -1,
                            0};
#define NV (int)(sizeof V / sizeof *V)
static const int D[] = {INT_MIN, INT_MIN + 1, INT_MAX, INT_MAX - 1, -1000, 1000};
#define ND (int)(sizeof D / sizeof *D)

static int calls, refused;

/* A tensor result: released, or NULL with an error. */
static void took_t(tn_tensor *t, const char *what, long long v) {
    calls++;
    if (t) {
        tn_release(t);
        return;
    }
    refused++;
    if (tn_last_status() >= 0 || !tn_last_error()[0])
        fail_msg("%s (%lld): NULL without an error", what, v);
    tn_clear_error();
}

/* A status result: TN_OK, or negative with an error. */
static void took_st(tn_status st, const char *what, long long v) {
    calls++;
    if (st == TN_OK) return;
    refused++;
    if (st >= 0 || !tn_last_error()[0]) fail_msg("%s (%lld): %d without an error", what, v, st);
    tn_clear_error();
}

#define T(call, what, v) took_t((call), (what), (long long)(v))
#define ST(call, what, v) took_st((call), (what), (long long)(v))

static void release_pieces(tn_tensor **out, int n) {
    for (int k = 0; k < n; k++)
        tn_release(out[k]);
}

static void sizes_and_indices(void **state) {
    (void)state;
    tn_tensor *x = tn_ones(2, (int64_t[]){3, 4}, TN_F32);
    tn_tensor *x4 = tn_ones(4, (int64_t[]){1, 2, 4, 4}, TN_F32);
    tn_tensor *p = tn_ones(2, (int64_t[]){2, 4}, TN_F32);
    tn_tensor *tg = tn_zeros(1, (int64_t[]){3}, TN_I64);
    for (int i = 0; i < NV; i++) {
        const int64_t v = V[i];
        T(tn_narrow(x, 1, v, 1), "narrow start", v);
        T(tn_narrow(x, 1, 0, v), "narrow length", v);
        T(tn_narrow(x, 1, v, v), "narrow", v);
        T(tn_select(x, 1, v), "select", v);
        T(tn_tril(x, v), "tril", v);
        T(tn_triu(x, v), "triu", v);
        T(tn_group_norm(x4, v, NULL, NULL, 1e-5), "group_norm", v);
        T(tn_cross_entropy_ex(p, tg, NULL, TN_REDUCTION_MEAN, v, 0.0), "ignore_index", v);
        T(tn_view(x, 2, (int64_t[]){v, -1}), "view", v);
        T(tn_reshape(x, 3, (int64_t[]){v, v, 0}), "reshape", v);
        T(tn_expand(x, 3, (int64_t[]){v, 3, 4}), "expand", v);
        tn_tensor *out[8];
        int n = 0;
        ST(tn_split(x, v, 1, out, 8, &n), "split", v);
        release_pieces(out, n);
        const int64_t rest = (int64_t)((uint64_t)4 - (uint64_t)v);
        if (tn_split_with_sizes(x, 2, (int64_t[]){v, rest}, 1, out) == TN_OK)
            release_pieces(out, 2);
        else
            took_st(tn_last_status(), "split_with_sizes", v);
        const int64_t two[2] = {2, 2}, k2[2] = {v, 2}, s2[2] = {v, 1}, p2[2] = {v, 0};
        T(tn_max_pool2d(x4, k2, NULL, NULL, NULL, false), "max_pool2d kernel", v);
        T(tn_max_pool2d(x4, two, s2, NULL, NULL, true), "max_pool2d stride", v);
        T(tn_max_pool2d(x4, two, NULL, p2, NULL, true), "max_pool2d padding", v);
        T(tn_max_pool2d(x4, two, NULL, NULL, s2, true), "max_pool2d dilation", v);
        T(tn_avg_pool2d(x4, two, NULL, NULL, false, true, v), "avg_pool2d divisor", v);
        T(tn_avg_pool2d(x4, two, s2, p2, true, true, 0), "avg_pool2d", v);
        T(tn_adaptive_avg_pool2d(x4, k2), "adaptive_avg_pool2d", v);
        T(tn_adaptive_max_pool2d(x4, k2), "adaptive_max_pool2d", v);
        tn_tensor *x3 = tn_ones(3, (int64_t[]){1, 2, 4}, TN_F32);
        tn_tensor *w3 = tn_ones(3, (int64_t[]){2, 2, 2}, TN_F32);
        T(tn_conv1d(x3, w3, NULL, v, v, v, v), "conv1d", v);
        T(tn_conv_transpose1d(x3, w3, NULL, v, 0, 0, 1, 1), "conv_transpose1d stride", v);
        T(tn_conv_transpose1d(x3, w3, NULL, 1, 0, v, 1, v), "conv_transpose1d", v);
        tn_release(x3), tn_release(w3);
        if (v != (int64_t)1 << 32) { /* 2^32 elements are a legal (slow) request */
            T(tn_arange(0, (double)v, 1, TN_I64), "arange", v);
            T(tn_randperm(v, TN_I64), "randperm", v);
        }
        T(tn_randint(v, INT64_MAX, 1, (int64_t[]){2}, TN_I64), "randint low", v);
        T(tn_randint(INT64_MIN, v, 1, (int64_t[]){2}, TN_I64), "randint high", v);
        T(tn_full(1, (int64_t[]){2}, TN_I64, (double)v), "full", v);
        tn_tensor *iv = tn_full(1, (int64_t[]){2}, TN_I64, (double)v);
        tn_tensor *g = tn_full(2, (int64_t[]){3, 4}, TN_I64, (double)v);
        T(tn_index_select(x, 0, iv), "index_select", v);
        T(tn_embedding(x, iv), "embedding", v);
        T(tn_gather(x, 1, g), "gather", v);
        T(tn_scatter_add(x, 1, g, x), "scatter_add", v);
        T(tn_multinomial(p, v, true), "multinomial", v);
        T(tn_multinomial(p, v, false), "multinomial without replacement", v);
        T(tn_cross_entropy(p, iv), "cross_entropy target", v);
        tn_release(iv), tn_release(g);
    }
    tn_release(x), tn_release(x4), tn_release(p), tn_release(tg);
    print_message("%d calls, %d refused\n", calls, refused);
}

static void dims(void **state) {
    (void)state;
    tn_tensor *x = tn_ones(2, (int64_t[]){3, 4}, TN_F32);
    tn_tensor *idx = tn_zeros(1, (int64_t[]){2}, TN_I64);
    tn_tensor *idx2 = tn_zeros(2, (int64_t[]){3, 4}, TN_I64);
    for (int i = 0; i < ND; i++) {
        const int d = D[i];
        T(tn_sum_dim(x, d, false), "sum_dim", d);
        T(tn_mean_dim(x, d, true), "mean_dim", d);
        T(tn_max_dim(x, d, false), "max_dim", d);
        T(tn_argmax_dim(x, d, false), "argmax_dim", d);
        T(tn_transpose(x, d, 0), "transpose", d);
        T(tn_permute(x, 2, (int[]){d, 0}), "permute", d);
        T(tn_narrow(x, d, 0, 1), "narrow", d);
        T(tn_squeeze_dim(x, d), "squeeze", d);
        T(tn_unsqueeze(x, d), "unsqueeze", d);
        T(tn_flatten(x, d, -1), "flatten", d);
        T(tn_cat(2, (tn_tensor *[]){x, x}, d), "cat", d);
        T(tn_stack(2, (tn_tensor *[]){x, x}, d), "stack", d);
        tn_tensor *out[8];
        int n = 0;
        ST(tn_chunk(x, 2, d, out, &n), "chunk", d);
        release_pieces(out, n);
        ST(tn_unbind(x, d, out, 8, &n), "unbind", d);
        release_pieces(out, n);
        T(tn_index_select(x, d, idx), "index_select", d);
        T(tn_gather(x, d, idx2), "gather", d);
        T(tn_scatter_add(x, d, idx2, x), "scatter_add", d);
        T(tn_softmax(x, d), "softmax", d);
        T(tn_log_softmax(x, d), "log_softmax", d);
        T(tn_logsumexp(x, d, false), "logsumexp", d);
        T(tn_var_dim(x, d, 1, false), "var_dim", d);
        T(tn_std_dim(x, d, (double)d, false), "std_dim", d);
    }
    tn_release(x), tn_release(idx), tn_release(idx2);
}

static void caches_and_samplers(void **state) {
    (void)state;
    for (int i = 0; i < NV; i++) {
        const int64_t v = V[i];
        for (int which = 0; which < 4; which++) {
            int64_t s[4] = {1, 1, 4, 2};
            s[which] = v;
            tn_kv_cache *c = tn_kv_cache_new(1, s[0], s[1], s[2], s[3], TN_F32, TN_DEVICE_CPU);
            if (!c) took_t(NULL, "kv_cache_new", v);
            tn_kv_cache_free(c);
        }
        tn_kv_cache *c = tn_kv_cache_new(2, 2, 1, 4, 2, TN_F32, TN_DEVICE_CPU);
        assert_non_null(c);
        T(tn_kv_cache_positions(c, v), "kv_cache_positions", v);
        ST(tn_kv_cache_set_padding(c, (int64_t[]){v, 0}), "kv_cache_set_padding", v);
        if (tn_kv_cache_length(c, (int)v) < 0) took_st(tn_last_status(), "kv_cache_length", v);
        tn_kv_cache_free(c);
        int64_t n = tn_sampler_indices(v, 3, 1, 7, v, true, false, NULL);
        if (n < 0) took_st(tn_last_status(), "sampler_indices", v);
        n = tn_sampler_indices(v, INT_MAX, INT_MAX - 1, 7, 0, false, true, NULL);
        if (n < 0) took_st(tn_last_status(), "sampler_indices world", v);
    }
    /* layers that fit one by one and not together */
    assert_null(tn_kv_cache_new(INT_MAX, 1, 1, 1 << 20, 64, TN_F32, TN_DEVICE_CPU));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "bytes in all");
    tn_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(sizes_and_indices), TT_TEST(dims),
                                       TT_TEST(caches_and_samplers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
