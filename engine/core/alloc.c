/* Memory: every tensor buffer comes from jemalloc, 64-byte aligned. Storage
 * and version blocks are atomically refcounted. Every allocation the library
 * makes goes through the functions of this file (base.h), so the
 * allocation-failure hook below (include/tenet/testing.h) reaches them all. */
#define _DEFAULT_SOURCE /* madvise */
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <sys/types.h>

#include "tenet/testing.h"

#include "device.h"
#include "hooks.h"

/* Under AddressSanitizer/ThreadSanitizer, memory goes through the libc
 * allocator that the sanitizer intercepts, so overflows, leaks and races on
 * tensor memory stay visible (jemalloc's arenas would hide them). */
/* gcc defines __SANITIZE_*__; clang only answers __has_feature */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TN_SANITIZED_CLANG 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(TN_SANITIZED_CLANG)
#define TN_SANITIZED 1
#else
#define TN_SANITIZED 0
#endif

/* ---- allocation-failure injection (include/tenet/testing.h) -----------------
 * g_fail_at is 0 when off, else the number (from 1, counted from arming, over
 * every thread) of the allocation to fail. Off, an allocation pays one relaxed
 * load and a branch predicted not taken. */
static _Atomic int64_t g_fail_at;
static _Atomic int64_t g_alloc_count; /* allocations seen while armed */
static atomic_bool g_fail_fired;

__attribute__((noinline, cold)) static bool inject_slow(void) {
    /* acquire: pairs with the release store of g_fail_at in
     * tn_test_fail_alloc_at, so the count reset before it is seen here. */
    int64_t at = atomic_load_explicit(&g_fail_at, memory_order_acquire);
    if (at == 0) return false;
    /* relaxed: a ticket; nothing is published with it */
    int64_t k = atomic_fetch_add_explicit(&g_alloc_count, 1, memory_order_relaxed) + 1;
    if (k != at) return false;
    atomic_store_explicit(&g_fail_fired, true, memory_order_relaxed);
    return true;
}

/* True when this allocation must fail. */
static inline bool inject_failure(void) {
    /* relaxed: a plain switch; inject_slow re-reads it with acquire */
    return TN_UNLIKELY(atomic_load_explicit(&g_fail_at, memory_order_relaxed) != 0) &&
           inject_slow();
}

void tn_test_fail_alloc_at(int64_t n) {
    /* Disarm first, so that no allocation counts against a half-reset state. */
    atomic_store_explicit(&g_fail_at, 0, memory_order_relaxed);
    atomic_store_explicit(&g_alloc_count, 0, memory_order_relaxed);
    atomic_store_explicit(&g_fail_fired, false, memory_order_relaxed);
    /* release: pairs with the acquire load in inject_slow (the resets above
     * happen before any allocation counts against n). */
    if (n > 0) atomic_store_explicit(&g_fail_at, n, memory_order_release);
}

int64_t tn_test_alloc_count(void) {
    return atomic_load_explicit(&g_alloc_count, memory_order_relaxed);
}

bool tn_test_alloc_failed(void) {
    return atomic_load_explicit(&g_fail_fired, memory_order_relaxed);
}

__attribute__((constructor)) static void read_fail_env(void) {
    const char *e = getenv("TENET_FAIL_ALLOC_AT");
    char *end;
    long long n = e && *e ? strtoll(e, &end, 10) : 0;
    if (n > 0 && !*end) tn_test_fail_alloc_at(n);
}

static void *oom(size_t bytes) {
    tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory: tried to allocate %zu bytes", bytes);
    return NULL;
}

/* High-water mark of live tensor bytes (see "statistics" below). Relaxed:
 * statistics, read without ordering against any other data. */
static _Atomic int64_t g_bytes_peak;

/* Big buffers. jemalloc gives allocations of 8 MiB and more (its
 * oversize_threshold) to an arena that returns freed pages to the kernel at
 * once, so every big tensor was faulted in afresh, 4 KiB at a time: on a
 * virtual machine that costs ~10 us a page, e.g. 40 ms to first touch 16 MiB
 * against 0.5 ms to write it again. Big buffers therefore come from an arena
 * of ours, aligned to 2 MiB and advised to use transparent huge pages, so the
 * pages that must be faulted come 2 MiB at a time. The arena never purges on
 * its own (dirty_decay_ms -1): jemalloc's decay purges by the growth of the
 * dirty set, and a training loop that frees and reallocates the same
 * activations every step does not grow it, so a 10 s decay still returned
 * (and the next step refaulted and the kernel zeroed) most of each step's
 * activations: a third of a CNN step's time. Freed big pages are kept for
 * the next allocation, at most the process's peak of big buffers, as glibc's
 * heap keeps freed blocks; tn_memory_release_cached gives them back. */
