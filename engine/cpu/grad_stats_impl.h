/* engine/cpu/grad_stats_impl.h — the block scan of one float dtype,
 * included by grad_stats_kernels.c once per dtype with SUF defined: scan_SUF,
 * and scan_v_SUF for the table (untyped pointer, element offset).
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* sum of squares and max |value| of p[0, n), into *sq and *mx */
static void F(scan)(const T *p, int64_t n, double *sq, double *mx) {
    double a = 0, m = 0;
    int nan = 0;
#pragma omp simd reduction(+ : a) reduction(max : m) reduction(| : nan)
    for (int64_t i = 0; i < n; i++) {
        double d = (double)TN_LD(SUF, p[i]), av = d < 0 ? -d : d;
        a += d * d;
        m = av > m ? av : m;
        nan |= d != d;
    }
    *sq = a;
    *mx = nan ? (double)NAN : m;
}
static void F(scan_v)(const void *p, int64_t lo, int64_t n, double *sq, double *mx) {
    F(scan)((const T *)p + lo, n, sq, mx);
}

#undef T
#undef F
#undef SUF
