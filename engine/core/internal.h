/* engine/core/internal.h — the objects behind the opaque handles.
 *
 * storage   refcounted buffer (jemalloc, 64-byte aligned) + write epoch
 * version   refcounted 64-bit version counter shared by a tensor, its views,
 *           its detach()es and saved aliases (not by .data); NULL for an
 *           inference tensor (made in inference mode: no counter at all)
 * tensor    refcounted handle: storage + offset/shape/strides + dtype +
 *           version + autograd meta (NULL when no grad is needed)
 *
 * Internal functions are prefixed tn__ and do NOT register their results in
 * the caller's scope; public functions finish with tn__ret().
 */
#ifndef TN_CORE_INTERNAL_H
#define TN_CORE_INTERNAL_H

#include "tenet.h"

#include "base.h"

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
    /* memory from elsewhere (tn_from_blob, tn_from_dlpack): owns_data is
     * false and release(release_ctx) runs when the last reference goes */
    bool external;
    void (*release)(void *ctx);
    void *release_ctx;
    /* anomaly mode: ring of the last writes (debug/anomaly.c), made lazily */
    _Atomic(struct tn_write_ring *) ring;
    /* race detector: in-flight accesses (debug/race.c), made lazily */
    _Atomic(struct tn_race_state *) race;
} tn_storage;

typedef struct tn_version_block {
    _Atomic int64_t refcount;
    _Atomic uint64_t version;
    /* Anomaly mode: the version that the first write after the latest save
     * reaches (saved version + 1; 0: none), so that the write ring keeps
     * that write beside the latest ones (tn__version_save, debug/anomaly.c). */
    _Atomic uint64_t first_after_save;
} tn_version_block;

/* Where a gradient lands: a leaf's .grad or a retained non-leaf grad.
 * Strong references are the tensors' (their autograd meta): when the last
 * goes, the gradient is dropped, for no one can read it any more. The graph
 * (edges, retain_grad slots, saved leaves) holds weak references, made
 * strong only while it accumulates: so a gradient whose own graph leads back
 * to its cell (create_graph) never keeps that cell, and the tensor, alive. */
typedef struct tn_grad_cell {
    _Atomic int64_t refcount;
    /* weak references + 1 for all the strong ones: the struct's lifetime */
    _Atomic int64_t weak;
    _Atomic(tn_tensor *) grad;
    /* Threads between loading `grad` and retaining it (tn_grad). A tensor
     * that was ever installed is released only when this is 0, so a reader
     * never retains a freed tensor (accumulate.c). */
    _Atomic int64_t readers;
    /* Leaf hooks (engine/autograd/grad_hooks.c): a lock-free list, appended
     * only, freed with the struct. */
    _Atomic(struct tn_hook *) hooks;
} tn_grad_cell;

typedef struct tn_autograd_meta {
    bool requires_grad;
    bool retains_grad;
    atomic_flag warned_nonleaf_grad;
    tn_node *grad_fn;   /* owned; NULL for leaves */
    int output_nr;      /* which output of grad_fn this tensor is */
    tn_grad_cell *cell; /* leaves (requires_grad) and retain_grad non-leaves */
    /* Views: the grad_fn the last regeneration replaced, kept until the
     * next one or the tensor's end, so that a thread which loaded it just
     * before never holds a freed node (engine/autograd/view_track.c). */
    tn_node *retired;
} tn_autograd_meta;

