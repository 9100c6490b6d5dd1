/* The CPU's indexing kernels: the backend table's `index` entry
 * (tn_index_args in engine/core/kernel_args.h) for embedding, index_select,
 * gather, scatter_add and their backward. The indices were checked by the
 * op. Each thread owns the output elements it writes, and every output
 * element receives its terms in index order, so the sums are exact,
 * race-free and the same for any thread count (no atomics):
 *  - ROWS: a thread copies whole rows (memcpy);
 *  - ROWS_ADD: a thread owns a range of destination rows and scans all the
 *    indices in order, adding the source rows that land in its range;
 *  - GATHER / SCATTER_ADD: a thread owns whole lines along `dim` (every
 *    coordinate but dim fixed); all the writes of a line stay in it.
 */
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define ADD_NUM(d, s) ((d) + (s))
#define ADD_BOOL(d, s) ((d) | (s))

/* ---- ROWS: out (outer, n, inner)[o, j] = src (outer, size, inner)[o, idx[j]] ---- */

static void rows(const tn_index_args *a) {
    size_t row = (size_t)a->inner * tn__dtype_sizes[a->dtype];
    int64_t total = a->outer * a->n;
    const char *src = a->src;
    char *out = a->out;
    int nt = tn__threads_for(total * a->inner);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("index rows");
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < total; r++) {
            int64_t o = r / a->n, j = r % a->n;
            memcpy(out + (size_t)r * row, src + (size_t)(o * a->size + a->idx[j]) * row, row);
        }
    }
}

/* ---- ROWS_ADD: out (outer, size, inner)[o, idx[j]] += src (outer, n, inner)[o, j] ---- */

/* Destination rows [r0, r1) of the flattened (outer * size) rows: for each
 * outer index they span, the indices in order, adding those in range. */
#define DEFINE_ROWS_ADD(SUF, T, ADD)                                                               \
    static void rows_add_##SUF(const tn_index_args *a, int64_t r0, int64_t r1) {                   \
        T *out = a->out;                                                                           \
        const T *src = a->src;                                                                     \
        const int64_t in = a->inner;                                                               \
        for (int64_t o = r0 / a->size; o < a->outer && o * a->size < r1; o++) {                    \
            int64_t lo = r0 - o * a->size, hi = r1 - o * a->size;                                  \
            for (int64_t j = 0; j < a->n; j++) {                                                   \
                int64_t r = a->idx[j];                                                             \
                if (r < lo || r >= hi) continue;                                                   \
                T *restrict d = out + (o * a->size + r) * in;                                      \
                const T *restrict s = src + (o * a->n + j) * in;                                   \
                for (int64_t i = 0; i < in; i++)                                                   \
                    d[i] = (T)ADD(d[i], s[i]);                                                     \
            }                                                                                      \
        }                                                                                          \
    }

/* ---- GATHER / SCATTER_ADD: lines along dim over the index's shape ---- */

/* First elements of line L (every coordinate but dim; row-major over the
 * other dims) in idx, src and out. */
static void line_offsets(const tn_index_args *a, int64_t L, int64_t off[3]) {
    off[0] = off[1] = off[2] = 0;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (d == a->dim) continue;
        int64_t c = L % a->shape[d];
        L /= a->shape[d];
        off[0] += c * a->istride[d];
        off[1] += c * a->sstride[d];
        off[2] += c * a->ostride[d];
    }
}

/* A function over line L along dim: ix, s and o point at the line's first
 * elements of idx, src and out; STMT runs for j = 0..m-1 in order. */
#define DEFINE_LINE(NAME, T, STMT)                                                                 \
    static void NAME(const tn_index_args *a, int64_t L) {                                          \
        int64_t off[3], m = a->shape[a->dim];                                                      \
        line_offsets(a, L, off);                                                                   \
        const int64_t is = a->istride[a->dim], ss = a->sstride[a->dim], os = a->ostride[a->dim];   \
        const int64_t *ix = a->idx + off[0];                                                       \
        const T *s = (const T *)a->src + off[1];                                                   \
        T *o = (T *)a->out + off[2];                                                               \
        for (int64_t j = 0; j < m; j++) {                                                          \
            STMT;                                                                                  \
        }                                                                                          \
    }

