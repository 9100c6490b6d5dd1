/* Pooling over 2-D windows (PyTorch 1.13's torch.nn.functional.max_pool2d,
 * avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d), forward and
 * backward. An input (N, C, H, W) or unbatched (C, H, W) is N*C contiguous
 * planes for the kernels (the backend's `pool` entry, tn_pool_args); the
 * tensors keep their shapes.
 *
 * Two primitives per family, each recording a node when its input needs grad:
 *   FWD (x) -> y         the pooling (max: also the indices, int64, flat
 *                        h*W + w in the plane, as PyTorch's return_indices)
 *   BWD (g, x) -> x-like the input gradient: max scatters g to the indices,
 *                        average spreads g / divisor over each window
 * FWD's gradient is BWD. BWD is linear in g: its gradient is average FWD
 * applied to the incoming gradient (the adjoint), or for max the gather at
 * the indices (composed from tn_gather, which records its own node); x only
 * gives BWD PyTorch's edge (its gradient is zeros), so derivatives of any
 * order are exact.
 *
 * Node layout: MaxPool2DWithIndicesBackward0 / AvgPool2DBackward0 /
 * AdaptiveAvgPool2DBackward0 / AdaptiveMaxPool2DBackward0 (FWD): inputs {x},
 * saved {0: x, 1: indices (max)}; their ...BackwardBackward0 (BWD): inputs
 * {g, x}, saved {0: indices (max)}. Parameters pool_params: the family and
 * the geometry.
 */
#include "pointwise_driver.h"

enum { POOL_MAX, POOL_AMAX, POOL_AVG, POOL_AAVG, POOL_FAMILIES };

typedef struct pool_geom {
    int64_t h, w, oh, ow;                   /* one plane of x and of y */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw; /* sliding windows */
} pool_geom;
#define POOL_NFIELDS 12
_Static_assert(sizeof(pool_geom) == POOL_NFIELDS * sizeof(int64_t), "pool_geom is its fields");

/* The family, the geometry (each field checked to fit 32 bits at the op) and
 * average pooling's options, in a node. */
typedef struct pool_params {
    int64_t divisor; /* 0: none */
    int32_t g[POOL_NFIELDS];
    int8_t family;
    bool bwd;
    bool count_include_pad;
} pool_params;
TN_NODE_PARAMS(pool_params, pool_p)

typedef struct pool_call {
    int family;
    pool_geom g;
    bool count_include_pad;
    int64_t divisor;
} pool_call;

static void call_pack(pool_params *p, const pool_call *c, bool bwd) {
    const int64_t *f = &c->g.h;
    *p = (pool_params){.divisor = c->divisor,
                       .family = (int8_t)c->family,
                       .bwd = bwd,
                       .count_include_pad = c->count_include_pad};
    for (int i = 0; i < POOL_NFIELDS; i++)
        p->g[i] = (int32_t)f[i];
}

static void call_unpack(const pool_params *p, pool_call *c) {
    int64_t *f = &c->g.h;
    *c = (pool_call){
        .family = p->family, .count_include_pad = p->count_include_pad, .divisor = p->divisor};
    for (int i = 0; i < POOL_NFIELDS; i++)
        f[i] = p->g[i];
}

static bool is_max(int family) { return family == POOL_MAX || family == POOL_AMAX; }

/* ---- the kernels (no autograd) ------------------------------------------------------- */

