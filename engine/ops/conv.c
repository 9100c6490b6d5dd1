/* conv1d and conv2d (PyTorch's torch.nn.functional.conv1d / conv2d),
 * forward and backward. Everything runs on one canonical (N, C, H, W)
 * geometry: conv1d is conv2d with H = 1, an unbatched input has N = 1; the
 * tensors keep their own shapes and only the kernels see the geometry.
 *
 * Three bilinear primitives, each im2col / col2im (the backend's `conv`
 * entry, tn_conv_args) around products (its `gemm` entry), batched over
 * (images of a chunk, groups), the columns made for at most COL_BUDGET
 * elements at a time (COL_BUDGET_DEVICE on a device); the weight gradient
 * takes a chunk's images in one batched product into partials (dw_partials):
 *   FWD (x, w) -> y       y = conv(x, w)
 *   DX  (g, w) -> x-like  the input gradient: col2im(w^T g)
 *   DW  (g, x) -> w-like  the weight gradient: sum over images of g col(x)^T
 * The gradient of each is made of the others (<DX(g, w), z> = <g, FWD(z, w)>
 * and <DW(g, x), z> = <g, FWD(x, z)>), and each records a node when its
 * inputs need grad, so a create_graph backward records primitives in turn
 * and derivatives of any order are exact.
 *
 * Node layout: ConvolutionBackward0 (FWD, the public op): inputs {x, w, b}
 * (b may be NULL), saved {0: x, 1: w}; ConvolutionBackwardBackward0 (DX,
 * DW): inputs {g, w} / {g, x}, saved the same two. Parameters conv_params:
 * the primitive and the geometry.
 */
#include "autocast.h"
#include "pointwise_driver.h"

enum { CONV_FWD, CONV_DX, CONV_DW };

/* Elements of the column buffer per chunk of images (at least one image), and how far it may
 * grow to give every op thread an image of its own: the products of a chunk are then whole
 * products per thread, one fork and join per chunk for the columns and one for the products. */
#define COL_BUDGET ((int64_t)1 << 21)
#define COL_BUDGET_THREADS ((int64_t)1 << 23)
/* A device's products are fast only when big: a chunk there is every image up to 64 Mi
 * column elements (256 MB in float32), so a batch of 32 ImageNet-size images is one
 * im2col and one batched product, not eight of a few hundred thread blocks each. */
#define COL_BUDGET_DEVICE ((int64_t)1 << 26)

typedef struct conv_geom {
    int64_t n, c, h, w;                     /* x */
    int64_t oc, kh, kw;                     /* w: (oc, c / groups, kh, kw) */
    int64_t oh, ow;                         /* y: (n, oc, oh, ow) */
    int64_t sh, sw, ph, pw, dh, dw, groups; /* ph, pw: top and left padding */
} conv_geom;

#define CONV_NFIELDS 16
/* The geometry in a node, each field checked to fit 32 bits at the op. */
typedef struct conv_params {
    int32_t kind;
    int32_t g[CONV_NFIELDS];
} conv_params;
TN_NODE_PARAMS(conv_params, conv_p)

static void geom_pack(conv_params *p, int kind, const conv_geom *g) {
    const int64_t *f = &g->n;
    p->kind = kind;
    for (int i = 0; i < CONV_NFIELDS; i++)
        p->g[i] = (int32_t)f[i];
}

static void geom_unpack(const conv_params *p, conv_geom *g) {
    int64_t *f = &g->n;
    for (int i = 0; i < CONV_NFIELDS; i++)
        f[i] = p->g[i];
}
_Static_assert(sizeof(conv_geom) == CONV_NFIELDS * sizeof(int64_t), "conv_geom is its fields");

/* ---- the primitives' kernels (no autograd) ------------------------------------------- */

/* Column-buffer chunk and the shared im2col description. */
static int64_t chunk_images(const conv_geom *g, tn_device dev, int kind) {
    int64_t per = g->c * g->kh * g->kw * g->oh * g->ow, nt = tn_get_num_threads();
    int64_t nb = per ? (dev.type == TN_CPU ? COL_BUDGET : COL_BUDGET_DEVICE) / per : g->n;
    /* not for the weight gradient, whose sums go by chunk (dw_partials): its bits would change
     * with the thread count */
    if (per && dev.type == TN_CPU && nb < nt && kind != CONV_DW)
        nb = COL_BUDGET_THREADS / per < nt ? COL_BUDGET_THREADS / per : nt;
    return nb < 1 ? 1 : nb > g->n ? g->n : nb;
}

static tn_conv_args im_args(const conv_geom *g, tn_dtype dt, int mode) {
    return (tn_conv_args){.mode = mode,
                          .dtype = dt,
                          .c = g->c,
                          .h = g->h,
                          .w = g->w,
                          .kh = g->kh,
                          .kw = g->kw,
                          .oh = g->oh,
                          .ow = g->ow,
                          .sh = g->sh,
                          .sw = g->sw,
                          .ph = g->ph,
                          .pw = g->pw,
                          .dh = g->dh,
                          .dw = g->dw,
                          .ims = g->c * g->h * g->w,
                          .cols = g->c * g->kh * g->kw * g->oh * g->ow};
}

/* col of images [n0, n0 + nb) of x (contiguous). */
static tn_status im2col(const conv_geom *g, tn_tensor *x, int64_t n0, int64_t nb, tn_tensor *col) {
    tn_conv_args a = im_args(g, x->dtype, TN_CONV_IM2COL);
    a.nb = nb;
    a.im = tn__ptr(x) + (size_t)(n0 * a.ims) * tn_dtype_size(x->dtype);
    a.col = tn__ptr(col);
    return tn__dev_conv(&a, tn__dev(x), (const tn_tensor *[]){col, x});
}

