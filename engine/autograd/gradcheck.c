/* torch.autograd.gradcheck / gradgradcheck (include/tenet/testing.h): the
 * analytical Jacobian (one tn_autograd_grad per output element) against
 * central differences, every element compared as PyTorch's allclose
 * (|a - n| <= atol + rtol |n|). Finite differences run on private
 * contiguous float64 copies of the inputs under no-grad, so the caller's
 * tensors are never written; each evaluation of the function runs in a
 * scope of its own. gradgradcheck is gradcheck of the function's gradient
 * (create_graph) with respect to the inputs and fixed grad_outputs. */
#include <math.h>
#include <stdio.h>

#include "autograd_internal.h"
#include "tenet/testing.h"

typedef struct gc {
    tn_gradcheck_fn fn;
    void *ctx;
    int n;
    tn_tensor *const *in;
} gc;

/* fn(x) into vals (host doubles, *m of them; vals NULL: count only). */
static tn_status eval(const gc *c, tn_tensor *const *x, double *vals, int64_t *m) {
    if (tn_scope_begin() < 0) return tn_last_status();
    tn_clear_error(); /* a NULL from fn is fn's own failure */
    tn_tensor *out = c->fn(x, c->n, c->ctx);
    tn_status st = TN_OK;
    if (!out)
        st = tn_last_status() < 0 ? tn_last_status()
                                  : tn__error(TN_ERR_INVALID_ARGUMENT,
                                              "gradcheck: the function returned NULL");
    if (st == TN_OK) *m = tn_numel(out);
    if (st == TN_OK && vals) st = tn_copy_to_f64(out, vals, *m);
    tn_scope_end();
    return st;
}

/* Column j of input k's numerical Jacobian (num: m values). */
static tn_status numerical(const gc *c, tn_tensor **xs, int k, int64_t j, double eps, double *num,
                           double *tmp) {
    double *p = (double *)tn_data_ptr(xs[k]) + j, keep = *p;
    int64_t m;
    *p = keep + eps;
    tn_status st = eval(c, xs, num, &m);
    *p = keep - eps;
    if (st == TN_OK) st = eval(c, xs, tmp, &m);
    *p = keep;
    for (int64_t i = 0; st == TN_OK && i < m; i++)
        num[i] = (num[i] - tmp[i]) / (2 * eps);
    return st;
}

/* Row i (output element i) of the analytical Jacobian of every input: ana[k] + j * m + i. */
static tn_status analytical(const gc *c, int64_t m, double **ana) {
    if (tn_scope_begin() < 0) return tn_last_status();
    tn_tensor *out = c->fn(c->in, c->n, c->ctx);
    tn_status st = out ? TN_OK : tn_last_status();
    tn_tensor *g[TN_GRADCHECK_MAX_INPUTS] = {0}, *rg[TN_GRADCHECK_MAX_INPUTS];
    int nrg = 0, slot[TN_GRADCHECK_MAX_INPUTS];
    for (int k = 0; k < c->n; k++) {
        slot[k] = tn_requires_grad(c->in[k]) ? nrg : -1;
        if (slot[k] >= 0) rg[nrg++] = c->in[k];
    }
    for (int64_t i = 0; st == TN_OK && i < m; i++) {
        tn_tensor *e = tn_zeros(tn_ndim(out), tn_shape(out), tn_dtype_of(out));
        double one = 1;
        tn_tensor *onehot = e ? tn_reshape(e, 1, (const int64_t[]){-1}) : NULL;
        tn_tensor *at = onehot ? tn_narrow(onehot, 0, i, 1) : NULL;
        tn_tensor *src = at ? tn_tensor_from(&one, TN_F64, 1, (const int64_t[]){1}, false) : NULL;
        st = src ? tn_copy_(at, src) : tn_last_status();
        if (st == TN_OK)
            st = tn_autograd_grad(1, &out, &e, nrg, rg, g, true, false);
        for (int k = 0; st == TN_OK && k < c->n; k++) {
            if (slot[k] < 0) continue;
            tn_tensor *gk = g[slot[k]];
            int64_t nk = tn_numel(c->in[k]);
            double *col = tn__malloc((size_t)(nk ? nk : 1) * sizeof *col);
            if (!col) st = tn_last_status();
            if (st == TN_OK && gk) st = tn_copy_to_f64(gk, col, nk);
            for (int64_t j = 0; st == TN_OK && j < nk; j++)
                ana[k][j * m + i] = gk ? col[j] : 0;
            tn__mfree(col);
        }
        for (int k = 0; k < nrg; k++)
            g[k] = NULL; /* the scope's */
    }
    tn_scope_end();
    return st;
}

