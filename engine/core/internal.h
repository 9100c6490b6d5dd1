/* engine/core/internal.h — the objects behind the opaque handles.
 *
 * storage   refcounted buffer (jemalloc, 64-byte aligned) + write epoch
 * version   refcounted 64-bit version counter shared by a tensor, its views,
 *           its detach()es and saved aliases (not by .data)
 * tensor    refcounted handle: storage + offset/shape/strides + dtype +
 *           version + autograd meta (NULL when no grad is needed)
 *
 * Internal functions are prefixed tn__ and do NOT register their results in
 * the caller's scope; public functions finish with tn__ret().
 */
#ifndef TN_CORE_INTERNAL_H
#define TN_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#include "tenet.h"

#define TN_CACHELINE 64

#if defined(__GNUC__)
#define TN_LIKELY(x) __builtin_expect(!!(x), 1)
#define TN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TN_LIKELY(x) (x)
#define TN_UNLIKELY(x) (x)
#define TN_PRINTF(a, b)
#endif

typedef struct tn_node tn_node;

typedef struct tn_storage {
    _Atomic int64_t refcount;
    /* Bumped (relaxed) by every write through any alias, tracked or not;
     * debug mode compares it with a saved value to see untracked writes. */
    _Atomic uint64_t write_epoch;
    void *data;
    size_t nbytes;
    tn_device device;
    bool owns_data;
    /* anomaly mode: ring of the last writes (debug/anomaly.c), made lazily */
    _Atomic(struct tn_write_ring *) ring;
    /* race detector: in-flight accesses (debug/race.c), made lazily */
    _Atomic(struct tn_race_state *) race;
} tn_storage;

typedef struct tn_version_block {
    _Atomic int64_t refcount;
    _Atomic uint64_t version;
} tn_version_block;

/* Where a gradient lands: a leaf's .grad or a retained non-leaf grad. Shared
 * (refcounted) by the tensor and by the graph edges that feed it, so the
 * graph never holds the tensor itself (no cycles). */
typedef struct tn_grad_cell {
    _Atomic int64_t refcount;
    _Atomic(tn_tensor *) grad;
    /* Threads between loading `grad` and retaining it (tn_grad). A tensor
     * that was ever installed is released only when this is 0, so a reader
     * never retains a freed tensor (accumulate.c). */
    _Atomic int64_t readers;
} tn_grad_cell;

typedef struct tn_autograd_meta {
    bool requires_grad;
    bool retains_grad;
    atomic_flag warned_nonleaf_grad;
    tn_node *grad_fn;   /* owned; NULL for leaves */
    int output_nr;      /* which output of grad_fn this tensor is */
    tn_grad_cell *cell; /* leaves (requires_grad) and retain_grad non-leaves */
} tn_autograd_meta;

struct tn_tensor {
    _Atomic int64_t refcount;
    int ndim;
    tn_dtype dtype;
    int64_t offset; /* elements */
    tn_storage *storage;
    tn_version_block *version;
    tn_autograd_meta *ag;  /* NULL: does not require grad, no history */
    tn_tensor *view_base;  /* views: the root base (owned), else NULL */
    _Atomic int32_t scoped; /* references owned by scopes of the creating thread */
    int64_t shape[TN_MAX_DIMS];
    int64_t stride[TN_MAX_DIMS];
};