/* y[n0 .. n0+nb) (+)= w · col, or dcol = w^T · g[n0 .. n0+nb): one product per
 * (image, group); acc: y holds the bias, the products add to it. */
static tn_status gemm_chunk(const conv_geom *g, bool to_col, bool acc, tn_tensor *w, tn_tensor *col,
                            tn_tensor *y, int64_t n0, int64_t nb) {
    int64_t G = g->groups, ocg = g->oc / G, kc = g->c / G * g->kh * g->kw, L = g->oh * g->ow;
    size_t es = tn_dtype_size(w->dtype);
    char *yp = tn__ptr(y) + (size_t)(n0 * g->oc * L) * es;
    tn_gemm_batch b = {.ndim = 2, .shape = {nb, G}};
    tn_gemm m;
    if (!to_col) { /* y (ocg, L) = w (ocg, kc) · col (kc, L) */
        m = (tn_gemm){.m = ocg,
                      .n = L,
                      .k = kc,
                      .a = tn__ptr(w),
                      .rsa = kc,
                      .csa = 1,
                      .b = tn__ptr(col),
                      .rsb = L,
                      .csb = 1,
                      .c = yp,
                      .rsc = L,
                      .accumulate = acc};
        b.bsa[1] = ocg * kc, b.bsb[0] = g->c * g->kh * g->kw * L, b.bsb[1] = kc * L;
        b.bsc[0] = g->oc * L, b.bsc[1] = ocg * L;
        return tn__dev_gemm(w->dtype, &m, &b, tn__dev(w), 3, (const tn_tensor *[]){y, w, col});
    }
    /* dcol (kc, L) = w^T (kc, ocg) · g (ocg, L) */
    m = (tn_gemm){.m = kc,
                  .n = L,
                  .k = ocg,
                  .a = tn__ptr(w),
                  .rsa = 1,
                  .csa = kc,
                  .b = yp,
                  .rsb = L,
                  .csb = 1,
                  .c = tn__ptr(col),
                  .rsc = L};
    b.bsa[1] = ocg * kc, b.bsb[0] = g->oc * L, b.bsb[1] = ocg * L;
    b.bsc[0] = g->c * g->kh * g->kw * L, b.bsc[1] = kc * L;
    return tn__dev_gemm(w->dtype, &m, &b, tn__dev(w), 3, (const tn_tensor *[]){col, w, y});
}

/* dw (+)= g[img] · col(x[img])^T for the nb images from img, one product per (image, group),
 * into dw (nb == 1) or into nb partial weight gradients at out (nb, oc, kc) (acc: never). */
static tn_status gemm_dw(const conv_geom *g, tn_tensor *gy, tn_tensor *col, int64_t img, int64_t ci,
                         int64_t nb, bool acc, tn_tensor *out) {
    int64_t G = g->groups, ocg = g->oc / G, kc = g->c / G * g->kh * g->kw, L = g->oh * g->ow;
    size_t es = tn_dtype_size(out->dtype);
    tn_gemm m = {.m = ocg,
                 .n = kc,
                 .k = L,
                 .a = tn__ptr(gy) + (size_t)(img * g->oc * L) * es,
                 .rsa = L,
                 .csa = 1,
                 .b = tn__ptr(col) + (size_t)(ci * g->c * g->kh * g->kw * L) * es,
                 .rsb = 1,
                 .csb = L,
                 .c = tn__ptr(out),
                 .rsc = kc,
                 .accumulate = acc};
    tn_gemm_batch b = {.ndim = 2,
                       .shape = {nb, G},
                       .bsa = {g->oc * L, ocg * L},
                       .bsb = {g->c * g->kh * g->kw * L, kc * L},
                       .bsc = {g->oc * kc, ocg * kc}};
    return tn__dev_gemm(out->dtype, &m, &b, tn__dev(out), 3, (const tn_tensor *[]){out, gy, col});
}

/* The weight gradient of a chunk of nb images: the nb products at once into partials (one
 * batched call: on a device instead of nb calls of a few thread blocks each; on the CPU the
 * images' products split across the threads, where one image's product is too small to split),
 * then dw (+)= their sum as one more product, ones(1, nb) · partials (nb, oc·kc): the images
 * added in a fixed order, the chunks by the shape alone, so the same bits every run and for any
 * thread count. */
static tn_status dw_partials(const conv_geom *g, tn_tensor *gy, tn_tensor *col, int64_t n0,
                             int64_t nb, tn_tensor *part, tn_tensor *ones, tn_tensor *dw) {
    tn_status st = gemm_dw(g, gy, col, n0, 0, nb, false, part);
    int64_t wn = g->oc * (g->c / g->groups) * g->kh * g->kw;
    tn_gemm m = {.m = 1,
                 .n = wn,
                 .k = nb,
                 .a = tn__ptr(ones),
                 .rsa = nb,
                 .csa = 1,
                 .b = tn__ptr(part),
                 .rsb = wn,
                 .csb = 1,
                 .c = tn__ptr(dw),
                 .rsc = wn,
                 .accumulate = n0 > 0};
    if (st == TN_OK)
        st = tn__dev_gemm(dw->dtype, &m, NULL, tn__dev(dw), 3, (const tn_tensor *[]){dw, ones, part});
    return st;
}

/* The primitive `kind` on contiguous a, b (FWD: x, w; DX: g, w; DW: g, x);
 * out has the result's numel. acc (FWD): out holds the bias, the products add to it. */
