/* Per-op overhead: ops on tiny tensors, where the time is the engine's
 * bookkeeping (allocation, dispatch, autograd nodes), not arithmetic. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, CLOCK_THREAD_CPUTIME_ID */
#include "bench.h"

#include <stdio.h>
#include <time.h>

/* Per-op cases loop until one run lasts this long. */
#define SMALL_RUN_S 0.05

typedef struct small {
    tn_tensor *x, *a, *b;
} small;

static void small_free(small *s) {
    tn_release(s->x);
    tn_release(s->a);
    tn_release(s->b);
}

/* x: n elements (a leaf requiring grad when rg), a and b: n constants. */
static bool small_init(small *s, int64_t n, bool rg) {
    tn_manual_seed(1);
    *s = (small){tn_randn(1, &n, TN_F32), tn_rand(1, &n, TN_F32), tn_randn(1, &n, TN_F32)};
    return s->x && s->a && s->b && (!rg || tn_requires_grad_(s->x, true) == TN_OK);
}

/* One figure in µs per `per` units of work from per-iteration seconds. */
static bench_result us_result(const bench_opts *o, const char *name, const double *secs,
                              double per) {
    double v[BENCH_MAX_RUNS];
    bench_result r = {.unit = "us/op", .higher_is_better = false};
    snprintf(r.name, sizeof r.name, "%s", name);
    for (int i = 0; i < o->repeat; i++)
        v[i] = 1e6 * secs[i] / per;
    bench_stats(&r, v, o->repeat);
    return r;
}

static void emit_us(const bench_opts *o, const char *name, const double *secs, double per) {
    bench_result r = us_result(o, name, secs, per);
    bench_emit(&r);
}

/* ---- bodies ------------------------------------------------------------------ */

static int add16_body(void *st, int64_t iters) {
    small *s = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *y = tn_add(s->a, s->b);
        if (!y) return bench_fail("add16", "tn_add");
        tn_release(y);
    }
    return 0;
}

static int add_inplace_body(void *st, int64_t iters) {
    small *s = st;
    for (int64_t i = 0; i < iters; i++)
        if (tn_add_(s->a, s->b) < 0) return bench_fail("add_1000", "tn_add_");
    return 0;
}

/* y = sigmoid(x*2).sum(); y.backward() — x.grad accumulates, as in PyTorch's loop. */
static int tiny_body(void *st, int64_t iters) {
    small *s = st;
    for (int64_t i = 0; i < iters; i++) {
        if (tn_scope_begin() != TN_OK) return bench_fail("tiny", "scope");
        tn_tensor *y = tn_sum(tn_sigmoid(tn_mul_scalar(s->x, 2.0)));
        tn_status rc = y ? tn_backward(y, NULL, false) : tn_last_status();
        tn_scope_end();
        if (rc < 0) return bench_fail("tiny", "forward/backward");
    }
    return 0;
}

enum { CHAIN = 100 };

static int chain_body(void *st, int64_t iters) {
    small *s = st;
    for (int64_t i = 0; i < iters; i++) {
        if (tn_scope_begin() != TN_OK) return bench_fail("chain100", "scope");
        tn_tensor *y = s->x;
        for (int k = 0; k < CHAIN && y; k++)
            y = tn_add(tn_mul(y, s->a), s->b);
        tn_tensor *loss = y ? tn_sum(y) : NULL;
        tn_status rc = loss ? tn_backward(loss, NULL, false) : tn_last_status();
        tn_scope_end();
        if (rc < 0) return bench_fail("chain100", "forward/backward");
    }
    return 0;
}

/* ---- cases ---------------------------------------------------------------------- */

static int small_case(const bench_opts *o, const char *name, bench_fn body, int64_t n, bool rg,
                      double per) {
    small s;
    double secs[BENCH_MAX_RUNS];
    int rc = small_init(&s, n, rg) ? 0 : bench_fail(name, "setup");
    if (rc == 0 && bench_time(o, body, &s, SMALL_RUN_S, secs) < 0) rc = -1;
    if (rc == 0) emit_us(o, name, secs, per);
    small_free(&s);
    return rc;
}

int bench_add16(const bench_opts *o) { return small_case(o, "add16", add16_body, 16, false, 1); }

int bench_add_inplace(const bench_opts *o) {
    return small_case(o, "add_1000", add_inplace_body, 1000, false, 1);
}

int bench_tiny(const bench_opts *o) { return small_case(o, "tiny", tiny_body, 16, true, 1); }

