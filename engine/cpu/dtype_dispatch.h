/* engine/cpu/dtype_dispatch.h — X-macros over dtypes for kernel generation.
 * X(ID, CTYPE, SUFFIX): TN_BOOL is stored as uint8_t holding 0/1. */
#ifndef TN_CPU_DTYPE_DISPATCH_H
#define TN_CPU_DTYPE_DISPATCH_H

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

/* Converts v to T; bool (uint8_t) stores v != 0. */
#define TN_CVT(T, v) _Generic((T)0, uint8_t: (uint8_t)((v) != 0), default: (T)(v))

#endif
