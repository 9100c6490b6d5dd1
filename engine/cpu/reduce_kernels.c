/* The CPU's reduction kernel: the backend table's `reduce` entry (sum/mean,
 * max/min with the index of the first extremum, over one dimension or over
 * a whole contiguous input), working from tn_red_args alone (the contract
 * is in engine/core/kernel_args.h; the tensor-level checks, the empty
 * input's fill and the race-detector bracket are engine/core/reduce.c's).
 *
 * Determinism: every result is independent of the thread count. A reduced
 * range is cut into fixed-size blocks (sizes depend on the shape only);
 * block results are combined in block order whether the blocks ran on one
 * thread or many. float32 accumulates in double, integers and bool in int64.
 *
 * The outputs are walked as rows of a tn_iter over the kept dims (the
 * reduced dim set to size 1), so any strides work and contiguous dims
 * coalesce. For each row of n outputs, with byte stride si between the
 * slices' first elements and sr along the reduced dim:
 *  - column mode (si smaller than sr, n >= 2; e.g. summing the rows of an
 *    (N, C) matrix): blocks of up to CB columns advance together over the
 *    reduced index, so the inner loop runs along memory, vectorised over
 *    columns, and memory is read once;
 *  - slice mode otherwise (e.g. the innermost dim): each output reduces its
 *    slice in independent lanes, which vectorises along the slice.
 * Parallelism (above TN_GRAIN elements of work): over rows, else over the
 * outputs or column blocks of a row, else over fixed blocks of the reduced
 * range (sum: also the column mode's blocks of RB reduced indices).
 * Which mode and which blocks depends on the geometry only, never on the
 * thread count, so neither do the rounding errors.
 */
#include <stdlib.h>

#include "cpu_backend.h"

enum {
    SLICE_BLOCK = 4096, /* slice mode: elements of a slice per block */
    CB = 512,           /* column mode: most columns per block */
    RB = 256,           /* column mode: reduced indices per block */
    STACK_PARTS = 64,
    EXT_LANES = 64 /* value-only max/min: independent lanes */
};

typedef struct red_ctx {
    int64_t R, sr; /* reduced size, byte stride */
    double div;
} red_ctx;

/* One row of outputs: n of them; value / index outputs and the first input
 * element of each slice, with byte strides. */
typedef struct red_row {
    int64_t n;
    char *pv, *pj;
    const char *pi;
    int64_t sv, sj, si;
} red_row;

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t abs64(int64_t a) { return a < 0 ? -a : a; }
static inline bool column_mode(const red_ctx *c, const red_row *r) {
    return r->n >= 2 && abs64(r->si) < abs64(c->sr);
}

/* Column blocks of a row: at most CB wide, and one per thread when there are
 * enough columns. (A column's result does not depend on its block.) */
static int64_t col_blocks(int64_t n, int nt, int64_t *width) {
    int64_t nb = (n + CB - 1) / CB;
    if (nb < nt && n >= 16 * nt) nb = nt;
    *width = (n + nb - 1) / nb;
    return (n + *width - 1) / *width;
}

/* Scratch for block partials; NULL means "run the blocks serially" (same
 * result), so a failed allocation is not an error. */
static void *scratch(void *stack_buf, size_t stack_bytes, size_t bytes) {
    return bytes <= stack_bytes ? stack_buf : tn__malloc_quiet(bytes);
}
static void scratch_free(void *p, void *stack_buf) {
    if (p != stack_buf) tn__mfree(p);
}

/* Everything the block callbacks of one row need. */
typedef struct red_job {
    const red_ctx *c;
    const red_row *w;
    const char *p;   /* slice blocks: the slice */
    void *part;      /* block partials (values) */
    int64_t *part_i; /* block partials (indices) */
    int64_t width;   /* column blocks: their width */
    int nt;          /* threads for one slice (slice mode) */
    bool want_idx;
} red_job;

typedef void (*block_fn)(const red_job *job, int64_t b);

