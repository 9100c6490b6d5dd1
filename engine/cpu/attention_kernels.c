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

#define BQ 32 /* query rows per block */
#define BK 32 /* keys per tile: the vectorised width of the score loops */
#define FUSED_MIN_SLICES 16
#define KT_SLICE_MAX 65536 /* elements of a slice's packed keys kept per worker (forward) */
#define QK_ROWS_MAX 4      /* forward query blocks up to this many rows read keys in place */

/* A slice's first element in each operand (elements). */
typedef struct attn_slice {
    int64_t b, oq, ok, ov, om;
} attn_slice;

/* One worker's scratch (the dtype's elements; see attention_impl.h). */
typedef struct ws_t {
    void *s, *dp, *mx, *l, *kt, *vt, *acc;
    bool kt_slice;    /* forward: kt holds a whole slice's keys (S padded to BK) */
    int64_t packed_b; /* the slice packed there (-1: none) */
} ws_t;

static attn_slice slice_of(const tn_attn_args *a, int64_t b) {
    attn_slice sl = {b, 0, 0, 0, 0};
    for (int d = a->bdim - 1; d >= 0; d--) {
        int64_t i = b % a->bshape[d];
        b /= a->bshape[d];
        sl.oq += i * a->bsq[d], sl.ok += i * a->bsk[d], sl.ov += i * a->bsv[d];
        sl.om += i * a->bsm[d];
    }
    return sl;
}

/* exp for float32 as plain arithmetic the compiler vectorises (fast_exp.h) */
static inline float exp_f32(float x) { return tn__expf_fast(x); }
static inline double exp_f64(double x) { return exp(x); }

/* MR: rows of the register tile (MR x BK accumulators: 16 zmm registers for
 * float32, as gemm.c's; 16 for float64 with 4 rows). */
#define MR_f32 8
#define MR_f64 4
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

static void run_fwd(const tn_attn_args *a, int64_t nb, ws_t *ws, int nt) {
    int64_t nqb = cdiv(a->L, BQ), items = nb * nqb;
    const attn_kernels *kr = &kernels[a->dtype];
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("attention");
        ws_t *w = &ws[WORKER()];
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            attn_slice sl = slice_of(a, it / nqb);
            kr->fwd_block(a, &sl, w, it % nqb * BQ);
        }
    }
}

static void zero_rows(void *p, int64_t first, int64_t n, size_t es) {
    memset((char *)p + (size_t)first * es, 0, (size_t)n * es);
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
                zero_rows(a->dq, b * L * E, L * E, es);
                zero_rows(a->dk, b * S * E, S * E, es);
                zero_rows(a->dv, b * S * Ev, S * Ev, es);
                for (int64_t j0 = 0; j0 < S; j0 += BK)
                    kr->kblock(a, &sl, w, delta, j0, true);
            }
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < nb * nkb; it++) {
                int64_t b = it / nkb, j0 = it % nkb * BK, n = S - j0 < BK ? S - j0 : BK;
                attn_slice sl = slice_of(a, b);
                zero_rows(a->dk, (b * S + j0) * E, n * E, es);
                zero_rows(a->dv, (b * S + j0) * Ev, n * Ev, es);
                kr->kblock(a, &sl, w, delta, j0, false);
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < nb * nqb; it++) {
                int64_t b = it / nqb, i0 = it % nqb * BQ, m = L - i0 < BQ ? L - i0 : BQ;
                attn_slice sl = slice_of(a, b);
                zero_rows(a->dq, (b * L + i0) * E, m * E, es);
                kr->qblock(a, &sl, w, delta, i0);
            }
        }
    }
}

tn_status tn__cpu_attention(int dev, const tn_attn_args *a) {
    (void)dev;
    if ((unsigned)a->dtype >= TN_DTYPE_COUNT || !kernels[a->dtype].fwd_block)
        return tn__error(TN_ERR_DTYPE, "attention: no CPU kernel for %s", tn_dtype_name(a->dtype));
    int64_t nb = 1;
    for (int d = 0; d < a->bdim; d++)
        nb *= a->bshape[d];
    if (nb == 0) return TN_OK;
    if (a->L == 0) { /* no query: dK and dV are 0 */
        size_t es = tn__dtype_sizes[a->dtype];
        if (a->mode == TN_ATTN_BWD) zero_rows(a->dk, 0, nb * a->S * a->E, es);
        if (a->mode == TN_ATTN_BWD) zero_rows(a->dv, 0, nb * a->S * a->Ev, es);
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
