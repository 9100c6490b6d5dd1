/* The view constructor shared by every view op: a new handle over the same
 * storage and version counter, remembering its root base (for CopySlices and
 * for following the base's history, engine/autograd/view_track.c) and
 * recording the view's backward when the input requires grad. A view of an
 * inference tensor is a plain inference tensor: no base, no history, not
 * requiring grad (PyTorch's: not `_is_view()`, a leaf). */
#include "ops_internal.h"

void tn__view_link(tn_tensor *v, const tn_tensor *a, bool multi) {
    v->view_base = tn__retain(a->view_base ? a->view_base : a);
    tn_view_mode mode = tn__inference_on     ? TN_VIEW_INFERENCE
                        : !tn__grad_enabled() ? TN_VIEW_NO_GRAD
                        : multi               ? TN_VIEW_MULTI
                                              : TN_VIEW_GRAD;
    /* PyTorch's propagate_creation_meta: a plain view of a view keeps the
     * mode its base view was made with, and inference mode's wins */
    if (a->view_base && (mode == TN_VIEW_GRAD || a->view_mode == TN_VIEW_INFERENCE))
        mode = (tn_view_mode)a->view_mode;
    v->view_mode = mode;
    atomic_init(&v->view_version, tn__version_get(v)); /* a's history is synced by the caller */
}

tn_tensor *tn__make_view(const tn_tensor *a, int ndim, const int64_t *shape, const int64_t *stride,
                         int64_t offset, const tn_fn_info *fn, tn_node **node_out) {
    if (node_out) *node_out = NULL;
    tn_tensor *v = tn__alias(a, ndim, shape, stride, offset);
    if (!v || tn__is_inference(a)) return v;
    tn__view_link(v, a, false);
    if (!fn || !tn__needs_grad(1, (const tn_tensor *[]){a})) return v;
    tn_node *n = tn__node_new(fn, 1, (const tn_tensor *[]){a}, 0, 1);
    tn_status st = n ? tn__node_set_output(n, v, 0) : tn_last_status();
    if (st < 0) {
        tn__node_release(n);
        tn_release(v);
        return NULL;
    }
    if (node_out) *node_out = n; /* borrowed: v holds the reference */
    tn__node_release(n);
    return v;
}