struct tn_tensor {
    _Atomic int64_t refcount;
    int ndim;
    tn_dtype dtype;
    int64_t offset; /* elements */
    tn_storage *storage;
    tn_version_block *version; /* NULL: an inference tensor (tn__is_inference) */
    tn_autograd_meta *ag;  /* NULL: does not require grad, no history */
    tn_tensor *view_base;  /* views: the root base (owned), else NULL */
    /* Views (engine/autograd/view_track.c): the version at which the
     * history was last made or checked; when the shared counter has moved
     * since (an in-place write through the base or another view), the
     * history is regenerated from the base's on next use. view_busy is the
     * once-guard of that regeneration; view_mode how the view was made. */
    _Atomic uint64_t view_version;
    _Atomic int32_t view_busy;
    int32_t view_mode; /* tn_view_mode */
    _Atomic int32_t scoped; /* references owned by scopes of the creating thread */
    /* Weak references (saved tensors, autograd/node.c) plus one held by all
     * the strong ones together: the handle's memory outlives its contents
     * until the last weak reference goes. A handle's geometry, storage and
     * version never change after it is made. */
    _Atomic int32_t weak;
    int64_t shape[TN_MAX_DIMS];
    int64_t stride[TN_MAX_DIMS];
};

/* How a view was made: grad mode on (its history follows its base's), off
 * (PyTorch's CreationMeta::NO_GRAD_MODE: writing it in place, or reading
 * its history after its base was written with grad mode on, is an error),
 * or in inference mode (CreationMeta::INFERENCE_MODE: the same rules, with
 * inference mode's messages; only views of normal tensors: a view of an
 * inference tensor is an inference tensor, not a view), or by an op
 * returning several views (split, chunk, unbind: PyTorch's
 * MULTI_OUTPUT_NODE, the same errors in other words). A plain view of a
 * view keeps its base's mode (PyTorch's propagate_creation_meta). */
typedef enum tn_view_mode {
    TN_VIEW_GRAD = 0,
    TN_VIEW_NO_GRAD = 1,
    TN_VIEW_INFERENCE = 2,
    TN_VIEW_MULTI = 3
} tn_view_mode;

/* An inference tensor (made in inference mode, or a view or detach of
 * one): no version counter, and no autograd meta unless tn_requires_grad_
 * made it a leaf that requires grad inside inference mode. */
static inline bool tn__is_inference(const tn_tensor *t) { return !t->version; }

/* requires_grad, as PyTorch's: a view also requires grad when its base
 * does (its history may be stale: see tn__view_sync). */
static inline bool tn__requires_grad(const tn_tensor *t) {
    if (!t) return false;
    if (t->ag && t->ag->requires_grad) return true;
    const tn_tensor *b = t->view_base;
    return b && b->ag && b->ag->requires_grad;
}

/* ---- memory (tensor objects) ----------------------------------------------- */
/* Live-handle count for tn_memory_stats, kept per thread (no shared line). */
void tn__count_tensors(int64_t delta);
/* Host tensor-storage bytes live now (tn_memory_stats' bytes_live, without
 * the allocator's own statistics): cheap, lock-free, any thread. */
int64_t tn__bytes_live(void);
tn_storage *tn__storage_new(size_t nbytes, tn_device dev);
/* A storage over memory tenet does not own; release(ctx) (may be NULL) runs,
 * on whichever thread drops the last reference, when it goes. */
tn_storage *tn__storage_wrap(void *data, size_t nbytes, tn_device dev, void (*release)(void *),
                             void *ctx);
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
/* 0 for an inference tensor, which is never written while anything that
 * compares versions (a saved tensor, a view's history) could see it. */
static inline uint64_t tn__version_get(const tn_tensor *t) {
    return t->version ? atomic_load_explicit(&t->version->version, memory_order_acquire) : 0;
}

/* ---- dtype ----------------------------------------------------------------- */
/* torch.result_type for two tensors (0-dim tensors weaker than dimensioned). */
tn_dtype tn__promote(const tn_tensor *a, const tn_tensor *b);
tn_dtype tn__promote_types(tn_dtype a, tn_dtype b);
/* Result dtype of tensor (op) python-scalar. */
tn_dtype tn__promote_scalar(tn_dtype a, double s);