static tn_status run_kernels(int kind, const conv_geom *g, tn_tensor *a, tn_tensor *b, bool acc,
                             tn_tensor *out) {
    if (tn__is_half(a->dtype)) {
        /* the halves: the whole primitive in float32, its result rounded once (as
         * PyTorch's CPU kernels), not each product and col2im add */
        int64_t n = tn_numel(out);
        tn_tensor *flat = tn__alias(out, 1, &n, (int64_t[]){1}, out->offset);
        tn_tensor *a32 = flat ? tn__cast(a, TN_F32) : NULL, *b32 = a32 ? tn__cast(b, TN_F32) : NULL;
        tn_tensor *o32 = b32 ? tn__empty_on(1, &n, TN_F32, tn__dev(out)) : NULL;
        tn_status st = o32 ? TN_OK : tn_last_status();
        if (st == TN_OK && acc) st = tn__copy_into(o32, flat);
        if (st == TN_OK) st = run_kernels(kind, g, a32, b32, acc, o32);
        if (st == TN_OK) st = tn__copy_into(flat, o32);
        tn_release(flat);
        tn_release(a32);
        tn_release(b32);
        tn_release(o32);
        return st;
    }
    const tn_device dev = tn__dev(a);
    int64_t nb = chunk_images(g, dev, kind);
    if (kind == CONV_DW && tn_numel(out) > 0) {
        /* dw_partials' partials, nb weight gradients, within a quarter of the budget */
        int64_t cap = (dev.type == TN_CPU ? COL_BUDGET : COL_BUDGET_DEVICE) / 4 / tn_numel(out);
        if (nb > cap) nb = cap > 1 ? cap : 1;
    }
    int64_t cshape = nb * g->c * g->kh * g->kw * g->oh * g->ow;
    tn_tensor *col = tn__empty_on(1, &cshape, a->dtype, dev);
    tn_status st = col ? TN_OK : tn_last_status();
    /* the weight gradient: the partials and the ones that add them (dw_partials) */
    tn_tensor *part = NULL, *ones = NULL;
    if (st == TN_OK && kind == CONV_DW && nb > 1) {
        int64_t pn = nb * tn_numel(out);
        part = tn__empty_on(1, &pn, a->dtype, dev);
        ones = part ? tn__full_on(1, &nb, a->dtype, 1.0, dev) : NULL;
        st = ones ? TN_OK : tn_last_status();
    }
    for (int64_t n0 = 0; st == TN_OK && n0 < g->n; n0 += nb) {
        int64_t k = g->n - n0 < nb ? g->n - n0 : nb;
        if (kind == CONV_FWD) {
            st = im2col(g, a, n0, k, col);
            if (st == TN_OK) st = gemm_chunk(g, false, acc, b, col, out, n0, k);
        } else if (kind == CONV_DX) {
            st = gemm_chunk(g, true, false, b, col, a, n0, k);
            tn_conv_args c = im_args(g, a->dtype, TN_CONV_COL2IM);
            c.nb = k;
            c.im = tn__ptr(out) + (size_t)(n0 * c.ims) * tn_dtype_size(a->dtype);
            c.col = tn__ptr(col);
            if (st == TN_OK) st = tn__dev_conv(&c, tn__dev(out), (const tn_tensor *[]){out, col});
        } else {
            st = im2col(g, b, n0, k, col);
            if (part) {
                if (st == TN_OK) st = dw_partials(g, a, col, n0, k, part, ones, out);
            } else { /* one image a chunk */
                for (int64_t i = 0; st == TN_OK && i < k; i++)
                    st = gemm_dw(g, a, col, n0 + i, i, 1, n0 + i > 0, out);
            }
        }
    }
    tn_release(col);
    tn_release(part);
    tn_release(ones);
    return st;
}

/* y (contiguous, FWD's result) = bias over (n, oc, positions): the products then add to it
 * (their accumulator starts at the bias), so the bias costs no pass of its own. */
static tn_status fill_bias(const conv_geom *g, tn_tensor *y, const tn_tensor *bias) {
    int64_t L = g->oh * g->ow;
    tn_tensor *y3 =
        tn__alias(y, 3, (int64_t[]){g->n, g->oc, L}, (int64_t[]){g->oc * L, L, 1}, y->offset);
    tn_tensor *b3 = y3 ? tn__alias(bias, 3, (int64_t[]){1, g->oc, 1},
                                   (int64_t[]){0, bias->stride[0], 0}, bias->offset)
                       : NULL;
    tn_status st = b3 ? tn__copy_into(y3, b3) : tn_last_status();
    tn_release(y3);
    tn_release(b3);
    return st;
}

/* The result of primitive `kind` (shape: out_ndim, out_shape), no autograd; bias: FWD's, or
 * NULL. */
