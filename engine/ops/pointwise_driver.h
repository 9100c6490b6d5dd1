/* engine/ops/pointwise_driver.h — shared driver of the pointwise op files:
 * validation, dtype casting, devices, broadcasting, output allocation, and
 * dispatch of a pw_ops.h code to the output's device. */
#ifndef TN_OPS_POINTWISE_DRIVER_H
#define TN_OPS_POINTWISE_DRIVER_H

#include "ops_internal.h"

/* out = code(cast(a), cast(b)) with broadcasting, on the operands' device.
 * The output dtype is `out_dt` (compute, or TN_BOOL for comparisons). No
 * autograd. */
tn_tensor *tn__pw_binary(const char *op, tn_pw_code code, const tn_tensor *a,
                         const tn_tensor *b, tn_dtype compute, tn_dtype out_dt);
/* Same into a preallocated out (its shape must be the broadcast shape and
 * its dtype the loop's output dtype). Bumps nothing. */
tn_status tn__pw_binary_into(const char *op, tn_pw_code code, tn_tensor *out,
                             const tn_tensor *a, const tn_tensor *b, tn_dtype compute);
/* out = code(cast(a); ctx). */
tn_tensor *tn__pw_unary(const char *op, tn_pw_code code, const tn_tensor *a,
                        tn_dtype compute, const tn_pw_ctx *ctx);
tn_status tn__pw_unary_into(const char *op, tn_pw_code code, tn_tensor *out,
                            const tn_tensor *a, const tn_pw_ctx *ctx);
/* PyTorch's names in its dtype messages: "Float" (ScalarType) and "float" (the C++ type). */
const char *tn__torch_scalar_name(tn_dtype d);
const char *tn__torch_cpp_name(tn_dtype d);
/* "<op>" not implemented for '<dtype>' unless the code has that dtype. */
tn_status tn__pw_check_dtype(const char *op, tn_pw_code code, tn_dtype dt);
/* Common in-place checks: NULL, leaf rules, self overlap (expanded dims),
 * src broadcastable to self's shape, result dtype castable to self's. */
tn_status tn__inplace_prepare(const char *op, tn_tensor *self, const tn_tensor *src,
                              tn_dtype result_dt);
/* Zeroes x where mask (bool, broadcastable) is true; differentiable in x. */
tn_tensor *tn__masked_zero(const tn_tensor *x, const tn_tensor *mask);
/* softmax / log_softmax along dim with autograd; the result is contiguous
 * (engine/ops/nn.c). */
tn_tensor *tn__softmax_family(const tn_tensor *a, int dim, bool log);

/* Backward-formula helpers: on NULL return the status (callers bail out). */
#define TN_TRY(expr)                                                                      \
    do {                                                                                  \
        if (!(expr)) return tn_last_status();                                             \
    } while (0)

#endif
