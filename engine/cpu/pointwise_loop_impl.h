/* engine/cpu/pointwise_loop_impl.h — the pointwise row loops of one dtype,
 * included by pw_kernels.c once per dtype with SUF defined:
 * binary_loop_SUF (output T), cmp_loop_SUF (output bool) and unary_loop_SUF.
 * Each takes the op's element function (pointwise_loops.h), which computes
 * in CT (float32 for the halves: each element is loaded with TN_LD and the
 * result rounded once with TN_ST), and is inlined into the op's loop. Float
 * dtypes also get pw_special_impl.h's loops. */
#define T TN_T(SUF)
#define CT TN_CT(SUF)
#define F(name) TN_NAME(name, SUF)

#define OT T
#define OC CT
#define STO(v) TN_ST(SUF, v)
#define LOOP F(binary_loop)
#include "pointwise_binary_impl.h"
#define OT uint8_t
#define OC uint8_t
#define STO(v) (v)
#define LOOP F(cmp_loop)
#include "pointwise_binary_impl.h"

/* A double scalar of an op as CT: for the halves rounded to the dtype first,
 * as PyTorch converts an op's scalars to the tensor's type (bf16 x + 0.0039063
 * adds 0.00390625). */
#if TN_IS_HALF(SUF)
#define SCALAR(v) TN_LD(SUF, TN_ST(SUF, v))
#else
#define SCALAR(v) TN_SCALAR(CT, v)
#endif

/* out[i] = op(x[i], c0, c1), c0 and c1 the context's scalars as CT (0
 * without a context). Paths: contiguous, strided. */
static inline __attribute__((always_inline)) void
F(unary_loop)(const tn_pw_ctx *ctx, int64_t n, char **p, const int64_t *s, CT (*op)(CT, CT, CT)) {
    const CT c0 = ctx ? SCALAR(ctx->c0) : (CT)0;
    const CT c1 = ctx ? SCALAR(ctx->c1) : (CT)0;
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
        T *o = (T *)p[0];
        const T *xs = (const T *)p[1];
        for (int64_t i = 0; i < n; i++)
            o[i] = TN_ST(SUF, op(TN_LD(SUF, xs[i]), c0, c1));
    } else {
        char *o = p[0];
        const char *xp = p[1];
        for (int64_t i = 0; i < n; i++, o += s[0], xp += s[1])
            *(T *)o = TN_ST(SUF, op(TN_LD(SUF, *(const T *)xp), c0, c1));
    }
}

#if TN_IS_FLOAT(SUF)
#include "pw_special_impl.h"
#endif

#undef T
#undef CT
#undef SCALAR
#undef F
#undef SUF
