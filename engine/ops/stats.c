/* Statistics along one dim: logsumexp, var, std, forward and backward.
 * The forward reuses the reduction kernels (tn__dev_reduce: max, sums, the
 * mean as a sum with a divisor) and pointwise codes between them, so both
 * back ends run it with no kernel family of its own; the backward formulas
 * are public ops, so double backward works.
 *
 * Node layouts (input {x}; parameters stat_params):
 *   LogsumexpBackward0: saved {0: x, 1: result}.
 *   VarBackward0: saved {0: x}.
 *   StdBackward0: saved {0: x, 1: result}.
 */
#include <float.h>
#include <math.h>

#include "autocast.h"
#include "pointwise_driver.h"

typedef struct stat_params {
    int64_t dim; /* wrapped */
    bool keepdim;
    double correction; /* var, std */
} stat_params;
TN_NODE_PARAMS(stat_params, stat_p)

/* Result shape of a reduction of x over dim: with the dim kept (size 1) in
 * `keep`, and as asked in `out` (returns its ndim). */
static int stat_shapes(const tn_tensor *x, int dim, bool keepdim, int64_t *keep, int64_t *out) {
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        keep[d] = d == dim ? 1 : x->shape[d];
        if (d != dim || keepdim) out[nd++] = keep[d];
    }
    return nd;
}

/* t (contiguous, keepdim shape) as a handle of the result's shape: the same
 * memory and element order. */
static tn_tensor *as_result(tn_tensor *t, int nd, const int64_t *shape) {
    int64_t st[TN_MAX_DIMS];
    tn__contiguous_strides(nd, shape, st);
    tn_tensor *r = tn__alias(t, nd, shape, st, t->offset);
    tn_release(t);
    return r;
}

/* g broadcast back over the reduced dim: unsqueezed when it was dropped. */
static tn_tensor *keep_dim(tn_node *n, tn_tensor *g) {
    bool dropped = !stat_p(n)->keepdim && n->in_meta[0].ndim > 0;
    return dropped ? tn_unsqueeze(g, (int)stat_p(n)->dim) : tn__retain(g);
}

static tn_status record(const tn_fn_info *fn, tn_tensor *out, const tn_tensor *x, int dim,
                        bool keepdim, double correction, bool save_out) {
    tn_node *n = tn__node_new(fn, 1, &x, save_out ? 2 : 1, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        *stat_p(n) = (stat_params){.dim = dim, .keepdim = keepdim, .correction = correction};
        st = tn__node_save(n, 0, x, false);
    }
    if (st == TN_OK && save_out) st = tn__node_save(n, 1, out, true);
    tn__node_release(n);
    return st;
}

/* ---- logsumexp ---------------------------------------------------------------------- */

/* d/dx = g exp(x - result) */
static tn_status logsumexp_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *x = tn__node_unpack(n, 0), *r = x ? tn__node_unpack(n, 1) : NULL;
    tn_tensor *rk = r ? keep_dim(n, r) : NULL, *gk = rk ? keep_dim(n, go[0]) : NULL;
    tn_tensor *d = gk ? tn_sub(x, rk) : NULL, *e = d ? tn_exp(d) : NULL;
    tn_status st = e && (gi[0] = tn_mul(gk, e)) ? TN_OK : tn_last_status();
    tn_tensor *tmp[] = {x, r, rk, gk, d, e};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tn_release(tmp[i]);
    return st;
}
static const tn_fn_info logsumexp_fn = {"LogsumexpBackward0", logsumexp_bw};

/* log(sum(exp(x - m))) + m, m the max along dim clamped to the finite range
 * (PyTorch's masking of infinite maxima: an all -inf slice gives -inf, an
 * +inf element +inf). Keepdim shape. */
static tn_tensor *logsumexp_keep(const tn_tensor *x, int dim, const int64_t *keep) {
    int nd = x->ndim;
    tn_dtype dt = x->dtype;
    if (nd && x->shape[dim] == 0) return tn__full_on(nd, keep, dt, -INFINITY, tn__dev(x));
    double big = dt == TN_F32    ? FLT_MAX
                 : dt == TN_F16  ? 65504.0
                 : dt == TN_BF16 ? 3.38953138925153547590e38
                                 : DBL_MAX; /* the dtype's largest finite value */
    tn_pw_ctx lim = {-big, big};
    tn_tensor *m = tn__empty_on(nd, keep, dt, tn__dev(x)), *mc = NULL, *d = NULL, *e = NULL;
    tn_tensor *s = NULL, *ls = NULL, *out = NULL;
    if (m && tn__dev_reduce(TN_RED_MAX, x, nd ? dim : 0, m, NULL, 1) == TN_OK &&
        (mc = tn__pw_unary("logsumexp", TN_PW_clamp, m, dt, &lim)) &&
        (d = tn__pw_binary("logsumexp", TN_PW_sub, x, mc, dt, dt)) &&
        (e = tn__pw_unary("logsumexp", TN_PW_exp, d, dt, NULL)) &&
        (s = tn__empty_on(nd, keep, dt, tn__dev(x))) &&
        tn__dev_reduce(TN_RED_SUM, e, nd ? dim : 0, s, NULL, 1) == TN_OK &&
        (ls = tn__pw_unary("logsumexp", TN_PW_log, s, dt, NULL)))
        out = tn__pw_binary("logsumexp", TN_PW_add, ls, mc, dt, dt);
    tn_tensor *tmp[] = {m, mc, d, e, s, ls};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tn_release(tmp[i]);
    return out;
}

