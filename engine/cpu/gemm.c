/* Dense matrix products: C = A·B (+ C), see gemm.h.
 *
 * Floats follow the BLIS scheme: B is packed per (KC x NC) block into
 * NR-wide micro-panels, A per (MC x KC) block into MR-tall micro-panels, and
 * an MR x NR register tile is accumulated over KC by a plain loop that the
 * compiler unrolls and vectorises (-O3, once per instruction set: isa.h). Packing reads the
 * operands through their strides, so transposed views cost no copy. Edge
 * tiles are zero-padded in the panels and written back partially.
 *
 * Threads: each thread computes whole output rows (or, for short and wide
 * products, whole columns) with its own packing buffers; every C element is
 * summed in the same order whatever the split, so results are independent
 * of the thread count. Batches are split across threads instead when there
 * are more batches than row blocks.
 *
 * Built with CBLAS (cmake/blas.cmake), float32/float64 products go to
 * tn__gemm_blas first (blas.c); what it declines runs here.
 */
#include "gemm.h"
#include "../core/backend.h"
#include "blas.h"
#include "dtype_dispatch.h"
#include "vec.h"

#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Register tile: MR rows x NR columns of accumulators, NR = 2 vectors (vec.h's types, indexed
 * by constants: a plain scalar tile went to the stack). With AVX-512, 8 rows: 16 accumulator
 * registers of 32. With AVX2's 16 registers, 6 rows: 12 accumulators, the broadcast and B's
 * two vectors. sgemm1024 on 2 AVX2 cores without BLAS: 63 GFLOP/s with 8 plain rows, 117 with
 * 5, 130-139 with these and C's prefetch (OpenBLAS 142-150 in the same runs). Other sets, and
 * float64 on AVX2, 4 rows. KC keeps a B micro-panel in L1, MC x KC of A in L2, KC x NC of B in L3.
 * The results do not depend on the tile: each element sums over p in order, one fused multiply-add
 * at a time. */
#define NR_f32 (2 * TN_VEC_BYTES / 4)
#define NR_f64 (2 * TN_VEC_BYTES / 8)
#if TN_VEC_BYTES == 64
#define MR_f32 8
#define MR_f64 8
#elif defined(__AVX2__) && defined(__FMA__)
#define MR_f32 6
#define MR_f64 4
#else
#define MR_f32 4
#define MR_f64 4
#endif
#define GEMM_KC 256
#define GEMM_MC (MR_f32 == 6 ? 120 : 128) /* whole micro-panels */
#define GEMM_NC 2048

#define MIN(a, b) ((a) < (b) ? (a) : (b))

#ifdef _OPENMP
static int thread_num(void) { return omp_get_thread_num(); }
#else
static int thread_num(void) { return 0; }
#endif

/* ---- the kernels of each dtype (gemm_impl.h). Small or thin products and
 * integers: direct loops. With more than one column the loop runs along C's
 * rows (vectorised when B's rows are contiguous); a single column is a dot
 * product per row, kept in DOT_LANES independent partial sums so that it
 * vectorises without reassociation. Integers accumulate in unsigned
 * arithmetic so that overflow wraps (as PyTorch) instead of being undefined.
 * Floats, products big enough: packed, blocked kernels. ------------------- */
#define DOT_LANES 16

/* bfloat16 and float16 products reach these kernels as float32 (engine/core/widen.h), but for
 * those of a few rows (tn__gemm_half below) */
#define TN_IMPL "gemm_impl.h"
#define TN_EACH (TN_EACH_WIDE | TN_EACH_INTS)
#include "each_dtype.h"

/* ---- dispatch -------------------------------------------------------------------- */

typedef struct kernel {
    int mr, nr;
    size_t esize;
    void (*direct)(const tn_gemm *g, int64_t i0, int64_t i1);
    void (*direct_cols)(const tn_gemm *g, int64_t j0, int64_t j1); /* m == 1; floats */
    void (*dots)(const tn_gemm *g, int64_t j0, int64_t j1);        /* use_dots; floats */
    void (*blocked)(const tn_gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, void *apack,
                    void *bpack);
} kernel;