/* Runs mode on contiguous in (numel: planes * the side's plane) into out. */
static tn_status run_kernel(const pool_call *c, int mode, tn_tensor *in, tn_tensor *out,
                            tn_tensor *idx) {
    const pool_geom *g = &c->g;
    bool fwd = mode == TN_POOL_MAX_FWD || mode == TN_POOL_AVG_FWD;
    const tn_tensor *x = fwd ? in : out; /* h and w are never 0 (checked at the op) */
    tn_pool_args a = {.mode = mode,
                      .dtype = in->dtype,
                      .adaptive = c->family == POOL_AMAX || c->family == POOL_AAVG,
                      .count_include_pad = c->count_include_pad,
                      .divisor = c->divisor,
                      .planes = tn__numel(x->ndim, x->shape) / (g->h * g->w),
                      .h = g->h,
                      .w = g->w,
                      .oh = g->oh,
                      .ow = g->ow,
                      .kh = g->kh,
                      .kw = g->kw,
                      .sh = g->sh,
                      .sw = g->sw,
                      .ph = g->ph,
                      .pw = g->pw,
                      .dh = g->dh,
                      .dw = g->dw,
                      .in = tn__ptr(in),
                      .out = tn__ptr(out),
                      .idx = idx ? (int64_t *)tn__ptr(idx) : NULL};
    return tn__dev_pool(&a, tn__dev(in), (const tn_tensor *[]){out, in, idx});
}

/* The result of FWD (shape out_shape; max: *idx too) or BWD (x's shape) on
 * a, no autograd. */
static tn_tensor *run_prim(const pool_call *c, bool bwd, const tn_tensor *a, tn_tensor *idx_in,
                           int nd, const int64_t *shape, tn_tensor **idx_out) {
    tn_device dev = tn__dev(a);
    bool max = is_max(c->family);
    int mode =
        max ? (bwd ? TN_POOL_MAX_BWD : TN_POOL_MAX_FWD) : (bwd ? TN_POOL_AVG_BWD : TN_POOL_AVG_FWD);
    tn_tensor *out = tn__empty_on(nd, shape, a->dtype, dev);
    tn_tensor *idx = idx_in ? tn_retain(idx_in) : NULL;
    if (out && max && !bwd) idx = tn__empty_on(nd, shape, TN_I64, dev);
    tn_tensor *ac = out && (idx || !max) ? tn__contiguous_on(a, dev) : NULL;
    tn_status st = ac ? run_kernel(c, mode, ac, out, idx) : tn_last_status();
    tn_release(ac);
    if (st == TN_OK && idx_out) {
        *idx_out = idx;
        idx = NULL;
    }
    tn_release(idx);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* ---- recorded primitives and their backward ------------------------------------------ */

static tn_tensor *prim(const pool_call *c, bool bwd, tn_tensor *a, tn_tensor *x, tn_tensor *idx,
                       int nd, const int64_t *shape, tn_tensor **idx_out);

/* The gather at the indices: y-shaped (nd, shape) values of z (x-shaped). */
static tn_tensor *gather_at(const pool_call *c, tn_tensor *z, tn_tensor *idx, int nd,
                            const int64_t *shape) {
    int64_t hw = c->g.h * c->g.w, ohw = c->g.oh * c->g.ow;
    int64_t planes = tn__numel(z->ndim, z->shape) / hw;
    tn_tensor *z2 = tn_reshape(z, 2, (int64_t[]){planes, hw});
    tn_tensor *i2 = z2 ? tn_reshape(idx, 2, (int64_t[]){planes, ohw}) : NULL;
    tn_tensor *r = i2 ? tn_gather(z2, 1, i2) : NULL;
    tn_tensor *out = r ? tn_reshape(r, nd, shape) : NULL;
    tn_release(z2);
    tn_release(i2);
    tn_release(r);
    return out;
}

static tn_status pool_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    pool_call c;
    call_unpack(pool_p(n), &c);
    bool max = is_max(c.family), bwd = pool_p(n)->bwd;
    tn_tensor *x = NULL, *idx = NULL;
    tn_status st = TN_OK;
    if (!bwd && !(x = tn__node_unpack(n, 0))) st = tn_last_status();
    if (st == TN_OK && max && !(idx = tn__node_unpack(n, bwd ? 0 : 1))) st = tn_last_status();
    const tn_input_meta *m = &n->in_meta[0];
    if (st == TN_OK && tn__edge_valid(&n->edges[0])) {
        if (!bwd) /* FWD's gradient: BWD(g) */
            gi[0] = prim(&c, true, go[0], x, idx, m->ndim, m->shape, NULL);
        else if (max) /* BWD's gradient in g: the gather at the indices */
            gi[0] = gather_at(&c, go[0], idx, m->ndim, m->shape);
        else /* average BWD's gradient in g: the forward (its adjoint) */
            gi[0] = prim(&c, false, go[0], NULL, NULL, m->ndim, m->shape, NULL);
        if (!gi[0]) st = tn_last_status();
    }
    if (st == TN_OK && bwd && tn__edge_valid(&n->edges[1])) { /* PyTorch: zeros for x */
        m = &n->in_meta[1];
        if (!(gi[1] = tn__zeros_on(m->ndim, m->shape, m->dtype, m->device))) st = tn_last_status();
    }
    tn_release(x);
    tn_release(idx);
    return st; /* the engine releases gi[] on failure */
}

