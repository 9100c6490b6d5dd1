/* torch.linalg.vector_norm; forward and backward.
 *
 * The forward composes public reductions in no-grad mode (the p-th power
 * sum, the max or min of |x|, the count of non-zeros) over the chosen dims;
 * one node, LinalgVectorNormBackward0, records it. Backward is PyTorch
 * 1.13's norm_backward from public ops (so create_graph records it), with
 * its values where the norm or an element is 0: a zero norm gives a zero
 * gradient, the inf norms share the gradient among the extreme elements (and
 * NaNs), ord 0 has none.
 * Node layout: input {x}; saved {0: x, 1: the norm}; parameters norm_params. */
#include <math.h>
#include <stdio.h>

#include "pointwise_driver.h"

typedef struct norm_params {
    double ord;
    uint32_t sel; /* bit d: dim d is reduced */
    bool keepdim;
} norm_params;
TN_NODE_PARAMS(norm_params, norm_p)

enum fold { FOLD_SUM, FOLD_MAX, FOLD_MIN };

/* t folded over the dims in sel (highest first, kept as 1, then dropped
 * unless keepdim). Returns a new reference; t is borrowed. */
static tn_tensor *fold_dims(tn_tensor *t, enum fold f, uint32_t sel, bool keepdim) {
    int nd = tn_ndim(t);
    int64_t shape[TN_MAX_DIMS];
    int out = 0;
    tn_tensor *r = tn_retain(t);
    for (int d = nd - 1; d >= 0 && r; d--) {
        if (!(sel >> d & 1)) continue;
        tn_tensor *n = f == FOLD_SUM   ? tn_sum_dim(r, d, true)
                       : f == FOLD_MAX ? tn_max_dim(r, d, true)
                                       : tn_min_dim(r, d, true);
        tn_release(r);
        r = n;
    }
    if (!r || keepdim || nd == 0) return r;
    for (int d = 0; d < nd; d++)
        if (!(sel >> d & 1)) shape[out++] = tn_size(t, d);
    tn_tensor *v = tn_reshape(r, out, shape);
    tn_release(r);
    return v;
}

static tn_tensor *norm_value(tn_tensor *x, double ord, uint32_t sel, bool keepdim) {
    tn_tensor *a = tn_abs(x), *b = NULL, *r = NULL, *s = NULL;
    if (!a) return NULL;
    if (ord == 0) {
        tn_tensor *z = tn_zeros(0, NULL, x->dtype), *nz = z ? tn_ne(x, z) : NULL;
        b = nz ? tn_to(nz, x->dtype, TN_DEVICE_KEEP) : NULL;
        tn_release(z), tn_release(nz);
        r = b ? fold_dims(b, FOLD_SUM, sel, keepdim) : NULL;
    } else if (isinf(ord)) {
        r = fold_dims(a, ord > 0 ? FOLD_MAX : FOLD_MIN, sel, keepdim);
    } else if (ord == 1) {
        r = fold_dims(a, FOLD_SUM, sel, keepdim);
    } else if (ord == 2) {
        b = tn_mul(x, x);
        s = b ? fold_dims(b, FOLD_SUM, sel, keepdim) : NULL;
        r = s ? tn_sqrt(s) : NULL;
    } else {
        b = tn_pow_scalar(a, ord);
        s = b ? fold_dims(b, FOLD_SUM, sel, keepdim) : NULL;
        r = s ? tn_pow_scalar(s, 1 / ord) : NULL;
    }
    tn_release(a), tn_release(b), tn_release(s);
    return r;
}

/* Backward's intermediates, released together (backward runs as engine
 * code: no scope owns what the public ops return there). */
typedef struct pool {
    tn_tensor *t[64];
    int n;
    tn_status st;  /* the first failure: the order in which C evaluates an op's */
    char msg[256]; /* arguments may put a later call between it and the NULL */
} pool;
static tn_tensor *P(pool *p, tn_tensor *t) {
    if (t && TN_ALWAYS(p->n < 64)) p->t[p->n++] = t;
    if (!t && p->st == TN_OK) {
        p->st = tn_last_status();
        snprintf(p->msg, sizeof p->msg, "%s", tn_last_error());
    }
    return t;
}

/* sgn(x): x / |x|, 0 at 0 (public ops: recorded under create_graph). */
static tn_tensor *sgn(pool *p, tn_tensor *x, tn_tensor *zero) {
    tn_tensor *at0 = P(p, tn_eq(x, zero));
    return P(p, tn_masked_fill(P(p, tn_div(x, P(p, tn_abs(x)))), at0, 0));
}

/* t unsqueezed back to x's rank at the reduced dims (when they were dropped). */
static tn_tensor *unsqueeze_dims(pool *p, tn_tensor *t, uint32_t sel, int nd, bool keepdim) {
    for (int d = 0; d < nd && !keepdim; d++)
        if (sel >> d & 1) t = P(p, tn_unsqueeze(t, d));
    return t;
}

