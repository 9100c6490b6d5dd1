/* Reductions: sum, mean, max, min over the whole tensor or one dim (max and
 * min along a dim with their indices too), argmax, argmin, with their
 * backward. The kernels run through tn__dev_reduce
 * (engine/core/reduce.c; the CPU's is engine/cpu/reduce_kernels.c).
 * Node layout: input {a}; parameters reduce_params; saved {0: a (whole
 * max/min) or the indices (max_dim, min_dim), 1: the result (whole max/min)}. */
#include <math.h>
#include <stdlib.h>

#include "autocast.h"
#include "pointwise_driver.h"

typedef struct reduce_params {
    int64_t dim; /* -1: the whole tensor */
    bool keepdim;
    double div; /* mean: the number of elements reduced */
} reduce_params;
TN_NODE_PARAMS(reduce_params, reduce_p)

/* ---- backward ---------------------------------------------------------------------- */

/* g broadcast to the input's shape: unsqueezed at dim first when the
 * reduction dropped it. Public ops, so create_graph records them. */
static tn_tensor *expand_to_input(tn_node *n, tn_tensor *g) {
    const tn_input_meta *m = &n->in_meta[0];
    const reduce_params *p = reduce_p(n);
    int dim = (int)p->dim;
    tn_tensor *gk = dim >= 0 && !p->keepdim && m->ndim > 0 ? tn_unsqueeze(g, dim) : tn__retain(g);
    if (!gk) return NULL;
    tn_tensor *e = tn_expand(gk, m->ndim, m->shape);
    tn_release(gk);
    return e;
}

static tn_status sum_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    TN_TRY(gi[0] = expand_to_input(n, go[0]));
    return TN_OK;
}

static tn_status mean_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *g = tn_div_scalar(go[0], reduce_p(n)->div);
    TN_TRY(g);
    gi[0] = expand_to_input(n, g);
    tn_release(g);
    return gi[0] ? TN_OK : tn_last_status();
}

/* Whole max/min (torch's evenly_distribute_backward): the gradient is shared
 * equally by every element equal to the result (every NaN if it is NaN). */
static tn_status extreme_all_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *x = tn__node_unpack(n, 0), *r = x ? tn__node_unpack(n, 1) : NULL;
    tn_tensor *other = NULL, *cnt = NULL, *share = NULL;
    double rv = 0, nother = 0;
    tn_status st = r ? tn_item(r, &rv) : tn_last_status();
    if (st == TN_OK) /* other: elements that get nothing */
        st = (other = isnan(rv) ? tn_eq(x, x) : tn_ne(x, r)) ? TN_OK : tn_last_status();
    if (st == TN_OK && (!(cnt = tn_sum(other)) || (st = tn_item(cnt, &nother)) < 0))
        st = tn_last_status();
    if (st == TN_OK && !(share = tn_div_scalar(go[0], (double)tn_numel(x) - nother)))
        st = tn_last_status();
    if (st == TN_OK && !(gi[0] = tn__masked_zero(share, other))) st = tn_last_status();
    tn_release(x);
    tn_release(r);
    tn_release(other);
    tn_release(cnt);
    tn_release(share);
    return st;
}

/* mask (bool, input shape): false only at the selected index of each slice
 * along dim. idx is the forward's own contiguous int64 output: one index per
 * slice, row-major over the other dims. */
static tn_tensor *unselected_mask_host(const tn_input_meta *m, int dim, const tn_tensor *idx) {
    tn_tensor *mask = tn__full(m->ndim, m->shape, TN_BOOL, 1);
    if (!mask) return NULL;
    // mask is (O, R, I), idx is (O, I)
    int64_t R = m->ndim ? m->shape[dim] : 1, O = tn__numel(dim, m->shape),
            I = m->ndim ? tn__numel(m->ndim - dim - 1, m->shape + dim + 1) : 1;
    if (O == 0 || I == 0) return mask; /* empty: no slice (the other may saturate) */
    uint8_t *mk = (uint8_t *)tn__ptr(mask);
    const int64_t *ix = (const int64_t *)tn__ptr(idx);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            mk[(o * R + ix[o * I + i]) * I + i] = 0;
    return mask;
}

/* Built on the host (a scatter of one index per slice), then moved to the
 * input's device. */
