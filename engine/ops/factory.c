/* The factories that make leaves requiring grad or record autograd nodes:
 * torch.tensor (tn_tensor_from), Tensor.new_tensor and Tensor.to. All copy
 * their input; the plain factories are core's (engine/core/create.c). */
#include "ops_internal.h"

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

/* The dtype and device a conversion of src targets (TN_DTYPE_SAME and
 * TN_DEVICE_SAME: src's), checked. */
static tn_status conversion_target(const tn_tensor *src, tn_dtype *dt, tn_device *d) {
    if (*dt == TN_DTYPE_SAME) *dt = src->dtype;
    if (!tn__valid_dtype(*dt)) return tn__error(TN_ERR_DTYPE, "invalid dtype %d", (int)*dt);
    if (d->type == TN_DEVICE_SAME) *d = tn__dev(src);
    if (d->type == TN_CPU) d->index = 0; /* "cpu" and "cpu:-1" name the one CPU device */
    return tn__check_device(*d);
}

tn_tensor *tn_new_tensor(const tn_tensor *src, tn_dtype dtype, tn_device device,
                         bool requires_grad) {
    TN_CHECK_NULL_ARG(src, "src");
    if (conversion_target(src, &dtype, &device) < 0) return NULL;
    if (requires_grad && !tn__is_float(dtype)) {
        tn__error(TN_ERR_DTYPE,
                  "Only Tensors of floating point and complex dtype can require gradients");
        return NULL;
    }
    return finish_leaf(tn__copy_to_device(src, dtype, device), requires_grad);
}

tn_tensor *tn_to(const tn_tensor *src, tn_dtype dtype, tn_device device) {
    TN_CHECK_NULL_ARG(src, "src");
    if (conversion_target(src, &dtype, &device) < 0) return NULL;
    if (dtype == src->dtype && tn__same_device(device, tn__dev(src)))
        return tn__ret(tn__retain(src));
    tn__internal_enter();
    tn_tensor *r = tn__to_autograd(src, dtype, device);
    tn__internal_leave();
    tn__anomaly_forward("to", r, 1, (const tn_tensor *[]){src}); /* a NaN keeps its origin */
    return tn__ret(r);
}
