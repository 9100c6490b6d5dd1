/* layer_norm, forward and backward. The kernels are one fused pass per row
 * (tn_ln_args, engine/core/kernel_args.h; the CPU's in
 * engine/cpu/layer_norm_kernels.c) through tn__dev_layer_norm: the forward
 * writes the output and each row's mean and rstd, which the plain backward
 * reads. Under create_graph the backward is built from recorded public ops
 * (the statistics recomputed from x, so that they carry x's history) and
 * double backward works as in PyTorch.
 *
 * Node layout: NativeLayerNormBackward0: inputs {x, weight, bias} (either
 * of the last two may be NULL); saved {0: x, 1: weight, 2: mean, 3: rstd}
 * (mean and rstd: contiguous (rows) in x's dtype); parameters ln_params.
 */
#include "autocast.h"
#include "pointwise_driver.h"

typedef struct ln_params {
    int64_t nn; /* the number of normalised dims (the trailing dims of x: in_meta[0]) */
    double eps;
} ln_params;
TN_NODE_PARAMS(ln_params, ln_p)

/* rows (the leading dims' product) and cols (the normalised dims') of x */
static void ln_dims(int ndim, const int64_t *shape, int nn, int64_t *rows, int64_t *cols) {
    *rows = tn__numel(ndim - nn, shape);
    *cols = tn__numel(nn, shape + ndim - nn);
}

/* ---- checks (PyTorch's texts) ---------------------------------------------------- */

static tn_status check_param(const char *what, const tn_tensor *p, int nn, const int64_t *ns,
                             const tn_tensor *x) {
    if (!p) return TN_OK;
    bool same = p->ndim == nn;
    for (int i = 0; same && i < nn; i++)
        same = p->shape[i] == ns[i];
    if (!same) {
        char ps[160], nss[160];
        tn__format_shape(ps, sizeof ps, p->ndim, p->shape);
        tn__format_shape(nss, sizeof nss, nn, ns);
        return tn__error(TN_ERR_SHAPE,
                         "Expected %s to be of same shape as normalized_shape, but got %s of "
                         "shape %s and normalized_shape = %s",
                         what, what, ps, nss);
    }
    if (p->dtype != x->dtype && tn__is_float(x->dtype))
        return tn__error(TN_ERR_DTYPE, "expected scalar type %s but found %s",
                         tn_dtype_name(x->dtype), tn_dtype_name(p->dtype));
    return TN_OK;
}

static tn_status check_args(const tn_tensor *x, int nn, const int64_t *ns, const tn_tensor *w,
                            const tn_tensor *b) {
    if (nn < 1)
        return tn__error(TN_ERR_SHAPE, "Expected normalized_shape to be at least 1-dimensional, "
                                       "i.e., containing at least one element, but got "
                                       "normalized_shape = []");
    if (nn > TN_MAX_DIMS)
        return tn__error(TN_ERR_SHAPE, "layer_norm: normalized_shape has %d dims (at most %d)", nn,
                         TN_MAX_DIMS);
    for (int i = 0; i < nn; i++)
        if (ns[i] < 0)
            return tn__error(TN_ERR_SHAPE, "layer_norm: negative size %lld in normalized_shape",
                             (long long)ns[i]);
    tn_status st = check_param("weight", w, nn, ns, x);
    if (st == TN_OK) st = check_param("bias", b, nn, ns, x);
    if (st < 0) return st;
    bool match = x->ndim >= nn;
    for (int i = 0; match && i < nn; i++)
        match = x->shape[x->ndim - nn + i] == ns[i];
    if (!match) {
        char nss[160], star[180], xs[160];
        tn__format_shape(nss, sizeof nss, nn, ns);
        snprintf(star, sizeof star, "[*, %s", nss + 1);
        tn__format_shape(xs, sizeof xs, x->ndim, x->shape);
        return tn__error(TN_ERR_SHAPE,
                         "Given normalized_shape=%s, expected input with shape %s, but got input "
                         "of size%s",
                         nss, star, xs);
    }
    if (!tn__is_float(x->dtype))
        return tn__error(TN_ERR_DTYPE, "\"LayerNormKernelImpl\" not implemented for '%s'",
                         tn_dtype_name(x->dtype));
    tn_device dev;
    return tn__result_device(3, (const tn_tensor *[]){x, w, b}, &dev);
}