static tn_tensor *run_prim(int kind, const conv_geom *g, const tn_tensor *a, const tn_tensor *b,
                           const tn_tensor *bias, int out_ndim, const int64_t *out_shape) {
    tn_device dev = tn__dev(a);
    int64_t L = g->oh * g->ow, kc = g->c / g->groups * g->kh * g->kw;
    /* nothing to sum (an empty product or no image): zeros (or the bias), or an empty result */
    bool zero = kc == 0 || (kind == CONV_DW && (g->n == 0 || L == 0)) ||
                (kind == CONV_DX && (L == 0 || g->oc == 0));
    bool empty = tn__numel(out_ndim, out_shape) == 0;
    tn_tensor *out =
        (zero && !bias ? tn__zeros_on : tn__empty_on)(out_ndim, out_shape, a->dtype, dev);
    tn_status st = !out ? tn_last_status() : bias && !empty ? fill_bias(g, out, bias) : TN_OK;
    if (st == TN_OK && (zero || empty)) return out;
    tn_tensor *ac = st == TN_OK ? tn__contiguous_on(a, dev) : NULL;
    tn_tensor *bc = ac ? tn__contiguous_on(b, dev) : NULL;
    if (st == TN_OK) st = bc ? run_kernels(kind, g, ac, bc, bias != NULL, out) : tn_last_status();
    tn_release(ac);
    tn_release(bc);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* ---- recorded primitives and their backward ------------------------------------------ */

static tn_tensor *prim(int kind, bool op, const conv_geom *g, tn_tensor *a, tn_tensor *b,
                       const tn_tensor *bias, int out_ndim, const int64_t *out_shape);

/* Gradients of primitive `kind` with result gradient gz into gi[0..1]. */
static tn_status prim_grads(tn_node *n, const conv_geom *g, tn_tensor *a, tn_tensor *b,
                            tn_tensor *gz, tn_tensor **gi) {
    int kind = conv_p(n)->kind;
    /* the primitive that gives each input's gradient, and its operands */
    static const int ka[3] = {CONV_DX, CONV_FWD, CONV_FWD}, kb[3] = {CONV_DW, CONV_DW, CONV_DX};
    tn_tensor *oa[3][2] = {{gz, b}, {gz, b}, {b, gz}}, *ob[3][2] = {{gz, a}, {a, gz}, {a, gz}};
    for (int k = 0; k < 2; k++) {
        if (!tn__edge_valid(&n->edges[k])) continue;
        const tn_input_meta *m = &n->in_meta[k];
        tn_tensor **o = k == 0 ? oa[kind] : ob[kind];
        gi[k] = prim(k == 0 ? ka[kind] : kb[kind], false, g, o[0], o[1], NULL, m->ndim, m->shape);
        if (!gi[k]) return tn_last_status();
    }
    return TN_OK;
}

/* The (images, channels, positions) of primitive `kind`'s result: FWD's is y-like, DX's (the
 * transposed convolution) x-like. */
static void out_planes(int kind, const conv_geom *g, int64_t s[3]) {
    s[0] = g->n;
    s[1] = kind == CONV_FWD ? g->oc : g->c;
    s[2] = kind == CONV_FWD ? g->oh * g->ow : g->h * g->w;
}

/* The bias gradient: gz summed over images and positions. */
static tn_tensor *bias_grad(int kind, const conv_geom *g, tn_tensor *gz) {
    int64_t dims[3];
    out_planes(kind, g, dims);
    tn_tensor *r = tn_reshape(gz, 3, dims);
    tn_tensor *s = r ? tn_sum_dim(r, 2, false) : NULL;
    tn_tensor *out = s ? tn_sum_dim(s, 0, false) : NULL;
    tn_release(r);
    tn_release(s);
    return out;
}

static tn_status conv_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    conv_geom g;
    geom_unpack(conv_p(n), &g);
    tn_tensor *a = tn__node_unpack(n, 0), *b = a ? tn__node_unpack(n, 1) : NULL;
    tn_status st = b ? prim_grads(n, &g, a, b, go[0], gi) : tn_last_status();
    if (st == TN_OK && n->n_in == 3 && tn__edge_valid(&n->edges[2]) &&
        !(gi[2] = bias_grad(conv_p(n)->kind, &g, go[0])))
        st = tn_last_status();
    tn_release(a);
    tn_release(b);
    return st; /* the engine releases gi[] on failure */
}
static const tn_fn_info conv_fn = {"ConvolutionBackward0", conv_bw};
static const tn_fn_info conv_bw_fn = {"ConvolutionBackwardBackward0", conv_bw};

/* y += bias over (n, channels, positions), outside autograd; engine code, so that the public
 * ops' results stay out of the caller's scope. */
static tn_status add_bias(int kind, const conv_geom *g, tn_tensor *y, const tn_tensor *bias) {
    int64_t s[3];
    out_planes(kind, g, s);
    tn__internal_enter();
    tn_tensor *bd = tn_detach(bias);
    tn_tensor *b3 = bd ? tn_reshape(bd, 3, (int64_t[]){1, s[1], 1}) : NULL;
    tn_tensor *y3 = b3 ? tn_reshape(y, 3, s) : NULL;
    tn_status st = y3 ? tn_add_(y3, b3) : tn_last_status();
    tn_release(bd);
    tn_release(b3);
    tn_release(y3);
    tn__internal_leave();
    return st;
}

/* Runs primitive `kind` and records its node when an input needs grad; `op`: a public op
 * (conv: FWD, conv_transpose: DX), with a bias (may be NULL) and PyTorch's grad_fn. */
