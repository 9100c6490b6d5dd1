/* engine/cpu/iter.h — the CPU's loop driver over a pointwise iterator.
 *
 * The iterator (kernel_args.h, built by engine/core/iter.c) walks up to
 * TN_ITER_MAX_OPS operands over one output shape; operand 0 is the output,
 * inputs broadcast with stride 0, and dimensions where every operand is
 * contiguous are coalesced, so a contiguous op is one row. The kernel is
 * called once per row (never per element) as loop(ctx, n, ptrs, strides):
 * n elements, byte strides. Rows are split across OpenMP threads above
 * TN_GRAIN elements unless the iterator is serial; each thread owns the
 * output elements it writes.
 */
#ifndef TN_CPU_ITER_H
#define TN_CPU_ITER_H

#include "../core/base.h"
#include "../core/kernel_args.h"

typedef void (*tn_loop_fn)(void *ctx, int64_t n, char **ptrs, const int64_t *strides);

/* Runs loop over every row of it. */
void tn__iter_run(const tn_iter *it, tn_loop_fn loop, void *ctx);

#endif