static tn_tensor *unselected_mask(const tn_input_meta *m, int dim, const tn_tensor *idx) {
    if (tn__on_cpu(idx)) return unselected_mask_host(m, dim, idx);
    tn_tensor *ih = tn__copy_to_device(idx, TN_I64, TN_DEVICE_CPU);
    tn_tensor *mh = ih ? unselected_mask_host(m, dim, ih) : NULL;
    tn_tensor *md = mh ? tn__on_device(mh, tn__dev(idx)) : NULL;
    tn_release(ih);
    tn_release(mh);
    return md;
}

/* max_dim, min_dim: the gradient goes to the first extremum of each slice
 * (value_selecting_reduction_backward). */
static tn_status extreme_dim_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *idx = tn__node_unpack(n, 0);
    TN_TRY(idx);
    const tn_input_meta *m = &n->in_meta[0];
    const reduce_params *p = reduce_p(n);
    tn_tensor *other = unselected_mask(m, (int)p->dim, idx);
    tn_release(idx);
    TN_TRY(other);
    tn_tensor *gk =
        !p->keepdim && m->ndim > 0 ? tn_unsqueeze(go[0], (int)p->dim) : tn__retain(go[0]);
    gi[0] = gk ? tn__masked_zero(gk, other) : NULL;
    tn_release(gk);
    tn_release(other);
    return gi[0] ? TN_OK : tn_last_status();
}

static const tn_fn_info sum_fn = {"SumBackward0", sum_bw};
static const tn_fn_info sum_dim_fn = {"SumBackward1", sum_bw};
static const tn_fn_info mean_fn = {"MeanBackward0", mean_bw};
static const tn_fn_info mean_dim_fn = {"MeanBackward1", mean_bw};
static const tn_fn_info max_fn = {"MaxBackward1", extreme_all_bw};
static const tn_fn_info min_fn = {"MinBackward1", extreme_all_bw};
static const tn_fn_info max_dim_fn = {"MaxBackward0", extreme_dim_bw};
static const tn_fn_info min_dim_fn = {"MinBackward0", extreme_dim_bw};

/* ---- forward ----------------------------------------------------------------------- */

typedef struct reduction {
    const char *name; /* PyTorch's op name in messages */
    tn_red_op op;
    bool mean, want_vals, want_idx;
    const tn_fn_info *grad;
} reduction;

static const reduction r_sum = {"sum", TN_RED_SUM, false, true, false, &sum_fn};
static const reduction r_sum_dim = {"sum", TN_RED_SUM, false, true, false, &sum_dim_fn};
static const reduction r_mean = {"mean", TN_RED_SUM, true, true, false, &mean_fn};
static const reduction r_mean_dim = {"mean", TN_RED_SUM, true, true, false, &mean_dim_fn};
static const reduction r_max = {"max", TN_RED_MAX, false, true, false, &max_fn};
static const reduction r_min = {"min", TN_RED_MIN, false, true, false, &min_fn};
static const reduction r_max_dim = {"max", TN_RED_MAX, false, true, false, &max_dim_fn};
static const reduction r_min_dim = {"min", TN_RED_MIN, false, true, false, &min_dim_fn};
static const reduction r_argmax = {"argmax", TN_RED_MAX, false, false, true, NULL};
static const reduction r_argmin = {"argmin", TN_RED_MIN, false, false, true, NULL};

static tn_status check_dtype(const reduction *r, const tn_tensor *a) {
    if (r->mean && !tn__is_float(a->dtype))
        return tn__error(TN_ERR_DTYPE,
                         "mean(): could not infer output dtype. Input dtype must be either a "
                         "floating point or complex dtype. Got: %s",
                         tn_dtype_name(a->dtype));
    if (r->want_idx && a->dtype == TN_BOOL)
        return tn__error(TN_ERR_DTYPE, "\"%s_cpu\" not implemented for '%s'", r->name,
                         tn_dtype_name(a->dtype));
    return TN_OK;
}

/* PyTorch's checks for max/min/argmax of empty inputs (dim < 0: whole). */
static tn_status check_empty(const reduction *r, const tn_tensor *a, int dim) {
    if (r->op == TN_RED_SUM || tn__numel(a->ndim, a->shape) != 0) return TN_OK;
    if (dim >= 0 && a->shape[dim] != 0) return TN_OK;
    if (dim >= 0)
        return tn__error(TN_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.",
                         r->name, dim);
    if (r->want_idx)
        return tn__error(TN_ERR_INDEX,
                         "%s(): Expected reduction dim to be specified for input.numel() == 0.",
                         r->name);
    return tn__error(TN_ERR_SHAPE,
                     "%s(): Expected reduction dim to be specified for input.numel() == 0. "
                     "Specify the reduction dim with the 'dim' argument.",
                     r->name);
}

