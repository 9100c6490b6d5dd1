/* Several threads backward through ONE graph.
 *
 * Each round worker 0 builds loss = (w*w).sum() over a fresh float64 leaf
 * w = 0.5 (mul saves both inputs, so a second backward needs them), the
 * workers start together on a barrier and:
 *   retain    each runs tn_backward(loss, retain_graph=true) PASSES times:
 *             all succeed and w.grad == 2*0.5 * N*PASSES exactly;
 *   once      each runs tn_backward(loss, retain_graph=false) once: exactly
 *             one succeeds, the others fail with "Trying to backward through
 *             the graph a second time"; w.grad == 1 exactly;
 *   grad      as once, with tn_autograd_grad: one gets 1 everywhere, the
 *             others the same error; w.grad stays NULL.
 * Then worker 0 checks and drops the graph. At the end nothing has leaked.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAX_THREADS 256
#define PASSES 4
#define N_ELEMS 33

enum { MODE_RETAIN, MODE_ONCE, MODE_GRAD, MODES };
static const char *const mode_names[MODES] = {"retain", "once", "grad"};
static const char second_time[] = "Trying to backward through the graph a second time";

typedef struct shared {
    pthread_barrier_t barrier;
    bool stop;
    int mode;
    tn_tensor *w, *loss;
    int ok[MAX_THREADS];      /* calls that succeeded */
    int refused[MAX_THREADS]; /* calls refused with the second-time error */
    int64_t rounds[MODES];
} shared;

static bool grad_is(const tn_tensor *g, double want) {
    double v[N_ELEMS];
    if (!g || tn_copy_to_f64(g, v, N_ELEMS) != TN_OK) return false;
    for (int i = 0; i < N_ELEMS; i++)
        if (v[i] != want) return false;
    return true;
}

static void build(shared *s) {
    int64_t shape[] = {N_ELEMS};
    s->w = tn_full(1, shape, TN_F64, 0.5);
    if (!s->w || tn_requires_grad_(s->w, true) != TN_OK) return;
    /* The scope frees our reference to the product; the graph keeps its own. */
    if (tn_scope_begin() != TN_OK) return;
    s->loss = tn_keep(tn_sum(tn_mul(s->w, s->w)));
    tn_scope_end();
}

/* One call of this round's mode; counts it as ok or refused. */
static void call(st_worker *w, shared *s, bool retain) {
    tn_status st;
    tn_tensor *g = NULL;
    if (s->mode == MODE_GRAD) {
        st = tn_autograd_grad(1, &s->loss, NULL, 1, &s->w, &g, false, false);
        if (st == TN_OK && !grad_is(g, 1.0)) st_fail(w, "tn_autograd_grad returned a wrong grad");
        tn_release(g);
    } else {
        st = tn_backward(s->loss, NULL, retain);
    }
    w->ops++;
    if (st == TN_OK)
        s->ok[w->id]++;
    else if (strstr(tn_last_error(), second_time))
        s->refused[w->id]++;
    else
        st_fail(w, "%s: unexpected error %s: %s", mode_names[s->mode], tn_status_string(st),
                tn_last_error());
}

static void check(shared *s, int n) {
    int ok = 0, refused = 0;
    for (int i = 0; i < n; i++) {
        ok += s->ok[i];
        refused += s->refused[i];
        s->ok[i] = s->refused[i] = 0;
    }
    tn_tensor *g = tn_grad(s->w);
    switch (s->mode) {
    case MODE_RETAIN:
        if (ok != n * PASSES)
            st_fail(NULL, "retain: %d of %d backward calls succeeded", ok, n * PASSES);
        if (!grad_is(g, (double)ok)) st_fail(NULL, "retain: w.grad != %d after %d passes", ok, ok);
        break;
    default:
        if (ok != 1 || refused != n - 1)
            st_fail(NULL, "%s: %d calls succeeded and %d were refused, want 1 and %d",
                    mode_names[s->mode], ok, refused, n - 1);
        if (s->mode == MODE_ONCE && !grad_is(g, 1.0)) st_fail(NULL, "once: w.grad != 1");
        if (s->mode == MODE_GRAD && g) st_fail(NULL, "grad: tn_autograd_grad accumulated");
    }
    tn_release(g);
    s->rounds[s->mode]++;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    for (int64_t round = 0;; round++) {
        if (w->id == 0) {
            s->stop = !st_go(w, round);
            s->mode = (int)(round % MODES);
            if (!s->stop) build(s);
            if (!s->stop && !s->loss) {
                st_fail(w, "setup: %s", tn_last_error());
                s->stop = true;
            }
        }
        pthread_barrier_wait(&s->barrier); /* the graph is built */
        if (s->stop) break;
        for (int p = 0; p < (s->mode == MODE_RETAIN ? PASSES : 1); p++)
            call(w, s, s->mode == MODE_RETAIN);
        pthread_barrier_wait(&s->barrier); /* every call returned */
        if (w->id == 0) {
            check(s, w->n);
            tn_release(s->loss);
            tn_release(s->w);
            s->loss = s->w = NULL;
        }
    }
    if (w->id == 0) {
        tn_release(s->loss);
        tn_release(s->w);
    }
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 30,
                 .iterations = 0,
                 .seed = 4,
                 .quick_seconds = 2,
                 .quick_iterations = 30000,
                 .quick_threads = 4};
    st_parse(argc, argv, &o,
             "threads backward through one shared graph, with and without "
             "retain_graph");
    if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    if (o.threads < 2) o.threads = 2;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    pthread_barrier_init(&s.barrier, NULL, (unsigned)o.threads);
    st_run(&o, o.threads, worker, &s);
    pthread_barrier_destroy(&s.barrier);
    printf("rounds: %lld retain, %lld once, %lld grad\n", (long long)s.rounds[MODE_RETAIN],
           (long long)s.rounds[MODE_ONCE], (long long)s.rounds[MODE_GRAD]);
    st_check_no_leak(&base, 8u << 20);
    return st_finish("stress_shared_graph", &o);
}
