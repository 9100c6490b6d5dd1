/* The CPU's softmax-family kernel: the backend table's `softmax` entry
 * (softmax and log_softmax, forward and backward; tn_sm_args in
 * engine/core/kernel_args.h). The contiguous operands are seen as
 * (outer, d, inner) around the softmax dim; work is split into rows of one
 * outer index and up to CHUNK adjacent inner positions, and threads own
 * whole rows, so every output element is computed the same way whatever
 * the thread count.
 */
#include "cpu_backend.h"

#define CHUNK 256

/* Forward (x -> y) and backward (g, y -> gx) of softmax and log_softmax
 * over one row of dn values spaced `inner` apart, for w <= CHUNK adjacent
 * inner positions at once (the inner loops vectorise over them).
 *   softmax:      y = e / sum(e), e = exp(x - max)
 *   log_softmax:  y = (x - max) - log(sum(e))
 *   backward:     softmax gx = y (g - sum(g y)); log_softmax gx = g - exp(y) sum(g) */
#define DEFINE_SM_ROW(SUF, T)                                                                      \
    static void sm_row_##SUF(int mode, const T *x, const T *y, T *out, int64_t dn, int64_t inner,  \
                             int64_t w) {                                                          \
        T m[CHUNK], s[CHUNK];                                                                      \
        for (int64_t i = 0; i < w; i++) {                                                          \
            m[i] = mode == TN_SM_FWD || mode == TN_LSM_FWD ? x[i] : 0;                             \
            s[i] = 0;                                                                              \
        }                                                                                          \
        if (mode == TN_SM_FWD || mode == TN_LSM_FWD) {                                             \
            for (int64_t d = 1; d < dn; d++)                                                       \
                for (int64_t i = 0; i < w; i++) {                                                  \
                    T v = x[d * inner + i];                                                        \
                    m[i] = v > m[i] || v != v ? v : m[i];                                          \
                }                                                                                  \
            for (int64_t d = 0; d < dn; d++)                                                       \
                for (int64_t i = 0; i < w; i++) {                                                  \
                    T e = TN_M(exp, x[d * inner + i] - m[i]);                                      \
                    if (mode == TN_SM_FWD) out[d * inner + i] = e;                                 \
                    s[i] += e;                                                                     \
                }                                                                                  \
            if (mode == TN_SM_FWD) {                                                               \
                for (int64_t i = 0; i < w; i++)                                                    \
                    s[i] = 1 / s[i];                                                               \
                for (int64_t d = 0; d < dn; d++)                                                   \
                    for (int64_t i = 0; i < w; i++)                                                \
                        out[d * inner + i] *= s[i];                                                \
            } else {                                                                               \
                /* (x - max) - log(sum) keeps the precision of small differences */                \
                for (int64_t i = 0; i < w; i++)                                                    \
                    s[i] = TN_M(log, s[i]);                                                        \
                for (int64_t d = 0; d < dn; d++)                                                   \
                    for (int64_t i = 0; i < w; i++)                                                \
                        out[d * inner + i] = (x[d * inner + i] - m[i]) - s[i];                     \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        /* backward: x is the incoming gradient g */                                               \
        for (int64_t d = 0; d < dn; d++)                                                           \
            for (int64_t i = 0; i < w; i++)                                                        \
                s[i] +=                                                                            \
                    mode == TN_SM_BWD ? x[d * inner + i] * y[d * inner + i] : x[d * inner + i];    \
        for (int64_t d = 0; d < dn; d++)                                                           \
            for (int64_t i = 0; i < w; i++) {                                                      \
                int64_t k = d * inner + i;                                                         \
                out[k] = mode == TN_SM_BWD ? y[k] * (x[k] - s[i]) : x[k] - TN_M(exp, y[k]) * s[i]; \
            }                                                                                      \
    }
DEFINE_SM_ROW(f32, float)
DEFINE_SM_ROW(f64, double)

tn_status tn__cpu_softmax(int dev, const tn_sm_args *a) {
    (void)dev;
    if (a->dtype != TN_F32 && a->dtype != TN_F64)
        return tn__error(TN_ERR_DTYPE, "softmax: no CPU kernel for %s", tn_dtype_name(a->dtype));
    int64_t chunks = (a->inner + CHUNK - 1) / CHUNK, rows = a->outer * chunks;
    int nt = tn__threads_for(a->outer * a->d * a->inner);
    (void)nt; /* only read by OpenMP */
    size_t es = tn__dtype_sizes[a->dtype];
    const char *xp = a->x, *yp = a->y;
    char *op = a->out;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("softmax");
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++) {
            int64_t o = r / chunks, i0 = r % chunks * CHUNK;
            int64_t w = a->inner - i0 < CHUNK ? a->inner - i0 : CHUNK;
            size_t off = (size_t)(o * a->d * a->inner + i0) * es;
            const char *y = yp ? yp + off : NULL;
            if (a->dtype == TN_F32)
                sm_row_f32(a->mode, (const float *)(xp + off), (const float *)y,
                           (float *)(op + off), a->d, a->inner, w);
            else
                sm_row_f64(a->mode, (const double *)(xp + off), (const double *)y,
                           (double *)(op + off), a->d, a->inner, w);
        }
    }
    return TN_OK;
}