#define FLOAT_KERNEL(ID, CT, S)                                                                    \
    [ID] = {MR_##S, NR_##S, sizeof(CT), direct_##S, direct_cols_##S, dots_##S, blocked_v_##S},
#define INT_KERNEL(ID, CT, S) [ID] = {1, 1, sizeof(CT), direct_##S, NULL, NULL, NULL},
static const kernel kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(FLOAT_KERNEL)
                                                   TN_FOR_EACH_INT(INT_KERNEL)};

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Per-thread packing buffer sizes (elements): one A block, one B block. */
static void pack_sizes(const kernel *kr, const tn_gemm *g, int64_t *na, int64_t *nb) {
    int64_t kc = MIN(GEMM_KC, g->k);
    *na = round_up(MIN(GEMM_MC, g->m), kr->mr) * kc;
    *nb = round_up(MIN(GEMM_NC, g->n), kr->nr) * kc;
}

/* Packing pays for products big enough, and wide enough in both m and n
 * not to waste most of a register tile on padding. */
static bool use_direct(const kernel *kr, const tn_gemm *g) {
    return !kr->blocked || g->m * g->n * g->k < GEMM_SMALL || g->m < kr->mr / 2 ||
           g->n < kr->nr / 4;
}

/* A product of a few rows with A's rows and B's columns contiguous (a linear layer's x·Wᵀ fed
 * a few tokens, W [out, in]): packing would copy the whole weight for a few rows' work (OpenBLAS
 * packs it on every call too: as long as its multiply-adds at 16 rows), so each C element is a
 * dot product of contiguous rows (dots_impl.h). One row stays with direct_cols. */
static bool use_dots(const kernel *kr, const tn_gemm *g) {
    return kr->dots && g->m >= 2 && g->m <= DOTS_MAX_M && g->csa == 1 && g->rsb == 1 &&
           g->k >= DOTS_MIN_K && g->m * g->k * (int64_t)kr->esize <= DOTS_MAX_A_BYTES &&
           g->m * g->n * g->k >= GEMM_SMALL;
}

/* Task t of ntask of one product, serially with the buffer buf (A block,
 * then B block): a range of whole row tiles, or of whole column tiles when
 * the product is too short to give every thread a few row tiles. */
static void run_task(const kernel *kr, const tn_gemm *g, bool by_cols, int64_t t, int64_t ntask,
                     char *buf, int64_t na) {
    bool dots = use_dots(kr, g);
    int64_t tile = dots ? DOTS_NJ : by_cols ? kr->nr : kr->mr, len = by_cols ? g->n : g->m;
    int64_t tiles = (len + tile - 1) / tile;
    int64_t lo = MIN(len, tiles * t / ntask * tile), hi = MIN(len, tiles * (t + 1) / ntask * tile);
    if (hi <= lo) return;
    if (dots)
        kr->dots(g, lo, hi);
    else if (use_direct(kr, g) && by_cols)
        kr->direct_cols(g, lo, hi);
    else if (use_direct(kr, g))
        kr->direct(g, lo, hi);
    else if (by_cols)
        kr->blocked(g, 0, g->m, lo, hi, buf, buf + na * (int64_t)kr->esize);
    else
        kr->blocked(g, lo, hi, 0, g->n, buf, buf + na * (int64_t)kr->esize);
}

/* One product on nt threads (buffers of `per` bytes each). A few more tasks
 * than threads, taken dynamically: a thread slowed down by another process
 * does not hold the others back, and with no barrier inside, nobody spins
 * waiting for it. Each task packs its own B blocks; for products big enough
 * to be split that costs well under 1% of the multiply-adds. Every element
 * is summed in the same order whichever task computes it. */
