/* softmax, log_softmax, mse_loss, forward and backward (cross_entropy:
 * cross_entropy.c).
 *
 * Node layouts:
 *   SoftmaxBackward0 / LogSoftmaxBackward0: input {x}; saved {0: result};
 *     parameters softmax_params.
 *   MseLossBackward0: inputs {a, b}; saved {0: a, 1: b}; parameters mse_params.
 */
#include <math.h>

#include "autocast.h"
#include "pointwise_driver.h"

typedef struct softmax_params {
    int64_t dim; /* wrapped */
} softmax_params;
TN_NODE_PARAMS(softmax_params, softmax_p)

typedef struct mse_params {
    int64_t numel; /* of the broadcast difference: the mean's divisor */
} mse_params;
TN_NODE_PARAMS(mse_params, mse_p)

/* ---- softmax kernels: engine/cpu/softmax_kernels.c (CPU), through tn__dev_softmax ---- */

/* A tensor seen as (outer, D, inner) around the softmax dim. */
typedef struct sm_geom {
    int64_t outer, d, inner;
} sm_geom;

static sm_geom geom_of(const tn_tensor *t, int dim) {
    if (t->ndim == 0) return (sm_geom){1, 1, 1};
    /* tn__numel: 0 for an empty side, whatever the other's product */
    sm_geom g = {tn__numel(dim, t->shape), t->shape[dim],
                 tn__numel(t->ndim - dim - 1, t->shape + dim + 1)};
    if (g.outer == 0 || g.d == 0 || g.inner == 0) g.outer = g.d = g.inner = 0;
    return g;
}

/* out = mode(x[, y]) (TN_SM_FWD, TN_LSM_FWD, TN_SM_BWD, TN_LSM_BWD:
 * kernel_args.h); all contiguous with geometry g, on out's device. */
static tn_status sm_run(int mode, tn_dtype dt, const tn_tensor *x, const tn_tensor *y,
                        tn_tensor *out, sm_geom g) {
    tn_sm_args a = {mode, dt, g.outer, g.d, g.inner, tn__ptr(x), y ? tn__ptr(y) : NULL,
                    tn__ptr(out)};
    return tn__dev_softmax(&a, tn__dev(out), 3, (const tn_tensor *[]){out, x, y});
}

/* ---- softmax / log_softmax ---------------------------------------------------------- */

/* Backward with public ops when the graph of the backward is recorded
 * (create_graph); one fused pass otherwise. */
static tn_status softmax_family_bw(tn_node *n, tn_tensor *g, tn_tensor **gi, bool log) {
    tn_tensor *y = tn__node_unpack(n, 0);
    TN_TRY(y);
    int dim = (int)softmax_p(n)->dim;
    tn_status st = TN_OK;
    if (!tn__grad_enabled()) {
        tn_tensor *gc = tn__contiguous_on(g, tn__dev(g)), *out = gc ? tn__empty_like(y) : NULL;
        st = out ? sm_run(log ? TN_LSM_BWD : TN_SM_BWD, y->dtype, gc, y, out, geom_of(y, dim))
                 : tn_last_status();
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
        tn_release(gc);
        gi[0] = out;
    } else if (log) { /* g - exp(y) * sum(g, dim) */
        tn_tensor *s = tn_sum_dim(g, dim, true), *e = s ? tn_exp(y) : NULL;
        tn_tensor *p = e ? tn_mul(e, s) : NULL;
        if (!p || !(gi[0] = tn_sub(g, p))) st = tn_last_status();
        tn_release(s);
        tn_release(e);
        tn_release(p);
    } else { /* y * (g - sum(g * y, dim)) */
        tn_tensor *gy = tn_mul(g, y), *s = gy ? tn_sum_dim(gy, dim, true) : NULL;
        tn_tensor *d = s ? tn_sub(g, s) : NULL;
        if (!d || !(gi[0] = tn_mul(y, d))) st = tn_last_status();
        tn_release(gy);
        tn_release(s);
        tn_release(d);
    }
    tn_release(y);
    return st;
}

static tn_status softmax_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return softmax_family_bw(n, go[0], gi, false);
}
static tn_status log_softmax_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return softmax_family_bw(n, go[0], gi, true);
}
static const tn_fn_info softmax_fn = {"SoftmaxBackward0", softmax_bw};
static const tn_fn_info log_softmax_fn = {"LogSoftmaxBackward0", log_softmax_bw};

