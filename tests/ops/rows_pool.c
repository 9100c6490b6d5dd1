/* tests/ops/rows_pool.c — rows of the pooling family: max_pool2d (values and, in the _with_indices
 * rows, the indices), avg_pool2d, adaptive_avg_pool2d and adaptive_max_pool2d. The references are
 * the definitions: a loop per output element over its window's taps in row-major order.
 *
 * Parameters p: max_pool2d: kernel, stride (0: the default, the kernel), padding, dilation,
 * ceil_mode; avg_pool2d: kernel, stride, padding, ceil_mode, count_include_pad, divisor_override;
 * a pair (h, w) is written 10 h + w when it is at least 10, else the value is both. Adaptive: the
 * output size (oh, ow).
 */
#include <math.h>

#include "op_table.h"

enum { MAX, AVG, AMAX, AAVG };

typedef struct ref_pool {
    int kind;
    bool indices; /* the output is the max's index */
    int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, div;
    bool ceil, incl;
} ref_pool;

static void pair(double v, int64_t out[2]) {
    int64_t i = (int64_t)v;
    out[0] = i >= 10 ? i / 10 : i;
    out[1] = i >= 10 ? i % 10 : i;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ref_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
    int64_t o = floor_div(in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0), s) + 1;
    if (ceil && (o - 1) * s >= in + p) o--;
    return o;
}

/* The geometry from the parameters; false where the op must refuse them. */
static bool ref_geom(const tt_ref_io *io, ref_pool *r) {
    const double *p = io->p;
    int nd = io->ndim[0];
    if (nd != 3 && nd != 4) return false;
    const int64_t *xs = io->shape[0];
    r->h = xs[nd - 2], r->w = xs[nd - 1];
    r->planes = tt_numel(nd - 2, xs);
    if (r->h == 0 || r->w == 0) return false;
    if (r->kind == AMAX || r->kind == AAVG) {
        if (r->kind == AMAX && xs[nd - 3] == 0) return false;
        r->oh = (int64_t)p[0], r->ow = (int64_t)p[1];
        return r->oh >= 0 && r->ow >= 0;
    }
    if (xs[nd - 3] == 0 || (nd == 3 && xs[0] == 0)) return false;
    int64_t k[2], s[2], pd[2], d[2] = {1, 1};
    pair(p[0], k);
    pair(p[1] ? p[1] : p[0], s);
    pair(p[2], pd);
    if (r->kind == MAX) pair(p[3], d);
    r->ceil = r->kind == MAX ? p[4] != 0 : p[3] != 0;
    r->incl = p[4] != 0;
    r->div = r->kind == AVG ? (int64_t)p[5] : 0;
    r->kh = k[0], r->kw = k[1], r->sh = s[0], r->sw = s[1], r->ph = pd[0], r->pw = pd[1];
    r->dh = d[0], r->dw = d[1];
    if (r->kh < 1 || r->kw < 1 || r->sh < 1 || r->sw < 1 || r->dh < 1 || r->dw < 1) return false;
    if (r->ph > r->kh / 2 || r->pw > r->kw / 2) return false;
    r->oh = ref_out(r->h, r->kh, r->ph, r->sh, r->dh, r->ceil);
    r->ow = ref_out(r->w, r->kw, r->pw, r->sw, r->dw, r->ceil);
    return r->oh >= 1 && r->ow >= 1;
}

/* Window bounds of output (y, x): rows [*y0, *y1), columns [*x0, *x1) in taps of the dilation
 * (sliding) or elements (adaptive), before clipping. */
static void window(const ref_pool *r, int64_t y, int64_t x, int64_t *y0, int64_t *y1, int64_t *x0,
                   int64_t *x1) {
    if (r->kind == AMAX || r->kind == AAVG) {
        *y0 = y * r->h / r->oh, *y1 = ((y + 1) * r->h + r->oh - 1) / r->oh;
        *x0 = x * r->w / r->ow, *x1 = ((x + 1) * r->w + r->ow - 1) / r->ow;
    } else {
        *y0 = y * r->sh - r->ph, *y1 = *y0 + (r->kh - 1) * r->dh + 1;
        *x0 = x * r->sw - r->pw, *x1 = *x0 + (r->kw - 1) * r->dw + 1;
    }
}

