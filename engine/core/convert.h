/* engine/core/convert.h — conversions and integer powers defined for every
 * value, shared by the CPU kernels, core and the CUDA kernels (plain C11 and
 * CUDA C++, host and device).
 *
 * C leaves a float -> integer conversion undefined when the value is NaN,
 * infinite or out of the target's range. tenet defines each case, as PyTorch
 * behaves on x86-64 (checked against PyTorch 1.13.1):
 *
 *  - tensor elements (copies, to(), type promotion of operands):
 *    int64 and int32 get their minimum value for NaN, ±Inf and out-of-range
 *    values (the "integer indefinite" of the conversion instruction); int16
 *    converts through int32 and keeps the low 16 bits (40000.0 -> -25536,
 *    NaN -> 0); bool is v != 0 (NaN -> true); in-range values truncate
 *    toward zero. tn_cvt_i64 / i32 / i16.
 *  - scalars of integer ops (x + 5, clamp bounds, arange's values): the
 *    scalar becomes an int64 (saturating) and then wraps to the element width
 *    (int32 + 10000000000 adds 1410065408, as PyTorch). tn_scalar_to_i64.
 *    Scalars that a factory or a fill stores directly are checked first
 *    (engine/core/dtype.c, tn__check_scalar): "value cannot be converted to
 *    type int without overflow".
 *  - integer arithmetic wraps (two's complement), as in PyTorch: the CPU
 *    kernels are compiled with -fwrapv (CMakeLists.txt), and integer powers
 *    are computed by squaring modulo 2^64 (tn_ipow), never through a double.
 *
 * Narrowing an integer to a smaller signed type (int64 -> int16) keeps the
 * low bits: implementation-defined in C, two's complement with GCC, Clang
 * and nvcc, the only compilers tenet is built with.
 */
#ifndef TN_CORE_CONVERT_H
#define TN_CORE_CONVERT_H

#include <stdint.h>

#ifdef __CUDACC__
#define TN_CVT_FN static __host__ __device__ __forceinline__
#else
#define TN_CVT_FN static inline
#endif

/* 2^63 and 2^31 as doubles: the first values out of range above. */
#define TN_TWO_63 9223372036854775808.0
#define TN_TWO_31 2147483648.0

TN_CVT_FN int64_t tn_cvt_i64(double v) {
    return v >= -TN_TWO_63 && v < TN_TWO_63 ? (int64_t)v : INT64_MIN;
}
TN_CVT_FN int32_t tn_cvt_i32(double v) {
    return v > -TN_TWO_31 - 1.0 && v < TN_TWO_31 ? (int32_t)v : INT32_MIN;
}
TN_CVT_FN int16_t tn_cvt_i16(double v) {
    return (int16_t)(uint16_t)(uint32_t)tn_cvt_i32(v);
}

/* A scalar operand of an integer op: truncated to an int64, saturating
 * beyond its range (NaN: 0), then wrapped to the element width by the
 * caller's cast. (Scalars that reach a kernel out of int64's range are
 * clamp's "no bound" infinities; the rest are checked or promoted first.) */
TN_CVT_FN int64_t tn_scalar_to_i64(double v) {
    return v >= TN_TWO_63 ? INT64_MAX : v < -TN_TWO_63 ? INT64_MIN : v == v ? (int64_t)v : 0;
}

/* base^exp modulo 2^64 (the caller narrows it). Negative exponents give
 * 1 for base 1, ±1 for base -1 and 0 otherwise, as PyTorch's integer pow. */
TN_CVT_FN uint64_t tn_ipow(int64_t base, int64_t exp) {
    if (exp < 0) return base == 1 ? 1u : base == -1 ? ((exp & 1) ? UINT64_MAX : 1u) : 0u;
    uint64_t r = 1, b = (uint64_t)base;
    for (uint64_t e = (uint64_t)exp; e; e >>= 1) {
        if (e & 1u) r *= b;
        b *= b;
    }
    return r;
}

#endif
