/* Public creation functions (torch.tensor / zeros / ones / full / arange /
 * rand / randn / new_tensor / to). All copy their input. */
#include <math.h>

#include "../autograd/autograd_internal.h"
#include "../core/device.h"

static tn_tensor *finish_leaf(tn_tensor *t, bool requires_grad) {
    if (t && requires_grad && tn_requires_grad_(t, true) < 0) {
        tn_release(t);
        return NULL;
    }
    return tn__ret(t);
}

tn_tensor *tn_tensor_from(const void *data, tn_dtype dtype, int ndim, const int64_t *shape,
                          bool requires_grad) {
    int64_t numel;
    if (tn__check_shape(ndim, shape, dtype, &numel) < 0) return NULL;
    if (!data && numel > 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "tn_tensor_from: data is NULL for %lld elements",
                  (long long)numel);
        return NULL;
    }
    if (requires_grad && !tn__is_float(dtype)) {
        tn__error(TN_ERR_DTYPE,
                  "Only Tensors of floating point and complex dtype can require gradients");
        return NULL;
    }
    tn_tensor *t = tn__empty(ndim, shape, dtype);
    if (!t) return NULL;
    if (numel) memcpy(t->storage->data, data, (size_t)numel * tn__dtype_sizes[dtype]);
    if (dtype == TN_BOOL) { /* normalise to 0/1 */
        uint8_t *p = t->storage->data;
        for (int64_t i = 0; i < numel; i++) p[i] = p[i] != 0;
    }
    return finish_leaf(t, requires_grad);
}

tn_tensor *tn_scalar(double value, tn_dtype dtype) {
    return tn__ret(tn__full(0, NULL, dtype, value));
}

tn_tensor *tn_empty(int ndim, const int64_t *shape, tn_dtype dtype) {
    return tn__ret(tn__empty(ndim, shape, dtype));
}

tn_tensor *tn_zeros(int ndim, const int64_t *shape, tn_dtype dtype) {
    return tn__ret(tn__zeros(ndim, shape, dtype));
}

tn_tensor *tn_ones(int ndim, const int64_t *shape, tn_dtype dtype) {
    return tn__ret(tn__full(ndim, shape, dtype, 1.0));
}

tn_tensor *tn_full(int ndim, const int64_t *shape, tn_dtype dtype, double value) {
    return tn__ret(tn__full(ndim, shape, dtype, value));
}

tn_tensor *tn_arange(double start, double end, double step, tn_dtype dtype) {
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "step must be nonzero and bounds finite");
        return NULL;
    }
    if ((end - start) / step < 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > (double)INT64_MAX / 2) {
        tn__error(TN_ERR_SHAPE, "arange: too many elements");
        return NULL;
    }
    int64_t n = (int64_t)count;
    tn_tensor *t = tn__empty(1, &n, dtype);
    if (!t) return NULL;
    size_t es = tn__dtype_sizes[dtype];
    for (int64_t i = 0; i < n; i++)
        tn__store((char *)t->storage->data + i * (int64_t)es, dtype, start + (double)i * step);
    return tn__ret(t);
}

static tn_tensor *random_fill(int ndim, const int64_t *shape, tn_dtype dtype, bool normal) {
    if (tn__valid_dtype(dtype) && !tn__is_float(dtype)) {
        tn__error(TN_ERR_DTYPE, "%s is not implemented for %s", normal ? "normal_" : "uniform_",
                  tn_dtype_name(dtype));
        return NULL;
    }
    tn_tensor *t = tn__empty(ndim, shape, dtype);
    if (!t) return NULL;
    int64_t n = tn__numel(ndim, shape);
    for (int64_t i = 0; i < n; i++) {
        double v = normal ? tn__rand_normal() : tn__rand_uniform();
        if (dtype == TN_F32) ((float *)t->storage->data)[i] = (float)v;
        else ((double *)t->storage->data)[i] = v;
    }
    return tn__ret(t);
}

tn_tensor *tn_rand(int ndim, const int64_t *shape, tn_dtype dtype) {
    return random_fill(ndim, shape, dtype, false);
}

tn_tensor *tn_randn(int ndim, const int64_t *shape, tn_dtype dtype) {
    return random_fill(ndim, shape, dtype, true);
}

/* The device a conversion targets: src's for TN_DEVICE_SAME; checked. */
static tn_status target_device(const tn_tensor *src, tn_device *d) {
    if (d->type == TN_DEVICE_SAME) *d = tn__dev(src);
    if (d->type == TN_CPU) d->index = 0; /* "cpu" and "cpu:-1" name the one CPU device */
    return tn__check_device(*d);
}

tn_tensor *tn_new_tensor(const tn_tensor *src, tn_dtype dtype, tn_device device,
                         bool requires_grad) {
    TN_CHECK_NULL_ARG(src, "src");
    if (dtype == TN_DTYPE_SAME) dtype = src->dtype;
    if (!tn__valid_dtype(dtype)) {
        tn__error(TN_ERR_DTYPE, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (target_device(src, &device) < 0) return NULL;
    if (requires_grad && !tn__is_float(dtype)) {
        tn__error(TN_ERR_DTYPE,
                  "Only Tensors of floating point and complex dtype can require gradients");
        return NULL;
    }
    return finish_leaf(tn__copy_to_device(src, dtype, device), requires_grad);
}

tn_tensor *tn_to(tn_tensor *src, tn_dtype dtype, tn_device device) {
    TN_CHECK_NULL_ARG(src, "src");
    if (dtype == TN_DTYPE_SAME) dtype = src->dtype;
    if (!tn__valid_dtype(dtype)) {
        tn__error(TN_ERR_DTYPE, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (target_device(src, &device) < 0) return NULL;
    if (dtype == src->dtype && tn__same_device(device, tn__dev(src)))
        return tn__ret(tn__retain(src));
    tn__internal_enter();
    tn_tensor *r = tn__to_autograd(src, dtype, device);
    tn__internal_leave();
    return tn__ret(r);
}
