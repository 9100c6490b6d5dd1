/* The CPU's copy and fill kernels (backend.h's copy and fill entries): every
 * dtype pair, contiguous, broadcast, transposed and strided rows. The loops
 * into each dtype are copy_impl.h's; float32 to and from the half dtypes
 * takes half_rows.h's vector rows where a row is contiguous. */
#include "cpu_backend.h"
#include "dtype_dispatch.h"
#include "half_rows.h"

#define TN_IMPL "copy_impl.h"
#define TN_EACH TN_EACH_DTYPE
#include "each_dtype.h"

/* copy_loops[dst][src] */
#define COPY_ROW(ID, CT, S) [ID] = copy_from_##S,
static const tn_loop_fn *const copy_loops[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(COPY_ROW)};
#define FILL_AT(ID, CT, S) [ID] = fill_##S,
static const tn_loop_fn fill_loops[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(FILL_AT)};

/* float32 from a half dtype (ctx: the half dtype) and back (narrow_loop): contiguous rows in
 * vectors (half_rows.h: F16C's conversions, bfloat16's on integer lanes), the bits of the
 * element loops, which take the other rows. */
static void widen_loop(void *ctx, int64_t n, char **p, const int64_t *s) {
    const tn_dtype dt = *(const tn_dtype *)ctx;
    if (s[0] == sizeof(float) && s[1] == sizeof(uint16_t))
        tn__widen_half_row(dt, (float *)p[0], (const uint16_t *)p[1], n);
    else
        copy_loops[TN_F32][dt](NULL, n, p, s);
}

static void narrow_loop(void *ctx, int64_t n, char **p, const int64_t *s) {
    const tn_dtype dt = *(const tn_dtype *)ctx;
    if (s[0] == sizeof(uint16_t) && s[1] == sizeof(float))
        tn__narrow_half_row(dt, (uint16_t *)p[0], (const float *)p[1], n);
    else
        copy_loops[dt][TN_F32](NULL, n, p, s);
}

tn_status tn__cpu_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it) {
    (void)dev;
    if (dst == TN_F32 && tn__is_half(src))
        tn__iter_run(it, widen_loop, &src);
    else if (tn__is_half(dst) && src == TN_F32)
        tn__iter_run(it, narrow_loop, &dst);
    else
        tn__iter_run(it, copy_loops[dst][src], NULL);
    return TN_OK;
}

tn_status tn__cpu_fill(int dev, tn_dtype dt, const tn_iter *it, double v) {
    (void)dev;
    tn__iter_run(it, fill_loops[dt], &v);
    return TN_OK;
}
