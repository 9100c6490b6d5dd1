/* Backtrace capture for anomaly mode (program counters only), and the
 * calling thread's identity.
 *
 * This runs on hot paths (every node creation and every in-place write while
 * anomaly mode is on), so it does nothing but walk the stack into the
 * caller's fixed-size record: no symbol lookup, no allocation, no lock.
 * Symbols are resolved at report time (symbolize.c). Threads are named as
 * the system's tools name them (OS id, pthread name), read at capture: a
 * thread may have exited, or been renamed, by the time of the report.
 */
#define _GNU_SOURCE /* pthread_getname_np, gettid */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "debug_internal.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TN_TSAN 1
#endif
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TN_TSAN_CLANG 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(TN_TSAN_CLANG)
#define TN_TSAN 1
#endif

#ifdef TN_TSAN
/* unw_backtrace keeps a per-thread cache whose TSD destructor re-queues
 * itself to run after ThreadSanitizer has torn the exiting thread down, and
 * crashes there. Under TSan walk with unw_step, which keeps no cache. Inlined
 * so that, as with unw_backtrace, the first pc is in tn__bt_capture. */
static inline __attribute__((always_inline)) int walk_stack(void **pc, int max) {
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0) return 0;
    int n = 0;
    do {
        unw_word_t ip;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
        pc[n++] = (void *)(uintptr_t)ip;
    } while (n < max && unw_step(&cur) > 0);
    return n;
}
#else
#define walk_stack unw_backtrace
#endif

/* noinline: the frame skipped below must be this function's own. */
__attribute__((noinline)) void tn__bt_capture(tn_backtrace *bt) {
    void *pc[TN_BT_MAX + 1];
    /* The first entry is this function (the return address of the
     * unw_backtrace call); the caller's frames start at pc[1]. */
    int n = walk_stack(pc, TN_BT_MAX + 1);
    bt->n = n > 1 ? n - 1 : 0;
    for (int i = 0; i < bt->n; i++)
        bt->pc[i] = pc[i + 1];
}

/* 0 = not assigned yet. Relaxed: the counter only hands out distinct
 * numbers; nothing is published with it. */
static _Atomic uint64_t next_thread_id = 1;
static _Thread_local uint64_t tls_thread_id;

uint64_t tn__thread_id(void) {
    if (TN_UNLIKELY(!tls_thread_id))
        tls_thread_id = atomic_fetch_add_explicit(&next_thread_id, 1, memory_order_relaxed);
    return tls_thread_id;
}

/* ---- what a person knows a thread by ---------------------------------------------------- */

/* 0 = not read yet on this thread. A fork child's only thread inherits the
 * forking thread's value, which names the parent's thread: the atfork
 * handler clears it there. */
static _Thread_local uint64_t tls_os_tid;

static void os_tid_forget(void) { tls_os_tid = 0; }

__attribute__((constructor)) static void os_tid_init(void) {
    /* fails only out of memory, and then a fork child's reports would give
     * the forking thread's id: nothing worse */
    pthread_atfork(NULL, NULL, os_tid_forget);
}

uint64_t tn__os_tid(void) {
    if (TN_UNLIKELY(!tls_os_tid)) tls_os_tid = (uint64_t)syscall(SYS_gettid);
    return tls_os_tid;
}

/* Reading the name is a system call (prctl), ~0.2 us: as much as the stack
 * capture of a race-detector access. A thread may be renamed at any time, so
 * the name is cached for TN_NAME_TTL_NS only, on the coarse clock (vDSO, a
 * few ns): a thread's first capture reads it, a rename shows within 10 ms. */
#define TN_NAME_TTL_NS INT64_C(10000000)
static _Thread_local char tls_name[TN_THREAD_NAME];
static _Thread_local int64_t tls_name_read_at; /* coarse ns; 0: never read */

void tn__thread_name(char name[TN_THREAD_NAME]) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + 1; /* never 0 */
    if (!tls_name_read_at || now - tls_name_read_at >= TN_NAME_TTL_NS) {
        if (pthread_getname_np(pthread_self(), tls_name, TN_THREAD_NAME) != 0) tls_name[0] = '\0';
        tls_name[TN_THREAD_NAME - 1] = '\0';
        tls_name_read_at = now;
    }
    memcpy(name, tls_name, TN_THREAD_NAME);
}

void tn__format_thread(char *buf, size_t n, uint64_t os_tid, const char *name) {
    if (name && *name)
        snprintf(buf, n, "thread %llu \"%s\"", (unsigned long long)os_tid, name);
    else
        snprintf(buf, n, "thread %llu", (unsigned long long)os_tid);
}
