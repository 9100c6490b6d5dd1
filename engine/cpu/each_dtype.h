/* engine/cpu/each_dtype.h — includes the body header named by TN_IMPL (a
 * string) once per dtype of the kind TN_EACH, with SUF set to the dtype's
 * suffix each time (the body #undefs it): the dtypes of TN_FOR_EACH_FLOAT
 * (TN_EACH_FLOAT), of TN_FOR_EACH_NOBOOL (TN_EACH_NOBOOL) or of
 * TN_FOR_EACH_DTYPE (TN_EACH_DTYPE), in the lists' order. A kernel file:
 *   #define TN_IMPL "reduce_impl.h"
 *   #define TN_EACH TN_EACH_DTYPE
 *   #include "each_dtype.h"
 * A dtype added to a list in dtype_dispatch.h is added here too. */
#define SUF f32
#include TN_IMPL
#define SUF f64
#include TN_IMPL
#if TN_EACH != TN_EACH_FLOAT
#define SUF i16
#include TN_IMPL
#define SUF i32
#include TN_IMPL
#define SUF i64
#include TN_IMPL
#endif
#if TN_EACH == TN_EACH_DTYPE
#define SUF b8
#include TN_IMPL
#endif
#undef TN_IMPL
#undef TN_EACH
