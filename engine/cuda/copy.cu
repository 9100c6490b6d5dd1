/* engine/cuda/copy.cu — copy with dtype conversion and broadcast (all 6 x 6
 * dtype pairs), and fill, on the pointwise engine.
 *
 * Conversions are the CPU's (engine/core/convert.h): bool stores v != 0, a
 * float outside an integer type's range (or NaN) gives what PyTorch gives on
 * x86-64, the same on both back ends.
 */
#include "pointwise.cuh"

namespace tnc {

namespace {

/* operands dst, src */
template <typename DT, typename ST> struct copy_f {
    using T0 = DT;
    using T1 = ST;
    using T2 = uint8_t;
    using T3 = uint8_t;
    static constexpr int NOPS = 2;
    static constexpr unsigned LOADS = 2u, STORES = 1u;
    __device__ __forceinline__ void operator()(DT &o, ST &x, uint8_t &, uint8_t &) const {
        o = cvt_to<DT>::f(x);
    }
};

/* operand dst; the value is converted on the host, as the CPU converts it */
template <typename T> struct fill_f {
    using T0 = T;
    using T1 = uint8_t;
    using T2 = uint8_t;
    using T3 = uint8_t;
    static constexpr int NOPS = 1;
    static constexpr unsigned LOADS = 0u, STORES = 1u;
    T v;
    __device__ __forceinline__ void operator()(T &o, uint8_t &, uint8_t &, uint8_t &) const {
        o = v;
    }
};

template <typename DT, typename ST> tn_status copy_typed(int dev, const tn_iter *it) {
    return pw_launch(dev, copy_f<DT, ST>{}, it, "copy");
}

template <typename DT> tn_status copy_from(int dev, tn_dtype src, const tn_iter *it) {
    switch (src) {
    case TN_F32:
        return copy_typed<DT, float>(dev, it);
    case TN_F64:
        return copy_typed<DT, double>(dev, it);
    case TN_I16:
        return copy_typed<DT, int16_t>(dev, it);
    case TN_I32:
        return copy_typed<DT, int32_t>(dev, it);
    case TN_I64:
        return copy_typed<DT, int64_t>(dev, it);
    case TN_BOOL:
        return copy_typed<DT, uint8_t>(dev, it);
    default:
        break;
    }
    return tn__error(TN_ERR_DTYPE, "CUDA copy: unknown source dtype %d", (int)src);
}

template <typename T> tn_status fill_typed(int dev, const tn_iter *it, double v) {
    fill_f<T> f;
    f.v = scalar_to<T>(v);
    return pw_launch(dev, f, it, "fill");
}

} // namespace

extern "C" tn_status tn__cuda_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it) {
    if (!it) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA copy: iterator is NULL");
    switch (dst) {
    case TN_F32:
        return copy_from<float>(dev, src, it);
    case TN_F64:
        return copy_from<double>(dev, src, it);
    case TN_I16:
        return copy_from<int16_t>(dev, src, it);
    case TN_I32:
        return copy_from<int32_t>(dev, src, it);
    case TN_I64:
        return copy_from<int64_t>(dev, src, it);
    case TN_BOOL:
        return copy_from<uint8_t>(dev, src, it);
    default:
        break;
    }
    return tn__error(TN_ERR_DTYPE, "CUDA copy: unknown destination dtype %d", (int)dst);
}

extern "C" tn_status tn__cuda_fill(int dev, tn_dtype dt, const tn_iter *it, double v) {
    if (!it) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA fill: iterator is NULL");
    switch (dt) {
    case TN_F32:
        return fill_typed<float>(dev, it, v);
    case TN_F64:
        return fill_typed<double>(dev, it, v);
    case TN_I16:
        return fill_typed<int16_t>(dev, it, v);
    case TN_I32:
        return fill_typed<int32_t>(dev, it, v);
    case TN_I64:
        return fill_typed<int64_t>(dev, it, v);
    case TN_BOOL:
        return fill_typed<uint8_t>(dev, it, v);
    default:
        break;
    }
    return tn__error(TN_ERR_DTYPE, "CUDA fill: unknown dtype %d", (int)dt);
}

} // namespace tnc
