/* Saved tensors are weak handles: the tensor a node saved may die on one
 * thread while other threads unpack it in backward.
 *
 * Each round the main thread builds y = sum(sin(h) * h), h = 2x (sin and
 * mul save h; mul saves sin's output), gives every worker its own
 * reference to h and drops its own. Workers run tn_autograd_grad(y, x)
 * with retain_graph, sometimes with create_graph and a second derivative,
 * and each drops its h at a random iteration, so that h is torn down
 * while unpacks of it race. Invariants: every gradient is exact (first
 * 4x cos 2x + 2 sin 2x, second 8 cos 2x - 8x sin 2x), every call succeeds,
 * and after each round nothing is left alive.
 */
#include <math.h>
#include <stdio.h>

#include "harness.h"

#define N 16
#define MAX_THREADS 64

typedef struct shared {
    tn_tensor *x, *y;
    tn_tensor *h[MAX_THREADS]; /* one reference per worker */
    double xv[N];
} shared;

static bool close_to(const tn_tensor *t, const double *want) {
    const double *p = tn_data_ptr(t);
    if (!p) return false;
    for (int i = 0; i < N; i++)
        if (fabs(p[i] - want[i]) > 1e-9 * (1 + fabs(want[i]))) return false;
    return true;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    double d1[N], d2[N];
    for (int i = 0; i < N; i++) {
        double x = s->xv[i];
        d1[i] = 4 * x * cos(2 * x) + 2 * sin(2 * x);
        d2[i] = 8 * cos(2 * x) - 8 * x * sin(2 * x);
    }
    int drop_at = st_randint(w, 8);
    for (int64_t i = 0; st_go(w, i) && i < 16; i++) {
        if (i == drop_at) {
            tn_release(s->h[w->id]);
            s->h[w->id] = NULL;
        }
        bool second = st_randint(w, 3) == 0;
        tn_tensor *g = NULL;
        if (tn_autograd_grad(1, &s->y, NULL, 1, &s->x, &g, true, second) != TN_OK || !g) {
            st_fail(w, "grad: %s", tn_last_error());
            continue;
        }
        if (!close_to(g, d1)) st_fail(w, "first derivative wrong");
        if (second) {
            tn_tensor *sg = tn_sum(g), *gg = NULL;
            /* retain_graph: this graph reaches y's nodes, which others still run */
            if (!sg || tn_autograd_grad(1, &sg, NULL, 1, &s->x, &gg, true, false) != TN_OK)
                st_fail(w, "second derivative: %s", tn_last_error());
            else if (!close_to(gg, d2))
                st_fail(w, "second derivative wrong");
            tn_release(gg);
            tn_release(sg);
        }
        tn_release(g);
        w->ops++;
    }
    tn_release(s->h[w->id]);
    s->h[w->id] = NULL;
}

static bool build(shared *s, st_worker *rng, int threads) {
    for (int i = 0; i < N; i++) s->xv[i] = (st_rand(rng) % 2000) / 1000.0 - 1.0;
    s->x = tn_tensor_from(s->xv, TN_F64, 1, (const int64_t[]){N}, true);
    tn_tensor *h = s->x ? tn_mul_scalar(s->x, 2) : NULL;
    tn_tensor *sn = h ? tn_sin(h) : NULL, *p = sn ? tn_mul(sn, h) : NULL;
    s->y = p ? tn_sum(p) : NULL;
    tn_release(sn);
    tn_release(p);
    for (int k = 0; k < threads && h; k++) s->h[k] = tn_retain(h);
    tn_release(h);
    return s->y != NULL;
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 4, .seconds = 10, .seed = 11, .quick_seconds = 2,
                 .quick_threads = 4};
    st_parse(argc, argv, &o, "stress_saved_weak: saved tensors torn down during backward");
    if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    st_worker rng = {.rng = o.seed | 1};
    /* The first round warms the allocator (thread caches, size classes):
     * later rounds are held to its footprint, so a leak that grows with the
     * rounds shows within the slack. */
    bool warm = false;
    while (st_time_left()) {
        shared s = {0};
        if (!build(&s, &rng, o.threads)) {
            st_fail(NULL, "setup: %s", tn_last_error());
            break;
        }
        st_run(&o, o.threads, worker, &s);
        tn_release(s.y);
        tn_release(s.x);
        if (!warm) {
            st_mem_snapshot(&base);
            warm = true;
        }
        st_check_no_leak(&base, 1 << 20);
        if (st_violations()) break;
    }
    return st_finish("stress_saved_weak", &o);
}
