/* engine/cpu/conv_impl.h — convolution's column kernels of one float dtype, included by
 * conv_kernels.c once per dtype with SUF defined: im2col_row_SUF and col2im_channel_SUF.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* Column row r = (ci, i, j) of image b: col (oh, ow) reads im channel ci at
 * (y*sh - ph + i*dh, x*sw - pw + j*dw), 0 outside. The in-image span of a row
 * is a plain copy (stride 1: contiguous), the rest zeros. A row is short (28
 * elements for a 28x28 image, the padding 0 or 1 of them): plain loops, which
 * GCC vectorises, and not memset/memcpy, whose calls cost more than the copy
 * (no-tree-loop-distribute-patterns keeps GCC from turning the loops back into
 * those calls). */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void
F(im2col_row)(const tn_conv_args *a, int64_t b, int64_t r) {
    int64_t kk = a->kh * a->kw, ci = r / kk, i = r % kk / a->kw, j = r % a->kw;
    const T *im = (const T *)a->im + b * a->ims + ci * a->h * a->w;
    T *restrict col = (T *)a->col + b * a->cols + r * a->oh * a->ow;
    const int64_t ow = a->ow, sw = a->sw;
    int64_t x0 = j * a->dw - a->pw, lo, hi;
    tn__window_range(x0, sw, a->w, ow, &lo, &hi);
    for (int64_t y = 0; y < a->oh; y++, col += ow) {
        int64_t iy = y * a->sh - a->ph + i * a->dh;
        if (iy < 0 || iy >= a->h || lo == hi) {
            for (int64_t x = 0; x < ow; x++)
                col[x] = 0;
            continue;
        }
        const T *restrict row = im + iy * a->w + x0;
        for (int64_t x = 0; x < lo; x++)
            col[x] = 0;
        if (sw == 1)
            for (int64_t x = lo; x < hi; x++)
                col[x] = row[x];
        else
            for (int64_t x = lo; x < hi; x++)
                col[x] = row[x * sw];
        for (int64_t x = hi; x < ow; x++)
            col[x] = 0;
    }
}

/* Image channel ci of image b = the sum of the columns that read it, taps in order. */
static void F(col2im_channel)(const tn_conv_args *a, int64_t b, int64_t ci) {
    T *im = (T *)a->im + b * a->ims + ci * a->h * a->w;
    memset(im, 0, (size_t)(a->h * a->w) * sizeof(T));
    int64_t kk = a->kh * a->kw;
    for (int64_t k = 0; k < kk; k++) {
        int64_t i = k / a->kw, j = k % a->kw, x0 = j * a->dw - a->pw, lo, hi;
        tn__window_range(x0, a->sw, a->w, a->ow, &lo, &hi);
        const T *col = (const T *)a->col + b * a->cols + (ci * kk + k) * a->oh * a->ow;
        for (int64_t y = 0; y < a->oh; y++, col += a->ow) {
            int64_t iy = y * a->sh - a->ph + i * a->dh;
            if (iy < 0 || iy >= a->h) continue;
            T *row = im + iy * a->w;
            for (int64_t x = lo; x < hi; x++)
                row[x0 + x * a->sw] += col[x];
        }
    }
}

#undef T
#undef F
#undef SUF
