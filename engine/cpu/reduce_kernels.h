/* engine/cpu/reduce_kernels.h — CPU kernels of the reductions (sum/mean,
 * max/min with the index of the first extremum) over one dimension.
 *
 * Determinism: every result is independent of the thread count. A reduced
 * range is cut into fixed-size blocks (sizes depend on the shape only);
 * block results are combined in block order whether the blocks ran on one
 * thread or many. float32 accumulates in double, integers and bool in int64.
 */
#ifndef TN_CPU_REDUCE_KERNELS_H
#define TN_CPU_REDUCE_KERNELS_H

#include "../core/internal.h"
#include "../core/kernel_args.h"

/* tn_red_op: engine/core/kernel_args.h */

/* Reduces `in` over dimension `dim` (0 <= dim < max(in->ndim, 1)), or over
 * all its elements when dim < 0 (then `in` must be contiguous).
 * vals, idx: contiguous outputs holding one element per reduced slice, in
 * row-major order of in's shape with `dim` removed (either may be NULL).
 * TN_RED_SUM writes vals only: float32/float64 for float inputs (divided by
 * `div`, 1 for a plain sum), int64 otherwise. TN_RED_MAX/MIN write the
 * extreme value (in's dtype) and/or the int64 index of its first occurrence;
 * NaN wins (the first NaN), as PyTorch. The reduced size must be > 0 for
 * MAX/MIN unless there is nothing to compute. Device tensors go to their
 * backend (outputs on the same device); only they can fail. */
tn_status tn__reduce_kernel(tn_red_op op, const tn_tensor *in, int dim, tn_tensor *vals,
                            tn_tensor *idx, double div);

#endif
