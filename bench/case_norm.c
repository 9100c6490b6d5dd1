/* A transformer layer's normalisation and activation at the size of a small
 * GPT-2 step: x (16*64, 128) float32. layer_norm forward + backward (weight,
 * bias), gelu (tanh) forward + backward; µs per step. And the CNN's batch
 * norm: batch_norm2d in training (weight, bias, running statistics) at its two
 * sizes, x (128, 32, 28, 28) and (128, 64, 14, 14), forward + backward. */
#include "bench.h"

#include <stdio.h>

#define NORM_RUN_S 0.2

typedef struct norm {
    tn_tensor *x, *w, *b, *g;
} norm;

static void norm_free(norm *s) {
    tn_release(s->x);
    tn_release(s->w);
    tn_release(s->b);
    tn_release(s->g);
}

static bool norm_init(const bench_opts *o, norm *s) {
    int64_t shape[2] = {16 * 64, 128}, n = 128;
    tn_manual_seed(1);
    *s = (norm){bench_on(o, tn_randn(2, shape, TN_F32)), bench_on(o, tn_randn(1, &n, TN_F32)),
                bench_on(o, tn_randn(1, &n, TN_F32)), bench_on(o, tn_randn(2, shape, TN_F32))};
    return s->x && s->w && s->b && s->g && tn_requires_grad_(s->x, true) == TN_OK &&
           tn_requires_grad_(s->w, true) == TN_OK && tn_requires_grad_(s->b, true) == TN_OK;
}

/* y = f(x); y.backward(g): the leaves' .grad accumulate, as in a training loop */
static int step(norm *s, int64_t iters, bool ln, const char *name) {
    const int64_t n = 128;
    for (int64_t i = 0; i < iters; i++) {
        if (tn_scope_begin() != TN_OK) return bench_fail(name, "scope");
        tn_tensor *y = ln ? tn_layer_norm(s->x, 1, &n, s->w, s->b, 1e-5) : tn_gelu(s->x, true);
        tn_status rc = y ? tn_backward(y, s->g, false) : tn_last_status();
        tn_scope_end();
        if (rc < 0) return bench_fail(name, "forward/backward");
    }
    return 0;
}

static int ln_body(void *st, int64_t iters) { return step(st, iters, true, "layer_norm"); }
static int gelu_body(void *st, int64_t iters) { return step(st, iters, false, "gelu"); }

static int norm_case(const bench_opts *o, const char *name, bench_fn body) {
    norm s;
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = norm_init(o, &s) ? 0 : bench_fail(name, "setup");
    if (rc == 0 && bench_time(o, body, &s, NORM_RUN_S, secs) < 0) rc = -1;
    if (rc == 0) {
        bench_result r = {.unit = "us/step", .higher_is_better = false};
        snprintf(r.name, sizeof r.name, "%s", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e6 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_emit(&r);
    }
    norm_free(&s);
    return rc;
}

int bench_layer_norm(const bench_opts *o) { return norm_case(o, "layer_norm", ln_body); }
int bench_gelu(const bench_opts *o) { return norm_case(o, "gelu_tanh", gelu_body); }

/* ---- batch_norm2d ----------------------------------------------------------------- */

typedef struct bn_state {
    tn_tensor *x, *w, *b, *g, *rm, *rv;
} bn_state;

static void bn_free(bn_state *s) {
    tn_tensor *t[] = {s->x, s->w, s->b, s->g, s->rm, s->rv};
    for (int i = 0; i < 6; i++)
        tn_release(t[i]);
}

static int bn_body(void *st, int64_t iters) {
    bn_state *s = st;
    for (int64_t i = 0; i < iters; i++) {
        if (tn_scope_begin() != TN_OK) return bench_fail("batch_norm2d", "scope");
        tn_tensor *y = tn_batch_norm(s->x, s->rm, s->rv, s->w, s->b, true, 0.1, 1e-5);
        tn_status rc = y ? tn_backward(y, s->g, false) : tn_last_status();
        tn_scope_end();
        if (rc < 0) return bench_fail("batch_norm2d", "forward/backward");
    }
    return 0;
}

static int bn_case(const bench_opts *o, int64_t c, int64_t hw) {
    int64_t n = o->quick ? 16 : 128, shape[4] = {n, c, hw, hw};
    char name[64];
    snprintf(name, sizeof name, "batch_norm2d_c%lld", (long long)c);
    tn_manual_seed(6);
    bn_state s = {bench_on(o, tn_randn(4, shape, TN_F32)), bench_on(o, tn_randn(1, &c, TN_F32)),
                  bench_on(o, tn_randn(1, &c, TN_F32)),    bench_on(o, tn_randn(4, shape, TN_F32)),
                  bench_on(o, tn_zeros(1, &c, TN_F32)),    bench_on(o, tn_ones(1, &c, TN_F32))};
    bool ok = s.x && s.w && s.b && s.g && s.rm && s.rv && tn_requires_grad_(s.x, true) == TN_OK &&
              tn_requires_grad_(s.w, true) == TN_OK && tn_requires_grad_(s.b, true) == TN_OK;
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = ok ? 0 : bench_fail(name, "setup");
    if (rc == 0 && bench_time(o, bn_body, &s, NORM_RUN_S, secs) < 0) rc = -1;
    if (rc == 0) {
        /* the least traffic: x read and y written, then dy and x read and dx written */
        double bytes = 4.0 * (double)(n * c * hw * hw) * 5;
        bench_result r = {.unit = "us/step", .higher_is_better = false};
        snprintf(r.name, sizeof r.name, "%s", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e6 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "GB/s", bytes * 1e-3 / r.median);
        bench_emit(&r);
    }
    bn_free(&s);
    return rc;
}

int bench_batch_norm2d(const bench_opts *o) {
    int rc = bn_case(o, 32, 28);
    return bn_case(o, 64, 14) < 0 ? -1 : rc;
}