/* Result shape: dim dropped (or kept with size 1); whole (dim < 0): 0-dim. */
static int result_shape(const tn_tensor *a, int dim, bool keepdim, int64_t *shape) {
    if (dim < 0 || a->ndim == 0) return 0;
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (d != dim)
            shape[nd++] = a->shape[d];
        else if (keepdim)
            shape[nd++] = 1;
    }
    return nd;
}

static tn_status record(const reduction *r, tn_tensor *out, const tn_tensor *a, int dim,
                        bool keepdim, double div, const tn_tensor *idx) {
    /* a node with saved slots counts as saving tensors (second-backward
     * error), so sum/mean declare none */
    bool whole_ext = r->op != TN_RED_SUM && dim < 0;
    tn_node *n = tn__node_new(r->grad, 1, &a, whole_ext ? 2 : idx ? 1 : 0, 1);
    if (!n) return tn_last_status();
    *reduce_p(n) = (reduce_params){.dim = dim, .keepdim = keepdim, .div = div};
    tn_status st = tn__node_set_output(n, out, 0);
    if (st == TN_OK && whole_ext) {
        st = tn__node_save(n, 0, a, false);
        if (st == TN_OK) st = tn__node_save(n, 1, out, true);
    } else if (st == TN_OK && idx) {
        st = tn__node_save(n, 0, idx, false);
    }
    tn__node_release(n);
    return st;
}

/* Divisor of the mean: the number of elements reduced. */
static double mean_div(const tn_tensor *a, int dim) {
    if (dim < 0) return (double)tn__numel(a->ndim, a->shape);
    return a->ndim ? (double)a->shape[dim] : 1;
}

/* The dim along which a has the smallest stride (of those longer than 1). */
static int innermost_dim(const tn_tensor *a) {
    int best = 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1 &&
            (a->shape[best] <= 1 || llabs(a->stride[d]) < llabs(a->stride[best])))
            best = d;
    return best;
}

/* Whole reduction of a strided tensor without a (cache-hostile) contiguous
 * copy: over its innermost dim in memory, then over those partial results.
 * The value of max/min does not depend on the order; argmax does, so it
 * reads a contiguous copy instead. */
static tn_status reduce_strided(const reduction *r, const tn_tensor *a, tn_tensor *vals,
                                double div) {
    if (r->want_idx) {
        tn_tensor *c = tn__copy_as(a, a->dtype);
        if (!c) return tn_last_status();
        tn_status st = tn__dev_reduce(r->op, c, -1, NULL, vals, div);
        tn_release(c);
        return st;
    }
    int d = innermost_dim(a);
    int64_t n = tn__numel(a->ndim, a->shape) / a->shape[d];
    tn_tensor *part = tn__empty_on(1, &n, vals->dtype, tn__dev(a));
    if (!part) return tn_last_status();
    tn_status st = tn__dev_reduce(r->op, a, d, part, NULL, 1);
    if (st == TN_OK) st = tn__dev_reduce(r->op, part, -1, vals, NULL, div);
    tn_release(part);
    return st;
}

/* Runs the kernel into new outputs (the values and/or the indices). */
static tn_status compute(const reduction *r, const tn_tensor *a, int dim, int nd,
                         const int64_t *shape, bool need_idx, tn_tensor **vals, tn_tensor **idx) {
    tn_dtype vdt = r->op == TN_RED_SUM && !tn__is_float(a->dtype) ? TN_I64 : a->dtype;
    if (r->want_vals && !(*vals = tn__empty_on(nd, shape, vdt, tn__dev(a))))
        return tn_last_status();
    if (need_idx && !(*idx = tn__empty_on(nd, shape, TN_I64, tn__dev(a)))) return tn_last_status();
    double div = r->mean ? mean_div(a, dim) : 1;
    if (dim < 0 && tn__numel(a->ndim, a->shape) > 0 && !tn__is_contiguous(a))
        return reduce_strided(r, a, r->want_vals ? *vals : *idx, div);
    return tn__dev_reduce(r->op, a, dim, *vals, *idx, div);
}

/* The common path of every reduction; whole: over all elements (dim is
 * ignored). Returns the values, or the indices for argmax/argmin; indices
 * (max_dim, min_dim; may be NULL) receives the indices beside the values. */