/* ---- shapes ---------------------------------------------------------------- */
/* Validates sizes (>= 0, numel fits int64 and bytes fit size_t). */
tn_status tn__check_shape(int ndim, const int64_t *shape, tn_dtype dt, int64_t *numel_out);
void tn__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
bool tn__same_shape(const tn_tensor *a, const tn_tensor *b);
/* Broadcast of two shapes; TN_ERR_SHAPE with PyTorch's message on failure. */
tn_status tn__broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb,
                              int *nout, int64_t *out);
/* out's shape must be the broadcast shape (nd, shape): else PyTorch's
 * "output with shape [..] doesn't match the broadcast shape [..]". */
tn_status tn__check_out_shape(const tn_tensor *out, int nd, const int64_t *shape);
/* Same for a source of shape (nd, shape) written into out (copy_, in place). */
tn_status tn__check_broadcast_into(const tn_tensor *out, int nd, const int64_t *shape);
/* Normalises a possibly negative dim for a tensor of ndim dims (ndim 0 acts
 * as 1, as PyTorch); -1 + error on failure. */
int tn__wrap_dim(int dim, int ndim);
/* "[3, 4]" into buf. */
void tn__format_shape(char *buf, size_t n, int ndim, const int64_t *shape);
bool tn__is_contiguous(const tn_tensor *t);
/* Whether t's elements are, in some order, exactly the *n elements of one dense block that
 * starts at tn__ptr(t): a contiguous tensor with its dims permuted (a transpose), reads of which
 * need no copy when the order does not matter. With skip_broadcast, dims of stride 0 are left
 * out (their values repeat: fine for "any NaN?", not for a sum). False for an empty tensor. */
bool tn__dense_block(const tn_tensor *t, bool skip_broadcast, int64_t *n);

/* ---- tensors --------------------------------------------------------------- */
/* New contiguous tensor, uninitialised / zeroed. No autograd. */
tn_tensor *tn__empty(int ndim, const int64_t *shape, tn_dtype dt);
tn_tensor *tn__zeros(int ndim, const int64_t *shape, tn_dtype dt);
tn_tensor *tn__full(int ndim, const int64_t *shape, tn_dtype dt, double v);
tn_tensor *tn__empty_like(const tn_tensor *t);
tn_tensor *tn__zeros_like(const tn_tensor *t);
/* FNV-1a of a CPU tensor's element bytes in logical order (wrap.c): a change
 * of its values, for anomaly mode's check of memory shared with others. */
uint64_t tn__tensor_digest(const tn_tensor *t);
/* A bare handle (refcount 1, no storage yet) with the given geometry. */
tn_tensor *tn__handle_new(int ndim, const int64_t *shape, const int64_t *stride, tn_dtype dt);
/* A new handle over src's storage with the given geometry, sharing src's
 * version block, with no autograd meta and no view_base ("detached alias"). */
tn_tensor *tn__alias(const tn_tensor *src, int ndim, const int64_t *shape,
                     const int64_t *stride, int64_t offset);
/* Same geometry as src. */
tn_tensor *tn__detached_alias(const tn_tensor *src);
/* A new reference to t. The one place that casts const away from a tensor
 * the engine keeps: a `const tn_tensor *` argument promises that the call
 * does not change the tensor (docs/api.md, Conventions), and taking a
 * reference is not a change; the result is non-const because the holder (a
 * view's base, a result that is the input itself, a saved tensor) is later
 * released through it. */
static inline tn_tensor *tn__retain(const tn_tensor *t) {
    tn_tensor *held = (tn_tensor *)t;
    atomic_fetch_add_explicit(&held->refcount, 1, memory_order_relaxed);
    return held;
}
/* Weak references: keep the handle's memory, not its contents. A weak
 * reference is made from a strong one; tn__try_retain turns it back into a
 * strong reference, or returns false once the tensor has been torn down. */
