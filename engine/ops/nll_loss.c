/* nll_loss with PyTorch's options (class weights, ignore_index, reduction,
 * (N, C, d1, ...) inputs) and cross_entropy on top of it (label smoothing,
 * class-probability targets); forward and backward.
 *
 * nll_loss is one node (NllLossBackward0; NllLoss2DBackward0 for inputs of
 * three or more dims, as PyTorch's nll_loss_nd), computed from public ops
 * in no-grad mode: the targets are read and checked on the host once, which
 * builds the index of each target (ignored ones point at class 0 with
 * weight 0) and the coefficients S, -weight[target] at each target's class
 * and 0 elsewhere, in the input's layout. The loss gathers the input at the
 * targets and scales it; backward is S times the (broadcast) gradient, a
 * public product, so create_graph records it. cross_entropy is
 * log_softmax followed by nll_loss, or PyTorch 1.13's compositions for label
 * smoothing and probability targets (their grad_fns: AddBackward0 /
 * NegBackward0 / DivBackward0), public ops all through.
 * Node layout: input {input}; saved {0: S}; parameters nll_params. */
#include <math.h>

#include "pointwise_driver.h"

typedef struct nll_params {
    int32_t reduction;   /* tn_reduction */
    double total_weight; /* mean: the divisor */
} nll_params;
TN_NODE_PARAMS(nll_params, nll_p)

static tn_status nll_ex_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *s = tn__node_unpack(n, 0), *g = NULL;
    TN_TRY(s);
    const nll_params *p = nll_p(n);
    if (p->reduction == TN_REDUCTION_MEAN) g = tn_div_scalar(go[0], p->total_weight);
    else if (p->reduction == TN_REDUCTION_NONE && n->in_meta[0].ndim >= 2)
        g = tn_unsqueeze(go[0], 1);
    else g = tn__retain(go[0]);
    gi[0] = g ? tn_mul(s, g) : NULL;
    tn_release(g);
    tn_release(s);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info nll_ex_fn = {"NllLossBackward0", nll_ex_bw};
static const tn_fn_info nll2d_ex_fn = {"NllLoss2DBackward0", nll_ex_bw};

static tn_status check_reduction(int reduction) {
    if (reduction < TN_REDUCTION_MEAN || reduction > TN_REDUCTION_NONE)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%d is not a valid value for reduction",
                         reduction);
    return TN_OK;
}

