/* scaled_dot_product_attention, forward and backward: the fused kernel
 * family of engine/cpu/attention_kernels.c (CUDA: engine/cuda/attention.cu)
 * through tn__dev_attention.
 *
 * PyTorch 2.x semantics (1.13 has no SDPA): softmax(q k^T / sqrt(E) + mask)
 * v, leading dims broadcast, bool masks take part where true, float masks
 * are added; a row where no key takes part gives 0 and no gradient (2.5+'s
 * _safe_softmax). The mask is not differentiated (as PyTorch's fused CPU
 * kernel). Dropout keeps weight (b, i, j) by tn_attn_keep(seed, ...), the
 * seed drawn from the calling thread's generator, so backward regenerates
 * the mask.
 *
 * Node layout: ScaledDotProductFlashAttentionForCpuBackward0: inputs
 * {q, k, v}; saved {0: q, 1: k, 2: v, 3: mask (or empty), 4: out, 5: lse
 * (nb, L)}; parameters sdpa_params.
 * Backward: the kernel's, or under create_graph the composed formulas with
 * public ops (softmax, matmul, ...), so double backward works.
 */
#include <math.h>
#include <string.h>

#include "autocast.h"
#include "ops_internal.h"
#include "pointwise_driver.h"

typedef struct sdpa_params {
    double dropout_p;
    uint64_t seed; /* the dropout mask's */
    bool is_causal;
    bool has_mask; /* saved slot 3 holds the mask */
} sdpa_params;
TN_NODE_PARAMS(sdpa_params, sdpa_p)

/* PyTorch's names of dtypes as caffe2::TypeMeta prints them. */
static const char *meta_name(tn_dtype dt) {
    return (int)dt >= 0 && dt < TN_DTYPE_COUNT ? tn__torch_cpp_name(dt) : "?";
}

/* The geometry of one call: batch shape, sizes, and the kernel's strides. */
typedef struct attn_geom {
    int bdim;
    int64_t bshape[TN_MAX_DIMS];
    int64_t nb, L, S, E, Ev;
} attn_geom;

static tn_status check_inputs(const tn_tensor *q, const tn_tensor *k, const tn_tensor *v,
                              const tn_tensor *mask, double p, bool causal) {
    if (q->dtype != k->dtype || q->dtype != v->dtype)
        return tn__error(TN_ERR_DTYPE,
                         "Expected query, key, and value to have the same dtype, but got "
                         "query.dtype: %s key.dtype: %s and value.dtype: %s instead.",
                         meta_name(q->dtype), meta_name(k->dtype), meta_name(v->dtype));
    if (!tn__same_device(tn__dev(q), tn__dev(k)) || !tn__same_device(tn__dev(q), tn__dev(v))) {
        char a[32], b[32], c[32];
        return tn__error(TN_ERR_DEVICE,
                         "Expected query, key, and value to have the same device type, but got "
                         "query.device: %s key.device: %s and value.device: %s instead.",
                         tn__device_str(tn__dev(q), a, sizeof a),
                         tn__device_str(tn__dev(k), b, sizeof b),
                         tn__device_str(tn__dev(v), c, sizeof c));
    }
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return tn__error(TN_ERR_SHAPE,
                         "Expected query, key, and value to all be  at least 2 dimensional, but "
                         "got query.dim: %d key.dim: %d and value.dim: %d instead.",
                         q->ndim, k->ndim, v->ndim);
    if (mask && mask->dtype != TN_BOOL && mask->dtype != TN_F32 && mask->dtype != q->dtype)
        return tn__error(TN_ERR_DTYPE,
                         "Expected attn_mask dtype to be bool or float or to match query dtype, "
                         "but got attn_mask.dtype: %s and  query.dtype: %s instead.",
                         meta_name(mask->dtype), meta_name(q->dtype));
    if (!tn__is_float(q->dtype))
        return tn__error(TN_ERR_DTYPE, "\"softmax_lastdim_kernel_impl\" not implemented for '%s'",
                         tn_dtype_name(q->dtype));
    if (causal && mask)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "_scaled_dot_product_attention: Explicit "
                         "attn_mask should not be set when is_causal=True");
    if (!(p >= 0 && p <= 1))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "dropout probability has to be between 0 and 1, but got %g", p);
    tn_device dev; /* a 0-dim CPU mask joins q's device (in_prepare moves it) */
    return mask ? tn__result_device(2, (const tn_tensor *[]){q, mask}, &dev) : TN_OK;
}

