/* bfloat16 and float16 products of a few rows, the weight read in place (tn__gemm_half, gemm.h).
 *
 * x·Wᵀ with W half and x a few rows: a generation step's linear layers over half weights. Core's
 * float32 copies (engine/core/widen.h) would copy the whole weight on every call, twice its own
 * bytes written for a few multiply-adds an element. Here the weight is read once, 2 bytes an
 * element; x's rows are widened once; C is summed in float32 and rounded once per element
 * (widened first where it accumulates).
 *
 * bfloat16: each weight element is widened in registers as it is read (zero-extended and
 * shifted, a bfloat16 being the top half of its float32) by a register tile of dot products,
 * BT_MI rows of x by BT_NJ weight rows (one row of x: GEMV_NJ weight rows). float16, whose
 * widening is no shift: a task widens a strip of HALF_STRIP weight rows into a float32 buffer that
 * stays in L1/L2 and runs dots_f32 (dots_impl.h) over it. Either way an element is the dot
 * product of a row of x and a weight row in DL partial sums added up in lane order, the
 * arithmetic of dots_f32: for 2 rows or more the bits of core's float32 copies, which take
 * dots_f32 too.
 *
 * A weight row is short (768 elements: 1.5 KB), too short for the hardware prefetcher to ramp
 * up on each of the rows read side by side, so a tile fetches the next tile's weight rows
 * BT_AHEAD elements ahead of its own position, a cache line per row every BT_LINE elements
 * (1 x 2304 x 768 on 2 threads, weights cold: 12-19 GB/s of bfloat16 without, 20-28 with, against
 * a triad of ~26). Shapes other than a few rows with B's columns contiguous are declined.
 */
#include "../core/backend.h"
#include "dtype_dispatch.h"
#include "gemm.h"
#include "half_rows.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#define MIN(a, b) ((a) < (b) ? (a) : (b))

#define T float
#define F(name) name##_f32
#include "dots_impl.h"
#undef T
#undef F

#define DL (TN_VEC_BYTES / (int)sizeof(float)) /* dots_impl.h's lanes for float */
#define HALF_STRIP (4 * DOTS_NJ)
#define BT_MI 4   /* rows of x in a bfloat16 tile */
#define BT_NJ 3   /* its weight rows: 12 accumulators, 3 weight vectors, one of x (AVX2: 16) */
#define GEMV_NJ 6 /* weight rows of a tile with one row of x */
#define BT_AHEAD 256
#define BT_LINE 32 /* bfloat16 elements per 64-byte line */

/* One vector of bfloat16 lanes widened: GCC vectorises the plain lane loop at the 16-bit loads'
 * width (8 lanes in 128 bits, the floats in halves, its accumulators spilled); full vectors
 * here. */
