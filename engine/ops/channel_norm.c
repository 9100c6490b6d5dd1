/* batch_norm and group_norm, forward and backward: normalisation over units of x's (N, C, *)
 * planes with a per-channel affine. The kernel is one fused pass each way (tn_cn_args,
 * engine/core/kernel_args.h; the CPU's in engine/cpu/channel_norm_kernels.c) through
 * tn__dev_channel_norm: the forward writes the output and each unit's mean and rstd, which the
 * plain backward reads. Under create_graph the backward is built from recorded public ops (the
 * statistics recomputed from x, so that they carry x's history), as layer_norm's.
 *
 * Node layout: NativeBatchNormBackward0 / NativeGroupNormBackward0: inputs {x, weight, bias}
 * (either of the last two may be NULL); saved {0: x, 1: weight, 2: mean, 3: rstd} (mean and
 * rstd contiguous (units)); parameters cn_params.
 */
#include "autocast.h"
#include "pointwise_driver.h"

typedef struct cn_params {
    int64_t groups; /* 0: batch norm (a unit per channel); else group norm */
    double eps;
    bool fixed; /* eval batch norm: mean and rstd are the running statistics, constants */
} cn_params;
TN_NODE_PARAMS(cn_params, cn_p)

/* x as (n, c, s) */
static void cn_dims(const tn_tensor *x, int64_t *n, int64_t *c, int64_t *s) {
    *n = x->shape[0];
    *c = x->shape[1];
    *s = tn__numel(x->ndim - 2, x->shape + 2);
}

static int64_t cn_units(const tn_tensor *x, int64_t groups) {
    return groups ? x->shape[0] * groups : x->shape[1];
}

/* ---- backward --------------------------------------------------------------------- */

/* The shape in which a unit's elements are contiguous dims: batch norm (n, c, s), statistics
 * over dims 0 and 2; group norm (n, groups, c / groups * s), over dim 2. */
typedef struct cn_graph {
    int64_t u3[3], c3[3], w3[3];
    int64_t groups;
} cn_graph;

static void graph_shapes(int ndim, const int64_t *shape, int64_t groups, cn_graph *gr) {
    *gr = (cn_graph){.groups = groups};
    gr->c3[0] = shape[0], gr->c3[1] = shape[1], gr->c3[2] = tn__numel(ndim - 2, shape + 2);
    gr->w3[0] = 1, gr->w3[1] = gr->c3[1], gr->w3[2] = 1;
    gr->u3[0] = gr->c3[0];
    gr->u3[1] = groups ? groups : gr->c3[1];
    gr->u3[2] = groups ? gr->c3[1] / groups * gr->c3[2] : gr->c3[2];
}

static tn_tensor *unit_mean(const cn_graph *gr, tn_tensor *t) {
    tn_tensor *m = tn_mean_dim(t, 2, true);
    if (gr->groups || !m) return m;
    tn_tensor *m0 = tn_mean_dim(m, 0, true);
    tn_release(m);
    return m0;
}

/* sum over dims 0 and 2 of t (n, c, s), reshaped to the parameter's shape and dtype */
static tn_tensor *channel_sum(tn_tensor *t, const tn_input_meta *pm) {
    tn_tensor *s2 = tn_sum_dim(t, 2, false), *s0 = s2 ? tn_sum_dim(s2, 0, false) : NULL;
    tn_tensor *r = s0 ? tn_reshape(s0, pm->ndim, pm->shape) : NULL;
    tn_tensor *out = r && tn_dtype_of(r) != pm->dtype ? tn__to_dtype_autograd(r, pm->dtype) : r;
    if (out != r) tn_release(r);
    tn_release(s2);
    tn_release(s0);
    return out;
}

/* Recorded public ops: xhat = (x - mu) rs per unit (recomputed from x unless fixed), wg = g w:
 * dx = rs (wg - mean(wg) - xhat mean(wg xhat)) (fixed: rs wg); dweight = the channels' sums of
 * g xhat; dbias = of g. */
