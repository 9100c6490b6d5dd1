/* engine/cpu/layer_norm_impl.h — the layer-norm row kernels of one float
 * dtype, included by layer_norm_kernels.c once per dtype with SUF defined:
 * ln_fwd_row_SUF, ln_dx_row_SUF and ln_partial_SUF (and their row sums).
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* Row sums in double: sum(x), sum((x - m)^2), and sum(dy w), sum(dy w x). */
static double F(row_sum)(const T *x, int64_t n) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++)
        s += (double)x[j];
    return s;
}
static double F(row_sqdev)(const T *x, int64_t n, double m) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++) {
        double d = (double)x[j] - m;
        s += d * d;
    }
    return s;
}
/* *s1 = sum(dy w), *s2 = sum(dy w x) (w NULL: 1). GCC does not vectorise the lanes
 * form of two sums with conversions: an OpenMP SIMD reduction, whose order is fixed by
 * the build (the vector width), not by the thread count. */
static void F(row_dots)(const T *dy, const T *w, const T *x, int64_t n, double *s1, double *s2) {
    double a1 = 0, a2 = 0;
    if (w) {
#pragma omp simd reduction(+ : a1, a2)
        for (int64_t j = 0; j < n; j++) {
            double g = (double)dy[j] * (double)w[j];
            a1 += g;
            a2 += g * (double)x[j];
        }
    } else {
#pragma omp simd reduction(+ : a1, a2)
        for (int64_t j = 0; j < n; j++) {
            a1 += (double)dy[j];
            a2 += (double)dy[j] * (double)x[j];
        }
    }
    *s1 = a1;
    *s2 = a2;
}

/* Forward of one row: statistics, then y = (x - mean) rstd w + b in double,
 * rounded once (PyTorch's float32 arithmetic, x rstd - mean rstd, loses up to
 * a few ulp to cancellation; this is within its rounding). */
static void F(ln_fwd_row)(const tn_ln_args *a, int64_t r) {
    int64_t n = a->cols;
    const T *x = (const T *)a->x + r * n, *w = a->weight, *b = a->bias;
    T *y = (T *)a->y + r * n;
    double m = F(row_sum)(x, n) / (double)n;
    double var = F(row_sqdev)(x, n, m) / (double)n;
    double rs = 1.0 / sqrt(var + a->eps);
    ((T *)a->mean)[r] = (T)m;
    ((T *)a->rstd)[r] = (T)rs;
    if (w && b)
        for (int64_t j = 0; j < n; j++)
            y[j] = (T)(((double)x[j] - m) * rs * (double)w[j] + (double)b[j]);
    else if (w)
        for (int64_t j = 0; j < n; j++)
            y[j] = (T)(((double)x[j] - m) * rs * (double)w[j]);
    else if (b)
        for (int64_t j = 0; j < n; j++)
            y[j] = (T)(((double)x[j] - m) * rs + (double)b[j]);
    else
        for (int64_t j = 0; j < n; j++)
            y[j] = (T)(((double)x[j] - m) * rs);
}

/* dx of one row from the saved statistics: rstd (dy w - mean(dy w) -
 * xhat mean(dy w xhat)) with xhat = (x - mean) rstd, in double. */
static void F(ln_dx_row)(const tn_ln_args *a, int64_t r) {
    int64_t n = a->cols;
    const T *x = (const T *)a->x + r * n, *dy = (const T *)a->dy + r * n, *w = a->weight;
    T *dx = (T *)a->dx + r * n;
    double m = (double)((const T *)a->mean)[r], rs = (double)((const T *)a->rstd)[r];
    double db, ds;
    F(row_dots)(dy, w, x, n, &db, &ds);
    /* sum(dy w xhat) = (ds - m db) rs */
    double mg = db / (double)n, mgx = (ds - m * db) * rs / (double)n;
    if (w)
        for (int64_t j = 0; j < n; j++)
            dx[j] = (T)(rs * ((double)dy[j] * (double)w[j] - mg - ((double)x[j] - m) * rs * mgx));
    else
        for (int64_t j = 0; j < n; j++)
            dx[j] = (T)(rs * ((double)dy[j] - mg - ((double)x[j] - m) * rs * mgx));
}

/* Adds one row's terms to the partial sums of dweight (pw) and dbias (pb). */
static void F(ln_partial)(const tn_ln_args *a, int64_t r, double *pw, double *pb) {
    int64_t n = a->cols;
    const T *x = (const T *)a->x + r * n, *dy = (const T *)a->dy + r * n;
    double m = (double)((const T *)a->mean)[r], rs = (double)((const T *)a->rstd)[r];
    for (int64_t j = 0; j < n; j++) {
        pw[j] += (double)dy[j] * (((double)x[j] - m) * rs);
        pb[j] += (double)dy[j];
    }
}

/* Backward rows [r0, r1) of one block: each row's dx (when asked) and its
 * terms of the block's partial sums pw, pb (NULL: none). */
static void F(ln_bwd_rows)(const tn_ln_args *a, int64_t r0, int64_t r1, double *pw, double *pb) {
    for (int64_t r = r0; r < r1; r++) {
        if (a->dx) F(ln_dx_row)(a, r);
        if (pw) F(ln_partial)(a, r, pw, pb);
    }
}

#undef T
#undef F
#undef SUF
