/* The tensor race detector: it must catch a planted race and stay silent on
 * correctly synchronised programs.
 *
 *   planted    half the workers add 1 in place to a shared x, the other half
 *              read it (x*2): the detector must report (both op names in the
 *              report) within the phase's time;
 *   disjoint   each worker writes and reads its own narrow slice of one
 *              shared tensor: no report (ranges do not overlap);
 *   locked     every worker writes and reads the whole shared tensor under
 *              one mutex: no report;
 *   phased     rounds separated by a barrier: everybody reads, then one
 *              worker writes: no report.
 * Last, the overhead of the detector on an add of 16 and of 1M floats.
 * Under ThreadSanitizer the planted phase's kernels are hidden from TSan
 * (it is a real data race, on purpose).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define BIG (1 << 18)
#define SLICE 4096

typedef struct shared {
    tn_tensor *x;
    pthread_mutex_t lock;
    pthread_barrier_t barrier;
    _Atomic bool stop;
} shared;

static void planted(st_worker *w) {
    shared *s = w->arg;
    bool writer = w->id % 2 == 0;
    st_tsan_ignore_begin();
    for (int64_t i = 0; st_go(w, i) && tn_race_reports() == 0; i++) {
        if (writer) {
            if (tn_add_scalar_(s->x, 1.0) != TN_OK) st_fail(w, "add_: %s", tn_last_error());
        } else {
            tn_tensor *y = tn_mul_scalar(s->x, 2.0);
            if (!y) st_fail(w, "mul: %s", tn_last_error());
            tn_release(y);
        }
        w->ops++;
    }
    st_tsan_ignore_end();
}

static void disjoint(st_worker *w) {
    shared *s = w->arg;
    tn_tensor *mine = tn_narrow(s->x, 0, (int64_t)w->id * SLICE, SLICE);
    for (int64_t i = 0; mine && st_go(w, i); i++) {
        if (tn_scope_begin() != TN_OK) {
            st_fail(w, "tn_scope_begin failed: %s", tn_last_error());
            break;
        }
        if (tn_add_scalar_(mine, 1.0) != TN_OK || !tn_mul_scalar(mine, 2.0) ||
            tn_copy_(mine, tn_exp(tn_mul_scalar(mine, 0.0))) != TN_OK)
            st_fail(w, "disjoint: %s", tn_last_error());
        tn_scope_end();
        w->ops += 5;
    }
    tn_release(mine);
}

static void locked(st_worker *w) {
    shared *s = w->arg;
    for (int64_t i = 0; st_go(w, i); i++) {
        pthread_mutex_lock(&s->lock);
        tn_status st = st_randint(w, 2) ? tn_add_scalar_(s->x, 1.0) : tn_mul_scalar_(s->x, 0.5);
        tn_tensor *y = tn_add(s->x, s->x);
        pthread_mutex_unlock(&s->lock);
        if (st != TN_OK || !y) st_fail(w, "locked: %s", tn_last_error());
        tn_release(y);
        w->ops += 2;
    }
}

static void phased(st_worker *w) {
    shared *s = w->arg;
    for (int64_t i = 0;; i++) {
        /* relaxed: the barrier orders the store before every load */
        if (w->id == 0) atomic_store_explicit(&s->stop, !st_go(w, i), memory_order_relaxed);
        pthread_barrier_wait(&s->barrier);
        if (atomic_load_explicit(&s->stop, memory_order_relaxed)) break;
        tn_tensor *y = tn_sum(s->x); /* everybody reads */
        if (!y) st_fail(w, "phased read: %s", tn_last_error());
        tn_release(y);
        pthread_barrier_wait(&s->barrier);
        if (w->id == (int)(i % w->n) && tn_add_scalar_(s->x, 1.0) != TN_OK) /* one writes */
            st_fail(w, "phased write: %s", tn_last_error());
        pthread_barrier_wait(&s->barrier);
        w->ops += 2;
    }
}

static tn_tensor *zeros(int64_t n) {
    int64_t shape[] = {n};
    return tn_zeros(1, shape, TN_F32);
}

