/* tests/ops/rows_conv.c — rows of conv2d and conv1d (explicit padding and the 'valid' / 'same'
 * modes), conv_transpose2d and conv_transpose1d. The reference is the definition: conv, a loop
 * per output element over the group's input channels and the kernel's taps, reading zero
 * outside the input; conv_transpose, each input element times each tap added where it lands.
 *
 * Parameters p: stride (conv2d: 10 sh + sw when at least 10), then conv2d's padding h and w, or
 * conv1d's padding (the _mode rows: the tn_conv_padding value), dilation, groups, has bias. The
 * inputs are x, weight and bias (used when has bias). conv_transpose2d: p = stride, padding,
 * output_padding, dilation, each a pair written 10 h + w, then groups, has bias;
 * conv_transpose1d the same, single values.
 */
#include "op_table.h"

enum { MODE_EXPLICIT = -1 };

typedef struct ref_geom {
    int64_t n, c, h, w, oc, cg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, g;
} ref_geom;

/* Parameters against the inputs' shapes; false where the op must refuse them. */
static bool ref_params(const tt_ref_io *io, int sd, int mode, ref_geom *r) {
    const double *p = io->p;
    int nx = io->ndim[0];
    if ((nx != sd + 1 && nx != sd + 2) || io->ndim[1] != sd + 2) return false;
    bool batched = nx == sd + 2;
    const int64_t *xs = io->shape[0], *ws = io->shape[1];
    int64_t s = (int64_t)p[0];
    *r = (ref_geom){.n = batched ? xs[0] : 1,
                    .c = xs[batched],
                    .h = sd == 2 ? xs[batched + 1] : 1,
                    .w = xs[nx - 1],
                    .oc = ws[0],
                    .cg = ws[1],
                    .kh = sd == 2 ? ws[2] : 1,
                    .kw = ws[sd + 1],
                    .sh = sd == 2 && s >= 10 ? s / 10
                          : sd == 2          ? s
                                             : 1,
                    .sw = sd == 2 && s >= 10 ? s % 10 : s,
                    .dh = sd == 2 ? (int64_t)p[3] : 1,
                    .dw = (int64_t)p[3],
                    .g = (int64_t)p[4]};
    int64_t ph_hi, pw_hi;
    if (mode == MODE_EXPLICIT) {
        r->ph = ph_hi = sd == 2 ? (int64_t)p[1] : 0;
        r->pw = pw_hi = (int64_t)p[sd == 2 ? 2 : 1];
    } else if ((int)p[1] == TN_CONV_PAD_SAME) {
        if (r->sh != 1 || r->sw != 1) return false;
        int64_t th = r->dh * (r->kh - 1), tw = r->dw * (r->kw - 1);
        r->ph = th / 2, ph_hi = th - th / 2, r->pw = tw / 2, pw_hi = tw - tw / 2;
    } else {
        r->ph = ph_hi = r->pw = pw_hi = 0;
    }
    if (r->sh < 1 || r->sw < 1 || r->dh < 1 || r->dw < 1 || r->g < 1 || r->ph < 0 || r->pw < 0)
        return false;
    if (r->oc < r->g || r->oc % r->g || r->c != r->cg * r->g) return false;
    if (p[5] && (io->nin < 3 || io->ndim[2] != 1 || io->shape[2][0] != r->oc)) return false;
    int64_t eh = r->dh * (r->kh - 1) + 1, ew = r->dw * (r->kw - 1) + 1;
    if (r->h + r->ph + ph_hi < eh || r->w + r->pw + pw_hi < ew) return false;
    r->oh = (r->h + r->ph + ph_hi - eh) / r->sh + 1;
    r->ow = (r->w + r->pw + pw_hi - ew) / r->sw + 1;
    return true;
}

