/* Activations: gelu (erf and tanh forms) and silu, forward and backward.
 * The forward and the plain backward (the gradient times the derivative, one
 * pass) are pointwise codes of engine/core/pw_ops.h (gelu, gelu_tanh, silu
 * and the binary *_grad), so both back ends run them. Under create_graph the derivative is built
 * from recorded ops instead, so double backward works as in PyTorch; the erf form's normal CDF is a
 * recorded op of its own (NormCdf, whose derivative is the normal density, again public ops).
 *
 * Node layouts: GeluBackward0 / SiluBackward0: input {x}; saved {0: x};
 * parameters act_params. NormCdf (create_graph only): input {x}; saved
 * {0: x}.
 */
#include <math.h>

#include "pointwise_driver.h"

typedef struct act_params {
    bool tanh_approx; /* gelu's tanh approximation */
} act_params;
TN_NODE_PARAMS(act_params, act_p)

/* ---- the derivatives as recorded ops (create_graph) ------------------------------ */

/* phi(x) = exp(-x^2 / 2) / sqrt(2 pi) */
static tn_tensor *normal_pdf(const tn_tensor *x) {
    tn_tensor *sq = tn_mul(x, x), *e = sq ? tn_mul_scalar(sq, -0.5) : NULL;
    tn_tensor *ex = e ? tn_exp(e) : NULL, *r = ex ? tn_mul_scalar(ex, TN_GELU_PDF) : NULL;
    tn_release(sq);
    tn_release(e);
    tn_release(ex);
    return r;
}

static tn_status normcdf_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *x = tn__node_unpack(n, 0);
    TN_TRY(x);
    tn_tensor *p = normal_pdf(x);
    tn_release(x);
    TN_TRY(p);
    gi[0] = tn_mul(go[0], p);
    tn_release(p);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info normcdf_fn = {"NormCdfBackward", normcdf_bw};

/* Phi(x), recorded when x requires grad. */
static tn_tensor *normcdf(const tn_tensor *x) {
    tn_tensor *out = tn__pw_unary("normcdf", TN_PW_normcdf, x, x->dtype, NULL);
    if (!out || !tn__needs_grad(1, &x)) return out;
    tn_node *n = tn__node_new(&normcdf_fn, 1, &x, 1, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) st = tn__node_save(n, 0, x, false);
    tn__node_release(n);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* gelu'(x) = Phi(x) + x phi(x) */
static tn_tensor *gelu_deriv(const tn_tensor *x) {
    tn_tensor *c = normcdf(x), *p = c ? normal_pdf(x) : NULL, *xp = p ? tn_mul(x, p) : NULL;
    tn_tensor *r = xp ? tn_add(c, xp) : NULL;
    tn_release(c);
    tn_release(p);
    tn_release(xp);
    return r;
}

/* t = tanh(beta (x + kappa x^3));
 * gelu_tanh'(x) = (1 + t) / 2 + x / 2 (1 - t^2) beta (1 + 3 kappa x^2) */
static tn_tensor *gelu_tanh_deriv(const tn_tensor *x) {
    tn_tensor *x2 = tn_mul(x, x), *x3 = x2 ? tn_mul(x2, x) : NULL;
    tn_tensor *k3 = x3 ? tn_mul_scalar(x3, TN_GELU_KAPPA) : NULL, *u = k3 ? tn_add(x, k3) : NULL;
    tn_tensor *bu = u ? tn_mul_scalar(u, TN_GELU_BETA) : NULL, *t = bu ? tn_tanh(bu) : NULL;
    tn_tensor *left = t ? tn_add_scalar(t, 1) : NULL, *l2 = left ? tn_mul_scalar(left, 0.5) : NULL;
    tn_tensor *tt = l2 ? tn_mul(t, t) : NULL, *s = tt ? tn_rsub_scalar(tt, 1) : NULL;
    tn_tensor *q = s ? tn_mul_scalar(x2, 3 * TN_GELU_KAPPA * TN_GELU_BETA) : NULL;
    tn_tensor *q1 = q ? tn_add_scalar(q, TN_GELU_BETA) : NULL, *sq = q1 ? tn_mul(s, q1) : NULL;
    tn_tensor *xs = sq ? tn_mul(x, sq) : NULL, *r2 = xs ? tn_mul_scalar(xs, 0.5) : NULL;
    tn_tensor *r = r2 ? tn_add(l2, r2) : NULL;
    tn_tensor *tmp[] = {x2, x3, k3, u, bu, t, left, l2, tt, s, q, q1, sq, xs, r2};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tn_release(tmp[i]);
    return r;
}

/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x) */
static tn_tensor *silu_deriv(const tn_tensor *x) {
    tn_tensor *s = tn_sigmoid(x), *one_s = s ? tn_rsub_scalar(s, 1) : NULL;
    tn_tensor *xs = one_s ? tn_mul(x, one_s) : NULL, *p = xs ? tn_add_scalar(xs, 1) : NULL;
    tn_tensor *r = p ? tn_mul(s, p) : NULL;
    tn_release(s);
    tn_release(one_s);
    tn_release(xs);
    tn_release(p);
    return r;
}

