/* Compute-bound and end-to-end cases: sgemm, the MLP training step (alone,
 * with anomaly mode, on many user threads), gradient clipping and the digits
 * demo. */
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits.h"
#include "init.h"

/* ---- sgemm ------------------------------------------------------------------ */

typedef struct gemm_state {
    tn_tensor *a, *b;
} gemm_state;

static int gemm_body(void *st, int64_t iters) {
    gemm_state *g = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *c = tn_matmul(g->a, g->b);
        if (!c) return bench_fail("sgemm", "tn_matmul");
        tn_release(c);
    }
    return 0;
}

static int gemm_case(const bench_opts *o, const char *name, int64_t n, tn_dtype dt) {
    if (o->quick) n /= 8;
    tn_manual_seed(2);
    int64_t shape[] = {n, n};
    gemm_state g = {bench_on(o, tn_randn(2, shape, dt)), bench_on(o, tn_randn(2, shape, dt))};
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = g.a && g.b ? 0 : bench_fail(name, "setup");
    if (rc == 0 && bench_time(o, gemm_body, &g, 0.2, secs) < 0) rc = -1;
    if (rc == 0) {
        bench_result r = {.unit = "GFLOP/s", .higher_is_better = true};
        snprintf(r.name, sizeof r.name, "%s", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = bench_gflops(2.0 * n * n * n, secs[i]);
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "ms", 2e-6 * n * n * n / r.median);
        bench_emit(&r);
    }
    tn_release(g.a);
    tn_release(g.b);
    return rc;
}

int bench_sgemm1024(const bench_opts *o) { return gemm_case(o, "sgemm1024", 1024, TN_F32); }
int bench_sgemm2048(const bench_opts *o) { return gemm_case(o, "sgemm2048", 2048, TN_F32); }
int bench_sgemm4096(const bench_opts *o) { return gemm_case(o, "sgemm4096", 4096, TN_F32); }
int bench_bf16gemm2048(const bench_opts *o) {
    return gemm_case(o, "bf16gemm2048", 2048, TN_BF16);
}
int bench_hgemm2048(const bench_opts *o) { return gemm_case(o, "hgemm2048", 2048, TN_F16); }

/* ---- clip_grad_norm_ over the gradients of four GPT-2 small blocks ------------------ */

/* The parameters of 4 transformer blocks of width 768 and the position table: 49 tensors,
 * 29.1 M float32, each with a gradient of random values. */
enum { CLIP_LAYERS = 4, CLIP_PER_LAYER = 12, CLIP_N = CLIP_LAYERS * CLIP_PER_LAYER + 1 };

typedef struct clip_state {
    tn_tensor *p[CLIP_N];
} clip_state;

static int clip_body(void *st, int64_t iters) {
    clip_state *c = st;
    for (int64_t i = 0; i < iters; i++) /* max_norm far above the norm: the values stay */
        if (tn_clip_grad_norm_(CLIP_N, c->p, 1e9, 2.0, NULL) < 0)
            return bench_fail("clip_norm", "tn_clip_grad_norm_");
    return 0;
}

int bench_clip_norm(const bench_opts *o) {
    static const int64_t shapes[CLIP_PER_LAYER][2] = {
        {768, 0},    {768, 0}, {768, 2304}, {2304, 0}, {768, 768},  {768, 0},
        {768, 0},    {768, 0}, {768, 3072}, {3072, 0}, {3072, 768}, {768, 0}};
    clip_state c = {{0}};
    int64_t elems = 0;
    bool ok = true;
    tn_manual_seed(5);
    for (int i = 0; i < CLIP_N && ok; i++) {
        const int64_t *sh = i < CLIP_N - 1 ? shapes[i % CLIP_PER_LAYER] : (int64_t[]){1024, 768};
        const int nd = sh[1] ? 2 : 1;
        tn_tensor *g = bench_on(o, tn_randn(nd, sh, TN_F32));
        c.p[i] = bench_on(o, tn_zeros(nd, sh, TN_F32));
        ok = g && c.p[i] && tn_requires_grad_(c.p[i], true) == TN_OK && tn_set_grad(c.p[i], g) == TN_OK;
        elems += g ? tn_numel(g) : 0;
        tn_release(g);
    }
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = ok ? 0 : bench_fail("clip_norm", "setup");
    if (rc == 0 && bench_time(o, clip_body, &c, 0.2, secs) < 0) rc = -1;
    if (rc == 0) {
        bench_result r = {.name = "clip_norm", .unit = "ms", .higher_is_better = false};
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e3 * secs[i];
        bench_stats(&r, v, o->repeat);
        /* read each gradient once for the norm, then read and write it for the scaling */
        bench_extra(&r, "GB/s", 3.0 * 4 * (double)elems / (1e6 * r.median));
        bench_emit(&r);
    }
    for (int i = 0; i < CLIP_N; i++)
        tn_release(c.p[i]);
    return rc;
}