static tn_status make_geom(const tn_tensor *q, const tn_tensor *k, const tn_tensor *v,
                           const tn_tensor *mask, attn_geom *g) {
    g->L = q->shape[q->ndim - 2], g->E = q->shape[q->ndim - 1];
    g->S = k->shape[k->ndim - 2], g->Ev = v->shape[v->ndim - 1];
    if (k->shape[k->ndim - 1] != g->E)
        return tn__error(TN_ERR_SHAPE,
                         "scaled_dot_product_attention: Expected query and key to have the same "
                         "size in the last dimension, but got query.size(-1): %lld and "
                         "key.size(-1): %lld",
                         (long long)g->E, (long long)k->shape[k->ndim - 1]);
    if (v->shape[v->ndim - 2] != g->S)
        return tn__error(TN_ERR_SHAPE,
                         "scaled_dot_product_attention: Expected key and value to have the same "
                         "sequence length, but got key.size(-2): %lld and value.size(-2): %lld",
                         (long long)g->S, (long long)v->shape[v->ndim - 2]);
    int n1;
    int64_t b1[TN_MAX_DIMS];
    if (tn__broadcast_shape(q->ndim - 2, q->shape, k->ndim - 2, k->shape, &n1, b1) < 0 ||
        tn__broadcast_shape(n1, b1, v->ndim - 2, v->shape, &g->bdim, g->bshape) < 0)
        return tn_last_status();
    g->nb = tn__numel(g->bdim, g->bshape);
    if (!mask) return TN_OK;
    /* the mask is added into the (batch, L, S) scores: it broadcasts into them */
    int64_t full[TN_MAX_DIMS + 2];
    memcpy(full, g->bshape, sizeof(int64_t) * (size_t)g->bdim);
    full[g->bdim] = g->L, full[g->bdim + 1] = g->S;
    int nm;
    int64_t bm[TN_MAX_DIMS + 2];
    if (g->bdim + 2 > TN_MAX_DIMS)
        return tn__error(TN_ERR_SHAPE, "scaled_dot_product_attention: too many dims");
    if (tn__broadcast_shape(mask->ndim, mask->shape, g->bdim + 2, full, &nm, bm) < 0)
        return tn_last_status();
    if (nm != g->bdim + 2 || memcmp(bm, full, sizeof(int64_t) * (size_t)nm) != 0) {
        char a[128], b[128];
        tn__format_shape(a, sizeof a, g->bdim + 2, full);
        tn__format_shape(b, sizeof b, nm, bm);
        return tn__error(TN_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s",
                         a, b);
    }
    return TN_OK;
}

/* Batch strides of t (elements) aligned from the right to the batch shape;
 * 0 where t broadcasts. `extra`: dims of t past its batch dims. */
static void batch_strides(const tn_tensor *t, int extra, const attn_geom *g, int64_t *bs) {
    int tb = t->ndim - extra;
    for (int d = 0; d < g->bdim; d++) {
        int td = d - (g->bdim - tb);
        bs[d] = td >= 0 && t->shape[td] != 1 ? t->stride[td] : 0;
    }
}

/* t itself when its last dim is unit-stride (or size 1), else a contiguous copy. */
static tn_tensor *rows_contig(const tn_tensor *t) {
    if (t->shape[t->ndim - 1] <= 1 || t->stride[t->ndim - 1] == 1) return tn__retain(t);
    return tn__contiguous_on(t, tn__dev(t));
}

