/* The CPU's grad_stats (engine/core/backend.h): for each of up to
 * TN_GRAD_STATS_MAX contiguous float tensors, the sum of squares and the
 * largest |value|, in float64, written to out (host memory). Used by the
 * gradient monitor and by clip_grad_norm_.
 *
 * A tensor is cut into blocks fixed by its size alone (STATS_BLOCK elements,
 * at most STATS_MAX_BLOCKS); each block is one simd reduction, whose lane
 * order is set by the build's vector width; the blocks of every tensor are
 * shared out among the threads and folded in block order. So the bits are
 * the same for any thread count. A NaN makes the maximum NaN (and the sum). */
#include <math.h>
#include <string.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

enum { STATS_BLOCK = 1 << 15, STATS_MAX_BLOCKS = 64 };

#define TN_IMPL "grad_stats_impl.h"
#define TN_EACH TN_EACH_FLOAT
#include "each_dtype.h"

typedef void (*scan_fn)(const void *p, int64_t lo, int64_t n, double *sq, double *mx);
#define SCAN(ID, CT, S) [ID] = scan_v_##S,
static const scan_fn scans[TN_DTYPE_COUNT] = {TN_FOR_EACH_FLOAT(SCAN)};

static int64_t blocks_of(int64_t n) {
    int64_t b = (n + STATS_BLOCK - 1) / STATS_BLOCK;
    return b < 1 ? 1 : b > STATS_MAX_BLOCKS ? STATS_MAX_BLOCKS : b;
}

tn_status tn__cpu_grad_stats(int dev, tn_dtype dt, int count, const void *const *p,
                             const int64_t *n, double *out) {
    (void)dev;
    scan_fn scan = (unsigned)dt < TN_DTYPE_COUNT ? scans[dt] : NULL;
    if (!scan)
        return tn__error(TN_ERR_DTYPE, "grad_stats: %s is not a float dtype", tn_dtype_name(dt));
    if (count < 0 || count > TN_GRAD_STATS_MAX || (count > 0 && (!p || !n || !out)))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "grad_stats: bad arguments (count %d)", count);
    if (count == 0) return TN_OK;
    /* block g of the lot belongs to tensor k with first[k] <= g < first[k + 1] */
    int64_t first[TN_GRAD_STATS_MAX + 1], elems = 0;
    first[0] = 0;
    for (int k = 0; k < count; k++) {
        first[k + 1] = first[k] + blocks_of(n[k]);
        elems += n[k];
    }
    double part[TN_GRAD_STATS_MAX * STATS_MAX_BLOCKS][2];
    const int64_t total = first[count];
    const int nt = tn__threads_for(elems);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("grad_stats");
#pragma omp for schedule(static) nowait
        for (int64_t g = 0; g < total; g++) {
            int k = 0;
            while (g >= first[k + 1])
                k++;
            const int64_t b = g - first[k], nb = first[k + 1] - first[k];
            const int64_t lo = n[k] * b / nb, hi = n[k] * (b + 1) / nb;
            scan(p[k], lo, hi - lo, &part[g][0], &part[g][1]);
        }
    }
    for (int k = 0; k < count; k++) {
        double s = 0, m = 0;
        for (int64_t g = first[k]; g < first[k + 1]; g++) {
            s += part[g][0];
            m = part[g][1] > m || isnan(part[g][1]) ? part[g][1] : m;
        }
        out[2 * k] = s;
        out[2 * k + 1] = m;
    }
    return TN_OK;
}
