/* engine/cpu/cpu_backend.h — the CPU's kernels behind its backend table
 * (engine/cpu/backend.c). Nothing above cpu/ includes this: ops reach these
 * kernels through the tn__dev_* dispatchers of engine/core/device.h.
 */
#ifndef TN_CPU_BACKEND_H
#define TN_CPU_BACKEND_H

#include "../core/backend.h"
#include "../core/base.h"
#include "iter.h"

/* Row loops of the special pointwise codes, by dtype (float32, float64). */
extern const tn_loop_fn tn__cpu_mz_loops[TN_DTYPE_COUNT];   /* pw_kernels.c */
extern const tn_loop_fn tn__cpu_acc_loops[TN_DTYPE_COUNT];  /* pw_kernels.c */
extern const tn_loop_fn tn__cpu_sgd_loops[TN_DTYPE_COUNT];  /* optim_kernels.c */
extern const tn_loop_fn tn__cpu_adam_loops[TN_DTYPE_COUNT]; /* optim_kernels.c */

/* copy_kernels.c */
tn_status tn__cpu_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it);
tn_status tn__cpu_fill(int dev, tn_dtype dt, const tn_iter *it, double v);

tn_status tn__cpu_reduce(int dev, const tn_red_args *a);         /* reduce_kernels.c */
tn_status tn__cpu_softmax(int dev, const tn_sm_args *a);         /* softmax_kernels.c */
tn_status tn__cpu_cross_entropy(int dev, const tn_ce_args *a);   /* cross_entropy_kernels.c */

#endif
