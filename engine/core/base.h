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
/* An argument that is NULL: TN_ERR_INVALID_ARGUMENT with the message,
 * unless `handle` (a tensor or optimiser argument) and the thread's last call
 * failed, with no tensor returned since: the NULL is then most likely that
 * call's result passed on (tn_mean(tn_tanh(tn_add(a, b))), an optimiser that
 * could not be made), and its status and message are kept, so that the end of
 * a chain reports the first failure (PyTorch's words, or out of memory) and
 * not the NULL it left behind. */
tn_status tn__null_arg(bool handle, const char *fmt, ...) TN_PRINTF(2, 3);
/* TN_CHECK_NULL_ARG: a tensor or optimiser handle; _PTR: any other pointer.
 * _ST: in a function that returns a status (else it returns NULL). The message
 * names the function it is in, which must be the public one the user called;
 * a helper shared by several entry points names its caller with the _IN forms
 * (fn: "tn_mean", ...). */
#define TN_CHECK_NULL_(fn, p, name, handle, ret)                                       \
    do {                                                                               \
        if (TN_UNLIKELY(!(p))) {                                                       \
            tn_status st_ = tn__null_arg(handle, "%s: argument '%s' is NULL", fn, name); \
            (void)st_;                                                                 \
            return ret;                                                                \
        }                                                                              \
    } while (0)
#define TN_CHECK_NULL_ARG(t, name) TN_CHECK_NULL_(__func__, t, name, true, NULL)
#define TN_CHECK_NULL_ARG_ST(t, name) TN_CHECK_NULL_(__func__, t, name, true, st_)
#define TN_CHECK_NULL_ARG_IN(fn, t, name) TN_CHECK_NULL_(fn, t, name, true, NULL)
#define TN_CHECK_NULL_ARG_ST_IN(fn, t, name) TN_CHECK_NULL_(fn, t, name, true, st_)
#define TN_CHECK_NULL_PTR(p, name) TN_CHECK_NULL_(__func__, p, name, false, NULL)
#define TN_CHECK_NULL_PTR_ST(p, name) TN_CHECK_NULL_(__func__, p, name, false, st_)

/* ---- internal invariants ----------------------------------------------------
 * TN_ASSERT(cond): a condition the library's own code guarantees (a
 * refcount above zero before a release, a slot within its node). In a debug
 * build (NDEBUG undefined: the asan and tsan presets) a false one prints
 * file:line, the function, the condition and a backtrace to stderr and
 * aborts; in release the condition is type-checked, never evaluated, so it
 * must have no side effect. Never for bad input, which every public
 * function reports with a status and survives (docs/design.md, "Errors").
 * TN_ALWAYS / TN_NEVER (SQLite's ALWAYS / NEVER): "cannot happen, but
 * handled": `if (TN_NEVER(x < 0)) return tn__error(...);` aborts in a debug
 * build when it happens, and in release is the condition's value, so the
 * graceful path runs. */
#ifdef NDEBUG
#define TN_DEBUG 0
#else
#define TN_DEBUG 1
#endif
_Noreturn void tn__assert_fail(const char *cond, const char *file, int line, const char *func);
#if TN_DEBUG
#define TN_ASSERT(c) (TN_LIKELY(c) ? (void)0 : tn__assert_fail(#c, __FILE__, __LINE__, __func__))
#define TN_ALWAYS(c) (TN_LIKELY(c) ? 1 : (tn__assert_fail(#c, __FILE__, __LINE__, __func__), 0))
#define TN_NEVER(c)                                                                                \
    (TN_UNLIKELY(c) ? (tn__assert_fail("!(" #c ")", __FILE__, __LINE__, __func__), 1) : 0)
#else
#define TN_ASSERT(c) ((void)sizeof(!(c)))
#define TN_ALWAYS(c) (!!(c))
#define TN_NEVER(c) (!!(c))
#endif

/* ---- memory ----------------------------------------------------------------
 * Every allocation the library makes goes through these (engine/core/alloc.c),
 * so the allocation-failure hook of include/tenet/testing.h reaches all of
 * them. "NULL + error": NULL and TN_ERR_OUT_OF_MEMORY with a message. */
void *tn__alloc(size_t bytes);          /* 64-byte aligned, jemalloc; NULL + error */
void tn__free(void *p);
void *tn__calloc_small(size_t bytes);   /* metadata: zeroed, NULL + error */
void tn__free_small(void *p);
/* Plain heap blocks (working memory, not tensors'), freed with tn__mfree.
 * NULL + error; the _quiet forms set no error, for callers that go on
 * without the block (a serial fallback, a debug record dropped) and so must
 * not leave a message behind a call that succeeds. */
void *tn__malloc(size_t bytes);
void *tn__calloc(size_t n, size_t size);
void *tn__realloc(void *p, size_t bytes); /* p is kept on failure */
void *tn__malloc_quiet(size_t bytes);
void *tn__calloc_quiet(size_t n, size_t size);
void *tn__aligned_quiet(size_t align, size_t bytes); /* not zeroed */
void tn__mfree(void *p);
/* What of host memory a call that allocates many buffers needs in all (bytes; UINT64_MAX when
 * its count overflowed): TN_ERR_OUT_OF_MEMORY naming `what` when it is more than the machine's
 * memory and swap, checked before the first buffer (each alone may fit; together they would
 * bring the OOM killer, not an error). */
tn_status tn__check_total_bytes(const char *what, uint64_t bytes);
/* ---- dtype ----------------------------------------------------------------- */
extern const size_t tn__dtype_sizes[TN_DTYPE_COUNT];
static inline bool tn__is_float(tn_dtype d) {
    return d == TN_F32 || d == TN_F64 || d == TN_BF16 || d == TN_F16;
}
/* bfloat16 or float16: the 16-bit storage types computed in float32. */
static inline bool tn__is_half(tn_dtype d) { return d == TN_BF16 || d == TN_F16; }
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

/* A worker's share of an OpenMP region in the profiler's timeline: TN_OMP_SPAN("softmax") as
 * the first statement inside `#pragma omp parallel` records, when the profiler is on and the
 * region runs on a team of two or more, a span "omp softmax" on each worker's thread (team size
 * and member in its args) from there to the end of the enclosing block. Off: two calls that
 * read one flag. */
typedef struct tn_omp_span {
    const char *region;
    double t0; /* 0: the profiler was off at the start */
} tn_omp_span;
tn_omp_span tn__omp_span_begin(const char *region);
void tn__omp_span_end(const tn_omp_span *s);
#define TN_OMP_SPAN(region)                                                                  \
    tn_omp_span tn__omp_span_ __attribute__((cleanup(tn__omp_span_end), unused)) =         \
        tn__omp_span_begin(region)

#endif