static double ref_max_at(const ref_pool *r, const double *xp, int64_t y, int64_t x) {
    int64_t y0, y1, x0, x1, dh = r->kind == MAX ? r->dh : 1, dw = r->kind == MAX ? r->dw : 1;
    window(r, y, x, &y0, &y1, &x0, &x1);
    double m = -INFINITY;
    int64_t mi = -1;
    for (int64_t iy = y0; iy < y1; iy += dh)
        for (int64_t ix = x0; ix < x1; ix += dw) {
            if (iy < 0 || iy >= r->h || ix < 0 || ix >= r->w) continue;
            double v = xp[iy * r->w + ix];
            if (mi < 0) mi = iy * r->w + ix; /* the first tap in the input */
            if (v > m || isnan(v)) m = v, mi = iy * r->w + ix;
        }
    return r->indices ? (double)mi : m;
}

static double ref_avg_at(const ref_pool *r, const double *xp, int64_t y, int64_t x) {
    int64_t y0, y1, x0, x1;
    window(r, y, x, &y0, &y1, &x0, &x1);
    double s = 0;
    int64_t n = 0;
    for (int64_t iy = y0; iy < y1; iy++)
        for (int64_t ix = x0; ix < x1; ix++) {
            if (iy < 0 || iy >= r->h || ix < 0 || ix >= r->w) continue;
            s += xp[iy * r->w + ix];
            n++;
        }
    if (r->kind == AAVG) return s / (double)n;
    if (r->div) return s / (double)r->div;
    if (r->incl) { /* the window clipped to the padded input */
        int64_t ye = y1 < r->h + r->ph ? y1 : r->h + r->ph,
                xe = x1 < r->w + r->pw ? x1 : r->w + r->pw;
        return s / (double)((ye - y0) * (xe - x0));
    }
    return n ? s / (double)n : 0;
}

static bool ref_pool_run(tt_ref_io *io, int kind, bool indices) {
    ref_pool r = {.kind = kind, .indices = indices};
    if (!ref_geom(io, &r)) return false;
    int nd = io->ndim[0];
    int64_t shape[4];
    for (int i = 0; i < nd; i++)
        shape[i] = io->shape[0][i];
    shape[nd - 2] = r.oh, shape[nd - 1] = r.ow;
    if (!tt_ref_set_shape(io, nd, shape)) return false;
    double *out = io->out;
    for (int64_t pl = 0; pl < r.planes; pl++) {
        const double *xp = io->x[0] + pl * r.h * r.w;
        for (int64_t y = 0; y < r.oh; y++)
            for (int64_t x = 0; x < r.ow; x++)
                *out++ = kind == MAX || kind == AMAX ? ref_max_at(&r, xp, y, x)
                                                     : ref_avg_at(&r, xp, y, x);
    }
    return true;
}

static bool ref_max_pool2d(tt_ref_io *io) { return ref_pool_run(io, MAX, false); }
static bool ref_max_pool2d_idx(tt_ref_io *io) { return ref_pool_run(io, MAX, true); }
static bool ref_avg_pool2d(tt_ref_io *io) { return ref_pool_run(io, AVG, false); }
static bool ref_adaptive_avg(tt_ref_io *io) { return ref_pool_run(io, AAVG, false); }
static bool ref_adaptive_max(tt_ref_io *io) { return ref_pool_run(io, AMAX, false); }
static bool ref_adaptive_max_idx(tt_ref_io *io) { return ref_pool_run(io, AMAX, true); }

/* ---- call adapters -------------------------------------------------------------------------- */

typedef struct call_args {
    int64_t k[2], s[2], p[2], d[2];
} call_args;

static void args_of(const double *p, bool dilation, call_args *a) {
    pair(p[0], a->k);
    pair(p[1], a->s);
    pair(p[2], a->p);
    pair(dilation ? p[3] : 1, a->d);
}

