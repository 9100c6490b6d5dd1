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
#include "dtype_dispatch.h"

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

/* ---- the kernels of each dtype: reduce_impl.h (sum), reduce_ext_impl.h (max, min) ---- */

#define TN_IMPL "reduce_impl.h"
#define TN_EACH TN_EACH_DTYPE
#include "each_dtype.h"

typedef void (*row_fn)(const red_ctx *c, const red_row *w, int nt);
#define SUM_ROW(ID, CT, S) [ID] = row_sum_##S,
#define MAX_ROW(ID, CT, S) [ID] = row_ext_max_##S,
#define MIN_ROW(ID, CT, S) [ID] = row_ext_min_##S,
static const row_fn sum_rows[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(SUM_ROW)};
static const row_fn max_rows[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(MAX_ROW)};
static const row_fn min_rows[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(MIN_ROW)};

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