int bench_chain100(const bench_opts *o) {
    return small_case(o, "chain100", chain_body, 16, true, CHAIN);
}

/* ---- grad mode, no-grad, inference mode ---------------------------------------- */

/* (x + a) * b on 16 elements, x requiring grad: two ops per iteration. */
static int modes_body(void *st, int64_t iters) {
    small *s = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *y = tn_add(s->x, s->a), *z = y ? tn_mul(y, s->b) : NULL;
        tn_release(y);
        if (!z) return bench_fail("op16_modes", "tn_add/tn_mul");
        tn_release(z);
    }
    return 0;
}

static const char *const MODE_NAMES[3] = {"op16_grad", "op16_no_grad", "op16_inference"};

/* 0: grad mode (the ops record), 1: no-grad, 2: inference mode */
static void set_mode3(int m) {
    tn_set_grad_enabled(m != 1);
    tn_set_inference_mode(m == 2);
}

/* CPU time of the calling thread, which runs these ops whole (16 elements open no parallel
 * region): unlike the wall clock, it does not count the time the thread waited for a core, so
 * a loaded machine changes it little. */
static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The same body in the three modes, calibrated once (grad mode, the slowest) and alternated
 * run by run so that the machine's load drifts alike over all three; timed in thread CPU time. */
int bench_op16_modes(const bench_opts *o) {
    small s;
    double secs[3][BENCH_MAX_RUNS], t;
    bench_opts one = *o;
    one.repeat = 1;
    int rc = small_init(&s, 16, true) ? 0 : bench_fail("op16_modes", "setup");
    int64_t iters = rc == 0 ? bench_time(&one, modes_body, &s, SMALL_RUN_S, &t) : -1;
    for (int m = 1; m < 3 && iters > 0; m++) { /* warm-up of the other two */
        set_mode3(m);
        if (modes_body(&s, iters) < 0) iters = -1;
    }
    for (int r = 0; r < o->repeat && iters > 0; r++)
        for (int m = 0; m < 3 && iters > 0; m++) {
            set_mode3(m);
            double t0 = thread_cpu_now();
            if (modes_body(&s, iters) < 0) iters = -1;
            secs[m][r] = (thread_cpu_now() - t0) / (double)iters;
        }
    set_mode3(0);
    for (int m = 0; m < 3 && iters > 0; m++) {
        bench_result res = us_result(o, MODE_NAMES[m], secs[m], 2);
        if (m == 2) { /* the median of the run-by-run ratios: little hurt by load drift */
            double q[BENCH_MAX_RUNS];
            bench_result ratio = res;
            for (int r = 0; r < o->repeat; r++)
                q[r] = secs[2][r] / secs[1][r];
            bench_stats(&ratio, q, o->repeat);
            bench_extra(&res, "vs_no_grad", ratio.median);
        }
        bench_emit(&res);
    }
    small_free(&s);
    return iters > 0 ? 0 : -1;
}

/* tiny with anomaly mode off, then on; "_nan": with check_nan (every op's output and every
 * gradient scanned) */
static int tiny_anomaly_case(const bench_opts *o, const char *name) {
    small s;
    int rc = small_init(&s, 16, true) ? 0 : bench_fail(name, "setup");
    if (rc == 0) rc = bench_anomaly_ratio(o, name, tiny_body, &s, SMALL_RUN_S, 1, "us");
    small_free(&s);
    return rc;
}

int bench_tiny_anomaly(const bench_opts *o) { return tiny_anomaly_case(o, "tiny_anomaly"); }
int bench_tiny_anomaly_nan(const bench_opts *o) { return tiny_anomaly_case(o, "tiny_anomaly_nan"); }

/* chain100 with a debug mode off, then on (ratio: bench_anomaly_ratio & co.) */
static int chain_ratio(const bench_opts *o, const char *name,
                       int (*ratio)(const bench_opts *, const char *, bench_fn, void *, double,
                                    double, const char *)) {
    small s;
    int rc = small_init(&s, 16, true) ? 0 : bench_fail(name, "setup");
    if (rc == 0) rc = ratio(o, name, chain_body, &s, SMALL_RUN_S, CHAIN, "us");
    small_free(&s);
    return rc;
}

int bench_chain100_anomaly(const bench_opts *o) {
    return chain_ratio(o, "chain100_anomaly", bench_anomaly_ratio);
}
int bench_chain100_profile(const bench_opts *o) {
    return chain_ratio(o, "chain100_profile", bench_profile_ratio);
}