static void silent_phase(const st_opts *o, shared *s, const char *name, void (*fn)(st_worker *),
                         int64_t numel, double seconds) {
    s->x = zeros(numel);
    tn_race_reports_reset();
    st_set_deadline(seconds);
    st_run(o, o->threads, fn, s);
    if (tn_race_reports() != 0) {
        char buf[4096];
        tn_race_last_report(buf, sizeof buf);
        st_fail(NULL, "%s: %llu false race reports; the last:\n%s", name,
                (unsigned long long)tn_race_reports(), buf);
    }
    printf("%s: 0 reports expected, %llu seen\n", name, (unsigned long long)tn_race_reports());
    tn_release(s->x);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Median over 5 runs of the time per tn_add of two n-float tensors; each
 * run lasts about `budget` seconds (bounded also under sanitizers). */
static double add_us(int64_t n, double budget) {
    tn_tensor *a = zeros(n), *b = zeros(n);
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_s(), t1;
        int64_t reps = 0;
        do {
            for (int i = 0; i < 16; i++)
                tn_release(tn_add(a, b));
            reps += 16;
        } while ((t1 = now_s()) - t0 < budget);
        t[r] = (t1 - t0) / (double)reps * 1e6;
    }
    for (int i = 0; i < 5; i++) /* sort */
        for (int j = i + 1; j < 5; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j];
                t[j] = x;
            }
    tn_release(a);
    tn_release(b);
    return t[2];
}

/* Off and on alternate, so that a change of machine load hits both. */
static void overhead(bool quick) {
    double budget = quick ? 0.01 : 0.2, s[2] = {0, 0}, b[2] = {0, 0};
    for (int round = 0; round < (quick ? 1 : 3); round++)
        for (int on = 0; on < 2; on++) {
            tn_set_detect_races(on);
            double x = add_us(16, budget), y = add_us(1 << 20, budget);
            if (round == 0 || x < s[on]) s[on] = x;
            if (round == 0 || y < b[on]) b[on] = y;
        }
    printf("overhead: add of 16 floats %.3f -> %.3f us (x%.2f), of 1M floats %.1f -> %.1f us "
           "(x%.3f)\n",
           s[0], s[1], s[1] / s[0], b[0], b[1], b[1] / b[0]);
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 4,
                 .seconds = 20,
                 .iterations = 0,
                 .seed = 5,
                 .quick_seconds = 4,
                 .quick_iterations = 0,
                 .quick_threads = 4};
    st_parse(argc, argv, &o, "race detector: catches a planted race, silent otherwise");
    if (o.threads < 2) o.threads = 2;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    pthread_mutex_init(&s.lock, NULL);
    pthread_barrier_init(&s.barrier, NULL, (unsigned)o.threads);
    double phase = o.seconds / 4;

    tn_set_race_report_stream(NULL); /* we print the first report ourselves */
    tn_set_detect_races(true);
    s.x = zeros(BIG);
    tn_race_reports_reset();
    st_set_deadline(phase);
    st_run(&o, o.threads, planted, &s);
    char buf[8192];
    tn_race_last_report(buf, sizeof buf);
    if (tn_race_reports() == 0)
        st_fail(NULL, "planted race not reported in %.1f s", phase);
    else if (!strstr(buf, "write by thread") || !strstr(strstr(buf, "planted (") + 1, "planted ("))
        st_fail(NULL, "the report does not show both sides' calls:\n%s", buf);
    printf("planted: %llu report(s); the first:\n%s", (unsigned long long)tn_race_reports(), buf);
    tn_release(s.x);

    silent_phase(&o, &s, "disjoint", disjoint, (int64_t)o.threads * SLICE, phase);
    silent_phase(&o, &s, "locked", locked, BIG / 4, phase / 2);
    silent_phase(&o, &s, "phased", phased, BIG / 4, phase / 2);

    overhead(o.quick);
    tn_set_detect_races(false);
    tn_set_race_report_stream(stderr);
    pthread_barrier_destroy(&s.barrier);
    pthread_mutex_destroy(&s.lock);
    st_check_no_leak(&base, 16u << 20);
    return st_finish("stress_race", &o);
}