tn_tensor *tn_logsumexp(const tn_tensor *x, int dim, bool keepdim) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_LOGSUMEXP, 1, (const tn_tensor *[]){x}))
        return tn__autocast_done(&f, f.ok ? tn_logsumexp(f.t[0], dim, keepdim) : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(x, "self");
    int d = tn__wrap_dim(dim, x->ndim);
    if (d < 0) return NULL;
    /* integer and bool inputs give float32 (PyTorch 1.13) */
    tn_tensor *xf = tn__is_float(x->dtype) ? tn__retain(x) : tn__cast(x, TN_F32);
    if (!xf) return NULL;
    int64_t keep[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    int nd = stat_shapes(xf, d, keepdim, keep, shape);
    tn_tensor *k = logsumexp_keep(xf, d, keep), *out = k ? as_result(k, nd, shape) : NULL;
    tn_release(xf);
    if (out && tn__needs_grad(1, &x) && record(&logsumexp_fn, out, x, d, keepdim, 0, true) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn__op_done("logsumexp", t0, out, 1, &x);
    return tn__ret(out);
}

/* ---- var / std ---------------------------------------------------------------------- */

/* Divisor of the sum of squared deviations: max(0, N - correction). */
static double var_div(int64_t n, double correction) {
    double v = (double)n - correction;
    return v > 0 ? v : 0;
}

/* dvar/dx = g 2 (x - mean) / div (g already over the kept dim) */
static tn_tensor *var_grad(tn_node *n, const tn_tensor *x, const tn_tensor *gk) {
    int dim = (int)stat_p(n)->dim;
    int64_t len = x->ndim ? x->shape[dim] : 1;
    tn_tensor *m = tn_mean_dim(x, dim, true), *d = m ? tn_sub(x, m) : NULL;
    tn_tensor *s = d ? tn_mul_scalar(d, 2.0 / var_div(len, stat_p(n)->correction)) : NULL;
    tn_tensor *r = s ? tn_mul(gk, s) : NULL;
    tn_release(m);
    tn_release(d);
    tn_release(s);
    return r;
}

static tn_status var_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *x = tn__node_unpack(n, 0), *gk = x ? keep_dim(n, go[0]) : NULL;
    gi[0] = gk ? var_grad(n, x, gk) : NULL;
    tn_release(x);
    tn_release(gk);
    return gi[0] ? TN_OK : tn_last_status();
}

/* dstd/dx = dvar/dx with g / (2 std), 0 where std == 0 (PyTorch's mask) */
static tn_status std_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *x = tn__node_unpack(n, 0), *r = x ? tn__node_unpack(n, 1) : NULL;
    tn_tensor *rk = r ? keep_dim(n, r) : NULL, *gk = rk ? keep_dim(n, go[0]) : NULL;
    tn_tensor *r2 = gk ? tn_mul_scalar(rk, 2) : NULL, *q = r2 ? tn_div(gk, r2) : NULL;
    tn_tensor *z = q ? tn__zeros_on(0, NULL, rk->dtype, tn__dev(rk)) : NULL;
    tn_tensor *zero = z ? tn_eq(rk, z) : NULL, *qm = zero ? tn__masked_zero(q, zero) : NULL;
    gi[0] = qm ? var_grad(n, x, qm) : NULL;
    tn_tensor *tmp[] = {x, r, rk, gk, r2, q, z, zero, qm};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tn_release(tmp[i]);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info var_fn = {"VarBackward0", var_bw};
static const tn_fn_info std_fn = {"StdBackward0", std_bw};

/* sum((x - mean)^2) / max(0, N - correction) along dim, keepdim shape. */
static tn_tensor *var_keep(const tn_tensor *x, int dim, double correction, const int64_t *keep) {
    int nd = x->ndim, rd = nd ? dim : 0;
    int64_t len = nd ? x->shape[dim] : 1;
    tn_dtype dt = x->dtype;
    tn_tensor *m = tn__empty_on(nd, keep, dt, tn__dev(x)), *sq = NULL, *out = NULL;
    if (m && tn__dev_reduce(TN_RED_SUM, x, rd, m, NULL, (double)len) == TN_OK &&
        (sq = tn__pw_binary("var", TN_PW_sqdiff, x, m, dt, dt)) &&
        (out = tn__empty_on(nd, keep, dt, tn__dev(x))) &&
        tn__dev_reduce(TN_RED_SUM, sq, rd, out, NULL, var_div(len, correction)) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(m);
    tn_release(sq);
    return out;
}

static tn_tensor *var_std(const char *api, const tn_tensor *x, int dim, double correction, bool keepdim, bool std) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG_IN(api, x, "self");
    if (!tn__is_float(x->dtype)) {
        tn__error(TN_ERR_DTYPE, "std and var only support floating point and complex dtypes");
        return NULL;
    }
    if (isnan(correction)) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "%s: correction is NaN", std ? "std" : "var");
        return NULL;
    }
    int d = tn__wrap_dim(dim, x->ndim);
    if (d < 0) return NULL;
    int64_t keep[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    int nd = stat_shapes(x, d, keepdim, keep, shape);
    tn_tensor *v = var_keep(x, d, correction, keep), *k = v;
    if (v && std) {
        k = tn__pw_unary("std", TN_PW_sqrt, v, x->dtype, NULL);
        tn_release(v);
    }
    tn_tensor *out = k ? as_result(k, nd, shape) : NULL;
    if (out && tn__needs_grad(1, &x) &&
        record(std ? &std_fn : &var_fn, out, x, d, keepdim, correction, std) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn__op_done(std ? "std" : "var", t0, out, 1, &x);
    return tn__ret(out);
}

tn_tensor *tn_var_dim(const tn_tensor *x, int dim, double correction, bool keepdim) {
    return var_std(__func__, x, dim, correction, keepdim, false);
}

tn_tensor *tn_std_dim(const tn_tensor *x, int dim, double correction, bool keepdim) {
    return var_std(__func__, x, dim, correction, keepdim, true);
}
