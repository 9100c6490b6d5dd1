/* engine/cpu/dtype_dispatch.h — X-macros over dtypes for kernel generation.
 * X(ID, CTYPE, SUFFIX): TN_BOOL is stored as uint8_t holding 0/1. */
#ifndef TN_CPU_DTYPE_DISPATCH_H
#define TN_CPU_DTYPE_DISPATCH_H

#include "../core/convert.h"

/* The lists with extra arguments: X(ID, CTYPE, SUFFIX, extra...). */
#define TN_FOR_EACH_FLOAT_A(X, ...)                                                                \
    X(TN_F32, float, f32, __VA_ARGS__) X(TN_F64, double, f64, __VA_ARGS__)
#define TN_FOR_EACH_INT_A(X, ...)                                                                  \
    X(TN_I16, int16_t, i16, __VA_ARGS__)                                                           \
    X(TN_I32, int32_t, i32, __VA_ARGS__)                                                           \
    X(TN_I64, int64_t, i64, __VA_ARGS__)
#define TN_FOR_EACH_NOBOOL_A(X, ...)                                                               \
    TN_FOR_EACH_FLOAT_A(X, __VA_ARGS__) TN_FOR_EACH_INT_A(X, __VA_ARGS__)
#define TN_FOR_EACH_DTYPE_A(X, ...)                                                                \
    TN_FOR_EACH_NOBOOL_A(X, __VA_ARGS__) X(TN_BOOL, uint8_t, b8, __VA_ARGS__)

/* The plain lists, X(ID, CTYPE, SUFFIX). They expand through the lists
 * above, so X must not use a TN_FOR_EACH_*_A list itself. */
#define TN_DROP_(ID, CTYPE, SUF, X) X(ID, CTYPE, SUF)
#define TN_FOR_EACH_FLOAT(X) TN_FOR_EACH_FLOAT_A(TN_DROP_, X)
#define TN_FOR_EACH_INT(X) TN_FOR_EACH_INT_A(TN_DROP_, X)
#define TN_FOR_EACH_NOBOOL(X) TN_FOR_EACH_NOBOOL_A(TN_DROP_, X)
#define TN_FOR_EACH_DTYPE(X) TN_FOR_EACH_DTYPE_A(TN_DROP_, X)

/* The kinds of each_dtype.h (TN_EACH). */
#define TN_EACH_FLOAT 1
#define TN_EACH_NOBOOL 2
#define TN_EACH_DTYPE 3

/* Kernels written once per dtype (docs/design.md, "Kernels per dtype"): a
 * kernel file includes its body header once per dtype with SUF (a suffix
 * above) defined (each_dtype.h); the body names its functions TN_NAME(name, SUF) (name_f32) and
 * takes its types from the suffix: TN_T(SUF) the element type, TN_ACC(SUF)
 * the accumulator of sums (double for floats, int64 for integers and bool),
 * TN_IS_FLOAT(SUF) 1 for float dtypes and TN_IS_BOOL(SUF) 1 for bool
 * (usable in #if), TN_BITS(SUF) the element width in bits. */
#define TN_CAT_(a, b) a##b
#define TN_CAT(a, b) TN_CAT_(a, b)
#define TN_NAME_(name, s) name##_##s
#define TN_NAME(name, s) TN_NAME_(name, s)
#define TN_T(s) TN_CAT(TN_T_, s)
#define TN_ACC(s) TN_CAT(TN_ACC_, s)
#define TN_IS_FLOAT(s) TN_CAT(TN_IS_FLOAT_, s)
#define TN_IS_BOOL(s) TN_CAT(TN_IS_BOOL_, s)
#define TN_BITS(s) TN_CAT(TN_BITS_, s)
#define TN_T_f32 float
#define TN_T_f64 double
#define TN_T_i16 int16_t
#define TN_T_i32 int32_t
#define TN_T_i64 int64_t
#define TN_T_b8 uint8_t
#define TN_ACC_f32 double
#define TN_ACC_f64 double
#define TN_ACC_i16 int64_t
#define TN_ACC_i32 int64_t
#define TN_ACC_i64 int64_t
#define TN_ACC_b8 int64_t
#define TN_IS_FLOAT_f32 1
#define TN_IS_FLOAT_f64 1
#define TN_IS_FLOAT_i16 0
#define TN_IS_FLOAT_i32 0
#define TN_IS_FLOAT_i64 0
#define TN_IS_FLOAT_b8 0
#define TN_IS_BOOL_f32 0
#define TN_IS_BOOL_f64 0
#define TN_IS_BOOL_i16 0
#define TN_IS_BOOL_i32 0
#define TN_IS_BOOL_i64 0
#define TN_IS_BOOL_b8 1
#define TN_BITS_f32 32
#define TN_BITS_f64 64
#define TN_BITS_i16 16
#define TN_BITS_i32 32
#define TN_BITS_i64 64
#define TN_BITS_b8 8

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
