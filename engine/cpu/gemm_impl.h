/* engine/cpu/gemm_impl.h — the product kernels of one dtype, included by
 * gemm.c once per dtype with SUF (a suffix of dtype_dispatch.h) defined:
 * direct_SUF (every dtype; U is the type it accumulates in: T for floats,
 * uint64_t for integers, so that overflow wraps) and, for floats, the
 * packed, blocked blocked_SUF on an MR_SUF x NR_SUF register tile.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)
#if TN_IS_FLOAT(SUF)
#define U T
#else
#define U uint64_t
#endif

static void F(direct)(const tn_gemm *g, int64_t i0, int64_t i1) {
    const T *a = g->a, *b = g->b;
    T *c = g->c;
    /* Locals, not g->...: with -fno-strict-aliasing a store to C may alias *g,
     * so bounds and strides read through g are reloaded on every pass and
     * the compiler cannot vectorise the loops (measured: ~4 GFLOP/s). */
    const int64_t n = g->n, k = g->k, rsa = g->rsa, csa = g->csa;
    const int64_t rsb = g->rsb, csb = g->csb, rsc = g->rsc;
    const bool acc = g->accumulate;
    if (n == 1) {
        for (int64_t i = i0; i < i1; i++) {
            const T *ar = a + i * rsa;
            U s[DOT_LANES] = {0};
            int64_t p = 0;
            if (csa == 1 && rsb == 1)
                for (; p + DOT_LANES <= k; p += DOT_LANES)
                    for (int l = 0; l < DOT_LANES; l++)
                        s[l] = FMADD((U)ar[p + l], (U)b[p + l], s[l]);
            for (; p < k; p++)
                s[p % DOT_LANES] = FMADD((U)ar[p * csa], (U)b[p * rsb], s[p % DOT_LANES]);
            U sum = acc ? (U)c[i * rsc] : (U)0;
            for (int l = 0; l < DOT_LANES; l++)
                sum += s[l];
            c[i * rsc] = (T)sum;
        }
        return;
    }
    for (int64_t i = i0; i < i1; i++) {
        T *restrict cr = c + i * rsc;
        if (!acc)
            for (int64_t j = 0; j < n; j++)
                cr[j] = 0;
        for (int64_t p = 0; p < k; p++) {
            const U aip = (U)a[i * rsa + p * csa];
            const T *restrict br = b + p * rsb;
            if (csb == 1) {
                for (int64_t j = 0; j < n; j++)
                    cr[j] = (T)FMADD(aip, (U)br[j], (U)cr[j]);
            } else {
                for (int64_t j = 0; j < n; j++)
                    cr[j] = (T)FMADD(aip, (U)br[j * csb], (U)cr[j]);
            }
        }
    }
}

#if TN_IS_FLOAT(SUF)
/* C's one row, columns [j0, j1): c[j] = sum over p of a(p) B(p, j), the matrix-vector product
 * of a linear layer fed one token. With B's columns contiguous (a weight [out, in] read
 * transposed) each c[j] is a dot product over a contiguous weight row, kept in DOT_LANES
 * partial sums; otherwise rows of B are added in. Either way each weight is read once. */
static void F(direct_cols)(const tn_gemm *g, int64_t j0, int64_t j1) {
    const T *a = g->a, *b = g->b;
    T *c = g->c;
    const int64_t k = g->k, csa = g->csa, rsb = g->rsb, csb = g->csb;
    const bool acc = g->accumulate;
    if (rsb == 1 && csa == 1) {
        for (int64_t j = j0; j < j1; j++) {
            const T *restrict bj = b + j * csb;
            T s[DOT_LANES] = {0};
            int64_t p = 0;
            for (; p + DOT_LANES <= k; p += DOT_LANES) {
#pragma omp simd
                for (int l = 0; l < DOT_LANES; l++)
                    s[l] = FMADD(a[p + l], bj[p + l], s[l]);
            }
            for (; p < k; p++)
                s[p % DOT_LANES] = FMADD(a[p], bj[p], s[p % DOT_LANES]);
            T sum = acc ? c[j] : (T)0;
            for (int l = 0; l < DOT_LANES; l++)
                sum += s[l];
            c[j] = sum;
        }
        return;
    }
    T *restrict cr = c;
    if (!acc)
        for (int64_t j = j0; j < j1; j++)
            cr[j] = 0;
    for (int64_t p = 0; p < k; p++) {
        const T ap = a[p * csa];
        const T *restrict br = b + p * rsb;
        for (int64_t j = j0; j < j1; j++)
            cr[j] = FMADD(ap, br[j * csb], cr[j]);
    }
}

#include "dots_impl.h"

#define MR TN_CAT(MR_, SUF)
#define NR TN_CAT(NR_, SUF)    /* 2 vectors */
#include "vec_names.h"

/* ap is (MR, kc) packed p-major: ap[p*MR + i]; bp is (kc, NR): bp[p*NR + j];
 * c is the (mr <= MR, nr <= NR) corner of C. The tile is MR x 2 vectors (vec.h), indexed by
 * constants only, so that it stays in registers: GCC spilled a plain scalar tile (8 x 32
 * float32 on AVX2), and on AVX-512 zeroed and copied it out through the stack. */
