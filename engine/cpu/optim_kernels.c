/* The CPU's optimiser update kernels (TN_PW_SGD, TN_PW_ADAM): one fused pass
 * per parameter, in torch's operation order; the scalars come in the
 * contexts of kernel_args.h, computed by engine/optim/. The loops of each
 * float dtype are optim_impl.h's. */
#include <math.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

typedef tn_sgd_ctx sgd_ctx;
typedef tn_adam_ctx adam_ctx;

#define SUF f32
#include "optim_impl.h"
#define SUF f64
#include "optim_impl.h"
