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

#include "../core/internal.h"

/* One product. Element (i,p) of A is a[i*rsa + p*csa]; (p,j) of B is
 * b[p*rsb + j*csb]; (i,j) of C is c[i*rsc + j]. Strides in elements. */
typedef struct tn_gemm {
    int64_t m, n, k;
    const void *a;
    int64_t rsa, csa;
    const void *b;
    int64_t rsb, csb;
    void *c;
    int64_t rsc;
    bool accumulate; /* C += A·B; otherwise C = A·B */
} tn_gemm;

/* Batch of products over a (broadcast) batch shape: batch index idx moves
 * the operands by sum(idx[d] * bs?[d]) elements (stride 0 = broadcast). */
typedef struct tn_gemm_batch {
    int ndim;
    int64_t shape[TN_MAX_DIMS];
    int64_t bsa[TN_MAX_DIMS], bsb[TN_MAX_DIMS], bsc[TN_MAX_DIMS];
} tn_gemm_batch;

/* dt: TN_F32, TN_F64, TN_I16, TN_I32 or TN_I64. batch may be NULL (one
 * product). Fails only on out-of-memory for the packing buffers. */
tn_status tn__gemm(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch);

#endif
