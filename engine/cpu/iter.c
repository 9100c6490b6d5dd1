/* The loop driver: broadcast strides, dim coalescing, row-wise OpenMP. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "iter.h"

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

/* Transposed operands: an input that steps a cache line or more along the
 * inner dim but is dense along another (x.T) makes a row-by-row walk touch a
 * new line, often a new page, per element. Instead rows of TILE_A elements
 * are walked for TILE_B consecutive indices of that other dim, so each input
 * line is used fully while it is in L1, and each output row piece is one
 * 64-byte line of float32. (A contiguous copy of an 8192x8192 float32 x.T:
 * ~730 ms row by row, ~100 ms tiled on the 2-core dev VM; PyTorch ~800 ms.)
 * Only when every output element is written once (no stride 0 in operand
 * 0), so the order is free. */
#define TILE_A 16
#define TILE_B 64

static int64_t iabs64(int64_t x) { return x < 0 ? -x : x; }

/* The dim to tile with the inner one, or -1 for the plain walk. */
static int tile_dim(const tn_iter *it) {
    int in = it->ndim - 1;
    if (it->ndim < 2 || it->shape[in] < TILE_A) return -1;
    for (int d = 0; d <= in; d++)
        if (it->stride[0][d] == 0) return -1;
    for (int k = 1; k < it->nops; k++) {
        int64_t si = iabs64(it->stride[k][in]);
        int best = -1;
        for (int d = 0; d < in && si >= TN_CACHELINE; d++) {
            int64_t sd = iabs64(it->stride[k][d]);
            if (sd && sd < si && it->shape[d] >= 8 &&
                (best < 0 || sd < iabs64(it->stride[k][best])))
                best = d;
        }
        if (best >= 0) return best;
    }
    return -1;
}

/* Work unit u: rows b0..b0+TILE_B of dim jb, all of the inner dim, at one
 * index of the other dims (one division per dim per unit). */
static void run_tile_strip(const tn_iter *it, tn_loop_fn loop, void *ctx, int jb, int64_t u,
                           int64_t strips) {
    int in = it->ndim - 1, nops = it->nops;
    int64_t o = u / strips, b0 = (u % strips) * TILE_B, nb = it->shape[jb], na = it->shape[in];
    int64_t b1 = b0 + TILE_B < nb ? b0 + TILE_B : nb, s[TN_ITER_MAX_OPS];
    char *p[TN_ITER_MAX_OPS], *q[TN_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) p[k] = it->base[k], s[k] = it->stride[k][in];
    for (int d = in - 1; d >= 0 && o; d--) {
        if (d == jb) continue;
        int64_t i = o % it->shape[d];
        o /= it->shape[d];
        for (int k = 0; k < nops; k++) p[k] += i * it->stride[k][d];
    }
    for (int64_t a0 = 0; a0 < na; a0 += TILE_A)
        for (int64_t b = b0; b < b1; b++) {
            for (int k = 0; k < nops; k++) q[k] = p[k] + b * it->stride[k][jb] + a0 * s[k];
            loop(ctx, na - a0 < TILE_A ? na - a0 : TILE_A, q, s);
        }
}

static void run_tiled(const tn_iter *it, tn_loop_fn loop, void *ctx, int jb, int nt) {
    int64_t nb = it->shape[jb], strips = (nb + TILE_B - 1) / TILE_B;
    int64_t units = it->numel / (it->shape[it->ndim - 1] * nb) * strips;
    if (nt <= 1 || units <= 1) { /* not even an if(0) region: that still costs ~1 us */
        for (int64_t u = 0; u < units; u++) run_tile_strip(it, loop, ctx, jb, u, strips);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        TN_OMP_SPAN("elementwise");
#pragma omp for schedule(static) nowait
        for (int64_t u = 0; u < units; u++) run_tile_strip(it, loop, ctx, jb, u, strips);
    }
}

static void iter_run(const tn_iter *it, tn_loop_fn loop, void *ctx, bool parallel) {
    if (it->numel == 0) return;
    int64_t inner = it->shape[it->ndim - 1];
    int64_t rows = it->numel / inner;
    int nt = parallel ? tn__threads_for(it->numel) : 1;
    int jb = tile_dim(it);
    if (jb >= 0) {
        run_tiled(it, loop, ctx, jb, nt);
        return;
    }
    if (nt <= 1) {
        run_rows(it, loop, ctx, 0, rows);
        return;
    }
    if (rows >= nt) {
#pragma omp parallel num_threads(nt)
        {
            TN_OMP_SPAN("elementwise");
#pragma omp for schedule(static) nowait
            for (int t = 0; t < nt; t++)
                run_rows(it, loop, ctx, rows * t / nt, rows * (t + 1) / nt);
        }
        return;
    }
    /* Few long rows: split each row into nt chunks. */
    for (int64_t row = 0; row < rows; row++) {
        char *p0[TN_ITER_MAX_OPS];
        int64_t s[TN_ITER_MAX_OPS];
        row_ptrs(it, row, p0);
        for (int k = 0; k < it->nops; k++) s[k] = it->stride[k][it->ndim - 1];
#pragma omp parallel num_threads(nt)
        {
            TN_OMP_SPAN("elementwise");
#pragma omp for schedule(static) nowait
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
}

void tn__iter_run(const tn_iter *it, tn_loop_fn loop, void *ctx) {
    iter_run(it, loop, ctx, !it->serial);
}
