/* engine/cpu/attention_impl.h — the tiled attention kernel for one float
 * dtype, included by attention_kernels.c once per dtype with SUF defined
 * (each_dtype.h): T its element type, EXP (exp_SUF) a vectorisable exp of T,
 * MR (MR_SUF) the register tile's rows.
 *
 * Tiles: BQ query rows x BK keys. A worker's scratch (struct ws) holds the
 * score tile s and dp (BQ x BK), the packed, transposed key tile kt (E x BK)
 * and value tile vt (Ev x BK), zero-padded past the last key, so every inner
 * loop runs over BK (a compile-time constant) or a row of E/Ev contiguous
 * elements, and vectorises.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)
#define EXP TN_NAME(exp, SUF)
#define MR TN_CAT(MR_, SUF)
#include "vec_names.h"
#define NV (BK / VL) /* vectors in a row of BK */

#include "dots_impl.h"

/* Packs rows [j0, j0+n) of a (row stride rs, cols d contiguous) transposed
 * into t (d x BK), zero past n. */
static void F(pack_t)(T *t, const T *a, int64_t rs, int64_t n, int64_t d) {
    if (n < BK)
        for (int64_t e = 0; e < d; e++)
            for (int64_t j = n; j < BK; j++)
                t[e * BK + j] = 0;
    for (int64_t j = 0; j < n; j++) /* rows read in order, columns scattered */
        for (int64_t e = 0; e < d; e++)
            t[e * BK + j] = a[j * rs + e];
}

/* The register tile: rows i < mr of c (row stride rc, BK columns) = (or += when add) the sum
 * over p < k of a(i, p) b(p, :), with a(i, p) = a[i ars + p aps] (rows past mr repeat row
 * mr - 1, their results dropped) and b(p, :) the BK contiguous elements at b + p brs. The
 * accumulators are vectors indexed by constants (vec.h), written out here: as the caller's
 * scalar array they lived on the stack, zeroed and copied with rep stos / rep movs for every
 * tile. Only the first nvc (a constant once inlined) of a row's NV vectors are computed. */
static inline __attribute__((always_inline)) void
F(ukr)(T *restrict c, int64_t rc, bool add, int64_t k, const T *restrict a, int64_t ars,
       int64_t aps, int mr, const T *restrict b, int64_t brs, const int nvc) {
    const T *ar[MR];
    V t[MR][NV];
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
        ar[i] = a + (i < mr ? i : mr - 1) * ars;
        _Pragma("GCC unroll 16") for (int v = 0; v < nvc; v++) t[i][v] = (V){0};
    }
    for (int64_t p = 0; p < k; p++, b += brs)
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
            const V ai = SPLAT(ar[i][p * aps]);
            _Pragma("GCC unroll 16") for (int v = 0; v < nvc; v++) t[i][v] =
                VFMA(ai, VLD(b + v * VL), t[i][v]);
        }
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        _Pragma("GCC unroll 16") for (int v = 0; v < nvc; v++)
            VOUT(c + i * rc + v * VL, t[i][v], add);
    }
}

/* One row of the register tile, as ukr: c (BK) = (or +=) sum over p < k of a[p aps] b(p, :).
 * A query of one row (a generation step over a KV cache) would waste MR - 1 of ukr's rows. */
static inline __attribute__((always_inline)) void F(ukr1)(T *restrict c, bool add, int64_t k,
                                                          const T *restrict a, int64_t aps,
                                                          const T *restrict b, int64_t brs) {
    V t[NV];
    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) t[v] = (V){0};
    for (int64_t p = 0; p < k; p++, b += brs) {
        const V ap = SPLAT(a[p * aps]);
        _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) t[v] =
            VFMA(ap, VLD(b + v * VL), t[v]);
    }
    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) VOUT(c + v * VL, t[v], add);
}

#define NQ (NV < 4 ? NV : 4) /* the widths a trimmed row of the tile comes in: q NV / NQ */

/* ukr over the first q NV / NQ vectors of each row, q in 1..NQ (each width its own copy). */
static void F(ukr_part)(T *restrict c, int64_t rc, int64_t k, const T *restrict a, int64_t ars,
                        int mr, const T *restrict b, int q) {
    switch (q) {
    case 1:
        F(ukr)(c, rc, false, k, a, ars, 1, mr, b, BK, NV / NQ);
        break;
    case 2:
        F(ukr)(c, rc, false, k, a, ars, 1, mr, b, BK, NQ >= 2 ? 2 * NV / NQ : NV);
        break;
    case 3:
        F(ukr)(c, rc, false, k, a, ars, 1, mr, b, BK, NQ >= 3 ? 3 * NV / NQ : NV);
        break;
    default:
        F(ukr)(c, rc, false, k, a, ars, 1, mr, b, BK, NV);
        break;
    }
}

