/* engine/core/pw_ops.h — every pointwise op as one expression, written once
 * and expanded by both backends: the CPU loops (engine/cpu/pw_kernels.c) and
 * the CUDA kernels (engine/cuda/pointwise.cu). Valid C11 and CUDA C++.
 *
 * X(name, kind, expr). Binary expressions see x, y; unary ones see x and the
 * context scalars c0, c1 — all of the compute type. The result is converted
 * to the output type (bool stores v != 0). Kinds say which dtypes exist:
 *   ALL    every dtype          FLOAT  float32, float64
 *   NOBOOL every dtype but bool CMP    any input dtype, bool output
 */
#ifndef TN_CORE_PW_OPS_H
#define TN_CORE_PW_OPS_H

#include "convert.h"

#ifdef __CUDACC__
/* Device overloads pick the float or double function by argument type. */
#define TN_M(fn, x) fn(x)
#define TN_POWX(x, y) tn_pow_dev(x, y)
/* the constant c in x's type (float math stays float) */
#define TN_C(x, c) ((decltype(x))(c))
#define TN_EXP_FAST(x) TN_M(exp, x)
/* x is NaN (false for the integer types, with no self-comparison) */
template <typename T> __host__ __device__ __forceinline__ bool tn_isnan_any(T) { return false; }
__host__ __device__ __forceinline__ bool tn_isnan_any(float x) { return isnan(x); }
__host__ __device__ __forceinline__ bool tn_isnan_any(double x) { return isnan(x); }
#define TN_ISNAN(x) tn_isnan_any(x)
#else
#include <math.h>
#define TN_M(fn, x) _Generic((x), float: fn##f((float)(x)), default: fn((double)(x)))
/* float: powf; double: pow; integers: exact, wrapping (tn_ipow, convert.h). */
#define TN_POWX(x, y) _Generic((x), float: powf((float)(x), (float)(y)), \
                               double: pow((double)(x), (double)(y)),   \
                               default: tn_ipow((int64_t)(x), (int64_t)(y)))
#define TN_C(x, c) _Generic((x), float: (float)(c), default: (double)(c))
#include "fast_exp.h"
/* exp for the loops whose cost it is: float32 vectorised (fast_exp.h, within
 * 1 ulp), float64 the C library's */
#define TN_EXP_FAST(x) _Generic((x), float: tn__expf_fast((float)(x)), default: exp((double)(x)))
#define TN_ISNAN(x)                                                                                \
    _Generic((x), float : isnan((float)(x)), double : isnan((double)(x)), default : 0)
#endif

/* clamp as PyTorch's min(max(x, lo), hi): NaN x stays NaN, lo > hi gives hi everywhere, and a
 * NaN bound (a floating type's) makes every value NaN */
#define TN_CLAMP_LO(x, lo) ((x) < (lo) ? (lo) : (x))
#define TN_CLAMP(x, lo, hi)                                                                        \
    (TN_ISNAN(lo) || TN_ISNAN(hi) ? (lo) + (hi)                                                    \
     : TN_CLAMP_LO(x, lo) > (hi)  ? (hi)                                                           \
                                  : TN_CLAMP_LO(x, lo))

/* GELU's constants: 1/sqrt(2), 1/sqrt(2 pi), sqrt(2/pi), and the cubic's. */
#define TN_GELU_S1_2 0.70710678118654752440
#define TN_GELU_PDF 0.39894228040143267794
#define TN_GELU_BETA 0.79788456080286535588
#define TN_GELU_KAPPA 0.044715
/* The normal CDF, Phi(x) = erfc(-x / sqrt(2)) / 2: erfc keeps its relative precision in the
 * left tail, where 1 + erf(x / sqrt(2)) cancels (float32 at x = -3 loses 2e-5 of it, and the
 * C library's and CUDA's erf, each within an ulp, then disagree by as much). */
#define TN_PHI(x) (TN_C(x, 0.5) * TN_M(erfc, -(x) * TN_C(x, TN_GELU_S1_2)))
/* GELU's tanh form through 1 + tanh(u) = 2 sigmoid(2 u) = 2 / (1 + exp(-2 u)),
 * u = beta (x + kappa x^3): exp is several times faster than tanh in the C
 * library and the form has no cancellation. TN_GELU_S: sigmoid(2 u). */
#define TN_GELU_S(x)                                                                     \
    (1 / (1 + TN_EXP_FAST(TN_C(x, -2 * TN_GELU_BETA) * (x + TN_C(x, TN_GELU_KAPPA) * x * x * x))))

