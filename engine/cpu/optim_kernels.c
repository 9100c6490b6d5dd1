/* The CPU's optimiser update kernels (TN_PW_SGD, TN_PW_ADAM): one fused pass
 * per parameter, in torch's operation order; the scalars come in the
 * contexts of kernel_args.h, computed by engine/optim/. The loops of each
 * float dtype are optim_impl.h's. */
#include <math.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

typedef tn_sgd_ctx sgd_ctx;
typedef tn_adam_ctx adam_ctx;

#define TN_IMPL "optim_impl.h"
#define TN_EACH TN_EACH_FLOAT
#include "each_dtype.h"
