/* tenet/autocast.h — mixed precision: autocast regions (torch.autocast) and
 * the gradient scaler (torch.cuda.amp.GradScaler). docs/api.md, "Mixed
 * precision", has a complete training step.
 *
 * Autocast. Between tn_autocast_begin(device_type, dtype) and the matching
 * tn_autocast_end(), ops on tensors of that device type choose their
 * compute dtype as torch.autocast does (docs/semantics.md §6e):
 *   - lower precision (matmul, linear, conv1d/conv2d, scaled dot-product
 *     attention; conv_transpose1d/2d on CUDA): float32 inputs (and the other
 *     half type) are cast to the region's dtype;
 *   - float32 (the losses, conv_transpose1d/2d on the CPU, and on CUDA also
 *     exp, log, pow, sum, softmax, log_softmax, logsumexp, layer_norm,
 *     group_norm):
 *     bfloat16/float16 inputs are cast to float32;
 *   - promote (cat, stack; scatter_add on CUDA): every float input is cast
 *     to the widest of them;
 *   - every other op follows its inputs.
 * float64 tensors, integer tensors and tensors of another device type are
 * never cast. The casts are recorded (ToCopyBackward0), so a float32 leaf
 * gets a float32 .grad. Backward passes run with autocast off: each backward
 * op computes in the dtype its forward chose (torch recommends leaving the
 * region before backward; tenet makes it so).
 *
 * Regions nest, per thread (a thread starts with autocast off and a new
 * thread does not inherit its creator's regions): an inner region for the
 * same device type replaces the outer one's dtype until it ends;
 * tn_autocast_begin_disabled is torch.autocast(enabled=False). At most
 * TN_AUTOCAST_MAX_DEPTH regions are open at once on one thread.
 *
 * Weight-cast cache (torch's rule): inside a region, the lower-precision
 * cast of a float32 leaf that requires grad and is not a view is made once
 * and reused by every op of the region (a weight used by several matmuls is
 * converted once); the cache holds a reference to the leaf and its cast and
 * is emptied when the outermost region of the thread ends, or by
 * tn_autocast_clear_cache(). Unlike torch (pytorch/pytorch#105211), a cast
 * made with grad mode off is never cached: it has no history, and reusing it
 * later with grad mode on would silently give the weight no gradient. A leaf
 * written in place inside a region keeps its stale cast until the cache is
 * emptied (as in torch): step optimisers outside regions.
 *
 * Errors (nothing changes on error): a device type other than TN_CPU /
 * TN_CUDA (TN_ERR_DEVICE), a dtype other than TN_BF16 / TN_F16
 * (TN_ERR_DTYPE: "tn_autocast_begin: autocast dtype must be bfloat16 or
 * float16, got int32"), more than
 * TN_AUTOCAST_MAX_DEPTH open regions, tn_autocast_end without an open region
 * (TN_ERR_INVALID_ARGUMENT).
 *
 * CUDA regions: CUDA's policies (above) on CUDA tensors, through the CUDA
 * back end's bfloat16/float16 kernels (cuBLAS on tensor cores for the
 * products); the gradient scaler unscales and checks CUDA gradients on the
 * device.
 *
 * Cost: with no region open, an op pays one thread-local load.
 */
#ifndef TENET_AUTOCAST_H
#define TENET_AUTOCAST_H

#include "optim.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

#define TN_AUTOCAST_MAX_DEPTH 64

/* Opens a region: ops on device_type tensors autocast to dtype (TN_BF16 or
 * TN_F16), as `with torch.autocast(device_type, dtype):`. */
tn_status tn_autocast_begin(tn_device_type device_type, tn_dtype dtype);
/* Opens a region in which device_type's autocast is off (torch.autocast(
 * device_type, enabled=False)); ended by tn_autocast_end. */
tn_status tn_autocast_begin_disabled(tn_device_type device_type);
/* Closes the innermost open region of this thread, restoring what it
 * replaced; the outermost one also empties the weight-cast cache. */
tn_status tn_autocast_end(void);
/* Whether ops on device_type tensors autocast now on this thread
 * (torch.is_autocast_enabled / is_autocast_cpu_enabled). */
bool tn_autocast_is_enabled(tn_device_type device_type);
/* The dtype device_type's autocast uses now, or would use when enabled
 * (torch.get_autocast_gpu_dtype / get_autocast_cpu_dtype): TN_BF16 on the
 * CPU and TN_F16 on CUDA by default; TN_DTYPE_SAME for a bad device type. */
tn_dtype tn_autocast_dtype(tn_device_type device_type);
/* Empties this thread's weight-cast cache (torch.clear_autocast_cache). */
void tn_autocast_clear_cache(void);