static tn_status cn_bw_graph(tn_node *n, tn_tensor *x, tn_tensor *w, tn_tensor *g, tn_tensor **gi) {
    const tn_input_meta *m = &n->in_meta[0];
    const cn_params *p = cn_p(n);
    cn_graph gr;
    graph_shapes(m->ndim, m->shape, p->groups, &gr);
    tn_tensor *mean = p->fixed ? tn__node_unpack(n, 2) : NULL;
    tn_tensor *rstd = mean ? tn__node_unpack(n, 3) : NULL;
    enum { NT = 22 };
    tn_tensor *t[NT] = {0};
    tn_status st = p->fixed && !rstd ? tn_last_status() : TN_OK;
#define STEP(i, expr)                                                                              \
    if (st == TN_OK && !(t[i] = (expr))) st = tn_last_status()
    STEP(0, tn_reshape(x, 3, gr.u3));
    if (p->fixed) {
        STEP(1, tn_reshape(mean, 3, gr.w3));
        STEP(2, tn_sub(t[0], t[1])); /* xc */
        STEP(6, tn_reshape(rstd, 3, gr.w3));
    } else {
        STEP(1, unit_mean(&gr, t[0]));
        STEP(2, tn_sub(t[0], t[1])); /* xc */
        STEP(3, tn_mul(t[2], t[2]));
        STEP(4, unit_mean(&gr, t[3])); /* var */
        STEP(5, tn_add_scalar(t[4], p->eps));
        STEP(6, tn_pow_scalar(t[5], -0.5)); /* rs */
    }
    STEP(7, tn_mul(t[2], t[6]));         /* xhat, unit shape */
    STEP(8, tn_reshape(t[7], 3, gr.c3)); /* xhat, channel shape */
    STEP(9, tn_reshape(g, 3, gr.c3));
    STEP(10, w ? tn_reshape(w, 3, gr.w3) : tn__retain(t[9]));
    STEP(11, w ? tn_mul(t[9], t[10]) : tn__retain(t[9]));
    STEP(12, tn_reshape(t[11], 3, gr.u3)); /* wg, unit shape */
    if (tn__edge_valid(&n->edges[0])) {
        if (p->fixed) {
            STEP(17, tn_mul(t[12], t[6]));
        } else {
            STEP(13, unit_mean(&gr, t[12]));
            STEP(14, tn_mul(t[12], t[7]));
            STEP(15, unit_mean(&gr, t[14]));
            STEP(16, tn_sub(t[12], t[13]));
            STEP(18, tn_mul(t[7], t[15]));
            STEP(19, tn_sub(t[16], t[18]));
            STEP(17, tn_mul(t[6], t[19]));
        }
        STEP(20, tn_reshape(t[17], m->ndim, m->shape));
        if (st == TN_OK && tn_dtype_of(t[20]) != m->dtype)
            gi[0] = tn__to_dtype_autograd(t[20], m->dtype);
        else if (st == TN_OK)
            gi[0] = tn__retain(t[20]);
        if (st == TN_OK && !gi[0]) st = tn_last_status();
    }
    if (tn__edge_valid(&n->edges[1])) {
        STEP(21, tn_mul(t[9], t[8]));
        if (st == TN_OK && !(gi[1] = channel_sum(t[21], &n->in_meta[1]))) st = tn_last_status();
    }
    if (tn__edge_valid(&n->edges[2]) && st == TN_OK && !(gi[2] = channel_sum(t[9], &n->in_meta[2])))
        st = tn_last_status();
#undef STEP
    for (int i = 0; i < NT; i++)
        tn_release(t[i]);
    tn_release(mean);
    tn_release(rstd);
    return st;
}

/* One fused pass: dx, dweight, dbias from the saved statistics (x, w contiguous). */
static tn_status cn_bw_fused(tn_node *n, tn_tensor *x, tn_tensor *w, tn_tensor *g, tn_tensor **gi) {
    tn_norm_bw_ops o;
    tn_status st = tn__norm_bw_begin(n, x, g, gi, &o);
    const cn_params *p = cn_p(n);
    tn_cn_args a = {.mode = TN_CN_BWD, .dtype = x->dtype, .groups = p->groups, .fixed = p->fixed};
    cn_dims(x, &a.n, &a.c, &a.s);
    if (st == TN_OK) {
        TN_NORM_BW_PTRS(a, x, w, o, gi);
        st = tn__dev_channel_norm(&a, tn__dev(x), TN_NORM_BW_NOPS, TN_NORM_BW_OPS(x, w, o, gi), 7u);
    }
    tn__norm_bw_end(&o);
    return st;
}

static tn_status cn_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return tn__norm_backward(n, go[0], gi, cn_bw_graph, cn_bw_fused);
}
static const tn_fn_info batch_norm_fn = {"NativeBatchNormBackward0", cn_bw};
static const tn_fn_info group_norm_fn = {"NativeGroupNormBackward0", cn_bw};

