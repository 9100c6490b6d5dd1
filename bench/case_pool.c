/* max_pool2d 2x2 (stride 2) on x (128, 32, 28, 28) float32, a small CNN's first pooling layer:
 * forward + backward (x's .grad accumulates, as in a training loop), µs per step. The step
 * reads x and writes y and its indices, then reads g and the indices and writes dx: ~4.5 x's
 * bytes, the GB/s beside it. --quick: batch 16. */
#include "bench.h"

#include <stdio.h>

typedef struct pool_state {
    tn_tensor *x, *g;
} pool_state;

static int pool_body(void *st, int64_t iters) {
    pool_state *s = st;
    const int64_t k[2] = {2, 2};
    for (int64_t i = 0; i < iters; i++) {
        if (tn_scope_begin() != TN_OK) return bench_fail("max_pool2d", "scope");
        tn_tensor *y = tn_max_pool2d(s->x, k, NULL, NULL, NULL, false);
        tn_status rc = y ? tn_backward(y, s->g, false) : tn_last_status();
        tn_scope_end();
        if (rc < 0) return bench_fail("max_pool2d", "forward/backward");
    }
    return 0;
}

int bench_max_pool2d(const bench_opts *o) {
    int64_t n = o->quick ? 16 : 128, c = 32, hw = 28;
    tn_manual_seed(4);
    pool_state s = {bench_on(o, tn_randn(4, (int64_t[]){n, c, hw, hw}, TN_F32)),
                    bench_on(o, tn_randn(4, (int64_t[]){n, c, hw / 2, hw / 2}, TN_F32))};
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc =
        s.x && s.g && tn_requires_grad_(s.x, true) == TN_OK ? 0 : bench_fail("max_pool2d", "setup");
    if (rc == 0 && bench_time(o, pool_body, &s, 0.2, secs) < 0) rc = -1;
    if (rc == 0) {
        /* x, y + idx (4 + 8 bytes a quarter of x's elements), g + idx, dx; the .grad sum */
        double bytes = 4.0 * (double)(n * c * hw * hw) * (1 + 0.75 + 0.75 + 1 + 1);
        bench_result r = {.name = "max_pool2d", .unit = "us/step", .higher_is_better = false};
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e6 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "GB/s", bytes * 1e-3 / r.median);
        bench_emit(&r);
    }
    tn_release(s.x);
    tn_release(s.g);
    return rc;
}