/* ---- backward ------------------------------------------------------------------- */

static tn_status activation_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi,
                               tn_pw_code grad_code, tn_tensor *(*deriv)(const tn_tensor *)) {
    tn_tensor *x = tn__node_unpack(n, 0);
    TN_TRY(x);
    if (!tn__grad_enabled() && go[0]->dtype == x->dtype) {
        /* plain backward: the gradient times the derivative in one pointwise pass, computed in
         * float32 for the half types and rounded once, as PyTorch's CPU kernels */
        gi[0] = tn__pw_binary("activation_backward", grad_code, go[0], x, x->dtype, x->dtype);
        tn_release(x);
        return gi[0] ? TN_OK : tn_last_status();
    }
    /* create_graph (or a gradient of another dtype): the derivative as ops autograd records */
    tn_tensor *d = deriv(x);
    tn_release(x);
    TN_TRY(d);
    gi[0] = tn_mul(go[0], d);
    tn_release(d);
    return gi[0] ? TN_OK : tn_last_status();
}

static tn_status gelu_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return act_p(n)->tanh_approx ? activation_bw(n, go, gi, TN_PW_gelu_tanh_grad, gelu_tanh_deriv)
                                 : activation_bw(n, go, gi, TN_PW_gelu_grad, gelu_deriv);
}
static tn_status silu_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return activation_bw(n, go, gi, TN_PW_silu_grad, silu_deriv);
}
static const tn_fn_info gelu_fn = {"GeluBackward0", gelu_bw};
static const tn_fn_info silu_fn = {"SiluBackward0", silu_bw};

/* ---- forward -------------------------------------------------------------------- */

static tn_tensor *activation(const char *kernel_name, tn_pw_code code, const tn_fn_info *fn,
                             const tn_tensor *x, bool tanh_approx) {
    tn_tensor *out = tn__pw_unary(kernel_name, code, x, x->dtype, NULL);
    if (!out || !tn__needs_grad(1, &x)) return tn__ret(out);
    tn_node *n = tn__node_new(fn, 1, &x, 1, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        act_p(n)->tanh_approx = tanh_approx;
        st = tn__node_save(n, 0, x, false);
    }
    tn__node_release(n);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__ret(out);
}

tn_tensor *tn_gelu(const tn_tensor *x, bool tanh_approx) {
    TN_CHECK_NULL_ARG(x, "self");
    return activation("GeluKernelImpl", tanh_approx ? TN_PW_gelu_tanh : TN_PW_gelu, &gelu_fn, x,
                      tanh_approx);
}

tn_tensor *tn_silu(const tn_tensor *x) {
    TN_CHECK_NULL_ARG(x, "self");
    return activation("silu_cpu", TN_PW_silu, &silu_fn, x, false);
}
