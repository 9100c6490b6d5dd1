/* torch.nn.init's initialisers (include/tenet/init.h): each computes its
 * values (a constant, or draws from the thread's generator into a float64
 * buffer on the CPU) and writes them with tn_copy_ under no-grad: one
 * version bump, any dtype, device and layout, leaves that require grad
 * allowed, no history. */
#include <math.h>

#include "ops_internal.h"
#include "pointwise_driver.h"

/* t <- src (no-grad; the public copy's checks, conversion and version bump). */
static tn_status write_no_grad(tn_tensor *t, const tn_tensor *src) {
    bool was = tn_set_grad_enabled(false);
    tn_status st = tn_copy_(t, src);
    tn_set_grad_enabled(was);
    return st;
}

/* Random values a + b * (uniform or normal draw) of t's shape into t. */
static tn_status fill_random(tn_tensor *t, bool normal, double a, double b) {
    if (!tn__is_float(t->dtype))
        return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for '%s'",
                         normal ? "normal_kernel_cpu" : "check_uniform_bounds",
                         tn__torch_scalar_name(t->dtype));
    tn_tensor *r = tn__empty(t->ndim, t->shape, TN_F64);
    if (!r) return tn_last_status();
    double *v = (double *)(void *)tn__ptr(r);
    int64_t n = tn__numel(t->ndim, t->shape);
    for (int64_t i = 0; i < n; i++)
        v[i] = a + b * (normal ? tn__rand_normal() : tn__rand_uniform());
    tn_status st = write_no_grad(t, r);
    tn_release(r);
    return st;
}

tn_status tn_init_uniform_(tn_tensor *t, double a, double b) {
    TN_CHECK_NULL_ARG_ST(t, "tensor");
    if (!(a <= b))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "uniform_ expects to return a [from, to) range, but found from=%g > to=%g",
                         a, b);
    return fill_random(t, false, a, b - a);
}

tn_status tn_init_normal_(tn_tensor *t, double mean, double std) {
    TN_CHECK_NULL_ARG_ST(t, "tensor");
    if (!(std >= 0))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "normal expects std >= 0.0, but found std %g",
                         std);
    return fill_random(t, true, mean, std);
}

tn_status tn_init_constant_(tn_tensor *t, double val) {
    TN_CHECK_NULL_ARG_ST(t, "tensor");
    if (tn__check_scalar(val, t->dtype) < 0) return tn_last_status();
    tn_tensor *c = tn__full(0, NULL, t->dtype, val);
    if (!c) return tn_last_status();
    tn_status st = write_no_grad(t, c);
    tn_release(c);
    return st;
}

tn_status tn_init_calculate_gain(const char *nonlinearity, double param, double *gain) {
    TN_CHECK_NULL_PTR_ST(nonlinearity, "nonlinearity");
    TN_CHECK_NULL_PTR_ST(gain, "gain");
    static const char *const unit[] = {"linear",           "conv1d",           "conv2d",
                                       "conv3d",           "conv_transpose1d", "conv_transpose2d",
                                       "conv_transpose3d", "sigmoid"};
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++)
        if (!strcmp(nonlinearity, unit[i])) return *gain = 1, TN_OK;
    if (!strcmp(nonlinearity, "tanh")) return *gain = 5.0 / 3, TN_OK;
    if (!strcmp(nonlinearity, "relu")) return *gain = sqrt(2.0), TN_OK;
    if (!strcmp(nonlinearity, "selu")) return *gain = 3.0 / 4, TN_OK;
    if (!strcmp(nonlinearity, "leaky_relu")) {
        double slope = isnan(param) ? 0.01 : param;
        return *gain = sqrt(2.0 / (1 + slope * slope)), TN_OK;
    }
    return tn__error(TN_ERR_INVALID_ARGUMENT, "Unsupported nonlinearity %s", nonlinearity);
}

/* PyTorch's _calculate_fan_in_and_fan_out. */
static tn_status fans(const tn_tensor *t, double *fan_in, double *fan_out) {
    if (t->ndim < 2)
        return tn__error(TN_ERR_SHAPE, "Fan in and fan out can not be computed for tensor with "
                                       "fewer than 2 dimensions");
    double rf = (double)tn__numel(t->ndim - 2, t->shape + 2);
    *fan_in = (double)t->shape[1] * rf;
    *fan_out = (double)t->shape[0] * rf;
    return TN_OK;
}

static tn_status xavier(tn_tensor *t, double gain, bool normal) {
    TN_CHECK_NULL_ARG_ST_IN(normal ? "tn_init_xavier_normal_" : "tn_init_xavier_uniform_", t,
                            "tensor");
    double fi = 0, fo = 0;
    if (fans(t, &fi, &fo) < 0) return tn_last_status();
    double std = gain * sqrt(2.0 / (fi + fo)), a = sqrt(3.0) * std;
    return normal ? fill_random(t, true, 0, std) : fill_random(t, false, -a, 2 * a);
}
tn_status tn_init_xavier_uniform_(tn_tensor *t, double gain) { return xavier(t, gain, false); }
tn_status tn_init_xavier_normal_(tn_tensor *t, double gain) { return xavier(t, gain, true); }

static tn_status kaiming(tn_tensor *t, double a, const char *mode, const char *nonlinearity,
                         bool normal) {
    TN_CHECK_NULL_ARG_ST_IN(normal ? "tn_init_kaiming_normal_" : "tn_init_kaiming_uniform_", t,
                            "tensor");
    if (tn__numel(t->ndim, t->shape) == 0) {
        tn__warn("Initializing zero-element tensors is a no-op");
        return TN_OK;
    }
    mode = mode ? mode : "fan_in";
    if (strcmp(mode, "fan_in") && strcmp(mode, "fan_out"))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "Mode %s not supported, please use one of ['fan_in', 'fan_out']", mode);
    double fi = 0, fo = 0, gain = 1;
    if (fans(t, &fi, &fo) < 0 ||
        tn_init_calculate_gain(nonlinearity ? nonlinearity : "leaky_relu", a, &gain) < 0)
        return tn_last_status();
    double std = gain / sqrt(strcmp(mode, "fan_in") ? fo : fi), bound = sqrt(3.0) * std;
    return normal ? fill_random(t, true, 0, std) : fill_random(t, false, -bound, 2 * bound);
}
tn_status tn_init_kaiming_uniform_(tn_tensor *t, double a, const char *mode,
                                   const char *nonlinearity) {
    return kaiming(t, a, mode, nonlinearity, false);
}
tn_status tn_init_kaiming_normal_(tn_tensor *t, double a, const char *mode,
                                  const char *nonlinearity) {
    return kaiming(t, a, mode, nonlinearity, true);
}