static inline void tn__weak_retain(tn_tensor *t) {
    /* relaxed: made from a strong reference, which keeps the handle alive. */
    atomic_fetch_add_explicit(&t->weak, 1, memory_order_relaxed);
}
void tn__weak_release(tn_tensor *t);
/* Increments a refcount that is > 0; false once it reached 0 (final: the
 * object is being torn down). acquire on success: pairs with the release
 * half of the other owners' acq_rel decrements, as a retain from a held
 * reference would. */
static inline bool tn__ref_try_inc(_Atomic int64_t *rc) {
    int64_t c = atomic_load_explicit(rc, memory_order_relaxed);
    while (c > 0)
        if (atomic_compare_exchange_weak_explicit(rc, &c, c + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    return false;
}
static inline bool tn__try_retain(tn_tensor *t) { return tn__ref_try_inc(&t->refcount); }
static inline char *tn__ptr(const tn_tensor *t) {
    /* In integers: an empty view's offset may lie anywhere (it wraps, as in
     * PyTorch), and its pointer is never dereferenced. */
    return (char *)((uintptr_t)t->storage->data +
                    (uintptr_t)t->offset * (uintptr_t)tn__dtype_sizes[t->dtype]);
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
/* Registers t in this thread's innermost scope unless inside engine code.
 * A tensor returned to the user also ends "the last call failed" (see
 * tn__null_arg): engine code's own calls do not. */
tn_tensor *tn__ret(tn_tensor *t);
extern _Thread_local bool tn__failed_last; /* engine/core/error.c */
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
/* Around each call of user code from the engine (hooks, custom functions'
 * forward and backward, backward callbacks): the callback runs as user code
 * (its tn_scope_begin opens a real scope, the public ops it calls return
 * into it) while the scopes open around it are hidden from it: outside its
 * own scopes what it gets is its own, as without any scope, and
 * tn_scope_end never ends a scope it did not open. tn__in_engine() stays
 * true (the checks of engine code). Leave closes the scopes the callback
 * left open, except that one reference of each results[k] found in them is
 * handed over as if kept (results: the tensors it returned to the engine);
 * it returns st, or TN_ERR_INVALID_ARGUMENT naming `what` when st >= 0 and
 * a scope was left open. Frames nest (a hook in a backward called from a
 * hook). */
typedef struct tn__callback_frame {
    int internal, base;
} tn__callback_frame;
void tn__callback_enter(tn__callback_frame *f);
tn_status tn__callback_leave(const tn__callback_frame *f, tn_status st, int n_results,
                             tn_tensor *const *results, const char *what);

/* ---- grad mode (engine/core/grad_mode.c) ------------------------------------ */
/* Autocast's per-thread switch: bit (1 << device type) set while this
 * thread's innermost region for that device type autocasts; 0 with no
 * region, inside an autocast op (its inner ops must not cast again) and
 * inside backward (engine/ops/autocast.c; grad_mode.c defines it). Plain
 * thread-local: only its own thread reads or writes it. */
#if defined(__GNUC__)
#define TN_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
#else
#define TN_TLS_INITIAL_EXEC
#endif
extern _Thread_local uint8_t tn__autocast_on TN_TLS_INITIAL_EXEC;
/* Inference mode (tn_set_inference_mode) on this thread: tensors made now
 * are inference tensors. Plain thread-local, as tn__autocast_on. */
extern _Thread_local bool tn__inference_on TN_TLS_INITIAL_EXEC;
/* Grad mode on and inference mode off. */
bool tn__grad_enabled(void);
/* True when grad mode is on, one of the (possibly NULL) inputs requires
 * grad and one is a normal (not inference) tensor. */
bool tn__needs_grad(int n, const tn_tensor *const *inputs);

/* Gives a new handle its own version block, except in inference mode (an
 * inference tensor has none); false out of memory. */
static inline bool tn__version_attach(tn_tensor *t) {
    if (tn__inference_on) return true;
    t->version = tn__version_new();
    return t->version != NULL;
}

#endif
