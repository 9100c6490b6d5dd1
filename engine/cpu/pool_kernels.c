/* The CPU's pooling kernels: the backend table's `pool` entry (tn_pool_args
 * in engine/core/kernel_args.h), max and average pooling over sliding or
 * adaptive windows, forward and backward. Threads own whole planes (an image's
 * channel, input and output), so every sum runs in one fixed order whatever
 * the thread count. The kernels of one dtype are pool_impl.h's, included for
 * float32 and float64 (the device layer runs the halves on float32 copies,
 * engine/core/widen.h).
 */
#include <math.h>
#include <string.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define TN_IMPL "pool_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

typedef void (*pool_plane_fn)(const tn_pool_args *a, int64_t p);
/* [mode][adaptive] */
typedef struct pool_kernels {
    pool_plane_fn fn[TN_POOL_AVG_BWD + 1][2];
} pool_kernels;
#define POOL_KERNELS(ID, CT, S)                                                                    \
    [ID] = {{{max_fwd_##S, amax_fwd_##S},                                                          \
             {max_bwd_##S, max_bwd_##S},                                                           \
             {avg_fwd_##S, aavg_fwd_##S},                                                          \
             {avg_bwd_##S, aavg_bwd_##S}}},
static const pool_kernels kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(POOL_KERNELS)};

tn_status tn__cpu_pool(int dev, const tn_pool_args *a) {
    (void)dev;
    if (a->mode < 0 || a->mode > TN_POOL_AVG_BWD)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "pool: unknown mode %d", a->mode);
    pool_plane_fn fn = kernels[a->dtype].fn[a->mode][a->adaptive];
    if (!fn) return tn__error(TN_ERR_DTYPE, "pool: no CPU kernel for %s", tn_dtype_name(a->dtype));
    /* work: every output reads its window (the adaptive ones about h/oh x w/ow) */
    int64_t win = a->adaptive ? (a->h / (a->oh ? a->oh : 1) + 1) * (a->w / (a->ow ? a->ow : 1) + 1)
                              : a->kh * a->kw;
    int nt = tn__threads_for(a->planes * (a->oh * a->ow * win + a->h * a->w));
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("pool");
#pragma omp for schedule(static) nowait
        for (int64_t p = 0; p < a->planes; p++)
            fn(a, p);
    }
    return TN_OK;
}
