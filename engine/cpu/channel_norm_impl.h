/* engine/cpu/channel_norm_impl.h — the chunk loops of batch norm and group norm for one float
 * dtype, included by channel_norm_kernels.c once per dtype with SUF defined. Each walks one
 * contiguous chunk of a plane: sums in double (OpenMP SIMD reductions, whose order the build's
 * vector width fixes, never the thread count), and the pointwise passes in double, rounded once.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* sum(x) (m NaN) or sum((x - m)^2) */
static double F(cn_sum)(const void *xv, int64_t n, double m) {
    const T *x = xv;
    double s = 0;
    if (m != m) {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++)
            s += (double)x[j];
    } else {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) {
            double d = (double)x[j] - m;
            s += d * d;
        }
    }
    return s;
}

/* out[0] = sum(dy), out[1] = sum(dy (x - m)) */
static void F(cn_dots)(const void *dyv, const void *xv, int64_t n, double m, double out[2]) {
    const T *dy = dyv, *x = xv;
    double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
    for (int64_t j = 0; j < n; j++) {
        s1 += (double)dy[j];
        s2 += (double)dy[j] * ((double)x[j] - m);
    }
    out[0] = s1;
    out[1] = s2;
}

/* out = (x - m) a + b + g c (g NULL: no third term): the forward's y (a = rstd weight, b =
 * bias) and the backward's dx (g = dy) */
static void F(cn_affine)(void *outv, const void *xv, const void *gv, int64_t n, double m, double a,
                         double b, double c) {
    T *out = outv;
    const T *x = xv, *g = gv;
    if (g) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            out[j] = (T)(((double)x[j] - m) * a + b + (double)g[j] * c);
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            out[j] = (T)(((double)x[j] - m) * a + b);
    }
}

#undef T
#undef F
#undef SUF
