/* Concurrent version bumps through views and detached aliases.
 *
 * One leaf x (requires grad) of N*K float64 elements; worker i owns the
 * slice x[i*K:(i+1)*K] and adds 1 to it in place, under no-grad, through a
 * different alias each time: the narrow view, detach() of the view, a
 * narrow of detach(x), a select of a 2-D view of the slice. Every alias
 * shares x's version counter, so after the round
 *   version(x) == total writes (no bump lost to a concurrent one),
 *   every element of slice i == writes of worker i (the writes themselves
 *   are disjoint, hence no data race),
 * and each worker sees the version strictly grow across each of its writes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#define MAX_THREADS 256
#define K 64

typedef struct shared {
    tn_tensor *x;
    int64_t writes[MAX_THREADS];
} shared;

/* A fresh alias of worker id's slice, picked by `how`. */
static tn_tensor *slice_alias(tn_tensor *x, int id, int how) {
    switch (how) {
    case 0:
        return tn_narrow(x, 0, (int64_t)id * K, K);
    case 1:
        return tn_detach(tn_narrow(x, 0, (int64_t)id * K, K));
    case 2:
        return tn_narrow(tn_detach(x), 0, (int64_t)id * K, K);
    default: { /* a 2-D view of x, then row `id` */
        int64_t shape[] = {-1, K};
        return tn_select(tn_view(tn_detach(x), 2, shape), 0, id);
    }
    }
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    bool prev = tn_set_grad_enabled(false);
    int64_t writes = 0;
    for (int64_t i = 0; st_go(w, i); i++) {
        if (tn_scope_begin() != TN_OK) {
            st_fail(w, "tn_scope_begin failed: %s", tn_last_error());
            break;
        }
        int how = st_randint(w, 4);
        tn_tensor *a = slice_alias(s->x, w->id, how);
        int64_t before = tn_version(s->x);
        if (!a) {
            st_fail(w, "alias %d failed: %s", how, tn_last_error());
        } else if (tn_add_scalar_(a, 1.0) != TN_OK) {
            st_fail(w, "add_ through alias %d failed: %s", how, tn_last_error());
        } else {
            writes++;
            int64_t after = tn_version(a);
            if (after <= before)
                st_fail(w, "version went from %lld to %lld across a write (alias %d)",
                        (long long)before, (long long)after, how);
        }
        tn_scope_end();
        w->ops += 3;
    }
    tn_set_grad_enabled(prev);
    s->writes[w->id] = writes;
}

static void round_once(const st_opts *o, shared *s) {
    int64_t shape[] = {(int64_t)o->threads * K};
    s->x = tn_zeros(1, shape, TN_F64);
    if (!s->x || tn_requires_grad_(s->x, true) != TN_OK) {
        st_fail(NULL, "setup: %s", tn_last_error());
        return;
    }
    st_run(o, o->threads, worker, s);
    int64_t total = 0;
    for (int i = 0; i < o->threads; i++)
        total += s->writes[i];
    if (tn_version(s->x) != total)
        st_fail(NULL, "version(x) == %lld after %lld writes", (long long)tn_version(s->x),
                (long long)total);
    double *v = malloc((size_t)shape[0] * sizeof *v);
    if (!v || tn_copy_to_f64(s->x, v, shape[0]) != TN_OK) st_fail(NULL, "copy failed");
    for (int i = 0; v && i < o->threads; i++)
        for (int j = 0; j < K; j++)
            if (v[i * K + j] != (double)s->writes[i]) {
                st_fail(NULL, "x[%d] == %g, want %lld (worker %d's writes)", i * K + j,
                        v[i * K + j], (long long)s->writes[i], i);
                break;
            }
    free(v);
    tn_release(s->x);
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 30,
                 .iterations = 20000,
                 .seed = 2,
                 .quick_seconds = 2,
                 .quick_iterations = 2000,
                 .quick_threads = 4};
    st_parse(argc, argv, &o,
             "in-place writes through views/detach aliases of one tensor: "
             "final version == number of writes");
    if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    int r = 0;
    do {
        round_once(&o, &s);
        r++;
    } while (st_time_left() && r < 1000);
    printf("%d rounds\n", r);
    st_check_no_leak(&base, 8u << 20);
    return st_finish("stress_version", &o);
}