/* ---- gradient scaler -------------------------------------------------------
 * torch.cuda.amp.GradScaler for float16 training (bfloat16 has float32's
 * range and needs no scaling). Per iteration:
 *
 *   tn_tensor *scaled = tn_grad_scaler_scale(sc, loss);   // loss * scale
 *   tn_backward(scaled, NULL, false);
 *   tn_grad_scaler_unscale_(sc, opt);          // optional: grads / scale
 *   tn_clip_grad_norm_(n, params, 1.0, 2.0, NULL);
 *   tn_grad_scaler_step(sc, opt, &stepped);    // skipped on inf/NaN grads
 *   tn_grad_scaler_update(sc);                 // backoff or growth
 *
 * The scale starts at init_scale; update() multiplies it by backoff_factor
 * when any unscale since the last update found an inf/NaN gradient (and
 * restarts the count of clean steps), else counts one clean step and, at
 * growth_interval of them, multiplies it by growth_factor (kept when the
 * product is finite) and restarts the count: torch's _amp_update_scale_. The
 * scale is a float32 value, as torch's scale tensor.
 *
 * Errors (torch's texts, nothing changes): unscale_ twice for one optimiser
 * before update ("unscale_() has already been called on this optimizer since
 * the last update()."), unscale_ after step ("unscale_() is being called
 * after step()."), step twice ("step() has already been called since the
 * last update()."), a float16 gradient ("Attempting to unscale FP16
 * gradients.", TN_ERR_DTYPE), update with no unscale since the last one ("No
 * inf checks were recorded prior to update."), unscale_/step/update before
 * any scale ("Attempted update but _scale is None.  ...").
 *
 * Ownership: the scaler borrows the optimisers passed to it (keyed by
 * handle until the next update). Threads: one scaler, one thread. */
typedef struct tn_grad_scaler tn_grad_scaler;

/* torch's defaults: tn_grad_scaler_new(65536.0, 2.0, 0.5, 2000, true).
 * growth_factor must be > 1, backoff_factor < 1 (torch's assertions: "The
 * growth factor must be > 1.0."), growth_interval >= 1. A disabled scaler
 * returns the loss itself from scale, steps the optimiser unconditionally,
 * and its unscale_ and update do nothing. NULL + error on bad arguments. */
tn_grad_scaler *tn_grad_scaler_new(double init_scale, double growth_factor, double backoff_factor,
                                   int64_t growth_interval, bool enabled);
void tn_grad_scaler_free(tn_grad_scaler *sc);
/* outputs * scale as a new tensor (MulBackward0), with the loss's shape and
 * the promoted dtype of the loss and a float32 scale (a float16 loss gives a
 * float32 result, as torch's shape-(1,) scale tensor makes it, but keeping
 * the loss's shape). */
tn_tensor *tn_grad_scaler_scale(tn_grad_scaler *sc, const tn_tensor *loss);
/* Multiplies every .grad of opt's parameters by the float32 1/scale in place
 * and records whether any is inf or NaN. */
tn_status tn_grad_scaler_unscale_(tn_grad_scaler *sc, tn_optimizer *opt);
/* Unscales when unscale_ was not called for opt since the last update, then
 * steps opt unless an inf/NaN gradient was found. *stepped (may be NULL):
 * whether opt stepped. */
tn_status tn_grad_scaler_step(tn_grad_scaler *sc, tn_optimizer *opt, bool *stepped);
/* Updates the scale (see above) and forgets the optimisers' states. */
tn_status tn_grad_scaler_update(tn_grad_scaler *sc);
/* update(new_scale): sets the scale (rounded to float32), growth count kept. */
tn_status tn_grad_scaler_update_to(tn_grad_scaler *sc, double new_scale);
/* The current scale (init_scale before the first scale call; 1.0 when
 * disabled), and the count of clean steps since the last growth or backoff
 * (torch's _get_growth_tracker). -1 / NaN + error for NULL. */
double tn_grad_scaler_get_scale(const tn_grad_scaler *sc);
int64_t tn_grad_scaler_growth_tracker(const tn_grad_scaler *sc);
/* The steps the scaler skipped: update() calls that followed inf/NaN
 * gradients (the step skipped, the scale backed off), in all; *steps (may
 * be NULL) every update() call, *in_row (may be NULL) the skipped ones in a
 * row up to the last update (0 after a clean step). -1 for a NULL scaler. */
int64_t tn_grad_scaler_skipped_steps(const tn_grad_scaler *sc, int64_t *steps, int64_t *in_row);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
