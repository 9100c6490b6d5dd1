/* The CPU's fused scaled dot-product attention: the backend table's
 * `attention` entry (tn_attn_args in engine/core/kernel_args.h), in the
 * manner of FlashAttention-2.
 *
 * Forward: a worker takes one (slice, block of BQ query rows), streams the
 * slice's keys and values by tiles of BK, keeps each row's running max and
 * sum (online softmax, the accumulated output rescaled when the max grows)
 * and writes the output rows and their log-sum-exp; the L x S matrix never
 * exists. Causal: key tiles entirely past the block's last row are skipped.
 * A query block of a few rows (a generation step over a KV cache) reads the keys in place, each
 * score a dot product (dots_impl.h), instead of packing them transposed for one use.
 * Backward recomputes P = exp(scores - lse) tile by tile. With many slices
 * a worker owns a whole slice (dQ, dK, dV: one pass over its key blocks,
 * query blocks inside); with few, two passes: one over (slice, key block)
 * owning dK/dV rows, one over (slice, query block) owning dQ rows. Either
 * way every gradient element sums the same tiles in the same order
 * (ascending), so results do not depend on the thread count (the choice
 * depends on the shape only); no atomics.
 * float32 accumulates in float32 (exp: a vectorisable polynomial, ~1 ulp).
 */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#define WORKER() omp_get_thread_num()
#else
#define WORKER() 0
#endif

#include "../core/fast_exp.h"
#include "cpu_backend.h"
#include "dtype_dispatch.h"
#include "gemm.h" /* FMADD */
#include "half_rows.h"
#include "vec.h"

#define BQ 32 /* query rows per block */
#define BK 32 /* keys per tile: the vectorised width of the score loops */
#define FUSED_MIN_SLICES 16
#define FWD_SLICE_ITEMS 4 /* forward items are whole slices from this many slices a thread */
#define KT_SLICE_MAX 65536 /* elements of a slice's packed keys kept per worker (forward) */
#define QK_ROWS_MAX 4      /* forward query blocks up to this many rows read keys in place */

/* A slice's first element in each operand (elements): q, k, v, the mask, o, dout, dq, dk, dv. */
typedef struct attn_slice {
    int64_t b, oq, ok, ov, om, oo, og, odq, odk, odv;
} attn_slice;

/* One worker's scratch (the dtype's elements; see attention_impl.h). */
typedef struct ws_t {
    void *s, *dp, *mx, *l, *kt, *vt, *acc;
    bool kt_slice;    /* forward: kt holds a whole slice's keys (S padded to BK) */
    int64_t packed_b; /* the slice packed there (-1: none) */
} ws_t;

static attn_slice slice_of(const tn_attn_args *a, int64_t b) {
    attn_slice sl = {.b = b};
    for (int d = a->bdim - 1; d >= 0; d--) {
        int64_t i = b % a->bshape[d];
        b /= a->bshape[d];
        sl.oq += i * a->bsq[d], sl.ok += i * a->bsk[d], sl.ov += i * a->bsv[d];
        sl.om += i * a->bsm[d], sl.oo += i * a->bso[d], sl.og += i * a->bsg[d];
        sl.odq += i * a->bsdq[d], sl.odk += i * a->bsdk[d], sl.odv += i * a->bsdv[d];
    }
    return sl;
}

/* The causal band of a tile (rows i0.., keys j0..): its row r takes part with key t < r + hi
 * only (tile_abt's columns, the sums of P V and dS K), and its key r with query t >= r + 1 - hi
 * only (the sums of dV and dK); the rest of those products is zero under the mask. BAND_ALL:
 * no limit. */
#define BAND_ALL ((int64_t)1 << 40)
static int64_t band_hi(const tn_attn_args *a, int64_t i0, int64_t j0) {
    return a->causal ? i0 + a->causal_offset - j0 + 1 : BAND_ALL;
}

/* Keys [0, result) of tile (j0, n keys) take part in query row i by the causal rule (the rest
 * are masked); all n when not causal. */
static int64_t row_keys(const tn_attn_args *a, int64_t i, int64_t j0, int64_t n) {
    int64_t hi = band_hi(a, i, j0); /* the band of the tile's row i: keys below hi */
    return hi < 0 ? 0 : hi < n ? hi : n;
}

/* exp of the softmax's arguments, s - max or s - lse, never above 0: for float32 plain
 * arithmetic the compiler vectorises (fast_exp.h) */
static inline float exp_f32(float x) { return tn__expf_nonpos(x); }
static inline double exp_f64(double x) { return exp(x); }

