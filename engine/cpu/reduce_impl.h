/* engine/cpu/reduce_impl.h — the reduction kernels of one dtype, included
 * by reduce_kernels.c once per dtype with SUF (a suffix of dtype_dispatch.h)
 * defined: the sum kernels here, then max and min from reduce_ext_impl.h.
 * Input T, accumulator A (float: double, integers and bool: int64), output
 * O; FIN(total, div) is the output value (float: divided by div, for the
 * mean, rounded once to T). Elements are read through TN_LD. Defines row_sum_SUF, row_ext_max_SUF and row_ext_min_SUF.
 */
#define T TN_T(SUF)
#define A TN_ACC(SUF)
#define F(name) TN_NAME(name, SUF)
#if TN_IS_FLOAT(SUF)
#define O T
#define FIN(x, div) TN_ST(SUF, (x) / (div))
#else
#define O A
#define FIN(x, div) (x)
#endif

/* Sum of n elements (byte stride sb) in 8 lanes, combined pairwise. */
static A F(blk_sum)(const char *p, int64_t n, int64_t sb) {
    A acc[8] = {0};
    int64_t i = 0;
    if (sb == (int64_t)sizeof(T)) {
        const T *x = (const T *)p;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                acc[k] += (A)TN_LD(SUF, x[i + k]);
    } else {
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                acc[k] += (A)TN_LD(SUF, *(const T *)(p + (i + k) * sb));
    }
    for (int k = 0; i < n; i++, k++)
        acc[k] += (A)TN_LD(SUF, *(const T *)(p + i * sb));
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
static void F(slice_blk_sum)(const red_job *jb, int64_t b) {
    int64_t i0 = b * SLICE_BLOCK, sr = jb->c->sr;
    ((A *)jb->part)[b] = F(blk_sum)(jb->p + i0 * sr, min64(SLICE_BLOCK, jb->c->R - i0), sr);
}
/* A slice: fixed blocks, totalled in block order (on nt threads or one). */
static A F(slice_sum)(const red_ctx *c, const char *p, int nt) {
    int64_t nb = (c->R + SLICE_BLOCK - 1) / SLICE_BLOCK;
    A tot = 0, buf[STACK_PARTS];
    A *part = nt > 1 && nb > 1 ? scratch(buf, sizeof buf, (size_t)nb * sizeof(A)) : NULL;
    if (part) {
        run_blocks(nb, nt, F(slice_blk_sum), &(red_job){.c = c, .p = p, .part = part});
        for (int64_t b = 0; b < nb; b++)
            tot += part[b];
        scratch_free(part, buf);
        return tot;
    }
    for (int64_t b = 0; b < nb; b++)
        tot += F(blk_sum)(p + b * SLICE_BLOCK * c->sr, min64(SLICE_BLOCK, c->R - b * SLICE_BLOCK),
                          c->sr);
    return tot;
}
static void F(out_sum)(const red_job *jb, int64_t j) {
    const red_row *w = jb->w;
    A tot = F(slice_sum)(jb->c, w->pi + j * w->si, jb->nt);
    *(O *)(w->pv + j * w->sv) = FIN(tot, jb->c->div);
}
/* acc[j] = sum of column j (< n <= CB) over reduced indices [r0, r1). */
static void F(cols_sum)(A *acc, const char *p, int64_t n, int64_t si, int64_t r0, int64_t r1,
                        int64_t sr) {
    for (int64_t j = 0; j < n; j++)
        acc[j] = 0;
    if (si == (int64_t)sizeof(T)) {
        for (int64_t r = r0; r < r1; r++) {
            const T *x = (const T *)(p + r * sr);
            for (int64_t j = 0; j < n; j++)
                acc[j] += (A)TN_LD(SUF, x[j]);
        }
    } else {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < n; j++)
                acc[j] += (A)TN_LD(SUF, *(const T *)(p + r * sr + j * si));
    }
}
/* Column block cb: all reduced indices, RB at a time, totalled in order. */
static void F(colblock_sum)(const red_job *jb, int64_t cb) {
    const red_ctx *c = jb->c;
    const red_row *w = jb->w;
    int64_t j0 = cb * jb->width, n = min64(jb->width, w->n - j0);
    A tot[CB] = {0}, blk[CB];
    for (int64_t r0 = 0; r0 < c->R; r0 += RB) {
        F(cols_sum)(blk, w->pi + j0 * w->si, n, w->si, r0, min64(r0 + RB, c->R), c->sr);
        for (int64_t j = 0; j < n; j++)
            tot[j] += blk[j];
    }
    for (int64_t j = 0; j < n; j++)
        *(O *)(w->pv + (j0 + j) * w->sv) = FIN(tot[j], c->div);
}
/* Reduced block b of every column into partials [block][column]. */
static void F(rblock_sum)(const red_job *jb, int64_t b) {
    const red_row *w = jb->w;
    const int64_t r0 = b * RB, r1 = min64((b + 1) * RB, jb->c->R);
    for (int64_t j0 = 0; j0 < w->n; j0 += CB) {
        A *acc = (A *)jb->part + b * w->n + j0;
        F(cols_sum)(acc, w->pi + j0 * w->si, min64(CB, w->n - j0), w->si, r0, r1, jb->c->sr);
    }
}
/* Few columns, long reduction: the RB blocks in parallel, then each
 * column totalled in block order (as colblock_sum does). */
static bool F(cols_parallel_sum)(const red_ctx *c, const red_row *w, int nt) {
    int64_t nb = (c->R + RB - 1) / RB;
    A *part = tn__malloc_quiet((size_t)(nb * w->n) * sizeof(A));
    if (!part) return false;
    run_blocks(nb, nt, F(rblock_sum), &(red_job){.c = c, .w = w, .part = part});
    for (int64_t j = 0; j < w->n; j++) {
        A tot = 0;
        for (int64_t b = 0; b < nb; b++)
            tot += part[b * w->n + j];
        *(O *)(w->pv + j * w->sv) = FIN(tot, c->div);
    }
    tn__mfree(part);
    return true;
}
static void F(row_sum)(const red_ctx *c, const red_row *w, int nt) {
    red_job jb = {.c = c, .w = w, .nt = 1};
    if (column_mode(c, w)) {
        int64_t ncb = col_blocks(w->n, nt, &jb.width);
        if (nt > 1 && ncb < nt && c->R > RB && F(cols_parallel_sum)(c, w, nt)) return;
        run_blocks(ncb, ncb >= nt ? nt : 1, F(colblock_sum), &jb);
    } else if (nt > 1 && w->n >= nt) {
        run_blocks(w->n, nt, F(out_sum), &jb);
    } else {
        jb.nt = nt;
        run_blocks(w->n, 1, F(out_sum), &jb);
    }
}

#define EXT max
#define CMP >
#include "reduce_ext_impl.h"
#define EXT min
#define CMP <
#include "reduce_ext_impl.h"

#undef T
#undef A
#undef O
#undef F
#undef FIN
#undef SUF
