/* engine/core/base.h — what every engine file may use, kernels included:
 * compiler helpers, errors, memory, dtypes, threads, random numbers. No
 * tensor objects: the CPU kernels (engine/cpu/) see pointers, shapes and
 * strides only (kernel_args.h), and include this header, kernel_args.h and
 * backend.h — nothing else of core.
 */
#ifndef TN_CORE_BASE_H
#define TN_CORE_BASE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tenet/tensor.h" /* tn_last_status, tn_dtype_name */

#define TN_CACHELINE 64

#if defined(__GNUC__)
#define TN_LIKELY(x) __builtin_expect(!!(x), 1)
#define TN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TN_LIKELY(x) (x)
#define TN_UNLIKELY(x) (x)
#define TN_PRINTF(a, b)
#endif

/* ---- errors ---------------------------------------------------------------- */
tn_status tn__error(tn_status st, const char *fmt, ...) TN_PRINTF(2, 3);
void tn__warn(const char *fmt, ...) TN_PRINTF(1, 2);
#define TN_CHECK_NULL_ARG(t, name)                                                     \
    do {                                                                               \
        if (TN_UNLIKELY(!(t))) {                                                       \
            tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", __func__, \
                      name);                                                           \
            return NULL;                                                               \
        }                                                                              \
    } while (0)
#define TN_CHECK_NULL_ARG_ST(t, name)                                                    \
    do {                                                                                 \
        if (TN_UNLIKELY(!(t)))                                                           \
            return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", __func__, \
                             name);                                                      \
    } while (0)

/* ---- memory ---------------------------------------------------------------- */
void *tn__alloc(size_t bytes);          /* 64-byte aligned, jemalloc; NULL + error */
void tn__free(void *p);
void *tn__calloc_small(size_t bytes);   /* metadata: zeroed, NULL + error */
void tn__free_small(void *p);
/* ---- dtype ----------------------------------------------------------------- */
extern const size_t tn__dtype_sizes[TN_DTYPE_COUNT];
static inline bool tn__is_float(tn_dtype d) { return d == TN_F32 || d == TN_F64; }
static inline bool tn__valid_dtype(tn_dtype d) { return d >= 0 && d < TN_DTYPE_COUNT; }
double tn__load(const void *p, tn_dtype dt);
/* Stores v as dt; integers through int64, wrapped (engine/core/convert.h). */
void tn__store(void *p, tn_dtype dt, double v);
/* A scalar that a factory or a fill stores as dt must fit it: NaN, ±Inf and
 * out-of-range values are an error for integers ("value cannot be converted
 * to type int without overflow", PyTorch's text), finite values beyond
 * float32's range for float32. */
tn_status tn__check_scalar(double v, tn_dtype dt);

/* ---- shapes ---------------------------------------------------------------- */
/* Two's-complement (wrapping) arithmetic for strides and offsets that only
 * empty tensors can overflow: theirs address nothing, PyTorch lets them
 * wrap, and they must not be undefined behaviour. */
static inline int64_t tn__wrap_mul(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}
static inline int64_t tn__wrap_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
/* Elements of a shape: 0 when a dim is 0, whatever the others (one rule for
 * empty shapes); saturates at INT64_MAX for an unchecked shape that overflows. */
int64_t tn__numel(int ndim, const int64_t *shape);
/* The same, exact: false when a non-empty shape's product overflows int64
 * (shape's sizes must be >= 0). */
bool tn__numel_checked(int ndim, const int64_t *shape, int64_t *out);

/* ---- random ---------------------------------------------------------------- */
uint64_t tn__rand_u64(void);
double tn__rand_uniform(void);
double tn__rand_normal(void);

/* ---- threads --------------------------------------------------------------- */
/* OpenMP threads an op of `work` elements may use (1 below the grain). */
int tn__threads_for(int64_t work);
#define TN_GRAIN 32768

#endif