/* The activations' derivatives at x: gelu'(x) = Phi(x) + x phi(x); the tanh form's
 * (1 + t) / 2 + x / 2 (1 - t^2) beta (1 + 3 kappa x^2), t = 2 s - 1; silu's
 * s (1 + x (1 - s)), s = sigmoid(x). */
#define TN_GELU_GRAD(x) (TN_PHI(x) + x * TN_C(x, TN_GELU_PDF) * TN_M(exp, TN_C(x, -0.5) * x * x))
#define TN_GELU_TANH_GRAD(x)                                                                       \
    (TN_GELU_S(x) * (1 + TN_C(x, 2 * TN_GELU_BETA) * x * (1 - TN_GELU_S(x)) *                      \
                             (1 + TN_C(x, 3 * TN_GELU_KAPPA) * x * x)))
#define TN_SILU_GRAD(x) (1 / (1 + TN_EXP_FAST(-x)) * (1 + x * (1 - 1 / (1 + TN_EXP_FAST(-x)))))

/* The op lists keep their layout, one op a line ("x * y": clang-format reads "x *y"). */
// clang-format off
#define TN_PW_BINARY_OPS(X)                                                              \
    X(add, ALL, x + y)                                                                   \
    X(sub, ALL, x - y)                                                                   \
    X(mul, ALL, x * y)                                                                   \
    X(div, FLOAT, x / y)                                                                 \
    X(pow, NOBOOL, TN_POWX(x, y))                                                        \
    /* maximum/minimum propagate NaN, as PyTorch */                                      \
    X(maximum, ALL, (x != x || y != y) ? x + y : (x > y ? x : y))                        \
    X(minimum, ALL, (x != x || y != y) ? x + y : (x < y ? x : y))                        \
    /* gradient share of x in maximum(x, y): 1 if x wins, 1/2 on ties */                 \
    X(maxshare, FLOAT, x > y ? 1 : (x == y ? 0.5 : 0))                                   \
    X(sqdiff, FLOAT, (x - y) * (x - y))                                                  \
    X(eq, CMP, x == y)                                                                   \
    X(ne, CMP, x != y)                                                                   \
    X(lt, CMP, x < y)                                                                    \
    X(le, CMP, x <= y)                                                                   \
    X(gt, CMP, x > y)                                                                    \
    X(ge, CMP, x >= y)                                                                   \
    /* the activations' plain backward (engine/ops/activation.c): the gradient x */      \
    /* times the derivative at the input y, in one pass */                               \
    X(gelu_grad, FLOAT, x * TN_GELU_GRAD(y))                                             \
    X(gelu_tanh_grad, FLOAT, x * TN_GELU_TANH_GRAD(y))                                   \
    X(silu_grad, FLOAT, x * TN_SILU_GRAD(y))

#define TN_PW_UNARY_OPS(X)                                                               \
    X(neg, ALL, -x)                                                                      \
    X(abs, ALL, x < 0 ? -x : x)                                                          \
    X(relu, ALL, x > 0 ? x : 0)                                                          \
    X(exp, FLOAT, TN_M(exp, x))                                                          \
    X(log, FLOAT, TN_M(log, x))                                                          \
    X(sqrt, FLOAT, TN_M(sqrt, x))                                                        \
    X(sin, FLOAT, TN_M(sin, x))                                                          \
    X(cos, FLOAT, TN_M(cos, x))                                                          \
    X(tanh, FLOAT, TN_M(tanh, x))                                                        \
    X(sigmoid, FLOAT, 1 / (1 + TN_M(exp, -x)))                                           \
    X(sign, ALL, (x > 0) - (x < 0))                                                      \
    X(adds, ALL, x + c0)                                                                 \
    X(muls, ALL, x * c0)                                                                 \
    X(rsubs, ALL, c0 - x)                                                                \
    X(pows, FLOAT, TN_POWX(x, c0))                                                       \
    /* PyTorch's clamp: NaN passes through, lo > hi gives hi, a NaN bound NaN */         \
    X(clamp, ALL, TN_CLAMP(x, c0, c1))                                                   \
    /* d clamp / dx (also relu's backward with c0 = 0+, c1 = inf) */                     \
    X(clampmask, FLOAT, (x >= c0 && x <= c1) ? 1 : 0)                                    \
    /* activations (engine/ops/activation.c): GELU (erf and tanh forms), SiLU, */        \
    /* the normal CDF (create_graph's backward of GELU) */                               \
    X(gelu, FLOAT, x * TN_PHI(x))                                                        \
    X(gelu_tanh, FLOAT, x * TN_GELU_S(x))                                                \
    X(silu, FLOAT, x / (1 + TN_EXP_FAST(-x)))                                            \
    X(normcdf, FLOAT, TN_PHI(x))
// clang-format on

#endif
