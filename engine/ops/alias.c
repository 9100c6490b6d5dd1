/* Aliases and copies (docs/semantics.md §1): detach, detach_, .data, clone,
 * copy_, dtype conversion. */
#include "pointwise_driver.h"

tn_tensor *tn_detach(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "self");
    return tn__ret(tn__detached_alias(t)); /* shares storage AND version counter */
}

tn_tensor *tn_detach_(tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "self");
    if (t->view_base) {
        tn__error(TN_ERR_AUTOGRAD, "Can't detach views in-place. Use detach() instead.");
        return NULL;
    }
    if (t->ag) {
        tn__node_release(t->ag->grad_fn);
        t->ag->grad_fn = NULL;
        t->ag->output_nr = 0;
        t->ag->requires_grad = false;
        t->ag->retains_grad = false;
    }
    return t;
}

tn_tensor *tn_data(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "self");
    tn_tensor *d = tn__detached_alias(t);
    if (!d) return NULL;
    if (tn__is_inference(t)) return tn__ret(d); /* no counter to renew */
    tn_version_block *v = tn__version_new(); /* .data: a fresh counter at 0 */
    if (!v) {
        tn_release(d);
        return NULL;
    }
    tn__version_release(d->version);
    d->version = v;
    return tn__ret(d);
}

static tn_status pass_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    gi[0] = tn__retain(go[0]);
    return TN_OK;
}
static const tn_fn_info clone_fn = {"CloneBackward0", pass_bw};
/* The gradient goes back to the source's device (the engine converts the
 * dtype); recorded itself under create_graph. */
static tn_status to_copy_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    const tn_input_meta *m = &n->in_meta[0];
    if (tn__same_device(tn__dev(go[0]), m->device)) {
        gi[0] = tn__retain(go[0]);
        return TN_OK;
    }
    gi[0] = tn_to(go[0], TN_DTYPE_SAME, m->device);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info to_copy_fn = {"ToCopyBackward0", to_copy_bw};

/* out = copy of src (dtype dt, on dev) recorded with fn when src requires
 * grad. */
static tn_tensor *copy_recorded(const tn_tensor *src, tn_dtype dt, tn_device dev,
                                const tn_fn_info *fn) {
    tn_tensor *out = tn__copy_to_device(src, dt, dev);
    /* check_nan: a NaN copied keeps its origin */
    tn__anomaly_forward(fn == &clone_fn ? "clone" : "to", out, 1, &src);
    if (!out || !tn__is_float(dt) || !tn__needs_grad(1, &src)) return out;
    tn_node *n = tn__node_new(fn, 1, &src, 0, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    tn__node_release(n);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

tn_tensor *tn_clone(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "self");
    return tn__ret(copy_recorded(t, t->dtype, tn__dev(t), &clone_fn));
}

tn_tensor *tn__clone_recorded(const tn_tensor *t) {
    return copy_recorded(t, t->dtype, tn__dev(t), &clone_fn);
}

tn_tensor *tn__to_dtype_autograd(const tn_tensor *src, tn_dtype dt) {
    return copy_recorded(src, dt, tn__dev(src), &to_copy_fn);
}

tn_tensor *tn__to_autograd(const tn_tensor *src, tn_dtype dt, tn_device dev) {
    return copy_recorded(src, dt, dev, &to_copy_fn);
}

/* copy_: the old value of dst gets no gradient; src gets g (summed back to
 * its shape and converted to its dtype by the engine). */
static tn_status copy_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    if (tn__edge_valid(&n->edges[0]) && !(gi[0] = tn__zeros_like(go[0])))
        return tn_last_status();
    if (tn__edge_valid(&n->edges[1])) gi[1] = tn__retain(go[0]);
    return TN_OK;
}
static const tn_fn_info copy_fn = {"CopyBackwards", copy_bw};

tn_status tn_copy_(tn_tensor *dst, const tn_tensor *src) {
    TN_CHECK_NULL_ARG_ST(dst, "self");
    TN_CHECK_NULL_ARG_ST(src, "src");
    tn_status st = tn__inplace_prepare("copy_", dst, src, dst->dtype);
    if (st < 0) return st;
    tn_tensor *tmp = NULL;
    if (src->storage == dst->storage && !(tmp = tn__copy_as(src, src->dtype)))
        return tn_last_status();
    tn_node *n = NULL;
    if (tn__needs_grad(2, (const tn_tensor *[]){dst, src}) && tn__is_float(dst->dtype)) {
        n = tn__node_new(&copy_fn, 2, (const tn_tensor *[]){dst, src}, 0, 1);
        if (!n) st = tn_last_status();
    }
    if (st < 0) tn__node_release(n);
    tn_rebase rb;
    if (st == TN_OK) st = tn__inplace_prepare_rebase(dst, n, &rb); /* consumes n */
    if (st == TN_OK) {
        st = tn__copy_into(dst, tmp ? tmp : src);
        if (st < 0) tn__inplace_abandon(&rb);
    }
    tn_release(tmp);
    return st < 0 ? st : tn__inplace_commit(dst, &rb, "copy_");
}