/* ---- forward ---------------------------------------------------------------------- */

static tn_status record(tn_tensor *out, const tn_tensor *x, const tn_tensor *w, const tn_tensor *b,
                        const tn_tensor *mean, const tn_tensor *rstd, cn_params prm) {
    const tn_fn_info *fn = prm.groups ? &group_norm_fn : &batch_norm_fn;
    tn_node *n = tn__node_new(fn, 3, (const tn_tensor *[]){x, w, b}, 4, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        *cn_p(n) = prm;
        st = tn__node_save(n, 0, x, false);
    }
    if (st == TN_OK && w) st = tn__node_save(n, 1, w, false);
    if (st == TN_OK) st = tn__node_save(n, 2, mean, false);
    if (st == TN_OK) st = tn__node_save(n, 3, rstd, false);
    tn__node_release(n);
    return st;
}

/* A running statistic is given to the kernel contiguous (tn__contiguous_on): r itself, or a
 * copy whose update is copied back here, so that it shows through r's view. */
static tn_status finish_running(const tn_tensor *r, tn_tensor *rc, tn_status st) {
    if (st == TN_OK && r && rc != r) st = tn__copy_into((tn_tensor *)r, rc);
    tn_release(rc);
    return st;
}

/* The statistics' dtype: x's, float32 for a half x (rounding them to the half would cost the
 * backward its cancellation: xhat from a rounded mean) */
static tn_dtype stats_dtype(const tn_tensor *x) {
    return tn__is_half(x->dtype) ? TN_F32 : x->dtype;
}

/* The kernel on contiguous operands; mean and rstd are made here. p: {weight, bias,
 * running_mean, running_var}; fixed: the running statistics are read, else updated (when set). */
static tn_tensor *cn_forward(const tn_tensor *x, const tn_tensor *const p[4], cn_params prm,
                             double momentum, tn_tensor **mean, tn_tensor **rstd) {
    tn_device dev = tn__dev(x);
    tn_cn_args a = {.mode = TN_CN_FWD,
                    .dtype = x->dtype,
                    .groups = prm.groups,
                    .eps = prm.eps,
                    .fixed = prm.fixed,
                    .momentum = momentum};
    cn_dims(x, &a.n, &a.c, &a.s);
    int64_t units = cn_units(x, prm.groups);
    tn_dtype sdt = stats_dtype(x);
    tn_tensor *xc = tn__contiguous_on(x, dev), *pc[4] = {0};
    bool ok = xc != NULL;
    for (int i = 0; i < 4 && ok; i++)
        ok = !p[i] || (pc[i] = tn__contiguous_on(p[i], dev));
    tn_tensor *y = ok ? tn__empty_like(xc) : NULL;
    *mean = y ? tn__empty_on(1, &units, sdt, dev) : NULL;
    *rstd = *mean ? tn__empty_on(1, &units, sdt, dev) : NULL;
    tn_status st =
        *rstd && (!prm.fixed || tn__copy_into(*mean, pc[2]) == TN_OK) ? TN_OK : tn_last_status();
    if (st == TN_OK) {
        a.x = tn__ptr(xc);
        a.weight = pc[0] ? tn__ptr(pc[0]) : NULL;
        a.bias = pc[1] ? tn__ptr(pc[1]) : NULL;
        a.y = tn__ptr(y);
        a.mean = tn__ptr(*mean);
        a.rstd = tn__ptr(*rstd);
        if (prm.fixed) {
            a.var = tn__ptr(pc[3]);
        } else {
            a.running_mean = pc[2] ? tn__ptr(pc[2]) : NULL;
            a.running_var = pc[3] ? tn__ptr(pc[3]) : NULL;
        }
        const tn_tensor *ops[9] = {y, *mean, *rstd, pc[2], pc[3], xc, pc[0], pc[1]};
        unsigned written = prm.fixed ? 7u : 31u;
        st = tn__dev_channel_norm(&a, dev, 8, ops, written);
    }
    tn_release(xc);
    tn_release(pc[0]);
    tn_release(pc[1]);
    st = finish_running(prm.fixed ? NULL : p[2], pc[2], st);
    st = finish_running(prm.fixed ? NULL : p[3], pc[3], st);
    if (st < 0) {
        tn_release(y);
        tn_release(*mean);
        tn_release(*rstd);
        *mean = *rstd = NULL;
        return NULL;
    }
    return y;
}

