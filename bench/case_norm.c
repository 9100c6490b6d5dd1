/* A transformer layer's normalisation and activation at the size of a small
 * GPT-2 step: x (16*64, 128) float32. layer_norm forward + backward (weight,
 * bias), gelu (tanh) forward + backward; µs per step. */
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
