/* tenet/init.h — parameter initialisers, as torch.nn.init.
 *
 * Each fills t in place under no-grad (so a leaf that requires grad may be
 * filled, and no history is recorded), bumps t's version once and returns
 * TN_OK, or an error status with t unchanged. Random values come from the
 * calling thread's generator (tn_manual_seed: the same seed, the same
 * values), drawn on the CPU for any device (tenet's stream, not torch's).
 * t may be any layout; random fills need a floating dtype ("\"check_uniform_
 * bounds\" not implemented for 'Long'", "\"normal_kernel_cpu\" not
 * implemented for 'Long'"). The fan of a tensor (PyTorch's
 * _calculate_fan_in_and_fan_out) needs at least 2 dims: fan_in = size(1) *
 * receptive field, fan_out = size(0) * receptive field, the receptive field
 * the product of the sizes from dim 2 on.
 */
#ifndef TENET_INIT_H
#define TENET_INIT_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* nn.init.uniform_(t, a, b): U[a, b); a > b is PyTorch's error. */
tn_status tn_init_uniform_(tn_tensor *t, double a, double b);
/* nn.init.normal_(t, mean, std): N(mean, std^2); std < 0 is an error. */
tn_status tn_init_normal_(tn_tensor *t, double mean, double std);
/* nn.init.constant_(t, val) (zeros_, ones_: val 0, 1); val must fit t's
 * dtype, as tn_fill_'s. */
tn_status tn_init_constant_(tn_tensor *t, double val);
/* nn.init.calculate_gain(nonlinearity, param): "linear", "conv1d",
 * "conv2d", "conv3d", "conv_transpose1d/2d/3d", "sigmoid" 1; "tanh" 5/3;
 * "relu" sqrt(2); "leaky_relu" sqrt(2 / (1 + slope^2)) with slope = param
 * (NAN: PyTorch's default 0.01); "selu" 3/4. Writes *gain; an unknown name is
 * TN_ERR_INVALID_ARGUMENT ("Unsupported nonlinearity foo"). */
tn_status tn_init_calculate_gain(const char *nonlinearity, double param, double *gain);
/* nn.init.xavier_uniform_(t, gain): U(-a, a), a = gain sqrt(6 / (fan_in +
 * fan_out)); xavier_normal_: N(0, std^2), std = gain sqrt(2 / (fan_in +
 * fan_out)). */
tn_status tn_init_xavier_uniform_(tn_tensor *t, double gain);
tn_status tn_init_xavier_normal_(tn_tensor *t, double gain);
/* nn.init.kaiming_uniform_(t, a, mode, nonlinearity): U(-b, b), b = sqrt(3)
 * gain / sqrt(fan), gain = calculate_gain(nonlinearity, a), fan the
 * mode's ("fan_in" or "fan_out"; NULL: "fan_in"); nonlinearity NULL:
 * "leaky_relu" (PyTorch's defaults: a 0, fan_in, leaky_relu). kaiming_normal_:
 * N(0, std^2), std = gain / sqrt(fan). A tensor with no element is left
 * alone with PyTorch's warning ("Initializing zero-element tensors is a
 * no-op"). */
tn_status tn_init_kaiming_uniform_(tn_tensor *t, double a, const char *mode,
                                   const char *nonlinearity);
tn_status tn_init_kaiming_normal_(tn_tensor *t, double a, const char *mode,
                                  const char *nonlinearity);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