/* Fills the kernel's description of q, k, v and the mask (prepared). */
static void fill_args(tn_attn_args *a, const attn_geom *g, const tn_tensor *q, const tn_tensor *k,
                      const tn_tensor *v, const tn_tensor *mask, double p, bool causal,
                      uint64_t seed) {
    memset(a, 0, sizeof *a);
    a->dtype = q->dtype;
    a->bdim = g->bdim;
    memcpy(a->bshape, g->bshape, sizeof a->bshape);
    a->L = g->L, a->S = g->S, a->E = g->E, a->Ev = g->Ev;
    a->scale = 1.0 / sqrt((double)g->E);
    a->q = tn__ptr(q), a->k = tn__ptr(k), a->v = tn__ptr(v);
    batch_strides(q, 2, g, a->bsq), batch_strides(k, 2, g, a->bsk), batch_strides(v, 2, g, a->bsv);
    a->rsq = q->stride[q->ndim - 2], a->rsk = k->stride[k->ndim - 2];
    a->rsv = v->stride[v->ndim - 2];
    if (mask) {
        a->mask = tn__ptr(mask);
        a->mask_kind = mask->dtype == TN_BOOL ? TN_ATTN_MASK_BOOL : TN_ATTN_MASK_ADD;
        int nd = mask->ndim;
        a->csm = nd >= 1 && mask->shape[nd - 1] != 1 ? mask->stride[nd - 1] : 0;
        a->rsm = nd >= 2 && mask->shape[nd - 2] != 1 ? mask->stride[nd - 2] : 0;
        /* batch dims of the mask: those before its last two (fewer when nd < 2) */
        for (int d = 0; d < g->bdim; d++) {
            int td = d - (g->bdim - (nd - 2));
            a->bsm[d] = td >= 0 && mask->shape[td] != 1 ? mask->stride[td] : 0;
        }
    }
    a->causal = causal;
    a->dropout_p = p;
    a->seed = seed;
}

/* q, k, v with unit-stride rows and the mask in a kernel dtype (bool or q's). */
typedef struct attn_in {
    tn_tensor *q, *k, *v, *mask;
} attn_in;

/* Leaves in empty: a second release (an error path's, then the caller's) finds nothing. */
static void in_release(attn_in *in) {
    tn_release(in->q), tn_release(in->k), tn_release(in->v), tn_release(in->mask);
    memset(in, 0, sizeof *in);
}

static tn_status in_prepare(attn_in *in, const tn_tensor *q, const tn_tensor *k, const tn_tensor *v,
                            const tn_tensor *mask) {
    memset(in, 0, sizeof *in);
    in->q = rows_contig(q), in->k = in->q ? rows_contig(k) : NULL;
    in->v = in->k ? rows_contig(v) : NULL;
    if (in->v && mask) {
        tn_tensor *m = mask->dtype == TN_BOOL ? tn__retain(mask) : tn__cast(mask, q->dtype);
        in->mask = m ? tn__on_device(m, tn__dev(q)) : NULL;
        tn_release(m);
    }
    if (!in->v || (mask && !in->mask)) {
        in_release(in);
        return tn_last_status();
    }
    return TN_OK;
}

static void out_shape(const attn_geom *g, int64_t last2, int64_t last, int64_t *shape) {
    memcpy(shape, g->bshape, sizeof(int64_t) * (size_t)g->bdim);
    shape[g->bdim] = last2, shape[g->bdim + 1] = last;
}

/* A new tensor of shape (batch, rows, cols) laid out in the order of ref's dims (the input of
 * the same role): dense, its dims in ref's decreasing stride order, as PyTorch's empty_like
 * (its fused CPU kernel likewise gives out as (B, L, H, Ev) transposed). The heads of a
 * transformer are a transposed view of (B, L, H, E): the output's transpose(1, 2).reshape(B, L,
 * H Ev) is then a view, not a copy, and so are the gradients' way back to the projection.
 * Contiguous when ref broadcasts into the batch or its last dim is not the fastest. */