static tn_tensor *prim(int kind, bool op, const conv_geom *g, tn_tensor *a, tn_tensor *b,
                       const tn_tensor *bias, int out_ndim, const int64_t *out_shape) {
    bool fused = bias && kind == CONV_FWD; /* the bias in the products' accumulator */
    tn_tensor *out = run_prim(kind, g, a, b, fused ? bias : NULL, out_ndim, out_shape);
    if (!out) return NULL;
    tn_status st = bias && !fused ? add_bias(kind, g, out, bias) : TN_OK;
    int nin = op ? 3 : 2;
    const tn_tensor *in[3] = {a, b, bias};
    if (st == TN_OK && tn__needs_grad(nin, in)) {
        tn_node *n = tn__node_new(op ? &conv_fn : &conv_bw_fn, nin, in, 2, 1);
        st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            geom_pack(conv_p(n), kind, g);
            st = tn__node_save(n, 0, a, false);
        }
        if (st == TN_OK) st = tn__node_save(n, 1, b, false);
        tn__node_release(n);
    }
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* ---- checks (PyTorch's texts) and the public ops --------------------------------------- */

typedef struct conv_call {
    const char *name; /* "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d" */
    const char *fn;   /* the public entry, for NULL-argument messages */
    int sd;           /* spatial dims: 1 or 2 */
    bool transposed;  /* conv_transpose: the DX primitive, the input in g's place */
    const int64_t *stride, *dilation;
    int64_t pad_lo[2], pad_hi[2]; /* per spatial dim */
    int64_t out_pad[2];           /* conv_transpose's output_padding, per spatial dim */
    bool same;
    bool bad_mode; /* a tn_conv_padding value outside the enum */
    int64_t groups;
} conv_call;

/* Canonical (H = 0, W = 1) value i of a per-spatial-dim array: conv1d's H takes `h1`. */
static int64_t cv(const conv_call *c, const int64_t *v, int i, int64_t h1) {
    return c->sd == 2 ? v[i] : i == 0 ? h1 : v[0];
}

/* The input as PyTorch's batched (N, C, [H,] W) in xb; the input's rank. */
static tn_status check_input(const conv_call *c, const tn_tensor *x, int64_t *xb) {
    if (x->ndim != c->sd + 1 && x->ndim != c->sd + 2) {
        char s[160];
        tn__format_shape(s, sizeof s, x->ndim, x->shape);
        return tn__error(TN_ERR_SHAPE,
                         "Expected %dD (unbatched) or %dD (batched) input to %s, but got input "
                         "of size: %s",
                         c->sd + 1, c->sd + 2, c->name, s);
    }
    bool batched = x->ndim == c->sd + 2;
    xb[0] = batched ? x->shape[0] : 1;
    for (int i = batched; i < x->ndim; i++)
        xb[i + !batched] = x->shape[i];
    return TN_OK;
}

/* The weight's rank against the input's: conv2d's two strides cannot expand to another
 * rank (PyTorch's stride text); conv1d's single values can, and 'same' checks first. */
static tn_status check_weight_rank(const conv_call *c, const tn_tensor *w, const int64_t *xb,
                                   bool same_check) {
    int xd = c->sd + 2;
    if (w->ndim == xd) return TN_OK;
    char ws[160], xs[160];
    tn__format_shape(ws, sizeof ws, w->ndim, w->shape);
    tn__format_shape(xs, sizeof xs, xd, xb);
    if (same_check)
        return tn__error(TN_ERR_SHAPE,
                         "Expected %d-dimensional input for %d-dimensional weight%s, but got "
                         "%d-dimensional input of size %s instead",
                         w->ndim, w->ndim, ws, xd, xs);
    if (c->sd == 2)
        return tn__error(TN_ERR_SHAPE,
                         "expected stride to be a single integer value or a list of %d values to "
                         "match the convolution dimensions, but got stride=[%lld, %lld]",
                         w->ndim - 2, (long long)c->stride[0], (long long)c->stride[1]);
    return tn__error(TN_ERR_SHAPE,
                     "Expected %d-dimensional input for %d-dimensional weight %s, but got "
                     "%d-dimensional input of size %s instead",
                     w->ndim, w->ndim, ws, xd, xs);
}

static tn_status check_params(const conv_call *c) {
    for (int i = 0; i < c->sd; i++) {
        if (c->pad_lo[i] < 0 || c->pad_hi[i] < 0)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "negative padding is not supported");
    }
    for (int i = 0; i < c->sd; i++)
        if (c->out_pad[i] < 0)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "negative output_padding is not supported");
    for (int i = 0; i < c->sd; i++)
        if (c->stride[i] <= 0)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "non-positive stride is not supported");
    for (int i = 0; i < c->sd && !c->transposed; i++) /* conv_transpose: check_transposed */
        if (c->dilation[i] <= 0) /* conv1d runs as conv2d with a leading dilation 1 */
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "dilation should be greater than zero, but got [%lld, %lld]",
                             (long long)(c->sd == 2 ? c->dilation[0] : 1),
                             (long long)c->dilation[c->sd - 1]);
    return TN_OK;
}

/* conv_transpose's: the weight is (C, OC / groups, ...), the input's channels its first. */
static tn_status check_channels_t(int64_t G, const tn_tensor *w, const tn_tensor *b,
                                  const int64_t *xb, const char *ws, const char *xs) {
    if (xb[1] != w->shape[0])
        return tn__error(TN_ERR_SHAPE,
                         "Given transposed=1, weight of size %s, expected input%s to have %lld "
                         "channels, but got %lld channels instead",
                         ws, xs, (long long)w->shape[0], (long long)xb[1]);
    const int64_t oc = w->shape[1] * G; /* both below 2^31 (check_ranges) */
    if (b && (b->ndim != 1 || b->shape[0] != oc)) {
        char bs[160];
        tn__format_shape(bs, sizeof bs, b->ndim, b->shape);
        return tn__error(TN_ERR_SHAPE,
                         "Given transposed=1, weight of size %s, expected bias to be "
                         "1-dimensional with %lld elements, but got bias of size %s instead",
                         ws, (long long)oc, bs);
    }
    return TN_OK;
}