#define TN_BIG_BYTES ((size_t)4 << 20)
#define TN_HUGE_PAGE ((size_t)2 << 20)
#define TN_BIG_DECAY_MS (-1)
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

/* One thread's share of tn_memory_stats. Only its owner writes it (plain
 * load + store, no locked instruction); readers sum every slot. The last
 * slot is shared by threads beyond the pool and updated atomically. */
typedef struct stats_slot {
    alignas(TN_CACHELINE) _Atomic int64_t bytes;
    _Atomic int64_t storages;
    _Atomic int64_t tensors;
    atomic_bool in_use;
} stats_slot;
#define TN_STATS_SLOTS 1024
#define TN_STATS_SHARED (TN_STATS_SLOTS - 1)
static stats_slot g_slots[TN_STATS_SLOTS];
static _Atomic int g_slots_used; /* slots [0, used) have had an owner */

typedef struct thread_state {
    small_block *head[TN_SMALL_CLASSES];
    size_t cached;    /* bytes held in the lists */
    stats_slot *slot; /* NULL until this thread makes a storage */
    bool armed;       /* thread_exit is registered */
} thread_state;

/* initial-exec: a plain %fs-relative access, no __tls_get_addr call. */
static _Thread_local thread_state t_state __attribute__((tls_model("initial-exec")));
static pthread_key_t g_exit_key;
static bool g_exit_key_ok;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

/* Gives a thread's cached small blocks back to jemalloc. */
static void small_drain(thread_state *t) {
    for (size_t k = 0; k < TN_SMALL_CLASSES; k++) {
        while (t->head[k]) {
            small_block *b = t->head[k];
            t->head[k] = b->next;
            dallocx(b, 0);
        }
    }
    t->cached = 0;
}

static void thread_exit(void *arg) {
    thread_state *t = arg;
    small_drain(t);
    /* release: pairs with the acquire CAS of the slot's next owner, which
     * then continues from our final counts. */
    if (t->slot && t->slot != &g_slots[TN_STATS_SHARED])
        atomic_store_explicit(&t->slot->in_use, false, memory_order_release);
    t->slot = NULL;
    /* Blocks freed by later destructors re-arm it (glibc reruns them). */
    t->armed = false;
}

static void exit_key_init(void) {
    g_exit_key_ok = pthread_key_create(&g_exit_key, thread_exit) == 0;
}

/* Registers thread_exit for this thread; false when that is impossible. */
static bool arm(thread_state *t) {
    if (TN_LIKELY(t->armed)) return true;
    pthread_once(&g_exit_once, exit_key_init);
    t->armed = g_exit_key_ok && pthread_setspecific(g_exit_key, t) == 0;
    return t->armed;
}

static size_t small_class(size_t bytes) { return bytes ? (bytes - 1) / TN_CACHELINE : 0; }

static void *small_alloc(size_t bytes) {
    size_t k = small_class(bytes);
    thread_state *t = &t_state;
    small_block *b = t->head[k];
    if (TN_LIKELY(b)) {
        t->head[k] = b->next;
        t->cached -= (k + 1) * TN_CACHELINE;
        return b;
    }
    return mallocx((k + 1) * TN_CACHELINE, MALLOCX_ALIGN(TN_CACHELINE));
}

