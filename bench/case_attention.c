/* Fused scaled dot-product attention, forward + backward: q, k, v
 * (16, 4, L, 32) float32, causal; L = 256 (the benchmark) and L = 64 (the
 * GPT model's block). bench/compare_torch.py times PyTorch 1.13's composed
 * ops (softmax(q k^T scale, masked) @ v) on the same sizes. */
#include "bench.h"

#include <stdio.h>

typedef struct attn_state {
    tn_tensor *q, *k, *v, *g;
} attn_state;

static int attn_body(void *st, int64_t iters) {
    attn_state *s = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *out = tn_scaled_dot_product_attention(s->q, s->k, s->v, NULL, 0, true);
        if (!out || tn_backward(out, s->g, false) < 0) {
            tn_release(out);
            return bench_fail("attention", "forward/backward");
        }
        tn_release(out);
        tn_set_grad(s->q, NULL), tn_set_grad(s->k, NULL), tn_set_grad(s->v, NULL);
    }
    return 0;
}

static int attn_case(const bench_opts *o, const char *name, int64_t L) {
    int64_t shape[] = {o->quick ? 2 : 16, 4, L, 32};
    tn_manual_seed(5);
    attn_state s = {
        bench_on(o, tn_randn(4, shape, TN_F32)), bench_on(o, tn_randn(4, shape, TN_F32)),
        bench_on(o, tn_randn(4, shape, TN_F32)), bench_on(o, tn_randn(4, shape, TN_F32))};
    int rc = s.q && s.k && s.v && s.g && tn_requires_grad_(s.q, true) == TN_OK &&
                     tn_requires_grad_(s.k, true) == TN_OK && tn_requires_grad_(s.v, true) == TN_OK
                 ? 0
                 : bench_fail(name, "setup");
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    if (rc == 0 && bench_time(o, attn_body, &s, 0.1, secs) < 0) rc = -1;
    if (rc == 0) {
        bench_result r = {.unit = "ms/step", .higher_is_better = false};
        snprintf(r.name, sizeof r.name, "%s", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e3 * secs[i];
        bench_stats(&r, v, o->repeat);
        /* useful flops: 2 products forward, 4 backward, half the matrix (causal) */
        double fl = 6.0 * shape[0] * shape[1] * L * L * 32;
        bench_extra(&r, "GFLOP/s", bench_gflops(fl, r.median * 1e-3));
        bench_emit(&r);
    }
    tn_release(s.q), tn_release(s.k), tn_release(s.v), tn_release(s.g);
    return rc;
}

int bench_attention(const bench_opts *o) {
    int rc = attn_case(o, "attention", 256);
    return rc == 0 ? attn_case(o, "attention_L64", 64) : rc;
}