/* s (m x BK) = a (m x d, row stride rs) times bt (d x BK), row r's columns at and past r + hi
 * (the causal band) zero: each group of MR rows computes the vectors its last row needs. */
static void F(tile_abt)(T *restrict s, const T *restrict a, int64_t rs, int64_t m,
                        const T *restrict bt, int64_t d, int64_t hi) {
    if (m == 1 && hi >= BK) {
        F(ukr1)(s, false, d, a, 1, bt, BK);
        return;
    }
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
        int mr = m - i0 < MR ? (int)(m - i0) : MR;
        int64_t cols = i0 + mr - 1 + hi;
        int q = cols <= 0 ? 0 : cols >= BK ? NQ : (int)((cols * NQ + BK - 1) / BK);
        if (q > 0) F(ukr_part)(s + i0 * BK, BK, d, a + i0 * rs, rs, mr, bt, q);
        for (int i = 0; q < NQ && i < mr; i++)
            for (int j = q * BK / NQ; j < BK; j++)
                s[(i0 + i) * BK + j] = 0;
    }
}

/* c row r (row stride rc, d cols) += sum over t in [r + lo, r + hi) and [0, n) of w(r, t)
 * b row t (row stride rb), for r < m; w(r, t) = p[r prs + t pts]: the terms outside the causal
 * band are zero (a group of MR rows sums the indices any of its rows needs). */
static void F(tile_axpy)(T *restrict c, int64_t rc, int64_t m, const T *restrict p, int64_t prs,
                         int64_t pts, int64_t n, const T *restrict b, int64_t rb, int64_t d,
                         int64_t lo, int64_t hi) {
    for (int64_t r0 = 0; r0 < m; r0 += MR) {
        int mr = m - r0 < MR ? (int)(m - r0) : MR;
        int64_t t0 = r0 + lo > 0 ? r0 + lo : 0, t1 = r0 + mr - 1 + hi < n ? r0 + mr - 1 + hi : n;
        if (t1 <= t0) continue;
        const T *pr = p + r0 * prs + t0 * pts, *bt = b + t0 * rb;
        int64_t e0 = 0, k = t1 - t0;
        for (; mr == 1 && e0 + BK <= d; e0 += BK)
            F(ukr1)(c + r0 * rc + e0, true, k, pr, pts, bt + e0, rb);
        for (; e0 + BK <= d; e0 += BK)
            F(ukr)(c + r0 * rc + e0, rc, true, k, pr, prs, pts, mr, bt + e0, rb, NV);
        for (int i = 0; e0 < d && i < mr; i++)
            for (int64_t t = 0; t < k; t++) {
                T w = pr[i * prs + t * pts];
                const T *br = bt + t * rb;
                for (int64_t e = e0; e < d; e++)
                    c[(r0 + i) * rc + e] += w * br[e];
            }
    }
}

/* Max of the first nx scores of a row (NaN when one is NaN: a NaN score must reach the output,
 * not count as masked; -inf when nx is 0), and x = exp(x - mx) with its sum over them, 0 past
 * them (masked): simd reductions (the compiler's fixed lane tree; serial without OpenMP). */
static inline T F(row_max)(const T *x, int64_t nx) {
    T m = -(T)INFINITY;
    int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
    for (int64_t j = 0; j < nx; j++) {
        m = x[j] > m ? x[j] : m;
        nan |= x[j] != x[j];
    }
    return nan ? (T)NAN : m;
}
static inline T F(row_exp_sum)(T *x, T mx, int64_t nx) {
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < nx; j++) {
        x[j] = EXP(x[j] - mx);
        s += x[j];
    }
    for (int64_t j = nx; j < BK; j++)
        x[j] = 0;
    return s;
}

/* The scores a row computes: its first row_keys, rounded up to whole vectors (the rest are
 * masked, exp 0). */
static inline int64_t F(row_span)(const tn_attn_args *a, int64_t i, int64_t j0, int64_t n) {
    return (row_keys(a, i, j0, n) + VL - 1) / VL * VL;
}