tn_tensor *tn__softmax_family(const tn_tensor *a, int dim, bool log) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0) return NULL;
    if (!tn__is_float(a->dtype)) {
        bool last = d >= a->ndim - 1;
        tn__error(TN_ERR_DTYPE, "\"%s%s_kernel_impl\" not implemented for '%s'",
                  log ? "log_softmax" : "softmax", last ? "_lastdim" : "", tn_dtype_name(a->dtype));
        return NULL;
    }
    tn_tensor *x = tn__contiguous_on(a, tn__dev(a)), *out = x ? tn__empty_like(a) : NULL;
    if (out && tn_numel(a) > 0 &&
        sm_run(log ? TN_LSM_FWD : TN_SM_FWD, a->dtype, x, NULL, out, geom_of(a, d)) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(x);
    if (!out) return NULL;
    tn__op_done(log ? "log_softmax" : "softmax", t0, out, 1, &a);
    if (tn__needs_grad(1, &a)) {
        tn_node *n = tn__node_new(log ? &log_softmax_fn : &softmax_fn, 1, &a, 1, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            softmax_p(n)->dim = d;
            st = tn__node_save(n, 0, out, true);
        }
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            return NULL;
        }
    }
    return out;
}

tn_tensor *tn_softmax(const tn_tensor *a, int dim) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_SOFTMAX, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_softmax(f.t[0], dim) : NULL);
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(tn__softmax_family(a, dim, false));
}

tn_tensor *tn_log_softmax(const tn_tensor *a, int dim) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_LOG_SOFTMAX, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_log_softmax(f.t[0], dim) : NULL);
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(tn__softmax_family(a, dim, true));
}

/* ---- mse_loss -------------------------------------------------------------------------- */

/* Mean of a contiguous float tensor as a 0-dim tensor on its device. */
static tn_tensor *mean_all(const tn_tensor *t) {
    int64_t n = tn_numel(t);
    tn_tensor *out = tn__empty_on(0, NULL, t->dtype, tn__dev(t));
    if (out && tn__dev_reduce(TN_RED_SUM, t, -1, out, NULL, (double)n) < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* d/da = 2 (a - b) g / numel, d/db = the negation; the engine sums the
 * broadcast back to each input's shape and dtype. */
static tn_status mse_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *a = tn__node_unpack(n, 0), *b = a ? tn__node_unpack(n, 1) : NULL;
    tn_tensor *d = b ? tn_sub(a, b) : NULL, *dg = d ? tn_mul(d, go[0]) : NULL;
    tn_tensor *ga = dg ? tn_mul_scalar(dg, 2.0 / (double)mse_p(n)->numel) : NULL;
    tn_status st = ga ? TN_OK : tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[1]) && !(gi[1] = tn_neg(ga))) st = tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[0])) gi[0] = tn__retain(ga);
    tn_release(a);
    tn_release(b);
    tn_release(d);
    tn_release(dg);
    tn_release(ga);
    return st;
}
static const tn_fn_info mse_fn = {"MseLossBackward0", mse_bw};

tn_tensor *tn_mse_loss(const tn_tensor *a, const tn_tensor *b) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_MSE_LOSS, 2, (const tn_tensor *[]){a, b}))
        return tn__autocast_done(&f, f.ok ? tn_mse_loss(f.t[0], f.t[1]) : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(a, "input");
    TN_CHECK_NULL_ARG(b, "target");
    tn_dtype dt = tn__promote(a, b);
    if (!tn__is_float(dt)) {
        tn__error(TN_ERR_DTYPE, "\"mse_cpu\" not implemented for '%s'", tn_dtype_name(dt));
        return NULL;
    }
    tn_tensor *sq = tn__pw_binary("mse_loss", TN_PW_sqdiff, a, b, dt, dt);
    if (!sq) return NULL;
    int64_t numel = tn_numel(sq);
    tn_tensor *out = mean_all(sq);
    tn_release(sq);
    if (out && tn__needs_grad(2, (const tn_tensor *[]){a, b})) {
        tn_node *n = tn__node_new(&mse_fn, 2, (const tn_tensor *[]){a, b}, 2, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            mse_p(n)->numel = numel;
            st = tn__node_save(n, 0, a, false);
        }
        if (st == TN_OK) st = tn__node_save(n, 1, b, false);
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    tn__op_done("mse_loss", t0, out, 2, (const tn_tensor *[]){a, b});
    return tn__ret(out);
}