static const tn_fn_info fwd_fn[POOL_FAMILIES] = {
    [POOL_MAX] = {"MaxPool2DWithIndicesBackward0", pool_bw},
    [POOL_AMAX] = {"AdaptiveMaxPool2DBackward0", pool_bw},
    [POOL_AVG] = {"AvgPool2DBackward0", pool_bw},
    [POOL_AAVG] = {"AdaptiveAvgPool2DBackward0", pool_bw},
};
static const tn_fn_info bwd_fn[POOL_FAMILIES] = {
    [POOL_MAX] = {"MaxPool2DWithIndicesBackwardBackward0", pool_bw},
    [POOL_AMAX] = {"AdaptiveMaxPool2DBackwardBackward0", pool_bw},
    [POOL_AVG] = {"AvgPool2DBackwardBackward0", pool_bw},
    [POOL_AAVG] = {"AdaptiveAvgPool2DBackwardBackward0", pool_bw},
};

static tn_status record(const pool_call *c, bool bwd, tn_tensor *out, tn_tensor *a, tn_tensor *x,
                        tn_tensor *idx) {
    int nin = bwd ? 2 : 1, nsaved = bwd ? 1 : 2;
    const tn_tensor *in[2] = {a, x};
    tn_node *n = tn__node_new(bwd ? &bwd_fn[c->family] : &fwd_fn[c->family], nin, in, nsaved, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        call_pack(pool_p(n), c, bwd);
        if (!bwd) st = tn__node_save(n, 0, a, false);
    }
    if (st == TN_OK && idx) st = tn__node_save(n, bwd ? 0 : 1, idx, false);
    tn__node_release(n);
    return st;
}

/* Runs FWD on a (x unused) or BWD on the gradient a (x: the forward's input,
 * for the node's edge; idx: max's indices) and records the node when an
 * input needs grad. */
static tn_tensor *prim(const pool_call *c, bool bwd, tn_tensor *a, tn_tensor *x, tn_tensor *idx,
                       int nd, const int64_t *shape, tn_tensor **idx_out) {
    tn_tensor *ix = NULL;
    tn_tensor *out = run_prim(c, bwd, a, idx, nd, shape, bwd ? NULL : &ix);
    if (!out) return NULL;
    tn_status st = TN_OK;
    if (tn__needs_grad(bwd ? 2 : 1, (const tn_tensor *[]){a, x}))
        st = record(c, bwd, out, a, x, bwd ? idx : ix);
    if (st < 0) {
        tn_release(out);
        tn_release(ix);
        return NULL;
    }
    if (idx_out)
        *idx_out = ix;
    else
        tn_release(ix);
    return out;
}

/* ---- checks (PyTorch 1.13's texts, in its order) and the public ops -------------------- */

/* Window parameters as given (NULL stride: the kernel; padding 0; dilation 1). */
typedef struct pool_opts {
    const char *name; /* "max_pool2d", ... */
    int64_t k[2], s[2], p[2], d[2];
    bool ceil_mode;
} pool_opts;

/* The sizes the node keeps must fit its 32-bit fields; the formulas then fit 64 bits. */
static tn_status check_fits(const char *name, int n, const int64_t *v) {
    for (int i = 0; i < n; i++)
        if (v[i] > INT32_MAX || v[i] < -INT32_MAX)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "%s: sizes, kernel sizes, strides, paddings and dilations must be "
                             "below 2^31",
                             name);
    return TN_OK;
}

