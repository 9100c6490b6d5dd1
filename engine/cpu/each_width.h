/* engine/cpu/each_width.h — includes the body header named by TN_IMPL once
 * per element width, with W set to 8, 16, 32 and 64 bits (the body #undefs
 * it): for kernels that only move bits (where, gather), one loop per width
 * serving every dtype of that width (TN_BITS in dtype_dispatch.h). */
#define W 8
#include TN_IMPL
#define W 16
#include TN_IMPL
#define W 32
#include TN_IMPL
#define W 64
#include TN_IMPL
#undef TN_IMPL
