/* engine/cuda/alloc.cu — the caching allocator of device memory.
 *
 * cudaMalloc and cudaFree are slow (cudaFree also synchronises the device),
 * so freed blocks are kept in per-device free lists and handed out again.
 *
 * Size classes: a request is rounded up to a multiple of 512 bytes up to
 * 1 MiB, and to a multiple of 2 MiB above. A block is reused only for a
 * request of the same class, so free() can recompute the block's size from
 * the requested size and no table of live blocks is needed.
 *
 * Reuse at once is safe: every kernel and copy of a device runs on the
 * device's one stream (backend.cu). Whatever still reads or writes a freed
 * block was enqueued before the free, and whatever the next owner enqueues
 * comes after it in stream order, so the two never overlap.
 *
 * When cudaMalloc fails, the device's cache is released (cudaFree of every
 * cached block) and the allocation tried once more; a second failure is
 * TN_ERR_OUT_OF_MEMORY.
 *
 * One mutex per device guards its lists and statistics: allocation is not a
 * hot path on the host (a few per op, next to a kernel launch).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.h"

namespace tnc {

namespace {

constexpr size_t SMALL_LIMIT = size_t(1) << 20; /* 1 MiB */
constexpr size_t SMALL_STEP = 512;
constexpr size_t LARGE_STEP = size_t(2) << 20; /* 2 MiB */
constexpr size_t SMALL_CLASSES = SMALL_LIMIT / SMALL_STEP;

struct cached {
    void *ptr;
    size_t size;
    cached *next;
};

struct pool {
    pthread_mutex_t lock;
    cached *small[SMALL_CLASSES]; /* class i holds blocks of (i + 1) * 512 bytes */
    cached *large;                /* blocks above 1 MiB, any size (few of them) */
    size_t live, peak, reserved;
};

pthread_once_t g_once = PTHREAD_ONCE_INIT;
pool *g_pools = nullptr;
int g_npools = 0;

void init_pools() {
    int n = device_count();
    if (n <= 0) return;
    pool *p = static_cast<pool *>(calloc(static_cast<size_t>(n), sizeof *p));
    if (!p) return;
    for (int i = 0; i < n; i++)
        pthread_mutex_init(&p[i].lock, nullptr);
    g_pools = p;
    g_npools = n;
}

pool *pool_of(int dev) {
    pthread_once(&g_once, init_pools);
    return dev >= 0 && dev < g_npools ? &g_pools[dev] : nullptr;
}

size_t round_size(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes <= SMALL_LIMIT) return (bytes + SMALL_STEP - 1) / SMALL_STEP * SMALL_STEP;
    return (bytes + LARGE_STEP - 1) / LARGE_STEP * LARGE_STEP;
}

/* Takes a cached block of exactly `size` bytes; NULL if none. Lock held. */
void *take_cached(pool *p, size_t size) {
    cached **head = size <= SMALL_LIMIT ? &p->small[size / SMALL_STEP - 1] : &p->large;
    for (cached **c = head; *c; c = &(*c)->next) {
        if ((*c)->size != size) continue;
        cached *hit = *c;
        *c = hit->next;
        void *ptr = hit->ptr;
        free(hit);
        return ptr;
    }
    return nullptr;
}

/* cudaFree of every cached block. Lock held, device current. */
void release_cache(pool *p) {
    cached **lists[SMALL_CLASSES + 1];
    for (size_t i = 0; i < SMALL_CLASSES; i++)
        lists[i] = &p->small[i];
    lists[SMALL_CLASSES] = &p->large;
    for (cached **l : lists) {
        while (*l) {
            cached *c = *l;
            *l = c->next;
            cudaFree(c->ptr);
            p->reserved -= c->size;
            free(c);
        }
    }
    cudaGetLastError();
}

} // namespace

void *alloc(int dev, size_t bytes) {
    device_state *ds;
    if (device(dev, &ds) < 0) return nullptr;
    pool *p = pool_of(dev);
    if (!p) {
        tn__error(TN_ERR_OUT_OF_MEMORY, "CUDA allocator: out of host memory for its tables");
        return nullptr;
    }
    size_t size = round_size(bytes);
    if (size < bytes) { /* rounding overflowed */
        tn__error(TN_ERR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate %zu bytes", bytes);
        return nullptr;
    }
    pthread_mutex_lock(&p->lock);
    void *ptr = take_cached(p, size);
    if (!ptr) {
        dev_guard g(dev);
        cudaError_t e = cudaMalloc(&ptr, size);
        if (e == cudaErrorMemoryAllocation) { /* give the cache back, then once more */
            cudaGetLastError();
            release_cache(p);
            e = cudaMalloc(&ptr, size);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            ptr = nullptr;
            if (e == cudaErrorMemoryAllocation) {
                size_t free_b = 0, total_b = 0;
                if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
                const double mib = 1024.0 * 1024.0, gib = mib * 1024.0;
                tn__error(TN_ERR_OUT_OF_MEMORY,
                          "CUDA out of memory. Tried to allocate %.2f MiB (GPU %d; %.2f GiB total "
                          "capacity; %.2f GiB free; %.2f GiB allocated by tenet)",
                          (double)size / mib, dev, (double)total_b / gib, (double)free_b / gib,
                          (double)p->live / gib);
            } else {
                cuda_fail(e, "cudaMalloc");
            }
        } else {
            p->reserved += size;
        }
    }
    if (ptr) {
        p->live += size;
        if (p->live > p->peak) p->peak = p->live;
    }
    pthread_mutex_unlock(&p->lock);
    return ptr;
}

void free_block(int dev, void *ptr, size_t bytes) {
    if (!ptr) return;
    pool *p = pool_of(dev);
    if (!p) return;
    size_t size = round_size(bytes);
    cached *c = static_cast<cached *>(malloc(sizeof *c));
    pthread_mutex_lock(&p->lock);
    p->live -= size;
    if (c) {
        c->ptr = ptr;
        c->size = size;
        cached **head = size <= SMALL_LIMIT ? &p->small[size / SMALL_STEP - 1] : &p->large;
        c->next = *head;
        *head = c;
    } else { /* no host memory for the list node: give the block back to CUDA */
        dev_guard g(dev);
        if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
        p->reserved -= size;
    }
    pthread_mutex_unlock(&p->lock);
}

void mem_stats(int dev, tn_device_mem_stats *out) {
    if (!out) return;
    out->bytes_live = out->bytes_peak = out->bytes_reserved = 0;
    pool *p = pool_of(dev);
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    out->bytes_live = p->live;
    out->bytes_peak = p->peak;
    out->bytes_reserved = p->reserved;
    pthread_mutex_unlock(&p->lock);
}

} // namespace tnc
