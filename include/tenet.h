/* tenet — a lock-free, multithreaded tensor engine with reverse-mode autograd.
 *
 * A tour:
 *
 *   #include <tenet.h>
 *   if (tn_scope_begin() != TN_OK) return;  // everything below is freed at end
 *   int64_t shape[] = {3};
 *   float v[] = {1, 2, 3};
 *   tn_tensor *a = tn_tensor_from(v, TN_F32, 1, shape, true);   // leaf
 *   tn_tensor *y = tn_sum(tn_mul(tn_sigmoid(a), a));
 *   if (!y || tn_backward(y, NULL, false) < 0)
 *       fprintf(stderr, "%s\n", tn_last_error());
 *   tn_print(tn_grad(a), stdout);          // tensor([...])
 *   tn_scope_end();
 *
 * Conventions (see each header): returned tensors are new references; errors
 * are NULL / negative tn_status plus a thread-local message; nothing aborts.
 */
#ifndef TENET_H
#define TENET_H

#include "tenet/types.h"
#include "tenet/version.h"
#include "tenet/tensor.h"
#include "tenet/autograd.h"
#include "tenet/ops.h"
#include "tenet/kv_cache.h"
#include "tenet/optim.h"
#include "tenet/init.h"
#include "tenet/autocast.h"
#include "tenet/runtime.h"
#include "tenet/debug.h"
#include "tenet/threads.h"
#include "tenet/function.h"
#include "tenet/io.h"
#include "tenet/dlpack_io.h"
#include "tenet/sampler.h"
#include "tenet/profile.h"
#include "tenet/numerics.h"

#define TENET_VERSION_MAJOR 0
#define TENET_VERSION_MINOR 1
#define TENET_VERSION_PATCH 0

#endif