/* out[n, o, y, x] = bias[o] + sum over the group's channels and taps of w x. */
static double ref_at(const tt_ref_io *io, const ref_geom *r, int64_t n, int64_t o, int64_t y,
                     int64_t x) {
    const double *xi = io->x[0], *wi = io->x[1];
    int64_t g = o / (r->oc / r->g);
    double s = io->p[5] ? io->x[2][o] : 0;
    for (int64_t ci = 0; ci < r->cg; ci++) {
        int64_t c = g * r->cg + ci;
        for (int64_t i = 0; i < r->kh; i++) {
            int64_t iy = y * r->sh - r->ph + i * r->dh;
            for (int64_t j = 0; j < r->kw && iy >= 0 && iy < r->h; j++) {
                int64_t ix = x * r->sw - r->pw + j * r->dw;
                if (ix < 0 || ix >= r->w) continue;
                s += xi[((n * r->c + c) * r->h + iy) * r->w + ix] *
                     wi[((o * r->cg + ci) * r->kh + i) * r->kw + j];
            }
        }
    }
    return s;
}

static bool ref_conv(tt_ref_io *io, int sd, int mode) {
    ref_geom r;
    if (!ref_params(io, sd, mode, &r)) return false;
    int64_t shape[4];
    int nd = io->ndim[0], batched = nd == sd + 2;
    if (batched) shape[0] = r.n;
    shape[batched] = r.oc;
    if (sd == 2) shape[batched + 1] = r.oh;
    shape[nd - 1] = r.ow;
    if (!tt_ref_set_shape(io, nd, shape)) return false;
    double *out = io->out;
    for (int64_t n = 0; n < r.n; n++)
        for (int64_t o = 0; o < r.oc; o++)
            for (int64_t y = 0; y < r.oh; y++)
                for (int64_t x = 0; x < r.ow; x++)
                    *out++ = ref_at(io, &r, n, o, y, x);
    return true;
}

static bool ref_conv2d(tt_ref_io *io) { return ref_conv(io, 2, MODE_EXPLICIT); }
static bool ref_conv2d_mode(tt_ref_io *io) { return ref_conv(io, 2, 0); }
static bool ref_conv1d(tt_ref_io *io) { return ref_conv(io, 1, MODE_EXPLICIT); }
static bool ref_conv1d_mode(tt_ref_io *io) { return ref_conv(io, 1, 0); }

static void stride2(const double *p, int64_t st[2]) {
    int64_t s = (int64_t)p[0];
    st[0] = s >= 10 ? s / 10 : s;
    st[1] = s >= 10 ? s % 10 : s;
}

static tn_tensor *call_conv2d(tn_tensor *const *in, const double *p) {
    int64_t st[2], pad[2] = {(int64_t)p[1], (int64_t)p[2]}, dil[2] = {(int64_t)p[3], (int64_t)p[3]};
    stride2(p, st);
    return tn_conv2d(in[0], in[1], p[5] ? in[2] : NULL, st, pad, dil, (int64_t)p[4]);
}
static tn_tensor *call_conv2d_mode(tn_tensor *const *in, const double *p) {
    int64_t st[2], dil[2] = {(int64_t)p[3], (int64_t)p[3]};
    stride2(p, st);
    return tn_conv2d_mode(in[0], in[1], p[5] ? in[2] : NULL, st, (tn_conv_padding)p[1], dil,
                          (int64_t)p[4]);
}
static tn_tensor *call_conv1d(tn_tensor *const *in, const double *p) {
    return tn_conv1d(in[0], in[1], p[5] ? in[2] : NULL, (int64_t)p[0], (int64_t)p[1], (int64_t)p[3],
                     (int64_t)p[4]);
}
static tn_tensor *call_conv1d_mode(tn_tensor *const *in, const double *p) {
    return tn_conv1d_mode(in[0], in[1], p[5] ? in[2] : NULL, (int64_t)p[0], (tn_conv_padding)p[1],
                          (int64_t)p[3], (int64_t)p[4]);
}

/* ---- conv_transpose ---- */

