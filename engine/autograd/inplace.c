/* In-place ops and autograd: PyTorch's leaf/view rules, history rebase, and
 * CopySlices for in-place writes through a view.
 *
 * Writing in place into a view V of base B with a recorded op f: B's new
 * history is CopySlices(B's old history, f): its backward takes the gradient
 * of B, runs f's backward on the slice that V covers, and writes the result
 * for V's old value back into that slice. V's new history is an
 * AsStridedBackward0 node over B's new history. (Other views of B taken
 * before the write keep their old history: regenerate them after writing.)
 */
#include "../ops/ops_internal.h"

tn_status tn__check_inplace(const tn_tensor *t) {
    if (!tn__grad_enabled()) return TN_OK;
    if (t->view_base) {
        const tn_tensor *b = t->view_base;
        if (tn__requires_grad(b) && !b->ag->grad_fn)
            return tn__error(TN_ERR_AUTOGRAD, "a view of a leaf Variable that requires grad is "
                             "being used in an in-place operation.");
        return TN_OK;
    }
    if (tn__requires_grad(t) && !t->ag->grad_fn)
        return tn__error(TN_ERR_AUTOGRAD,
                         "a leaf Variable that requires grad is being used in an in-place "
                         "operation.");
    return TN_OK;
}

/* Geometry of a strided layout copied into node fields. */
static void put_geom(int64_t *nd, int64_t *off, int64_t *shape, int64_t *stride,
                     const tn_tensor *t) {
    *nd = t->ndim;
    *off = t->offset;
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    memcpy(stride, t->stride, (size_t)t->ndim * sizeof *stride);
}

/* A zero tensor laid out like the base (same strides, offset 0). */
/* Gives n its geometry record (zeroed). */
static tn_status add_geom(tn_node *n) {
    n->geom = tn__calloc_small(sizeof *n->geom);
    return n->geom ? TN_OK : tn_last_status();
}

static tn_tensor *base_layout(const tn_node *n, tn_dtype dt, tn_device dev) {
    int nd = (int)n->geom->base_ndim;
    int64_t extent = 1;
    for (int i = 0; i < nd; i++)
        if (n->geom->base_shape[i] == 0) extent = 0;
    for (int i = 0; i < nd && extent; i++)
        extent += (n->geom->base_shape[i] - 1) * n->geom->base_stride[i];
    tn_tensor *flat = tn__zeros_on(1, &extent, dt, dev);
    if (!flat) return NULL;
    tn_tensor *res = tn__alias(flat, nd, n->geom->base_shape, n->geom->base_stride, 0);
    tn_release(flat);
    return res;
}

static const tn_fn_info as_strided_fn;

/* The part of `res` (laid out like the base) that the view covers, as a
 * tracked view so that writes into it are differentiable (create_graph). */
static tn_tensor *view_of(const tn_node *n, tn_tensor *res) {
    tn_node *vn;
    const tn_view_geom *g = n->geom;
    tn_tensor *v = tn__make_view(res, (int)g->view_ndim, g->view_shape, g->view_stride,
                                 g->view_offset - g->base_offset, &as_strided_fn, &vn);
    if (vn) {
        if (add_geom(vn) < 0) {
            tn_release(v);
            return NULL;
        }
        *vn->geom = *n->geom;
        vn->geom->view_offset -= n->geom->base_offset; /* relative to res, whose offset is 0 */
        vn->geom->base_offset = 0;
    }
    return v;
}

/* Gradient of the base from the gradient g of the view alone. Built from
 * public ops, so it is itself differentiable. */
static tn_status as_strided_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *res = base_layout(n, go[0]->dtype, tn__dev(go[0])), *v = res ? view_of(n, res) : NULL;
    tn_status st = v ? tn_copy_(v, go[0]) : tn_last_status();
    tn_release(v);
    if (st < 0) tn_release(res);
    else gi[0] = res;
    return st;
}

