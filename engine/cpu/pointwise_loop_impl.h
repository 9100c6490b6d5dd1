/* engine/cpu/pointwise_loop_impl.h — the pointwise row loops of one dtype,
 * included by pw_kernels.c once per dtype with SUF defined:
 * binary_loop_SUF (output T), cmp_loop_SUF (output bool) and unary_loop_SUF.
 * Each takes the op's element function (pointwise_loops.h) and is inlined
 * into the op's loop. Float dtypes also get pw_special_impl.h's loops. */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

#define OT T
#define LOOP F(binary_loop)
#include "pointwise_binary_impl.h"
#define OT uint8_t
#define LOOP F(cmp_loop)
#include "pointwise_binary_impl.h"

/* out[i] = op(x[i], c0, c1), c0 and c1 the context's scalars as T (0 without
 * a context). Paths: contiguous, strided. */
static inline __attribute__((always_inline)) void
F(unary_loop)(const tn_pw_ctx *ctx, int64_t n, char **p, const int64_t *s, T (*op)(T, T, T)) {
    const T c0 = ctx ? TN_SCALAR(T, ctx->c0) : (T)0;
    const T c1 = ctx ? TN_SCALAR(T, ctx->c1) : (T)0;
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
        T *o = (T *)p[0];
        const T *xs = (const T *)p[1];
        for (int64_t i = 0; i < n; i++)
            o[i] = op(xs[i], c0, c1);
    } else {
        char *o = p[0];
        const char *xp = p[1];
        for (int64_t i = 0; i < n; i++, o += s[0], xp += s[1])
            *(T *)o = op(*(const T *)xp, c0, c1);
    }
}

#if TN_IS_FLOAT(SUF)
#include "pw_special_impl.h"
#endif

#undef T
#undef F
#undef SUF