/* ---- a two-layer MLP: linear, ReLU, linear, cross-entropy, SGD ----------------- */

typedef struct mlp {
    tn_tensor *w1, *b1, *w2, *b2; /* leaves */
    tn_sgd *opt;
} mlp;

static void mlp_free(mlp *m) {
    tn_sgd_free(m->opt);
    tn_release(m->w1);
    tn_release(m->b1);
    tn_release(m->w2);
    tn_release(m->b2);
    *m = (mlp){0};
}

/* A leaf on dev with t's values (t is released). */
static tn_tensor *leaf_on(tn_tensor *t, tn_device dev) {
    if (!t || dev.type == TN_CPU) return t;
    tn_tensor *d = tn_new_tensor(t, TN_DTYPE_SAME, dev, true);
    tn_release(t);
    return d;
}

static bool mlp_new(mlp *m, int64_t in, int64_t hidden, int64_t out, double lr, double momentum,
                    uint64_t seed, tn_device dev) {
    tn_manual_seed(seed);
    *m = (mlp){leaf_on(uniform_leaf(2, (int64_t[]){hidden, in}, in), dev),
               leaf_on(uniform_leaf(1, &hidden, in), dev),
               leaf_on(uniform_leaf(2, (int64_t[]){out, hidden}, hidden), dev),
               leaf_on(uniform_leaf(1, &out, hidden), dev), NULL};
    if (m->w1 && m->b1 && m->w2 && m->b2)
        m->opt = tn_sgd_new(4, (tn_tensor *[]){m->w1, m->b1, m->w2, m->b2}, lr, momentum, 0.0);
    if (m->opt) return true;
    mlp_free(m);
    return false;
}

static tn_tensor *mlp_forward(const mlp *m, const tn_tensor *x) {
    return tn_linear(tn_relu(tn_linear(x, m->w1, m->b1)), m->w2, m->b2);
}

/* zero_grad, forward, cross-entropy, backward, step. */
static tn_status mlp_step(mlp *m, const tn_tensor *x, const tn_tensor *y) {
    tn_status rc = tn_sgd_zero_grad(m->opt);
    if (rc < 0 || (rc = tn_scope_begin()) < 0) return rc;
    tn_tensor *loss = tn_cross_entropy(mlp_forward(m, x), y);
    rc = loss ? tn_backward(loss, NULL, false) : tn_last_status();
    tn_scope_end();
    return rc < 0 ? rc : tn_sgd_step(m->opt);
}

/* The performance models (docs/performance.md), SGD lr 0.01: CPU batch 256,
 * 784 -> 256 -> 10; GPU batch 4096, 784 -> 1024 -> 10. */
enum { MLP_BATCH = 256, MLP_IN = 784, MLP_HIDDEN = 256, MLP_OUT = 10 };
enum { GPU_MLP_BATCH = 4096, GPU_MLP_HIDDEN = 1024 };

typedef struct mlp_case {
    mlp m;
    tn_tensor *x, *y;
} mlp_case;

static void mlp_case_free(mlp_case *c) {
    mlp_free(&c->m);
    tn_release(c->x);
    tn_release(c->y);
}

