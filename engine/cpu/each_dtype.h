/* engine/cpu/each_dtype.h — includes the body header named by TN_IMPL (a
 * string) once per dtype of the groups TN_EACH names (dtype_dispatch.h):
 * float32 and float64 (TN_EACH_WIDE), bfloat16 and float16
 * (TN_EACH_HALVES), int16/32/64 (TN_EACH_INTS), bool (TN_EACH_BOOLS), or
 * the usual unions of them, TN_EACH_FLOAT (the lists' TN_FOR_EACH_FLOAT),
 * TN_EACH_NOBOOL and TN_EACH_DTYPE; SUF is set to the dtype's suffix each
 * time (the body #undefs it), in the lists' order. The families whose halves
 * the device layer widens to float32 (engine/core/widen.h) take
 * TN_EACH_WIDE. A kernel file:
 *   #define TN_IMPL "reduce_impl.h"
 *   #define TN_EACH TN_EACH_DTYPE
 *   #include "each_dtype.h"
 * A dtype added to a list in dtype_dispatch.h is added here too. */
#if TN_EACH & TN_EACH_WIDE
#define SUF f32
#include TN_IMPL
#define SUF f64
#include TN_IMPL
#endif
#if TN_EACH & TN_EACH_HALVES
#define SUF bf16
#include TN_IMPL
#define SUF f16
#include TN_IMPL
#endif
#if TN_EACH & TN_EACH_INTS
#define SUF i16
#include TN_IMPL
#define SUF i32
#include TN_IMPL
#define SUF i64
#include TN_IMPL
#endif
#if TN_EACH & TN_EACH_BOOLS
#define SUF b8
#include TN_IMPL
#endif
#undef TN_IMPL
#undef TN_EACH