/* ---- backward --------------------------------------------------------------------- */

/* Recorded public ops: with xhat = (x - mu) rs (mu, rs recomputed from x),
 * wg = g w: dx = rs (wg - mean(wg) - xhat mean(wg xhat)); dweight =
 * sum over rows of g xhat; dbias = sum over rows of g. */
static tn_status ln_bw_graph(tn_node *n, tn_tensor *x, tn_tensor *w, tn_tensor *g, tn_tensor **gi) {
    const tn_input_meta *m = &n->in_meta[0];
    int nn = (int)ln_p(n)->nn;
    int64_t mn[2];
    ln_dims(m->ndim, m->shape, nn, &mn[0], &mn[1]);
    enum { NT = 20 };
    tn_tensor *t[NT] = {0};
    tn_status st = TN_OK;
#define STEP(i, expr)                                                                              \
    if (st == TN_OK && !(t[i] = (expr))) st = tn_last_status()
    STEP(0, tn_reshape(x, 2, mn));
    STEP(1, tn_mean_dim(t[0], 1, true));
    STEP(2, tn_sub(t[0], t[1])); /* xc */
    STEP(3, tn_mul(t[2], t[2]));
    STEP(4, tn_mean_dim(t[3], 1, true)); /* var */
    STEP(5, tn_add_scalar(t[4], ln_p(n)->eps));
    STEP(6, tn_pow_scalar(t[5], -0.5)); /* rs */
    STEP(7, tn_mul(t[2], t[6]));        /* xhat */
    STEP(8, tn_reshape(g, 2, mn));      /* gr */
    STEP(9, w ? tn_reshape(w, 1, &mn[1]) : tn__retain(t[8]));
    STEP(10, w ? tn_mul(t[8], t[9]) : tn__retain(t[8])); /* wg */
    if (tn__edge_valid(&n->edges[0])) {
        STEP(11, tn_mean_dim(t[10], 1, true));
        STEP(12, tn_mul(t[10], t[7]));
        STEP(13, tn_mean_dim(t[12], 1, true));
        STEP(14, tn_sub(t[10], t[11]));
        STEP(15, tn_mul(t[7], t[13]));
        STEP(16, tn_sub(t[14], t[15]));
        STEP(17, tn_mul(t[6], t[16]));
        if (st == TN_OK && !(gi[0] = tn_reshape(t[17], m->ndim, m->shape))) st = tn_last_status();
    }
    const tn_input_meta *pm = &n->in_meta[1];
    if (tn__edge_valid(&n->edges[1])) {
        STEP(18, tn_mul(t[8], t[7]));
        tn_tensor *s = st == TN_OK ? tn_sum_dim(t[18], 0, false) : NULL;
        if (st == TN_OK && (!s || !(gi[1] = tn_reshape(s, pm->ndim, pm->shape))))
            st = tn_last_status();
        tn_release(s);
    }
    if (tn__edge_valid(&n->edges[2])) {
        pm = &n->in_meta[2];
        STEP(19, tn_sum_dim(t[8], 0, false));
        if (st == TN_OK && !(gi[2] = tn_reshape(t[19], pm->ndim, pm->shape))) st = tn_last_status();
    }
#undef STEP
    for (int i = 0; i < NT; i++)
        tn_release(t[i]);
    return st;
}

/* One fused pass: dx, dweight, dbias from the saved statistics. */
static tn_status ln_bw_fused(tn_node *n, tn_tensor *x, tn_tensor *w, tn_tensor *g, tn_tensor **gi) {
    tn_norm_bw_ops o;
    tn_status st = tn__norm_bw_begin(n, x, g, gi, &o);
    tn_ln_args a = {.mode = TN_LN_BWD, .dtype = x->dtype};
    ln_dims(x->ndim, x->shape, (int)ln_p(n)->nn, &a.rows, &a.cols);
    if (st == TN_OK) {
        TN_NORM_BW_PTRS(a, x, w, o, gi);
        st = tn__dev_layer_norm(&a, tn__dev(x), TN_NORM_BW_NOPS, TN_NORM_BW_OPS(x, w, o, gi), 7u);
    }
    tn__norm_bw_end(&o);
    return st;
}