static tn_tensor *call_max_pool2d(tn_tensor *const *in, const double *p) {
    call_args a;
    args_of(p, true, &a);
    return tn_max_pool2d(in[0], a.k, p[1] ? a.s : NULL, a.p, a.d, p[4] != 0);
}

/* The indices, the values released (tt_scoped). */
static tn_tensor *max_idx_body(tn_tensor *const *in, const double *p) {
    call_args a;
    args_of(p, true, &a);
    tn_tensor *idx = NULL;
    tn_tensor *y =
        tn_max_pool2d_with_indices(in[0], a.k, p[1] ? a.s : NULL, a.p, a.d, p[4] != 0, &idx);
    (void)y; /* the scope releases it */
    return idx;
}
static tn_tensor *call_max_pool2d_idx(tn_tensor *const *in, const double *p) {
    return tt_scoped(max_idx_body, in, p);
}

static tn_tensor *call_avg_pool2d(tn_tensor *const *in, const double *p) {
    call_args a;
    args_of(p, false, &a);
    return tn_avg_pool2d(in[0], a.k, p[1] ? a.s : NULL, a.p, p[3] != 0, p[4] != 0, (int64_t)p[5]);
}

static tn_tensor *call_adaptive_avg(tn_tensor *const *in, const double *p) {
    return tn_adaptive_avg_pool2d(in[0], (int64_t[]){(int64_t)p[0], (int64_t)p[1]});
}
static tn_tensor *call_adaptive_max(tn_tensor *const *in, const double *p) {
    return tn_adaptive_max_pool2d(in[0], (int64_t[]){(int64_t)p[0], (int64_t)p[1]});
}
static tn_tensor *amax_idx_body(tn_tensor *const *in, const double *p) {
    tn_tensor *idx = NULL;
    tn_tensor *y =
        tn_adaptive_max_pool2d_with_indices(in[0], (int64_t[]){(int64_t)p[0], (int64_t)p[1]}, &idx);
    (void)y;
    return idx;
}
static tn_tensor *call_adaptive_max_idx(tn_tensor *const *in, const double *p) {
    return tt_scoped(amax_idx_body, in, p);
}

/* ---- parameter sets ------------------------------------------------------------------------- */

#define S4(a, b, c, d)                                                                             \
    {                                                                                              \
        { a, b, c, d }                                                                             \
    }
