/* The view constructor shared by every view op: a new handle over the same
 * storage and version counter, remembering its root base (for CopySlices)
 * and recording the view's backward when the input requires grad. */
#include "ops_internal.h"

tn_tensor *tn__make_view(tn_tensor *a, int ndim, const int64_t *shape, const int64_t *stride,
                         int64_t offset, const tn_fn_info *fn, tn_node **node_out) {
    if (node_out) *node_out = NULL;
    tn_tensor *v = tn__alias(a, ndim, shape, stride, offset);
    if (!v) return NULL;
    v->view_base = tn__retain(a->view_base ? a->view_base : a);
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
