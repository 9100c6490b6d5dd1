/* engine/cpu/pointwise_loops.h — row loops for pointwise kernels, one per
 * (op, dtype), from the expressions of engine/core/pw_ops.h: each is an
 * element function of the expression passed to the dtype's loop body
 * (pointwise_loop_impl.h), both inlined. Each loop has a contiguous fast
 * path the compiler vectorises, broadcast-scalar paths and a strided path.
 * Operands: p[0] out, p[1] x, p[2] y. EXPR sees x, y (of type T) and c0, c1
 * (ctx scalars as T).
 */
#ifndef TN_CPU_POINTWISE_LOOPS_H
#define TN_CPU_POINTWISE_LOOPS_H

#include <math.h>

#include "dtype_dispatch.h"
#include "isa.h"
#include "iter.h"

/* NAME: the loop of one (op, dtype) for the table: out[i] = EXPR(x, y) as
 * OT, through LOOP (binary_loop_SUF or cmp_loop_SUF, pointwise_loop_impl.h)
 * with the expression as an inlined element function. Always inlined: GCC
 * judged a long one (GELU's derivative, two exps) too big and called it per
 * element, which kept the loop scalar (4x slower). */
#define TN_PW_INLINE static inline __attribute__((always_inline))
#define TN_DEFINE_BINARY_LOOP(NAME, T, OT, LOOP, EXPR)                                             \
    TN_PW_INLINE OT NAME##_op(T x, T y) { return TN_CVT(OT, (EXPR)); }                             \
    static void NAME(void *ctx, int64_t n, char **p, const int64_t *s) {                           \
        (void)ctx;                                                                                 \
        LOOP(n, p, s, NAME##_op);                                                                  \
    }

/* out[i] = EXPR(x; c0, c1) through unary_loop_SUF. */
#define TN_DEFINE_UNARY_LOOP(NAME, T, LOOP, EXPR)                                                  \
    TN_PW_INLINE T NAME##_op(T x, T c0, T c1) {                                                    \
        (void)c0, (void)c1;                                                                        \
        return TN_CVT(T, (EXPR));                                                                  \
    }                                                                                              \
    static void NAME(void *ctx, int64_t n, char **p, const int64_t *s) {                           \
        LOOP(ctx, n, p, s, NAME##_op);                                                             \
    }

/* The loops of every pointwise code (engine/cpu/pw_kernels.c), the special
 * ones after TN_PW_MASKED_ZERO included: NULL where the code has no such
 * dtype. */
extern const tn_loop_fn tn__pw_loops[TN_PW_COUNT][TN_DTYPE_COUNT];

#endif