static bool mlp_case_new(mlp_case *c, uint64_t seed, tn_device dev) {
    bool gpu = dev.type != TN_CPU;
    int64_t n = gpu ? GPU_MLP_BATCH : MLP_BATCH, hidden = gpu ? GPU_MLP_HIDDEN : MLP_HIDDEN;
    int64_t *labels = malloc((size_t)n * sizeof *labels);
    *c = (mlp_case){0};
    if (!labels) return false;
    for (int64_t i = 0; i < n; i++)
        labels[i] = (i * 7) % MLP_OUT;
    bool ok = mlp_new(&c->m, MLP_IN, hidden, MLP_OUT, 0.01, 0.0, seed, dev);
    if (ok) {
        c->x = tn_randn(2, (int64_t[]){n, MLP_IN}, TN_F32);
        c->y = tn_tensor_from(labels, TN_I64, 1, &n, false);
        if (gpu && c->x && c->y) {
            tn_tensor *x = tn_to(c->x, TN_DTYPE_SAME, dev), *y = tn_to(c->y, TN_DTYPE_SAME, dev);
            tn_release(c->x);
            tn_release(c->y);
            c->x = x, c->y = y;
        }
        ok = c->x && c->y;
    }
    free(labels);
    if (!ok) mlp_case_free(c);
    return ok;
}

static int mlp_body(void *st, int64_t iters) {
    mlp_case *c = st;
    for (int64_t i = 0; i < iters; i++)
        if (mlp_step(&c->m, c->x, c->y) < 0) return bench_fail("mlp", "training step");
    return 0;
}

int bench_mlp(const bench_opts *o) {
    mlp_case c;
    if (!mlp_case_new(&c, 3, o->device)) return bench_fail("mlp", "setup");
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = bench_time(o, mlp_body, &c, 0.1, secs) < 0 ? -1 : 0;
    if (rc == 0) {
        bench_result r = {.name = "mlp", .unit = "ms/step", .higher_is_better = false};
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e3 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_emit(&r);
    }
    mlp_case_free(&c);
    return rc;
}

static int mlp_anomaly_case(const bench_opts *o, const char *name) {
    mlp_case c;
    if (!mlp_case_new(&c, 3, o->device)) return bench_fail(name, "setup");
    int rc = bench_anomaly_ratio(o, name, mlp_body, &c, 0.1, 1, "ms");
    mlp_case_free(&c);
    return rc;
}

int bench_mlp_anomaly(const bench_opts *o) { return mlp_anomaly_case(o, "mlp_anomaly"); }
int bench_mlp_anomaly_nan(const bench_opts *o) { return mlp_anomaly_case(o, "mlp_anomaly_nan"); }

/* the gradient monitor with thresholds no gradient crosses (no warnings) */
static void monitor_mode(bool on) { tn_set_grad_monitor(on, 1e30, 0); }

/* the mlp step with a debug mode off, then on */
static int mlp_mode_case(const bench_opts *o, const char *name, void (*set_mode)(bool)) {
    mlp_case c;
    if (!mlp_case_new(&c, 3, o->device)) return bench_fail(name, "setup");
    int rc = bench_mode_ratio(o, name, mlp_body, &c, 0.1, 1, "ms", set_mode);
    mlp_case_free(&c);
    return rc;
}

int bench_mlp_monitor(const bench_opts *o) { return mlp_mode_case(o, "mlp_monitor", monitor_mode); }

int bench_mlp_profile(const bench_opts *o) {
    return mlp_mode_case(o, "mlp_profile", bench_profile_mode);
}

/* ---- mlp_threads: T user threads, each stepping its own model ---------------- */

typedef struct worker {
    pthread_t tid;
    pthread_barrier_t *go;
    int steps;
    uint64_t seed;
    tn_status status;
    char error[256];
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    mlp_case c;
    bool ok = mlp_case_new(&c, w->seed, TN_DEVICE_CPU);
    /* One untimed step warms this thread's allocator caches. */
    w->status = ok ? mlp_step(&c.m, c.x, c.y) : tn_last_status();
    pthread_barrier_wait(w->go);
    for (int i = 0; i < w->steps && w->status == TN_OK; i++)
        w->status = mlp_step(&c.m, c.x, c.y);
    if (w->status < 0) snprintf(w->error, sizeof w->error, "%s", tn_last_error());
    if (ok) mlp_case_free(&c);
    return NULL;
}

