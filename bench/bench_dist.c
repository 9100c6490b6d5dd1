/* tenet-bench-dist: tenet_mpi's costs, run under mpirun (scripts/bench-dist).
 *
 *   allreduce   tn_dist_allreduce_ beside MPI_Allreduce of the same bytes,
 *               by message size: what tenet adds to MPI (its agreement, the
 *               version bump), as a ratio of bandwidths
 *   ddp_mlp     a 64-128-10 MLP step (global batch 64) with DDP
 *   ddp_gpt     the gpt_step of tenet-bench (global batch 16) with DDP
 *
 * For the steps, each rank takes batch / N rows; a figure is the median
 * over runs of the slowest rank's time. The DDP statistics say how long
 * backward's end waited for the reductions, beside the time the same
 * bytes take to reduce alone: the rest was hidden behind backward.
 *
 * usage: mpirun -np N tenet-bench-dist [--threads T] [--repeat R] [--quick] [--bucket-kib K]
 *        [--case allreduce|ddp_mlp|ddp_gpt]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tenet.h>
#include <tenet/dist.h>

#include "gpt_model.h"

static int rank, world, repeat = 9;
static size_t bucket_bytes; /* --bucket-kib; 0: DDP's 25 MiB */
static bool quick;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The slowest rank's seconds per iteration of one run. */
static double slowest(double t0, int iters) {
    double t = (now() - t0) / iters, m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static int die(const char *what) {
    fprintf(stderr, "tenet-bench-dist (rank %d): %s: %s\n", rank, what, tn_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* ---- allreduce -------------------------------------------------------------------- */

static void bench_allreduce(void) {
    static const int64_t kib[] = {4, 64, 1024, 16384, 65536};
    if (rank == 0)
        printf("allreduce (float32 sum, %d ranks): size, tenet GB/s, MPI_Allreduce GB/s, ratio\n",
               world);
    for (int k = 0; k < (quick ? 2 : 5); k++) {
        int64_t n = kib[k] * 1024 / 4;
        tn_tensor *t = tn_ones(1, &n, TN_F32);
        float *raw = malloc((size_t)n * 4);
        if (!t || !raw) die("allocating");
        for (int64_t i = 0; i < n; i++)
            raw[i] = 1;
        int iters = (int)(kib[k] <= 64 ? 200 : kib[k] <= 1024 ? 20 : 3);
        if (quick) iters = 2;
        double tt[64], tm[64];
        for (int r = 0; r < repeat; r++) { /* alternate, so that load drift hits both */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            for (int i = 0; i < iters; i++)
                if (tn_dist_allreduce_(t, TN_REDUCE_SUM) < 0) die("tn_dist_allreduce_");
            tt[r] = slowest(t0, iters);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now();
            for (int i = 0; i < iters; i++)
                MPI_Allreduce(MPI_IN_PLACE, raw, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            tm[r] = slowest(t0, iters);
        }
        double bytes = (double)n * 4, a = median(tt, repeat), b = median(tm, repeat);
        if (rank == 0)
            printf("  %8lld KiB  %8.3f  %8.3f  %.3f\n", (long long)kib[k], bytes / a * 1e-9,
                   bytes / b * 1e-9, b / a);
        tn_release(t);
        free(raw);
    }
}

/* ---- DDP steps -------------------------------------------------------------------- */

typedef struct step_case {
    const char *name;
    int n;
    tn_tensor **params;
    tn_tensor *(*loss)(void *ctx); /* this rank's loss (scope-owned) */
    void *ctx;
    tn_status (*step)(void *ctx); /* after backward: the optimiser step, zero_grad */
} step_case;

static void one_step(step_case *c) {
    if (tn_scope_begin() < 0) die("opening a scope");
    tn_tensor *l = c->loss(c->ctx);
    if (!l || tn_backward(l, NULL, false) < 0 || c->step(c->ctx) < 0) die(c->name);
    tn_scope_end();
}

/* Seconds the same bytes take to reduce alone (the slowest rank's median). */
static double alone_s(int64_t bytes) {
    int64_t n = bytes / 4 > 0 ? bytes / 4 : 1;
    tn_tensor *t = tn_ones(1, &n, TN_F32);
    double v[64];
    for (int r = 0; r < repeat; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if (tn_dist_allreduce_(t, TN_REDUCE_SUM) < 0) die("tn_dist_allreduce_");
        v[r] = slowest(t0, 1);
    }
    tn_release(t);
    return median(v, repeat);
}

static void run_steps(step_case *c) {
    tn_ddp *d = tn_ddp_new(c->params, c->n, bucket_bytes);
    if (!d) die("tn_ddp_new");
    int iters = quick ? 2 : 10;
    for (int w = 0; w < 3; w++)
        one_step(c);
    tn_ddp_stats a, b;
    tn_ddp_get_stats(d, &a);
    double v[64];
    for (int r = 0; r < repeat; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (int i = 0; i < iters; i++)
            one_step(c);
        v[r] = slowest(t0, iters);
    }
    tn_ddp_get_stats(d, &b);
    int64_t passes = b.passes - a.passes;
    double per_bytes = (double)(b.bytes - a.bytes) / (double)passes;
    double wait = (b.wait_seconds - a.wait_seconds) / (double)passes;
    /* The last rank to finish backward waits only for what was not hidden; the others also
     * wait for it (load imbalance). */
    double wait_min, wait_max;
    MPI_Allreduce(&wait, &wait_min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&wait, &wait_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double alone = alone_s((int64_t)per_bytes), ms = 1e3 * median(v, repeat);
    double hidden = world > 1 && alone > 0 ? 1 - wait_min / alone : 0;
    if (rank == 0)
        printf("%s: %d rank(s) x %d thread(s): %.3f ms/step; %d bucket(s), %.1f launched during "
               "backward and %.1f at its end per step; %.1f KiB reduced per step: alone %.3f ms; "
               "end-of-backward wait %.3f ms on the last rank (%.0f%% of the reduction hidden), "
               "%.3f ms on the first (imbalance)\n",
               c->name, world, tn_get_num_threads(), ms, tn_ddp_num_buckets(d),
               (double)(b.buckets_in_backward - a.buckets_in_backward) / (double)passes,
               (double)(b.buckets_at_end - a.buckets_at_end) / (double)passes, per_bytes / 1024,
               1e3 * alone, 1e3 * wait_min, 100 * (hidden > 0 ? hidden : 0), 1e3 * wait_max);
    tn_ddp_free(d);
}

/* the MLP: x [64/N, 64] -> 128 ReLU -> 10, cross-entropy, SGD momentum 0.9 */
typedef struct mlp_ctx {
    tn_tensor *p[4], *x, *y;
    tn_sgd *opt;
} mlp_ctx;

static tn_tensor *mlp_loss(void *ctx) {
    mlp_ctx *m = ctx;
    tn_tensor *h = tn_relu(tn_linear(m->x, m->p[0], m->p[1]));
    return tn_cross_entropy(tn_linear(h, m->p[2], m->p[3]), m->y);
}
static tn_status mlp_step(void *ctx) {
    mlp_ctx *m = ctx;
    tn_status st = tn_sgd_step(m->opt);
    return st < 0 ? st : tn_sgd_zero_grad(m->opt);
}

static tn_tensor *filled(int nd, const int64_t *shape, double scale, double phase) {
    tn_tensor *t = tn_zeros(nd, shape, TN_F32);
    float *p = tn_data_ptr(t);
    for (int64_t i = 0; i < tn_numel(t); i++)
        p[i] = (float)(scale * sin(0.37 * (double)i + phase));
    return t;
}

static void bench_ddp_mlp(void) {
    int64_t b = 64 / world;
    mlp_ctx m = {{filled(2, (int64_t[]){128, 64}, 0.1, 0), filled(1, (int64_t[]){128}, 0.1, 1),
                  filled(2, (int64_t[]){10, 128}, 0.1, 2), filled(1, (int64_t[]){10}, 0.1, 3)},
                 filled(2, (int64_t[]){b, 64}, 1, rank), NULL, NULL};
    m.y = tn_zeros(1, &b, TN_I64);
    for (int64_t i = 0; i < b; i++)
        ((int64_t *)tn_data_ptr(m.y))[i] = (i * 7 + rank) % 10;
    for (int k = 0; k < 4; k++)
        if (tn_requires_grad_(m.p[k], true) < 0) die("requires_grad_");
    m.opt = tn_sgd_new(4, m.p, 0.01, 0.9, 0);
    step_case c = {"ddp_mlp", 4, m.p, mlp_loss, &m, mlp_step};
    run_steps(&c);
    tn_sgd_free(m.opt);
    for (int k = 0; k < 4; k++)
        tn_release(m.p[k]);
    tn_release(m.x);
    tn_release(m.y);
}

/* tenet-bench's gpt_step model and batch (16 x 64 tokens over the ranks) */
typedef struct gpt_ctx {
    gpt_model m;
    tn_tensor *x, *y;
    tn_adam *opt;
} gpt_ctx;

static tn_tensor *gpt_case_loss(void *ctx) {
    gpt_ctx *g = ctx;
    return gpt_loss(&g->m, g->x, g->y);
}
/* as tenet-gpt: clip, AdamW, zero_grad */
static tn_status gpt_step(void *ctx) {
    gpt_ctx *g = ctx;
    tn_status st = tn_clip_grad_norm_(g->m.n_params, g->m.params, 1.0, 2.0, NULL);
    if (st == TN_OK) st = tn_adam_step(g->opt);
    return st < 0 ? st : tn_adam_zero_grad(g->opt);
}

static void bench_ddp_gpt(void) {
    gpt_ctx g;
    gpt_config cfg = {96, quick ? 16 : 64, quick ? 1 : 4, 4, quick ? 32 : 128};
    if (!gpt_init(&g.m, cfg, 0)) die("gpt_init");
    int64_t rows = (quick ? 2 : 16) / world, shape[2] = {rows > 0 ? rows : 1, cfg.block};
    int64_t *tok = malloc((size_t)(shape[0] * cfg.block + 1) * sizeof *tok);
    for (int64_t i = 0; i <= shape[0] * cfg.block; i++)
        tok[i] = (i + rank * shape[0] * cfg.block) * 7 % cfg.vocab;
    g.x = tn_tensor_from(tok, TN_I64, 2, shape, false);
    g.y = tn_tensor_from(tok + 1, TN_I64, 2, shape, false);
    free(tok);
    g.opt = gpt_optimizer(&g.m, 1e-3);
    if (!g.x || !g.y || !g.opt) die("gpt setup");
    step_case c = {"ddp_gpt", g.m.n_params, g.m.params, gpt_case_loss, &g, gpt_step};
    run_steps(&c);
    tn_adam_free(g.opt);
    tn_release(g.x);
    tn_release(g.y);
    gpt_free(&g.m);
}

int main(int argc, char **argv) {
    if (tn_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "tenet-bench-dist: %s\n", tn_last_error());
        return 1;
    }
    rank = tn_dist_rank();
    world = tn_dist_world_size();
    const char *only = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc) tn_set_num_threads(atoi(argv[++a]));
        else if (!strcmp(argv[a], "--repeat") && a + 1 < argc) repeat = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--quick")) quick = true;
        else if (!strcmp(argv[a], "--bucket-kib") && a + 1 < argc)
            bucket_bytes = (size_t)atol(argv[++a]) * 1024;
        else if (!strcmp(argv[a], "--case") && a + 1 < argc) only = argv[++a];
        else {
            if (rank == 0)
                fprintf(stderr, "usage: mpirun -np N %s [--threads T] [--repeat R] [--quick] "
                                "[--bucket-kib K] [--case allreduce|ddp_mlp|ddp_gpt]\n", argv[0]);
            tn_dist_finalize();
            return 2;
        }
    }
    if (repeat < 1 || repeat > 64) repeat = 9;
    if (quick) repeat = 1;
    if (!only || !strcmp(only, "allreduce")) bench_allreduce();
    if (!only || !strcmp(only, "ddp_mlp")) bench_ddp_mlp();
    if (!only || !strcmp(only, "ddp_gpt")) bench_ddp_gpt();
    tn_dist_finalize();
    return 0;
}