/* PyTorch's pooling_output_shape: floor division, and in ceil mode the last
 * window must start inside the input or its left padding. */
static tn_status out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode,
                          int64_t *out) {
    if (s == 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "stride should not be zero");
    if (pad < 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "pad must be non-negative, but got pad: %lld",
                         (long long)pad);
    if (pad > k / 2)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "pad should be at most half of kernel size, but got pad=%lld and "
                         "kernel_size=%lld",
                         (long long)pad, (long long)k);
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t q = num / s;
    if ((num % s != 0) && ((num < 0) != (s < 0))) q--; /* round toward -inf */
    *out = q + 1;
    if (ceil_mode && (*out - 1) * s >= in + pad) --*out;
    return TN_OK;
}

/* pool2d_shape_check's checks past the output size's. */
static tn_status shape_check(const pool_opts *o, const tn_tensor *x, int64_t oh, int64_t ow) {
    char s[160];
    if (o->k[0] <= 0 || o->k[1] <= 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "kernel size should be greater than zero, but got kH: %lld kW: %lld",
                         (long long)o->k[0], (long long)o->k[1]);
    if (o->s[0] <= 0 || o->s[1] <= 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "stride should be greater than zero, but got dH: %lld dW: %lld",
                         (long long)o->s[0], (long long)o->s[1]);
    if (o->d[0] <= 0 || o->d[1] <= 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "dilation should be greater than zero, but got dilationH: %lld "
                         "dilationW: %lld",
                         (long long)o->d[0], (long long)o->d[1]);
    int nd = x->ndim;
    bool valid = nd >= 3 && x->shape[nd - 2] != 0 && x->shape[nd - 3] != 0;
    if (!((nd == 3 && x->shape[0] != 0 && valid) || (nd == 4 && valid && x->shape[3] != 0))) {
        tn__format_shape(s, sizeof s, nd, x->shape);
        return tn__error(TN_ERR_SHAPE,
                         "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                         "for input, but got:%s",
                         s);
    }
    if (o->k[1] / 2 < o->p[1] || o->k[0] / 2 < o->p[0])
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "pad should be at most half of kernel size, but got pad=%lld and "
                         "kernel_size=%lld",
                         (long long)o->p[1], (long long)o->k[1]);
    if (oh < 1 || ow < 1) {
        const int64_t *sh = x->shape + nd - 3;
        return tn__error(TN_ERR_SHAPE,
                         "Given input size: (%lldx%lldx%lld). Calculated output size: "
                         "(%lldx%lldx%lld). Output size is too small",
                         (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)sh[0],
                         (long long)oh, (long long)ow);
    }
    return TN_OK;
}

static tn_status check_float(const char *name, const tn_tensor *x) {
    if (tn__is_float(x->dtype))
        return TN_OK; /* PyTorch computes integer averages; tenet does not */
    return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for '%s'", name,
                     tn__torch_scalar_name(x->dtype));
}

/* The sliding-window geometry of x (rank checked) under o. */
static tn_status window_geom(const pool_opts *o, const tn_tensor *x, pool_geom *g) {
    if (check_fits(o->name, 2, o->k) < 0 || check_fits(o->name, 2, o->s) < 0 ||
        check_fits(o->name, 2, o->p) < 0 || check_fits(o->name, 2, o->d) < 0 ||
        check_fits(o->name, 2, x->shape + x->ndim - 2) < 0)
        return tn_last_status();
    int nd = x->ndim;
    *g = (pool_geom){.h = x->shape[nd - 2],
                     .w = x->shape[nd - 1],
                     .kh = o->k[0],
                     .kw = o->k[1],
                     .sh = o->s[0],
                     .sw = o->s[1],
                     .ph = o->p[0],
                     .pw = o->p[1],
                     .dh = o->d[0],
                     .dw = o->d[1]};
    tn_status st = out_size(g->h, g->kh, g->ph, g->sh, g->dh, o->ceil_mode, &g->oh);
    if (st == TN_OK) st = out_size(g->w, g->kw, g->pw, g->sw, g->dw, o->ceil_mode, &g->ow);
    if (st == TN_OK) st = shape_check(o, x, g->oh, g->ow);
    if (st == TN_OK) st = check_float(o->name, x);
    return st;
}

