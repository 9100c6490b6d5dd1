/* Creation of fresh tensors that need no autograd (torch.zeros / ones /
 * full / empty / arange / rand / randn and 0-dim scalars): allocation and
 * filling. The factories that can make a leaf requiring grad or record a
 * node (tn_tensor_from, tn_new_tensor, tn_to) are ops (engine/ops/factory.c). */
#include <math.h>

#include "device.h"

tn_tensor *tn_scalar(double value, tn_dtype dtype) {
    if (tn__valid_dtype(dtype) && tn__check_scalar(value, dtype) < 0) return NULL;
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
    if (tn__valid_dtype(dtype) && tn__check_scalar(value, dtype) < 0) return NULL;
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
        else if (dtype == TN_F64) ((double *)t->storage->data)[i] = v;
        else tn__store((char *)t->storage->data + i * 2, dtype, v); /* the halves */
    }
    return tn__ret(t);
}

tn_tensor *tn_rand(int ndim, const int64_t *shape, tn_dtype dtype) {
    return random_fill(ndim, shape, dtype, false);
}

tn_tensor *tn_randn(int ndim, const int64_t *shape, tn_dtype dtype) {
    return random_fill(ndim, shape, dtype, true);
}