/* PyTorch's report: both Jacobians, (input numel, output numel). */
static tn_status mismatch(int k, int64_t nk, int64_t m, const double *num, const double *ana) {
    char a[4096], b[4096];
    tn_tensor *tn = tn_tensor_from(num, TN_F64, 2, (const int64_t[]){nk, m}, false);
    tn_tensor *ta = tn_tensor_from(ana, TN_F64, 2, (const int64_t[]){nk, m}, false);
    a[0] = b[0] = 0;
    if (tn) tn_format(tn, a, sizeof a);
    if (ta) tn_format(ta, b, sizeof b);
    tn_release(tn), tn_release(ta);
    return tn__error(TN_ERR_AUTOGRAD,
                     "Jacobian mismatch for output 0 with respect to input %d,\nnumerical:%s\n"
                     "analytical:%s\n",
                     k, a, b);
}

static tn_status check_inputs(int n, tn_tensor *const *in) {
    if (n < 1 || n > TN_GRADCHECK_MAX_INPUTS)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_gradcheck: n = %d is outside [1, %d]", n,
                         TN_GRADCHECK_MAX_INPUTS);
    if (!in) return tn__null_arg(false, "tn_gradcheck: argument 'inputs' is NULL");
    bool any = false;
    for (int k = 0; k < n; k++) {
        if (!in[k]) return tn__null_arg(true, "tn_gradcheck: inputs[%d] is NULL", k);
        if (!tn_requires_grad(in[k])) continue;
        any = true;
        if (tn_dtype_of(in[k]) != TN_F64)
            tn__warn("Input #%d requires gradient and is not a double precision floating point. "
                     "This check will likely fail if all the inputs are not of double precision "
                     "floating point. ",
                     k);
    }
    if (!any)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.");
    return TN_OK;
}

tn_status tn_gradcheck(tn_gradcheck_fn fn, void *ctx, int n, tn_tensor *const *inputs, double eps,
                       double atol, double rtol) {
    TN_CHECK_NULL_PTR_ST(fn, "fn");
    tn_status st = check_inputs(n, inputs);
    if (st < 0) return st;
    gc c = {fn, ctx, n, inputs};
    tn_tensor *xs[TN_GRADCHECK_MAX_INPUTS] = {0};
    double *ana[TN_GRADCHECK_MAX_INPUTS] = {0}, *num = NULL, *tmp = NULL;
    int64_t m = 0;
    for (int k = 0; k < n && st == TN_OK; k++) /* private contiguous float64 copies */
        st = (xs[k] = tn_new_tensor(inputs[k], TN_F64, TN_DEVICE_CPU,
                                    tn_requires_grad(inputs[k])))
                 ? TN_OK
                 : tn_last_status();
    if (st == TN_OK) st = eval(&c, inputs, NULL, &m);
    for (int k = 0; k < n && st == TN_OK; k++)
        if (!(ana[k] = tn__calloc((size_t)(tn_numel(inputs[k]) * m + 1), sizeof(double))))
            st = tn_last_status();
    if (st == TN_OK && (!(num = tn__calloc((size_t)m + 1, sizeof *num)) ||
                        !(tmp = tn__calloc((size_t)m + 1, sizeof *tmp))))
        st = tn_last_status();
    if (st == TN_OK) st = analytical(&c, m, ana);
    gc cn = {fn, ctx, n, xs};
    for (int k = 0; k < n && st == TN_OK; k++) {
        if (!tn_requires_grad(inputs[k])) continue;
        int64_t nk = tn_numel(inputs[k]);
        double *jn = tn__calloc((size_t)(nk * m + 1), sizeof *jn);
        if (!jn) st = tn_last_status();
        bool bad = false;
        for (int64_t j = 0; st == TN_OK && j < nk; j++) {
            st = numerical(&cn, xs, k, j, eps, num, tmp);
            for (int64_t i = 0; st == TN_OK && i < m; i++) {
                jn[j * m + i] = num[i];
                double a = ana[k][j * m + i];
                bad |= !(fabs(a - num[i]) <= atol + rtol * fabs(num[i]));
            }
        }
        if (st == TN_OK && bad) st = mismatch(k, nk, m, jn, ana[k]);
        tn__mfree(jn);
    }
    for (int k = 0; k < n; k++) {
        tn_release(xs[k]);
        tn__mfree(ana[k]);
    }
    tn__mfree(num), tn__mfree(tmp);
    return st;
}

