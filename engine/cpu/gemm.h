/* engine/cpu/gemm.h — dense matrix products on the CPU.
 *
 * C = A·B (+ C) for float32/float64 (blocked, packed panels, register-tiled
 * micro-kernel) and for int16/int32/int64 (a plain loop). Operands are read
 * through arbitrary element strides, so transposed or sliced views need no
 * copy; C has unit column stride (outputs are allocated by the caller).
 *
 * Threads: OpenMP above a work grain. Each thread owns whole output tiles
 * and sums every element in the same order, so results do not depend on
 * the thread count. Safe to call from several user threads at once.
 */
#ifndef TN_CPU_GEMM_H
#define TN_CPU_GEMM_H

#include "../core/base.h"
#include "../core/kernel_args.h"
#include "isa.h"

/* tn_gemm and tn_gemm_batch: engine/core/kernel_args.h */

/* Bytes of a vector register in the set this file is compiled for (isa.h). */
#if defined(__AVX512F__)
#define TN_VEC_BYTES 64
#elif defined(__AVX__)
#define TN_VEC_BYTES 32
#else
#define TN_VEC_BYTES 16
#endif

/* c + a*b, fused where the CPU has FMA: strict C11 (-std=c11) turns off
 * floating-point contraction, so the fusion has to be asked for (math.h). */
// clang-format off
#ifdef __FMA__
#define FMADD(a, b, c)                                                                    \
    _Generic((a), float: fmaf((float)(a), (float)(b), (float)(c)),                        \
             double: fma((double)(a), (double)(b), (double)(c)), default: (c) + (a) * (b))
#else
#define FMADD(a, b, c) ((c) + (a) * (b))
#endif
// clang-format on

/* Below this many multiply-adds per product, packing does not pay. */
#define GEMM_SMALL 32768
/* Dot products (dots_impl.h: gemm.c's use_dots, gemm_half.c) for products of at most
 * DOTS_MAX_M rows, with k long enough to fill the vectors and A's rows in L2 beside the weights
 * streaming through. */
#define DOTS_MAX_M 32
#define DOTS_MIN_K 64
#define DOTS_MAX_A_BYTES (256 << 10)

/* The work of one product for tn__threads_for: a thread is worth its fork/join (~2 us) from
 * ~4M multiply-adds on; a matrix-vector product (one row or column of C) is bound by reading
 * the matrix, whose bytes take more threads' bandwidth from ~256K elements on. */
static inline int64_t tn__gemm_work(const tn_gemm *g) {
    int64_t mnk = g->m * g->n * g->k;
    return g->m == 1 || g->n == 1 ? mnk / 8 : mnk / 128;
}

/* dt: TN_F32, TN_F64, TN_I16, TN_I32 or TN_I64. batch may be NULL (one
 * product). Fails only on out-of-memory for the packing buffers. */
tn_status tn__gemm(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch);
/* A bfloat16 or float16 product (dt) of a few rows with B's columns contiguous (x·Wᵀ), the
 * weight read in place (gemm_half.c): TN_OK, an out-of-memory error, or TN__DECLINED for any
 * other shape (nothing touched: core widens it, or the bfloat16 kernel takes it). */
tn_status tn__gemm_half(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch);
/* *out = the product of batch index bi (row-major over bt->shape); es: the
 * element size. Shared by our kernel and the CBLAS path. */
void tn__gemm_batch_item(const tn_gemm *g, const tn_gemm_batch *bt, int64_t bi, size_t es,
                         tn_gemm *out);

#endif
