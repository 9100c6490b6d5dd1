/* engine/cpu/pointwise_loops.h — row loops for pointwise kernels, generated
 * per dtype from the expressions of engine/core/pw_ops.h. Each loop has a
 * contiguous fast path the compiler vectorises, a broadcast-scalar path and
 * a strided path. Operands: p[0] out, p[1] x,
 * p[2] y. EXPR sees x, y (of type T) and c0, c1 (ctx scalars as T).
 */
#ifndef TN_CPU_POINTWISE_LOOPS_H
#define TN_CPU_POINTWISE_LOOPS_H

#include <math.h>

#include "dtype_dispatch.h"
#include "iter.h"

/* out[i] = EXPR(x[i], y[i]) */
#define TN_DEFINE_BINARY_LOOP(NAME, T, OT, EXPR)                                          \
    static void NAME(void *ctx_, int64_t n, char **p, const int64_t *s) {                 \
        (void)ctx_;                                                                       \
        if (s[0] == sizeof(OT) && s[1] == sizeof(T) && s[2] == sizeof(T)) {               \
            OT *o = (OT *)p[0];                                                           \
            const T *xs = (const T *)p[1], *ys = (const T *)p[2];                         \
            for (int64_t i = 0; i < n; i++) {                                             \
                T x = xs[i], y = ys[i];                                                   \
                o[i] = TN_CVT(OT, (EXPR));                                                \
            }                                                                             \
        } else if (s[0] == sizeof(OT) && s[1] == sizeof(T) && s[2] == 0) {                \
            OT *o = (OT *)p[0];                                                           \
            const T *xs = (const T *)p[1];                                                \
            const T y = *(const T *)p[2];                                                 \
            for (int64_t i = 0; i < n; i++) {                                             \
                T x = xs[i];                                                              \
                o[i] = TN_CVT(OT, (EXPR));                                                \
            }                                                                             \
        } else if (s[0] == sizeof(OT) && s[1] == 0 && s[2] == sizeof(T)) {                \
            OT *o = (OT *)p[0];                                                           \
            const T x = *(const T *)p[1];                                                 \
            const T *ys = (const T *)p[2];                                                \
            for (int64_t i = 0; i < n; i++) {                                             \
                T y = ys[i];                                                              \
                o[i] = TN_CVT(OT, (EXPR));                                                \
            }                                                                             \
        } else {                                                                          \
            char *o = p[0];                                                               \
            const char *xp = p[1], *yp = p[2];                                            \
            for (int64_t i = 0; i < n; i++, o += s[0], xp += s[1], yp += s[2]) {          \
                T x = *(const T *)xp, y = *(const T *)yp;                                 \
                *(OT *)o = TN_CVT(OT, (EXPR));                                            \
            }                                                                             \
        }                                                                                 \
    }

/* out[i] = EXPR(x[i]; c0, c1) */
#define TN_DEFINE_UNARY_LOOP(NAME, T, EXPR)                                               \
    static void NAME(void *ctx_, int64_t n, char **p, const int64_t *s) {                 \
        const tn_pw_ctx *ctx = ctx_;                                                      \
        const T c0 = ctx ? TN_SCALAR(T, ctx->c0) : (T)0;                                  \
        const T c1 = ctx ? TN_SCALAR(T, ctx->c1) : (T)0;                                  \
        (void)c0;                                                                         \
        (void)c1;                                                                         \
        if (s[0] == sizeof(T) && s[1] == sizeof(T)) {                                     \
            T *o = (T *)p[0];                                                             \
            const T *xs = (const T *)p[1];                                                \
            for (int64_t i = 0; i < n; i++) {                                             \
                T x = xs[i];                                                              \
                o[i] = TN_CVT(T, (EXPR));                                                 \
            }                                                                             \
        } else {                                                                          \
            char *o = p[0];                                                               \
            const char *xp = p[1];                                                        \
            for (int64_t i = 0; i < n; i++, o += s[0], xp += s[1]) {                      \
                T x = *(const T *)xp;                                                     \
                *(T *)o = TN_CVT(T, (EXPR));                                              \
            }                                                                             \
        }                                                                                 \
    }

/* The loops of every pointwise code (engine/cpu/pw_kernels.c), the special
 * ones after TN_PW_MASKED_ZERO included: NULL where the code has no such
 * dtype. */
extern const tn_loop_fn tn__pw_loops[TN_PW_COUNT][TN_DTYPE_COUNT];

#endif