/* ---- gradgradcheck ------------------------------------------------------------- */

typedef struct gg {
    tn_gradcheck_fn fn;
    void *ctx;
    int n; /* the function's inputs; the grad_output is input n */
} gg;

/* The gradients of sum(fn(x) * v) w.r.t. the inputs that require grad,
 * flattened into one vector (create_graph). */
static tn_tensor *first_grads(tn_tensor *const *x, int n, void *ctx) {
    const gg *g = ctx;
    tn_tensor *out = g->fn(x, g->n, g->ctx), *gr[TN_GRADCHECK_MAX_INPUTS] = {0};
    tn_tensor *flat[TN_GRADCHECK_MAX_INPUTS], *rg[TN_GRADCHECK_MAX_INPUTS];
    int nrg = 0;
    (void)n;
    for (int k = 0; k < g->n; k++)
        if (tn_requires_grad(x[k])) rg[nrg++] = x[k];
    tn_tensor *v = out ? tn_reshape(x[g->n], tn_ndim(out), tn_shape(out)) : NULL;
    if (!v || tn_autograd_grad(1, &out, &v, nrg, rg, gr, true, true) < 0) return NULL;
    for (int k = 0; k < nrg; k++) {
        tn_tensor *gk = gr[k] ? gr[k] : tn_zeros_like(rg[k]);
        flat[k] = tn_reshape(gk, 1, (const int64_t[]){-1}); /* all the scope's */
    }
    return tn_cat(nrg, flat, 0);
}

tn_status tn_gradgradcheck(tn_gradcheck_fn fn, void *ctx, int n, tn_tensor *const *inputs,
                           double eps, double atol, double rtol) {
    TN_CHECK_NULL_PTR_ST(fn, "fn");
    tn_status st = check_inputs(n, inputs);
    if (st < 0) return st;
    if (n + 1 > TN_GRADCHECK_MAX_INPUTS)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_gradgradcheck: n = %d is above %d", n,
                         TN_GRADCHECK_MAX_INPUTS - 1);
    int64_t m = 0;
    gc c = {fn, ctx, n, inputs};
    if ((st = eval(&c, inputs, NULL, &m)) < 0) return st;
    double *v = tn__calloc((size_t)m + 1, sizeof *v);
    if (!v) return tn_last_status();
    for (int64_t i = 0; i < m; i++) /* fixed, smooth grad_outputs */
        v[i] = cos(0.9 * (double)i + 0.3) + 0.25;
    tn_tensor *all[TN_GRADCHECK_MAX_INPUTS];
    for (int k = 0; k < n; k++)
        all[k] = inputs[k];
    all[n] = tn_tensor_from(v, TN_F64, 1, &m, true);
    tn__mfree(v);
    if (!all[n]) return tn_last_status();
    gg g = {fn, ctx, n};
    st = tn_gradcheck(first_grads, &g, n + 1, all, eps, atol, rtol);
    tn_release(all[n]);
    return st;
}
