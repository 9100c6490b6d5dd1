/* engine/cuda/pointwise.cu — every op of engine/core/pw_ops.h on the GPU,
 * expanded from the same X-macro lists as the CPU loops, with the dtypes its
 * kind names (ALL, FLOAT, NOBOOL, CMP with a bool result), and the masked
 * zero. The optimiser steps (SGD, Adam) live in optim.cu.
 *
 * The expressions compute in the operands' compute type (float32 for the
 * halves, the type itself otherwise: elem, kernel_util.cuh) exactly as C
 * does (integer promotion included) and the result is converted to the
 * output type once (bool stores v != 0, a half rounds), as the CPU's loops.
 * Built with --fmad=false, so float arithmetic rounds as the CPU's; the math
 * functions (exp, log, ...) are CUDA's, within a few ulp of the C library's.
 */
#include "pointwise.cuh"

/* `x < 0` on the unsigned bool type is always false: intended (abs, sign). */
#pragma nv_diag_suppress 186

namespace tnc {

/* The math functions the expressions name, picked by argument type. Defined
 * in this namespace so that they, not the global double versions, are found
 * for float arguments. */
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float sin(float x) { return ::sinf(x); }
__device__ __forceinline__ double sin(double x) { return ::sin(x); }
__device__ __forceinline__ float cos(float x) { return ::cosf(x); }
__device__ __forceinline__ double cos(double x) { return ::cos(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ double erf(double x) { return ::erf(x); }
__device__ __forceinline__ float erfc(float x) { return ::erfcf(x); }
__device__ __forceinline__ double erfc(double x) { return ::erfc(x); }

/* TN_POWX: float in float, double in double (CUDA's powf / pow, within a
 * few ulp of the C library's). Integers: exact and wrapping, by squaring
 * modulo 2^64 (tn_ipow, engine/core/convert.h), as the CPU and PyTorch. */
__device__ __forceinline__ float tn_pow_dev(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double tn_pow_dev(double x, double y) { return ::pow(x, y); }
template <typename T> __device__ __forceinline__ T tn_pow_dev(T x, T y) {
    return static_cast<T>(tn_ipow(static_cast<int64_t>(x), static_cast<int64_t>(y)));
}

enum pw_kind { K_ALL, K_FLOAT, K_NOBOOL, K_CMP };

template <int K, typename T> __host__ __device__ constexpr bool kind_has() {
    if constexpr (K == K_FLOAT)
        return is_float_v<T>;
    else if constexpr (K == K_NOBOOL)
        return !std::is_same<T, uint8_t>::value;
    else
        return true;
}

/* One struct per op: eval() is the expression of pw_ops.h. */
#define TNC_BINARY_OP(name, kind, expr)                                                            \
    struct bop_##name {                                                                            \
        static constexpr int KIND = K_##kind;                                                      \
        static constexpr const char *NAME = #name;                                                 \
        template <typename T> __device__ __forceinline__ static auto eval(T x, T y) {              \
            return (expr);                                                                         \
        }                                                                                          \
    };
#define TNC_UNARY_OP(name, kind, expr)                                                             \
    struct uop_##name {                                                                            \
        static constexpr int KIND = K_##kind;                                                      \
        static constexpr const char *NAME = #name;                                                 \
        template <typename T> __device__ __forceinline__ static auto eval(T x, T c0, T c1) {       \
            (void)c0;                                                                              \
            (void)c1;                                                                              \
            return (expr);                                                                         \
        }                                                                                          \
    };
TN_PW_BINARY_OPS(TNC_BINARY_OP)
TN_PW_UNARY_OPS(TNC_UNARY_OP)
#undef TNC_BINARY_OP
#undef TNC_UNARY_OP

/* out = op(x, y): operands out, x, y; computed in T's compute type */
template <class OP, typename T, typename OT> struct binary_f {
    using T0 = OT;
    using T1 = T;
    using T2 = T;
    using T3 = uint8_t;
    static constexpr int NOPS = 3;
    static constexpr unsigned LOADS = 6u, STORES = 1u;
    __device__ __forceinline__ void operator()(OT &o, T &x, T &y, uint8_t &) const {
        o = to_elem<OT>(OP::eval(ld(x), ld(y)));
    }
};

/* out = op(x; c0, c1): operands out, x; c0, c1 in T's compute type (a half's
 * rounded to the dtype) */
template <class OP, typename T> struct unary_f {
    using T0 = T;
    using T1 = T;
    using T2 = uint8_t;
    using T3 = uint8_t;
    static constexpr int NOPS = 2;
    static constexpr unsigned LOADS = 2u, STORES = 1u;
    compute_t<T> c0, c1;
    __device__ __forceinline__ void operator()(T &o, T &x, uint8_t &, uint8_t &) const {
        o = to_elem<T>(OP::eval(ld(x), c0, c1));
    }
};

/* out = mask ? 0 : x: operands out, x, mask (bool) */
template <typename T> struct masked_zero_f {
    using T0 = T;
    using T1 = T;
    using T2 = uint8_t;
    using T3 = uint8_t;
    static constexpr int NOPS = 3;
    static constexpr unsigned LOADS = 6u, STORES = 1u;
    __device__ __forceinline__ void operator()(T &o, T &x, uint8_t &m, uint8_t &) const {
        o = m ? st<T>(0) : x;
    }
};

/* TN_PW_WHERE: out = cond ? x : y; a select moves bits, so T is by width. */
template <typename T> struct where_f {
    using T0 = T;
    using T1 = uint8_t;
    using T2 = T;
    using T3 = T;
    static constexpr int NOPS = 4;
    static constexpr unsigned LOADS = 14u, STORES = 1u;
    __device__ __forceinline__ void operator()(T &o, uint8_t &c, T &x, T &y) const {
        o = c ? x : y;
    }
};

namespace {

tn_status bad_dtype(const char *op, tn_dtype dt) {
    return tn__error(TN_ERR_DTYPE, "CUDA pointwise: \"%s\" not implemented for '%s'", op,
                     dtype_name(dt));
}

template <class OP, typename T> tn_status launch_binary(int dev, const tn_iter *it) {
    using OT = typename std::conditional<OP::KIND == K_CMP, uint8_t, T>::type;
    return pw_launch(dev, binary_f<OP, T, OT>{}, it, OP::NAME);
}

template <class OP> tn_status run_binary(int dev, tn_dtype dt, const tn_iter *it) {
    return dispatch(dt, OP::NAME, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (kind_has<OP::KIND, T>())
            return launch_binary<OP, T>(dev, it);
        else
            return bad_dtype(OP::NAME, dt);
    });
}

template <class OP>
tn_status run_unary(int dev, tn_dtype dt, const tn_iter *it, const tn_pw_ctx *c) {
    return dispatch(dt, OP::NAME, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = compute_t<T>;
        if constexpr (kind_has<OP::KIND, T>()) {
            /* the scalars convert to the compute type once, on the host, as the CPU does
             * (a half's rounded to the dtype first, as PyTorch converts an op's scalars) */
            unary_f<OP, T> f;
            f.c0 = c ? ld(scalar_elem<T>(c->c0)) : C(0);
            f.c1 = c ? ld(scalar_elem<T>(c->c1)) : C(0);
            return pw_launch(dev, f, it, OP::NAME);
        } else {
            return bad_dtype(OP::NAME, dt);
        }
    });
}

} // namespace