static void pair10(double v, int sd, int64_t out[2]) {
    int64_t k = (int64_t)v;
    out[0] = sd == 2 ? k / 10 : 1;
    out[1] = sd == 2 ? k % 10 : k;
}

/* PyTorch's rules for the parameters and shapes (false: the op must refuse); the canonical
 * geometry in r (conv1d's H is 1; r->c the input's channels, r->oc the result's). */
static bool ref_params_t(const tt_ref_io *io, int sd, ref_geom *r, int64_t op[2]) {
    const double *p = io->p;
    int nx = io->ndim[0];
    if ((nx != sd + 1 && nx != sd + 2) || io->ndim[1] != sd + 2) return false;
    bool batched = nx == sd + 2;
    const int64_t *xs = io->shape[0], *ws = io->shape[1];
    int64_t st[2], pd[2], dl[2];
    pair10(p[0], sd, st), pair10(p[1], sd, pd), pair10(p[2], sd, op), pair10(p[3], sd, dl);
    if (sd == 1) pd[0] = op[0] = 0;
    *r = (ref_geom){.n = batched ? xs[0] : 1,
                    .c = xs[batched],
                    .h = sd == 2 ? xs[batched + 1] : 1,
                    .w = xs[nx - 1],
                    .cg = ws[1],
                    .kh = sd == 2 ? ws[2] : 1,
                    .kw = ws[sd + 1],
                    .sh = st[0],
                    .sw = st[1],
                    .ph = pd[0],
                    .pw = pd[1],
                    .dh = dl[0],
                    .dw = dl[1],
                    .g = (int64_t)p[4]};
    r->oc = r->cg * r->g;
    if (r->g < 1 || ws[0] % r->g || ws[0] != r->c || r->kh < 1 || r->kw < 1 || r->cg < 1)
        return false;
    for (int i = 0; i < 2; i++)
        if (st[i] < 1 || dl[i] < 1 || pd[i] < 0 || op[i] < 0 || (op[i] >= st[i] && op[i] >= dl[i]))
            return false;
    if (p[5] && (io->nin < 3 || io->ndim[2] != 1 || io->shape[2][0] != r->oc)) return false;
    r->oh = (r->h - 1) * r->sh - 2 * r->ph + r->dh * (r->kh - 1) + op[0] + 1;
    r->ow = (r->w - 1) * r->sw - 2 * r->pw + r->dw * (r->kw - 1) + op[1] + 1;
    return r->oh >= 1 && r->ow >= 1 && r->h >= 1 && r->w >= 1;
}

/* out[n, g ocg + o, y sh - ph + i dh, x sw - pw + j dw] += x[n, c, y, x] w[c, o, i, j] over
 * the input channels c of group g. */
static void ref_scatter_t(const tt_ref_io *io, const ref_geom *r, double *out) {
    const double *xi = io->x[0], *wi = io->x[1];
    int64_t cpg = r->c / r->g;
    for (int64_t n = 0; n < r->n; n++)
        for (int64_t c = 0; c < r->c; c++)
            for (int64_t y = 0; y < r->h; y++)
                for (int64_t x = 0; x < r->w; x++)
                    for (int64_t o = 0; o < r->cg; o++)
                        for (int64_t i = 0; i < r->kh; i++)
                            for (int64_t j = 0; j < r->kw; j++) {
                                int64_t oy = y * r->sh - r->ph + i * r->dh;
                                int64_t ox = x * r->sw - r->pw + j * r->dw;
                                if (oy < 0 || oy >= r->oh || ox < 0 || ox >= r->ow) continue;
                                int64_t oc = c / cpg * r->cg + o;
                                out[((n * r->oc + oc) * r->oh + oy) * r->ow + ox] +=
                                    xi[((n * r->c + c) * r->h + y) * r->w + x] *
                                    wi[((c * r->cg + o) * r->kh + i) * r->kw + j];
                            }
}

