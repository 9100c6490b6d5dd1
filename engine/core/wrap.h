/* engine/core/wrap.h — tensors over memory tenet does not own (wrap.c). */
#ifndef TN_CORE_WRAP_H
#define TN_CORE_WRAP_H

#include "internal.h"

/* A tensor (no autograd, offset 0) over data with the given shape and
 * strides in elements (NULL: contiguous) on dev; release(ctx) runs when the
 * last reference to the memory goes. Checked: dtype, shape, strides (none
 * negative, the reach within int64 elements and half the address space),
 * data not NULL unless empty, aligned to the element size, dev usable. On
 * failure NULL + error, and release is not called. */
tn_tensor *tn__wrap(void *data, tn_dtype dtype, int ndim, const int64_t *shape,
                    const int64_t *strides, tn_device dev, void (*release)(void *), void *ctx);

#endif