/* MR: rows of the register tile, MR x BK accumulators. They must fit the vector registers
 * beside the broadcast and a row of b: 12 of AVX2's or SSE2's 16, 24 of AVX-512's 32. More rows
 * spill the accumulators to the stack (AVX2 with 8 float32 rows: 32 of them, attention at half
 * speed). The results do not depend on MR: each element sums over p in order. */
#if TN_VEC_BYTES == 64
#define ACC_REGS 24
#else
#define ACC_REGS 12
#endif
#define MR_FIT(es) (ACC_REGS * TN_VEC_BYTES / (BK * (es))) /* rows that fit, es: element bytes */
#define MR_OF(es) (MR_FIT(es) > 8 ? 8 : MR_FIT(es) < 1 ? 1 : MR_FIT(es))
#define MR_f32 MR_OF(4)
#define MR_f64 MR_OF(8)
#define TN_IMPL "attention_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

typedef struct attn_kernels {
    void (*fwd_block)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, int64_t i0);
    void (*delta)(const tn_attn_args *a, int64_t b, void *delta);
    void (*kblock)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const void *delta,
                   int64_t j0, bool qg);
    void (*qblock)(const tn_attn_args *a, const attn_slice *sl, ws_t *w, const void *delta,
                   int64_t i0);
} attn_kernels;
#define ATTN_KERNELS(ID, CT, S) [ID] = {fwd_block_##S, delta_v_##S, kblock_v_##S, qblock_v_##S},
static const attn_kernels kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(ATTN_KERNELS)};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Carves nt workers' scratch out of one block (64-byte aligned parts). */
static void *ws_alloc(const tn_attn_args *a, int nt, ws_t *ws) {
    size_t es = tn__dtype_sizes[a->dtype];
    /* forward: a slice's packed keys when they fit in L2 with room to spare */
    size_t kt_all = (size_t)a->E * (size_t)cdiv(a->S, BK) * BK;
    bool kt_slice = a->mode == TN_ATTN_FWD && kt_all <= KT_SLICE_MAX;
    size_t parts[7] = {BQ * BK,
                       BQ * BK,
                       BQ,
                       BQ,
                       kt_slice ? kt_all : (size_t)a->E * BK,
                       (size_t)a->Ev * BK,
                       (size_t)BQ * (size_t)a->Ev};
    size_t per = 0;
    for (int i = 0; i < 7; i++)
        per += (parts[i] * es + 63) / 64 * 64;
    char *blk = tn__malloc(per * (size_t)nt + 64);
    if (!blk) return NULL;
    char *p = (char *)(((uintptr_t)blk + 63) / 64 * 64);
    for (int t = 0; t < nt; t++) {
        ws[t].kt_slice = kt_slice, ws[t].packed_b = -1;
        void **f[7] = {&ws[t].s, &ws[t].dp, &ws[t].mx, &ws[t].l, &ws[t].kt, &ws[t].vt, &ws[t].acc};
        for (int i = 0; i < 7; i++) {
            *f[i] = p;
            p += (parts[i] * es + 63) / 64 * 64;
        }
    }
    return blk;
}

/* Forward items: a whole slice when there are enough slices to go round (its keys packed once,
 * by the worker that owns it), else one block of query rows. Each row's result is the same
 * either way. */
static void run_fwd(const tn_attn_args *a, int64_t nb, ws_t *ws, int nt) {
    int64_t nqb = cdiv(a->L, BQ);
    int64_t per = nb >= FWD_SLICE_ITEMS * nt ? nqb : 1, items = nb * nqb / per;
    const attn_kernels *kr = &kernels[a->dtype];
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("attention");
        ws_t *w = &ws[WORKER()];
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++)
            for (int64_t q = it * per; q < (it + 1) * per; q++) {
                attn_slice sl = slice_of(a, q / nqb);
                kr->fwd_block(a, &sl, w, q % nqb * BQ);
            }
    }
}

/* Zeroes rows [first, first + n) of cols elements, row stride rs, from element off of p. */
static void zero_rows(void *p, int64_t off, int64_t first, int64_t n, int64_t rs, int64_t cols,
                      size_t es) {
    char *base = (char *)p + (size_t)(off + first * rs) * es;
    if (rs == cols) {
        memset(base, 0, (size_t)(n * cols) * es);
        return;
    }
    for (int64_t r = 0; r < n; r++)
        memset(base + (size_t)(r * rs) * es, 0, (size_t)cols * es);
}

