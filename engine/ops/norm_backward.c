/* The backward of the fused normalisations (layer_norm.c, channel_norm.c): one dispatcher for
 * their nodes, which save {0: x, 1: weight (optional)}. */
#include "pointwise_driver.h" /* TN_TRY */

tn_status tn__norm_backward(tn_node *n, tn_tensor *g, tn_tensor **gi, tn_norm_bw_fn graph,
                            tn_norm_bw_fn fused) {
    tn_tensor *x = tn__node_unpack(n, 0), *w = NULL;
    TN_TRY(x);
    tn_status st = TN_OK;
    if (n->saved[1].defined && !(w = tn__node_unpack(n, 1))) st = tn_last_status();
    if (st == TN_OK && tn__grad_enabled())
        st = graph(n, x, w, g, gi);
    else if (st == TN_OK) {
        /* x was saved as given; the kernels read it contiguous */
        tn_tensor *xc = tn__contiguous_on(x, tn__dev(x)), *wc = NULL;
        if (!xc || (w && !(wc = tn__contiguous_on(w, tn__dev(x))))) st = tn_last_status();
        if (st == TN_OK) st = fused(n, xc, wc, g, gi);
        tn_release(xc);
        tn_release(wc);
    }
    tn_release(x);
    tn_release(w);
    return st;
}

tn_status tn__norm_bw_begin(tn_node *n, const tn_tensor *x, tn_tensor *g, tn_tensor **gi,
                            tn_norm_bw_ops *o) {
    o->mean = tn__node_unpack(n, 2);
    o->rstd = o->mean ? tn__node_unpack(n, 3) : NULL;
    o->g = o->rstd ? tn__contiguous_on(g, tn__dev(x)) : NULL;
    tn_status st = o->g ? TN_OK : tn_last_status();
    bool empty = tn_numel(x) == 0; /* nothing runs: the parameters' gradients are zeros */
    for (int k = 0; k < 3 && st == TN_OK; k++) {
        if (!tn__edge_valid(&n->edges[k])) continue;
        const tn_input_meta *pm = &n->in_meta[k];
        gi[k] = (empty ? tn__zeros_on : tn__empty_on)(pm->ndim, pm->shape, pm->dtype, tn__dev(x));
        if (!gi[k]) st = tn_last_status();
    }
    return st;
}

void tn__norm_bw_end(tn_norm_bw_ops *o) {
    tn_release(o->mean);
    tn_release(o->rstd);
    tn_release(o->g);
}
