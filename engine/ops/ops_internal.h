/* engine/ops/ops_internal.h — what ops/ defines for the layers that use it.
 *
 * Ops record autograd nodes (engine/autograd/autograd_internal.h), and the
 * autograd engine computes with ops: it sums and converts gradients, makes
 * views and copies for in-place rebasing, moves gradients between devices.
 * That pair is the one loop between folders (docs/design.md, "Layers");
 * these are the functions autograd/ and optim/ take from ops/.
 */
#ifndef TN_OPS_INTERNAL_H
#define TN_OPS_INTERNAL_H

#include "../autograd/autograd_internal.h"

/* Sums g back to `shape` (broadcast reduction) and converts to dtype. Returns
 * g retained when nothing is needed (sum_to.c). */
tn_tensor *tn__sum_to(tn_tensor *g, int ndim, const int64_t *shape, tn_dtype dt);

/* dst += src in place (same shape), no autograd, no version bump (binary.c). */
tn_status tn__add_into(tn_tensor *dst, const tn_tensor *src);

/* Creates a view of a with the given geometry (offset in elements, absolute);
 * records `fn` (with params set by the caller afterwards via *node_out when
 * non-NULL) when a requires grad (view_core.c). */
tn_tensor *tn__make_view(const tn_tensor *a, int ndim, const int64_t *shape, const int64_t *stride,
                         int64_t offset, const tn_fn_info *fn, tn_node **node_out);
/* Makes v (an alias of a's storage, no history yet) a view of a: its root
 * base, its mode (multi: one of several views an op returns, split's) and
 * its version; the caller records the history. */
void tn__view_link(tn_tensor *v, const tn_tensor *a, bool multi);

/* ---- conversions (alias.c) ------------------------------------------------------------ */
/* src converted to dtype with ToCopyBackward0 when src requires grad. */
tn_tensor *tn__to_dtype_autograd(const tn_tensor *src, tn_dtype dt);
/* Same to another device and/or dtype. */
tn_tensor *tn__to_autograd(const tn_tensor *src, tn_dtype dt, tn_device dev);
/* clone() not registered in scopes: CloneBackward0 when t requires grad. */
tn_tensor *tn__clone_recorded(const tn_tensor *t);

/* ---- the fused normalisations' backward (norm_backward.c) ---------------------------------- */
/* gi[] from the gradient g of the output, x and weight (NULL: none) the node's saved ones. */
typedef tn_status (*tn_norm_bw_fn)(tn_node *n, tn_tensor *x, tn_tensor *w, tn_tensor *g,
                                   tn_tensor **gi);
/* The backward of a node that saved {0: x, 1: weight (optional)}: with grad mode on
 * (create_graph) graph builds the gradients from recorded public ops; else fused runs the
 * kernel on x and the weight made contiguous. */
tn_status tn__norm_backward(tn_node *n, tn_tensor *g, tn_tensor **gi, tn_norm_bw_fn graph,
                            tn_norm_bw_fn fused);
/* The fused backward's operands: the saved mean and rstd (slots 2 and 3), g contiguous on x's
 * device, and gi[k] for each valid edge k (its input's shape and dtype; zeros when x is empty:
 * no kernel runs). tn__norm_bw_end releases the three (the engine releases gi[] on failure). */
typedef struct tn_norm_bw_ops {
    tn_tensor *mean, *rstd, *g;
} tn_norm_bw_ops;
tn_status tn__norm_bw_begin(tn_node *n, const tn_tensor *x, tn_tensor *g, tn_tensor **gi,
                            tn_norm_bw_ops *o);
void tn__norm_bw_end(tn_norm_bw_ops *o);
/* The fused backward's pointers into its kernel arguments A (tn_ln_args or tn_cn_args: the
 * same field names), from x, the weight w (or NULL), o and gi. */
#define TN_NORM_BW_PTRS(A, X, W, O, GI)                                                         \
    ((A).x = tn__ptr(X), (A).weight = (W) ? tn__ptr(W) : NULL, (A).dy = tn__ptr((O).g),        \
     (A).mean = tn__ptr((O).mean), (A).rstd = tn__ptr((O).rstd),                               \
     (A).dx = (GI)[0] ? tn__ptr((GI)[0]) : NULL, (A).dweight = (GI)[1] ? tn__ptr((GI)[1]) : NULL, \
     (A).dbias = (GI)[2] ? tn__ptr((GI)[2]) : NULL)
/* Its operands for the device layer, the three written first (mask 7u). */
#define TN_NORM_BW_NOPS 8
#define TN_NORM_BW_OPS(X, W, O, GI)                                                             \
    ((const tn_tensor *[TN_NORM_BW_NOPS]){(GI)[0], (GI)[1], (GI)[2], (O).g, (X), (O).mean,     \
                                          (O).rstd, (W)})

/* The fused attention's forward with a bool key mask (or NULL) and the causal rule key j <= i +
 * offset; not recorded for autograd (attention.c, for kv_cache.c). */
tn_tensor *tn__sdpa_offset(const tn_tensor *q, const tn_tensor *k, const tn_tensor *v,
                           const tn_tensor *key_mask, int64_t offset);

#endif
