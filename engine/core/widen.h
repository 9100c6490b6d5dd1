/* engine/core/widen.h — half-precision operands of a fused kernel family
 * widened to float32 around the call (engine/core/widen.c).
 *
 * The families with one fused kernel per op (softmax, layer_norm,
 * cross_entropy, attention, the products, im2col/col2im, pooling) have bodies for
 * float32 and float64 only, on every back end. A call in bfloat16 or float16
 * runs the float32 kernel on float32 copies of its half operands and rounds
 * what it wrote back into them: the op computes in float32 and rounds each
 * result once, as PyTorch's CPU kernels do for the half types. The device
 * layer (device.c) does this for every back end alike.
 *
 * A copy keeps its operand's element layout (shape and strides, from offset
 * 0 of a fresh buffer), so the element strides of the family's arguments
 * stay valid; only the pointers change. Every non-NULL pointer argument must
 * be the data pointer of one of the operands given, or the call fails with
 * TN_ERR_INTERNAL (a family that passes an operand the device layer does not
 * know would otherwise read half bits as floats).
 */
#ifndef TN_CORE_WIDEN_H
#define TN_CORE_WIDEN_H

#include "internal.h"

enum { TN_WIDEN_MAX = 12 };

typedef struct tn_widen {
    int nops;
    unsigned written;
    const tn_tensor *orig[TN_WIDEN_MAX];
    /* the operands as the kernel sees them: float32 copies of the half ones
     * (owned, with owned[i]), the others as given */
    const tn_tensor *ops[TN_WIDEN_MAX];
    bool owned[TN_WIDEN_MAX];
} tn_widen;

/* Copies the half operands of ops (nops of them; written: a bit per operand
 * the kernel writes) to float32, and points each argument of fields (the
 * addresses of the family's pointer arguments) at its operand's copy. On
 * failure nothing is left allocated. */
tn_status tn__widen_begin(tn_widen *w, int nops, const tn_tensor *const *ops, unsigned written,
                          void *const *fields, int nfields);
/* After the kernel (status st): rounds the written copies back into their
 * operands when st is TN_OK, releases the copies; returns the first failure. */
tn_status tn__widen_end(tn_widen *w, tn_status st);

#endif