/* s (m x BK) = q (m x E, row stride rsq) times the transpose of the n keys at k (row stride
 * rsk), each score a dot product (dots_impl.h); 0 past n. For a query of a row or a few (a
 * generation step over a KV cache), which reads each key once: packing the keys transposed
 * would cost more than the products. */
static void F(tile_qk_rows)(T *restrict s, const T *q, int64_t rsq, int64_t m, const T *k,
                            int64_t rsk, int64_t n, int64_t E) {
    tn_gemm g = {.m = m,
                 .n = n,
                 .k = E,
                 .a = q,
                 .rsa = rsq,
                 .csa = 1,
                 .b = k,
                 .rsb = 1,
                 .csb = rsk,
                 .c = s,
                 .rsc = BK};
    F(dots)(&g, 0, n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < BK; j++)
            s[i * BK + j] = 0;
}

/* The scores of tile (rows i0.., m; keys j0.., n) into s: scale q k^T plus
 * the mask; masked, causal and padding entries -inf. kt: the tile's keys packed (E x BK), or
 * NULL to read them where they are (tile_qk_rows). */
static void F(scores)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const T *kt, int64_t i0,
                      int64_t m, int64_t j0, int64_t n) {
    const T *q = (const T *)a->q + sl->oq + i0 * a->rsq;
    T *s = (T *)w->s;
    if (kt)
        F(tile_abt)(s, q, a->rsq, m, kt, a->E, band_hi(a, i0, j0));
    else
        F(tile_qk_rows)(s, q, a->rsq, m, (const T *)a->k + sl->ok + j0 * a->rsk, a->rsk, n, a->E);
    const T sc = (T)a->scale, ninf = -(T)INFINITY;
    for (int64_t i = 0; i < m; i++) {
        T *si = s + i * BK;
        for (int j = 0; j < BK; j++)
            si[j] *= sc;
        if (a->mask_kind == TN_ATTN_MASK_ADD) {
            const T *mr = (const T *)a->mask + sl->om + (i0 + i) * a->rsm + j0 * a->csm;
            for (int64_t j = 0; j < n; j++)
                si[j] += mr[j * a->csm];
        } else if (a->mask_kind == TN_ATTN_MASK_BOOL) {
            const uint8_t *mr = (const uint8_t *)a->mask + sl->om + (i0 + i) * a->rsm + j0 * a->csm;
            for (int64_t j = 0; j < n; j++)
                if (!mr[j * a->csm]) si[j] = ninf;
        }
        for (int64_t j = row_keys(a, i0 + i, j0, n); j < BK; j++)
            si[j] = ninf;
    }
}

/* Dropout of tile row i (keys j0.., n): p[j] *= keep ? 1/(1-p) : 0. */
static void F(dropout_row)(const tn_attn_args *a, const attn_slice *sl, T *p, int64_t i, int64_t j0,
                           int64_t n) {
    T keep_scale = a->dropout_p >= 1 ? 0 : (T)(1 / (1 - a->dropout_p));
    for (int64_t j = 0; j < n; j++)
        p[j] *= tn_attn_keep(a->seed, sl->b, i, j0 + j, a->dropout_p) ? keep_scale : 0;
}

/* Key blocks j0.. of query block i0 (m rows) under the causal rule: [0, end). */
static inline int64_t F(kv_end)(const tn_attn_args *a, int64_t i0, int64_t m) {
    int64_t end = i0 + m + a->causal_offset;
    return a->causal && end < a->S ? (end > 0 ? end : 0) : a->S;
}

/* ---- forward: one block of query rows of one slice -------------------------------------- */

