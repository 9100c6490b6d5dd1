/* In-place ops and autograd: PyTorch's leaf/view rules, history rebase, and
 * CopySlices for in-place writes through a view.
 *
 * Writing in place into a view V of base B with a recorded op f: B's new
 * history is CopySlices(B's old history, f): its backward takes the gradient
 * of B, runs f's backward on the slice that V covers, and writes the result
 * for V's old value back into that slice. V's new history is an
 * AsStridedBackward0 node over B's new history. Other views of B see the
 * version move and regenerate theirs when next used (view_track.c).
 */
#include "../ops/ops_internal.h"

/* PyTorch refuses the write when it bumps the version, after the kernel
 * wrote; tenet refuses before, so that nothing is written. */
static tn_status check_inference_write(const tn_tensor *t) {
    if (TN_LIKELY(!tn__is_inference(t) || tn__inference_on)) return TN_OK;
    return tn__error(TN_ERR_AUTOGRAD,
                     "Inplace update to inference tensor outside InferenceMode is not allowed.You "
                     "can make a clone to get a normal tensor before doing inplace update.See "
                     "https://github.com/pytorch/rfcs/pull/17 for more details.");
}

tn_status tn__check_inplace(const tn_tensor *t, const tn_tensor *src) {
    if (!tn__grad_enabled()) return check_inference_write(t);
    if (t->view_base && t->view_mode != TN_VIEW_GRAD &&
        (tn__requires_grad(t) || tn__requires_grad(src)))
        return tn__no_grad_view_error(t, false);
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
    return check_inference_write(t);
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
static tn_tensor *view_of_geom(const tn_view_geom *g, tn_tensor *res) {
    tn_node *vn;
    tn_tensor *v = tn__make_view(res, (int)g->view_ndim, g->view_shape, g->view_stride,
                                 g->view_offset - g->base_offset, &as_strided_fn, &vn);
    if (vn) {
        if (add_geom(vn) < 0) {
            tn_release(v);
            return NULL;
        }
        *vn->geom = *g;
        vn->geom->view_offset -= g->base_offset; /* relative to res, whose offset is 0 */
        vn->geom->base_offset = 0;
    }
    return v;
}

static tn_tensor *view_of(const tn_node *n, tn_tensor *res) { return view_of_geom(n->geom, res); }

/* Gradient of the base from the gradient g of the view alone. Built from
 * public ops, so it is itself differentiable. */
static tn_status as_strided_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    /* An expanded view repeats base elements along its stride-0 dims: their
     * gradients add up (summed first, then written once per element). */
    tn_view_geom g = *n->geom;
    bool repeats = false;
    for (int i = 0; i < g.view_ndim; i++)
        if (g.view_stride[i] == 0 && g.view_shape[i] > 1) {
            g.view_shape[i] = 1;
            repeats = true;
        }
    tn_tensor *gv = repeats ? tn__sum_to(go[0], (int)g.view_ndim, g.view_shape, go[0]->dtype)
                            : tn__retain(go[0]);
    if (!gv) return tn_last_status();
    tn_tensor *res = base_layout(n, go[0]->dtype, tn__dev(go[0]));
    tn_tensor *v = res ? view_of_geom(&g, res) : NULL;
    tn_status st = v ? tn_copy_(v, gv) : tn_last_status();
    tn_release(gv);
    tn_release(v);
    if (st < 0) tn_release(res);
    else gi[0] = res;
    return st;
}

/* grad of the base: g, except that the slice the view covers is replaced by
 * the inner op's gradient for the view's old value. */
/* The CopySlices running its wrapped node's backward on this thread: a
 * create_graph unpack of that node's saved output (the view, written in
 * place) then gives it the view's history after the write, as PyTorch's
 * saved output of an in-place op on a view, not the wrapped node itself
 * (which only ever runs inside CopySlices). */
static _Thread_local tn_node *tls_copy_slices;

tn_node *tn__copy_slices_running(const tn_node *inner) {
    return tls_copy_slices && tls_copy_slices->inner == inner ? tls_copy_slices : NULL;
}

static tn_status copy_slices_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_node *f = n->inner;
    tn_tensor *fin[8] = {0}, *g0 = NULL, *gslice = NULL, *v = NULL;
    tn_tensor *res = base_layout(n, go[0]->dtype, tn__dev(go[0]));
    tn_status st = res ? tn_copy_(res, go[0]) : tn_last_status();
    if (st == TN_OK && !(v = view_of(n, res))) st = tn_last_status();
    if (st == TN_OK && !(gslice = tn_clone(v))) st = tn_last_status();
    if (st == TN_OK) {
        tn_node *outer = tls_copy_slices;
        tls_copy_slices = n;
        st = f->fn->backward(f, &gslice, fin);
        tls_copy_slices = outer;
    }
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

