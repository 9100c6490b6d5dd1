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

/* Line L along dim: its length m, the strides along dim of idx, src and
 * out, its indices, and its first elements in src and out (elements). */
typedef struct line {
    int64_t m, is, ss, os;
    const int64_t *ix;
    int64_t so, oo;
} line;
static inline line line_of(const tn_index_args *a, int64_t L) {
    int64_t off[3];
    line_offsets(a, L, off);
    const int d = a->dim;
    return (line){.m = a->shape[d],
                  .is = a->istride[d],
                  .ss = a->sstride[d],
                  .os = a->ostride[d],
                  .ix = a->idx + off[0],
                  .so = off[1],
                  .oo = off[2]};
}

/* ---- the kernels: ROWS_ADD and SCATTER_ADD of each dtype (index_impl.h),
 * GATHER of each element width (gather_impl.h) ---- */

#define TN_IMPL "index_impl.h"
#define TN_EACH TN_EACH_DTYPE
#include "each_dtype.h"
#define TN_IMPL "gather_impl.h"
#include "each_width.h"

typedef void (*rows_add_fn)(const tn_index_args *, int64_t, int64_t);
typedef void (*line_fn)(const tn_index_args *, int64_t);
#define ROWS_ADD_AT(ID, CT, S) [ID] = rows_add_##S,
#define SCATTER_ADD_AT(ID, CT, S) [ID] = scatter_add_##S,
#define GATHER_AT(ID, CT, S) [ID] = TN_NAME(gather, TN_BITS(S)),
static const rows_add_fn ROWS_ADD[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(ROWS_ADD_AT)};
static const line_fn SCATTER_ADD[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(SCATTER_ADD_AT)};
static const line_fn GATHER[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(GATHER_AT)};

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