/* x's shape with the last two dims oh, ow. */
static void out_shape(const tn_tensor *x, const pool_geom *g, int64_t *shape) {
    for (int i = 0; i < x->ndim - 2; i++)
        shape[i] = x->shape[i];
    shape[x->ndim - 2] = g->oh;
    shape[x->ndim - 1] = g->ow;
}

/* The public ops' tail: FWD on a checked call, the profiler's span. */
static tn_tensor *pool_run(const char *name, const pool_call *c, const tn_tensor *x, double t0,
                           tn_tensor **indices) {
    int64_t shape[4];
    out_shape(x, &c->g, shape);
    tn_tensor *ix = NULL;
    tn_tensor *out = prim(c, false, (tn_tensor *)x, NULL, NULL, x->ndim, shape, &ix);
    if (out && indices)
        *indices = tn__ret(ix);
    else
        tn_release(ix);
    tn__op_done(name, t0, out, 1, (const tn_tensor *[]){x});
    return tn__ret(out);
}

static void opts_fill(pool_opts *o, const int64_t *k, const int64_t *s, const int64_t *p,
                      const int64_t *d) {
    for (int i = 0; i < 2; i++) {
        o->k[i] = k[i];
        o->s[i] = s ? s[i] : k[i];
        o->p[i] = p ? p[i] : 0;
        o->d[i] = d ? d[i] : 1;
    }
}

static tn_tensor *max_pool_entry(const char *fn, const tn_tensor *input, const int64_t *k,
                                 const int64_t *s, const int64_t *p, const int64_t *d,
                                 bool ceil_mode, tn_tensor **indices) {
    double t0 = tn__prof_start();
    TN_CHECK_NULL_ARG_IN(fn, input, "input");
    TN_CHECK_NULL_(fn, k, "kernel_size", false, NULL);
    if (indices) *indices = NULL;
    if (input->ndim != 3 && input->ndim != 4) {
        tn__error(TN_ERR_SHAPE, "non-empty 3D or 4D (batch mode) tensor expected for input");
        return NULL;
    }
    pool_opts o = {.name = "max_pool2d", .ceil_mode = ceil_mode};
    opts_fill(&o, k, s, p, d);
    pool_call c = {.family = POOL_MAX};
    if (window_geom(&o, input, &c.g) < 0) return NULL;
    return pool_run("max_pool2d", &c, input, t0, indices);
}

tn_tensor *tn_max_pool2d(const tn_tensor *input, const int64_t kernel_size[2],
                         const int64_t stride[2], const int64_t padding[2],
                         const int64_t dilation[2], bool ceil_mode) {
    return max_pool_entry(__func__, input, kernel_size, stride, padding, dilation, ceil_mode, NULL);
}

tn_tensor *tn_max_pool2d_with_indices(const tn_tensor *input, const int64_t kernel_size[2],
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t dilation[2], bool ceil_mode,
                                      tn_tensor **indices) {
    TN_CHECK_NULL_PTR(indices, "indices");
    return max_pool_entry(__func__, input, kernel_size, stride, padding, dilation, ceil_mode,
                          indices);
}

tn_tensor *tn_avg_pool2d(const tn_tensor *input, const int64_t kernel_size[2],
                         const int64_t stride[2], const int64_t padding[2], bool ceil_mode,
                         bool count_include_pad, int64_t divisor_override) {
    double t0 = tn__prof_start();
    TN_CHECK_NULL_ARG(input, "input");
    TN_CHECK_NULL_PTR(kernel_size, "kernel_size");
    if (input->ndim < 3) { /* PyTorch reads input.size(-3) first */
        tn__wrap_dim(-3, input->ndim);
        return NULL;
    }
    pool_opts o = {.name = "avg_pool2d", .ceil_mode = ceil_mode};
    opts_fill(&o, kernel_size, stride, padding, NULL);
    pool_call c = {
        .family = POOL_AVG, .count_include_pad = count_include_pad, .divisor = divisor_override};
    if (window_geom(&o, input, &c.g) < 0) return NULL;
    return pool_run("avg_pool2d", &c, input, t0, NULL);
}

