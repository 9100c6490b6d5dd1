/* The loop driver: broadcast strides, dim coalescing, row-wise OpenMP. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "iter.h"

void tn__iter_init(tn_iter *it, int nops, tn_tensor *const *ops) {
    const tn_tensor *out = ops[0];
    int nd = out->ndim;
    it->nops = nops;
    it->numel = tn__numel(nd, out->shape);
    int64_t shape[TN_MAX_DIMS + 1], stride[TN_ITER_MAX_OPS][TN_MAX_DIMS + 1];
    for (int d = 0; d < nd; d++) shape[d] = out->shape[d];
    for (int k = 0; k < nops; k++) {
        const tn_tensor *t = ops[k];
        int64_t es = (int64_t)tn__dtype_sizes[t->dtype];
        it->base[k] = tn__ptr(t);
        for (int d = 0; d < nd; d++) {
            int td = t->ndim - nd + d;
            stride[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td] * es;
        }
    }
    if (nd == 0) { /* a 0-dim tensor is one row of one element */
        shape[0] = 1;
        for (int k = 0; k < nops; k++) stride[k][0] = 0;
        nd = 1;
    }
    /* Drop size-1 dims, then merge dim d into d+1 when every operand is
     * contiguous across the pair (stride[d] == stride[d+1] * shape[d+1]). */
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1 && nd > 1) continue;
        if (n > 0) {
            bool merge = true;
            for (int k = 0; k < nops && merge; k++)
                merge = stride[k][n - 1] == stride[k][d] * shape[d];
            if (merge) {
                shape[n - 1] *= shape[d];
                for (int k = 0; k < nops; k++) stride[k][n - 1] = stride[k][d];
                continue;
            }
        }
        shape[n] = shape[d];
        for (int k = 0; k < nops; k++) stride[k][n] = stride[k][d];
        n++;
    }
    if (n == 0) {
        shape[0] = 1;
        for (int k = 0; k < nops; k++) stride[k][0] = 0;
        n = 1;
    }
    it->ndim = n;
    for (int d = 0; d < n; d++) {
        it->shape[d] = shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][d] = stride[k][d];
    }
}

/* Pointers of row `row` (outer linear index); one division per dim per row. */
static void row_ptrs(const tn_iter *it, int64_t row, char **p) {
    for (int k = 0; k < it->nops; k++) p[k] = it->base[k];
    for (int d = it->ndim - 2; d >= 0 && row; d--) {
        int64_t i = row % it->shape[d];
        row /= it->shape[d];
        for (int k = 0; k < it->nops; k++) p[k] += i * it->stride[k][d];
    }
}

static void run_rows(const tn_iter *it, tn_loop_fn loop, void *ctx, int64_t r0, int64_t r1) {
    int nd = it->ndim, nops = it->nops;
    int64_t inner = it->shape[nd - 1];
    int64_t s[TN_ITER_MAX_OPS], idx[TN_MAX_DIMS] = {0};
    char *p[TN_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) s[k] = it->stride[k][nd - 1];
    if (r0 >= r1) return;
    row_ptrs(it, r0, p);
    /* Outer index of r0, then odometer increments (no division per row). */
    int64_t r = r0;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = r % it->shape[d];
        r /= it->shape[d];
    }
    for (int64_t row = r0; row < r1; row++) {
        loop(ctx, inner, p, s);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < it->shape[d]) {
                for (int k = 0; k < nops; k++) p[k] += it->stride[k][d];
                break;
            }
            idx[d] = 0;
            for (int k = 0; k < nops; k++) p[k] -= (it->shape[d] - 1) * it->stride[k][d];
        }
    }
}

void tn__iter_run(const tn_iter *it, tn_loop_fn loop, void *ctx, bool parallel) {
    if (it->numel == 0) return;
    int64_t inner = it->shape[it->ndim - 1];
    int64_t rows = it->numel / inner;
    int nt = parallel ? tn__threads_for(it->numel) : 1;
    if (nt <= 1) {
        run_rows(it, loop, ctx, 0, rows);
        return;
    }
    if (rows >= nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int t = 0; t < nt; t++) run_rows(it, loop, ctx, rows * t / nt, rows * (t + 1) / nt);
        return;
    }
    /* Few long rows: split each row into nt chunks. */
    for (int64_t row = 0; row < rows; row++) {
        char *p0[TN_ITER_MAX_OPS];
        int64_t s[TN_ITER_MAX_OPS];
        row_ptrs(it, row, p0);
        for (int k = 0; k < it->nops; k++) s[k] = it->stride[k][it->ndim - 1];
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int t = 0; t < nt; t++) {
            int64_t a = inner * t / nt, b = inner * (t + 1) / nt;
            /* chunk starts aligned to 16 elements keep vector loads aligned */
            if (t > 0) a &= ~(int64_t)15;
            if (t < nt - 1) b &= ~(int64_t)15;
            char *p[TN_ITER_MAX_OPS];
            for (int k = 0; k < it->nops; k++) p[k] = p0[k] + a * s[k];
            if (b > a) loop(ctx, b - a, p, s);
        }
    }
}
