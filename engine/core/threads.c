/* Intra-op thread policy: OpenMP above a grain size, serial below it. A
 * core setting: the CPU kernels ask it how many threads an op may use, and
 * the autograd engine how many its parallel backward may. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base.h"
#include "hooks.h"
#include "tenet/runtime.h" /* tn_set_num_threads, tn_get_num_threads: exported */

/* 0 = not set: use OpenMP's default. Relaxed: a plain setting, read at op start. */
static _Atomic int g_num_threads;

void tn_set_num_threads(int n) {
    atomic_store_explicit(&g_num_threads, n > 0 ? n : 1, memory_order_relaxed);
}

int tn_get_num_threads(void) {
    int n = atomic_load_explicit(&g_num_threads, memory_order_relaxed);
#ifdef _OPENMP
    if (n == 0) n = omp_get_max_threads();
#else
    if (n == 0) n = 1;
#endif
    return n;
}

int tn__threads_for(int64_t work) {
#ifdef _OPENMP
    if (work < TN_GRAIN || omp_in_parallel()) return 1;
    int n = tn_get_num_threads();
    int64_t by_grain = work / (TN_GRAIN / 2);
    return by_grain < n ? (int)(by_grain > 0 ? by_grain : 1) : n;
#else
    (void)work;
    return 1;
#endif
}

/* Only a region that runs on a team is recorded: one that runs serially (its if clause false,
 * or a build without OpenMP) is its op's time alone. */
tn_omp_span tn__omp_span_begin(const char *region) {
#ifdef _OPENMP
    return (tn_omp_span){region, tn__prof_start()};
#else
    return (tn_omp_span){region, 0};
#endif
}

void tn__omp_span_end(const tn_omp_span *s) {
    if (TN_LIKELY(s->t0 <= 0)) return;
#ifdef _OPENMP
    int team = omp_get_num_threads();
    if (team > 1) tn__hooks.prof_omp(s->region, s->t0, team, omp_get_thread_num());
#endif
}