/* The adaptive ops' checks of the input (PyTorch's texts; the first dim
 * checked for emptiness: max's 1, average's ndim - 2). */
static tn_status adaptive_check(const char *name, const tn_tensor *x, const char *colon,
                                int first) {
    char s[160];
    tn__format_shape(s, sizeof s, x->ndim, x->shape);
    if (x->ndim != 3 && x->ndim != 4)
        return tn__error(TN_ERR_SHAPE, "%s(): Expected 3D or 4D tensor, but got%s %s", name, colon,
                         s);
    for (int i = first; i < x->ndim; i++)
        if (x->shape[i] == 0)
            return tn__error(TN_ERR_SHAPE,
                             "%s(): Expected input to have non-zero size for non-batch "
                             "dimensions, but input has sizes %s with dimension %d being empty",
                             name, s, i);
    return TN_OK;
}

static tn_tensor *adaptive_entry(const char *fn, int family, const tn_tensor *x,
                                 const int64_t *size, tn_tensor **indices) {
    double t0 = tn__prof_start();
    TN_CHECK_NULL_ARG_IN(fn, x, "input");
    TN_CHECK_NULL_(fn, size, "output_size", false, NULL);
    if (indices) *indices = NULL;
    bool max = family == POOL_AMAX;
    const char *name = max ? "adaptive_max_pool2d" : "adaptive_avg_pool2d";
    pool_call c = {.family = family};
    if (adaptive_check(name, x, max ? ":" : "", max ? 1 : x->ndim - 2) < 0 ||
        check_fits(name, 2, size) < 0 || check_fits(name, 2, x->shape + x->ndim - 2) < 0)
        return NULL;
    int64_t shape[4];
    c.g = (pool_geom){.h = x->shape[x->ndim - 2], .w = x->shape[x->ndim - 1]};
    c.g.oh = size[0], c.g.ow = size[1];
    out_shape(x, &c.g, shape);
    if (max && (size[0] < 0 || size[1] < 0)) {
        char s[160];
        tn__format_shape(s, sizeof s, x->ndim, shape);
        tn__error(TN_ERR_SHAPE, "Trying to create tensor with negative dimension %lld: %s",
                  (long long)(size[0] < 0 ? size[0] : size[1]), s);
        return NULL;
    }
    if (check_float(name, x) < 0) return NULL;
    return pool_run(name, &c, x, t0, indices);
}

tn_tensor *tn_adaptive_avg_pool2d(const tn_tensor *input, const int64_t output_size[2]) {
    TN_CHECK_NULL_ARG(input, "input");
    TN_CHECK_NULL_PTR(output_size, "output_size");
    if (output_size[0] < 0 || output_size[1] < 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "adaptive_avg_pool2d: elements of output_size must be greater than or equal to "
                  "0 but received {%lld, %lld}",
                  (long long)output_size[0], (long long)output_size[1]);
        return NULL;
    }
    if (output_size[0] == 1 && output_size[1] == 1) { /* PyTorch: the mean over H and W */
        tn__internal_enter();
        tn_tensor *m = tn_mean_dim(input, -1, true);
        tn_tensor *out = m ? tn_mean_dim(m, -2, true) : NULL;
        tn_release(m);
        tn__internal_leave();
        return tn__ret(out);
    }
    return adaptive_entry(__func__, POOL_AAVG, input, output_size, NULL);
}

tn_tensor *tn_adaptive_max_pool2d(const tn_tensor *input, const int64_t output_size[2]) {
    return adaptive_entry(__func__, POOL_AMAX, input, output_size, NULL);
}

tn_tensor *tn_adaptive_max_pool2d_with_indices(const tn_tensor *input, const int64_t output_size[2],
                                               tn_tensor **indices) {
    TN_CHECK_NULL_PTR(indices, "indices");
    return adaptive_entry(__func__, POOL_AMAX, input, output_size, indices);
}
