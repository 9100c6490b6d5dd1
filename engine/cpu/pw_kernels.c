/* The CPU loops of every pointwise op of engine/core/pw_ops.h, expanded
 * per dtype as the op's kind says, the masked-zero loop, and the table the
 * CPU backend indexes by code. */
#include "cpu_backend.h"
#include "pointwise_loops.h"

/* Each kind extends the narrower one: FLOAT < NOBOOL (+ integers) < ALL (+ bool). */
#define LOOPS_FLOAT(N, EXPR)                                                              \
    TN_DEFINE_BINARY_LOOP(N##_f32, float, float, EXPR)                                    \
    TN_DEFINE_BINARY_LOOP(N##_f64, double, double, EXPR)
#define LOOPS_NOBOOL(N, EXPR)                                                             \
    LOOPS_FLOAT(N, EXPR)                                                                  \
    TN_DEFINE_BINARY_LOOP(N##_i16, int16_t, int16_t, EXPR)                                \
    TN_DEFINE_BINARY_LOOP(N##_i32, int32_t, int32_t, EXPR)                                \
    TN_DEFINE_BINARY_LOOP(N##_i64, int64_t, int64_t, EXPR)
#define LOOPS_ALL(N, EXPR)                                                                \
    LOOPS_NOBOOL(N, EXPR)                                                                 \
    TN_DEFINE_BINARY_LOOP(N##_b8, uint8_t, uint8_t, EXPR)
/* comparisons: every input dtype, bool output */
#define LOOPS_CMP(N, EXPR)                                                                \
    TN_DEFINE_BINARY_LOOP(N##_f32, float, uint8_t, EXPR)                                  \
    TN_DEFINE_BINARY_LOOP(N##_f64, double, uint8_t, EXPR)                                 \
    TN_DEFINE_BINARY_LOOP(N##_i16, int16_t, uint8_t, EXPR)                                \
    TN_DEFINE_BINARY_LOOP(N##_i32, int32_t, uint8_t, EXPR)                                \
    TN_DEFINE_BINARY_LOOP(N##_i64, int64_t, uint8_t, EXPR)                                \
    TN_DEFINE_BINARY_LOOP(N##_b8, uint8_t, uint8_t, EXPR)
#define ULOOPS_FLOAT(N, EXPR)                                                             \
    TN_DEFINE_UNARY_LOOP(N##_f32, float, EXPR)                                            \
    TN_DEFINE_UNARY_LOOP(N##_f64, double, EXPR)
#define ULOOPS_ALL(N, EXPR)                                                               \
    ULOOPS_FLOAT(N, EXPR)                                                                 \
    TN_DEFINE_UNARY_LOOP(N##_i16, int16_t, EXPR)                                          \
    TN_DEFINE_UNARY_LOOP(N##_i32, int32_t, EXPR)                                          \
    TN_DEFINE_UNARY_LOOP(N##_i64, int64_t, EXPR)                                          \
    TN_DEFINE_UNARY_LOOP(N##_b8, uint8_t, EXPR)

#define BINARY(N, KIND, EXPR) LOOPS_##KIND(N, EXPR)
#define UNARY(N, KIND, EXPR) ULOOPS_##KIND(N, EXPR)
TN_PW_BINARY_OPS(BINARY)
TN_PW_UNARY_OPS(UNARY)

#define ROW_ALL(N) {N##_f32, N##_f64, N##_i16, N##_i32, N##_i64, N##_b8}
#define ROW_CMP(N) ROW_ALL(N)
#define ROW_NOBOOL(N) {N##_f32, N##_f64, N##_i16, N##_i32, N##_i64, NULL}
#define ROW_FLOAT(N) {N##_f32, N##_f64, NULL, NULL, NULL, NULL}
#define ENTRY(N, KIND, EXPR) [TN_PW_##N] = ROW_##KIND(N),


/* out = mask ? 0 : x (mask is bool, passed as operand 2) */
#define MZ(T)                                                                             \
    static void mz_##T(void *c, int64_t n, char **p, const int64_t *s) {                  \
        (void)c;                                                                          \
        if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == 1) { /* vectorised */       \
            T *o = (T *)p[0];                                                             \
            const T *x = (const T *)p[1];                                                 \
            const uint8_t *m = (const uint8_t *)p[2];                                     \
            for (int64_t i = 0; i < n; i++) o[i] = m[i] ? (T)0 : x[i];                    \
            return;                                                                       \
        }                                                                                 \
        for (int64_t i = 0; i < n; i++)                                                   \
            *(T *)(p[0] + i * s[0]) =                                                     \
                *(const uint8_t *)(p[2] + i * s[2]) ? (T)0 : *(const T *)(p[1] + i * s[1]); \
    }
MZ(float)
MZ(double)


/* TN_PW_ACCUM: out += x where out may repeat (stride 0 over the dims a
 * gradient is summed over); the dispatcher runs it serially. */
#define ACC(T)                                                                            \
    static void acc_##T(void *c, int64_t n, char **p, const int64_t *s) {                 \
        (void)c;                                                                          \
        if (s[0] == 0) {                                                                  \
            T acc = 0;                                                                    \
            for (int64_t i = 0; i < n; i++) acc += *(const T *)(p[1] + i * s[1]);         \
            *(T *)p[0] += acc;                                                            \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++)                                               \
                *(T *)(p[0] + i * s[0]) += *(const T *)(p[1] + i * s[1]);                 \
        }                                                                                 \
    }
ACC(float)
ACC(double)

/* TN_PW_WHERE: out = cond ? x : y (operands out, cond (bool), x, y). A
 * select moves bits, so one loop per element width serves every dtype. */
#define WHERE(T)                                                                          \
    static void where_##T(void *c, int64_t n, char **p, const int64_t *s) {               \
        (void)c;                                                                          \
        if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {   \
            T *o = (T *)p[0];                                                             \
            const uint8_t *m = (const uint8_t *)p[1];                                     \
            const T *x = (const T *)p[2], *y = (const T *)p[3];                           \
            for (int64_t i = 0; i < n; i++) o[i] = m[i] ? x[i] : y[i];                    \
            return;                                                                       \
        }                                                                                 \
        for (int64_t i = 0; i < n; i++)                                                   \
            *(T *)(p[0] + i * s[0]) = *(const uint8_t *)(p[1] + i * s[1])                 \
                                          ? *(const T *)(p[2] + i * s[2])                 \
                                          : *(const T *)(p[3] + i * s[3]);                \
    }
WHERE(uint8_t)
WHERE(uint16_t)
WHERE(uint32_t)
WHERE(uint64_t)

/* Every code's loops by dtype, the special ones included (their other
 * dtypes NULL): the CPU backend's one lookup. */
const tn_loop_fn tn__pw_loops[TN_PW_COUNT][TN_DTYPE_COUNT] = {
    TN_PW_BINARY_OPS(ENTRY) TN_PW_UNARY_OPS(ENTRY)
    [TN_PW_MASKED_ZERO] = {mz_float, mz_double},
    [TN_PW_SGD] = {tn__cpu_sgd_f32, tn__cpu_sgd_f64},
    [TN_PW_ADAM] = {tn__cpu_adam_f32, tn__cpu_adam_f64},
    [TN_PW_ACCUM] = {acc_float, acc_double},
    [TN_PW_WHERE] = {where_uint32_t, where_uint64_t, where_uint16_t, where_uint32_t,
                     where_uint64_t, where_uint8_t},
};
