/* The CPU's fused cross-entropy kernel: the backend table's `cross_entropy`
 * entry (tn_ce_args in engine/core/kernel_args.h), log-softmax and NLL in
 * one pass over the logits. Forward: per row the max m and
 * log_s = log(sum exp(x - m)) in the logits' dtype, in the softmax kernel's
 * order (so every value equals the two-step result), and the target's
 * log-probability; the loss sums those in double, in row order. Backward:
 * the gradient from the saved row statistics. Threads own whole rows.
 */
#include "cpu_backend.h"

/* Rows of c logits: stats[2i] = max, stats[2i+1] = log(sum exp(x - max));
 * part[i] = log-probability of the row's target (0 for ignored rows). */
#define DEFINE_CE_FWD(SUF, T)                                                                     \
    static void ce_fwd_##SUF(const T *x, int64_t n, int64_t c, const int64_t *t, int64_t ign,     \
                             T *stats, double *part) {                                            \
        int nt = tn__threads_for(n * c);                                                          \
        (void)nt; /* only read by OpenMP */                                                       \
        _Pragma("omp parallel num_threads(nt) if (nt > 1)")                                       \
        {                                                                                         \
            TN_OMP_SPAN("cross_entropy");                                                         \
            _Pragma("omp for schedule(static) nowait")                                            \
            for (int64_t i = 0; i < n; i++) {                                                     \
                const T *r = x + i * c;                                                           \
                T m = r[0], s = 0;                                                                \
                for (int64_t j = 1; j < c; j++)                                                   \
                    m = r[j] > m || r[j] != r[j] ? r[j] : m;                                      \
                for (int64_t j = 0; j < c; j++)                                                   \
                    s += TN_M(exp, r[j] - m);                                                     \
                T ls = TN_M(log, s);                                                              \
                stats[2 * i] = m, stats[2 * i + 1] = ls;                                          \
                part[i] = t[i] == ign ? 0 : (double)((r[t[i]] - m) - ls);                         \
            }                                                                                     \
        }                                                                                         \
    }
/* gx = S (onehot) - exp(lp) S with S = -g/count as T, lp = (x - m) - log_s:
 * log_softmax's backward of nll's gradient, in the same arithmetic. */
#define DEFINE_CE_BWD(SUF, T)                                                                     \
    static void ce_bwd_##SUF(const T *x, int64_t n, int64_t c, const int64_t *t, int64_t ign,     \
                             const T *stats, double scale, T *gx) {                               \
        int nt = tn__threads_for(n * c);                                                          \
        (void)nt;                                                                                 \
        const T S = (T)scale;                                                                     \
        _Pragma("omp parallel num_threads(nt) if (nt > 1)")                                       \
        {                                                                                         \
            TN_OMP_SPAN("cross_entropy backward");                                                \
            _Pragma("omp for schedule(static) nowait")                                            \
            for (int64_t i = 0; i < n; i++) {                                                     \
                const T *r = x + i * c;                                                           \
                T *o = gx + i * c;                                                                \
                if (t[i] == ign) {                                                                \
                    for (int64_t j = 0; j < c; j++) o[j] = 0;                                     \
                    continue;                                                                     \
                }                                                                                 \
                const T m = stats[2 * i], ls = stats[2 * i + 1];                                  \
                for (int64_t j = 0; j < c; j++)                                                   \
                    o[j] = (j == t[i] ? S : (T)0) - TN_M(exp, (r[j] - m) - ls) * S;               \
            }                                                                                     \
        }                                                                                         \
    }
DEFINE_CE_FWD(f32, float)
DEFINE_CE_FWD(f64, double)
DEFINE_CE_BWD(f32, float)
DEFINE_CE_BWD(f64, double)

/* The forward: row statistics and per-row terms, then the loss. */
static tn_status ce_forward(const tn_ce_args *a) {
    double *part = tn__alloc((size_t)(a->n ? a->n : 1) * sizeof *part);
    if (!part) return tn_last_status();
    if (a->dtype == TN_F32)
        ce_fwd_f32(a->x, a->n, a->c, a->target, a->ignore_index, a->stats, part);
    else
        ce_fwd_f64(a->x, a->n, a->c, a->target, a->ignore_index, a->stats, part);
    double sum = 0;
    for (int64_t i = 0; i < a->n; i++) sum += part[i]; /* row order: as nll_loss */
    tn__store(a->loss, a->dtype, -sum / a->count);
    tn__free(part);
    return TN_OK;
}

tn_status tn__cpu_cross_entropy(int dev, const tn_ce_args *a) {
    (void)dev;
    if (a->dtype != TN_F32 && a->dtype != TN_F64)
        return tn__error(TN_ERR_DTYPE, "cross_entropy: no CPU kernel for %s",
                         tn_dtype_name(a->dtype));
    if (a->mode == TN_CE_FWD) return ce_forward(a);
    const double scale = -tn__load(a->g, a->dtype) / a->count;
    if (a->dtype == TN_F32)
        ce_bwd_f32(a->x, a->n, a->c, a->target, a->ignore_index, a->stats, scale, a->gx);
    else
        ce_bwd_f64(a->x, a->n, a->c, a->target, a->ignore_index, a->stats, scale, a->gx);
    return TN_OK;
}
