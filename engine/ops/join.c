/* Joining tensors: cat and stack, forward and backward.
 *
 * Both allocate the result (dtype promoted across the inputs, as PyTorch) and
 * copy each input into its slice of it. Node layout: inputs = the list (their
 * shapes in in_meta give each slice's extent); parameters join_params. */
#include <stdio.h>

#include "autocast.h"
#include "pointwise_driver.h"

typedef struct join_params {
    int64_t dim; /* wrapped */
} join_params;
TN_NODE_PARAMS(join_params, join_p)

/* PyTorch's legacy rule: 1-d empty tensors are ignored by cat, whatever
 * the other inputs' rank. */
static bool cat_skipped(int ndim, const int64_t *shape) { return ndim == 1 && shape[0] == 0; }

/* ---- backward ------------------------------------------------------------------------- */

/* Each input gets its slice of g along dim (ignored inputs: an empty gradient). */
static tn_status cat_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    int d = (int)join_p(n)->dim;
    int64_t off = 0;
    for (int k = 0; k < n->n_in; k++) {
        const tn_input_meta *m = &n->in_meta[k];
        bool skip = cat_skipped(m->ndim, m->shape);
        int64_t len = skip ? 0 : m->shape[d];
        if (tn__edge_valid(&n->edges[k]))
            TN_TRY(gi[k] =
                       skip ? tn__zeros_on(1, m->shape, go[0]->dtype, tn__dev(go[0])) : tn_narrow(go[0], d, off, len));
        off += len;
    }
    return TN_OK;
}

static tn_status stack_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    for (int k = 0; k < n->n_in; k++)
        if (tn__edge_valid(&n->edges[k])) TN_TRY(gi[k] = tn_select(go[0], (int)join_p(n)->dim, k));
    return TN_OK;
}

static const tn_fn_info cat_fn = {"CatBackward0", cat_bw};
static const tn_fn_info stack_fn = {"StackBackward0", stack_bw};

/* ---- shared forward steps -------------------------------------------------------------- */

/* NULL checks on the list; promoted dtype of all of it. */
static tn_status check_list(const char *op, int n, tn_tensor *const *ts, tn_dtype *dt) {
    if (n > 0 && !ts)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'tensors' is NULL", op);
    for (int k = 0; k < n; k++) {
        if (!ts[k])
            return tn__null_arg(true, "%s: tensor %d of the list is NULL", op, k);
        if (!tn__same_device(tn__dev(ts[k]), tn__dev(ts[0])))
            return tn__error(TN_ERR_DEVICE,
                             "Expected all tensors to be on the same device, but "
                             "found at least two devices (tensor 0 and tensor %d)",
                             k);
        *dt = k ? tn__promote_types(*dt, ts[k]->dtype) : ts[0]->dtype;
    }
    return TN_OK;
}

/* Copies src into the part of out at `pos` along dim d: a slice of `len`
 * (select: len < 0, the dim is dropped). */
static tn_status place(tn_tensor *out, int d, int64_t pos, int64_t len, const tn_tensor *src) {
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < out->ndim; i++) {
        if (i == d && len < 0) continue;
        sh[nd] = i == d ? len : out->shape[i];
        st[nd++] = out->stride[i];
    }
    tn_tensor *slice = tn__alias(out, nd, sh, st, tn__wrap_mul(pos, out->stride[d]));
    if (!slice) return tn_last_status();
    tn_status s = tn__copy_into(slice, src);
    tn_release(slice);
    return s;
}

