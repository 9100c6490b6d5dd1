/* The CPU's convolution kernels: the backend table's `conv` entry
 * (tn_conv_args in engine/core/kernel_args.h), im2col and col2im; the
 * products around them are the gemm entry's. im2col: threads own whole
 * column rows (image, channel, kernel offset). col2im: threads own whole
 * image channels and add their columns in a fixed order (kernel offsets,
 * then output positions), so the sums do not depend on the thread count.
 * The kernels of one dtype are conv_impl.h's, included per float dtype.
 */
#include <string.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define TN_IMPL "conv_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

typedef struct conv_kernels {
    void (*im2col_row)(const tn_conv_args *a, int64_t b, int64_t r);
    void (*col2im_channel)(const tn_conv_args *a, int64_t b, int64_t ci);
} conv_kernels;
#define CONV_KERNELS(ID, CT, S) [ID] = {im2col_row_##S, col2im_channel_##S},
static const conv_kernels kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(CONV_KERNELS)};

tn_status tn__cpu_conv(int dev, const tn_conv_args *a) {
    (void)dev;
    const conv_kernels *kr = &kernels[a->dtype];
    if (!kr->im2col_row)
        return tn__error(TN_ERR_DTYPE, "conv: no CPU kernel for %s", tn_dtype_name(a->dtype));
    bool fwd = a->mode == TN_CONV_IM2COL;
    /* tasks: (image, column row) for im2col, (image, channel) for col2im */
    int64_t per = fwd ? a->c * a->kh * a->kw : a->c, tasks = a->nb * per;
    int nt = tn__threads_for(a->nb * a->c * a->kh * a->kw * a->oh * a->ow);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN(fwd ? "im2col" : "col2im");
#pragma omp for schedule(static) nowait
        for (int64_t t = 0; t < tasks; t++) {
            int64_t b = t / per, r = t % per;
            if (fwd)
                kr->im2col_row(a, b, r);
            else
                kr->col2im_channel(a, b, r);
        }
    }
    return TN_OK;
}
