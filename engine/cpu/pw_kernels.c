/* The CPU loops of every pointwise op of engine/core/pw_ops.h, expanded
 * per dtype as the op's kind says, and the table the drivers index by code. */
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

const tn_loop_fn tn__pw_loops[TN_PW_COUNT][TN_DTYPE_COUNT] = {
    TN_PW_BINARY_OPS(ENTRY) TN_PW_UNARY_OPS(ENTRY)};