static bool ref_conv_t(tt_ref_io *io, int sd) {
    ref_geom r;
    int64_t op[2];
    if (!ref_params_t(io, sd, &r, op)) return false;
    int64_t shape[4];
    int nd = io->ndim[0], batched = nd == sd + 2;
    if (batched) shape[0] = r.n;
    shape[batched] = r.oc;
    if (sd == 2) shape[batched + 1] = r.oh;
    shape[nd - 1] = r.ow;
    if (!tt_ref_set_shape(io, nd, shape)) return false;
    int64_t plane = r.oh * r.ow;
    for (int64_t k = 0; k < r.n * r.oc * plane; k++)
        io->out[k] = io->p[5] ? io->x[2][k / plane % r.oc] : 0;
    ref_scatter_t(io, &r, io->out);
    return true;
}

static bool ref_conv_transpose2d(tt_ref_io *io) { return ref_conv_t(io, 2); }
static bool ref_conv_transpose1d(tt_ref_io *io) { return ref_conv_t(io, 1); }

static tn_tensor *call_conv_transpose2d(tn_tensor *const *in, const double *p) {
    int64_t st[2], pd[2], op[2], dl[2];
    pair10(p[0], 2, st), pair10(p[1], 2, pd), pair10(p[2], 2, op), pair10(p[3], 2, dl);
    return tn_conv_transpose2d(in[0], in[1], p[5] ? in[2] : NULL, st, pd, op, (int64_t)p[4], dl);
}
static tn_tensor *call_conv_transpose1d(tn_tensor *const *in, const double *p) {
    return tn_conv_transpose1d(in[0], in[1], p[5] ? in[2] : NULL, (int64_t)p[0], (int64_t)p[1],
                               (int64_t)p[2], (int64_t)p[4], (int64_t)p[3]);
}

#define X3(a, b, c, d)                                                                             \
    { a, b, c, d }