static tn_tensor *empty_ordered(const tn_tensor *ref, const attn_geom *g, int64_t rows,
                                int64_t cols, tn_dtype dt, tn_device dev) {
    int nd = g->bdim + 2, perm[TN_MAX_DIMS];
    int64_t shape[TN_MAX_DIMS], pshape[TN_MAX_DIMS], stride[TN_MAX_DIMS];
    out_shape(g, rows, cols, shape);
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    for (int d = 1; ref->ndim == nd && d < nd; d++) /* stable: equal strides keep their order */
        for (int e = d; e > 0 && ref->stride[perm[e - 1]] < ref->stride[perm[e]]; e--) {
            int t = perm[e];
            perm[e] = perm[e - 1], perm[e - 1] = t;
        }
    bool identity = true;
    for (int d = 0; d < nd; d++)
        identity = identity && perm[d] == d;
    if (identity || perm[nd - 1] != nd - 1) return tn__empty_on(nd, shape, dt, dev);
    for (int d = 0; d < nd; d++)
        pshape[d] = shape[perm[d]];
    tn_tensor *dense = tn__empty_on(nd, pshape, dt, dev);
    if (!dense) return NULL;
    int64_t st = 1;
    for (int d = nd - 1; d >= 0; d--) {
        stride[perm[d]] = st;
        st *= pshape[d] > 1 ? pshape[d] : 1;
    }
    tn_tensor *t = tn__alias(dense, nd, shape, stride, 0);
    tn_release(dense);
    return t;
}

/* The kernel's description of an output (or dout) t: its batch strides and row stride. */
static void out_strides(const tn_tensor *t, const attn_geom *g, int64_t *bs, int64_t *rs) {
    batch_strides(t, 2, g, bs);
    *rs = t->stride[t->ndim - 2];
}

/* ---- backward -------------------------------------------------------------------------- */

/* Dense (nb-shaped) host tensors of the composed path: the additive mask
 * (0 / -inf, or the float mask; 0 on rows where no key takes part), the
 * dropout scale Z, and 1 / 0 per row (0: no key takes part). */
static tn_status dense_masks(const tn_attn_args *a, const attn_geom *g, tn_tensor **madd,
                             tn_tensor **z, tn_tensor **rowkeep) {
    int64_t shp[TN_MAX_DIMS], rshp[TN_MAX_DIMS];
    out_shape(g, g->L, g->S, shp);
    out_shape(g, g->L, 1, rshp);
    tn_dtype dt = a->dtype;
    *madd = tn__empty(g->bdim + 2, shp, dt), *z = *madd ? tn__empty(g->bdim + 2, shp, dt) : NULL;
    *rowkeep = *z ? tn__empty(g->bdim + 2, rshp, dt) : NULL;
    if (!*rowkeep) return tn_last_status();
    /* no query row: the three are empty, and nb may stand for a product of batch dims that
     * overflows (INT64_MAX) around the empty dim: nothing to fill */
    if (g->L == 0) return TN_OK;
    char *mp = tn__ptr(*madd), *zp = tn__ptr(*z), *rp = tn__ptr(*rowkeep);
    size_t es = tn__dtype_sizes[dt];
    double zs = a->dropout_p >= 1 ? 0 : 1 / (1 - a->dropout_p);
    for (int64_t b = 0; b < g->nb; b++) {
        int64_t om = 0, r = b;
        for (int d = g->bdim - 1; d >= 0; d--)
            om += r % g->bshape[d] * a->bsm[d], r /= g->bshape[d];
        for (int64_t i = 0; i < g->L; i++) {
            int64_t row = (b * g->L + i) * g->S;
            bool any = false;
            for (int64_t j = 0; j < g->S; j++) {
                const char *mk = a->mask ? (const char *)a->mask +
                                               (om + i * a->rsm + j * a->csm) *
                                                   (a->mask_kind == TN_ATTN_MASK_BOOL ? 1 : es)
                                         : NULL;
                double add = 0;
                if (a->causal && j > i + a->causal_offset) add = -INFINITY;
                if (mk && a->mask_kind == TN_ATTN_MASK_BOOL && !*(const uint8_t *)mk)
                    add = -INFINITY;
                if (mk && a->mask_kind == TN_ATTN_MASK_ADD) add = tn__load(mk, dt);
                any |= add != -INFINITY;
                tn__store(mp + (size_t)(row + j) * es, dt, add);
                bool keep = a->dropout_p <= 0 || tn_attn_keep(a->seed, b, i, j, a->dropout_p);
                tn__store(zp + (size_t)(row + j) * es, dt, keep ? zs : 0);
            }
            if (!any)
                for (int64_t j = 0; j < g->S; j++)
                    tn__store(mp + (size_t)(row + j) * es, dt, 0);
            tn__store(rp + (size_t)(b * g->L + i) * es, dt, any ? 1 : 0);
        }
    }
    return TN_OK;
}

