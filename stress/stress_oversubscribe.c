/* OpenMP inside ops, called from many user threads: no thread explosion.
 *
 * U user threads (--threads, default 8) each run ops above the OpenMP
 * grain (an add of 1M floats, a 192x192 matmul), first with the default
 * number of OpenMP threads per op, then after tn_set_num_threads(1), and
 * for reference with a single user thread. Worker 0 samples the process's
 * thread count (/proc/self/status) as it goes.
 *
 * Invariant: the process never has more than 1 + U * T + 4 threads, T the
 * OpenMP threads an op may use (each user thread forks at most one team at
 * a time, nested parallelism is off). Printed: operations per second of
 * each setting and the peak thread count (docs/threads.md quotes them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

typedef struct shared {
    tn_tensor *a, *b, *m;
    int peak; /* worker 0 only */
} shared;

static int threads_now(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    for (int64_t i = 0; st_go(w, i); i++) {
        tn_tensor *y = i % 2 ? tn_add(s->a, s->b) : tn_matmul(s->m, s->m);
        if (!y) st_fail(w, "op failed: %s", tn_last_error());
        tn_release(y);
        w->ops++;
        if (w->id == 0) {
            int n = threads_now();
            if (n > s->peak) s->peak = n;
        }
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One setting: users threads, omp OpenMP threads per op, for `seconds`. */
static void setting(const st_opts *o, shared *s, const char *name, int users, int omp,
                    double seconds) {
    tn_set_num_threads(omp);
    s->peak = 0;
    st_opts one = *o;
    one.threads = users;
    st_set_deadline(seconds);
    int64_t ops0 = st_ops();
    double t0 = now_s();
    st_run(&one, users, worker, s);
    double dt = now_s() - t0;
    int limit = 1 + users * omp + 4;
    if (s->peak > limit) st_fail(NULL, "%s: peak %d threads > %d", name, s->peak, limit);
    printf("%-28s U=%d T=%d: %7.1f ops/s, peak %d threads (limit %d)\n", name, users, omp,
           (double)(st_ops() - ops0) / dt, s->peak, limit);
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 12,
                 .iterations = 0,
                 .seed = 7,
                 .quick_seconds = 3,
                 .quick_iterations = 0,
                 .quick_threads = 8};
    st_parse(argc, argv, &o,
             "many user threads calling OpenMP ops: no oversubscription "
             "explosion");
    static shared s;
    int64_t big[] = {1 << 20}, sq[] = {192, 192};
    s.a = tn_ones(1, big, TN_F32);
    s.b = tn_ones(1, big, TN_F32);
    s.m = tn_rand(2, sq, TN_F32);
    int omp = tn_get_num_threads();
    setting(&o, &s, "one user thread", 1, omp, o.seconds / 3);
    setting(&o, &s, "user threads", o.threads, omp, o.seconds / 3);
    setting(&o, &s, "user threads, 1 OpenMP", o.threads, 1, o.seconds / 3);
    tn_set_num_threads(omp);
    tn_release(s.a);
    tn_release(s.b);
    tn_release(s.m);
    return st_finish("stress_oversubscribe", &o);
}