static void F(ukr)(int64_t kc, const T *restrict ap, const T *restrict bp, T *restrict c,
                   int64_t rsc, int mr, int nr, bool acc) {
    for (int i = 0; i < mr; i++) /* C's tile is written at the end: fetch it meanwhile */
        __builtin_prefetch(c + i * rsc, 1), __builtin_prefetch(c + i * rsc + nr - 1, 1);
    V t[MR][2];
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) t[i][0] = t[i][1] = (V){0};
    for (int64_t p = 0; p < kc; p++, ap += MR, bp += NR) {
        const V b0 = VLD(bp), b1 = VLD(bp + VL);
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
            const V ai = SPLAT(ap[i]);
            t[i][0] = VFMA(ai, b0, t[i][0]);
            t[i][1] = VFMA(ai, b1, t[i][1]);
        }
    }
    if (mr == MR && nr == NR) {
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
            T *restrict cr = c + i * rsc;
            VOUT(cr, t[i][0], acc);
            VOUT(cr + VL, t[i][1], acc);
        }
        return;
    }
    T e[MR][NR]; /* an edge tile: through memory (copies: t's own address stays untaken) */
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
        VOUT(e[i], t[i][0], false);
        VOUT(e[i] + VL, t[i][1], false);
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[i * rsc + j] = acc ? c[i * rsc + j] + e[i][j] : e[i][j];
}

/* (mc, kc) block of A at a -> MR-row micro-panels, zero rows past mc. */
static void F(pack_a)(int64_t mc, int64_t kc, const T *a, int64_t rs, int64_t cs, T *restrict dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kc) {
        int mr = (int)MIN(MR, mc - i0);
        const T *src = a + i0 * rs;
        if (mr == MR && rs == 1) {
            for (int64_t p = 0; p < kc; p++)
                for (int i = 0; i < MR; i++)
                    dst[p * MR + i] = src[p * cs + i];
        } else {
            for (int i = 0; i < MR; i++) {
                const T *row = src + i * rs;
                if (i < mr)
                    for (int64_t p = 0; p < kc; p++)
                        dst[p * MR + i] = row[p * cs];
                else
                    for (int64_t p = 0; p < kc; p++)
                        dst[p * MR + i] = 0;
            }
        }
    }
}

/* (kc, nc) block of B at b -> NR-column micro-panels, zero columns past nc. */
static void F(pack_b)(int64_t kc, int64_t nc, const T *b, int64_t rs, int64_t cs, T *restrict dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR, dst += NR * kc) {
        int nr = (int)MIN(NR, nc - j0);
        const T *src = b + j0 * cs;
        if (nr == NR && cs == 1) {
            for (int64_t p = 0; p < kc; p++)
                for (int j = 0; j < NR; j++)
                    dst[p * NR + j] = src[p * rs + j];
        } else {
            for (int j = 0; j < NR; j++) {
                const T *col = src + j * cs;
                if (j < nr)
                    for (int64_t p = 0; p < kc; p++)
                        dst[p * NR + j] = col[p * rs];
                else
                    for (int64_t p = 0; p < kc; p++)
                        dst[p * NR + j] = 0;
            }
        }
    }
}

/* Rows [i0, i1) and columns [j0, j1) of C, serially, with the caller's buffers. */
static void F(blocked)(const tn_gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, T *apack,
                       T *bpack) {
    const T *a = g->a, *b = g->b;
    T *c = g->c;
    for (int64_t jc = j0; jc < j1; jc += GEMM_NC) {
        int64_t nc = MIN(GEMM_NC, j1 - jc);
        for (int64_t pc = 0; pc < g->k; pc += GEMM_KC) {
            int64_t kc = MIN(GEMM_KC, g->k - pc);
            bool acc = g->accumulate || pc > 0;
            F(pack_b)(kc, nc, b + pc * g->rsb + jc * g->csb, g->rsb, g->csb, bpack);
            for (int64_t ic = i0; ic < i1; ic += GEMM_MC) {
                int64_t mc = MIN(GEMM_MC, i1 - ic);
                F(pack_a)(mc, kc, a + ic * g->rsa + pc * g->csa, g->rsa, g->csa, apack);
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        T *ct = c + (ic + ir) * g->rsc + jc + jr;
                        const int mr = (int)MIN(MR, mc - ir), nr = (int)MIN(NR, nc - jr);
                        F(ukr)(kc, apack + ir * kc, bpack + jr * kc, ct, g->rsc, mr, nr, acc);
                    }
            }
        }
    }
}

/* The kernel table's entry: blocked_SUF with untyped buffers. */
static void F(blocked_v)(const tn_gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, void *ap,
                         void *bp) {
    F(blocked)(g, i0, i1, j0, j1, ap, bp);
}
#undef MR
#undef NR
#include "vec_names_end.h"
#endif

#undef T
#undef U
#undef F
#undef SUF
