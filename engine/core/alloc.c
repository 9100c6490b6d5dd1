/* Memory: every tensor buffer comes from jemalloc, 64-byte aligned. Storage
 * and version blocks are atomically refcounted. */
#define _DEFAULT_SOURCE /* madvise */
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

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

/* Big buffers. jemalloc gives allocations of 8 MiB and more (its
 * oversize_threshold) to an arena that returns freed pages to the kernel at
 * once, so every big tensor was faulted in afresh, 4 KiB at a time: on a
 * virtual machine that costs ~10 us a page, e.g. 40 ms to first touch 16 MiB
 * against 0.5 ms to write it again. Big buffers therefore come from an arena
 * of ours that keeps freed pages for a while (the decay below: a training
 * loop reuses them within milliseconds, an idle process still gives them
 * back), aligned to 2 MiB and advised to use transparent huge pages, so the
 * pages that must be faulted come 2 MiB at a time. */
#define TN_BIG_BYTES ((size_t)4 << 20)
#define TN_HUGE_PAGE ((size_t)2 << 20)
#define TN_BIG_DECAY_MS 10000
static unsigned g_big_arena; /* written once under g_big_once */
static bool g_big_ok;
static pthread_once_t g_big_once = PTHREAD_ONCE_INIT;

static void big_arena_init(void) {
    unsigned ind;
    size_t sz = sizeof ind;
    if (mallctl("arenas.create", &ind, &sz, NULL, 0) != 0) return; /* plain mallocx then */
    char name[64];
    ssize_t decay = TN_BIG_DECAY_MS;
    snprintf(name, sizeof name, "arena.%u.dirty_decay_ms", ind);
    mallctl(name, NULL, NULL, &decay, sizeof decay);
    snprintf(name, sizeof name, "arena.%u.muzzy_decay_ms", ind);
    mallctl(name, NULL, NULL, &decay, sizeof decay);
    g_big_arena = ind;
    g_big_ok = true;
}

static void *big_alloc(size_t n) {
    pthread_once(&g_big_once, big_arena_init);
    if (!g_big_ok) return mallocx(n, MALLOCX_ALIGN(TN_CACHELINE));
    void *p = mallocx(n, MALLOCX_ALIGN(TN_HUGE_PAGE) | MALLOCX_ARENA(g_big_arena) |
                             MALLOCX_TCACHE_NONE);
    /* Advice only: a kernel without THP (or with it off) ignores it. */
    if (p) madvise(p, n & ~(TN_HUGE_PAGE - 1), MADV_HUGEPAGE);
    return p;
}

/* Small blocks (<= 2 KiB: tensor handles, storages, version blocks,
 * autograd nodes, the data of tiny tensors) come from a per-thread cache of
 * freed blocks, one list per 64-byte size class. mallocx/dallocx cost ~140
 * and ~90 instructions a call, about half of a 16-element op; a list pop or
 * push costs a few. Every cached block is a jemalloc block of exactly its
 * class size and 64-byte aligned, so any block may go back to jemalloc at
 * any time, from any thread. A thread's cache is flushed when it exits and
 * holds at most 2 MiB: enough for the graph of a 100-op chain (about 1,000
 * blocks) to be freed and rebuilt without reaching jemalloc. */
#define TN_SMALL_MAX ((size_t)2048)
#define TN_SMALL_CLASSES (TN_SMALL_MAX / TN_CACHELINE)
#define TN_SMALL_CACHE_BYTES ((size_t)2 << 20)

typedef struct small_block {
    struct small_block *next;
} small_block;

typedef struct small_cache {
    small_block *head[TN_SMALL_CLASSES];
    size_t bytes;    /* held in all lists */
    bool registered; /* its exit destructor is armed */
} small_cache;

/* initial-exec: a plain %fs-relative access, no __tls_get_addr call. */
static _Thread_local small_cache t_small __attribute__((tls_model("initial-exec")));
static pthread_key_t g_small_key;
static bool g_small_key_ok;
static pthread_once_t g_small_once = PTHREAD_ONCE_INIT;

static void small_flush(void *arg) {
    small_cache *c = arg;
    for (size_t k = 0; k < TN_SMALL_CLASSES; k++) {
        while (c->head[k]) {
            small_block *b = c->head[k];
            c->head[k] = b->next;
            dallocx(b, 0);
        }
    }
    c->bytes = 0;
    /* Blocks freed by later destructors re-arm it (glibc reruns them). */
    c->registered = false;
}