/* grad of the base: g, except that the slice the view covers is replaced by
 * the inner op's gradient for the view's old value. */
static tn_status copy_slices_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_node *f = n->inner;
    tn_tensor *fin[8] = {0}, *g0 = NULL, *gslice = NULL, *v = NULL;
    tn_tensor *res = base_layout(n, go[0]->dtype, tn__dev(go[0]));
    tn_status st = res ? tn_copy_(res, go[0]) : tn_last_status();
    if (st == TN_OK && !(v = view_of(n, res))) st = tn_last_status();
    if (st == TN_OK && !(gslice = tn_clone(v))) st = tn_last_status();
    if (st == TN_OK) st = f->fn->backward(f, &gslice, fin);
    if (st == TN_OK) { /* the view's old value gets fin[0]; zero if none */
        if (fin[0]) g0 = tn__sum_to(fin[0], f->in_meta[0].ndim, f->in_meta[0].shape, v->dtype);
        else g0 = tn__zeros_like(v);
        st = g0 ? tn_copy_(v, g0) : tn_last_status();
    }
    for (int i = 1; i < f->n_in; i++) {
        if (st == TN_OK) gi[i] = fin[i];
        else tn_release(fin[i]);
    }
    tn_release(fin[0]);
    tn_release(g0);
    tn_release(gslice);
    tn_release(v);
    if (st < 0) tn_release(res);
    else gi[0] = res;
    return st;
}

static const tn_fn_info as_strided_fn = {"AsStridedBackward0", as_strided_bw};
static const tn_fn_info copy_slices_fn = {"CopySlices", copy_slices_bw};

static tn_status rebase_view(tn_tensor *self, tn_node *f) {
    tn_tensor *base = self->view_base;
    /* CopySlices: input 0 = base's old history, inputs 1.. = f's others. */
    const tn_tensor *ins[8] = {base};
    if (f->n_in > 8) {
        tn__node_release(f);
        return tn__error(TN_ERR_INTERNAL, "in-place op on a view with more than 8 inputs");
    }
    tn_node *cs = tn__node_new(&copy_slices_fn, f->n_in, ins, 0, 1);
    /* f's backward runs inside CopySlices' (8 gradient slots there) */
    if (!cs) {
        tn__node_release(f);
        return tn_last_status();
    }
    for (int i = 1; i < f->n_in; i++) { /* share f's edges to the other inputs */
        cs->edges[i] = f->edges[i];
        if (cs->edges[i].node) tn__node_retain(cs->edges[i].node);
        tn__cell_weak_retain(cs->edges[i].cell);
        cs->in_meta[i] = f->in_meta[i];
    }
    cs->inner = f; /* takes f's reference */
    if (add_geom(cs) < 0) {
        tn__node_release(cs); /* releases f too (cs->inner) */
        return tn_last_status();
    }
    tn_view_geom *g = cs->geom;
    put_geom(&g->view_ndim, &g->view_offset, g->view_shape, g->view_stride, self);
    put_geom(&g->base_ndim, &g->base_offset, g->base_shape, g->base_stride, base);
    tn_status st = tn__node_set_output(cs, base, 0);
    tn_node *as = st == TN_OK ? tn__node_new(&as_strided_fn, 1, ins, 0, 1) : NULL;
    if (as) {
        st = add_geom(as);
        if (st == TN_OK) {
            *as->geom = *cs->geom; /* same geometry */
            st = tn__node_set_output(as, self, 0);
        }
    } else if (st == TN_OK) {
        st = tn_last_status();
    }
    tn__node_release(as);
    tn__node_release(cs);
    return st;
}

tn_status tn__inplace_rebase(tn_tensor *self, tn_node *n) {
    if (!self->view_base) {
        tn_status st = tn__node_set_output(n, self, 0);
        tn__node_release(n);
        return st;
    }
    return rebase_view(self, n);
}