static tn_status check_channels(const conv_call *c, const tn_tensor *w, const tn_tensor *b,
                                const int64_t *xb) {
    char ws[160], xs[160], bs[160];
    int64_t G = c->groups;
    tn__format_shape(ws, sizeof ws, w->ndim, w->shape);
    tn__format_shape(xs, sizeof xs, c->sd + 2, xb);
    if (w->shape[0] < G)
        return tn__error(TN_ERR_SHAPE,
                         "Given groups=%lld, expected weight to be at least %lld at dimension 0, "
                         "but got weight of size %s instead",
                         (long long)G, (long long)G, ws);
    if (w->shape[0] % G)
        return tn__error(TN_ERR_SHAPE,
                         "Given groups=%lld, expected weight to be divisible by %lld at dimension "
                         "0, but got weight of size [%s] instead",
                         (long long)G, (long long)G, ws);
    if (c->transposed) return check_channels_t(G, w, b, xb, ws, xs);
    const int64_t ic = w->shape[1] * G; /* both below 2^31 (check_ranges) */
    if (xb[1] != ic)
        return tn__error(TN_ERR_SHAPE,
                         "Given groups=%lld, weight of size %s, expected input%s to have %lld "
                         "channels, but got %lld channels instead",
                         (long long)G, ws, xs, (long long)ic, (long long)xb[1]);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
        tn__format_shape(bs, sizeof bs, b->ndim, b->shape);
        return tn__error(TN_ERR_SHAPE,
                         "Given weight of size %s, expected bias to be 1-dimensional with %lld "
                         "elements, but got bias of size %s instead",
                         ws, (long long)w->shape[0], bs);
    }
    return TN_OK;
}

/* Every size and parameter below 2^31 (the node keeps them in 32 bits: check_fits), checked
 * before any arithmetic on them, which then stays far from int64's range: the input's and the
 * weight's sizes, strides, paddings (both sides), dilations, output paddings and groups. A call
 * that fails here would fail check_fits after PyTorch's checks; it fails earlier, and safely. */
static tn_status check_ranges(const conv_call *c, const tn_tensor *w, const int64_t *xb) {
    bool ok = c->groups <= INT32_MAX;
    for (int i = 0; i < c->sd + 2; i++)
        ok &= xb[i] <= INT32_MAX && w->shape[i] <= INT32_MAX;
    for (int i = 0; i < c->sd; i++)
        ok &= c->stride[i] <= INT32_MAX && c->pad_lo[i] <= INT32_MAX && c->pad_hi[i] <= INT32_MAX &&
              c->out_pad[i] <= INT32_MAX && c->dilation[i] <= INT32_MAX;
    if (ok) return TN_OK;
    return tn__error(TN_ERR_INVALID_ARGUMENT,
                     "conv: sizes, strides, paddings and dilations must be below 2^31");
}

/* Kernel extent against the padded input, as PyTorch ("5 x 5"). */
static tn_status check_extent(const conv_call *c, const tn_tensor *w, const int64_t *xb) {
    char in[80] = "", k[80] = "";
    bool ok = true;
    for (int i = 0; i < c->sd; i++) {
        int64_t size = xb[2 + i] + c->pad_lo[i] + c->pad_hi[i];
        int64_t ext = c->dilation[i] * (w->shape[2 + i] - 1) + 1;
        ok &= size >= ext;
        size_t li = strlen(in), lk = strlen(k);
        snprintf(in + li, sizeof in - li, "%s%lld", i ? " x " : "", (long long)size);
        snprintf(k + lk, sizeof k - lk, "%s%lld", i ? " x " : "", (long long)ext);
    }
    if (ok) return TN_OK;
    return tn__error(TN_ERR_SHAPE,
                     "Calculated padded input size per channel: (%s). Kernel size: (%s). Kernel "
                     "size can't be greater than actual input size",
                     in, k);
}

/* PyTorch checks the bias's dtype before the shapes, the weight's and the kernel's after. */
static tn_status check_bias_type(const tn_tensor *x, const tn_tensor *b) {
    if (!b || b->dtype == x->dtype) return TN_OK;
    return tn__error(TN_ERR_DTYPE, "Input type (%s) and bias type (%s) should be the same",
                     tn__torch_cpp_name(x->dtype), tn__torch_cpp_name(b->dtype));
}

/* An empty spatial dim of the input (an empty batch or channel dim is served). */
static tn_status check_empty_dims(const int64_t *xb, int xd) {
    for (int i = 2; i < xd; i++)
        if (xb[i] == 0) {
            char s[160];
            tn__format_shape(s, sizeof s, xd, xb);
            return tn__error(TN_ERR_SHAPE,
                             "Only zero batch or zero channel inputs are supported, but got "
                             "input shape: %s",
                             s);
        }
    return TN_OK;
}

/* The operands' dtypes (conv checks the bias's before the shapes) and device. */
static tn_status check_types(const conv_call *c, const tn_tensor *x, const tn_tensor *w,
                             const tn_tensor *b) {
    const tn_tensor *other[2] = {w, c->transposed ? b : NULL};
    for (int i = 0; i < 2; i++)
        if (other[i] && other[i]->dtype != x->dtype)
            return tn__error(TN_ERR_DTYPE, "expected scalar type %s but found %s",
                             tn__torch_scalar_name(x->dtype),
                             tn__torch_scalar_name(other[i]->dtype));
    if (!tn__is_float(x->dtype)) /* PyTorch's CPU computes some; tenet has no integer kernel */
        return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for '%s'",
                         c->transposed ? "slow_conv_transpose2d_out_cpu" : "slow_conv2d_cpu",
                         tn__torch_scalar_name(x->dtype));
    tn_device dev;
    return tn__result_device(3, (const tn_tensor *[]){x, w, b}, &dev);
}

/* conv_transpose's kernel checks, on the canonical geometry, in PyTorch's order; PyTorch
 * skips them for an empty batch. */
