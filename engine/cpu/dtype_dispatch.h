/* engine/cpu/dtype_dispatch.h — X-macros over dtypes for kernel generation.
 * X(ID, CTYPE, SUFFIX): TN_BOOL is stored as uint8_t holding 0/1. */
#ifndef TN_CPU_DTYPE_DISPATCH_H
#define TN_CPU_DTYPE_DISPATCH_H

#include "../core/convert.h"
#include "../core/half.h"

/* The lists with extra arguments: X(ID, CTYPE, SUFFIX, extra...). */
#define TN_FOR_EACH_WIDE_A(X, ...)                                                                 \
    X(TN_F32, float, f32, __VA_ARGS__) X(TN_F64, double, f64, __VA_ARGS__)
#define TN_FOR_EACH_FLOAT_A(X, ...)                                                                \
    TN_FOR_EACH_WIDE_A(X, __VA_ARGS__)                                                             \
    X(TN_BF16, tn_bf16, bf16, __VA_ARGS__)                                                         \
    X(TN_F16, tn_f16, f16, __VA_ARGS__)
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
#define TN_FOR_EACH_WIDE(X) TN_FOR_EACH_WIDE_A(TN_DROP_, X)
#define TN_FOR_EACH_FLOAT(X) TN_FOR_EACH_FLOAT_A(TN_DROP_, X)
#define TN_FOR_EACH_INT(X) TN_FOR_EACH_INT_A(TN_DROP_, X)
#define TN_FOR_EACH_NOBOOL(X) TN_FOR_EACH_NOBOOL_A(TN_DROP_, X)
#define TN_FOR_EACH_DTYPE(X) TN_FOR_EACH_DTYPE_A(TN_DROP_, X)

/* The kinds of each_dtype.h (TN_EACH): sets of the groups float32/float64
 * (WIDE), bfloat16/float16 (HALVES), the integers (INTS) and bool (BOOLS). */
#define TN_EACH_WIDE 1
#define TN_EACH_HALVES 2
#define TN_EACH_INTS 4
#define TN_EACH_BOOLS 8
#define TN_EACH_FLOAT (TN_EACH_WIDE | TN_EACH_HALVES)
#define TN_EACH_NOBOOL (TN_EACH_FLOAT | TN_EACH_INTS)
#define TN_EACH_DTYPE (TN_EACH_NOBOOL | TN_EACH_BOOLS)

/* Kernels written once per dtype (docs/design.md, "Kernels per dtype"): a
 * kernel file includes its body header once per dtype with SUF (a suffix
 * above) defined (each_dtype.h); the body names its functions TN_NAME(name, SUF) (name_f32) and
 * takes its types from the suffix: TN_T(SUF) the element (storage) type,
 * TN_CT(SUF) the type it computes in (float for the halves, T otherwise),
 * TN_LD(SUF, v) a stored element as TN_CT, TN_ST(SUF, v) a computed value
 * rounded to T (the identity but for the halves: engine/core/half.h),
 * TN_ACC(SUF) the accumulator of sums (double for floats, int64 for integers
 * and bool), TN_IS_FLOAT(SUF) 1 for float dtypes (the halves included),
 * TN_IS_HALF(SUF) 1 for bfloat16 and float16 and TN_IS_BOOL(SUF) 1 for bool
 * (usable in #if), TN_BITS(SUF) the element width in bits. A body never does
 * arithmetic on a T: the halves are structs, so a missing TN_LD does not
 * compile. */