/* Backward; delta: nb * L elements of scratch. */
static void run_bwd(const tn_attn_args *a, int64_t nb, ws_t *ws, int nt, void *delta) {
    size_t es = tn__dtype_sizes[a->dtype];
    int64_t L = a->L, S = a->S, E = a->E, Ev = a->Ev, nqb = cdiv(L, BQ), nkb = cdiv(S, BK);
    bool fused = nb >= FUSED_MIN_SLICES;
    const attn_kernels *kr = &kernels[a->dtype];
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("attention backward");
        ws_t *w = &ws[WORKER()];
#pragma omp for schedule(static)
        for (int64_t b = 0; b < nb; b++)
            kr->delta(a, b, delta);
        if (fused) {
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < nb; b++) {
                attn_slice sl = slice_of(a, b);
                zero_rows(a->dq, sl.odq, 0, L, a->rsdq, E, es);
                zero_rows(a->dk, sl.odk, 0, S, a->rsdk, E, es);
                zero_rows(a->dv, sl.odv, 0, S, a->rsdv, Ev, es);
                for (int64_t j0 = 0; j0 < S; j0 += BK)
                    kr->kblock(a, &sl, w, delta, j0, true);
            }
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < nb * nkb; it++) {
                int64_t b = it / nkb, j0 = it % nkb * BK, n = S - j0 < BK ? S - j0 : BK;
                attn_slice sl = slice_of(a, b);
                zero_rows(a->dk, sl.odk, j0, n, a->rsdk, E, es);
                zero_rows(a->dv, sl.odv, j0, n, a->rsdv, Ev, es);
                kr->kblock(a, &sl, w, delta, j0, false);
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < nb * nqb; it++) {
                int64_t b = it / nqb, i0 = it % nqb * BQ, m = L - i0 < BQ ? L - i0 : BQ;
                attn_slice sl = slice_of(a, b);
                zero_rows(a->dq, sl.odq, i0, m, a->rsdq, E, es);
                kr->qblock(a, &sl, w, delta, i0);
            }
        }
    }
}

/* ---- bfloat16 and float16: one slice at a time in float32 ----------------------------------
 * Core's float32 copies of a half call (widen.h) copy every operand whole and round the results
 * back, a pass over memory each, the copies allocated: for a generation step over a half KV
 * cache the whole cache on every step and layer, for a training step 4-6% of its time. Here a
 * worker widens one slice's operands into float32 buffers that stay in L2 (the queries, the keys
 * and values that take part, an additive mask's rows; for backward also the output, its gradient
 * and the log-sum-exp), runs float32's kernels over the slice (the forward's query blocks, or
 * backward's pass that owns the whole slice), and rounds each result once. A forward row's
 * result, and a gradient element's sum over its tiles in ascending order, do not depend on how
 * the work is cut, so these are the bits of core's copies. Taken without dropout (its hash takes
 * the slice's index) for a few query rows, or for enough slices to keep every thread busy;
 * otherwise declined to core, whose kernel also splits a slice across threads.
 * tn__cpu_attention_in_place(false) (isa.h) declines every half call: the tests compare the two. */

typedef struct half_buf {
    float *q, *k, *v, *mask, *o, *lse, *g, *dq, *dk, *dv, *delta;
} half_buf;

/* floats of a worker's buffers (8 MiB) past a few query rows */
#define HALF_BUF_MAX ((int64_t)1 << 21)

/* A worker's buffers (floats), as half_buf: q, k, v, an additive mask's rows, o, lse, then
 * backward's dout, dq, dk, dv and delta, into sizes unless NULL; their total. */
static int64_t half_sizes(const tn_attn_args *a, int64_t *sizes) {
    const int64_t L = a->L, S = a->S, E = a->E, Ev = a->Ev;
    const bool bwd = a->mode == TN_ATTN_BWD;
    const int64_t all[11] = {L * E,
                             S * E,
                             S * Ev,
                             a->mask_kind == TN_ATTN_MASK_ADD ? L * S : 0,
                             L * Ev,
                             L,
                             bwd ? L * Ev : 0,
                             bwd ? L * E : 0,
                             bwd ? S * E : 0,
                             bwd ? S * Ev : 0,
                             bwd ? L : 0};
    int64_t per = 0;
    for (int i = 0; i < 11; i++)
        per += all[i];
    if (sizes) memcpy(sizes, all, sizeof all);
    return per;
}

/* A few query rows' forward (a generation step) always; longer or backward calls when every
 * thread gets slices and a worker's buffers stay within HALF_BUF_MAX (a long sequence's
 * additive mask rows alone would be L x S floats per worker). */
