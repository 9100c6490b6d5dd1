/* conv2d forward, ResNet's 3x3 stage-1 layer: x (32, 64, 56, 56) float32, weight (64, 64, 3, 3),
 * bias, stride 1, padding 1. GFLOP/s counts 2 N OC OH OW C KH KW (the products; im2col and the
 * bias are the overhead the figure includes); compare with sgemm's rate. --quick: batch 4. */
#include "bench.h"

#include <stdio.h>

typedef struct conv_state {
    tn_tensor *x, *w, *b;
} conv_state;

static int conv_body(void *st, int64_t iters) {
    conv_state *s = st;
    const int64_t one[2] = {1, 1};
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *y = tn_conv2d(s->x, s->w, s->b, one, one, one, 1);
        if (!y) return bench_fail("conv2d", "tn_conv2d");
        tn_release(y);
    }
    return 0;
}

int bench_conv2d(const bench_opts *o) {
    int64_t n = o->quick ? 4 : 32, c = 64, hw = 56;
    tn_manual_seed(3);
    conv_state s = {bench_on(o, tn_randn(4, (int64_t[]){n, c, hw, hw}, TN_F32)),
                    bench_on(o, tn_randn(4, (int64_t[]){c, c, 3, 3}, TN_F32)),
                    bench_on(o, tn_randn(1, (int64_t[]){c}, TN_F32))};
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = s.x && s.w && s.b ? 0 : bench_fail("conv2d", "setup");
    if (rc == 0 && bench_time(o, conv_body, &s, 0.2, secs) < 0) rc = -1;
    if (rc == 0) {
        double flops = 2.0 * (double)(n * c * hw * hw) * (double)(c * 9);
        bench_result r = {.name = "conv2d", .unit = "GFLOP/s", .higher_is_better = true};
        for (int i = 0; i < o->repeat; i++)
            v[i] = bench_gflops(flops, secs[i]);
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "ms", flops * 1e-6 / r.median);
        bench_emit(&r);
    }
    tn_release(s.x);
    tn_release(s.w);
    tn_release(s.b);
    return rc;
}
