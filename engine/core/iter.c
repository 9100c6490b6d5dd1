/* Kernel arguments from tensors: the pointwise iterator (kernel_args.h) that
 * every back end walks. Broadcast strides and dimension coalescing are
 * decided here, once, for all devices (and for the CPU reduce kernel's rows,
 * which build theirs from raw geometry with tn__iter_build). */
#include "device.h"

void tn__iter_build(tn_iter *it, int nops, int nd, const int64_t *shape,
                    const int64_t (*stride)[TN_MAX_DIMS], char *const *base) {
    it->nops = nops;
    it->serial = false;
    it->numel = tn__numel(nd, shape);
    if (it->numel == 0) { /* one row of no element: kernels loop over nothing */
        it->ndim = 1;
        it->shape[0] = 0;
        for (int k = 0; k < nops; k++) {
            it->stride[k][0] = 0;
            it->base[k] = base[k];
        }
        return;
    }
    /* Drop size-1 dims, then merge dim d into the one before when every
     * operand is contiguous across the pair (stride[d-1] == stride[d] * shape[d]). */
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        bool merge = n > 0;
        for (int k = 0; k < nops && merge; k++)
            merge = it->stride[k][n - 1] == stride[k][d] * shape[d];
        if (merge)
            it->shape[n - 1] *= shape[d];
        else
            it->shape[n++] = shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][n - 1] = stride[k][d];
    }
    if (n == 0) { /* a 0-dim or all-ones shape is one row of one element */
        it->shape[n++] = 1;
        for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
    }
    it->ndim = n;
    for (int k = 0; k < nops; k++) it->base[k] = base[k];
}

void tn__iter_init(tn_iter *it, int nops, tn_tensor *const *ops) {
    const tn_tensor *out = ops[0];
    int nd = out->ndim;
    int64_t stride[TN_ITER_MAX_OPS][TN_MAX_DIMS];
    char *base[TN_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        const tn_tensor *t = ops[k];
        int64_t es = (int64_t)tn__dtype_sizes[t->dtype];
        base[k] = tn__ptr(t);
        for (int d = 0; d < nd; d++) { /* inputs broadcast with stride 0 */
            int td = t->ndim - nd + d;
            stride[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : tn__wrap_mul(t->stride[td], es);
        }
    }
    tn__iter_build(it, nops, nd, out->shape, (const int64_t(*)[TN_MAX_DIMS])stride, base);
}