static const tt_case conv2d_cases[] = {
    /* p: stride, pad h, pad w, dilation, groups, has bias */
    {.tag = "basic",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 3, 5, 6), X3(4, 3, 3, 3), {4}},
     .p = {1, 0, 0, 1, 1, 1}},
    {.tag = "stride21_pad12",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 3, 7, 6), X3(4, 3, 3, 2), {4}},
     .p = {21, 1, 2, 1, 1, 1}},
    {.tag = "dilation2_nobias",
     .ndim = {4, 4, 1},
     .shape = {X3(1, 2, 7, 7), X3(3, 2, 3, 3), {3}},
     .p = {1, 1, 1, 2, 1, 0}},
    {.tag = "groups2",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 4, 5, 5), X3(6, 2, 3, 3), {6}},
     .p = {1, 1, 1, 1, 2, 1}},
    {.tag = "depthwise_stride2",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 3, 6, 5), X3(3, 1, 3, 3), {3}},
     .p = {2, 1, 1, 1, 3, 1}},
    {.tag = "unbatched",
     .ndim = {3, 4, 1},
     .shape = {{3, 5, 5}, X3(2, 3, 2, 2), {2}},
     .p = {1, 0, 1, 1, 1, 1}},
    {.tag = "1x1",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 4, 3, 3), X3(5, 4, 1, 1), {5}},
     .p = {1, 0, 0, 1, 1, 0}},
    {.tag = "empty_batch",
     .ndim = {4, 4, 1},
     .shape = {X3(0, 3, 4, 4), X3(2, 3, 3, 3), {2}},
     .p = {1, 0, 0, 1, 1, 1}},
};
static const tt_case conv2d_mode_cases[] = {
    /* p: stride, padding mode, -, dilation, groups, has bias */
    {.tag = "same",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 3, 5, 4), X3(2, 3, 3, 3), {2}},
     .p = {1, TN_CONV_PAD_SAME, 0, 1, 1, 1}},
    {.tag = "same_even",
     .ndim = {4, 4, 1},
     .shape = {X3(1, 2, 5, 6), X3(3, 2, 2, 4), {3}},
     .p = {1, TN_CONV_PAD_SAME, 0, 1, 1, 1}},
    {.tag = "same_dilation2_groups",
     .ndim = {4, 4, 1},
     .shape = {X3(1, 4, 6, 6), X3(4, 2, 2, 3), {4}},
     .p = {1, TN_CONV_PAD_SAME, 0, 2, 2, 0}},
    {.tag = "valid_stride2",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 2, 6, 7), X3(3, 2, 3, 3), {3}},
     .p = {2, TN_CONV_PAD_VALID, 0, 1, 1, 1}},
};
static const tt_case conv1d_cases[] = {
    /* p: stride, padding, -, dilation, groups, has bias */
    {.tag = "basic",
     .ndim = {3, 3, 1},
     .shape = {{2, 3, 8}, {4, 3, 3}, {4}},
     .p = {1, 0, 0, 1, 1, 1}},
    {.tag = "stride2_pad1",
     .ndim = {3, 3, 1},
     .shape = {{2, 3, 9}, {2, 3, 4}, {2}},
     .p = {2, 1, 0, 1, 1, 0}},
    {.tag = "dilation2",
     .ndim = {3, 3, 1},
     .shape = {{1, 2, 9}, {3, 2, 3}, {3}},
     .p = {1, 2, 0, 2, 1, 1}},
    {.tag = "depthwise",
     .ndim = {3, 3, 1},
     .shape = {{2, 4, 7}, {8, 1, 3}, {8}},
     .p = {1, 1, 0, 1, 4, 1}},
    {.tag = "unbatched",
     .ndim = {2, 3, 1},
     .shape = {{3, 7}, {2, 3, 2}, {2}},
     .p = {1, 0, 0, 1, 1, 1}},
    {.tag = "empty_batch",
     .ndim = {3, 3, 1},
     .shape = {{0, 2, 5}, {3, 2, 3}, {3}},
     .p = {1, 0, 0, 1, 1, 1}},
};
static const tt_case conv1d_mode_cases[] = {
    /* p: stride, padding mode, -, dilation, groups, has bias */
    {.tag = "same_even",
     .ndim = {3, 3, 1},
     .shape = {{2, 3, 7}, {2, 3, 4}, {2}},
     .p = {1, TN_CONV_PAD_SAME, 0, 1, 1, 1}},
    {.tag = "same_dilation3",
     .ndim = {3, 3, 1},
     .shape = {{1, 2, 9}, {2, 2, 3}, {2}},
     .p = {1, TN_CONV_PAD_SAME, 0, 3, 1, 0}},
    {.tag = "valid",
     .ndim = {3, 3, 1},
     .shape = {{2, 2, 6}, {3, 2, 3}, {3}},
     .p = {2, TN_CONV_PAD_VALID, 0, 1, 1, 1}},
};

