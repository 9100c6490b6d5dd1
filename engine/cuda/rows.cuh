/* engine/cuda/rows.cuh — what the row kernels share (softmax.cu,
 * cross_entropy.cu, attention.cu): exp and log by element type, the CPU's
 * NaN-winning running max, and a group's all-reduce in a fixed order
 * (kernel_util.cuh's warp fold, then the warps in order), so that kernels
 * that fold a row the same way give the same bits. */
#ifndef TN_CUDA_ROWS_CUH
#define TN_CUDA_ROWS_CUH

#include "kernel_util.cuh"

namespace tnc {

__device__ __forceinline__ float ex(float v) { return ::expf(v); }
__device__ __forceinline__ double ex(double v) { return ::exp(v); }
__device__ __forceinline__ float lg(float v) { return ::logf(v); }
__device__ __forceinline__ double lg(double v) { return ::log(v); }

/* the CPU's running max: a NaN, once seen, stays */
template <typename T> __device__ __forceinline__ T max_nan(T m, T v) {
    return v > m || v != v ? v : m;
}

/* Every thread of the group gets the group's combined value; the tree and
 * the final order are fixed. sh: GROUP / 32 slots (GROUP > 32 only). */
template <int GROUP, typename T, class OP>
__device__ __forceinline__ T group_allreduce(T v, OP op, T *sh) {
    v = warp_fold(v, op);
    if constexpr (GROUP == 32) {
        return __shfl_sync(0xffffffffu, v, 0);
    } else {
        __syncthreads(); /* the previous use of sh is over */
        if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
        __syncthreads();
        T r = sh[0];
#pragma unroll
        for (int w = 1; w < GROUP / 32; w++)
            r = op(r, sh[w]);
        return r;
    }
}

template <typename T> struct op_max {
    __device__ __forceinline__ T operator()(T a, T b) const { return max_nan(a, b); }
};

/* The layout of a row kernel over rows of d contiguous elements (softmax with
 * inner == 1, cross-entropy): one thread per row up to 16 elements, a warp
 * below 2048, a block of 512 above. */
enum row_layout { ROWS_THREAD, ROWS_WARP, ROWS_BLOCK };
inline row_layout row_layout_for(int64_t d) {
    return d <= 16 ? ROWS_THREAD : d < 2048 ? ROWS_WARP : ROWS_BLOCK;
}

} // namespace tnc

#endif