static const tt_case max_cases[] = {
    /* p: kernel, stride, padding, dilation, ceil_mode */
    {.tag = "2x2", .ndim = {4}, .shape = S4(2, 3, 6, 6), .p = {2, 0, 0, 1, 0}},
    {.tag = "k3_s2_odd", .ndim = {4}, .shape = S4(2, 2, 7, 9), .p = {3, 2, 1, 1, 0}},
    {.tag = "k32_s12_p10", .ndim = {4}, .shape = S4(1, 2, 6, 5), .p = {32, 12, 10, 1, 0}},
    {.tag = "dilation2", .ndim = {4}, .shape = S4(1, 2, 8, 7), .p = {3, 1, 1, 2, 0}},
    {.tag = "ceil", .ndim = {4}, .shape = S4(2, 1, 5, 7), .p = {2, 2, 1, 1, 1}},
    {.tag = "ceil_dil2", .ndim = {4}, .shape = S4(1, 2, 7, 8), .p = {3, 2, 1, 2, 1}},
    {.tag = "unbatched", .ndim = {3}, .shape = {{3, 5, 6}}, .p = {2, 1, 0, 1, 0}},
    {.tag = "batch1", .ndim = {4}, .shape = S4(1, 1, 4, 4), .p = {2, 0, 1, 1, 0}},
    {.tag = "empty_batch", .ndim = {4}, .shape = S4(0, 2, 4, 4), .p = {2, 0, 0, 1, 0}},
};
static const tt_case avg_cases[] = {
    /* p: kernel, stride, padding, ceil_mode, count_include_pad, divisor_override */
    {.tag = "2x2", .ndim = {4}, .shape = S4(2, 3, 6, 6), .p = {2, 0, 0, 0, 1, 0}},
    {.tag = "k3_s2_pad_incl", .ndim = {4}, .shape = S4(2, 2, 7, 9), .p = {3, 2, 1, 0, 1, 0}},
    {.tag = "k3_s2_pad_excl", .ndim = {4}, .shape = S4(1, 2, 7, 9), .p = {3, 2, 1, 0, 0, 0}},
    {.tag = "ceil_incl", .ndim = {4}, .shape = S4(2, 1, 5, 7), .p = {2, 2, 1, 1, 1, 0}},
    {.tag = "ceil_excl", .ndim = {4}, .shape = S4(1, 2, 5, 5), .p = {3, 2, 1, 1, 0, 0}},
    {.tag = "divisor", .ndim = {4}, .shape = S4(1, 2, 5, 6), .p = {32, 21, 10, 1, 1, 5}},
    {.tag = "unbatched", .ndim = {3}, .shape = {{3, 5, 6}}, .p = {2, 1, 0, 0, 1, 0}},
    {.tag = "empty_batch", .ndim = {4}, .shape = S4(0, 2, 4, 4), .p = {2, 0, 0, 0, 1, 0}},
};
static const tt_case adaptive_cases[] = {
    /* p: output h, output w */
    {.tag = "5x7_to_3x4", .ndim = {4}, .shape = S4(2, 3, 5, 7), .p = {3, 4}},
    {.tag = "grow", .ndim = {4}, .shape = S4(1, 2, 3, 4), .p = {5, 6}},
    {.tag = "divides", .ndim = {4}, .shape = S4(2, 2, 6, 6), .p = {2, 3}},
    {.tag = "1x1", .ndim = {4}, .shape = S4(2, 3, 4, 5), .p = {1, 1}},
    {.tag = "unbatched", .ndim = {3}, .shape = {{2, 7, 5}}, .p = {3, 2}},
    {.tag = "empty_out", .ndim = {4}, .shape = S4(1, 2, 4, 4), .p = {0, 2}},
    {.tag = "empty_batch", .ndim = {4}, .shape = S4(0, 2, 4, 4), .p = {2, 2}},
};

#define POOL_ROW(NAME, TORCH, CASES, CALL, REF, GOLDEN, FLAGS)                                     \
    {                                                                                              \
        .name = NAME, .torch = TORCH, .arity = 1, .diff = (FLAGS) ? 0 : 1, .dtypes = TT_FLOATS,    \
        .backends = TT_ALL_BACKENDS, TT_CASES(CASES), .call = CALL, .ref = REF, .golden = GOLDEN,  \
        .flags = FLAGS                                                                             \
    }

const tt_op tt_rows_pool[] = {
    POOL_ROW("max_pool2d", "torch.nn.functional.max_pool2d", max_cases, call_max_pool2d,
             ref_max_pool2d, "max_pool2d", 0),
    POOL_ROW("max_pool2d_with_indices", "torch.nn.functional.max_pool2d_with_indices", max_cases,
             call_max_pool2d_idx, ref_max_pool2d_idx, "max_pool2d_indices", TT_NO_GRAD),
    POOL_ROW("avg_pool2d", "torch.nn.functional.avg_pool2d", avg_cases, call_avg_pool2d,
             ref_avg_pool2d, "avg_pool2d", 0),
    POOL_ROW("adaptive_avg_pool2d", "torch.nn.functional.adaptive_avg_pool2d", adaptive_cases,
             call_adaptive_avg, ref_adaptive_avg, "adaptive_avg_pool2d", 0),
    POOL_ROW("adaptive_max_pool2d", "torch.nn.functional.adaptive_max_pool2d", adaptive_cases,
             call_adaptive_max, ref_adaptive_max, "adaptive_max_pool2d", 0),
    POOL_ROW("adaptive_max_pool2d_with_indices",
             "torch.nn.functional.adaptive_max_pool2d_with_indices", adaptive_cases,
             call_adaptive_max_idx, ref_adaptive_max_idx, "adaptive_max_pool2d_indices",
             TT_NO_GRAD),
};
const int tt_nrows_pool = (int)(sizeof tt_rows_pool / sizeof tt_rows_pool[0]);
