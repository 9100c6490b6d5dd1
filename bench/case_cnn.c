/* cnn_step: one training step of examples/cnn_model.h's Fashion-MNIST CNN,
 * batch 128 (conv-BN-ReLU-pool twice, two linear layers, cross entropy,
 * backward, SGD with momentum 0.9 and weight decay 5e-4), as tenet-cnn
 * trains; PyTorch's side is scripts/cnn_reference.py's model
 * (bench/compare_torch.py). */
#include "bench.h"

#include <stdio.h>

#include "cnn_model.h"

typedef struct cnn_case {
    cnn m;
    tn_sgd *opt;
    tn_tensor *x, *y;
} cnn_case;

static void cnn_case_free(cnn_case *c) {
    tn_sgd_free(c->opt);
    tn_release(c->x);
    tn_release(c->y);
    cnn_free(&c->m);
}

static int cnn_body(void *state, int64_t iters) {
    cnn_case *c = state;
    for (int64_t i = 0; i < iters; i++) {
        double loss;
        if (tn_scope_begin() < 0) return bench_fail("cnn_step", "opening a scope");
        bool ok = cnn_step(&c->m, c->opt, c->x, c->y, &loss);
        tn_scope_end();
        if (!ok) return bench_fail("cnn_step", "training step");
    }
    return 0;
}

int bench_cnn_step(const bench_opts *o) {
    const int64_t n = o->quick ? 16 : 128;
    cnn_case c = {0};
    tn_manual_seed(3);
    bool ok = cnn_init(&c.m) && (o->device.type == TN_CPU || cnn_to(&c.m, o->device));
    c.opt = ok ? tn_sgd_new(N_PARAMS, c.m.t, 0.05, 0.9, 5e-4) : NULL;
    /* images U(0, 1), labels i % 10: the step's cost does not depend on the data */
    int64_t labels[128];
    for (int i = 0; i < 128; i++)
        labels[i] = i % 10;
    c.x = bench_on(o, tn_rand(4, (const int64_t[]){n, 1, 28, 28}, TN_F32));
    c.y = bench_on(o, tn_tensor_from(labels, TN_I64, 1, &n, false));
    int rc = c.opt && c.x && c.y ? 0 : bench_fail("cnn_step", "setup");
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    if (rc == 0 && bench_time(o, cnn_body, &c, 0.5, secs) < 0) rc = -1;
    if (rc == 0) {
        bench_result r = {.name = "cnn_step", .unit = "ms/step", .higher_is_better = false};
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e3 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "images_per_s", (double)n / (1e-3 * r.median));
        bench_emit(&r);
    }
    cnn_case_free(&c);
    return rc;
}