static tn_status layer_norm_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return tn__norm_backward(n, go[0], gi, ln_bw_graph, ln_bw_fused);
}
static const tn_fn_info layer_norm_fn = {"NativeLayerNormBackward0", layer_norm_bw};

/* ---- forward ---------------------------------------------------------------------- */

static tn_status record(tn_tensor *out, const tn_tensor *x, const tn_tensor *w, const tn_tensor *b,
                        const tn_tensor *mean, const tn_tensor *rstd, int nn, double eps) {
    tn_node *n = tn__node_new(&layer_norm_fn, 3, (const tn_tensor *[]){x, w, b}, 4, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        *ln_p(n) = (ln_params){.nn = nn, .eps = eps};
        st = tn__node_save(n, 0, x, false);
    }
    if (st == TN_OK && w) st = tn__node_save(n, 1, w, false);
    if (st == TN_OK) st = tn__node_save(n, 2, mean, false);
    if (st == TN_OK) st = tn__node_save(n, 3, rstd, false);
    tn__node_release(n);
    return st;
}

/* The kernel on contiguous operands; mean and rstd are made here. */
static tn_tensor *ln_forward(const tn_tensor *x, int nn, const tn_tensor *w, const tn_tensor *b,
                             double eps, tn_tensor **mean, tn_tensor **rstd) {
    tn_device dev = tn__dev(x);
    tn_ln_args a = {.mode = TN_LN_FWD, .dtype = x->dtype, .eps = eps};
    ln_dims(x->ndim, x->shape, nn, &a.rows, &a.cols);
    tn_tensor *xc = tn__contiguous_on(x, dev);
    tn_tensor *wc = xc && w ? tn__contiguous_on(w, dev) : NULL;
    tn_tensor *bc = xc && b ? tn__contiguous_on(b, dev) : NULL;
    tn_tensor *y = xc && (wc || !w) && (bc || !b) ? tn__empty_like(xc) : NULL;
    *mean = y ? tn__empty_on(1, &a.rows, x->dtype, dev) : NULL;
    *rstd = *mean ? tn__empty_on(1, &a.rows, x->dtype, dev) : NULL;
    tn_status st = *rstd ? TN_OK : tn_last_status();
    if (st == TN_OK) {
        a.x = tn__ptr(xc);
        a.weight = wc ? tn__ptr(wc) : NULL;
        a.bias = bc ? tn__ptr(bc) : NULL;
        a.y = tn__ptr(y);
        a.mean = tn__ptr(*mean);
        a.rstd = tn__ptr(*rstd);
        const tn_tensor *ops[6] = {y, *mean, *rstd, xc, wc, bc};
        st = tn__dev_layer_norm(&a, dev, 6, ops, 7u);
    }
    /* no rows or no columns: nothing ran; mean and rstd are never read (the
     * backward's outputs are then empty or zeros) */
    tn_release(xc);
    tn_release(wc);
    tn_release(bc);
    if (st < 0) {
        tn_release(y);
        tn_release(*mean);
        tn_release(*rstd);
        *mean = *rstd = NULL;
        return NULL;
    }
    return y;
}

tn_tensor *tn_layer_norm(const tn_tensor *x, int n_norm_dims, const int64_t *normalized_shape,
                         const tn_tensor *weight, const tn_tensor *bias, double eps) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_LAYER_NORM, 3, (const tn_tensor *[]){x, weight, bias}))
        return tn__autocast_done(
            &f, f.ok ? tn_layer_norm(f.t[0], n_norm_dims, normalized_shape, f.t[1], f.t[2], eps)
                     : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(x, "input");
    if (n_norm_dims > 0) TN_CHECK_NULL_PTR(normalized_shape, "normalized_shape");
    if (check_args(x, n_norm_dims, normalized_shape, weight, bias) < 0) return NULL;
    tn_tensor *mean, *rstd;
    tn_tensor *out = ln_forward(x, n_norm_dims, weight, bias, eps, &mean, &rstd);
    if (!out) return NULL;
    if (tn__needs_grad(3, (const tn_tensor *[]){x, weight, bias}) &&
        record(out, x, weight, bias, mean, rstd, n_norm_dims, eps) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(mean);
    tn_release(rstd);
    tn__op_done("layer_norm", t0, out, 3, (const tn_tensor *[]){x, weight, bias});
    return tn__ret(out);
}