static const tt_case conv_transpose2d_cases[] = {
    /* p: stride, padding, output_padding, dilation (each 10 h + w), groups, has bias */
    {.tag = "basic",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 4, 5, 5), X3(4, 3, 3, 3), {3}},
     .p = {11, 0, 0, 11, 1, 1}},
    {.tag = "stride2_pad1_outpad1",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 3, 4, 5), X3(3, 2, 3, 3), {2}},
     .p = {22, 11, 11, 11, 1, 1}},
    {.tag = "stride21_pad12_outpad10",
     .ndim = {4, 4, 1},
     .shape = {X3(1, 2, 4, 4), X3(2, 3, 3, 2), {3}},
     .p = {21, 11, 10, 11, 1, 1}},
    {.tag = "dilation2_outpad_nobias",
     .ndim = {4, 4, 1},
     .shape = {X3(1, 2, 3, 4), X3(2, 2, 3, 3), {2}},
     .p = {11, 11, 11, 22, 1, 0}},
    {.tag = "groups2",
     .ndim = {4, 4, 1},
     .shape = {X3(1, 4, 4, 4), X3(4, 3, 3, 3), {6}},
     .p = {22, 11, 0, 11, 2, 1}},
    {.tag = "depthwise",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 3, 3, 4), X3(3, 1, 3, 3), {3}},
     .p = {22, 11, 11, 11, 3, 1}},
    {.tag = "unbatched",
     .ndim = {3, 4, 1},
     .shape = {{4, 3, 3}, X3(4, 2, 2, 2), {2}},
     .p = {11, 0, 0, 11, 1, 1}},
    {.tag = "1x1_stride2",
     .ndim = {4, 4, 1},
     .shape = {X3(2, 4, 3, 3), X3(4, 5, 1, 1), {5}},
     .p = {22, 0, 0, 11, 1, 0}},
    {.tag = "empty_batch",
     .ndim = {4, 4, 1},
     .shape = {X3(0, 2, 3, 3), X3(2, 3, 3, 3), {3}},
     .p = {11, 0, 0, 11, 1, 1}},
};
static const tt_case conv_transpose1d_cases[] = {
    /* p: stride, padding, output_padding, dilation, groups, has bias */
    {.tag = "basic",
     .ndim = {3, 3, 1},
     .shape = {{2, 4, 5}, {4, 3, 3}, {3}},
     .p = {1, 0, 0, 1, 1, 1}},
    {.tag = "stride2_pad1_outpad1",
     .ndim = {3, 3, 1},
     .shape = {{2, 3, 6}, {3, 2, 4}, {2}},
     .p = {2, 1, 1, 1, 1, 1}},
    {.tag = "dilation2_groups2",
     .ndim = {3, 3, 1},
     .shape = {{1, 4, 5}, {4, 1, 3}, {2}},
     .p = {1, 1, 0, 2, 2, 1}},
    {.tag = "unbatched",
     .ndim = {2, 3, 1},
     .shape = {{3, 5}, {3, 2, 2}, {2}},
     .p = {3, 0, 2, 1, 1, 0}},
};

#define CONV_ROW(NAME, TORCH, CASES, CALL, REF, GOLDEN)                                            \
    {                                                                                              \
        .name = NAME, .torch = TORCH, .arity = 3, .diff = 7, .dtypes = TT_FLOATS,                  \
        .backends = TT_ALL_BACKENDS, TT_CASES(CASES), .call = CALL, .ref = REF, .golden = GOLDEN,  \
        .tol = 8, .flags = 0                                                                       \
    }

const tt_op tt_rows_conv[] = {
    CONV_ROW("conv2d", "torch.nn.functional.conv2d", conv2d_cases, call_conv2d, ref_conv2d,
             "conv2d"),
    CONV_ROW("conv2d_mode", "torch.nn.functional.conv2d", conv2d_mode_cases, call_conv2d_mode,
             ref_conv2d_mode, "conv2d_mode"),
    CONV_ROW("conv1d", "torch.nn.functional.conv1d", conv1d_cases, call_conv1d, ref_conv1d,
             "conv1d"),
    CONV_ROW("conv1d_mode", "torch.nn.functional.conv1d", conv1d_mode_cases, call_conv1d_mode,
             ref_conv1d_mode, "conv1d_mode"),
    CONV_ROW("conv_transpose2d", "torch.nn.functional.conv_transpose2d", conv_transpose2d_cases,
             call_conv_transpose2d, ref_conv_transpose2d, "conv_transpose2d"),
    CONV_ROW("conv_transpose1d", "torch.nn.functional.conv_transpose1d", conv_transpose1d_cases,
             call_conv_transpose1d, ref_conv_transpose1d, "conv_transpose1d"),
};
const int tt_nrows_conv = (int)(sizeof tt_rows_conv / sizeof tt_rows_conv[0]);
