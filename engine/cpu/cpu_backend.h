/* engine/cpu/cpu_backend.h — the CPU's kernels behind its backend table
 * (engine/cpu/backend.c). Nothing above cpu/ includes this: ops reach these
 * kernels through the tn__dev_* dispatchers of engine/core/device.h.
 */
#ifndef TN_CPU_BACKEND_H
#define TN_CPU_BACKEND_H

#include "../core/backend.h"
#include "../core/base.h"
#include "dtype_dispatch.h"
#include "isa.h"
#include "iter.h"

/* The table of this kernel set (backend.c; isa.c registers one). */
extern const tn_backend tn__cpu_backend;

/* The optimisers' row loops (optim_kernels.c), entries of tn__pw_loops
 * (pw_kernels.c) for TN_PW_SGD and TN_PW_ADAM. */
#define TN_OPTIM_DECL(ID, CT, S)                                                                   \
    void tn__cpu_sgd_##S(void *ctx, int64_t n, char **ptr, const int64_t *s);                      \
    void tn__cpu_adam_##S(void *ctx, int64_t n, char **ptr, const int64_t *s);
TN_FOR_EACH_FLOAT(TN_OPTIM_DECL)
#undef TN_OPTIM_DECL

/* copy_kernels.c */
tn_status tn__cpu_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it);
tn_status tn__cpu_fill(int dev, tn_dtype dt, const tn_iter *it, double v);

tn_status tn__cpu_reduce(int dev, const tn_red_args *a);         /* reduce_kernels.c */
tn_status tn__cpu_softmax(int dev, const tn_sm_args *a);         /* softmax_kernels.c */
tn_status tn__cpu_cross_entropy(int dev, const tn_ce_args *a);   /* cross_entropy_kernels.c */
tn_status tn__cpu_index(int dev, const tn_index_args *a);        /* index_kernels.c */
tn_status tn__cpu_layer_norm(int dev, const tn_ln_args *a);      /* layer_norm_kernels.c */
tn_status tn__cpu_channel_norm(int dev, const tn_cn_args *a);    /* channel_norm_kernels.c */
tn_status tn__cpu_attention(int dev, const tn_attn_args *a);     /* attention_kernels.c */
tn_status tn__cpu_conv(int dev, const tn_conv_args *a);          /* conv_kernels.c */
tn_status tn__cpu_pool(int dev, const tn_pool_args *a);          /* pool_kernels.c */
tn_status tn__cpu_grad_stats(int dev, tn_dtype dt, int count, const void *const *p,
                             const int64_t *n, double *out); /* grad_stats_kernels.c */

/* Sliding windows (conv and pool kernels): the output columns x in [*lo, *hi)
 * whose input column x0 + x*s lies in [0, w), ow outputs. */
static inline void tn__window_range(int64_t x0, int64_t s, int64_t w, int64_t ow, int64_t *lo,
                                    int64_t *hi) {
    int64_t a = x0 >= 0 ? 0 : (-x0 + s - 1) / s;    /* first x with x0 + x s >= 0 */
    int64_t b = x0 >= w ? 0 : (w - 1 - x0) / s + 1; /* first x with x0 + x s >= w */
    *lo = a < ow ? a : ow;
    *hi = b < *lo ? *lo : b < ow ? b : ow;
}

#endif