/* Seconds for nt threads x steps independent steps, from the barrier to the
 * last join; -1 on error. */
static double threads_run(int nt, int steps) {
    worker w[256];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)nt + 1);
    int started = 0;
    for (; started < nt; started++) {
        w[started] = (worker){.go = &go, .steps = steps, .seed = 100 + (uint64_t)started};
        if (pthread_create(&w[started].tid, NULL, worker_main, &w[started])) break;
    }
    if (started < nt) { /* cannot happen on a sane system; do not hang the others */
        fprintf(stderr, "tenet-bench: mlp_threads: pthread_create failed\n");
        abort();
    }
    pthread_barrier_wait(&go);
    double t0 = bench_now();
    bool ok = true;
    for (int i = 0; i < nt; i++) {
        pthread_join(w[i].tid, NULL);
        if (w[i].status < 0) {
            fprintf(stderr, "tenet-bench: mlp_threads: thread %d: %s: %s\n", i,
                    tn_status_string(w[i].status), w[i].error);
            ok = false;
        }
    }
    double t = bench_now() - t0;
    pthread_barrier_destroy(&go);
    return ok ? t : -1;
}

int bench_mlp_threads(const bench_opts *o) {
    int steps = o->quick ? 1 : 20, max_t = o->max_user_threads > 256 ? 256 : o->max_user_threads;
    int prev = tn_get_num_threads();
    tn_set_num_threads(1); /* parallelism comes from the user threads */
    double base = 0, v[BENCH_MAX_RUNS];
    int rc = 0;
    for (int nt = 1; nt <= max_t && rc == 0; nt++) {
        for (int w = 0; w < o->warmup && rc == 0; w++)
            if (threads_run(nt, steps) < 0) rc = -1;
        for (int i = 0; i < o->repeat && rc == 0; i++) {
            double t = threads_run(nt, steps);
            if (t < 0) rc = -1;
            v[i] = (double)nt * steps / t;
        }
        if (rc < 0) break;
        bench_result r = {.unit = "steps/s", .higher_is_better = true};
        snprintf(r.name, sizeof r.name, "mlp_threads_t%d", nt);
        bench_stats(&r, v, o->repeat);
        if (nt == 1) base = r.median;
        bench_extra(&r, "user_threads", nt);
        bench_extra(&r, "speedup", r.median / base);
        bench_emit(&r);
    }
    tn_set_num_threads(prev);
    return rc;
}

/* ---- digits: the demo's training, end to end ----------------------------------- */

/* The demo's recipe (examples/demo.c): a fixed random split, 1,500 rows to
 * train, 64-128-10, SGD lr 0.1 momentum 0.9, batch 64, 30 epochs. */
enum { D_TRAIN = 1500, D_HIDDEN = 128, D_EPOCHS = 30, D_BATCH = 64 };

typedef struct digits_state {
    digits d;
    int64_t *rows, *order, *pred; /* split; per-epoch order of training rows; argmax */
    float *bx;                    /* batch buffer */
    int64_t *by;
    int epochs;
    double accuracy;
} digits_state;

/* x (n, 64) and y (n) from rows idx[0..n). */
static bool gather(digits_state *s, const int64_t *idx, int64_t n, tn_tensor **x, tn_tensor **y) {
    for (int64_t i = 0; i < n; i++) {
        memcpy(s->bx + i * DIGITS_PIXELS, s->d.pixels + idx[i] * DIGITS_PIXELS,
               DIGITS_PIXELS * sizeof *s->bx);
        s->by[i] = s->d.labels[idx[i]];
    }
    *x = tn_tensor_from(s->bx, TN_F32, 2, (int64_t[]){n, DIGITS_PIXELS}, false);
    *y = tn_tensor_from(s->by, TN_I64, 1, &n, false);
    return *x && *y;
}

