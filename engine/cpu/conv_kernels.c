/* The CPU's convolution kernels: the backend table's `conv` entry
 * (tn_conv_args in engine/core/kernel_args.h), im2col and col2im; the
 * products around them are the gemm entry's. im2col: threads own whole
 * column rows (image, channel, kernel offset). col2im: threads own whole
 * image channels and add their columns in a fixed order (kernel offsets,
 * then output positions), so the sums do not depend on the thread count.
 */
#include <string.h>

#include "cpu_backend.h"

/* The output columns x in [*lo, *hi) whose input column x0 + x*s lies in [0, w). */
static inline void in_range(int64_t x0, int64_t s, int64_t w, int64_t ow, int64_t *lo,
                            int64_t *hi) {
    int64_t a = x0 >= 0 ? 0 : (-x0 + s - 1) / s;    /* first x with x0 + x s >= 0 */
    int64_t b = x0 >= w ? 0 : (w - 1 - x0) / s + 1; /* first x with x0 + x s >= w */
    *lo = a < ow ? a : ow;
    *hi = b < *lo ? *lo : b < ow ? b : ow;
}

/* Column row r = (ci, i, j) of image b: col (oh, ow) reads im channel ci at
 * (y*sh - ph + i*dh, x*sw - pw + j*dw), 0 outside. The in-image span of a row
 * is a plain copy (stride 1: contiguous), the rest zeros. */
#define DEFINE_IM2COL_ROW(SUF, T)                                                                  \
    static void im2col_row_##SUF(const tn_conv_args *a, int64_t b, int64_t r) {                    \
        int64_t kk = a->kh * a->kw, ci = r / kk, i = r % kk / a->kw, j = r % a->kw;                \
        const T *im = (const T *)a->im + b * a->ims + ci * a->h * a->w;                            \
        T *col = (T *)a->col + b * a->cols + r * a->oh * a->ow;                                    \
        int64_t x0 = j * a->dw - a->pw, lo, hi;                                                    \
        in_range(x0, a->sw, a->w, a->ow, &lo, &hi);                                                \
        for (int64_t y = 0; y < a->oh; y++, col += a->ow) {                                        \
            int64_t iy = y * a->sh - a->ph + i * a->dh;                                            \
            if (iy < 0 || iy >= a->h || lo == hi) {                                                \
                memset(col, 0, (size_t)a->ow * sizeof(T));                                         \
                continue;                                                                          \
            }                                                                                      \
            const T *row = im + iy * a->w;                                                         \
            memset(col, 0, (size_t)lo * sizeof(T));                                                \
            if (a->sw == 1)                                                                        \
                memcpy(col + lo, row + x0 + lo, (size_t)(hi - lo) * sizeof(T));                    \
            else                                                                                   \
                for (int64_t x = lo; x < hi; x++)                                                  \
                    col[x] = row[x0 + x * a->sw];                                                  \
            memset(col + hi, 0, (size_t)(a->ow - hi) * sizeof(T));                                 \
        }                                                                                          \
    }

/* Image channel ci of image b = the sum of the columns that read it. */
#define DEFINE_COL2IM_CHANNEL(SUF, T)                                                              \
    static void col2im_channel_##SUF(const tn_conv_args *a, int64_t b, int64_t ci) {               \
        T *im = (T *)a->im + b * a->ims + ci * a->h * a->w;                                        \
        memset(im, 0, (size_t)(a->h * a->w) * sizeof(T));                                          \
        int64_t kk = a->kh * a->kw;                                                                \
        for (int64_t k = 0; k < kk; k++) {                                                         \
            int64_t i = k / a->kw, j = k % a->kw, x0 = j * a->dw - a->pw, lo, hi;                  \
            in_range(x0, a->sw, a->w, a->ow, &lo, &hi);                                            \
            const T *col = (const T *)a->col + b * a->cols + (ci * kk + k) * a->oh * a->ow;        \
            for (int64_t y = 0; y < a->oh; y++, col += a->ow) {                                    \
                int64_t iy = y * a->sh - a->ph + i * a->dh;                                        \
                if (iy < 0 || iy >= a->h) continue;                                                \
                T *row = im + iy * a->w;                                                           \
                for (int64_t x = lo; x < hi; x++)                                                  \
                    row[x0 + x * a->sw] += col[x];                                                 \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_IM2COL_ROW(f32, float)
DEFINE_IM2COL_ROW(f64, double)
DEFINE_COL2IM_CHANNEL(f32, float)
DEFINE_COL2IM_CHANNEL(f64, double)

tn_status tn__cpu_conv(int dev, const tn_conv_args *a) {
    (void)dev;
    if (a->dtype != TN_F32 && a->dtype != TN_F64)
        return tn__error(TN_ERR_DTYPE, "conv: no CPU kernel for %s", tn_dtype_name(a->dtype));
    bool f32 = a->dtype == TN_F32, fwd = a->mode == TN_CONV_IM2COL;
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
            if (fwd && f32)
                im2col_row_f32(a, b, r);
            else if (fwd)
                im2col_row_f64(a, b, r);
            else if (f32)
                col2im_channel_f32(a, b, r);
            else
                col2im_channel_f64(a, b, r);
        }
    }
    return TN_OK;
}
