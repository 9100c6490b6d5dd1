/* engine/cpu/softmax_impl.h — the softmax row kernel of one float dtype,
 * included by softmax_kernels.c once per dtype with SUF defined: sm_row_SUF.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* Forward (x -> y) and backward (g, y -> gx) of softmax and log_softmax
 * over one row of dn values spaced `inner` apart, for w <= CHUNK adjacent
 * inner positions at once (the inner loops vectorise over them).
 *   softmax:      y = e / sum(e), e = exp(x - max)
 *   log_softmax:  y = (x - max) - log(sum(e))
 *   backward:     softmax gx = y (g - sum(g y)); log_softmax gx = g - exp(y) sum(g) */
static void F(sm_row)(int mode, const void *xv, const void *yv, void *outv, int64_t dn,
                      int64_t inner, int64_t w) {
    const T *x = xv, *y = yv;
    T *out = outv;
    T m[CHUNK], s[CHUNK];
    for (int64_t i = 0; i < w; i++) {
        m[i] = mode == TN_SM_FWD || mode == TN_LSM_FWD ? x[i] : 0;
        s[i] = 0;
    }
    if (mode == TN_SM_FWD || mode == TN_LSM_FWD) {
        for (int64_t d = 1; d < dn; d++)
            for (int64_t i = 0; i < w; i++) {
                T v = x[d * inner + i];
                m[i] = v > m[i] || v != v ? v : m[i];
            }
        for (int64_t d = 0; d < dn; d++)
            for (int64_t i = 0; i < w; i++) {
                T e = TN_M(exp, x[d * inner + i] - m[i]);
                if (mode == TN_SM_FWD) out[d * inner + i] = e;
                s[i] += e;
            }
        if (mode == TN_SM_FWD) {
            for (int64_t i = 0; i < w; i++)
                s[i] = 1 / s[i];
            for (int64_t d = 0; d < dn; d++)
                for (int64_t i = 0; i < w; i++)
                    out[d * inner + i] *= s[i];
        } else {
            /* (x - max) - log(sum) keeps the precision of small differences */
            for (int64_t i = 0; i < w; i++)
                s[i] = TN_M(log, s[i]);
            for (int64_t d = 0; d < dn; d++)
                for (int64_t i = 0; i < w; i++)
                    out[d * inner + i] = (x[d * inner + i] - m[i]) - s[i];
        }
        return;
    }
    /* backward: x is the incoming gradient g */
    for (int64_t d = 0; d < dn; d++)
        for (int64_t i = 0; i < w; i++)
            s[i] += mode == TN_SM_BWD ? x[d * inner + i] * y[d * inner + i] : x[d * inner + i];
    for (int64_t d = 0; d < dn; d++)
        for (int64_t i = 0; i < w; i++) {
            int64_t k = d * inner + i;
            out[k] = mode == TN_SM_BWD ? y[k] * (x[k] - s[i]) : x[k] - TN_M(exp, y[k]) * s[i];
        }
}

#undef T
#undef F
#undef SUF