/* Under create_graph: P = softmax(q k^T scale + M) R (R: rows taking part),
 * dV = (P Z)^T g, dP = (g v^T) Z, dS = P (dP - sum(dP P)), dQ = dS k scale,
 * dK = dS^T q scale, all recorded. */
static tn_status bw_composed(const tn_attn_args *a, const attn_geom *g, tn_tensor *q, tn_tensor *k,
                             tn_tensor *v, tn_tensor *go, tn_tensor **gi) {
    tn_tensor *mh = NULL, *zh = NULL, *rh = NULL;
    tn_status st = dense_masks(a, g, &mh, &zh, &rh);
    tn_device dev = tn__dev(q);
    tn_tensor *m = st == TN_OK ? tn__on_device(mh, dev) : NULL,
              *z = m ? tn__on_device(zh, dev) : NULL;
    tn_tensor *r = z ? tn__on_device(rh, dev) : NULL;
    tn_tensor *kt = r ? tn_transpose(k, -2, -1) : NULL, *qk = kt ? tn_matmul(q, kt) : NULL;
    tn_tensor *sc = qk ? tn_mul_scalar(qk, a->scale) : NULL, *sm = sc ? tn_add(sc, m) : NULL;
    tn_tensor *p0 = sm ? tn_softmax(sm, -1) : NULL, *p = p0 ? tn_mul(p0, r) : NULL;
    tn_tensor *pz = p ? tn_mul(p, z) : NULL, *pzt = pz ? tn_transpose(pz, -2, -1) : NULL;
    tn_tensor *vt = pzt ? tn_transpose(v, -2, -1) : NULL, *dpz = vt ? tn_matmul(go, vt) : NULL;
    tn_tensor *dp = dpz ? tn_mul(dpz, z) : NULL, *dpp = dp ? tn_mul(dp, p) : NULL;
    tn_tensor *rs = dpp ? tn_sum_dim(dpp, -1, true) : NULL, *d = rs ? tn_sub(dp, rs) : NULL;
    tn_tensor *ds0 = d ? tn_mul(p, d) : NULL, *ds = ds0 ? tn_mul_scalar(ds0, a->scale) : NULL;
    tn_tensor *dst = ds ? tn_transpose(ds, -2, -1) : NULL;
    if (!dst || !(gi[0] = tn_matmul(ds, k)) || !(gi[1] = tn_matmul(dst, q)) ||
        !(gi[2] = tn_matmul(pzt, go)))
        st = st < 0 ? st : tn_last_status();
    tn_tensor *tmp[] = {mh, zh,  rh, m,   z,  r,   kt, qk, sc,  sm, p0, p,
                        pz, pzt, vt, dpz, dp, dpp, rs, d,  ds0, ds, dst};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tn_release(tmp[i]);
    return st;
}

