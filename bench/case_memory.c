/* Bandwidth-bound cases and the machine's memory bandwidth measured in the
 * same run: triad, add64, sum64, copy_t (fma_peak.c: the FLOP limit). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>

static int64_t big_n(const bench_opts *o) { return o->quick ? (1 << 20) : (64 << 20); }

/* ---- triad: a = b + s*c, the STREAM kernel, one array per operand ---------- */

typedef struct triad {
    float *a, *b, *c;
    int64_t n;
    int threads;
} triad;

static int triad_body(void *st, int64_t iters) {
    triad *t = st;
    float *restrict a = t->a;
    const float *restrict b = t->b, *restrict c = t->c;
    const float s = 3.0f;
    int64_t n = t->n;
    for (int64_t it = 0; it < iters; it++) {
#pragma omp parallel for num_threads(t->threads) schedule(static)
        for (int64_t i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
    }
    return 0;
}

int bench_triad(const bench_opts *o) {
    triad t = {.n = big_n(o), .threads = o->threads};
    size_t bytes = (size_t)t.n * sizeof(float);
    t.a = aligned_alloc(64, bytes);
    t.b = aligned_alloc(64, bytes);
    t.c = aligned_alloc(64, bytes);
    if (!t.a || !t.b || !t.c) {
        fprintf(stderr, "tenet-bench: triad: out of memory\n");
        free(t.a), free(t.b), free(t.c);
        return -1;
    }
    /* First touch by the threads that will use each page, as STREAM does. */
#pragma omp parallel for num_threads(t.threads) schedule(static)
    for (int64_t i = 0; i < t.n; i++)
        t.a[i] = 0, t.b[i] = 1, t.c[i] = 2;
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    bench_time(o, triad_body, &t, 0.05, secs);
    bench_result r = {.name = "triad", .unit = "GB/s", .higher_is_better = true};
    for (int i = 0; i < o->repeat; i++)
        v[i] = bench_gbps(3.0 * (double)bytes, secs[i]);
    bench_stats(&r, v, o->repeat);
    bench_extra(&r, "ms", 1e3 * bytes * 3.0 * 1e-9 / r.median);
    bench_emit(&r);
    free(t.a), free(t.b), free(t.c);
    return 0;
}

/* ---- tenet's bandwidth-bound ops --------------------------------------------- */

typedef struct big {
    tn_tensor *a, *b, *out;
} big;

static int add64_body(void *st, int64_t iters) {
    big *s = st;
    for (int64_t i = 0; i < iters; i++)
        if (tn_add_out(s->out, s->a, s->b) < 0) return bench_fail("add64", "tn_add_out");
    return 0;
}

static int sum64_body(void *st, int64_t iters) {
    big *s = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *r = tn_sum(s->a);
        if (!r) return bench_fail("sum64", "tn_sum");
        tn_release(r);
    }
    return 0;
}

static int copy_t_body(void *st, int64_t iters) {
    big *s = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *r = tn_contiguous(s->b);
        if (!r) return bench_fail("copy_t", "tn_contiguous");
        tn_release(r);
    }
    return 0;
}

/* Times body over the tensors in s; `bytes` is the traffic of one call. */
static int bandwidth_case(const bench_opts *o, const char *name, bench_fn body, big *s,
                          double bytes) {
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    if (bench_time(o, body, s, 0.05, secs) < 0) return -1;
    bench_result r = {.unit = "GB/s", .higher_is_better = true};
    snprintf(r.name, sizeof r.name, "%s", name);
    for (int i = 0; i < o->repeat; i++)
        v[i] = bench_gbps(bytes, secs[i]);
    bench_stats(&r, v, o->repeat);
    bench_extra(&r, "ms", 1e3 * bytes * 1e-9 / r.median);
    bench_emit(&r);
    return 0;
}

static void big_free(big *s) {
    tn_release(s->a);
    tn_release(s->b);
    tn_release(s->out);
}

int bench_add64(const bench_opts *o) {
    int64_t n = big_n(o);
    big s = {bench_on(o, tn_full(1, &n, TN_F32, 1.0)), bench_on(o, tn_full(1, &n, TN_F32, 2.0)),
             bench_on(o, tn_empty(1, &n, TN_F32))};
    int rc = s.a && s.b && s.out ? bandwidth_case(o, "add64", add64_body, &s, 3.0 * 4 * n)
                                 : bench_fail("add64", "allocation");
    big_free(&s);
    return rc;
}

int bench_sum64(const bench_opts *o) {
    int64_t n = big_n(o);
    big s = {bench_on(o, tn_full(1, &n, TN_F32, 1.0)), NULL, NULL};
    int rc = s.a ? bandwidth_case(o, "sum64", sum64_body, &s, 4.0 * n)
                 : bench_fail("sum64", "allocation");
    big_free(&s);
    return rc;
}

int bench_copy_t(const bench_opts *o) {
    int64_t side = o->quick ? 1024 : 8192;
    big s = {tn_full(2, (int64_t[]){side, side}, TN_F32, 1.0), NULL, NULL};
    s.b = s.a ? tn_transpose(s.a, 0, 1) : NULL;
    int rc = s.b ? bandwidth_case(o, "copy_t", copy_t_body, &s, 2.0 * 4 * side * side)
                 : bench_fail("copy_t", "allocation");
    big_free(&s);
    return rc;
}