/* PyTorch 1.13's nll_loss_nd checks, in its order. */
static tn_status nll_check(const tn_tensor *x, const tn_tensor *t, const tn_tensor *w) {
    char a[192], b[192];
    if (x->ndim < 1)
        return tn__error(TN_ERR_SHAPE, "Expected 1 or more dimensions (got %d)", x->ndim);
    if (x->ndim != 1 && (t->ndim < 1 || x->shape[0] != t->shape[0]))
        return tn__error(TN_ERR_SHAPE,
                         "Expected input batch_size (%lld) to match target batch_size (%lld).",
                         (long long)x->shape[0], (long long)(t->ndim ? t->shape[0] : 0));
    if (!tn__is_float(x->dtype))
        return tn__error(TN_ERR_DTYPE, "\"nll_loss_out_frame\" not implemented for '%s'",
                         tn__torch_scalar_name(x->dtype));
    if (t->dtype != TN_I64)
        return tn__error(TN_ERR_DTYPE, "expected scalar type Long but found %s",
                         tn__torch_scalar_name(t->dtype));
    if (x->ndim <= 2 && t->ndim > 1)
        return tn__error(TN_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported");
    if (x->ndim == 1 && t->ndim == 1 && t->shape[0] != 1)
        return tn__error(TN_ERR_SHAPE, "size mismatch (got input: [%lld], target: [%lld])",
                         (long long)x->shape[0], (long long)t->shape[0]);
    if (x->ndim == 4 && t->ndim != 3)
        return tn__error(TN_ERR_SHAPE,
                         "only batches of spatial targets supported (3D tensors) but got targets "
                         "of dimension: %d",
                         t->ndim);
    if (x->ndim >= 3) {
        bool same = t->ndim == x->ndim - 1;
        for (int d = 1; same && d < t->ndim; d++)
            same = t->shape[d] == x->shape[d + 1];
        if (!same) {
            int64_t want[TN_MAX_DIMS];
            want[0] = x->shape[0];
            for (int d = 2; d < x->ndim; d++)
                want[d - 1] = x->shape[d];
            tn__format_shape(a, sizeof a, x->ndim - 1, want);
            tn__format_shape(b, sizeof b, t->ndim, t->shape);
            return tn__error(TN_ERR_SHAPE, "Expected target size %s, got %s", a, b);
        }
    }
    int64_t c = x->shape[x->ndim == 1 ? 0 : 1];
    if (w && (w->ndim != 1 || w->shape[0] != c)) {
        tn__format_shape(a, sizeof a, w->ndim, w->shape);
        return tn__error(TN_ERR_SHAPE,
                         "weight tensor should be defined either for all %lld classes or no "
                         "classes but got weight tensor of shape: %s",
                         (long long)c, a);
    }
    return TN_OK;
}

/* The host side: index (the gather's, t's shape with a class dim of 1), wt
 * (-weight[target], 0 when ignored, the same shape), S (x's shape) and the
 * total weight; from the targets, read and checked. */
typedef struct nll_plan {
    tn_tensor *index, *wt, *s;
    double total;
} nll_plan;

static void plan_free(nll_plan *p) {
    tn_release(p->index), tn_release(p->wt), tn_release(p->s);
}

static tn_status plan_fill(const tn_tensor *x, const int64_t *tv, const double *wv, int64_t ignore,
                           nll_plan *p) {
    int cd = x->ndim == 1 ? 0 : 1;
    int64_t c = x->shape[cd], nb = x->ndim == 1 ? 1 : x->shape[0];
    int64_t inner = tn__numel(x->ndim - cd - 1, x->shape + cd + 1);
    int64_t *ix = (int64_t *)(void *)tn__ptr(p->index);
    char *wt = tn__ptr(p->wt), *sv = tn__ptr(p->s);
    size_t es = tn__dtype_sizes[x->dtype];
    for (int64_t i = 0; i < nb * inner; i++) {
        int64_t t = tv[i];
        if (t == ignore) continue; /* index 0, weight 0 */
        if (t < 0 || t >= c)
            return tn__error(TN_ERR_INDEX, "Target %lld is out of bounds.", (long long)t);
        double w = wv ? wv[t] : 1;
        ix[i] = t;
        p->total += w;
        tn__store(wt + (size_t)i * es, x->dtype, -w);
        int64_t at = ((i / inner) * c + t) * inner + i % inner; /* (n, t, p) in x's layout */
        tn__store(sv + (size_t)at * es, x->dtype, -w);
    }
    return TN_OK;
}

/* *t moved to dev (built on the host). */
static tn_status to_device(tn_tensor **t, tn_device dev) {
    if (dev.type == TN_CPU) return TN_OK;
    tn_tensor *d = tn__on_device(*t, dev);
    tn_release(*t);
    *t = d;
    return d ? TN_OK : tn_last_status();
}

static tn_status plan_make(const tn_tensor *x, const tn_tensor *t, const tn_tensor *w,
                           int64_t ignore, nll_plan *p) {
    *p = (nll_plan){0};
    int64_t ishape[TN_MAX_DIMS], nt = tn__numel(t->ndim, t->shape);
    int ind = x->ndim;
    for (int d = 0; d < x->ndim; d++)
        ishape[d] = d == (x->ndim == 1 ? 0 : 1) ? 1 : x->shape[d];
    int64_t c = x->shape[x->ndim == 1 ? 0 : 1];
    int64_t *tv = tn__calloc((size_t)(nt ? nt : 1), sizeof *tv);
    double *wv = w ? tn__calloc((size_t)(c ? c : 1), sizeof *wv) : NULL;
    tn_status st = tv && (!w || wv) ? TN_OK : tn_last_status();
    if (st == TN_OK) st = tn_copy_to(t, tv, (size_t)nt * sizeof *tv);
    if (st == TN_OK && w) st = tn_copy_to_f64(w, wv, c);
    if (st == TN_OK && (!(p->index = tn__zeros(ind, ishape, TN_I64)) ||
                        !(p->wt = tn__zeros(ind, ishape, x->dtype)) ||
                        !(p->s = tn__zeros(x->ndim, x->shape, x->dtype))))
        st = tn_last_status();
    if (st == TN_OK) st = plan_fill(x, tv, wv, ignore, p);
    tn__mfree(tv);
    tn__mfree(wv);
    if (st == TN_OK) st = to_device(&p->index, tn__dev(x));
    if (st == TN_OK) st = to_device(&p->wt, tn__dev(x));
    if (st == TN_OK) st = to_device(&p->s, tn__dev(x));
    if (st < 0) plan_free(p);
    return st;
}

/* The loss from the plan, no history (grad mode off inside). */
static tn_tensor *nll_value(const tn_tensor *x, const tn_tensor *t, const nll_plan *p, int red) {
    bool was = tn_set_grad_enabled(false);
    int cd = x->ndim == 1 ? 0 : 1;
    tn_tensor *xt = tn_gather(x, cd, p->index);
    tn_tensor *prod = xt ? tn_mul(xt, p->wt) : NULL, *out = NULL, *sum = NULL;
    if (prod && red == TN_REDUCTION_NONE)
        out = x->ndim == 1 && t->ndim == 0 ? tn_sum(prod) : tn_sum_dim(prod, cd, x->ndim == 1);
    else if (prod && red == TN_REDUCTION_SUM)
        out = tn_sum(prod);
    else if (prod && (sum = tn_sum(prod)))
        out = tn_div_scalar(sum, p->total);
    tn_release(xt), tn_release(prod), tn_release(sum);
    tn_set_grad_enabled(was);
    return out;
}

static tn_tensor *nll_impl(const tn_tensor *x, const tn_tensor *t, const tn_tensor *w, int red,
                           int64_t ignore) {
    tn_device dev;
    const tn_tensor *all[] = {x, t, w};
    if (check_reduction(red) < 0 || nll_check(x, t, w) < 0 ||
        tn__result_device(w ? 3 : 2, all, &dev) < 0)
        return NULL;
    nll_plan p;
    if (plan_make(x, t, w, ignore, &p) < 0) return NULL;
    tn_tensor *out = nll_value(x, t, &p, red);
    if (out && tn__needs_grad(1, &x)) {
        tn_node *n = tn__node_new(x->ndim >= 3 ? &nll2d_ex_fn : &nll_ex_fn, 1, &x, 1, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            *nll_p(n) = (nll_params){.reduction = red, .total_weight = p.total};
            st = tn__node_save(n, 0, p.s, false);
        }
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    plan_free(&p);
    if (out && red == TN_REDUCTION_NONE && (x->ndim == 3 || x->ndim > 4)) {
        tn_tensor *v = tn_view(out, out->ndim, out->shape); /* PyTorch's ViewBackward0 */
        tn_release(out);
        out = v;
    }
    return out;
}

tn_tensor *tn_nll_loss(const tn_tensor *input, const tn_tensor *target, const tn_tensor *weight,
                       tn_reduction reduction, int64_t ignore_index) {
    TN_CHECK_NULL_ARG(input, "input");
    TN_CHECK_NULL_ARG(target, "target");
    tn__internal_enter();
    tn_tensor *out = nll_impl(input, target, weight, (int)reduction, ignore_index);
    tn__internal_leave();
    return tn__ret(out);
}

/* ---- cross_entropy ------------------------------------------------------------------- */

/* weight (C) viewed to broadcast along dim cd of an nd-dim input. */
static tn_tensor *class_view(const tn_tensor *w, int nd, int cd) {
    int64_t shape[TN_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d == cd ? w->shape[0] : 1;
    return tn_reshape(w, nd, shape);
}

/* Each step its own statement: a chain's first failure (out of memory) must
 * be the last call before the NULL reaches the next op, whatever order C
 * evaluates arguments in. */
#define STEP(v, e)                                                                                 \
    if (!((v) = (e))) return NULL

/* PyTorch 1.13's cross_entropy_loss_label_smoothing: (1 - ls) nll + ls / C
 * times the reduced -sum of the (weighted) log-probabilities, 0 where the
 * target is ignored. Runs in the caller's scope. */
static tn_tensor *smoothed(tn_tensor *lp, const tn_tensor *t, const tn_tensor *w, int red,
                           int64_t ignore, double ls, tn_tensor *nll) {
    int cd = lp->ndim == 1 ? 0 : 1;
    int64_t c = lp->shape[cd];
    tn_tensor *prod = lp, *wv, *ig, *ign, *sm, *ret, *a, *b;
    if (w) {
        STEP(wv, class_view(w, lp->ndim, cd));
        STEP(prod, tn_mul(lp, wv));
    }
    STEP(ig, tn_scalar((double)ignore, TN_I64));
    STEP(ign, tn_eq(t, ig));
    STEP(sm, tn_sum_dim(prod, cd, false));
    STEP(sm, tn_neg(sm));
    STEP(sm, tn_masked_fill(sm, ign, 0));
    ret = sm;
    if (red != TN_REDUCTION_NONE) STEP(ret, tn_sum(sm));
    if (red == TN_REDUCTION_MEAN) {
        tn_tensor *valid, *den;
        STEP(valid, tn_ne(t, ig));
        if (w) {
            tn_tensor *zero, *safe, *flat, *vflat, *wt;
            STEP(zero, tn_zeros(0, NULL, TN_I64));
            STEP(safe, tn_where(valid, (tn_tensor *)t, zero));
            STEP(flat, tn_reshape(safe, 1, (const int64_t[]){-1}));
            STEP(vflat, tn_reshape(valid, 1, (const int64_t[]){-1}));
            STEP(wt, tn_index_select(w, 0, flat));
            STEP(den, tn_mul(wt, vflat));
            STEP(den, tn_sum(den));
        } else {
            STEP(den, tn_sum(valid));
        }
        STEP(ret, tn_div(ret, den));
    }
    STEP(a, tn_mul_scalar(nll, 1 - ls));
    STEP(b, tn_mul_scalar(ret, ls / (double)c));
    return tn_add(a, b);
}

/* PyTorch 1.13's cross_entropy_loss_prob_target. */
static tn_tensor *prob_target(const tn_tensor *x, const tn_tensor *t, const tn_tensor *w, int red,
                              double ls) {
    int cd = x->ndim == 1 ? 0 : 1;
    int64_t c = x->shape[cd];
    tn_tensor *lp, *tt = (tn_tensor *)t, *prod, *wv, *sum;
    STEP(lp, tn_log_softmax((tn_tensor *)x, cd));
    if (ls > 0) {
        STEP(tt, tn_mul_scalar(t, 1 - ls));
        STEP(tt, tn_add_scalar(tt, ls / (double)c));
    }
    STEP(prod, tn_mul(lp, tt));
    if (w) {
        STEP(wv, class_view(w, x->ndim, cd));
        STEP(prod, tn_mul(prod, wv));
    }
    if (red == TN_REDUCTION_NONE) {
        STEP(sum, tn_sum_dim(prod, cd, false));
        return tn_neg(sum);
    }
    STEP(sum, tn_sum(prod));
    STEP(sum, tn_neg(sum));
    if (red == TN_REDUCTION_SUM) return sum;
    int64_t rows = c ? tn__numel(x->ndim, x->shape) / c : 0;
    return tn_div_scalar(sum, rows ? (double)rows : NAN);
}

static tn_tensor *ce_ex(const tn_tensor *x, const tn_tensor *t, const tn_tensor *w, int red,
                        int64_t ignore, double ls) {
    if (tn__is_float(t->dtype) && tn__same_shape(x, t)) {
        if (ignore == -100) return prob_target(x, t, w, red, ls);
        tn__error(TN_ERR_INVALID_ARGUMENT, "ignore_index is not supported for floating point target");
        return NULL;
    }
    if (nll_check(x, t, w) < 0) return NULL;
    tn_tensor *lp, *nll;
    STEP(lp, tn_log_softmax((tn_tensor *)x, x->ndim == 1 ? 0 : 1));
    STEP(nll, tn_nll_loss(lp, t, w, (tn_reduction)red, ignore));
    if (ls == 0) return nll;
    return smoothed(lp, t, w, red, ignore, ls, nll);
}

tn_tensor *tn_cross_entropy_ex(const tn_tensor *input, const tn_tensor *target,
                               const tn_tensor *weight, tn_reduction reduction,
                               int64_t ignore_index, double label_smoothing) {
    TN_CHECK_NULL_ARG(input, "input");
    TN_CHECK_NULL_ARG(target, "target");
    if (check_reduction((int)reduction) < 0) return NULL;
    if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "label_smoothing must be between 0.0 and 1.0. Got: %g",
                  label_smoothing);
        return NULL;
    }
    /* the fused kernel: PyTorch's defaults on (C) / (N, C) */
    if (!weight && reduction == TN_REDUCTION_MEAN && ignore_index == -100 &&
        label_smoothing == 0 && input->ndim >= 1 && input->ndim <= 2 && target->dtype == TN_I64)
        return tn_cross_entropy(input, target);
    if (tn_scope_begin() < 0) return NULL;
    tn_tensor *r = ce_ex(input, target, weight, (int)reduction, ignore_index, label_smoothing);
    if (r) r = tn_keep(r);
    tn_scope_end();
    return r;
}