static tn_tensor *reduce_ex(const char *api, const reduction *r, const tn_tensor *a, bool whole,
                            int dim, bool keepdim, tn_tensor **indices) {
    if (indices) *indices = NULL;
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG_IN(api, a, "self");
    if (whole)
        dim = -1;
    else if ((dim = tn__wrap_dim(dim, a->ndim)) < 0)
        return NULL;
    if (check_dtype(r, a) < 0 || check_empty(r, a, dim) < 0) return NULL;
    int64_t shape[TN_MAX_DIMS];
    int nd = result_shape(a, dim, keepdim, shape);
    bool grad = r->grad && tn__needs_grad(1, &a);
    /* max_dim's backward needs the indices */
    bool need_idx = r->want_idx || indices || (grad && !whole && r->op != TN_RED_SUM);
    tn_tensor *vals = NULL, *idx = NULL;
    tn_status st = compute(r, a, dim, nd, shape, need_idx, &vals, &idx);
    if (st == TN_OK && grad)
        st = record(r, vals, a, dim, keepdim, r->mean ? mean_div(a, dim) : 1, idx);
    tn_tensor *res = r->want_vals ? vals : idx, *other = res == vals ? idx : vals;
    if (st < 0 || !indices) tn_release(other);
    if (st < 0) {
        tn_release(res);
        return NULL;
    }
    tn__op_done(r->name, t0, res, 1, &a);
    if (!indices) return tn__ret(res);
    if (!(res = tn__ret(res))) { /* the scope could not take it */
        tn_release(other);
        return NULL;
    }
    *indices = tn__ret(other);
    return *indices ? res : NULL; /* res: the scope's */
}

static tn_tensor *reduce(const char *api, const reduction *r, const tn_tensor *a, bool whole,
                         int dim, bool keepdim) {
    return reduce_ex(api, r, a, whole, dim, keepdim, NULL);
}

tn_tensor *tn_sum(const tn_tensor *a) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_SUM, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_sum(f.t[0]) : NULL);
    return reduce(__func__, &r_sum, a, true, 0, false);
}
tn_tensor *tn_mean(const tn_tensor *a) { return reduce(__func__, &r_mean, a, true, 0, false); }
tn_tensor *tn_max(const tn_tensor *a) { return reduce(__func__, &r_max, a, true, 0, false); }
tn_tensor *tn_min(const tn_tensor *a) { return reduce(__func__, &r_min, a, true, 0, false); }
tn_tensor *tn_argmax(const tn_tensor *a) { return reduce(__func__, &r_argmax, a, true, 0, false); }
tn_tensor *tn_sum_dim(const tn_tensor *a, int dim, bool keepdim) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_SUM, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_sum_dim(f.t[0], dim, keepdim) : NULL);
    return reduce(__func__, &r_sum_dim, a, false, dim, keepdim);
}
tn_tensor *tn_mean_dim(const tn_tensor *a, int dim, bool keepdim) {
    return reduce(__func__, &r_mean_dim, a, false, dim, keepdim);
}
tn_tensor *tn_max_dim(const tn_tensor *a, int dim, bool keepdim) {
    return reduce(__func__, &r_max_dim, a, false, dim, keepdim);
}
tn_tensor *tn_argmax_dim(const tn_tensor *a, int dim, bool keepdim) {
    return reduce(__func__, &r_argmax, a, false, dim, keepdim);
}
tn_tensor *tn_min_dim(const tn_tensor *a, int dim, bool keepdim) {
    return reduce(__func__, &r_min_dim, a, false, dim, keepdim);
}
tn_tensor *tn_max_dim_with_indices(const tn_tensor *a, int dim, bool keepdim,
                                   tn_tensor **indices) {
    TN_CHECK_NULL_PTR(indices, "indices");
    return reduce_ex(__func__, &r_max_dim, a, false, dim, keepdim, indices);
}
tn_tensor *tn_min_dim_with_indices(const tn_tensor *a, int dim, bool keepdim,
                                   tn_tensor **indices) {
    TN_CHECK_NULL_PTR(indices, "indices");
    return reduce_ex(__func__, &r_min_dim, a, false, dim, keepdim, indices);
}
tn_tensor *tn_argmin(const tn_tensor *a) { return reduce(__func__, &r_argmin, a, true, 0, false); }
tn_tensor *tn_argmin_dim(const tn_tensor *a, int dim, bool keepdim) {
    return reduce(__func__, &r_argmin, a, false, dim, keepdim);
}