#if defined(__AVX512F__) && TN_VEC_BYTES == 64
#define BT_VEC __m512
#define BT_ZERO _mm512_setzero_ps
#define BT_LOADX _mm512_loadu_ps
#define BT_LOADB(p)                                                                                \
    _mm512_castsi512_ps(                                                                           \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define BT_FMA _mm512_fmadd_ps
#define BT_STORE _mm512_storeu_ps
#elif defined(__AVX2__) && TN_VEC_BYTES == 32
#define BT_VEC __m256
#define BT_ZERO _mm256_setzero_ps
#define BT_LOADX _mm256_loadu_ps
#define BT_LOADB(p)                                                                                \
    _mm256_castsi256_ps(                                                                           \
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define BT_FMA _mm256_fmadd_ps
#define BT_STORE _mm256_storeu_ps
#endif

#ifdef _OPENMP
static int thread_num(void) { return omp_get_thread_num(); }
#else
static int thread_num(void) { return 0; }
#endif

/* The tile at c (rows past mi, weight rows past nj left out): c(i, j) += sum over p < k of
 * a[i rsa + p] b[j csb + p] widened; pf: pfn weight rows fetched BT_AHEAD ahead. Inlined with
 * constant mi and nj, the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
bf16_tile(int64_t k, const float *restrict a, int64_t rsa, const uint16_t *restrict b, int64_t csb,
          float *restrict c, int64_t rsc, int mi, int nj, const uint16_t *pf, int pfn) {
    float s[BT_MI][GEMV_NJ][DL] = {{{0}}};
    int64_t p = 0;
#ifdef BT_VEC
    BT_VEC acc[BT_MI][GEMV_NJ];
    for (int i = 0; i < mi; i++)
        for (int j = 0; j < nj; j++)
            acc[i][j] = BT_ZERO();
    for (; p + DL <= k; p += DL) {
        if (p % BT_LINE == 0)
            for (int j = 0; j < pfn; j++)
                __builtin_prefetch(pf + j * csb + p + BT_AHEAD);
        BT_VEC bv[GEMV_NJ];
        for (int j = 0; j < nj; j++)
            bv[j] = BT_LOADB(b + j * csb + p);
        for (int i = 0; i < mi; i++) {
            const BT_VEC xv = BT_LOADX(a + i * rsa + p);
            for (int j = 0; j < nj; j++)
                acc[i][j] = BT_FMA(xv, bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < mi; i++)
        for (int j = 0; j < nj; j++)
            BT_STORE(s[i][j], acc[i][j]);
#endif
    for (; p + DL <= k; p += DL) {
        if (p % BT_LINE == 0)
            for (int j = 0; j < pfn; j++)
                __builtin_prefetch(pf + j * csb + p + BT_AHEAD);
        for (int i = 0; i < mi; i++)
            for (int j = 0; j < nj; j++)
#pragma omp simd
                for (int l = 0; l < DL; l++)
                    s[i][j][l] = FMADD(a[i * rsa + p + l], tn__bf16_bits_f32(b[j * csb + p + l]),
                                       s[i][j][l]);
    }
    for (; p < k; p++)
        for (int i = 0; i < mi; i++)
            for (int j = 0; j < nj; j++)
                s[i][j][p % DL] =
                    FMADD(a[i * rsa + p], tn__bf16_bits_f32(b[j * csb + p]), s[i][j][p % DL]);
    for (int i = 0; i < mi; i++)
        for (int j = 0; j < nj; j++) {
            float sum = c[i * rsc + j];
            for (int l = 0; l < DL; l++)
                sum += s[i][j][l];
            c[i * rsc + j] = sum;
        }
}

/* Columns [j0, j1) of w's C (float32, holding its starting values), every row, over the
 * bfloat16 weight b (rows csb apart). A tile of weight rows is read from memory once while every
 * row tile of x passes over it (x stays in L1/L2). */
static void bf16_cols(const tn_gemm *w, const uint16_t *b, int64_t csb, int64_t j0, int64_t j1) {
    const int64_t m = w->m, k = w->k, rsa = w->rsa, rsc = w->rsc;
    const float *a = w->a;
    float *c = w->c;
    const int NJ = m == 1 ? GEMV_NJ : BT_NJ;
    for (int64_t j = j0; j < j1; j += NJ) {
        const int nj = (int)MIN(NJ, j1 - j), next = (int)MIN(NJ, j1 - j - nj);
        const uint16_t *bj = b + j * csb, *pf = bj + nj * csb;
        for (int64_t i = 0; i < m; i += BT_MI) {
            const int mi = (int)MIN(BT_MI, m - i), pfn = i == 0 ? next : 0;
            const float *ai = a + i * rsa;
            float *cij = c + i * rsc + j;
            if (mi == 1 && nj == GEMV_NJ)
                bf16_tile(k, ai, rsa, bj, csb, cij, rsc, 1, GEMV_NJ, pf, pfn);
            else if (mi == BT_MI && nj == BT_NJ)
                bf16_tile(k, ai, rsa, bj, csb, cij, rsc, BT_MI, BT_NJ, pf, pfn);
            else if (mi == 1 && nj == BT_NJ)
                bf16_tile(k, ai, rsa, bj, csb, cij, rsc, 1, BT_NJ, pf, pfn);
            else
                bf16_tile(k, ai, rsa, bj, csb, cij, rsc, mi, nj, pf, pfn);
        }
    }
}

static bool use_half_dots(const tn_gemm *g) {
    return g->m <= DOTS_MAX_M && g->rsb == 1 && g->k >= DOTS_MIN_K &&
           g->m * g->k * (int64_t)sizeof(float) <= DOTS_MAX_A_BYTES &&
           g->m * g->n * g->k >= GEMM_SMALL;
}

/* Columns [lo, hi) of one product (w: x widened, C's float32 buffer; one: the half product): C's
 * float32 sums (widened from C when it accumulates), the dot products over the weight (in place
 * for bfloat16, by strips widened into bw, HALF_STRIP x k floats, for float16), the results
 * rounded into C. */
static void half_cols(tn_dtype dt, const tn_gemm *w, const tn_gemm *one, float *bw, int64_t lo,
                      int64_t hi) {
    float *c32 = w->c;
    const uint16_t *b = one->b;
    uint16_t *c = one->c;
    const bool in_place = dt == TN_BF16; /* all of [lo, hi) at once: the weight rows in order */
    for (int64_t j0 = lo; j0 < hi; j0 += in_place ? hi - lo : HALF_STRIP) {
        const int64_t nj = in_place ? hi - lo : MIN(HALF_STRIP, hi - j0);
        for (int64_t i = 0; i < w->m; i++)
            for (int64_t j = j0; j < j0 + nj; j++)
                c32[i * w->rsc + j] = one->accumulate ? tn__half_ld(dt, c[i * one->rsc + j]) : 0;
        if (in_place) {
            bf16_cols(w, b, one->csb, j0, j0 + nj);
        } else {
            for (int64_t j = 0; j < nj; j++)
                tn__widen_half_row(dt, bw + j * w->k, b + (j0 + j) * one->csb, w->k);
            tn_gemm strip = *w;
            strip.b = bw;
            strip.csb = w->k;
            strip.c = c32 + j0;
            strip.accumulate = true;
            dots_f32(&strip, 0, nj);
        }
        for (int64_t i = 0; i < w->m; i++)
            for (int64_t j = j0; j < j0 + nj; j++)
                c[i * one->rsc + j] = tn__half_st(dt, c32[i * w->rsc + j]);
    }
}

tn_status tn__gemm_half(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch) {
    if (!use_half_dots(g)) return TN__DECLINED;
    const int64_t nbatch = batch ? tn__numel(batch->ndim, batch->shape) : 1, m = g->m, n = g->n,
                  k = g->k;
    if (nbatch == 0 || m == 0 || n == 0) return TN_OK; /* k >= DOTS_MIN_K: never empty */
    const int nt = tn__threads_for(tn__gemm_work(g));
    /* tasks of whole strips; one row (bound by streaming the weight): one task per thread, each
     * an unbroken stream for the prefetch (on 2 threads, 6 pairs of runs: 97.6-134.4 tok/s in
     * the median 120.8, against 103.4-117.9, median 108.9, with 3 tasks per thread); more rows
     * (bound by computing): 3 per thread, dynamic, to even out the threads */
    const int64_t strips = (n + HALF_STRIP - 1) / HALF_STRIP,
                  ntask = MIN(strips, (m == 1 ? 1 : 3) * nt);
    /* x widened, C's float32 results, then one weight strip per thread (float16) */
    const int64_t nbw = dt == TN_BF16 ? 0 : nt * HALF_STRIP * k;
    float *a32 = tn__alloc((size_t)(m * k + m * n + nbw) * sizeof *a32);
    if (!a32) return TN_ERR_OUT_OF_MEMORY;
    float *strip_bufs = a32 + m * k + m * n;
    for (int64_t bi = 0; bi < nbatch; bi++) {
        tn_gemm one = *g;
        if (batch) tn__gemm_batch_item(g, batch, bi, sizeof(uint16_t), &one);
        const uint16_t *a = one.a;
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++)
                a32[i * k + p] = tn__half_ld(dt, a[i * one.rsa + p * one.csa]);
        const tn_gemm w = {.m = m,
                           .n = n,
                           .k = k,
                           .a = a32,
                           .rsa = k,
                           .csa = 1,
                           .c = a32 + m * k,
                           .rsc = n,
                           .accumulate = one.accumulate};
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
        for (int64_t t = 0; t < ntask; t++) {
            const int64_t lo = MIN(n, strips * t / ntask * HALF_STRIP),
                          hi = MIN(n, strips * (t + 1) / ntask * HALF_STRIP);
            float *bw = nbw ? strip_bufs + (int64_t)thread_num() * HALF_STRIP * k : NULL;
            if (lo < hi) half_cols(dt, &w, &one, bw, lo, hi);
        }
    }
    tn__free(a32);
    return TN_OK;
}
