/* engine/cpu/dtype_dispatch.h — X-macros over dtypes for kernel generation.
 * X(ID, CTYPE, SUFFIX): TN_BOOL is stored as uint8_t holding 0/1. */
#ifndef TN_CPU_DTYPE_DISPATCH_H
#define TN_CPU_DTYPE_DISPATCH_H

#include "../core/convert.h"

#define TN_FOR_EACH_DTYPE(X)                                                             \
    X(TN_F32, float, f32)                                                                \
    X(TN_F64, double, f64)                                                               \
    X(TN_I16, int16_t, i16)                                                              \
    X(TN_I32, int32_t, i32)                                                              \
    X(TN_I64, int64_t, i64)                                                              \
    X(TN_BOOL, uint8_t, b8)

#define TN_FOR_EACH_FLOAT(X)                                                             \
    X(TN_F32, float, f32)                                                                \
    X(TN_F64, double, f64)

/* Converts a tensor element v to T (engine/core/convert.h): bool stores
 * v != 0, a float or double becomes an integer through tn_cvt_*, any other
 * conversion is a C cast. */
#define TN_CVT(T, v)                                                                     \
    _Generic((T)0, uint8_t: (uint8_t)((v) != 0),                                         \
             int16_t: TN_CVT_INT_(int16_t, tn_cvt_i16, v),                               \
             int32_t: TN_CVT_INT_(int32_t, tn_cvt_i32, v),                               \
             int64_t: TN_CVT_INT_(int64_t, tn_cvt_i64, v), default: (T)(v))
#define TN_CVT_INT_(T, f, v) _Generic((v), float: f(v), double: f(v), default: (T)(v))

/* A double scalar (c0, c1, a fill value) as element type T: integers through
 * int64, wrapped to T's width, as PyTorch's integer scalars. */
#define TN_SCALAR(T, v)                                                                  \
    _Generic((T)0, uint8_t: (uint8_t)((v) != 0), float: (float)(v), double: (double)(v), \
             default: (T)(uint64_t)tn_scalar_to_i64(v))

#endif