static tn_status check_transposed(const conv_call *c, const tn_tensor *w, const conv_geom *g) {
    if (g->n == 0) {
        if (g->h >= 0 && g->w >= 0) return TN_OK;
        return tn__error(TN_ERR_SHAPE, "invalid shape dimension %lld",
                         (long long)(g->h < 0 ? g->h : g->w));
    }
    if (g->kh <= 0 || g->kw <= 0)
        return tn__error(TN_ERR_SHAPE,
                         "kernel size should be greater than zero, but got kernel_height: %lld "
                         "kernel_width: %lld",
                         (long long)g->kh, (long long)g->kw);
    if (g->dh <= 0 || g->dw <= 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "dilation should be greater than zero, but got dilation_height: %lld, "
                         "dilation_width: %lld",
                         (long long)g->dh, (long long)g->dw);
    int64_t oph = cv(c, c->out_pad, 0, 0), opw = cv(c, c->out_pad, 1, 0);
    if (!(opw < g->sw || opw < g->dw) || !(oph < g->sh || oph < g->dh))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "output padding must be smaller than either stride or dilation, but got "
                         "output_padding_height: %lld output_padding_width: %lld stride_height: "
                         "%lld stride_width: %lld dilation_height: %lld dilation_width: %lld",
                         (long long)oph, (long long)opw, (long long)g->sh, (long long)g->sw,
                         (long long)g->dh, (long long)g->dw);
    if (tn_numel(w) == 0) {
        char ws[160];
        int64_t w4[4] = {w->shape[0], w->shape[1], g->kh, g->kw};
        tn__format_shape(ws, sizeof ws, 4, w4);
        return tn__error(TN_ERR_SHAPE, "non-empty 2D or 4D weight tensor expected, but got: %s",
                         ws);
    }
    if (g->h < 1 || g->w < 1)
        return tn__error(TN_ERR_SHAPE,
                         "Given input size per channel: (%lld x %lld). Calculated output size "
                         "per channel: (%lld x %lld). Output size is too small",
                         (long long)g->oh, (long long)g->ow, (long long)g->h, (long long)g->w);
    return TN_OK;
}

/* Every size the node keeps must fit its 32-bit fields. */
static tn_status check_fits(const conv_geom *g) {
    const int64_t *f = &g->n;
    for (int i = 0; i < CONV_NFIELDS; i++)
        if (f[i] > INT32_MAX)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "conv: sizes, strides, paddings and dilations must "
                             "be below 2^31");
    return TN_OK;
}

/* The canonical geometry of the checked call. conv: the input is x; conv_transpose: the input
 * is g (y-like) and x's sizes follow from PyTorch's formula,
 * (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1. */
static void set_geom(const conv_call *c, const tn_tensor *w, const int64_t *xb, conv_geom *g) {
    int o = 2 - c->sd; /* conv1d: the H parameters are the identity's */
    int64_t in[2] = {o ? 1 : xb[2], xb[3 - o]}, k[2] = {o ? 1 : w->shape[2], w->shape[w->ndim - 1]};
    int64_t res[2];
    *g = (conv_geom){.n = xb[0],
                     .kh = k[0],
                     .kw = k[1],
                     .sh = cv(c, c->stride, 0, 1),
                     .sw = cv(c, c->stride, 1, 1),
                     .ph = cv(c, c->pad_lo, 0, 0),
                     .pw = cv(c, c->pad_lo, 1, 0),
                     .dh = cv(c, c->dilation, 0, 1),
                     .dw = cv(c, c->dilation, 1, 1),
                     .groups = c->groups};
    const int64_t *s = &g->sh, *pl = &g->ph, *d = &g->dh;
    for (int i = 0; i < 2; i++) {
        int64_t ext = d[i] * (k[i] - 1) + 1;
        if (c->transposed)
            res[i] = (in[i] - 1) * s[i] - 2 * pl[i] + ext + cv(c, c->out_pad, i, 0);
        else
            res[i] = (in[i] + pl[i] + cv(c, c->pad_hi, i, 0) - ext) / s[i] + 1;
    }
    const int64_t *xs = c->transposed ? res : in, *ys = c->transposed ? in : res;
    g->h = xs[0], g->w = xs[1], g->oh = ys[0], g->ow = ys[1];
    g->c = c->transposed ? w->shape[1] * c->groups : xb[1];
    g->oc = c->transposed ? xb[1] : w->shape[0];
}

/* The checks in PyTorch's order, then the canonical geometry. */
static tn_status make_geom(const conv_call *c, const tn_tensor *x, const tn_tensor *w,
                           const tn_tensor *b, conv_geom *g) {
    int64_t xb[4];
    tn_status st = check_input(c, x, xb);
    if (st == TN_OK && w->ndim < 3)
        return tn__error(TN_ERR_SHAPE, "weight should have at least three dimensions");
    if (st == TN_OK && c->same) {
        st = check_weight_rank(c, w, xb, true);
        for (int i = 0; st == TN_OK && i < c->sd; i++)
            if (c->stride[i] != 1)
                return tn__error(TN_ERR_INVALID_ARGUMENT,
                                 "padding='same' is not supported for strided convolutions");
    }
    if (st == TN_OK && c->groups <= 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "non-positive groups is not supported");
    if (st == TN_OK) st = check_weight_rank(c, w, xb, false);
    if (st == TN_OK) st = check_params(c);
    if (st == TN_OK) st = check_ranges(c, w, xb);
    if (st == TN_OK && !c->transposed) st = check_bias_type(x, b);
    if (st == TN_OK) st = check_channels(c, w, b, xb);
    if (st == TN_OK && !c->transposed) st = check_extent(c, w, xb);
    if (st == TN_OK) st = check_empty_dims(xb, c->sd + 2);
    if (st < 0) return st;
    set_geom(c, w, xb, g);
    if (c->transposed) st = check_transposed(c, w, g);
    if (st == TN_OK) st = check_types(c, x, w, b);
    return st < 0 ? st : check_fits(g);
}

