/* The torture programs' shared frame (see harness.h). */
#include "harness.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PRINTED 20

static _Atomic int64_t g_ops;        /* relaxed: totals read after the joins */
static _Atomic int64_t g_violations; /* relaxed: idem */
static double g_deadline;            /* written before any worker starts */
static int64_t g_iterations;
static int g_round;
static double g_start;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage_exit(const char *prog, const char *usage, int code) {
    fprintf(code ? stderr : stdout,
            "usage: %s [--threads N] [--seconds S] [--iterations I] [--seed X] [--quick]\n%s\n",
            prog, usage ? usage : "");
    exit(code);
}

void st_parse(int argc, char **argv, st_opts *o, const char *usage) {
    bool threads_set = false, seconds_set = false, iter_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(a, "--quick") == 0) {
            o->quick = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) usage_exit(argv[0], usage, 0);
        if (!v) usage_exit(argv[0], usage, 2);
        if (strcmp(a, "--threads") == 0) {
            o->threads = (int)strtol(v, &end, 10);
            threads_set = true;
        } else if (strcmp(a, "--seconds") == 0) {
            o->seconds = strtod(v, &end);
            seconds_set = true;
        } else if (strcmp(a, "--iterations") == 0) {
            o->iterations = strtoll(v, &end, 10);
            iter_set = true;
        } else if (strcmp(a, "--seed") == 0) {
            o->seed = strtoull(v, &end, 0);
        } else {
            usage_exit(argv[0], usage, 2);
        }
        if (!end || *end) usage_exit(argv[0], usage, 2);
        i++;
    }
    if (o->quick) { /* explicit options still win */
        if (!seconds_set) o->seconds = o->quick_seconds;
        if (!iter_set) o->iterations = o->quick_iterations;
        if (!threads_set && o->quick_threads) o->threads = o->quick_threads;
    }
    if (o->threads < 1 || o->seconds <= 0 || o->iterations < 0) usage_exit(argv[0], usage, 2);
    g_start = now_s();
    g_deadline = g_start + o->seconds;
    g_iterations = o->iterations;
    printf("seed 0x%llx, %d threads, %.1f s, %lld iterations%s\n", (unsigned long long)o->seed,
           o->threads, o->seconds, (long long)o->iterations, o->quick ? " (quick)" : "");
    fflush(stdout);
}

typedef struct run_ctx {
    pthread_barrier_t barrier;
    void (*fn)(st_worker *w);
    st_worker *workers;
} run_ctx;

typedef struct thread_arg {
    run_ctx *ctx;
    int i;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *ta = p;
    st_worker *w = &ta->ctx->workers[ta->i];
    char name[16]; /* as gdb, top and tenet's reports will show the thread */
    snprintf(name, sizeof name, "worker-%d", ta->i);
    pthread_setname_np(pthread_self(), name);
    pthread_barrier_wait(&ta->ctx->barrier);
    ta->ctx->fn(w);
    atomic_fetch_add_explicit(&g_ops, w->ops, memory_order_relaxed);
    return NULL;
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void st_run(const st_opts *o, int nthreads, void (*fn)(st_worker *w), void *arg) {
    run_ctx ctx = {.fn = fn};
    ctx.workers = calloc((size_t)nthreads, sizeof *ctx.workers);
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    thread_arg *args = calloc((size_t)nthreads, sizeof *args);
    if (!ctx.workers || !tids || !args) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    pthread_barrier_init(&ctx.barrier, NULL, (unsigned)nthreads);
    uint64_t s = o->seed ^ ((uint64_t)g_round++ << 32);
    for (int i = 0; i < nthreads; i++) {
        ctx.workers[i] = (st_worker){.id = i, .n = nthreads, .arg = arg};
        uint64_t x = s + (uint64_t)i * 0x1000193ULL;
        ctx.workers[i].rng = splitmix(&x) | 1;
        args[i] = (thread_arg){&ctx, i};
        if (pthread_create(&tids[i], NULL, thread_main, &args[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&ctx.barrier);
    free(ctx.workers);
    free(tids);
    free(args);
}

bool st_go(const st_worker *w, int64_t i) {
    (void)w;
    if (g_iterations && i >= g_iterations) return false;
    return now_s() < g_deadline;
}

bool st_time_left(void) { return now_s() < g_deadline; }

void st_set_deadline(double seconds) { g_deadline = now_s() + seconds; }

void st_fail(const st_worker *w, const char *fmt, ...) {
    int64_t n = atomic_fetch_add_explicit(&g_violations, 1, memory_order_relaxed);
    if (n >= MAX_PRINTED) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (w)
        fprintf(stderr, "VIOLATION [thread %d]: %s\n", w->id, buf);
    else
        fprintf(stderr, "VIOLATION: %s\n", buf);
}

int64_t st_violations(void) { return atomic_load_explicit(&g_violations, memory_order_relaxed); }

void st_count(int64_t ops) { atomic_fetch_add_explicit(&g_ops, ops, memory_order_relaxed); }

int64_t st_ops(void) { return atomic_load_explicit(&g_ops, memory_order_relaxed); }

uint64_t st_rand(st_worker *w) { /* xorshift64* */
    uint64_t x = w->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    w->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int st_randint(st_worker *w, int n) { return (int)((st_rand(w) >> 33) % (uint64_t)n); }

void st_mem_snapshot(tn_memory_stats_t *m) {
    if (tn_memory_stats(m) != TN_OK) memset(m, 0, sizeof *m);
}

void st_check_no_leak(const tn_memory_stats_t *base, size_t active_slack) {
    tn_memory_stats_t now;
    st_mem_snapshot(&now);
    if (now.tensors_live != base->tensors_live)
        st_fail(NULL, "tensors_live %lld, was %lld before", (long long)now.tensors_live,
                (long long)base->tensors_live);
    if (now.storages_live != base->storages_live)
        st_fail(NULL, "storages_live %lld, was %lld before", (long long)now.storages_live,
                (long long)base->storages_live);
    if (now.bytes_live != base->bytes_live)
        st_fail(NULL, "bytes_live %zu, was %zu before", now.bytes_live, base->bytes_live);
    if (base->allocator_active && now.allocator_active > base->allocator_active + active_slack)
        st_fail(NULL, "allocator active %zu bytes, was %zu before (slack %zu)",
                now.allocator_active, base->allocator_active, active_slack);
    printf("memory: tensors %lld -> %lld, storages %lld -> %lld, allocator active %zu -> %zu\n",
           (long long)base->tensors_live, (long long)now.tensors_live,
           (long long)base->storages_live, (long long)now.storages_live, base->allocator_active,
           now.allocator_active);
}

int st_finish(const char *name, const st_opts *o) {
    int64_t ops = atomic_load_explicit(&g_ops, memory_order_relaxed);
    int64_t v = st_violations();
    printf("%s: %d threads, %lld operations, %lld violations in %.2f s (seed 0x%llx)\n", name,
           o->threads, (long long)ops, (long long)v, now_s() - g_start,
           (unsigned long long)o->seed);
    return v ? 1 : 0;
}

#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
void st_tsan_ignore_begin(void) {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
}
void st_tsan_ignore_end(void) {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
void st_tsan_ignore_begin(void) {}
void st_tsan_ignore_end(void) {}
#endif