#define TN_CAT_(a, b) a##b
#define TN_CAT(a, b) TN_CAT_(a, b)
#define TN_NAME_(name, s) name##_##s
#define TN_NAME(name, s) TN_NAME_(name, s)
#define TN_T(s) TN_CAT(TN_T_, s)
#define TN_ACC(s) TN_CAT(TN_ACC_, s)
#define TN_IS_FLOAT(s) TN_CAT(TN_IS_FLOAT_, s)
#define TN_IS_BOOL(s) TN_CAT(TN_IS_BOOL_, s)
#define TN_BITS(s) TN_CAT(TN_BITS_, s)
#define TN_CT(s) TN_CAT(TN_CT_, s)
#define TN_IS_HALF(s) TN_CAT(TN_IS_HALF_, s)
#define TN_LD(s, v) TN_CAT(TN_LD_, s)(v)
#define TN_ST(s, v) TN_CAT(TN_ST_, s)(v)
#define TN_ID_(v) (v)
/* TN_TO(SUF, v): any arithmetic value v as a TN_T(SUF) element (TN_CVT's
 * rules; the halves round through float32). TN_SCALAR_TO(SUF, v): a double
 * scalar as an element (TN_SCALAR's rules). */
#define TN_TO(s, v) TN_CAT(TN_TO_, s)(v)
#define TN_SCALAR_TO(s, v) TN_CAT(TN_SCALAR_TO_, s)(v)
#define TN_TO_f32(v) TN_CVT(float, v)
#define TN_TO_f64(v) TN_CVT(double, v)
#define TN_TO_i16(v) TN_CVT(int16_t, v)
#define TN_TO_i32(v) TN_CVT(int32_t, v)
#define TN_TO_i64(v) TN_CVT(int64_t, v)
#define TN_TO_b8(v) TN_CVT(uint8_t, v)
#define TN_TO_bf16 TN_ST_bf16
#define TN_TO_f16 TN_ST_f16
#define TN_SCALAR_TO_f32(v) TN_SCALAR(float, v)
#define TN_SCALAR_TO_f64(v) TN_SCALAR(double, v)
#define TN_SCALAR_TO_i16(v) TN_SCALAR(int16_t, v)
#define TN_SCALAR_TO_i32(v) TN_SCALAR(int32_t, v)
#define TN_SCALAR_TO_i64(v) TN_SCALAR(int64_t, v)
#define TN_SCALAR_TO_b8(v) TN_SCALAR(uint8_t, v)
#define TN_SCALAR_TO_bf16 TN_ST_bf16
#define TN_SCALAR_TO_f16 TN_ST_f16
#define TN_LD_bf16(v) tn_bf16_to_f32(v)
#define TN_LD_f16(v) tn_f16_to_f32(v)
#define TN_ST_bf16(v) tn_f32_to_bf16((float)(v))
#define TN_ST_f16(v) tn_f32_to_f16((float)(v))
#define TN_LD_f32 TN_ID_
#define TN_LD_f64 TN_ID_
#define TN_LD_i16 TN_ID_
#define TN_LD_i32 TN_ID_
#define TN_LD_i64 TN_ID_
#define TN_LD_b8 TN_ID_
#define TN_ST_f32(v) ((float)(v))
#define TN_ST_f64(v) ((double)(v))
#define TN_ST_i16(v) ((int16_t)(v))
#define TN_ST_i32(v) ((int32_t)(v))
#define TN_ST_i64(v) ((int64_t)(v))
#define TN_ST_b8(v) ((uint8_t)(v))
#define TN_CT_f32 float
#define TN_CT_f64 double
#define TN_CT_i16 int16_t
#define TN_CT_i32 int32_t
#define TN_CT_i64 int64_t
#define TN_CT_b8 uint8_t
#define TN_CT_bf16 float
#define TN_CT_f16 float
#define TN_T_bf16 tn_bf16
#define TN_T_f16 tn_f16
#define TN_ACC_bf16 double
#define TN_ACC_f16 double
#define TN_IS_FLOAT_bf16 1
#define TN_IS_FLOAT_f16 1
#define TN_IS_BOOL_bf16 0
#define TN_IS_BOOL_f16 0
#define TN_BITS_bf16 16
#define TN_BITS_f16 16
#define TN_IS_HALF_bf16 1
#define TN_IS_HALF_f16 1
#define TN_IS_HALF_f32 0
#define TN_IS_HALF_f64 0
#define TN_IS_HALF_i16 0
#define TN_IS_HALF_i32 0
#define TN_IS_HALF_i64 0
#define TN_IS_HALF_b8 0
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