static void run_one(const kernel *kr, const tn_gemm *g, int nt, char *buf, int64_t per,
                    int64_t na) {
    /* one row (a GEMV) or a few as dot products: split by columns, each weight read by one
     * thread only */
    bool gemv = (g->m == 1 && kr->direct_cols && use_direct(kr, g)) || use_dots(kr, g);
    if (nt == 1) {
        run_task(kr, g, gemv, 0, 1, buf, na);
        return;
    }
    int64_t mt = (g->m + kr->mr - 1) / kr->mr, ntl = (g->n + kr->nr - 1) / kr->nr;
    bool by_cols = gemv || (!use_direct(kr, g) && mt < 2 * nt && ntl > mt);
    int64_t ntask = MIN(by_cols ? ntl : mt, 3 * nt);
#pragma omp parallel num_threads(nt)
    {
        TN_OMP_SPAN("gemm");
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t t = 0; t < ntask; t++)
            run_task(kr, g, by_cols, t, ntask, buf + per * thread_num(), na);
    }
}

void tn__gemm_batch_item(const tn_gemm *g, const tn_gemm_batch *bt, int64_t bi, size_t es,
                         tn_gemm *out) {
    *out = *g;
    int64_t oa = 0, ob = 0, oc = 0;
    for (int d = bt->ndim - 1; d >= 0 && bi; d--) {
        int64_t i = bi % bt->shape[d];
        bi /= bt->shape[d];
        oa += i * bt->bsa[d];
        ob += i * bt->bsb[d];
        oc += i * bt->bsc[d];
    }
    out->a = (const char *)g->a + oa * (int64_t)es;
    out->b = (const char *)g->b + ob * (int64_t)es;
    out->c = (char *)g->c + oc * (int64_t)es;
}

static void zero_fill(const tn_gemm *g, size_t es) {
    for (int64_t i = 0; i < g->m; i++)
        memset((char *)g->c + i * g->rsc * (int64_t)es, 0, (size_t)g->n * es);
}

tn_status tn__gemm(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch) {
    const kernel *kr = &kernels[dt];
    int64_t nbatch = batch ? tn__numel(batch->ndim, batch->shape) : 1;
    if (nbatch == 0 || g->m == 0 || g->n == 0) return TN_OK;
    if (g->k == 0) { /* empty sum: C = 0 (or unchanged) */
        for (int64_t bi = 0; bi < nbatch && !g->accumulate; bi++) {
            tn_gemm one = *g;
            if (batch) tn__gemm_batch_item(g, batch, bi, kr->esize, &one);
            zero_fill(&one, kr->esize);
        }
        return TN_OK;
    }
    /* the dot-product shapes are ours unless CBLAS is asked to take everything */
    if (!use_dots(kr, g) || tn__blas_get_mode() == TN__BLAS_ALL) {
        tn_status bs = tn__gemm_blas(dt, g, batch);
        if (bs != TN__BLAS_DECLINED) return bs;
    }
    int nt = tn__threads_for(tn__gemm_work(g) * nbatch);
    /* many products: one per thread at a time; few: each on all threads */
    bool by_batch = nbatch > 1 && nt > 1 && nbatch >= (g->m + kr->mr - 1) / kr->mr;
    int64_t na = 0, nb = 0;
    if (!use_direct(kr, g) && !use_dots(kr, g)) pack_sizes(kr, g, &na, &nb);
    int64_t per = (na + nb) * (int64_t)kr->esize;
    char *buf = NULL;
    if (per && !(buf = tn__alloc((size_t)(per * nt)))) return TN_ERR_OUT_OF_MEMORY;
    if (by_batch) {
#pragma omp parallel num_threads(nt)
        {
            TN_OMP_SPAN("gemm batch");
#pragma omp for schedule(static) nowait
            for (int t = 0; t < nt; t++) {
                tn_gemm one;
                for (int64_t bi = nbatch * t / nt; bi < nbatch * (t + 1) / nt; bi++) {
                    tn__gemm_batch_item(g, batch, bi, kr->esize, &one);
                    run_one(kr, &one, 1, buf + per * t, per, na);
                }
            }
        }
    } else {
        for (int64_t bi = 0; bi < nbatch; bi++) {
            tn_gemm one = *g;
            if (batch) tn__gemm_batch_item(g, batch, bi, kr->esize, &one);
            run_one(kr, &one, nt, buf, per, na);
        }
    }
    tn__free(buf);
    return TN_OK;
}
