/* stress/harness.h — the shared frame of the torture programs (Concurrency Kit style).
 *
 * Every program takes the same options:
 *   --threads N      worker threads (default per program)
 *   --seconds S      stop after S seconds ...
 *   --iterations I   ... or after I iterations per thread, whichever comes first
 *   --seed X         seed of the workers' random streams (printed, so a failing
 *                    run can be replayed)
 *   --quick          the CI setting: a few seconds at most, also under sanitizers
 * Workers start together on a pthread barrier, check invariants as they go,
 * and count operations and violations. The program prints both and exits 1
 * on any violation.
 *
 * Threads: st_fail, st_count and st_go may be called from any worker;
 * everything else from the main thread.
 */
#ifndef TN_STRESS_HARNESS_H
#define TN_STRESS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include <tenet.h>

typedef struct st_opts {
    int threads;
    double seconds;
    int64_t iterations; /* per thread; 0 = no limit */
    uint64_t seed;
    bool quick;
    /* set by the program before st_parse: what --quick means */
    double quick_seconds;
    int64_t quick_iterations;
    int quick_threads;
} st_opts;

typedef struct st_worker {
    int id;       /* 0 .. n-1 */
    int n;        /* number of workers in this run */
    uint64_t rng; /* this worker's random stream */
    void *arg;    /* the program's shared state */
    int64_t ops;  /* operations this worker ran */
} st_worker;

/* Parses the options into o (which holds the program's defaults). Exits 2
 * on a bad option, 0 after --help. */
void st_parse(int argc, char **argv, st_opts *o, const char *usage);

/* Runs fn on nthreads workers that start together; returns when all have
 * joined. Adds their operation counts to the program's total. Worker i's
 * random stream is seeded from (o->seed, round, i). */
void st_run(const st_opts *o, int nthreads, void (*fn)(st_worker *w), void *arg);

/* True while worker w may start iteration i (iterations and time left). */
bool st_go(const st_worker *w, int64_t i);
/* True while the run as a whole has time left (main thread, between rounds). */
bool st_time_left(void);
/* Main thread, between rounds: the next rounds end `seconds` from now (for
 * programs made of phases that share the --seconds budget). */
void st_set_deadline(double seconds);

/* Records a violation (prints the first few with the worker's id; w may be
 * NULL on the main thread). */
void st_fail(const st_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int64_t st_violations(void);
/* Adds to the operation count from the main thread. */
void st_count(int64_t ops);
/* The operation count so far (main thread, between rounds). */
int64_t st_ops(void);

uint64_t st_rand(st_worker *w);
/* Uniform in [0, n). */
int st_randint(st_worker *w, int n);

/* Memory: a snapshot, and a check that the tensors and storages counts are
 * back to it and the allocator's active bytes within slack of it. */
void st_mem_snapshot(tn_memory_stats_t *m);
void st_check_no_leak(const tn_memory_stats_t *base, size_t active_slack);

/* Prints "<name>: <threads> threads, <ops> operations, <v> violations in
 * <s> s (seed X)" and returns the exit status (1 on any violation). */
int st_finish(const char *name, const st_opts *o);

/* ThreadSanitizer: the races planted on purpose (race detector tests) must
 * not fail a TSan build. No-ops without TSan. */
void st_tsan_ignore_begin(void);
void st_tsan_ignore_end(void);

#endif