/* The forward, its node when an input requires grad, the profiler's span. */
static tn_tensor *cn_run(const char *op, const tn_tensor *x, const tn_tensor *const p[4],
                         cn_params prm, double momentum) {
    double t0 = tn__prof_start();
    tn_tensor *mean, *rstd;
    tn_tensor *out = cn_forward(x, p, prm, momentum, &mean, &rstd);
    if (!out) return NULL;
    if (tn__needs_grad(3, (const tn_tensor *[]){x, p[0], p[1]}) &&
        record(out, x, p[0], p[1], mean, rstd, prm) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(mean);
    tn_release(rstd);
    tn__op_done(op, t0, out, 3, (const tn_tensor *[]){x, p[0], p[1]});
    return tn__ret(out);
}

/* ---- checks (PyTorch 1.13's texts and order) ---------------------------------------- */

static tn_status dim_error(void) {
    return tn__error(TN_ERR_SHAPE,
                     "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

/* torch.nn.functional's _verify_batch_size: size[0] * prod(size[2:]) must not be 1. Sizes are
 * >= 0, so the product is 1 exactly when every factor is: no product is formed, which beside a
 * zero-size channel dim (numel 0) could overflow. */
static tn_status check_batch(int ndim, const int64_t *size) {
    bool one = size[0] == 1;
    for (int i = 2; i < ndim && one; i++)
        one = size[i] == 1;
    if (!one) return TN_OK;
    char s[200];
    tn__format_shape(s, sizeof s, ndim, size);
    return tn__error(TN_ERR_SHAPE,
                     "Expected more than 1 value per channel when training, got input size %s", s);
}

static tn_status check_float(const tn_tensor *x, const char *kernel) {
    if (tn__is_float(x->dtype)) return TN_OK;
    return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for '%s'", kernel,
                     tn__torch_scalar_name(x->dtype));
}

/* batch_norm's parameters, p = {weight, bias, running_mean, running_var}: all of x's dtype, or
 * (a half x) all float32, as PyTorch's CPU check_mixed_data_type; the first one set decides. */
static tn_status check_mixed(const tn_tensor *x, const tn_tensor *const p[4]) {
    int first = 0;
    while (first < 4 && !p[first])
        first++;
    if (first == 4) return TN_OK;
    if (p[first]->dtype == x->dtype) {
        for (int i = first + 1; i < 4; i++)
            if (p[i] && p[i]->dtype != x->dtype)
                return tn__error(TN_ERR_DTYPE, "expected scalar type %s but found %s",
                                 tn__torch_scalar_name(x->dtype),
                                 tn__torch_scalar_name(p[i]->dtype));
        return TN_OK;
    }
    for (int i = first; i < 4; i++)
        if (p[i] && p[i]->dtype != TN_F32)
            return tn__error(TN_ERR_DTYPE,
                             "mixed dtype (CPU): expect parameter to have scalar type of Float");
    if (!tn__is_half(x->dtype))
        return tn__error(TN_ERR_DTYPE,
                         "mixed dtype (CPU): expect input to have scalar type of BFloat16");
    return TN_OK;
}

static tn_status check_batch_norm(const tn_tensor *x, const tn_tensor *const p[4], bool training) {
    static const char *const names[4] = {"weight", "bias", "running_mean", "running_var"};
    if (x->ndim >= 1 && training && check_batch(x->ndim, x->shape) < 0) return tn_last_status();
    if (x->ndim >= 2)
        for (int k = 0; k < 4; k++) {
            int i = (k + 2) % 4; /* running_mean, running_var, weight, bias */
            if (p[i] && tn_numel(p[i]) != x->shape[1])
                return tn__error(TN_ERR_SHAPE, "%s should contain %lld elements not %lld", names[i],
                                 (long long)x->shape[1], (long long)tn_numel(p[i]));
        }
    if (!training && (!p[2] || !p[3]))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s must be defined in evaluation mode",
                         p[2] ? "running_var" : "running_mean");
    if (x->ndim < 2) return dim_error();
    for (int i = 2; i < 4 && tn__grad_enabled(); i++)
        if (tn__requires_grad(p[i]))
            return tn__error(TN_ERR_AUTOGRAD,
                             "The function 'native_batch_norm' is not differentiable with "
                             "respect to argument '%s'. This input cannot have requires_grad "
                             "True.",
                             names[i]);
    tn_status st = check_float(x, "batch_norm");
    if (st == TN_OK) st = check_mixed(x, p);
    tn_device dev;
    if (st == TN_OK)
        st = tn__result_device(5, (const tn_tensor *[]){x, p[0], p[1], p[2], p[3]}, &dev);
    return st;
}

tn_tensor *tn_batch_norm(const tn_tensor *input, tn_tensor *running_mean, tn_tensor *running_var,
                         const tn_tensor *weight, const tn_tensor *bias, bool training,
                         double momentum, double eps) {
    TN_CHECK_NULL_ARG(input, "input");
    const tn_tensor *p[4] = {weight, bias, running_mean, running_var};
    if (check_batch_norm(input, p, training) < 0) return NULL;
    if (tn_numel(input) == 0) /* PyTorch's shortcut: a copy, the statistics untouched */
        return tn__ret(tn__clone_recorded(input));
    return cn_run("batch_norm", input, p, (cn_params){.eps = eps, .fixed = !training}, momentum);
}

static tn_status check_group_norm(const tn_tensor *x, int64_t groups, const tn_tensor *w,
                                  const tn_tensor *b) {
    if (x->ndim < 2) return dim_error();
    int64_t n = x->shape[0], c = x->shape[1];
    int64_t nc;
    /* the Python layer's check on [n * c / groups, groups, *]; when n * c overflows, a later
     * dim is 0 (numel fits int64), and the check passes */
    if (groups > 0 && !__builtin_mul_overflow(n, c, &nc)) {
        int64_t size[TN_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++)
            size[i] = x->shape[i];
        size[0] = nc / groups, size[1] = groups;
        if (check_batch(x->ndim, size) < 0) return tn_last_status();
    }
    char xs[200], ps[200];
    tn__format_shape(xs, sizeof xs, x->ndim, x->shape);
    if (groups <= 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "Expected num groups to be greater than 0, got %lld", (long long)groups);
    if (c % groups)
        return tn__error(TN_ERR_SHAPE,
                         "Expected number of channels in input to be divisible by num_groups, "
                         "but got input of shape %s and num_groups=%lld",
                         xs, (long long)groups);
    /* PyTorch 1.13 prints weight's shape in the bias message too ([0] when weight is undefined) */
    if (w)
        tn__format_shape(ps, sizeof ps, w->ndim, w->shape);
    else
        snprintf(ps, sizeof ps, "[0]");
    for (int i = 0; i < 2; i++) {
        const tn_tensor *t = i ? b : w;
        if (t && (t->ndim != 1 || t->shape[0] != c))
            return tn__error(TN_ERR_SHAPE,
                             "Expected %s to be a vector of size equal to the number of channels "
                             "in input, but got %s of shape %s and input of shape %s",
                             i ? "bias" : "weight", i ? "bias" : "weight", ps, xs);
    }
    tn_status st = check_float(x, "GroupNormKernelImpl");
    for (int i = 0; i < 2 && st == TN_OK; i++) {
        const tn_tensor *t = i ? b : w;
        if (t && t->dtype != x->dtype)
            st = tn__error(TN_ERR_DTYPE, "expected scalar type %s but found %s",
                           tn__torch_scalar_name(x->dtype), tn__torch_scalar_name(t->dtype));
    }
    tn_device dev;
    if (st == TN_OK) st = tn__result_device(3, (const tn_tensor *[]){x, w, b}, &dev);
    int64_t units; /* the statistics are (n, groups): only an empty input can overflow them */
    if (st == TN_OK && __builtin_mul_overflow(n, groups, &units)) {
        tn__format_shape(ps, sizeof ps, 2, (const int64_t[]){n, groups});
        st = tn__error(TN_ERR_SHAPE, "the number of elements of shape %s overflows int64", ps);
    }
    return st;
}

tn_tensor *tn_group_norm(const tn_tensor *input, int64_t num_groups, const tn_tensor *weight,
                         const tn_tensor *bias, double eps) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_GROUP_NORM, 3, (const tn_tensor *[]){input, weight, bias}))
        return tn__autocast_done(&f, f.ok ? tn_group_norm(f.t[0], num_groups, f.t[1], f.t[2], eps)
                                          : NULL);
    TN_CHECK_NULL_ARG(input, "input");
    if (check_group_norm(input, num_groups, weight, bias) < 0) return NULL;
    const tn_tensor *p[4] = {weight, bias, NULL, NULL};
    return cn_run("group_norm", input, p, (cn_params){.groups = num_groups, .eps = eps}, 0);
}
