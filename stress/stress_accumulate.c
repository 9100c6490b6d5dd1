/* Shared-leaf concurrent backward.
 *
 * Each round, N threads run passes of (w*2).sum() on one shared leaf w:
 * most threads backward into w.grad, every third one uses tn_autograd_grad
 * (which must return exactly 2 everywhere and accumulate nothing). After the
 * round, w.grad must be exactly 2 * (number of backward passes) in every
 * element: no accumulation lost or doubled. Rounds alternate a small w and
 * one above the OpenMP grain (kernels then fork inside user threads), and
 * float32 / float64.
 */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#define MAX_THREADS 256

typedef struct shared {
    tn_tensor *w;
    int64_t numel;
    int64_t backward_passes[MAX_THREADS];
} shared;

static bool all_equal(const tn_tensor *t, double want, int64_t n, double *bad) {
    double *v = malloc((size_t)n * sizeof *v);
    bool ok = v && tn_copy_to_f64(t, v, n) == TN_OK;
    for (int64_t i = 0; ok && i < n; i++)
        if (v[i] != want) {
            *bad = v[i];
            ok = false;
        }
    free(v);
    return ok;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    bool functional = w->id % 3 == 2;
    int64_t passes = 0;
    for (int64_t i = 0; st_go(w, i); i++) {
        if (tn_scope_begin() != TN_OK) { /* owns every tensor returned below, g included */
            st_fail(w, "tn_scope_begin failed: %s", tn_last_error());
            break;
        }
        tn_tensor *loss = tn_sum(tn_mul_scalar(s->w, 2.0));
        if (!loss) {
            st_fail(w, "forward failed: %s", tn_last_error());
        } else if (functional) {
            tn_tensor *g = NULL;
            if (tn_autograd_grad(1, &loss, NULL, 1, &s->w, &g, false, false) != TN_OK || !g) {
                st_fail(w, "tn_autograd_grad failed: %s", tn_last_error());
            } else {
                double bad = 0;
                if (!all_equal(g, 2.0, s->numel, &bad))
                    st_fail(w, "tn_autograd_grad returned %g, want 2", bad);
            }
        } else if (tn_backward(loss, NULL, false) != TN_OK) {
            st_fail(w, "backward failed: %s", tn_last_error());
        } else {
            passes++;
        }
        tn_scope_end();
        w->ops += 3; /* mul, sum, backward or grad */
    }
    s->backward_passes[w->id] = passes;
}

static void round_once(const st_opts *o, shared *s, int64_t numel, tn_dtype dt) {
    int64_t shape[] = {numel};
    s->numel = numel;
    s->w = tn_full(1, shape, dt, 0.5);
    if (!s->w || tn_requires_grad_(s->w, true) != TN_OK) {
        st_fail(NULL, "setup: %s", tn_last_error());
        exit(st_finish("stress_accumulate", o));
    }
    st_run(o, o->threads, worker, s);
    int64_t total = 0;
    for (int i = 0; i < o->threads; i++)
        total += s->backward_passes[i];
    tn_tensor *g = tn_grad(s->w);
    double bad = 0;
    if (total == 0 && g) st_fail(NULL, "w.grad set but no backward ran");
    if (total > 0 && !g) st_fail(NULL, "w.grad is NULL after %lld passes", (long long)total);
    if (g && !all_equal(g, 2.0 * (double)total, numel, &bad))
        st_fail(NULL, "w.grad element %g, want exactly %g (%lld passes, %s, %lld elements)", bad,
                2.0 * (double)total, (long long)total, tn_dtype_name(dt), (long long)numel);
    tn_release(g);
    tn_release(s->w);
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 30,
                 .iterations = 2000,
                 .seed = 1,
                 .quick_seconds = 2,
                 .quick_iterations = 300,
                 .quick_threads = 4};
    st_parse(argc, argv, &o,
             "N threads x M passes of (w*2).sum() into one leaf: "
             "w.grad must be 2*N*M exactly");
    if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    const int64_t sizes[] = {16, 100003};
    const tn_dtype types[] = {TN_F32, TN_F64};
    int r = 0;
    do {
        round_once(&o, &s, sizes[r % 2], types[(r / 2) % 2]);
        r++;
    } while (st_time_left() && r < 1000);
    printf("%d rounds\n", r);
    st_check_no_leak(&base, 8u << 20);
    return st_finish("stress_accumulate", &o);
}