/* PyTorch 1.13's norm_backward. */
static tn_tensor *norm_grad(pool *p, tn_tensor *x, tn_tensor *norm, tn_tensor *g,
                            const norm_params *q) {
    double o = q->ord;
    int nd = tn_ndim(x);
    g = unsqueeze_dims(p, g, q->sel, nd, q->keepdim);
    norm = unsqueeze_dims(p, norm, q->sel, nd, q->keepdim);
    tn_tensor *z = P(p, tn_zeros(0, NULL, x->dtype)), *nz = P(p, tn_eq(norm, z));
    if (o == 1) return tn_mul(sgn(p, x, z), g);
    if (o == 2) return tn_mul(g, P(p, tn_masked_fill(P(p, tn_div(x, norm)), nz, 0)));
    tn_tensor *a = P(p, tn_abs(x));
    if (isinf(o)) { /* the extreme elements, or NaNs, share the gradient */
        /* |x| == norm and |x| NaN never hold together: their "or" is their "xor" */
        tn_tensor *mask = P(p, tn_ne(P(p, tn_eq(a, norm)), P(p, tn_ne(a, a))));
        tn_tensor *m = P(p, tn_to(mask, x->dtype, TN_DEVICE_KEEP));
        tn_tensor *cnt = P(p, fold_dims(m, FOLD_SUM, q->sel, true));
        return tn_mul(sgn(p, x, z), P(p, tn_mul(P(p, tn_div(g, cnt)), m)));
    }
    if (o < 1) {
        tn_tensor *sc = P(p, tn_mul(sgn(p, x, z), P(p, tn_pow_scalar(a, o - 1))));
        sc = P(p, tn_masked_fill(sc, P(p, tn_eq(x, z)), 0));
        return tn_mul(P(p, tn_mul(sc, g)), P(p, tn_pow_scalar(norm, 1 - o)));
    }
    tn_tensor *sc = o < 2 ? P(p, tn_mul(sgn(p, x, z), P(p, tn_pow_scalar(a, o - 1))))
                          : P(p, tn_mul(x, P(p, tn_pow_scalar(a, o - 2))));
    tn_tensor *scale = P(p, tn_masked_fill(P(p, tn_div(g, P(p, tn_pow_scalar(norm, o - 1)))), nz, 0));
    return tn_mul(sc, scale);
}

static tn_status norm_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    if (norm_p(n)->ord == 0) return TN_OK; /* no gradient, as PyTorch */
    pool p = {.n = 0};
    tn_tensor *x = P(&p, tn__node_unpack(n, 0)), *norm = x ? P(&p, tn__node_unpack(n, 1)) : NULL;
    gi[0] = norm ? P(&p, norm_grad(&p, x, norm, go[0], norm_p(n))) : NULL;
    for (int i = 0; i < p.n - (gi[0] != NULL); i++)
        tn_release(p.t[i]);
    if (gi[0]) return TN_OK;
    return p.st < 0 ? tn__error(p.st, "%s", p.msg) : tn_last_status();
}
static const tn_fn_info norm_fn = {"LinalgVectorNormBackward0", norm_bw};

/* The dims as a bit set (NULL or ndims 0: all), checked. */
static tn_status norm_dims(const tn_tensor *x, int ndims, const int *dims, uint32_t *sel) {
    *sel = 0;
    if (ndims == 0 || !dims) {
        *sel = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
        return TN_OK;
    }
    for (int i = 0; i < ndims; i++) {
        int d = tn__wrap_dim(dims[i], x->ndim);
        if (d < 0) return tn_last_status();
        if (*sel >> d & 1)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "dim %d appears multiple times in the list of dims", d);
        *sel |= 1u << d;
    }
    return TN_OK;
}

/* The inf norms of an empty reduction have no identity (PyTorch's texts). */
static tn_status check_empty(const tn_tensor *x, double ord, uint32_t sel, bool all) {
    if (!isinf(ord)) return TN_OK;
    const char *name = ord < 0 ? "-inf" : "inf";
    if (all && tn__numel(x->ndim, x->shape) == 0)
        return tn__error(TN_ERR_INDEX, "linalg.vector_norm cannot compute the %s norm on an empty "
                                       "tensor because the operation does not have an identity",
                         name);
    for (int d = 0; !all && d < x->ndim; d++)
        if ((sel >> d & 1) && x->shape[d] == 0)
            return tn__error(TN_ERR_INDEX,
                             "linalg.vector_norm cannot compute the %s norm on the dimension "
                             "%dbecause this dimension is empty and the operation does not have "
                             "an identity",
                             name, d);
    return TN_OK;
}

tn_tensor *tn_vector_norm(const tn_tensor *x, double ord, int ndims, const int *dims,
                          bool keepdim) {
    TN_CHECK_NULL_ARG(x, "self");
    if (!tn__is_float(x->dtype)) {
        tn__error(TN_ERR_DTYPE,
                  "linalg.vector_norm: Expected a floating point or complex tensor as input. "
                  "Got %s",
                  tn__torch_scalar_name(x->dtype));
        return NULL;
    }
    uint32_t sel;
    bool all = ndims == 0 || !dims;
    if (isnan(ord)) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "linalg.vector_norm: ord is NaN");
        return NULL;
    }
    if (norm_dims(x, ndims, dims, &sel) < 0 || check_empty(x, ord, sel, all) < 0) return NULL;
    tn__internal_enter();
    bool was = tn_set_grad_enabled(false);
    tn_tensor *out = norm_value((tn_tensor *)x, ord, sel, keepdim);
    tn_set_grad_enabled(was);
    if (out && tn__needs_grad(1, &x)) {
        tn_node *n = tn__node_new(&norm_fn, 1, &x, 2, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            *norm_p(n) = (norm_params){.ord = ord, .sel = sel, .keepdim = keepdim};
            st = tn__node_save(n, 0, x, false);
        }
        if (st == TN_OK) st = tn__node_save(n, 1, out, true);
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    tn__internal_leave();
    return tn__ret(out);
}
