/* The CPU's copy and fill kernels (backend.h's copy and fill entries): every
 * dtype pair, contiguous, broadcast, transposed and strided rows. The loops
 * into each dtype are copy_impl.h's. */
#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define TN_IMPL "copy_impl.h"
#define TN_EACH TN_EACH_DTYPE
#include "each_dtype.h"

/* copy_loops[dst][src] */
#define COPY_ROW(ID, CT, S) [ID] = copy_from_##S,
static const tn_loop_fn *const copy_loops[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(COPY_ROW)};
#define FILL_AT(ID, CT, S) [ID] = fill_##S,
static const tn_loop_fn fill_loops[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(FILL_AT)};

tn_status tn__cpu_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it) {
    (void)dev;
    tn__iter_run(it, copy_loops[dst][src], NULL);
    return TN_OK;
}

tn_status tn__cpu_fill(int dev, tn_dtype dt, const tn_iter *it, double v) {
    (void)dev;
    tn__iter_run(it, fill_loops[dt], &v);
    return TN_OK;
}
