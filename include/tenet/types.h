/* tenet/types.h — basic types shared by every public header.
 *
 * All handles are opaque. Sizes and strides are int64_t (in elements), byte
 * counts size_t. A tensor has at most TN_MAX_DIMS dimensions.
 */
#ifndef TENET_TYPES_H
#define TENET_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN_MAX_DIMS 8

/* The library is built with hidden visibility; the public headers bracket
 * their declarations with these, so only the public API is exported. */
#if defined(__GNUC__)
#define TN_API_BEGIN _Pragma("GCC visibility push(default)")
#define TN_API_END _Pragma("GCC visibility pop")
#else
#define TN_API_BEGIN
#define TN_API_END
#endif

/* A result the caller must check (the compiler warns when it is ignored). */
#if defined(__GNUC__)
#define TN_NODISCARD __attribute__((warn_unused_result))
#else
#define TN_NODISCARD
#endif

/* Opaque, atomically refcounted tensor handle. */
typedef struct tn_tensor tn_tensor;
/* Opaque, atomically refcounted autograd graph node (a grad_fn). */
typedef struct tn_node tn_node;

typedef enum tn_dtype {
    TN_F32 = 0,
    TN_F64 = 1,
    TN_I16 = 2,
    TN_I32 = 3,
    TN_I64 = 4,
    TN_BOOL = 5,
    TN_BF16 = 6, /* bfloat16: storage type, computed in float32 (docs/api.md) */
    TN_F16 = 7,  /* float16 (IEEE binary16): storage type, computed in float32 */
    TN_DTYPE_COUNT,
    /* Pseudo dtype for tn_new_tensor / tn_to: keep the source's dtype. */
    TN_DTYPE_SAME = -1
} tn_dtype;

typedef enum tn_device_type {
    TN_CPU = 0,
    TN_CUDA = 1,
    TN_DEVICE_SAME = -1 /* pseudo device type: keep the source's device */
} tn_device_type;

typedef struct tn_device {
    tn_device_type type;
    int index;
} tn_device;

/* Convenience device values. */
#define TN_DEVICE_CPU ((tn_device){TN_CPU, 0})
#define TN_DEVICE_KEEP ((tn_device){TN_DEVICE_SAME, 0})
#define TN_DEVICE_CUDA(i) ((tn_device){TN_CUDA, (i)})

typedef enum tn_status {
    TN_OK = 0,
    TN_ERR_INVALID_ARGUMENT = -1, /* NULL handle, bad option value */
    TN_ERR_SHAPE = -2,            /* shapes do not match / broadcast / overflow */
    TN_ERR_DTYPE = -3,            /* dtype not supported or mismatched */
    TN_ERR_DEVICE = -4,           /* device mismatch or unavailable */
    TN_ERR_OUT_OF_MEMORY = -5,
    TN_ERR_AUTOGRAD = -6,         /* autograd rule violated (leaf in-place, ...) */
    TN_ERR_INPLACE_MODIFIED = -7, /* saved tensor's version moved */
    TN_ERR_NAN = -8,              /* anomaly mode: a NaN/Inf was produced */
    TN_ERR_INDEX = -9,            /* dimension or index out of range */
    TN_ERR_INTERNAL = -10,        /* a bug in tenet: please report it */
    TN_ERR_IO = -11,              /* a file cannot be opened, read or written */
    TN_ERR_FORMAT = -12,          /* a file's bytes break its format (tenet/io.h) */
    TN_ERR_DIST = -13             /* a collective failed or the ranks disagree (tenet/dist.h) */
} tn_status;

#ifdef __cplusplus
}
#endif
#endif
