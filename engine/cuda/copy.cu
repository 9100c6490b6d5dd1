/* engine/cuda/copy.cu — copy with dtype conversion and broadcast (all 8 x 8
 * dtype pairs), and fill, on the pointwise engine.
 *
 * Conversions are the CPU's (engine/core/convert.h, TN_TO): bool stores
 * v != 0, a float outside an integer type's range (or NaN) gives what
 * PyTorch gives on x86-64, a half is read as float32 and a value becomes a
 * half through float32 (engine/core/half.h), the same on both back ends.
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
        o = to_elem<DT>(ld(x));
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

} // namespace

extern "C" tn_status tn__cuda_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it) {
    if (!it) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA copy: iterator is NULL");
    return dispatch(dst, "copy", [&](auto d) {
        return dispatch(src, "copy", [&](auto s) {
            using DT = typename decltype(d)::type;
            using ST = typename decltype(s)::type;
            return pw_launch(dev, copy_f<DT, ST>{}, it, "copy");
        });
    });
}

extern "C" tn_status tn__cuda_fill(int dev, tn_dtype dt, const tn_iter *it, double v) {
    if (!it) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA fill: iterator is NULL");
    return dispatch(dt, "fill", [&](auto tag) {
        using T = typename decltype(tag)::type;
        fill_f<T> f;
        f.v = scalar_elem<T>(v);
        return pw_launch(dev, f, it, "fill");
    });
}

} // namespace tnc
