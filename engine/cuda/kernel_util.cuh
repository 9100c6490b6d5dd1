/* engine/cuda/kernel_util.cuh — what the kernel files share: the element
 * types of the dtypes and the one dispatch from a tn_dtype to its type,
 * warp shuffles and reductions in a fixed order (so that kernels folding the
 * same values give the same bits), grid sizes, and the tail of a host entry
 * (the device's state, the device set for the call, the float/double
 * choice). */
#ifndef TN_CUDA_KERNEL_UTIL_CUH
#define TN_CUDA_KERNEL_UTIL_CUH

#include "../core/half.h"
#include "cuda_internal.h"

namespace tnc {

/* ---- element types ---- */

/* elem<T>: how a kernel computes on a stored element of type T, as the
 * CPU's TN_CT / TN_LD / TN_ST (engine/cpu/dtype_dispatch.h): C the compute
 * type (float for the halves, T otherwise), ld an element as C (exact), st a
 * computed value as T (the halves round once, to nearest even, through
 * engine/core/half.h, so a GPU, the emulator and the CPU give the same bits;
 * the identity otherwise). */
template <typename T> struct elem {
    using C = T;
    __host__ __device__ __forceinline__ static C ld(T v) { return v; }
    __host__ __device__ __forceinline__ static T st(C v) { return v; }
};
template <> struct elem<tn_bf16> {
    using C = float;
    __host__ __device__ __forceinline__ static float ld(tn_bf16 v) { return tn_bf16_to_f32(v); }
    __host__ __device__ __forceinline__ static tn_bf16 st(float v) { return tn_f32_to_bf16(v); }
};
template <> struct elem<tn_f16> {
    using C = float;
    __host__ __device__ __forceinline__ static float ld(tn_f16 v) { return tn_f16_to_f32(v); }
    __host__ __device__ __forceinline__ static tn_f16 st(float v) { return tn_f32_to_f16(v); }
};
template <typename T> using compute_t = typename elem<T>::C;
template <typename T> __host__ __device__ __forceinline__ compute_t<T> ld(T v) {
    return elem<T>::ld(v);
}
template <typename T> __host__ __device__ __forceinline__ T st(compute_t<T> v) {
    return elem<T>::st(v);
}

template <typename T>
constexpr bool is_half_v = std::is_same<T, tn_bf16>::value || std::is_same<T, tn_f16>::value;
/* the float dtypes' element types, the halves included */
template <typename T> constexpr bool is_float_v = std::is_floating_point<T>::value || is_half_v<T>;

/* Any arithmetic value v as an element of type T, as the CPU's TN_TO:
 * cvt_to's rules into T's compute type, then rounded (the halves through
 * float32). */
template <typename T, typename V> __host__ __device__ __forceinline__ T to_elem(V v) {
    return st<T>(cvt_to<compute_t<T>>::f(v));
}
/* A double scalar (a fill value) as an element, as the CPU's TN_SCALAR_TO. */
template <typename T> __host__ __device__ __forceinline__ T scalar_elem(double v) {
    return st<T>(scalar_to<compute_t<T>>(v));
}

/* The unsigned type of T's width: kernels that move elements without
 * reading them (where, gather) need one instance per width only. */
template <typename T>
using bits_t = typename std::conditional<
    sizeof(T) == 1, uint8_t,
    typename std::conditional<
        sizeof(T) == 2, uint16_t,
        typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type>::type;

/* ---- the dtype dispatch ---- */

template <typename T> struct type_tag { using type = T; };

/* The groups of dtypes an entry has kernels for (dispatch's G). */
enum : unsigned {
    DT_WIDE = 1u,   /* float32, float64 */
    DT_HALVES = 2u, /* bfloat16, float16 */
    DT_INTS = 4u,   /* int16, int32, int64 */
    DT_BOOL = 8u,
    DT_FLOAT = DT_WIDE | DT_HALVES,
    DT_ALL = DT_FLOAT | DT_INTS | DT_BOOL,
};

/* The one switch from a tn_dtype to its element type: f(type_tag<T>()) for
 * dtype dt's T (`using T = typename decltype(tag)::type;`) when dt is in one
 * of the groups G, whose instances alone are compiled; any other dtype is
 * TN_ERR_DTYPE, "CUDA <what>: ...". f returns a tn_status. */
template <unsigned G = DT_ALL, class F> tn_status dispatch(tn_dtype dt, const char *what, F &&f) {
    switch (dt) {
    case TN_F32:
        if constexpr ((G & DT_WIDE) != 0) return f(type_tag<float>());
        break;
    case TN_F64:
        if constexpr ((G & DT_WIDE) != 0) return f(type_tag<double>());
        break;
    case TN_BF16:
        if constexpr ((G & DT_HALVES) != 0) return f(type_tag<tn_bf16>());
        break;
    case TN_F16:
        if constexpr ((G & DT_HALVES) != 0) return f(type_tag<tn_f16>());
        break;
    case TN_I16:
        if constexpr ((G & DT_INTS) != 0) return f(type_tag<int16_t>());
        break;
    case TN_I32:
        if constexpr ((G & DT_INTS) != 0) return f(type_tag<int32_t>());
        break;
    case TN_I64:
        if constexpr ((G & DT_INTS) != 0) return f(type_tag<int64_t>());
        break;
    case TN_BOOL:
        if constexpr ((G & DT_BOOL) != 0) return f(type_tag<uint8_t>());
        break;
    default:
        return tn__error(TN_ERR_DTYPE, "CUDA %s: unknown dtype %d", what, (int)dt);
    }
    return tn__error(TN_ERR_DTYPE, "CUDA %s: not implemented for '%s'", what, dtype_name(dt));
}

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
