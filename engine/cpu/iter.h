/* engine/cpu/iter.h — the strided/broadcast loop driver for CPU kernels.
 *
 * An iterator walks up to TN_ITER_MAX_OPS operands over one output shape.
 * Operand 0 is the output; inputs are broadcast (stride 0) to its shape.
 * Dimensions are coalesced where every operand is contiguous across them, so
 * a contiguous op becomes one row. The kernel is called once per row (never
 * per element) as loop(ctx, n, ptrs, strides): n elements, byte strides.
 * Rows are split across OpenMP threads above TN_GRAIN elements; each thread
 * owns the output elements it writes.
 */
#ifndef TN_CPU_ITER_H
#define TN_CPU_ITER_H

#include "../core/internal.h"
#include "../core/kernel_args.h" /* tn_iter */

typedef void (*tn_loop_fn)(void *ctx, int64_t n, char **ptrs, const int64_t *strides);

/* ops[0] is the output (its shape is the iteration shape); the others must
 * broadcast to it (checked by the caller). */
void tn__iter_init(tn_iter *it, int nops, tn_tensor *const *ops);
/* Runs loop over every row; `parallel` allows OpenMP above the grain. */
void tn__iter_run(const tn_iter *it, tn_loop_fn loop, void *ctx, bool parallel);

#endif