/* Without create_graph: the fused kernel from the saved out and lse. */
static tn_status bw_fused(tn_attn_args *a, const attn_geom *g, const attn_in *in, tn_tensor *out,
                          tn_tensor *lse, tn_tensor *go, tn_tensor **gi) {
    int64_t sk[TN_MAX_DIMS], sv[TN_MAX_DIMS];
    out_shape(g, g->S, g->E, sk), out_shape(g, g->S, g->Ev, sv);
    tn_device dev = tn__dev(in->q);
    tn_tensor *gc = rows_contig(go); /* dout as it comes: out's layout, as a rule */
    tn_tensor *dq = gc ? empty_ordered(in->q, g, g->L, g->E, a->dtype, dev) : NULL;
    /* No query (L = 0): no gradient reaches the keys and values, and no kernel runs (the
     * batch dims around an empty one may multiply to anything) */
    tn_tensor *dk = NULL, *dv = NULL;
    if (dq && g->L == 0) {
        dk = tn__zeros_on(g->bdim + 2, sk, a->dtype, dev);
        dv = dk ? tn__zeros_on(g->bdim + 2, sv, a->dtype, dev) : NULL;
    } else if (dq) {
        dk = empty_ordered(in->k, g, g->S, g->E, a->dtype, dev);
        dv = dk ? empty_ordered(in->v, g, g->S, g->Ev, a->dtype, dev) : NULL;
    }
    tn_status st = dv ? TN_OK : tn_last_status();
    if (st == TN_OK && g->L > 0 && tn_numel(dq) + tn_numel(dk) + tn_numel(dv) > 0) {
        a->mode = TN_ATTN_BWD;
        a->o = tn__ptr(out), a->lse = tn__ptr(lse), a->dout = tn__ptr(gc);
        a->dq = tn__ptr(dq), a->dk = tn__ptr(dk), a->dv = tn__ptr(dv);
        out_strides(out, g, a->bso, &a->rso), out_strides(gc, g, a->bsg, &a->rsg);
        out_strides(dq, g, a->bsdq, &a->rsdq), out_strides(dk, g, a->bsdk, &a->rsdk);
        out_strides(dv, g, a->bsdv, &a->rsdv);
        const tn_tensor *ops[] = {dq, dk, dv, in->q, in->k, in->v, out, lse, gc, in->mask};
        st = tn__dev_attention(a, dev, in->mask ? 10 : 9, 3, ops);
    }
    if (st == TN_OK) {
        gi[0] = dq, gi[1] = dk, gi[2] = dv;
    } else {
        tn_release(dq), tn_release(dk), tn_release(dv);
    }
    tn_release(gc);
    return st;
}

static tn_status sdpa_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *sv[6] = {NULL};
    tn_status st = TN_OK;
    const sdpa_params *p = sdpa_p(n);
    for (int i = 0; i < 6 && st == TN_OK; i++)
        if (i != 3 || p->has_mask) st = (sv[i] = tn__node_unpack(n, i)) ? TN_OK : tn_last_status();
    attn_in in = {0};
    attn_geom g;
    tn_attn_args a;
    if (st == TN_OK) st = in_prepare(&in, sv[0], sv[1], sv[2], sv[3]);
    if (st == TN_OK) st = make_geom(in.q, in.k, in.v, in.mask, &g);
    if (st == TN_OK) {
        bool composed = tn__grad_enabled();
        /* the composed path reads the mask on the host */
        tn_tensor *m = composed && in.mask ? tn__on_device(in.mask, TN_DEVICE_CPU) : in.mask;
        if (in.mask && !m) st = tn_last_status();
        fill_args(&a, &g, in.q, in.k, in.v, m, p->dropout_p, p->is_causal, p->seed);
        if (st == TN_OK && composed)
            st = bw_composed(&a, &g, sv[0], sv[1], sv[2], go[0], gi);
        else if (st == TN_OK)
            st = bw_fused(&a, &g, &in, sv[4], sv[5], go[0], gi);
        if (composed) tn_release(m); /* a reference of its own (NULL-safe) */
    }
    in_release(&in);
    for (int i = 0; i < 6; i++)
        tn_release(sv[i]);
    return st;
}
static const tn_fn_info sdpa_fn = {"ScaledDotProductFlashAttentionForCpuBackward0", sdpa_bw};

/* ---- forward --------------------------------------------------------------------------- */

/* The kernel's forward: out (*, L, Ev) and lse (nb, L), new references
 * (both NULL on error). */