static tn_tensor *conv_op(conv_call *c, const tn_tensor *x, const tn_tensor *w,
                          const tn_tensor *b) {
    double t0 = tn__prof_start();
    TN_CHECK_NULL_ARG_IN(c->fn, x, "input");
    TN_CHECK_NULL_ARG_IN(c->fn, w, "weight");
    if (c->bad_mode) { /* PyTorch's text names the string; the C API has an enum */
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "Invalid padding: %s takes TN_CONV_PAD_VALID or TN_CONV_PAD_SAME", c->name);
        return NULL;
    }
    static const int64_t ones[2] = {1, 1};
    if (!c->stride) c->stride = ones;
    if (!c->dilation) c->dilation = ones;
    if (c->same) { /* PyTorch: the odd unit of an even extent goes after */
        for (int i = 0; i < c->sd && w->ndim == c->sd + 2; i++) {
            int64_t d = c->dilation[i] > 0 ? c->dilation[i] : 1; /* else refused below */
            int64_t total;
            if (__builtin_mul_overflow(d, w->shape[2 + i] - 1, &total))
                total = INT64_MAX; /* refused below (check_ranges) */
            c->pad_lo[i] = total / 2, c->pad_hi[i] = total - total / 2;
        }
    }
    conv_geom g;
    if (make_geom(c, x, w, b, &g) < 0) return NULL;
    int64_t shape[4];
    int nd = x->ndim, batched = nd == c->sd + 2;
    if (batched) shape[0] = g.n;
    shape[batched] = c->transposed ? g.c : g.oc;
    if (c->sd == 2) shape[batched + 1] = c->transposed ? g.h : g.oh;
    shape[nd - 1] = c->transposed ? g.w : g.ow;
    tn_tensor *out = prim(c->transposed ? CONV_DX : CONV_FWD, true, &g, (tn_tensor *)x,
                          (tn_tensor *)w, b, nd, shape);
    tn__op_done(c->name, t0, out, 3, (const tn_tensor *[]){x, w, b});
    return tn__ret(out);
}

/* The public entries: the call c (name, entry, dims, stride, dilation, groups; conv_transpose:
 * output_padding) with padding (explicit values, NULL for 0) in mode TN_CONV_PAD_EXPLICIT;
 * the other modes compute it ('valid': 0; 'same': in conv_op). */
static tn_tensor *conv_entry(conv_call c, const tn_tensor *input, const tn_tensor *weight,
                             const tn_tensor *bias, const int64_t *padding, tn_conv_padding mode) {
    tn_ac_frame f;
    if (tn__autocast(&f, c.transposed ? TN_AC_CONV_TRANSPOSE : TN_AC_CONV, 3,
                     (const tn_tensor *[]){input, weight, bias}))
        return tn__autocast_done(&f, f.ok ? conv_entry(c, f.t[0], f.t[1], f.t[2], padding, mode)
                                          : NULL);
    for (int i = 0; i < c.sd; i++)
        c.pad_lo[i] = c.pad_hi[i] = mode == TN_CONV_PAD_EXPLICIT && padding ? padding[i] : 0;
    c.same = mode == TN_CONV_PAD_SAME;
    c.bad_mode = mode != TN_CONV_PAD_EXPLICIT && mode != TN_CONV_PAD_VALID && !c.same;
    return conv_op(&c, input, weight, bias);
}

tn_tensor *tn_conv2d(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                     const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                     int64_t groups) {
    conv_call c = {"conv2d", __func__, 2, false, stride, dilation, .groups = groups};
    return conv_entry(c, input, weight, bias, padding, TN_CONV_PAD_EXPLICIT);
}

tn_tensor *tn_conv2d_mode(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                          const int64_t stride[2], tn_conv_padding padding,
                          const int64_t dilation[2], int64_t groups) {
    conv_call c = {"conv2d", __func__, 2, false, stride, dilation, .groups = groups};
    return conv_entry(c, input, weight, bias, NULL, padding);
}

tn_tensor *tn_conv1d(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                     int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
    conv_call c = {"conv1d", __func__, 1, false, &stride, &dilation, .groups = groups};
    return conv_entry(c, input, weight, bias, &padding, TN_CONV_PAD_EXPLICIT);
}

tn_tensor *tn_conv1d_mode(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                          int64_t stride, tn_conv_padding padding, int64_t dilation,
                          int64_t groups) {
    conv_call c = {"conv1d", __func__, 1, false, &stride, &dilation, .groups = groups};
    return conv_entry(c, input, weight, bias, NULL, padding);
}

tn_tensor *tn_conv_transpose2d(const tn_tensor *input, const tn_tensor *weight,
                               const tn_tensor *bias, const int64_t stride[2],
                               const int64_t padding[2], const int64_t output_padding[2],
                               int64_t groups, const int64_t dilation[2]) {
    conv_call c = {"conv_transpose2d", __func__, 2, true, stride, dilation, .groups = groups};
    for (int i = 0; i < 2 && output_padding; i++)
        c.out_pad[i] = output_padding[i];
    return conv_entry(c, input, weight, bias, padding, TN_CONV_PAD_EXPLICIT);
}

tn_tensor *tn_conv_transpose1d(const tn_tensor *input, const tn_tensor *weight,
                               const tn_tensor *bias, int64_t stride, int64_t padding,
                               int64_t output_padding, int64_t groups, int64_t dilation) {
    conv_call c = {"conv_transpose1d",          __func__,        1, true, &stride, &dilation,
                   .out_pad = {output_padding}, .groups = groups};
    return conv_entry(c, input, weight, bias, &padding, TN_CONV_PAD_EXPLICIT);
}