static void F(fwd_block)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, int64_t i0) {
    int64_t m = a->L - i0 < BQ ? a->L - i0 : BQ, Ev = a->Ev;
    T *s = (T *)w->s, *mx = (T *)w->mx, *l = (T *)w->l, *acc = (T *)w->acc;
    for (int64_t i = 0; i < m; i++)
        mx[i] = -(T)INFINITY, l[i] = 0;
    for (int64_t i = 0; i < m * Ev; i++)
        acc[i] = 0;
    int64_t jend = F(kv_end)(a, i0, m); /* later tiles: all masked */
    /* a block of a few rows reads the keys in place; else the whole slice's keys are packed
     * once (kt_slice) or tile by tile */
    bool pack = m > QK_ROWS_MAX;
    if (pack && w->kt_slice && w->packed_b != sl->b) {
        for (int64_t j0 = 0; j0 < a->S; j0 += BK)
            F(pack_t)
            ((T *)w->kt + j0 * a->E, (const T *)a->k + sl->ok + j0 * a->rsk, a->rsk,
             a->S - j0 < BK ? a->S - j0 : BK, a->E);
        w->packed_b = sl->b;
    }
    for (int64_t j0 = 0; j0 < jend; j0 += BK) {
        int64_t n = jend - j0 < BK ? jend - j0 : BK;
        T *kt = (T *)w->kt + (w->kt_slice ? j0 * a->E : 0); /* tile j0 / BK: E x BK */
        if (pack && !w->kt_slice)
            F(pack_t)(kt, (const T *)a->k + sl->ok + j0 * a->rsk, a->rsk, n, a->E);
        F(scores)(a, sl, w, pack ? kt : NULL, i0, m, j0, n);
        for (int64_t i = 0; i < m; i++) {
            const int64_t nx = F(row_span)(a, i0 + i, j0, n);
            T *si = s + i * BK, tm = F(row_max)(si, nx);
            T mnew = tm > mx[i] || tm != tm ? tm : mx[i]; /* a NaN sticks */
            if (mnew == -(T)INFINITY) { /* nothing taken part yet */
                for (int j = 0; j < BK; j++)
                    si[j] = 0;
                continue;
            }
            T alpha = EXP(mx[i] - mnew), sum = F(row_exp_sum)(si, mnew, nx);
            l[i] = l[i] * alpha + sum;
            mx[i] = mnew;
            if (alpha != 1)
                for (int64_t e = 0; e < Ev; e++)
                    acc[i * Ev + e] *= alpha;
            if (a->dropout_p > 0) F(dropout_row)(a, sl, si, i0 + i, j0, n);
        }
        F(tile_axpy)
        (acc, Ev, m, s, BK, 1, n, (const T *)a->v + sl->ov + j0 * a->rsv, a->rsv, Ev, -BAND_ALL,
         band_hi(a, i0, j0));
    }
    T *o = (T *)a->o + sl->oo + i0 * a->rso, *lse = (T *)a->lse + sl->b * a->L + i0;
    for (int64_t i = 0; i < m; i++) {
        /* a row with nothing taking part gives 0; a NaN row stays NaN */
        T inv = l[i] > 0 ? 1 / l[i] : (l[i] != l[i] ? l[i] : 0);
        for (int64_t e = 0; e < Ev; e++)
            o[i * a->rso + e] = acc[i * Ev + e] * inv;
        lse[i] = l[i] > 0 ? mx[i] + (T)log(l[i]) : (l[i] != l[i] ? l[i] : -(T)INFINITY);
    }
}

/* ---- backward: one tile ------------------------------------------------------------------ */

/* Recomputes P of tile (i0, m; j0, n) from the saved lse and adds its
 * contributions: with kv, to dK and dV rows j0.. (dv += (P Z)^T dO, dk +=
 * dS^T Q scale); with qg, to dQ rows i0.. (dq += dS K scale), where dS =
 * P (dP Z - D), dP = dO V^T, Z the dropout scale. kt and vt hold the tile's
 * keys and values packed. */
static void F(bwd_tile)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const T *delta,
                        int64_t i0, int64_t m, int64_t j0, int64_t n, bool kv, bool qg) {
    T *s = (T *)w->s, *dp = (T *)w->dp;
    int64_t E = a->E, Ev = a->Ev, L = a->L;
    const T *lse = (const T *)a->lse + sl->b * L + i0;
    const T *dout = (const T *)a->dout + sl->og + i0 * a->rsg;
    F(scores)(a, sl, w, (const T *)w->kt, i0, m, j0, n);
    const int64_t hi = band_hi(a, i0, j0); /* P and dS are zero past the causal band */
    F(tile_abt)(dp, dout, a->rsg, m, (const T *)w->vt, Ev, hi);
    for (int64_t i = 0; i < m; i++) {
        T *si = s + i * BK, *di = dp + i * BK, li = lse[i], dl = delta[i0 + i];
        if (li == -(T)INFINITY) li = (T)INFINITY; /* no key takes part: P = 0 */
        const int64_t nx = F(row_span)(a, i0 + i, j0, n);
        for (int64_t j = 0; j < nx; j++)
            si[j] = EXP(si[j] - li);
        for (int64_t j = nx; j < BK; j++)
            si[j] = 0; /* masked */
        if (a->dropout_p > 0) F(dropout_row)(a, sl, di, i0 + i, j0, n);
        /* dp becomes dS scale; s keeps P (times Z for dV) */
        for (int j = 0; j < BK; j++)
            di[j] = si[j] * (di[j] - dl) * (T)a->scale;
        if (a->dropout_p > 0 && kv) F(dropout_row)(a, sl, si, i0 + i, j0, n);
    }
    if (kv) {
        T *dv = (T *)a->dv + sl->odv + j0 * a->rsdv, *dk = (T *)a->dk + sl->odk + j0 * a->rsdk;
        const T *q = (const T *)a->q + sl->oq + i0 * a->rsq;
        F(tile_axpy)(dv, a->rsdv, n, s, 1, BK, m, dout, a->rsg, Ev, 1 - hi, BAND_ALL);
        F(tile_axpy)(dk, a->rsdk, n, dp, 1, BK, m, q, a->rsq, E, 1 - hi, BAND_ALL);
    }
    if (qg) {
        T *dq = (T *)a->dq + sl->odq + i0 * a->rsdq;
        const T *k = (const T *)a->k + sl->ok + j0 * a->rsk;
        F(tile_axpy)(dq, a->rsdq, m, dp, BK, 1, n, k, a->rsk, E, -BAND_ALL, hi);
    }
}