static void small_key_init(void) {
    g_small_key_ok = pthread_key_create(&g_small_key, small_flush) == 0;
}

static size_t small_class(size_t bytes) { return bytes ? (bytes - 1) / TN_CACHELINE : 0; }

static void *small_alloc(size_t bytes) {
    size_t k = small_class(bytes);
    small_block *b = t_small.head[k];
    if (TN_LIKELY(b)) {
        t_small.head[k] = b->next;
        t_small.bytes -= (k + 1) * TN_CACHELINE;
        return b;
    }
    return mallocx((k + 1) * TN_CACHELINE, MALLOCX_ALIGN(TN_CACHELINE));
}

/* p: a block of exactly (k + 1) * 64 usable bytes, 64-byte aligned. */
static void small_free(void *p, size_t k) {
    small_cache *c = &t_small;
    if (TN_UNLIKELY(!c->registered)) {
        pthread_once(&g_small_once, small_key_init);
        c->registered = g_small_key_ok && pthread_setspecific(g_small_key, c) == 0;
    }
    size_t size = (k + 1) * TN_CACHELINE;
    if (TN_UNLIKELY(!c->registered || c->bytes + size > TN_SMALL_CACHE_BYTES)) {
        sdallocx(p, size, 0); /* sized: jemalloc's fast path */
        return;
    }
    small_block *b = p;
    b->next = c->head[k];
    c->head[k] = b;
    c->bytes += size;
}

/* Frees a jemalloc block whose size is unknown: the cache takes it when its
 * usable size is a cached class and it is aligned (true of every block that
 * small_alloc made; checked, so that any other block is simply freed). */
static void any_free(void *p) {
    size_t u = sallocx(p, 0);
    if (u <= TN_SMALL_MAX && u % TN_CACHELINE == 0 && ((uintptr_t)p & (TN_CACHELINE - 1)) == 0)
        small_free(p, u / TN_CACHELINE - 1);
    else
        dallocx(p, 0);
}

/* Frees a block that tn__alloc or tn__calloc_small made for `bytes`. */
static void sized_free(void *p, size_t bytes) {
    if (TN_SANITIZED) free(p);
    else if (bytes <= TN_SMALL_MAX) small_free(p, small_class(bytes));
    else dallocx(p, 0);
}

void *tn__alloc(size_t bytes) {
    size_t n = bytes ? bytes : 1;
    void *p = TN_SANITIZED        ? aligned_alloc(TN_CACHELINE, (n + TN_CACHELINE - 1) & ~(size_t)(TN_CACHELINE - 1))
              : n <= TN_SMALL_MAX ? small_alloc(n)
              : n >= TN_BIG_BYTES ? big_alloc(n)
                                  : mallocx(n, MALLOCX_ALIGN(TN_CACHELINE));
    if (!p) tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory: tried to allocate %zu bytes", bytes);
    return p;
}

void tn__free(void *p) {
    if (!p) return;
    if (TN_SANITIZED) free(p);
    else any_free(p);
}

void *tn__calloc_small(size_t bytes) {
    void *p = NULL;
    if (TN_SANITIZED) p = calloc(1, bytes);
    else if (bytes <= TN_SMALL_MAX && (p = small_alloc(bytes))) memset(p, 0, bytes);
    else if (bytes > TN_SMALL_MAX) p = mallocx(bytes, MALLOCX_ZERO);
    if (!p) tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory: tried to allocate %zu bytes", bytes);
    return p;
}

void tn__free_small(void *p) {
    if (!p) return;
    if (TN_SANITIZED) free(p);
    else any_free(p);
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
        sized_free(s->data, s->nbytes ? s->nbytes : 1);
        account(-(int64_t)s->nbytes);
    }
    atomic_fetch_sub_explicit(&g_storages_live, 1, memory_order_relaxed);
    if (atomic_load_explicit(&s->ring, memory_order_relaxed)) tn__ring_free(s);
    if (atomic_load_explicit(&s->race, memory_order_relaxed)) tn__race_free(s);
    sized_free(s, sizeof *s);
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
        sized_free(v, sizeof *v);
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