/* fn(job, b) for every b in [0, nb), on nt threads when nt > 1; each b
 * writes only its own outputs or partials. One call per block (thousands of
 * elements), never per element. */
static void run_blocks(int64_t nb, int nt, block_fn fn, const red_job *job) {
    if (nt <= 1) { /* not even an if(0) region: that still costs ~1 us */
        for (int64_t b = 0; b < nb; b++)
            fn(job, b);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        TN_OMP_SPAN("reduce");
#pragma omp for schedule(static) nowait
        for (int64_t b = 0; b < nb; b++)
            fn(job, b);
    }
}

/* ---- sum ------------------------------------------------------------------------ */

/* Defines the sum kernels for input T, accumulator A, output O. FIN(total,
 * div) is the output value (float: divided by div, for the mean). */
#define DEF_SUM(S, T, A, O, FIN)                                                                   \
    /* Sum of n elements (byte stride sb) in 8 lanes, combined pairwise. */                        \
    static A blk_sum_##S(const char *p, int64_t n, int64_t sb) {                                   \
        A acc[8] = {0};                                                                            \
        int64_t i = 0;                                                                             \
        if (sb == (int64_t)sizeof(T)) {                                                            \
            const T *x = (const T *)p;                                                             \
            for (; i + 8 <= n; i += 8)                                                             \
                for (int k = 0; k < 8; k++)                                                        \
                    acc[k] += (A)x[i + k];                                                         \
        } else {                                                                                   \
            for (; i + 8 <= n; i += 8)                                                             \
                for (int k = 0; k < 8; k++)                                                        \
                    acc[k] += (A) * (const T *)(p + (i + k) * sb);                                 \
        }                                                                                          \
        for (int k = 0; i < n; i++, k++)                                                           \
            acc[k] += (A) * (const T *)(p + i * sb);                                               \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));  \
    }                                                                                              \
    static void slice_blk_sum_##S(const red_job *jb, int64_t b) {                                  \
        int64_t i0 = b * SLICE_BLOCK, sr = jb->c->sr;                                              \
        ((A *)jb->part)[b] = blk_sum_##S(jb->p + i0 * sr, min64(SLICE_BLOCK, jb->c->R - i0), sr);  \
    }                                                                                              \
    /* A slice: fixed blocks, totalled in block order (on nt threads or one). */                   \
    static A slice_sum_##S(const red_ctx *c, const char *p, int nt) {                              \
        int64_t nb = (c->R + SLICE_BLOCK - 1) / SLICE_BLOCK;                                       \
        A tot = 0, buf[STACK_PARTS];                                                               \
        A *part = nt > 1 && nb > 1 ? scratch(buf, sizeof buf, (size_t)nb * sizeof(A)) : NULL;      \
        if (part) {                                                                                \
            run_blocks(nb, nt, slice_blk_sum_##S, &(red_job){.c = c, .p = p, .part = part});       \
            for (int64_t b = 0; b < nb; b++)                                                       \
                tot += part[b];                                                                    \
            scratch_free(part, buf);                                                               \
            return tot;                                                                            \
        }                                                                                          \
        for (int64_t b = 0; b < nb; b++)                                                           \
            tot += blk_sum_##S(p + b * SLICE_BLOCK * c->sr,                                        \
                               min64(SLICE_BLOCK, c->R - b * SLICE_BLOCK), c->sr);                 \
        return tot;                                                                                \
    }                                                                                              \
    static void out_sum_##S(const red_job *jb, int64_t j) {                                        \
        const red_row *w = jb->w;                                                                  \
        A tot = slice_sum_##S(jb->c, w->pi + j * w->si, jb->nt);                                   \
        *(O *)(w->pv + j * w->sv) = FIN(tot, jb->c->div);                                          \
    }                                                                                              \
    /* acc[j] = sum of column j (< n <= CB) over reduced indices [r0, r1). */                      \
    static void cols_sum_##S(A *acc, const char *p, int64_t n, int64_t si, int64_t r0, int64_t r1, \
                             int64_t sr) {                                                         \
        for (int64_t j = 0; j < n; j++)                                                            \
            acc[j] = 0;                                                                            \
        if (si == (int64_t)sizeof(T)) {                                                            \
            for (int64_t r = r0; r < r1; r++) {                                                    \
                const T *x = (const T *)(p + r * sr);                                              \
                for (int64_t j = 0; j < n; j++)                                                    \
                    acc[j] += (A)x[j];                                                             \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t r = r0; r < r1; r++)                                                      \
                for (int64_t j = 0; j < n; j++)                                                    \
                    acc[j] += (A) * (const T *)(p + r * sr + j * si);                              \
        }                                                                                          \
    }                                                                                              \
    /* Column block cb: all reduced indices, RB at a time, totalled in order. */                   \
    static void colblock_sum_##S(const red_job *jb, int64_t cb) {                                  \
        const red_ctx *c = jb->c;                                                                  \
        const red_row *w = jb->w;                                                                  \
        int64_t j0 = cb * jb->width, n = min64(jb->width, w->n - j0);                              \
        A tot[CB] = {0}, blk[CB];                                                                  \
        for (int64_t r0 = 0; r0 < c->R; r0 += RB) {                                                \
            cols_sum_##S(blk, w->pi + j0 * w->si, n, w->si, r0, min64(r0 + RB, c->R), c->sr);      \
            for (int64_t j = 0; j < n; j++)                                                        \
                tot[j] += blk[j];                                                                  \
        }                                                                                          \
        for (int64_t j = 0; j < n; j++)                                                            \
            *(O *)(w->pv + (j0 + j) * w->sv) = FIN(tot[j], c->div);                                \
    }                                                                                              \
    /* Reduced block b of every column into partials [block][column]. */                           \
    static void rblock_sum_##S(const red_job *jb, int64_t b) {                                     \
        const red_row *w = jb->w;                                                                  \
        for (int64_t j0 = 0; j0 < w->n; j0 += CB)                                                  \
            cols_sum_##S((A *)jb->part + b * w->n + j0, w->pi + j0 * w->si, min64(CB, w->n - j0),  \
                         w->si, b * RB, min64((b + 1) * RB, jb->c->R), jb->c->sr);                 \
    }                                                                                              \
    /* Few columns, long reduction: the RB blocks in parallel, then each                           \
     * column totalled in block order (as colblock_sum does). */                                   \
    static bool cols_parallel_sum_##S(const red_ctx *c, const red_row *w, int nt) {                \
        int64_t nb = (c->R + RB - 1) / RB;                                                         \
        A *part = tn__malloc_quiet((size_t)(nb * w->n) * sizeof(A));                               \
        if (!part) return false;                                                                   \
        run_blocks(nb, nt, rblock_sum_##S, &(red_job){.c = c, .w = w, .part = part});              \
        for (int64_t j = 0; j < w->n; j++) {                                                       \
            A tot = 0;                                                                             \
            for (int64_t b = 0; b < nb; b++)                                                       \
                tot += part[b * w->n + j];                                                         \
            *(O *)(w->pv + j * w->sv) = FIN(tot, c->div);                                          \
        }                                                                                          \
        tn__mfree(part);                                                                           \
        return true;                                                                               \
    }                                                                                              \
    static void row_sum_##S(const red_ctx *c, const red_row *w, int nt) {                          \
        red_job jb = {.c = c, .w = w, .nt = 1};                                                    \
        if (column_mode(c, w)) {                                                                   \
            int64_t ncb = col_blocks(w->n, nt, &jb.width);                                         \
            if (nt > 1 && ncb < nt && c->R > RB && cols_parallel_sum_##S(c, w, nt)) return;        \
            run_blocks(ncb, ncb >= nt ? nt : 1, colblock_sum_##S, &jb);                            \
        } else if (nt > 1 && w->n >= nt) {                                                         \
            run_blocks(w->n, nt, out_sum_##S, &jb);                                                \
        } else {                                                                                   \
            jb.nt = nt;                                                                            \
            run_blocks(w->n, 1, out_sum_##S, &jb);                                                 \
        }                                                                                          \
    }

#define FIN_F32(x, div) ((float)((x) / (div)))
#define FIN_F64(x, div) ((x) / (div))
#define FIN_I(x, div) (x)
DEF_SUM(f32, float, double, float, FIN_F32)
DEF_SUM(f64, double, double, double, FIN_F64)
DEF_SUM(i16, int16_t, int64_t, int64_t, FIN_I)
DEF_SUM(i32, int32_t, int64_t, int64_t, FIN_I)
DEF_SUM(i64, int64_t, int64_t, int64_t, FIN_I)
DEF_SUM(b8, uint8_t, int64_t, int64_t, FIN_I)

/* ---- max / min -------------------------------------------------------------------- */

/* (x, i) replaces the running extremum (m, mi) of earlier elements when it is
 * strictly better or the first NaN; so the first extremum / first NaN wins,
 * whatever the blocking. For integer T, x != x is false and folds away. */
#define BETTER(CMP, x, m) ((x)CMP(m) || ((x) != (x) && (m) == (m)))

/* Defines max (CMP >) or min (CMP <) kernels for element type T. */
#define DEF_EXT(S, T, CMP)                                                                         \
    /* Running extremum over n elements starting at logical index i0. */                           \
    static void blk_arg_##S(const char *p, int64_t n, int64_t sb, int64_t i0, T *m, int64_t *mi) { \
        T best = *m;                                                                               \
        int64_t bi = *mi;                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = *(const T *)(p + i * sb);                                                        \
            if (BETTER(CMP, x, best)) {                                                            \
                best = x;                                                                          \
                bi = i0 + i;                                                                       \
            }                                                                                      \
        }                                                                                          \
        *m = best;                                                                                 \
        *mi = bi;                                                                                  \
    }                                                                                              \
    /* Value only of n >= 1 elements in EXT_LANES lanes (a loop GCC vectorises;                    \
     * 8 unrolled lanes it does not); a NaN (flagged) means a rescan. */                           \
    static T blk_val_##S(const char *p, int64_t n, int64_t sb) {                                   \
        T m[EXT_LANES], first = *(const T *)p;                                                     \
        uint8_t nan[EXT_LANES];                                                                    \
        for (int k = 0; k < EXT_LANES; k++) {                                                      \
            m[k] = first;                                                                          \
            nan[k] = 0;                                                                            \
        }                                                                                          \
        int64_t i = 0;                                                                             \
        if (sb == (int64_t)sizeof(T)) {                                                            \
            const T *x = (const T *)p;                                                             \
            for (; i + EXT_LANES <= n; i += EXT_LANES)                                             \
                for (int k = 0; k < EXT_LANES; k++) {                                              \
                    T v = x[i + k];                                                                \
                    m[k] = v CMP m[k] ? v : m[k];                                                  \
                    nan[k] |= v != v;                                                              \
                }                                                                                  \
        }                                                                                          \
        T best = m[0];                                                                             \
        int any_nan = 0;                                                                           \
        for (int k = 0; k < EXT_LANES; k++) {                                                      \
            best = m[k] CMP best ? m[k] : best;                                                    \
            any_nan |= nan[k];                                                                     \
        }                                                                                          \
        if (any_nan) { /* from the start: the first NaN wins */                                    \
            best = first;                                                                          \
            i = 0;                                                                                 \
        }                                                                                          \
        int64_t unused = 0;                                                                        \
        blk_arg_##S(p + i * sb, n - i, sb, 0, &best, &unused);                                     \
        return best;                                                                               \
    }                                                                                              \
    /* Extremum of n >= 1 elements starting at logical index i0. Contiguous:                       \
     * the vectorised value first, then its first occurrence (the block is in                      \
     * L1 by then), so the value is the element at the index. */                                   \
    static void blk_ext_##S(const char *p, int64_t n, int64_t sb, int64_t i0, bool want_idx, T *m, \
                            int64_t *mi) {                                                         \
        *m = *(const T *)p;                                                                        \
        *mi = i0;                                                                                  \
        if (sb != (int64_t)sizeof(T)) {                                                            \
            blk_arg_##S(p, n, sb, i0, m, mi);                                                      \
            return;                                                                                \
        }                                                                                          \
        T v = blk_val_##S(p, n, sb);                                                               \
        if (!want_idx) {                                                                           \
            *m = v;                                                                                \
            return;                                                                                \
        }                                                                                          \
        const T *x = (const T *)p;                                                                 \
        int64_t i = 0;                                                                             \
        if (v == v)                                                                                \
            while (x[i] != v)                                                                      \
                i++;                                                                               \
        else                                                                                       \
            while (x[i] == x[i])                                                                   \
                i++;                                                                               \
        *m = x[i];                                                                                 \
        *mi = i0 + i;                                                                              \
    }                                                                                              \
    /* Running (m, mi) of earlier blocks merged with a later block's (v, vi). */                   \
    static inline void merge_##S(T *m, int64_t *mi, T v, int64_t vi) {                             \
        if (BETTER(CMP, v, *m)) {                                                                  \
            *m = v;                                                                                \
            *mi = vi;                                                                              \
        }                                                                                          \
    }                                                                                              \
    static void slice_blk_ext_##S(const red_job *jb, int64_t b) {                                  \
        int64_t i0 = b * SLICE_BLOCK, sr = jb->c->sr;                                              \
        blk_ext_##S(jb->p + i0 * sr, min64(SLICE_BLOCK, jb->c->R - i0), sr, i0, jb->want_idx,      \
                    (T *)jb->part + b, jb->part_i + b);                                            \
    }                                                                                              \
    /* Extremum of a slice: fixed blocks (on nt threads or one), merged in                         \
     * block order. */                                                                             \
    static void slice_ext_##S(const red_job *jb0, const char *p, T *m, int64_t *mi) {              \
        const red_ctx *c = jb0->c;                                                                 \
        int64_t nb = (c->R + SLICE_BLOCK - 1) / SLICE_BLOCK;                                       \
        T vbuf[STACK_PARTS];                                                                       \
        int64_t ibuf[STACK_PARTS];                                                                 \
        red_job jb = {.c = c, .p = p, .want_idx = jb0->want_idx};                                  \
        if (jb0->nt > 1 && nb > 1) {                                                               \
            jb.part = scratch(vbuf, sizeof vbuf, (size_t)nb * sizeof(T));                          \
            jb.part_i = scratch(ibuf, sizeof ibuf, (size_t)nb * sizeof(int64_t));                  \
        }                                                                                          \
        if (jb.part && jb.part_i) {                                                                \
            const T *pv = jb.part;                                                                 \
            run_blocks(nb, jb0->nt, slice_blk_ext_##S, &jb);                                       \
            *m = pv[0];                                                                            \
            *mi = jb.part_i[0];                                                                    \
            for (int64_t b = 1; b < nb; b++)                                                       \
                merge_##S(m, mi, pv[b], jb.part_i[b]);                                             \
        } else {                                                                                   \
            for (int64_t b = 0; b < nb; b++) {                                                     \
                T v;                                                                               \
                int64_t vi;                                                                        \
                int64_t i0 = b * SLICE_BLOCK;                                                      \
                blk_ext_##S(p + i0 * c->sr, min64(SLICE_BLOCK, c->R - i0), c->sr, i0, jb.want_idx, \
                            &v, &vi);                                                              \
                if (b == 0) {                                                                      \
                    *m = v;                                                                        \
                    *mi = vi;                                                                      \
                } else {                                                                           \
                    merge_##S(m, mi, v, vi);                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        if (jb.part) scratch_free(jb.part, vbuf);                                                  \
        if (jb.part_i) scratch_free(jb.part_i, ibuf);                                              \
    }                                                                                              \
    static void put_##S(const red_row *w, int64_t j, T m, int64_t mi) {                            \
        if (w->pv) *(T *)(w->pv + j * w->sv) = m;                                                  \
        if (w->pj) *(int64_t *)(w->pj + j * w->sj) = mi;                                           \
    }                                                                                              \
    static void out_ext_##S(const red_job *jb, int64_t j) {                                        \
        T m;                                                                                       \
        int64_t mi;                                                                                \
        slice_ext_##S(jb, jb->w->pi + j * jb->w->si, &m, &mi);                                     \
        put_##S(jb->w, j, m, mi);                                                                  \
    }                                                                                              \
    /* Column block cb: its columns advance together over the reduced index. */                    \
    static void colblock_ext_##S(const red_job *jb, int64_t cb) {                                  \
        const red_row *w = jb->w;                                                                  \
        int64_t j0 = cb * jb->width, n = min64(jb->width, w->n - j0), sr = jb->c->sr;              \
        const char *p = w->pi + j0 * w->si;                                                        \
        T m[CB];                                                                                   \
        int64_t mi[CB];                                                                            \
        for (int64_t j = 0; j < n; j++) {                                                          \
            m[j] = *(const T *)(p + j * w->si);                                                    \
            mi[j] = 0;                                                                             \
        }                                                                                          \
        for (int64_t r = 1; r < jb->c->R; r++)                                                     \
            for (int64_t j = 0; j < n; j++) {                                                      \
                T x = *(const T *)(p + r * sr + j * w->si);                                        \
                bool b = BETTER(CMP, x, m[j]);                                                     \
                m[j] = b ? x : m[j];                                                               \
                mi[j] = b ? r : mi[j];                                                             \
            }                                                                                      \
        for (int64_t j = 0; j < n; j++)                                                            \
            put_##S(w, j0 + j, m[j], mi[j]);                                                       \
    }                                                                                              \
    static void row_ext_##S(const red_ctx *c, const red_row *w, int nt) {                          \
        red_job jb = {.c = c, .w = w, .nt = 1, .want_idx = w->pj != NULL};                         \
        if (column_mode(c, w)) {                                                                   \
            run_blocks(col_blocks(w->n, nt, &jb.width), nt, colblock_ext_##S, &jb);                \
        } else if (nt > 1 && w->n >= nt) {                                                         \
            run_blocks(w->n, nt, out_ext_##S, &jb);                                                \
        } else {                                                                                   \
            jb.nt = nt;                                                                            \
            run_blocks(w->n, 1, out_ext_##S, &jb);                                                 \
        }                                                                                          \
    }

#define DEF_EXT_BOTH(S, T) DEF_EXT(max_##S, T, >) DEF_EXT(min_##S, T, <)
DEF_EXT_BOTH(f32, float)
DEF_EXT_BOTH(f64, double)
DEF_EXT_BOTH(i16, int16_t)
DEF_EXT_BOTH(i32, int32_t)
DEF_EXT_BOTH(i64, int64_t)
DEF_EXT_BOTH(b8, uint8_t)

typedef void (*row_fn)(const red_ctx *c, const red_row *w, int nt);
static const row_fn sum_rows[TN_DTYPE_COUNT] = {row_sum_f32, row_sum_f64, row_sum_i16,
                                                row_sum_i32, row_sum_i64, row_sum_b8};
static const row_fn max_rows[TN_DTYPE_COUNT] = {row_ext_max_f32, row_ext_max_f64, row_ext_max_i16,
                                                row_ext_max_i32, row_ext_max_i64, row_ext_max_b8};
static const row_fn min_rows[TN_DTYPE_COUNT] = {row_ext_min_f32, row_ext_min_f64, row_ext_min_i16,
                                                row_ext_min_i32, row_ext_min_i64, row_ext_min_b8};

/* ---- driver ------------------------------------------------------------------------- */

/* Pointers of row `row` of the iterator (one division per dim per row).
 * Operands: 0 the input, then the value output at kv and the index output
 * at kj (-1 when absent). */
static void row_at(const tn_iter *it, int kv, int kj, int64_t row, red_row *w) {
    char *p[TN_ITER_MAX_OPS];
    int d = it->ndim - 1;
    for (int k = 0; k < it->nops; k++)
        p[k] = it->base[k];
    for (int e = d - 1; e >= 0 && row; e--) {
        int64_t i = row % it->shape[e];
        row /= it->shape[e];
        for (int k = 0; k < it->nops; k++)
            p[k] += i * it->stride[k][e];
    }
    w->n = it->shape[d];
    w->pi = p[0];
    w->si = it->stride[0][d];
    w->pv = kv > 0 ? p[kv] : NULL;
    w->sv = kv > 0 ? it->stride[kv][d] : 0;
    w->pj = kj > 0 ? p[kj] : NULL;
    w->sj = kj > 0 ? it->stride[kj][d] : 0;
}

tn_status tn__cpu_reduce(int dev, const tn_red_args *a) {
    (void)dev;
    if (!a->vals && !a->idx) return TN_OK; /* nothing asked for */
    /* Whole (contiguous) input: one slice of numel elements; 0-dim input:
     * one slice of one element. */
    int nd = a->dim < 0 || a->ndim == 0 ? 1 : a->ndim, dim = a->dim;
    int64_t shape[TN_MAX_DIMS], stride[3][TN_MAX_DIMS];
    if (a->dim < 0 || a->ndim == 0) {
        shape[0] = tn__numel(a->ndim, a->shape);
        stride[0][0] = 1;
        dim = 0;
    } else {
        memcpy(shape, a->shape, (size_t)nd * sizeof *shape);
        memcpy(stride[0], a->stride, (size_t)nd * sizeof *stride[0]);
    }
    tn_dtype vdt = a->op == TN_RED_SUM && !tn__is_float(a->dtype) ? TN_I64 : a->dtype;
    int64_t es = (int64_t)tn__dtype_sizes[a->dtype], vs = (int64_t)tn__dtype_sizes[vdt];
    red_ctx c = {shape[dim], stride[0][dim] * es, a->div};
    shape[dim] = 1;
    int64_t nout = tn__numel(nd, shape);
    if (nout == 0 || c.R == 0) return TN_OK; /* never: the dispatcher handles empty inputs */
    /* Operand strides in bytes; the outputs are contiguous with `dim`
     * dropped, i.e. row-major over the kept shape. */
    char *base[3] = {(char *)a->in};
    int nops = 1, kv = -1, kj = -1;
    if (a->vals) base[kv = nops++] = a->vals;
    if (a->idx) base[kj = nops++] = (char *)a->idx;
    int64_t out = 1;
    for (int d = nd - 1; d >= 0; d--) {
        stride[0][d] *= es;
        if (kv > 0) stride[kv][d] = out * vs;
        if (kj > 0) stride[kj][d] = out * 8;
        out *= shape[d];
    }
    tn_iter it;
    tn__iter_build(&it, nops, nd, shape, (const int64_t(*)[TN_MAX_DIMS])stride, base);
    row_fn fn = a->op == TN_RED_SUM   ? sum_rows[a->dtype]
                : a->op == TN_RED_MAX ? max_rows[a->dtype]
                                      : min_rows[a->dtype];
    int64_t rows = nout / it.shape[it.ndim - 1];
    int nt = tn__threads_for(nout * c.R);
    if (nt > 1 && rows >= nt) {
#pragma omp parallel num_threads(nt)
        {
            TN_OMP_SPAN("reduce rows");
#pragma omp for schedule(static) nowait
            for (int t = 0; t < nt; t++) {
                for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; r++) {
                    red_row w;
                    row_at(&it, kv, kj, r, &w);
                    fn(&c, &w, 1);
                }
            }
        }
        return TN_OK;
    }
    for (int64_t r = 0; r < rows; r++) {
        red_row w;
        row_at(&it, kv, kj, r, &w);
        fn(&c, &w, nt);
    }
    return TN_OK;
}
