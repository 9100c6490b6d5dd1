/* The CPU loops of every pointwise op of engine/core/pw_ops.h, expanded
 * per dtype as the op's kind says, the special loops (masked zero,
 * accumulate, where), and the table the CPU backend indexes by code. */
#include "cpu_backend.h"
#include "pointwise_loops.h"

/* The loop bodies of each dtype (binary_loop_SUF, cmp_loop_SUF,
 * unary_loop_SUF) and the special loops (pw_special_impl.h). */
#define TN_IMPL "pointwise_loop_impl.h"
#define TN_EACH TN_EACH_DTYPE
#include "each_dtype.h"

/* Each kind extends the narrower one: FLOAT < NOBOOL (+ integers) < ALL (+
 * bool); comparisons: every input dtype, bool output. */
/* the element functions compute in TN_CT (float32 for the halves) */
#define BIN(ID, T, S, N, EXPR)                                                                     \
    TN_DEFINE_BINARY_LOOP(N##_##S, TN_CT(S), TN_CT(S), binary_loop_##S, EXPR)
#define CMP(ID, T, S, N, EXPR) TN_DEFINE_BINARY_LOOP(N##_##S, TN_CT(S), uint8_t, cmp_loop_##S, EXPR)
#define UN(ID, T, S, N, EXPR) TN_DEFINE_UNARY_LOOP(N##_##S, TN_CT(S), unary_loop_##S, EXPR)
#define LOOPS_FLOAT(N, EXPR) TN_FOR_EACH_FLOAT_A(BIN, N, EXPR)
#define LOOPS_NOBOOL(N, EXPR) TN_FOR_EACH_NOBOOL_A(BIN, N, EXPR)
#define LOOPS_ALL(N, EXPR) TN_FOR_EACH_DTYPE_A(BIN, N, EXPR)
#define LOOPS_CMP(N, EXPR) TN_FOR_EACH_DTYPE_A(CMP, N, EXPR)
#define ULOOPS_FLOAT(N, EXPR) TN_FOR_EACH_FLOAT_A(UN, N, EXPR)
#define ULOOPS_ALL(N, EXPR) TN_FOR_EACH_DTYPE_A(UN, N, EXPR)

#define BINARY(N, KIND, EXPR) LOOPS_##KIND(N, EXPR)
#define UNARY(N, KIND, EXPR) ULOOPS_##KIND(N, EXPR)
TN_PW_BINARY_OPS(BINARY)
TN_PW_UNARY_OPS(UNARY)

#define AT(ID, T, S, N) [ID] = N##_##S,
#define ROW_ALL(N)                                                                                 \
    { TN_FOR_EACH_DTYPE_A(AT, N) }
#define ROW_CMP(N) ROW_ALL(N)
#define ROW_NOBOOL(N)                                                                              \
    { TN_FOR_EACH_NOBOOL_A(AT, N) }
#define ROW_FLOAT(N)                                                                               \
    { TN_FOR_EACH_FLOAT_A(AT, N) }
#define ENTRY(N, KIND, EXPR) [TN_PW_##N] = ROW_##KIND(N),

/* TN_PW_WHERE: a select moves bits, so one loop per element width serves
 * every dtype: where_8 ... where_64 (where_impl.h). */
#define TN_IMPL "where_impl.h"
#include "each_width.h"
#define WHERE_AT(ID, T, S) [ID] = TN_NAME(where, TN_BITS(S)),

/* Every code's loops by dtype, the special ones included (their other
 * dtypes NULL): the CPU backend's one lookup. mz_SUF and acc_SUF are
 * pw_special_impl.h's, tn__cpu_sgd_SUF and tn__cpu_adam_SUF optim_impl.h's. */
const tn_loop_fn tn__pw_loops[TN_PW_COUNT][TN_DTYPE_COUNT] = {
    TN_PW_BINARY_OPS(ENTRY) TN_PW_UNARY_OPS(ENTRY) /* then the special codes */
    [TN_PW_MASKED_ZERO] = ROW_FLOAT(mz),
    [TN_PW_SGD] = ROW_FLOAT(tn__cpu_sgd),
    [TN_PW_ADAM] = ROW_FLOAT(tn__cpu_adam),
    [TN_PW_ACCUM] = ROW_FLOAT(acc),
    [TN_PW_WHERE] = {TN_FOR_EACH_DTYPE(WHERE_AT)},
};
