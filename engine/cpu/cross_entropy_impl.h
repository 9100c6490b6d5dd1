/* engine/cpu/cross_entropy_impl.h — the cross-entropy kernels of one float
 * dtype, included by cross_entropy_kernels.c once per dtype with SUF
 * defined: ce_fwd_SUF and ce_bwd_SUF.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* Rows of c logits: stats[2i] = max, stats[2i+1] = log(sum exp(x - max));
 * part[i] = log-probability of the row's target (0 for ignored rows). */
static void F(ce_fwd)(const void *xv, int64_t n, int64_t c, const int64_t *t, int64_t ign,
                      void *statsv, double *part) {
    const T *x = xv;
    T *stats = statsv;
    int nt = tn__threads_for(n * c);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("cross_entropy");
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < n; i++) {
            const T *r = x + i * c;
            T m = r[0], s = 0;
            for (int64_t j = 1; j < c; j++)
                m = r[j] > m || r[j] != r[j] ? r[j] : m;
            for (int64_t j = 0; j < c; j++)
                s += TN_M(exp, r[j] - m);
            T ls = TN_M(log, s);
            stats[2 * i] = m, stats[2 * i + 1] = ls;
            part[i] = t[i] == ign ? 0 : (double)((r[t[i]] - m) - ls);
        }
    }
}

/* gx = S (onehot) - exp(lp) S with S = -g/count as T, lp = (x - m) - log_s:
 * log_softmax's backward of nll's gradient, in the same arithmetic. */
static void F(ce_bwd)(const void *xv, int64_t n, int64_t c, const int64_t *t, int64_t ign,
                      const void *statsv, double scale, void *gxv) {
    const T *x = xv, *stats = statsv;
    T *gx = gxv;
    int nt = tn__threads_for(n * c);
    (void)nt;
    const T S = (T)scale;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("cross_entropy backward");
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < n; i++) {
            const T *r = x + i * c;
            T *o = gx + i * c;
            if (t[i] == ign) {
                for (int64_t j = 0; j < c; j++)
                    o[j] = 0;
                continue;
            }
            const T m = stats[2 * i], ls = stats[2 * i + 1];
            for (int64_t j = 0; j < c; j++)
                o[j] = (j == t[i] ? S : (T)0) - TN_M(exp, (r[j] - m) - ls) * S;
        }
    }
}

#undef T
#undef F
#undef SUF
