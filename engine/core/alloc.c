/* Memory: every tensor buffer comes from jemalloc, 64-byte aligned. Storage
 * and version blocks are atomically refcounted. */
#include <jemalloc/jemalloc.h>
#include <stdlib.h>

#include "internal.h"

/* Under AddressSanitizer/ThreadSanitizer, memory goes through the libc
 * allocator that the sanitizer intercepts, so overflows, leaks and races on
 * tensor memory stay visible (jemalloc's arenas would hide them). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TN_SANITIZED 1
#else
#define TN_SANITIZED 0
#endif

/* Live-byte accounting for tn_memory_stats. Relaxed: these are statistics,
 * read without ordering against any other data. */
static _Atomic int64_t g_bytes_live;
static _Atomic int64_t g_bytes_peak;
static _Atomic int64_t g_storages_live;
_Atomic int64_t tn__tensors_live;

void *tn__alloc(size_t bytes) {
    size_t n = bytes ? bytes : 1;
    void *p = TN_SANITIZED ? aligned_alloc(TN_CACHELINE, (n + TN_CACHELINE - 1) & ~(size_t)(TN_CACHELINE - 1))
                           : mallocx(n, MALLOCX_ALIGN(TN_CACHELINE));
    if (!p) tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory: tried to allocate %zu bytes", bytes);
    return p;
}

void tn__free(void *p) {
    if (!p) return;
    if (TN_SANITIZED) free(p);
    else dallocx(p, MALLOCX_ALIGN(TN_CACHELINE));
}

void *tn__calloc_small(size_t bytes) {
    void *p = TN_SANITIZED ? calloc(1, bytes) : mallocx(bytes, MALLOCX_ZERO);
    if (!p) tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory: tried to allocate %zu bytes", bytes);
    return p;
}

void tn__free_small(void *p) {
    if (!p) return;
    if (TN_SANITIZED) free(p);
    else dallocx(p, 0);
}

static void account(int64_t delta) {
    int64_t now = atomic_fetch_add_explicit(&g_bytes_live, delta, memory_order_relaxed) + delta;
    int64_t peak = atomic_load_explicit(&g_bytes_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&g_bytes_peak, &peak, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

tn_storage *tn__storage_new(size_t nbytes, tn_device dev) {
    if (dev.type != TN_CPU) {
        tn__error(TN_ERR_DEVICE, "device type %d is not available in this build", (int)dev.type);
        return NULL;
    }
    tn_storage *s = tn__calloc_small(sizeof *s);
    if (!s) return NULL;
    s->data = tn__alloc(nbytes);
    if (!s->data) {
        tn__free_small(s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->write_epoch, 0);
    s->nbytes = nbytes;
    s->device = dev;
    s->owns_data = true;
    account((int64_t)nbytes);
    atomic_fetch_add_explicit(&g_storages_live, 1, memory_order_relaxed);
    return s;
}

void tn__storage_release(tn_storage *s) {
    if (!s) return;
    /* acq_rel: the release publishes our writes to the buffer; the thread
     * that drops the last reference acquires them before freeing. */
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1) return;
    if (s->owns_data) {
        tn__free(s->data);
        account(-(int64_t)s->nbytes);
    }
    atomic_fetch_sub_explicit(&g_storages_live, 1, memory_order_relaxed);
    tn__free_small(s);
}

tn_version_block *tn__version_new(void) {
    tn_version_block *v = tn__calloc_small(sizeof *v);
    if (!v) return NULL;
    atomic_init(&v->refcount, 1);
    atomic_init(&v->version, 0);
    return v;
}

void tn__version_retain(tn_version_block *v) {
    atomic_fetch_add_explicit(&v->refcount, 1, memory_order_relaxed);
}

void tn__version_release(tn_version_block *v) {
    if (v && atomic_fetch_sub_explicit(&v->refcount, 1, memory_order_acq_rel) == 1)
        tn__free_small(v);
}

tn_status tn_memory_stats(tn_memory_stats_t *out) {
    if (!out) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_memory_stats: argument 'out' is NULL");
    memset(out, 0, sizeof *out);
    out->bytes_live = (size_t)atomic_load_explicit(&g_bytes_live, memory_order_relaxed);
    out->bytes_peak = (size_t)atomic_load_explicit(&g_bytes_peak, memory_order_relaxed);
    out->storages_live = atomic_load_explicit(&g_storages_live, memory_order_relaxed);
    out->tensors_live = atomic_load_explicit(&tn__tensors_live, memory_order_relaxed);
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    size_t active = 0, asz = sizeof active;
    if (mallctl("epoch", &epoch, &sz, &epoch, sz) == 0 &&
        mallctl("stats.active", &active, &asz, NULL, 0) == 0)
        out->allocator_active = active;
    return TN_OK;
}
