/* Kernel arguments from tensors: the pointwise iterator (kernel_args.h) that
 * every back end walks. Broadcast strides and dimension coalescing are
 * decided here, once, for all devices. */
#include "device.h"

void tn__iter_init(tn_iter *it, int nops, tn_tensor *const *ops) {
    const tn_tensor *out = ops[0];
    int nd = out->ndim;
    it->nops = nops;
    it->serial = false;
    it->numel = tn__numel(nd, out->shape);
    int64_t shape[TN_MAX_DIMS + 1], stride[TN_ITER_MAX_OPS][TN_MAX_DIMS + 1];
    for (int d = 0; d < nd; d++) shape[d] = out->shape[d];
    for (int k = 0; k < nops; k++) {
        const tn_tensor *t = ops[k];
        int64_t es = (int64_t)tn__dtype_sizes[t->dtype];
        it->base[k] = tn__ptr(t);
        for (int d = 0; d < nd; d++) {
            int td = t->ndim - nd + d;
            stride[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td] * es;
        }
    }
    if (nd == 0) { /* a 0-dim tensor is one row of one element */
        shape[0] = 1;
        for (int k = 0; k < nops; k++) stride[k][0] = 0;
        nd = 1;
    }
    /* Drop size-1 dims, then merge dim d into d+1 when every operand is
     * contiguous across the pair (stride[d] == stride[d+1] * shape[d+1]). */
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1 && nd > 1) continue;
        if (n > 0) {
            bool merge = true;
            for (int k = 0; k < nops && merge; k++)
                merge = stride[k][n - 1] == stride[k][d] * shape[d];
            if (merge) {
                shape[n - 1] *= shape[d];
                for (int k = 0; k < nops; k++) stride[k][n - 1] = stride[k][d];
                continue;
            }
        }
        shape[n] = shape[d];
        for (int k = 0; k < nops; k++) stride[k][n] = stride[k][d];
        n++;
    }
    if (n == 0) {
        shape[0] = 1;
        for (int k = 0; k < nops; k++) stride[k][0] = 0;
        n = 1;
    }
    it->ndim = n;
    for (int d = 0; d < n; d++) {
        it->shape[d] = shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][d] = stride[k][d];
    }
}