/* ---- errors ---------------------------------------------------------------- */
tn_status tn__error(tn_status st, const char *fmt, ...) TN_PRINTF(2, 3);
void tn__warn(const char *fmt, ...) TN_PRINTF(1, 2);
#define TN_CHECK_NULL_ARG(t, name)                                                     \
    do {                                                                               \
        if (TN_UNLIKELY(!(t))) {                                                       \
            tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", __func__, \
                      name);                                                           \
            return NULL;                                                               \
        }                                                                              \
    } while (0)
#define TN_CHECK_NULL_ARG_ST(t, name)                                                    \
    do {                                                                                 \
        if (TN_UNLIKELY(!(t)))                                                           \
            return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", __func__, \
                             name);                                                      \
    } while (0)

/* ---- memory ---------------------------------------------------------------- */
void *tn__alloc(size_t bytes);          /* 64-byte aligned, jemalloc; NULL + error */
void tn__free(void *p);
void *tn__calloc_small(size_t bytes);   /* metadata: zeroed, NULL + error */
void tn__free_small(void *p);
/* Live-handle count for tn_memory_stats, kept per thread (no shared line). */
void tn__count_tensors(int64_t delta);
tn_storage *tn__storage_new(size_t nbytes, tn_device dev);
void tn__storage_release(tn_storage *s);
static inline void tn__storage_retain(tn_storage *s) {
    /* relaxed: a new reference is made from an existing one (no ordering). */
    atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}
static inline void tn__storage_wrote(tn_storage *s) {
    atomic_fetch_add_explicit(&s->write_epoch, 1, memory_order_relaxed);
}
tn_version_block *tn__version_new(void);
void tn__version_retain(tn_version_block *v);
void tn__version_release(tn_version_block *v);
/* Bumps the version (release: pairs with the acquire load in saved-tensor
 * unpack, so a reader that sees the new version sees the write) and, in
 * anomaly mode, records the write with `op` (a static string). */
/* Anomaly switches (debug/anomaly.c); relaxed: a plain setting. Bit 0x100
 * is set once any thread has used a thread-local override, and only then is
 * the thread-local word read (0: no override; else 0x80 | its flags). */
extern _Atomic unsigned tn__anomaly_flags;
extern _Thread_local unsigned tn__anomaly_local;
static inline unsigned tn__anomaly_mode(void) {
    unsigned g = atomic_load_explicit(&tn__anomaly_flags, memory_order_relaxed);
    if (TN_UNLIKELY(g & 0x100u) && tn__anomaly_local) return tn__anomaly_local & 0x7fu;
    return g & 0xffu;
}
void tn__anomaly_record_write(const tn_tensor *t, uint64_t version, const char *op);
void tn__ring_free(tn_storage *s);
void tn__race_free(tn_storage *s);
static inline uint64_t tn__version_bump(tn_tensor *t, const char *op) {
    tn__storage_wrote(t->storage);
    uint64_t v = atomic_fetch_add_explicit(&t->version->version, 1, memory_order_release) + 1;
    if (TN_UNLIKELY(tn__anomaly_mode() & 1u)) tn__anomaly_record_write(t, v, op);
    return v;
}
static inline uint64_t tn__version_get(const tn_tensor *t) {
    return atomic_load_explicit(&t->version->version, memory_order_acquire);
}

/* ---- dtype ----------------------------------------------------------------- */
extern const size_t tn__dtype_sizes[TN_DTYPE_COUNT];
static inline bool tn__is_float(tn_dtype d) { return d == TN_F32 || d == TN_F64; }
static inline bool tn__valid_dtype(tn_dtype d) { return d >= 0 && d < TN_DTYPE_COUNT; }
double tn__load(const void *p, tn_dtype dt);
void tn__store(void *p, tn_dtype dt, double v);
/* torch.result_type for two tensors (0-dim tensors weaker than dimensioned). */
tn_dtype tn__promote(const tn_tensor *a, const tn_tensor *b);
tn_dtype tn__promote_types(tn_dtype a, tn_dtype b);
/* Result dtype of tensor (op) python-scalar. */
tn_dtype tn__promote_scalar(tn_dtype a, double s);

/* ---- shapes ---------------------------------------------------------------- */
/* Validates sizes (>= 0, numel fits int64 and bytes fit size_t). */
tn_status tn__check_shape(int ndim, const int64_t *shape, tn_dtype dt, int64_t *numel_out);
int64_t tn__numel(int ndim, const int64_t *shape);
void tn__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
bool tn__same_shape(const tn_tensor *a, const tn_tensor *b);
/* Broadcast of two shapes; TN_ERR_SHAPE with PyTorch's message on failure. */
tn_status tn__broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb,
                              int *nout, int64_t *out);
/* Normalises a possibly negative dim for a tensor of ndim dims (ndim 0 acts
 * as 1, as PyTorch); -1 + error on failure. */
int tn__wrap_dim(int dim, int ndim);
/* "[3, 4]" into buf. */
void tn__format_shape(char *buf, size_t n, int ndim, const int64_t *shape);
bool tn__is_contiguous(const tn_tensor *t);

/* ---- tensors --------------------------------------------------------------- */
/* New contiguous tensor, uninitialised / zeroed. No autograd. */
tn_tensor *tn__empty(int ndim, const int64_t *shape, tn_dtype dt);
tn_tensor *tn__zeros(int ndim, const int64_t *shape, tn_dtype dt);
tn_tensor *tn__full(int ndim, const int64_t *shape, tn_dtype dt, double v);
tn_tensor *tn__empty_like(const tn_tensor *t);
tn_tensor *tn__zeros_like(const tn_tensor *t);
/* A new handle over src's storage with the given geometry, sharing src's
 * version block, with no autograd meta and no view_base ("detached alias"). */
tn_tensor *tn__alias(const tn_tensor *src, int ndim, const int64_t *shape,
                     const int64_t *stride, int64_t offset);
/* Same geometry as src. */
tn_tensor *tn__detached_alias(const tn_tensor *src);
static inline tn_tensor *tn__retain(tn_tensor *t) {
    atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}
static inline char *tn__ptr(const tn_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)tn__dtype_sizes[t->dtype];
}
/* Fresh contiguous copy with dtype `dt`, no autograd (grad mode ignored). */
tn_tensor *tn__copy_as(const tn_tensor *src, tn_dtype dt);
/* Same on device dev (src may be on another device). */
tn_tensor *tn__copy_to_device(const tn_tensor *src, tn_dtype dt, tn_device dev);
/* Converted to dt: src itself (retained) when it already has it. No autograd. */
tn_tensor *tn__cast(const tn_tensor *src, tn_dtype dt);
/* dst[...] = src broadcast to dst's shape, converting dtype. No version bump,
 * no autograd. Shapes must broadcast (checked). */
tn_status tn__copy_into(tn_tensor *dst, const tn_tensor *src);
tn_status tn__fill_into(tn_tensor *dst, double v);

/* ---- scopes ---------------------------------------------------------------- */
/* Registers t in this thread's innermost scope unless inside engine code. */
tn_tensor *tn__ret(tn_tensor *t);
/* Engine code (backward, composite ops) brackets itself so that tensors it
 * creates through public functions are not registered in user scopes. */
void tn__internal_enter(void);
bool tn__in_engine(void); /* inside backward or a composite op */
/* Called by tn_release on a tensor some scope references: when every
 * remaining reference is a scope's, the caller can only be releasing the
 * scope's own (a user mistake): the scope forgets it, so nothing is
 * released twice. */
void tn__scope_on_release(tn_tensor *t);
void tn__internal_leave(void);

/* ---- grad mode ------------------------------------------------------------- */
bool tn__grad_enabled(void);

/* ---- random ---------------------------------------------------------------- */
uint64_t tn__rand_u64(void);
double tn__rand_uniform(void);
double tn__rand_normal(void);

/* ---- threads --------------------------------------------------------------- */
/* OpenMP threads an op of `work` elements may use (1 below the grain). */
int tn__threads_for(int64_t work);
#define TN_GRAIN 32768

#endif
