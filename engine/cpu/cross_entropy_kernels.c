/* The CPU's fused cross-entropy kernel: the backend table's `cross_entropy`
 * entry (tn_ce_args in engine/core/kernel_args.h), log-softmax and NLL in
 * one pass over the logits. Forward: per row the max m and
 * log_s = log(sum exp(x - m)) in the logits' dtype, in the softmax kernel's
 * order (so every value equals the two-step result), and the target's
 * log-probability; the loss sums those in double, in row order. Backward:
 * the gradient from the saved row statistics. Threads own whole rows.
 */
#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define TN_IMPL "cross_entropy_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

typedef struct ce_kernels {
    void (*fwd)(const void *x, int64_t n, int64_t c, const int64_t *t, int64_t ign, void *stats,
                double *part);
    void (*bwd)(const void *x, int64_t n, int64_t c, const int64_t *t, int64_t ign,
                const void *stats, double scale, void *gx);
} ce_kernels;
#define CE_KERNELS(ID, CT, S) [ID] = {ce_fwd_##S, ce_bwd_##S},
static const ce_kernels kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(CE_KERNELS)};

/* The forward: row statistics and per-row terms, then the loss. */
static tn_status ce_forward(const tn_ce_args *a) {
    double *part = tn__alloc((size_t)(a->n ? a->n : 1) * sizeof *part);
    if (!part) return tn_last_status();
    kernels[a->dtype].fwd(a->x, a->n, a->c, a->target, a->ignore_index, a->stats, part);
    double sum = 0;
    for (int64_t i = 0; i < a->n; i++) sum += part[i]; /* row order: as nll_loss */
    tn__store(a->loss, a->dtype, -sum / a->count);
    tn__free(part);
    return TN_OK;
}

tn_status tn__cpu_cross_entropy(int dev, const tn_ce_args *a) {
    (void)dev;
    if ((unsigned)a->dtype >= TN_DTYPE_COUNT || !kernels[a->dtype].fwd)
        return tn__error(TN_ERR_DTYPE, "cross_entropy: no CPU kernel for %s",
                         tn_dtype_name(a->dtype));
    if (a->mode == TN_CE_FWD) return ce_forward(a);
    const double scale = -tn__load(a->g, a->dtype) / a->count;
    kernels[a->dtype].bwd(a->x, a->n, a->c, a->target, a->ignore_index, a->stats, scale, a->gx);
    return TN_OK;
}