static bool takes_half(const tn_attn_args *a, int64_t nb, int nt) {
    if (!tn__cpu_attention_in_place_on() || a->dropout_p != 0) return false;
    if (a->mode == TN_ATTN_FWD && a->L <= QK_ROWS_MAX) return true;
    return nb >= FWD_SLICE_ITEMS * nt && half_sizes(a, NULL) <= HALF_BUF_MAX;
}

/* Widens rows [0, n) of d columns (row stride rs, columns contiguous) into dst (n x d). */
static void widen_rows(tn_dtype dt, float *dst, const void *src, int64_t rs, int64_t n, int64_t d) {
    for (int64_t j = 0; j < n; j++)
        tn__widen_half_row(dt, dst + j * d, (const uint16_t *)src + j * rs, d);
}

/* Rounds rows [0, n) of src (n x d) into dst (row stride rs). */
static void narrow_rows(tn_dtype dt, void *dst, int64_t rs, const float *src, int64_t n,
                        int64_t d) {
    for (int64_t j = 0; j < n; j++)
        tn__narrow_half_row(dt, (uint16_t *)dst + j * rs, src + j * d, d);
}

/* f: the slice's float32 arguments over hb, its queries, first n keys and values (and an
 * additive mask's rows) widened; one: its slice there (a boolean mask is read in place). */
static void half_slice_in(const tn_attn_args *a, const attn_slice *sl, const half_buf *hb,
                          int64_t n, tn_attn_args *f, attn_slice *one) {
    const tn_dtype dt = a->dtype;
    const int64_t L = a->L, E = a->E, Ev = a->Ev;
    *f = *a;
    f->dtype = TN_F32;
    f->bdim = 0;
    f->q = hb->q, f->k = hb->k, f->v = hb->v, f->o = hb->o, f->lse = hb->lse;
    f->rsq = E, f->rsk = E, f->rsv = Ev, f->rso = Ev;
    *one = (attn_slice){.om = sl->om};
    widen_rows(dt, hb->q, (const uint16_t *)a->q + sl->oq, a->rsq, L, E);
    widen_rows(dt, hb->k, (const uint16_t *)a->k + sl->ok, a->rsk, n, E);
    widen_rows(dt, hb->v, (const uint16_t *)a->v + sl->ov, a->rsv, n, Ev);
    if (a->mask_kind == TN_ATTN_MASK_ADD) {
        const uint16_t *m = (const uint16_t *)a->mask + sl->om;
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < n; j++)
                hb->mask[i * a->S + j] = tn__half_ld(dt, m[i * a->rsm + j * a->csm]);
        f->mask = hb->mask, f->rsm = a->S, f->csm = 1, one->om = 0;
    }
}

static void fwd_slice_half(const tn_attn_args *a, const attn_slice *sl, ws_t *w,
                           const half_buf *hb) {
    const int64_t L = a->L;
    /* a few rows read the keys in place, up to the last that takes part; longer blocks pack
     * all of them */
    const int64_t n = L <= QK_ROWS_MAX ? kv_end_f32(a, 0, L) : a->S;
    tn_attn_args f;
    attn_slice one;
    half_slice_in(a, sl, hb, n, &f, &one);
    w->packed_b = -1; /* packed keys of an earlier slice are not these */
    for (int64_t i0 = 0; i0 < L; i0 += BQ)
        fwd_block_f32(&f, &one, w, i0);
    narrow_rows(a->dtype, (uint16_t *)a->o + sl->oo, a->rso, hb->o, L, a->Ev);
    tn__narrow_half_row(a->dtype, (uint16_t *)a->lse + sl->b * L, hb->lse, L);
}

