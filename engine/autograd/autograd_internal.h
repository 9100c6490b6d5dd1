/* engine/autograd/autograd_internal.h — nodes, edges, saved tensors.
 *
 * How an op records itself (engine/ops/unary.c and binary.c follow it):
 *
 *   out = kernel(...);                                   // no autograd yet
 *   if (tn__needs_grad(2, (const tn_tensor *[]){a, b})) {
 *       tn_node *n = tn__node_new(&mul_fn, 2, (const tn_tensor *[]){a, b}, 2, 1);
 *       if (!n) goto fail;
 *       binary_p(n)->alpha = 1;                          // parameters: TN_NODE_PARAMS below
 *       tn__node_set_output(n, out, 0);                  // out->grad_fn = n
 *       tn__node_save(n, 0, a, false);                   // saved input
 *       tn__node_save(n, 1, b, false);
 *       tn__node_release(n);                             // out holds it now
 *   }
 *
 * Backward functions receive one gradient per node output (never NULL: the
 * engine fills zeros for outputs that got none) and write one gradient per
 * input edge (new references; leave NULL when the edge is empty or the
 * gradient is zero). The engine sums each input gradient back to the
 * input's shape (broadcasting) and dtype, so formulas may return the
 * broadcast shape. Backward functions build their results with the public
 * ops, so a create_graph backward records a graph of its own.
 */
#ifndef TN_AUTOGRAD_INTERNAL_H
#define TN_AUTOGRAD_INTERNAL_H

#include "../core/device.h"
#include "../core/hooks.h"
#include "../core/internal.h"

typedef struct tn_edge {
    tn_node *node;      /* owned; the input's grad_fn (NULL for leaves/none) */
    tn_grad_cell *cell; /* weak; the input leaf's gradient cell */
    int input_nr;       /* output index of the input within `node` */
} tn_edge;

static inline bool tn__edge_valid(const tn_edge *e) { return e->node || e->cell; }

/* A saved tensor, as PyTorch's SavedVariable: the data and what is needed
 * to rebuild its history, never a strong path back to a tensor that could
 * own this node. So the graph makes no cycle whatever the program does
 * (create_graph through an op saving its input, y.add_(y.abs()) on a
 * non-leaf y, x.mul_(x)): nodes own older nodes; they hold tensors and
 * cells only weakly.
 *
 * `orig` is the tensor itself, held weakly: its handle stays allocated and
 * its geometry (dtype, shape, strides, offset) never changes, while the slot
 * holds its storage and version counter strongly. Unpacking returns the
 * tensor itself while it lives, else an alias made from those. */
typedef struct tn_saved {
    tn_tensor *orig;    /* weak + its storage and version (owned); NULL once freed */
    union {             /* inputs requiring grad, as when saved: */
        tn_node *grad_fn;   /* non-leaf (has_fn): the grad_fn (owned: older) */
        tn_grad_cell *cell; /* leaf: its gradient cell (weak) */
    } h;
    uint64_t version;   /* version at save time */
    uint64_t epoch;     /* storage write epoch at save time (untracked writes) */
    /* Packed so that a slot stays 40 bytes (nodes carry their slots inline). */
    int output_nr : 26;      /* outputs: index in the saver; inputs: in grad_fn (< 2^25) */
    unsigned defined : 1;
    unsigned is_output : 1;
    unsigned requires_grad : 1; /* inputs: requires_grad when saved */
    unsigned has_fn : 1;        /* h is a grad_fn */
    unsigned digested : 1;      /* digest was taken (CPU memory from tn_from_blob / DLPack) */
    uint32_t digest; /* anomaly mode, memory shared with others: its bytes' digest (low half) */
} tn_saved;
_Static_assert(sizeof(tn_saved) == 40, "a saved slot grew: nodes carry them inline");

typedef struct tn_input_meta {
    int ndim;
    tn_dtype dtype;
    tn_device device;
    int64_t shape[TN_MAX_DIMS];
} tn_input_meta;

/* grads_out: n_out tensors (borrowed, never NULL); grads_in: n_in slots to
 * fill with new references or leave NULL. */
typedef tn_status (*tn_backward_fn)(tn_node *n, tn_tensor *const *grads_out,
                                    tn_tensor **grads_in);

typedef struct tn_fn_info {
    const char *name;        /* grad_fn name, e.g. "MulBackward0" */
    tn_backward_fn backward;
} tn_fn_info;