/* A view's AsStridedBackward0 with cs's geometry over a base described by
 * base_meta; its edge (to the base's history) is the caller's to set. */
static tn_node *as_strided_new(const tn_node *cs, const tn_input_meta *base_meta) {
    tn_node *as = tn__node_new(&as_strided_fn, 1, NULL, 0, 1);
    if (!as) return NULL;
    as->in_meta[0] = *base_meta;
    if (add_geom(as) < 0) {
        tn__node_release(as);
        return NULL;
    }
    *as->geom = *cs->geom; /* same geometry */
    return as;
}

tn_node *tn__as_strided_node(const tn_tensor *view, const tn_tensor *base) {
    tn_node *as = tn__node_new(&as_strided_fn, 1, (const tn_tensor *[]){base}, 0, 1);
    if (!as) return NULL;
    if (add_geom(as) < 0) {
        tn__node_release(as);
        return NULL;
    }
    tn_view_geom *g = as->geom;
    put_geom(&g->view_ndim, &g->view_offset, g->view_shape, g->view_stride, view);
    put_geom(&g->base_ndim, &g->base_offset, g->base_shape, g->base_stride, base);
    return as;
}

tn_status tn__view_history_after_write(tn_node *cs, tn_tensor *r) {
    tn_node *as = as_strided_new(cs, &cs->out_meta[0]);
    if (!as) return tn_last_status();
    as->edges[0] = (tn_edge){.node = cs, .input_nr = 0};
    tn__node_retain(cs);
    tn_status st = tn__node_set_output(as, r, 0);
    tn__node_release(as);
    return st;
}

/* Writing into a view: CopySlices over the base wrapping f, and the view's
 * AsStridedBackward0, whose edge to CopySlices is set at commit (the base's
 * history is still the old one now). */
static tn_status prepare_view(tn_tensor *self, tn_node *f, tn_rebase *rb) {
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
    rb->cs = cs;   /* released with it from here on */
    if (add_geom(cs) < 0) return tn_last_status();
    tn_view_geom *g = cs->geom;
    put_geom(&g->view_ndim, &g->view_offset, g->view_shape, g->view_stride, self);
    put_geom(&g->base_ndim, &g->base_offset, g->base_shape, g->base_stride, base);
    tn_input_meta m = {.ndim = base->ndim, .dtype = base->dtype, .device = tn__dev(base)};
    memcpy(m.shape, base->shape, (size_t)base->ndim * sizeof *m.shape);
    if (!(rb->as = as_strided_new(cs, &m))) return tn_last_status();
    if (!tn__meta_get_or_create(base) || !tn__meta_get_or_create(self)) return tn_last_status();
    return TN_OK;
}

tn_status tn__inplace_prepare_rebase(tn_tensor *self, tn_node *n, tn_rebase *rb) {
    *rb = (tn_rebase){0};
    if (!n) return TN_OK;
    tn_status st;
    if (self->view_base) {
        st = prepare_view(self, n, rb);
    } else {
        rb->n = n;
        st = tn__meta_get_or_create(self) ? TN_OK : tn_last_status();
    }
    if (st < 0) tn__inplace_abandon(rb);
    return st;
}

void tn__inplace_abandon(tn_rebase *rb) {
    tn__node_release(rb->as);
    tn__node_release(rb->cs); /* releases the wrapped node too */
    tn__node_release(rb->n);
    *rb = (tn_rebase){0};
}

tn_status tn__inplace_commit(tn_tensor *self, tn_rebase *rb, const char *op) {
    tn__version_bump(self, op);
    tn_status st = TN_OK;
    if (rb->n) {
        st = tn__node_set_output(rb->n, self, 0);
    } else if (rb->cs) {
        st = tn__node_set_output(rb->cs, self->view_base, 0);
        /* the view's history continues from the base's new one */
        rb->as->edges[0] = (tn_edge){.node = rb->cs, .input_nr = 0};
        tn__node_retain(rb->cs);
        if (st == TN_OK) st = tn__node_set_output(rb->as, self, 0);
        if (st == TN_OK) tn__view_mark_current(self); /* the others follow when used */
    }
    tn__inplace_abandon(rb); /* drops our references: the tensors hold theirs */
    return st;
}