static tn_status forward(const attn_geom *g, const tn_tensor *q, const tn_tensor *k,
                         const tn_tensor *v, const tn_tensor *mask, double p, bool causal,
                         int64_t offset, uint64_t seed, tn_tensor **out, tn_tensor **lse) {
    attn_in in;
    *out = *lse = NULL;
    if (in_prepare(&in, q, k, v, mask) < 0) return tn_last_status();
    tn_device dev = tn__dev(q);
    *out = empty_ordered(in.q, g, g->L, g->Ev, q->dtype, dev);
    *lse = *out ? tn__empty_on(2, (int64_t[]){g->nb, g->L}, q->dtype, dev) : NULL;
    tn_status st = *lse ? TN_OK : tn_last_status();
    if (st == TN_OK && tn_numel(*out) + tn_numel(*lse) > 0) {
        tn_attn_args a;
        fill_args(&a, g, in.q, in.k, in.v, in.mask, p, causal, seed);
        a.causal_offset = offset;
        a.mode = TN_ATTN_FWD;
        a.o = tn__ptr(*out), a.lse = tn__ptr(*lse);
        out_strides(*out, g, a.bso, &a.rso);
        const tn_tensor *ops[] = {*out, *lse, in.q, in.k, in.v, in.mask};
        st = tn__dev_attention(&a, dev, in.mask ? 6 : 5, 2, ops);
    }
    in_release(&in);
    if (st < 0) {
        tn_release(*out), tn_release(*lse);
        *out = *lse = NULL;
    }
    return st;
}

tn_tensor *tn__sdpa_offset(const tn_tensor *q, const tn_tensor *k, const tn_tensor *v,
                           const tn_tensor *key_mask, int64_t offset) {
    attn_geom g;
    if (check_inputs(q, k, v, key_mask, 0.0, false) < 0 || make_geom(q, k, v, key_mask, &g) < 0)
        return NULL;
    tn_tensor *out, *lse;
    if (forward(&g, q, k, v, key_mask, 0.0, true, offset, 0, &out, &lse) < 0) return NULL;
    tn_release(lse);
    return out;
}

static tn_status record(const tn_tensor *q, const tn_tensor *k, const tn_tensor *v,
                        const tn_tensor *mask, double p, bool causal, uint64_t seed, tn_tensor *out,
                        tn_tensor *lse) {
    const tn_tensor *ins[3] = {q, k, v};
    tn_node *n = tn__node_new(&sdpa_fn, 3, ins, 6, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK)
        *sdpa_p(n) = (sdpa_params){
            .dropout_p = p, .seed = seed, .is_causal = causal, .has_mask = mask != NULL};
    for (int i = 0; i < 3 && st == TN_OK; i++)
        st = tn__node_save(n, i, ins[i], false);
    if (st == TN_OK && mask) st = tn__node_save(n, 3, mask, false);
    if (st == TN_OK) st = tn__node_save(n, 4, out, true);
    if (st == TN_OK) st = tn__node_save(n, 5, lse, false);
    tn__node_release(n);
    return st;
}

tn_tensor *tn_scaled_dot_product_attention(const tn_tensor *q, const tn_tensor *k,
                                           const tn_tensor *v, const tn_tensor *attn_mask,
                                           double dropout_p, bool is_causal) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_SDPA, 4, (const tn_tensor *[]){q, k, v, attn_mask}))
        return tn__autocast_done(&f, f.ok ? tn_scaled_dot_product_attention(f.t[0], f.t[1], f.t[2],
                                                                            f.t[3], dropout_p,
                                                                            is_causal)
                                          : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(q, "query");
    TN_CHECK_NULL_ARG(k, "key");
    TN_CHECK_NULL_ARG(v, "value");
    attn_geom g;
    if (check_inputs(q, k, v, attn_mask, dropout_p, is_causal) < 0 ||
        make_geom(q, k, v, attn_mask, &g) < 0)
        return NULL;
    uint64_t seed = dropout_p > 0 ? tn__rand_u64() : 0;
    tn_tensor *out, *lse;
    tn_status st = forward(&g, q, k, v, attn_mask, dropout_p, is_causal, 0, seed, &out, &lse);
    if (st == TN_OK)
        tn__op_done("scaled_dot_product_attention", t0, out, 3, (const tn_tensor *[]){q, k, v});
    if (st == TN_OK && tn__needs_grad(3, (const tn_tensor *[]){q, k, v}))
        st = record(q, k, v, attn_mask, dropout_p, is_causal, seed, out, lse);
    tn_release(lse);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__ret(out);
}