/* p: a block of exactly (k + 1) * 64 usable bytes, 64-byte aligned. */
static void small_free(void *p, size_t k) {
    thread_state *t = &t_state;
    size_t size = (k + 1) * TN_CACHELINE;
    if (TN_UNLIKELY(!arm(t) || t->cached + size > TN_SMALL_CACHE_BYTES)) {
        sdallocx(p, size, 0); /* sized: jemalloc's fast path */
        return;
    }
    small_block *b = p;
    b->next = t->head[k];
    t->head[k] = b;
    t->cached += size;
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

/* The most one buffer may take: the machine's memory and swap. A request
 * beyond can never be met; refused here, it fails the same way whatever the
 * kernel's overcommit policy (which might map it, and kill the process when
 * it is written) and whatever the allocator (the sanitizers' would stop the
 * process). Read once; relaxed: every thread computes the same value. */
static size_t memory_limit(void) {
    static _Atomic size_t limit; /* 0: not read yet */
    size_t l = atomic_load_explicit(&limit, memory_order_relaxed);
    if (TN_LIKELY(l)) return l;
    struct sysinfo si;
    uint64_t total;
    if (sysinfo(&si) != 0 ||
        __builtin_mul_overflow((uint64_t)si.totalram + si.totalswap, si.mem_unit ? si.mem_unit : 1,
                               &total) ||
        total == 0 || total > SIZE_MAX)
        l = SIZE_MAX;
    else
        l = (size_t)total;
    atomic_store_explicit(&limit, l, memory_order_relaxed);
    return l;
}

tn_status tn__check_total_bytes(const char *what, uint64_t bytes) {
    if (bytes <= memory_limit()) return TN_OK;
    if (bytes == UINT64_MAX)
        return tn__error(TN_ERR_OUT_OF_MEMORY,
                         "%s: out of memory: the sizes ask for more than 2^64 bytes", what);
    return tn__error(TN_ERR_OUT_OF_MEMORY,
                     "%s: out of memory: needs %llu bytes in all, more than this machine's "
                     "memory and swap (%zu bytes)",
                     what, (unsigned long long)bytes, memory_limit());
}

void *tn__alloc(size_t bytes) {
    if (inject_failure()) return oom(bytes);
    if (TN_UNLIKELY(bytes > memory_limit())) {
        tn__error(TN_ERR_OUT_OF_MEMORY,
                  "out of memory: tried to allocate %zu bytes, more than this machine's memory "
                  "and swap (%zu bytes)",
                  bytes, memory_limit());
        return NULL;
    }
    size_t n = bytes ? bytes : 1;
    void *p = TN_SANITIZED        ? aligned_alloc(TN_CACHELINE, (n + TN_CACHELINE - 1) & ~(size_t)(TN_CACHELINE - 1))
              : n <= TN_SMALL_MAX ? small_alloc(n)
              : n >= TN_BIG_BYTES ? big_alloc(n)
                                  : mallocx(n, MALLOCX_ALIGN(TN_CACHELINE));
    return p ? p : oom(bytes);
}

void tn__free(void *p) {
    if (!p) return;
    if (TN_SANITIZED) free(p);
    else any_free(p);
}

void *tn__calloc_small(size_t bytes) {
    if (inject_failure()) return oom(bytes);
    void *p = NULL;
    if (TN_SANITIZED) p = calloc(1, bytes);
    else if (bytes <= TN_SMALL_MAX && (p = small_alloc(bytes))) memset(p, 0, bytes);
    else if (bytes > TN_SMALL_MAX) p = mallocx(bytes, MALLOCX_ZERO);
    return p ? p : oom(bytes);
}

void tn__free_small(void *p) {
    if (!p) return;
    if (TN_SANITIZED) free(p);
    else any_free(p);
}

/* ---- plain heap blocks ------------------------------------------------------
 * Working memory that is not a tensor's (backward's tables, scope stacks,
 * printing buffers, debug records, a safetensors file's bytes): the C
 * library's allocator, which the sanitizers intercept; the failure hook and
 * the machine's limit apply as to tensor memory. */

/* Whether a block of bytes can never be had (refused before the allocator). */
static bool beyond_memory(size_t bytes) { return TN_UNLIKELY(bytes > memory_limit()); }

void *tn__malloc_quiet(size_t bytes) {
    return inject_failure() || beyond_memory(bytes) ? NULL : malloc(bytes ? bytes : 1);
}

void *tn__calloc_quiet(size_t n, size_t size) {
    if (inject_failure() || (size && n > SIZE_MAX / size) || beyond_memory(n * size)) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *tn__malloc(size_t bytes) {
    void *p = tn__malloc_quiet(bytes);
    return p ? p : oom(bytes);
}

void *tn__calloc(size_t n, size_t size) {
    void *p = tn__calloc_quiet(n, size);
    if (p) return p;
    if (size && n > SIZE_MAX / size) return oom(SIZE_MAX);
    return oom(n * size);
}

void *tn__realloc(void *p, size_t bytes) {
    void *q = inject_failure() || beyond_memory(bytes) ? NULL : realloc(p, bytes ? bytes : 1);
    return q ? q : oom(bytes);
}

void *tn__aligned_quiet(size_t align, size_t bytes) {
    if (inject_failure() || beyond_memory(bytes)) return NULL;
    return aligned_alloc(align, (bytes + align - 1) / align * align);
}

void tn__mfree(void *p) { free(p); }

/* ---- statistics -------------------------------------------------------------
 * Two locked read-modify-writes of shared counters per storage made and two
 * per storage freed were ~15% of a 16-element op, and every thread hit the
 * same cache lines. Each thread counts into its own slot instead; the sums
 * are exact whenever no thread is between an allocation and its count. The
 * peak is sampled at each storage of TN_PEAK_SAMPLE bytes or more and at
 * each tn_memory_stats call. */
#define TN_PEAK_SAMPLE ((size_t)64 << 10)

static stats_slot *slot_claim(thread_state *t) {
    for (;;) {
        int used = atomic_load_explicit(&g_slots_used, memory_order_acquire);
        for (int i = 0; i < used && i < TN_STATS_SHARED; i++) {
            bool free_slot = false;
            /* acquire: pairs with the release in thread_exit (see there). */
            if (!atomic_load_explicit(&g_slots[i].in_use, memory_order_relaxed) &&
                atomic_compare_exchange_strong_explicit(&g_slots[i].in_use, &free_slot, true,
                                                        memory_order_acquire,
                                                        memory_order_relaxed)) {
                t->slot = &g_slots[i];
                arm(t); /* if it cannot be armed the slot is never reused: harmless */
                return t->slot;
            }
        }
        if (used >= TN_STATS_SHARED) return t->slot = &g_slots[TN_STATS_SHARED];
        /* Open one more slot; the loop above then competes for it. */
        atomic_compare_exchange_strong_explicit(&g_slots_used, &used, used + 1,
                                                memory_order_acq_rel, memory_order_relaxed);
    }
}

static void slot_add(stats_slot *s, _Atomic int64_t *c, int64_t d) {
    if (TN_UNLIKELY(s == &g_slots[TN_STATS_SHARED]))
        atomic_fetch_add_explicit(c, d, memory_order_relaxed);
    else /* the sole writer: relaxed, readers only need each value whole */
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                              memory_order_relaxed);
}

/* always inline: it is on every tensor's allocation and release */
static inline __attribute__((always_inline)) void count_storage(int64_t bytes,
                                                                int64_t storages) {
    thread_state *t = &t_state;
    stats_slot *s = TN_LIKELY(t->slot != NULL) ? t->slot : slot_claim(t);
    slot_add(s, &s->bytes, bytes);
    slot_add(s, &s->storages, storages);
}

void tn__count_tensors(int64_t d) {
    thread_state *t = &t_state;
    stats_slot *s = TN_LIKELY(t->slot != NULL) ? t->slot : slot_claim(t);
    slot_add(s, &s->tensors, d);
}

static int64_t sum_tensors(void) {
    int used = atomic_load_explicit(&g_slots_used, memory_order_acquire);
    int64_t n = atomic_load_explicit(&g_slots[TN_STATS_SHARED].tensors, memory_order_relaxed);
    for (int i = 0; i < used && i < TN_STATS_SHARED; i++)
        n += atomic_load_explicit(&g_slots[i].tensors, memory_order_relaxed);
    return n;
}

static void sum_slots(int64_t *bytes, int64_t *storages) {
    int used = atomic_load_explicit(&g_slots_used, memory_order_acquire);
    *bytes = atomic_load_explicit(&g_slots[TN_STATS_SHARED].bytes, memory_order_relaxed);
    *storages = atomic_load_explicit(&g_slots[TN_STATS_SHARED].storages, memory_order_relaxed);
    for (int i = 0; i < used && i < TN_STATS_SHARED; i++) {
        *bytes += atomic_load_explicit(&g_slots[i].bytes, memory_order_relaxed);
        *storages += atomic_load_explicit(&g_slots[i].storages, memory_order_relaxed);
    }
}

static int64_t sample_peak(void) {
    int64_t now, n;
    sum_slots(&now, &n);
    int64_t peak = atomic_load_explicit(&g_bytes_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&g_bytes_peak, &peak, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    return now;
}

/* Device storages come from the backend's caching allocator; they are not
 * in the host byte counts (tn_memory_stats reports them apart). */
static tn_storage *device_storage_new(size_t nbytes, tn_device dev) {
    const tn_backend *be = tn__backend_of(dev);
    if (!be) return NULL;
    tn_storage *s = tn__calloc_small(sizeof *s);
    if (!s) return NULL;
    s->data = be->alloc(dev.index, nbytes ? nbytes : 1);
    if (!s->data) {
        tn__free_small(s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->write_epoch, 0);
    s->nbytes = nbytes;
    s->device = dev;
    s->owns_data = true;
    count_storage(0, 1);
    return s;
}

tn_storage *tn__storage_new(size_t nbytes, tn_device dev) {
    if (dev.type != TN_CPU) return device_storage_new(nbytes, dev);
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
    count_storage((int64_t)nbytes, 1);
    if (TN_UNLIKELY(nbytes >= TN_PEAK_SAMPLE)) sample_peak();
    return s;
}

tn_storage *tn__storage_wrap(void *data, size_t nbytes, tn_device dev, void (*release)(void *),
                             void *ctx) {
    tn_storage *s = tn__calloc_small(sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->write_epoch, 0);
    s->data = data;
    s->nbytes = nbytes;
    s->device = dev;
    s->external = true;
    s->release = release;
    s->release_ctx = ctx;
    count_storage(0, 1);
    return s;
}

void tn__storage_release(tn_storage *s) {
    if (!s) return;
    /* acq_rel: the release publishes our writes to the buffer; the thread
     * that drops the last reference acquires them before freeing. */
    int64_t old = atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old != 1) return;
    if (s->device.type != TN_CPU) {
        /* the device was usable when the storage was made, so it has a backend */
        const tn_backend *be = tn__backends[s->device.type];
        if (s->owns_data && be) be->free(s->device.index, s->data, s->nbytes ? s->nbytes : 1);
        count_storage(0, -1);
    } else {
        if (s->owns_data) sized_free(s->data, s->nbytes ? s->nbytes : 1);
        count_storage(s->owns_data ? -(int64_t)s->nbytes : 0, -1);
    }
    if (s->release) s->release(s->release_ctx); /* the owner's memory back to its owner */
    /* debug state (anomaly mode's write ring, the race detector's slots):
     * relaxed, the acq_rel decrement above ordered their installation */
    if (TN_UNLIKELY(atomic_load_explicit(&s->ring, memory_order_relaxed) ||
                    atomic_load_explicit(&s->race, memory_order_relaxed)))
        tn__hooks.storage_free(s);
    sized_free(s, sizeof *s);
}

tn_version_block *tn__version_new(void) {
    tn_version_block *v = tn__calloc_small(sizeof *v);
    if (!v) return NULL;
    atomic_init(&v->refcount, 1);
    atomic_init(&v->version, 0);
    atomic_init(&v->first_after_save, 0);
    return v;
}

void tn__version_retain(tn_version_block *v) {
    if (v) /* NULL: an inference tensor's */
        atomic_fetch_add_explicit(&v->refcount, 1, memory_order_relaxed);
}

void tn__version_release(tn_version_block *v) {
    if (!v) return;
    int64_t old = atomic_fetch_sub_explicit(&v->refcount, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old == 1) sized_free(v, sizeof *v);
}

int64_t tn__bytes_live(void) {
    int64_t bytes, storages;
    sum_slots(&bytes, &storages);
    return bytes;
}

tn_status tn_memory_release_cached(void) {
    /* the calling thread's small blocks go back to jemalloc (the lists are
     * per thread: another thread keeps its own, at most TN_SMALL_CACHE_BYTES) */
    small_drain(&t_state);
    pthread_once(&g_big_once, big_arena_init);
    if (!g_big_ok) return TN_OK; /* sanitizer builds, or no arena of ours: nothing kept */
    char name[64];
    snprintf(name, sizeof name, "arena.%u.purge", g_big_arena);
    if (mallctl(name, NULL, NULL, NULL, 0) != 0)
        return tn__error(TN_ERR_INTERNAL, "tn_memory_release_cached: jemalloc refused '%s'",
                         name);
    return TN_OK;
}

tn_status tn_memory_stats(tn_memory_stats_t *out) {
    if (!out) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_memory_stats: argument 'out' is NULL");
    memset(out, 0, sizeof *out);
    int64_t bytes, storages;
    sample_peak();
    sum_slots(&bytes, &storages);
    out->bytes_live = bytes > 0 ? (size_t)bytes : 0;
    out->bytes_peak = (size_t)atomic_load_explicit(&g_bytes_peak, memory_order_relaxed);
    out->storages_live = storages;
    out->tensors_live = sum_tensors();
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    size_t active = 0, asz = sizeof active;
    if (mallctl("epoch", &epoch, &sz, &epoch, sz) == 0 &&
        mallctl("stats.active", &active, &asz, NULL, 0) == 0)
        out->allocator_active = active;
    /* not loaded yet: no device storage ever, and no reason to load CUDA now */
    const tn_backend *be = tn__backend_loaded(TN_CUDA);
    for (int d = 0, nd = be ? be->device_count() : 0; d < nd; d++) {
        tn_device_mem_stats ds = {0};
        be->mem_stats(d, &ds);
        out->cuda_bytes_live += ds.bytes_live;
        out->cuda_bytes_peak += ds.bytes_peak;
        out->cuda_bytes_reserved += ds.bytes_reserved;
    }
    return TN_OK;
}
