/* tenet/runtime.h — threads and memory.
 *
 * Threads: tn_set_num_threads is process-wide (relaxed atomic), read by ops
 * at their start. tn_memory_stats may be called from any thread.
 */
#ifndef TENET_RUNTIME_H
#define TENET_RUNTIME_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of OpenMP threads an op may use (>= 1); default: OpenMP's. */
void tn_set_num_threads(int n);
int tn_get_num_threads(void);

typedef struct tn_memory_stats_t {
    size_t bytes_live;      /* tensor storage bytes currently allocated */
    size_t bytes_peak;      /* high-water mark of bytes_live, sampled at each allocation
                             * of 64 KiB or more and at each call of tn_memory_stats */
    int64_t storages_live;  /* storages currently allocated */
    int64_t tensors_live;   /* tensor handles currently alive */
    size_t allocator_active;/* jemalloc's stats.active (0 when unavailable) */
} tn_memory_stats_t;

tn_status tn_memory_stats(tn_memory_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