/* ---- op parameters --------------------------------------------------------
 * Each op family names what its backward needs in a struct of its own and
 * reaches a node's copy through an accessor that TN_NODE_PARAMS makes:
 *
 *   typedef struct reduce_params { int64_t dim; bool keepdim; double div; } reduce_params;
 *   TN_NODE_PARAMS(reduce_params, reduce_p)   // reduce_p(n)->dim
 *
 * The struct lives in the node (params: zeroed at creation), so a node stays
 * one allocation of an unchanged size class; TN_NODE_PARAMS fails to compile
 * when a struct outgrows the area or needs a stricter alignment. A node's
 * parameters are read only by its own family (its fn names the family), so
 * each area holds one struct type. */
#define TN_NODE_PARAM_BYTES (2 * sizeof(double) + TN_MAX_DIMS * sizeof(int64_t))
typedef union tn_node_params {
    unsigned char bytes[TN_NODE_PARAM_BYTES];
    int64_t align_i; /* alignment for the families' int64_t, double, pointers */
    double align_d;
    void *align_p;
} tn_node_params;
#define TN_NODE_PARAMS(type, accessor)                                                             \
    _Static_assert(sizeof(type) <= TN_NODE_PARAM_BYTES,                                            \
                   #type " outgrows tn_node's parameter area");                                    \
    _Static_assert(_Alignof(type) <= _Alignof(tn_node_params),                                     \
                   #type " needs a stricter alignment than tn_node's parameter area");             \
    static inline type *accessor(tn_node *n) { return (type *)(void *)n->params.bytes; }

/* Where a view sits in its base's storage (CopySlices / AsStridedBackward0);
 * kept out of tn_node so that ordinary nodes stay small. */
typedef struct tn_view_geom {
    int64_t view_ndim, view_offset;
    int64_t view_shape[TN_MAX_DIMS], view_stride[TN_MAX_DIMS];
    int64_t base_ndim, base_offset;
    int64_t base_shape[TN_MAX_DIMS], base_stride[TN_MAX_DIMS];
} tn_view_geom;

struct tn_node {
    _Atomic int64_t refcount;
    const tn_fn_info *fn;
    uint64_t seq;         /* creation order: later nodes run first */
    int n_in, n_out, n_saved;
    bool has_saved;       /* a slot holds a tensor: backward twice needs retain_graph */
    /* Saved-tensor lifetime, see engine.c (kept by run_node.c): `saved_refs`
     * counts the graph's own reference (1) plus each backward currently using
     * the tensors; `claimed` is set by the first backward that will free them. */
    _Atomic int64_t saved_refs;
    atomic_bool claimed;
    tn_edge *edges;           /* n_in */
    tn_input_meta *in_meta;   /* n_in */
    tn_input_meta *out_meta;  /* n_out: shapes of the outputs (zero grads) */
    tn_saved *saved;          /* n_saved */
    _Atomic(tn_grad_cell *) *retained; /* n_out: retain_grad targets */
    tn_node_params params;    /* the op family's (TN_NODE_PARAMS) */
    tn_node *inner;           /* CopySlices: the wrapped in-place node */
    struct tn_backtrace *trace; /* anomaly mode: forward backtrace (owned) */
    tn_node *parent;          /* anomaly + create_graph: node whose backward made this */
    struct tn_view_geom *geom; /* CopySlices / AsStrided only (owned) */
    _Atomic(struct tn_hook *) hooks; /* grad_hooks.c: appended only, freed with the node */
};

/* ---- views that follow their base (engine/autograd/view_track.c) ----------- */
/* A view whose shared version counter moved since its history was made or
 * checked. acquire: pairs with the release store of view_version in
 * tn__view_sync_slow, so a reader that sees the history current sees it
 * whole. */
static inline bool tn__view_stale(const tn_tensor *t) {
    return t->view_base &&
           atomic_load_explicit(&((tn_tensor *)t)->view_version, memory_order_acquire) !=
               tn__version_get(t);
}
tn_status tn__view_sync_slow(tn_tensor *t);
/* Brings t's history up to date before it is read (a no-op unless t is a
 * stale view): regenerates a view's grad_fn from its base's current history
 * (AsStridedBackward0), once even when threads race to it. Fails on OOM and
 * with PyTorch's error for a view made in no-grad mode. */
static inline tn_status tn__view_sync(const tn_tensor *t) {
    return TN_UNLIKELY(t && tn__view_stale(t)) ? tn__view_sync_slow((tn_tensor *)t) : TN_OK;
}
/* PyTorch's error for a view made in no-grad or inference mode (or a view
 * of one) that is written in place (indirect: its base or another view was
 * written). */
tn_status tn__no_grad_view_error(const tn_tensor *t, bool indirect);
/* Records t's history as current (a view written in place, whose history
 * was just set). */
void tn__view_mark_current(tn_tensor *t);
/* t's history (after tn__view_sync): grad_fn (borrowed) or NULL. */
static inline tn_node *tn__grad_fn(const tn_tensor *t) {
    return t->ag ? t->ag->grad_fn : NULL;
}
/* The cell of a leaf's gradient, or NULL. */
static inline tn_grad_cell *tn__leaf_cell(const tn_tensor *t) {
    return t->ag && !t->ag->grad_fn ? t->ag->cell : NULL;
}
/* AsStridedBackward0 for `view` over `base` (geometry of both), its edge
 * to base's current history. NULL + error on OOM. */
tn_node *tn__as_strided_node(const tn_tensor *view, const tn_tensor *base);
/* New node (refcount 1) with edges to the inputs' histories (NULL inputs and
 * inputs not requiring grad give empty edges). NULL + error on OOM. */
tn_node *tn__node_new(const tn_fn_info *fn, int n_in, const tn_tensor *const *inputs,
                      int n_saved, int n_out);
void tn__node_retain(tn_node *n);
void tn__node_release(tn_node *n);
/* Makes `out` a non-leaf output `output_nr` of n (out must have no history of
 * its own, or be the target of an in-place op: its old history is dropped). */
tn_status tn__node_set_output(tn_node *n, tn_tensor *out, int output_nr);
/* Saves t (may be NULL: slot stays undefined). is_output: t is an output of n.
 * An inference tensor cannot be saved (tn__inference_saved_error). */
tn_status tn__inference_saved_error(void);
tn_status tn__node_save(tn_node *n, int slot, const tn_tensor *t, bool is_output);
/* Backward side: a new reference to saved tensor `slot`, after the freed and
 * version checks; NULL + PyTorch's error otherwise. */
tn_tensor *tn__node_unpack(tn_node *n, int slot);
/* Drops what the saved slots hold (backward without retain_graph, or the
 * node's end); a later unpack reports the second backward. */
void tn__node_free_saved(tn_node *n);

/* Autograd meta helpers (node.c, which installs tn__hooks.meta_free). */
tn_autograd_meta *tn__meta_get_or_create(tn_tensor *t);
void tn__meta_free(tn_autograd_meta *m);
tn_grad_cell *tn__cell_new(void);
void tn__cell_retain(tn_grad_cell *c);
void tn__cell_release(tn_grad_cell *c);
/* Weak references (the graph's): keep the struct, not the gradient. */
void tn__cell_weak_retain(tn_grad_cell *c);
void tn__cell_weak_release(tn_grad_cell *c);
/* A strong reference from a weak one; false once the tensors are gone. */
bool tn__cell_try_retain(tn_grad_cell *c);
/* Releases t, which was installed in c and has been taken out of it, once
 * no tn_grad reader can still be about to retain it. */
void tn__cell_release_taken(tn_grad_cell *c, tn_tensor *t);
/* A new reference to c's gradient or NULL, safe against concurrent
 * accumulation and tn_set_grad. */
tn_tensor *tn__cell_load(tn_grad_cell *c);
/* Lock-free accumulation of g (a new reference, consumed) into c. */
tn_status tn__cell_accumulate(tn_grad_cell *c, tn_tensor *g, bool create_graph);
/* The same in two steps, so that a backward run updates all its cells or
 * none: prepare (c: a weak reference; consumes g) makes every allocation (an
 * exclusive copy of g; with create_graph, old + g from the cell's current
 * gradient) and holds c strongly, or drops g when c's tensors are gone
 * (u->cell stays NULL); commit then installs it and cannot fail, unless
 * another thread changes the cell in between with create_graph. drop: an
 * update that will not be committed. */
typedef struct tn_cell_update {
    tn_grad_cell *cell;       /* strong, owned */
    tn_tensor *g, *old, *sum; /* owned */
} tn_cell_update;
tn_status tn__cell_prepare(tn_grad_cell *c, tn_tensor *g, bool create_graph,
                           tn_cell_update *u);
tn_status tn__cell_commit(tn_cell_update *u, bool create_graph);
void tn__cell_update_drop(tn_cell_update *u);

/* ---- in-place support (engine/autograd/inplace.c) -------------------------- */
/* Checks PyTorch's rules for writing in place into t with src (the other
 * operand, may be NULL): a leaf / view of a leaf requiring grad, a view made
 * in no-grad mode, while grad mode is on. TN_OK or the error. */
tn_status tn__check_inplace(const tn_tensor *t, const tn_tensor *src);
/* Making `n` (the in-place op's node, created with self as input 0, NULL
 * when nothing is recorded) self's new history; for views, the base is
 * rebased with CopySlices. In two steps, so that a failed op changes
 * nothing: prepare, before the write, makes every allocation (consumes n;
 * on failure nothing is changed); then the op writes and commits, which
 * bumps the version (op: a static name for anomaly mode) and cannot fail,
 * or abandons when the write failed. */
typedef struct tn_rebase {
    tn_node *n;       /* not a view: n itself */
    tn_node *cs, *as; /* a view: CopySlices (holding n), AsStridedBackward0 */
} tn_rebase;
tn_status tn__inplace_prepare_rebase(tn_tensor *self, tn_node *n, tn_rebase *rb);
tn_status tn__inplace_commit(tn_tensor *self, tn_rebase *rb, const char *op);
void tn__inplace_abandon(tn_rebase *rb);

/* The CopySlices running `inner`'s backward on this thread, or NULL; and
 * the history a view written in place had after the write (r: an alias of
 * the view), AsStridedBackward0 over that CopySlices. */
tn_node *tn__copy_slices_running(const tn_node *inner);
tn_status tn__view_history_after_write(tn_node *cs, tn_tensor *r);

/* ---- hooks (engine/autograd/grad_hooks.c) ----------------------------------- */
static inline bool tn__has_hooks(_Atomic(struct tn_hook *) *list) {
    /* relaxed: only tests for a list; walking it loads with acquire */
    return atomic_load_explicit(list, memory_order_relaxed) != NULL;
}
/* Frees a list (its owner's end). */
void tn__hooks_free(_Atomic(struct tn_hook *) *list);
/* Node output k's gradient *g (owned; may be replaced): its tensor hooks in
 * order, and the retain_grad capture at its place among them (capture(g) is
 * called once: before the hooks, or where retain_grad was registered after
 * some of them). skip_tensor_hooks: g was made of zeros (no gradient came). */
tn_status tn__run_output_hooks(tn_node *n, int k, tn_tensor **g, bool skip_tensor_hooks,
                               tn_status (*capture)(void *arg, tn_tensor *g), void *arg);
/* Node pre-hooks on its n_out output gradients (owned, may be replaced). */
tn_status tn__run_prehooks(tn_node *n, tn_tensor **grads_out);
/* Node post-hooks on gin (n_in, owned, NULL allowed, may be replaced). */
tn_status tn__run_posthooks(tn_node *n, tn_tensor **gin, tn_tensor *const *grads_out);
/* A leaf cell's tensor hooks on *g (owned, may be replaced). */
tn_status tn__run_cell_hooks(tn_grad_cell *c, tn_tensor **g);
/* A leaf cell's post-accumulate hooks. */
tn_status tn__run_post_accumulate(tn_grad_cell *c);
/* retain_grad on output k of n: marks its place among n's hooks. */
tn_status tn__hooks_mark_retain(tn_node *n, int k);
/* ---- custom functions (engine/autograd/function.c) --------------------------- */
/* The backward of every custom function's node; tn__node_release calls
 * tn__function_node_free for such a node (its fn is per-node state). */
tn_status tn__function_backward(tn_node *n, tn_tensor *const *go, tn_tensor **gi);
void tn__function_node_free(tn_node *n);

/* ---- engine (engine/autograd/engine.c; its jobs: engine_internal.h) ------- */
tn_status tn__run_backward(int n_roots, tn_tensor *const *roots, tn_tensor *const *grads,
                           bool retain_graph, bool create_graph, int n_inputs,
                           tn_tensor *const *inputs, tn_tensor **grads_out);
uint64_t tn__next_seq(void);

#endif