/* optim.cu */
tn_status sgd_step(int dev, tn_dtype dt, const tn_iter *it, const tn_sgd_ctx *c);
tn_status adam_step(int dev, tn_dtype dt, const tn_iter *it, const tn_adam_ctx *c);

/* extern "C" inside the namespace: C linkage, and the math overloads above
 * stay out of the global namespace (where they would clash with CUDA's). */
extern "C" tn_status tn__cuda_pointwise(int dev, tn_pw_code code, tn_dtype dt, const tn_iter *it,
                                        const void *ctx) {
    if (!it) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA pointwise: iterator is NULL");
    const tn_pw_ctx *pc = static_cast<const tn_pw_ctx *>(ctx);
    switch (code) {
#define TNC_BINARY_CASE(name, kind, expr)                                                          \
    case TN_PW_##name:                                                                             \
        return run_binary<bop_##name>(dev, dt, it);
#define TNC_UNARY_CASE(name, kind, expr)                                                           \
    case TN_PW_##name:                                                                             \
        return run_unary<uop_##name>(dev, dt, it, pc);
        TN_PW_BINARY_OPS(TNC_BINARY_CASE)
        TN_PW_UNARY_OPS(TNC_UNARY_CASE)
#undef TNC_BINARY_CASE
#undef TNC_UNARY_CASE
    case TN_PW_MASKED_ZERO:
        return dispatch(dt, "masked_fill", [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (is_float_v<T>)
                return pw_launch(dev, masked_zero_f<T>{}, it, "masked_zero");
            else
                return bad_dtype("masked_fill", dt);
        });
    case TN_PW_WHERE:
        /* a select moves bits: one kernel per width */
        return dispatch(dt, "where", [&](auto tag) {
            return pw_launch(dev, where_f<bits_t<typename decltype(tag)::type>>{}, it, "where");
        });
    case TN_PW_SGD:
        if (!ctx) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA SGD step: context is NULL");
        return sgd_step(dev, dt, it, static_cast<const tn_sgd_ctx *>(ctx));
    case TN_PW_ADAM:
        if (!ctx) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA Adam step: context is NULL");
        return adam_step(dev, dt, it, static_cast<const tn_adam_ctx *>(ctx));
    default:
        break;
    }
    return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA pointwise: unknown op code %d", (int)code);
}

} // namespace tnc