static void bwd_slice_half(const tn_attn_args *a, const attn_slice *sl, ws_t *w,
                           const half_buf *hb) {
    const tn_dtype dt = a->dtype;
    const int64_t L = a->L, S = a->S, E = a->E, Ev = a->Ev;
    tn_attn_args f;
    attn_slice one;
    half_slice_in(a, sl, hb, S, &f, &one);
    widen_rows(dt, hb->o, (const uint16_t *)a->o + sl->oo, a->rso, L, Ev);
    widen_rows(dt, hb->g, (const uint16_t *)a->dout + sl->og, a->rsg, L, Ev);
    tn__widen_half_row(dt, hb->lse, (const uint16_t *)a->lse + sl->b * L, L);
    f.dout = hb->g, f.dq = hb->dq, f.dk = hb->dk, f.dv = hb->dv;
    f.rsg = Ev, f.rsdq = E, f.rsdk = E, f.rsdv = Ev;
    memset(hb->dq, 0, (size_t)(L * E) * sizeof(float));
    memset(hb->dk, 0, (size_t)(S * E) * sizeof(float));
    memset(hb->dv, 0, (size_t)(S * Ev) * sizeof(float));
    delta_v_f32(&f, 0, hb->delta);
    for (int64_t j0 = 0; j0 < S; j0 += BK)
        kblock_v_f32(&f, &one, w, hb->delta, j0, true);
    narrow_rows(dt, (uint16_t *)a->dq + sl->odq, a->rsdq, hb->dq, L, E);
    narrow_rows(dt, (uint16_t *)a->dk + sl->odk, a->rsdk, hb->dk, S, E);
    narrow_rows(dt, (uint16_t *)a->dv + sl->odv, a->rsdv, hb->dv, S, Ev);
}

static tn_status run_half(const tn_attn_args *a, int64_t nb, int nt) {
    const bool bwd = a->mode == TN_ATTN_BWD;
    tn_attn_args f = *a;
    f.dtype = TN_F32;
    ws_t ws[nt];
    void *blk = ws_alloc(&f, nt, ws);
    int64_t sizes[11];
    const int64_t per = half_sizes(a, sizes);
    float *hall = blk ? tn__malloc((size_t)(per * nt) * sizeof *hall) : NULL;
    if (!hall) {
        tn__mfree(blk);
        return tn_last_status();
    }
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN(bwd ? "attention backward" : "attention");
        const int t = WORKER();
        float *p = hall + per * t;
        half_buf hb;
        float **fields[11] = {&hb.q, &hb.k,  &hb.v,  &hb.mask, &hb.o,    &hb.lse,
                              &hb.g, &hb.dq, &hb.dk, &hb.dv,   &hb.delta};
        for (int i = 0; i < 11; i++) {
            *fields[i] = sizes[i] ? p : NULL;
            p += sizes[i];
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < nb; b++) {
            attn_slice sl = slice_of(a, b);
            if (bwd)
                bwd_slice_half(a, &sl, &ws[t], &hb);
            else
                fwd_slice_half(a, &sl, &ws[t], &hb);
        }
    }
    tn__mfree(hall);
    tn__mfree(blk);
    return TN_OK;
}

tn_status tn__cpu_attention(int dev, const tn_attn_args *a) {
    (void)dev;
    int64_t nb = 1;
    for (int d = 0; d < a->bdim; d++)
        nb *= a->bshape[d];
    if (tn__is_half(a->dtype)) { /* one slice at a time, or core's float32 copies */
        if (nb == 0 || a->L == 0) return a->mode == TN_ATTN_FWD ? TN_OK : TN__DECLINED;
        const int nt = tn__threads_for(nb * a->L * a->S * (a->E + a->Ev));
        return takes_half(a, nb, nt) ? run_half(a, nb, nt) : TN__DECLINED;
    }
    if ((unsigned)a->dtype >= TN_DTYPE_COUNT || !kernels[a->dtype].fwd_block)
        return tn__error(TN_ERR_DTYPE, "attention: no CPU kernel for %s", tn_dtype_name(a->dtype));
    if (nb == 0) return TN_OK;
    if (a->L == 0) { /* no query: dK and dV are 0 */
        size_t es = tn__dtype_sizes[a->dtype];
        for (int64_t b = 0; a->mode == TN_ATTN_BWD && b < nb; b++) {
            attn_slice sl = slice_of(a, b);
            zero_rows(a->dk, sl.odk, 0, a->S, a->rsdk, a->E, es);
            zero_rows(a->dv, sl.odv, 0, a->S, a->rsdv, a->Ev, es);
        }
        return TN_OK;
    }
    int nt = tn__threads_for(nb * a->L * a->S * (a->E + a->Ev));
    ws_t ws[nt];
    void *blk = ws_alloc(a, nt, ws);
    if (!blk) return tn_last_status();
    if (a->mode == TN_ATTN_FWD) {
        run_fwd(a, nb, ws, nt);
    } else {
        void *delta = tn__malloc((size_t)(nb * a->L) * tn__dtype_sizes[a->dtype]);
        if (!delta) {
            tn__mfree(blk);
            return tn_last_status();
        }
        run_bwd(a, nb, ws, nt, delta);
        tn__mfree(delta);
    }
    tn__mfree(blk);
    return TN_OK;
}