/* Makes out the output of fn over the list when grad is needed. */
static tn_tensor *finish(const char *op, const tn_fn_info *fn, int n, tn_tensor *const *ts, int d,
                         tn_tensor *out) {
    const tn_tensor *const *ins = (const tn_tensor *const *)ts;
    tn__anomaly_forward(op, out, n, ins); /* check_nan: a NaN passed on keeps its origin */
    if (!tn__is_float(out->dtype) || !tn__needs_grad(n, ins)) return tn__ret(out);
    tn_node *node = tn__node_new(fn, n, ins, 0, 1);
    tn_status s = node ? tn__node_set_output(node, out, 0) : tn_last_status();
    if (node) join_p(node)->dim = d;
    tn__node_release(node);
    if (s < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__ret(out);
}

/* ---- cat ------------------------------------------------------------------------------- */

/* Shape of the cat of ts along d (ref: the first input not ignored). */
static tn_status cat_shape(int n, tn_tensor *const *ts, const tn_tensor *ref, int d,
                           int64_t *shape) {
    memcpy(shape, ref->shape, (size_t)ref->ndim * sizeof *shape);
    shape[d] = 0;
    for (int k = 0; k < n; k++) {
        const tn_tensor *t = ts[k];
        if (cat_skipped(t->ndim, t->shape)) continue;
        if (t->ndim != ref->ndim)
            return tn__error(TN_ERR_SHAPE,
                             "Tensors must have same number of dimensions: got %d "
                             "and %d",
                             ref->ndim, t->ndim);
        for (int i = 0; i < t->ndim; i++)
            if (i != d && t->shape[i] != ref->shape[i])
                return tn__error(TN_ERR_SHAPE,
                                 "Sizes of tensors must match except in dimension "
                                 "%d. Expected size %lld but got size %lld for tensor number %d "
                                 "in the list.",
                                 d, (long long)ref->shape[i], (long long)t->shape[i], k);
        if (__builtin_add_overflow(shape[d], t->shape[d], &shape[d]))
            return tn__error(TN_ERR_SHAPE, "cat: the result's size overflows int64");
    }
    return TN_OK;
}

tn_tensor *tn_cat(int n, tn_tensor *const *ts, int dim) {
    tn_ac_frame f;
    if (n > 0 && ts && tn__autocast(&f, TN_AC_CAT, n, (const tn_tensor *const *)ts))
        return tn__autocast_done(&f, f.ok ? tn_cat(n, f.t, dim) : NULL);
    tn_dtype dt = TN_F32;
    if (n <= 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "torch.cat(): expected a non-empty list of Tensors");
        return NULL;
    }
    if (check_list("tn_cat", n, ts, &dt) < 0) return NULL;
    const tn_tensor *ref = NULL;
    for (int k = 0; k < n; k++) {
        if (ts[k]->ndim == 0) {
            tn__error(TN_ERR_SHAPE,
                      "zero-dimensional tensor (at position %d) cannot be concatenated", k);
            return NULL;
        }
        if (!ref && !cat_skipped(ts[k]->ndim, ts[k]->shape)) ref = ts[k];
    }
    int64_t shape[TN_MAX_DIMS] = {0};
    int d = 0, nd = 1; /* every input ignored: an empty 1-d result */
    if (ref) {
        if ((d = tn__wrap_dim(dim, ref->ndim)) < 0) return NULL;
        nd = ref->ndim;
        if (cat_shape(n, ts, ref, d, shape) < 0 || tn__check_shape(nd, shape, dt, NULL) < 0)
            return NULL;
    }
    tn_device dev = tn__dev(ts[0]); /* check_list: all on one device */
    tn_tensor *out = tn__empty_on(nd, shape, dt, dev);
    if (!out) return NULL;
    int64_t pos = 0;
    for (int k = 0; k < n && ref; k++) {
        if (cat_skipped(ts[k]->ndim, ts[k]->shape)) continue;
        if (place(out, d, pos, ts[k]->shape[d], ts[k]) < 0) {
            tn_release(out);
            return NULL;
        }
        pos += ts[k]->shape[d];
    }
    return finish("cat", &cat_fn, n, ts, d, out);
}

/* ---- stack ----------------------------------------------------------------------------- */

/* stack(ts, d) == cat of each unsqueezed at d; done in one pass. */
tn_tensor *tn_stack(int n, tn_tensor *const *ts, int dim) {
    tn_ac_frame f;
    if (n > 0 && ts && tn__autocast(&f, TN_AC_STACK, n, (const tn_tensor *const *)ts))
        return tn__autocast_done(&f, f.ok ? tn_stack(n, f.t, dim) : NULL);
    tn_dtype dt = TN_F32;
    if (n <= 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "stack expects a non-empty TensorList");
        return NULL;
    }
    if (check_list("tn_stack", n, ts, &dt) < 0) return NULL;
    const tn_tensor *t0 = ts[0];
    int d = tn__wrap_dim(dim, t0->ndim + 1);
    if (d < 0) return NULL;
    for (int k = 1; k < n; k++) {
        if (tn__same_shape(ts[k], t0)) continue;
        char a[192], b[192];
        tn__format_shape(a, sizeof a, t0->ndim, t0->shape);
        tn__format_shape(b, sizeof b, ts[k]->ndim, ts[k]->shape);
        tn__error(TN_ERR_SHAPE,
                  "stack expects each tensor to be equal size, but got %s at entry "
                  "0 and %s at entry %d",
                  a, b, k);
        return NULL;
    }
    if (t0->ndim == TN_MAX_DIMS) {
        tn__error(TN_ERR_SHAPE, "stack: the result would have more than %d dimensions",
                  TN_MAX_DIMS);
        return NULL;
    }
    int64_t shape[TN_MAX_DIMS];
    for (int i = 0, j = 0; i <= t0->ndim; i++)
        shape[i] = i == d ? n : t0->shape[j++];
    if (tn__check_shape(t0->ndim + 1, shape, dt, NULL) < 0) return NULL;
    tn_device dev = tn__dev(ts[0]); /* check_list: all on one device */
    tn_tensor *out = tn__empty_on(t0->ndim + 1, shape, dt, dev);
    if (!out) return NULL;
    for (int k = 0; k < n; k++) {
        if (place(out, d, k, -1, ts[k]) < 0) {
            tn_release(out);
            return NULL;
        }
    }
    return finish("stack", &stack_fn, n, ts, d, out);
}