static double digits_accuracy(digits_state *s, const mlp *m) {
    int64_t n = s->d.n - D_TRAIN, correct = -1;
    if (tn_scope_begin() != TN_OK) return -1;
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *x, *y, *pred = NULL;
    if (gather(s, s->rows + D_TRAIN, n, &x, &y) &&
        (pred = tn_argmax_dim(mlp_forward(m, x), 1, false)) &&
        tn_copy_to(pred, s->pred, (size_t)n * sizeof *s->pred) == TN_OK) {
        correct = 0;
        for (int64_t i = 0; i < n; i++)
            correct += s->pred[i] == s->by[i];
    }
    tn_set_grad_enabled(prev);
    tn_scope_end();
    return correct < 0 ? -1 : (double)correct / (double)n;
}

/* One full training from the same initialisation; sets s->accuracy. */
static int digits_body(void *st, int64_t iters) {
    digits_state *s = st;
    for (int64_t it = 0; it < iters; it++) {
        mlp m;
        if (!mlp_new(&m, DIGITS_PIXELS, D_HIDDEN, DIGITS_CLASSES, 0.1, 0.9, 0, TN_DEVICE_CPU))
            return bench_fail("digits", "model setup");
        memcpy(s->order, s->rows, D_TRAIN * sizeof *s->order);
        uint64_t rng = 0x5eed;
        tn_status rc = TN_OK;
        for (int e = 0; e < s->epochs && rc == TN_OK; e++) {
            example_shuffle(s->order, D_TRAIN, &rng);
            for (int64_t b = 0; b < D_TRAIN && rc == TN_OK; b += D_BATCH) {
                int64_t n = D_TRAIN - b < D_BATCH ? D_TRAIN - b : D_BATCH;
                if ((rc = tn_scope_begin()) < 0) break;
                tn_tensor *x, *y;
                rc = gather(s, s->order + b, n, &x, &y) ? mlp_step(&m, x, y) : tn_last_status();
                tn_scope_end();
            }
        }
        s->accuracy = rc == TN_OK ? digits_accuracy(s, &m) : -1;
        mlp_free(&m);
        if (s->accuracy < 0) return bench_fail("digits", "training");
    }
    return 0;
}

int bench_digits(const bench_opts *o) {
    digits_state s = {.epochs = o->quick ? 1 : D_EPOCHS};
    char err[512];
    if (digits_load(o->data, &s.d, err, sizeof err) < 0) {
        fprintf(stderr, "tenet-bench: digits: %s (use --data)\n", err);
        return -1;
    }
    int rc = 0;
    s.rows = malloc((size_t)s.d.n * sizeof *s.rows);
    s.order = malloc((size_t)s.d.n * sizeof *s.order);
    s.pred = malloc((size_t)s.d.n * sizeof *s.pred);
    s.bx = malloc((size_t)s.d.n * DIGITS_PIXELS * sizeof *s.bx);
    s.by = malloc((size_t)s.d.n * sizeof *s.by);
    if (!s.rows || !s.order || !s.pred || !s.bx || !s.by || s.d.n <= D_TRAIN) {
        fprintf(stderr, "tenet-bench: digits: out of memory or too few rows\n");
        rc = -1;
    }
    double secs[BENCH_MAX_RUNS];
    if (rc == 0) {
        uint64_t rng = 3; /* the demo's split seed */
        for (int64_t i = 0; i < s.d.n; i++)
            s.rows[i] = i;
        example_shuffle(s.rows, s.d.n, &rng);
        /* A training is long enough to time alone: the calibration run is the warm-up. */
        bench_opts once = *o;
        once.warmup = 0;
        if (bench_time(&once, digits_body, &s, 0, secs) < 0) rc = -1;
    }
    if (rc == 0) {
        bench_result r = {.name = "digits", .unit = "s", .higher_is_better = false};
        bench_stats(&r, secs, o->repeat);
        bench_extra(&r, "accuracy", s.accuracy);
        bench_extra(&r, "epochs", s.epochs);
        bench_emit(&r);
    }
    free(s.rows), free(s.order), free(s.pred), free(s.bx), free(s.by);
    digits_free(&s.d);
    return rc;
}
