/* engine/cpu/dots_impl.h — products of a few rows as dot products, for one float dtype: included
 * by a kernel body (gemm_impl.h, attention_impl.h) with T and F defined (dtype_dispatch.h),
 * after gemm.h (FMADD, TN_VEC_BYTES, tn_gemm).
 *
 * C = A·B where A's rows and B's columns are contiguous (x·Wᵀ of a linear layer, W [out, in];
 * a query's scores against cached keys): each C element is the dot product of two contiguous
 * rows, summed in DL partial sums (one vector register of the set's width) that are added up in
 * lane order, so an element's bits do not depend on the tile, the split or the thread that
 * computes it. Nothing is packed: with a few rows in A, packing B would copy all of it for a few
 * multiply-adds per element.
 */
#ifndef TN_CPU_DOTS_TILE
#define TN_CPU_DOTS_TILE
/* The tile: DOTS_MI rows x DOTS_NJ columns of C, 12 accumulator vectors (of 16 registers with
 * AVX2) beside the 3 columns' vectors and one row's: each loaded vector serves 3 or 4
 * multiply-adds. */
#define DOTS_MI 4
#define DOTS_NJ 3
#endif

#define DL (TN_VEC_BYTES / (int)sizeof(T))

/* The tile at c (rows past mi, columns past nj left out): c(i, j) = sum over p < k of
 * a[i rsa + p] b[j csb + p] (+ c(i, j) when acc). pf: pfn columns (of the next tile) fetched
 * into the cache along the way. Inlined with constant mi and nj, the accumulators stay in
 * registers. */
static inline __attribute__((always_inline)) void
F(dots_tile)(int64_t k, const T *restrict a, int64_t rsa, const T *restrict b, int64_t csb,
             T *restrict c, int64_t rsc, int mi, int nj, bool acc, const T *pf, int pfn) {
    T s[DOTS_MI][DOTS_NJ][DL];
    for (int i = 0; i < DOTS_MI; i++)
        for (int j = 0; j < DOTS_NJ; j++)
            for (int l = 0; l < DL; l++)
                s[i][j][l] = 0;
    int64_t p = 0;
    for (; p + DL <= k; p += DL) {
        for (int j = 0; j < pfn; j++)
            __builtin_prefetch(pf + j * csb + p);
        for (int i = 0; i < mi; i++)
            for (int j = 0; j < nj; j++)
#pragma omp simd
                for (int l = 0; l < DL; l++)
                    s[i][j][l] = FMADD(a[i * rsa + p + l], b[j * csb + p + l], s[i][j][l]);
    }
    for (; p < k; p++)
        for (int i = 0; i < mi; i++)
            for (int j = 0; j < nj; j++)
                s[i][j][p % DL] = FMADD(a[i * rsa + p], b[j * csb + p], s[i][j][p % DL]);
    for (int i = 0; i < mi; i++)
        for (int j = 0; j < nj; j++) {
            T sum = acc ? c[i * rsc + j] : (T)0;
            for (int l = 0; l < DL; l++)
                sum += s[i][j][l];
            c[i * rsc + j] = sum;
        }
}

/* Columns [j0, j1) of g's C, every row. A tile of B's columns (weight rows) stays in L1 while
 * every row tile of A passes over it, so each is read from memory once; the next tile's columns
 * are fetched while the first row tile computes. g's csa and rsb are 1. */
static void F(dots)(const tn_gemm *g, int64_t j0, int64_t j1) {
    const T *a = g->a, *b = g->b;
    T *c = g->c;
    const int64_t m = g->m, k = g->k, rsa = g->rsa, csb = g->csb, rsc = g->rsc;
    const bool acc = g->accumulate;
    for (int64_t j = j0; j < j1; j += DOTS_NJ) {
        const int nj = j1 - j < DOTS_NJ ? (int)(j1 - j) : DOTS_NJ;
        const int next = j1 - j - nj < DOTS_NJ ? (int)(j1 - j - nj) : DOTS_NJ;
        const T *bj = b + j * csb;
        for (int64_t i = 0; i < m; i += DOTS_MI) {
            const int mi = m - i < DOTS_MI ? (int)(m - i) : DOTS_MI, pfn = i == 0 ? next : 0;
            const T *ai = a + i * rsa, *pf = pfn ? bj + nj * csb : bj;
            T *cij = c + i * rsc + j;
            if (mi == DOTS_MI && nj == DOTS_NJ)
                F(dots_tile)(k, ai, rsa, bj, csb, cij, rsc, DOTS_MI, DOTS_NJ, acc, pf, pfn);
            else if (mi == 1 && nj == DOTS_NJ) /* one row left, or a query's scores */
                F(dots_tile)(k, ai, rsa, bj, csb, cij, rsc, 1, DOTS_NJ, acc, pf, pfn);
            else
                F(dots_tile)(k, ai, rsa, bj, csb, cij, rsc, mi, nj, acc, pf, pfn);
        }
    }
}
#undef DL
