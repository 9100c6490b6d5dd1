/* engine/cuda/kernel_util.cuh — what the kernel files share: warp shuffles
 * and reductions in a fixed order (so that kernels folding the same values
 * give the same bits), grid sizes, and the tail of a host entry (the
 * device's state, the device set for the call, the float/double choice). */
#ifndef TN_CUDA_KERNEL_UTIL_CUH
#define TN_CUDA_KERNEL_UTIL_CUH

#include "cuda_internal.h"

namespace tnc {

/* ---- warps ---- */

/* __shfl_down_sync of any element type: narrow integers through int,
 * int64 through long long. A file shuffling a struct overloads it. */
template <typename T> __device__ __forceinline__ T shfl_down(T v, int off) {
    if constexpr (sizeof(T) < 4) {
        return static_cast<T>(__shfl_down_sync(0xffffffffu, static_cast<int>(v), off));
    } else if constexpr (std::is_same<T, int64_t>::value) {
        return static_cast<T>(__shfl_down_sync(0xffffffffu, static_cast<long long>(v), off));
    } else {
        return __shfl_down_sync(0xffffffffu, v, off);
    }
}

/* Lane 0 gets op folded over the warp's values: lane l folds in lane
 * l + off for off = 16, 8, 4, 2, 1 (a fixed tree; op(a, b): a holds the
 * lower lanes). */
template <typename T, class OP> __device__ __forceinline__ T warp_fold(T v, OP op) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v = op(v, shfl_down(v, off));
    return v;
}

template <typename T> struct op_add {
    __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

/* The warp's sum, in every lane (warp_fold's tree). */
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    return __shfl_sync(0xffffffffu, warp_fold(v, op_add<T>()), 0);
}

/* ---- host entries ---- */

/* Blocks for a launch of `blocks`: at least 1, at most per_sm per SM
 * (enough to fill every SM several times over). */
inline unsigned grid_clamp(const device_state *ds, int64_t blocks, int64_t per_sm = 32) {
    const int64_t max_blocks = static_cast<int64_t>(ds->sm_count) * per_sm;
    return static_cast<unsigned>(blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks);
}

/* The tail of an entry whose arguments are checked: the state of device
 * dev, the device made current for the call (the caller's restored after),
 * then f(ds), whose kernels end with launch_check. */
template <class F> tn_status on_device(int dev, F &&f) {
    device_state *ds;
    const tn_status st = device(dev, &ds);
    if (st < 0) return st;
    dev_guard guard(dev);
    return f(ds);
}

/* on_device for the float32 / float64 entries (check_float_args):
 * f(ds, float()) or f(ds, double()), the second argument naming the type. */
template <class F> tn_status on_device_float(int dev, tn_dtype dt, F &&f) {
    return on_device(dev, [&](device_state *ds) {
        return dt == TN_F32 ? f(ds, float()) : f(ds, double());
    });
}

} // namespace tnc

#endif