/* Packs key block j0 (n keys) of the slice into kt and vt. */
static void F(pack_kv)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, int64_t j0,
                       int64_t n) {
    F(pack_t)((T *)w->kt, (const T *)a->k + sl->ok + j0 * a->rsk, a->rsk, n, a->E);
    F(pack_t)((T *)w->vt, (const T *)a->v + sl->ov + j0 * a->rsv, a->rsv, n, a->Ev);
}

/* D = rowsum(dO O) of one slice's rows. */
static void F(bwd_delta)(const tn_attn_args *a, const attn_slice *sl, T *delta) {
    const T *o = (const T *)a->o + sl->oo, *g = (const T *)a->dout + sl->og;
    for (int64_t i = 0; i < a->L; i++) {
        const T *oi = o + i * a->rso, *gi = g + i * a->rsg;
        T d = 0;
#pragma omp simd reduction(+ : d)
        for (int64_t e = 0; e < a->Ev; e++)
            d += oi[e] * gi[e];
        delta[i] = d;
    }
}

/* Key block j0 of a slice: its dK/dV rows over every query block, in order
 * (kv); with qg too (the whole slice owned by one worker), dQ as well. */
static void F(bwd_kblock)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const T *delta,
                          int64_t j0, bool qg) {
    int64_t n = a->S - j0 < BK ? a->S - j0 : BK;
    F(pack_kv)(a, sl, w, j0, n);
    int64_t first = a->causal && j0 > a->causal_offset ? j0 - a->causal_offset : 0;
    for (int64_t i0 = first / BQ * BQ; i0 < a->L; i0 += BQ) {
        int64_t m = a->L - i0 < BQ ? a->L - i0 : BQ;
        if (j0 >= F(kv_end)(a, i0, m)) continue;
        F(bwd_tile)(a, sl, w, delta, i0, m, j0, n, true, qg);
    }
}

/* Query block i0 of a slice: its dQ rows over every key block, in order. */
static void F(bwd_qblock)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const T *delta,
                          int64_t i0) {
    int64_t m = a->L - i0 < BQ ? a->L - i0 : BQ, jend = F(kv_end)(a, i0, m);
    for (int64_t j0 = 0; j0 < jend; j0 += BK) {
        int64_t n = a->S - j0 < BK ? a->S - j0 : BK; /* as bwd_kblock's tiles */
        F(pack_kv)(a, sl, w, j0, n);
        F(bwd_tile)(a, sl, w, delta, i0, m, j0, n, false, true);
    }
}

/* The table's entries, untyped; delta is the call's (nb * L) scratch. */
static void F(delta_v)(const tn_attn_args *a, int64_t b, void *delta) {
    attn_slice sl = slice_of(a, b);
    F(bwd_delta)(a, &sl, (T *)delta + b * a->L);
}
static void F(kblock_v)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const void *delta,
                        int64_t j0, bool qg) {
    F(bwd_kblock)(a, sl, w, (const T *)delta + sl->b * a->L, j0, qg);
}
static void F(qblock_v)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const void *delta,
                        int64_t i0) {
    F(bwd_qblock)(a, sl, w, (const T *)delta + sl->b * a->L, i0);
}

#undef T
#undef F
#undef EXP
#undef MR
#include "vec_names_end.h"
#undef NV
#undef NQ
#undef SUF