/* GATHER: out[p] = src[p with p[dim] = idx[p]]; by element width. */
#define DEFINE_GATHER(SUF, T) DEFINE_LINE(gather_##SUF, T, o[j * os] = s[ix[j * is] * ss])
DEFINE_GATHER(1, uint8_t)
DEFINE_GATHER(2, uint16_t)
DEFINE_GATHER(4, uint32_t)
DEFINE_GATHER(8, uint64_t)

/* SCATTER_ADD: out[p with p[dim] = idx[p]] += src[p], in the order of p[dim]. */
#define DEFINE_SCATTER_ADD(SUF, T, ADD)                                                            \
    DEFINE_LINE(scatter_add_##SUF, T, T *d = o + ix[j * is] * os; *d = (T)ADD(*d, s[j * ss]))

#define DEFINE_ADDS(SUF, T, ADD) DEFINE_ROWS_ADD(SUF, T, ADD) DEFINE_SCATTER_ADD(SUF, T, ADD)
DEFINE_ADDS(f32, float, ADD_NUM)
DEFINE_ADDS(f64, double, ADD_NUM)
DEFINE_ADDS(i16, int16_t, ADD_NUM)
DEFINE_ADDS(i32, int32_t, ADD_NUM)
DEFINE_ADDS(i64, int64_t, ADD_NUM)
DEFINE_ADDS(b8, uint8_t, ADD_BOOL)

typedef void (*rows_add_fn)(const tn_index_args *, int64_t, int64_t);
typedef void (*line_fn)(const tn_index_args *, int64_t);
static const rows_add_fn ROWS_ADD[TN_DTYPE_COUNT] = {rows_add_f32, rows_add_f64, rows_add_i16,
                                                     rows_add_i32, rows_add_i64, rows_add_b8};
static const line_fn SCATTER_ADD[TN_DTYPE_COUNT] = {scatter_add_f32, scatter_add_f64,
                                                    scatter_add_i16, scatter_add_i32,
                                                    scatter_add_i64, scatter_add_b8};
static const line_fn GATHER[TN_DTYPE_COUNT] = {gather_4, gather_8, gather_2,
                                               gather_4, gather_8, gather_1};

/* Destination rows split in equal contiguous ranges, one per thread. */
static void rows_add(const tn_index_args *a) {
    int64_t total = a->outer * a->size;
    int nt = tn__threads_for(a->outer * a->n * a->inner);
    if (nt > total) nt = (int)total;
    rows_add_fn f = ROWS_ADD[a->dtype];
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("index rows_add");
#ifdef _OPENMP
        int t = omp_get_thread_num(), T = omp_get_num_threads();
#else
        int t = 0, T = 1;
#endif
        f(a, total * t / T, total * (t + 1) / T);
    }
}

static void lines(const tn_index_args *a, line_fn f) {
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        if (d != a->dim) n *= a->shape[d];
    int nt = tn__threads_for(n * a->shape[a->dim]);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("index lines");
#pragma omp for schedule(static) nowait
        for (int64_t L = 0; L < n; L++)
            f(a, L);
    }
}

tn_status tn__cpu_index(int dev, const tn_index_args *a) {
    (void)dev;
    if ((unsigned)a->dtype >= TN_DTYPE_COUNT)
        return tn__error(TN_ERR_DTYPE, "index: no CPU kernel for dtype %d", (int)a->dtype);
    switch (a->mode) {
    case TN_IX_ROWS:
        if (a->outer * a->n * a->inner > 0) rows(a);
        return TN_OK;
    case TN_IX_ROWS_ADD:
        if (a->outer * a->n * a->inner > 0) rows_add(a);
        return TN_OK;
    case TN_IX_GATHER:
    case TN_IX_SCATTER_ADD:
        for (int d = 0; d < a->ndim; d++)
            if (a->shape[d] == 0) return TN_OK;
        lines(a, a->mode == TN_IX_GATHER ? GATHER[a->dtype] : SCATTER_ADD[a->dtype]);
        return TN_OK;
    default:
        return tn__error(TN_ERR_INVALID_ARGUMENT, "index: unknown mode %d", a->mode);
    }
}
