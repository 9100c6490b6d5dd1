/* engine/cpu/gemm_bf16.h — bfloat16 matrix products on AVX512-BF16 (vdpbf16ps), and their
 * portable twin.
 *
 * C = A·B (+ C) with bfloat16 A, B and C, tn_gemm's strides and tn_gemm_batch's batches:
 * float32 products and sums, each output rounded once to bfloat16 (to nearest even, tn_f32_to_bf16)
 * after C is added in float32 when accumulating. The sums are vdpbf16ps's: k taken in pairs,
 * each pair's odd element first, bfloat16 subnormals read as zero and float32 subnormal sums
 * flushed to zero; so results agree with the widened float32 product within rounding, not to
 * the bit. Every element is summed in the same order whatever the threads or the tiling, so
 * results do not depend on the thread count.
 *
 * One driver (gemm_bf16_impl.h: packing, blocking, edges, batches, threads) is compiled twice:
 * gemm_bf16.c on the AVX512-BF16 intrinsics (compiled for those instructions alone,
 * cmake/isa.cmake: TENET_HAVE_GEMM_BF16 when the compiler has them), and gemm_bf16_twin.c on
 * plain C with the same per-lane semantics, so the twin runs, on any CPU, the code the real
 * kernel runs. isa.c says which one the CPU backend takes (isa.h).
 *
 * Safe to call from several user threads at once. Fail only on out-of-memory.
 */
#ifndef TN_CPU_GEMM_BF16_H
#define TN_CPU_GEMM_BF16_H

#include "../core/base.h"
#include "../core/kernel_args.h"

typedef tn_status (*tn_gemm_bf16_fn)(const tn_gemm *g, const tn_gemm_batch *batch);

/* The AVX512-BF16 kernel: call it only where tn__gemm_bf16_native() (isa.c) returned it. */
tn_status tn__gemm_bf16(const tn_gemm *g, const tn_gemm_batch *batch);
/* The portable twin: any CPU, slow (a loop per lane). */
tn_status tn__gemm_bf16_twin(const tn_gemm *g, const tn_gemm_batch *batch);

/* tn__gemm_bf16 when the build made it and this CPU and OS run AVX512-BF16 (CPUID leaf 7
 * subleaf 1, EAX bit 5; the ZMM and mask registers enabled in XCR0), else NULL; whatever
 * level runs (isa.c). */
tn_gemm_bf16_fn tn__gemm_bf16_native(void);

#endif
