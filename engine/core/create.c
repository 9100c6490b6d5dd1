/* Creation of fresh tensors that need no autograd (torch.zeros / ones /
 * full / empty / arange / rand / randn, their *_like forms and 0-dim
 * scalars): allocation and filling. The factories that can make a leaf requiring grad or record a
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
    /* PyTorch's checks and texts, in its order */
    if (tn__valid_dtype(dtype) && !tn__is_float(dtype))
        for (int i = 0; i < 3; i++) { /* an integer arange counts in int64 */
            double v = i == 0 ? start : i == 1 ? end : step;
            if (isfinite(v) && (v >= TN_TWO_63 || v < -TN_TWO_63)) {
                tn__error(TN_ERR_INVALID_ARGUMENT,
                          "value cannot be converted to type int64_t without overflow");
                return NULL;
            }
        }
    if (!isfinite(start) || !isfinite(end)) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "unsupported range: %g -> %g", start, end);
        return NULL;
    }
    if (!(step > 0 || step < 0)) { /* 0, -0 and NaN */
        tn__error(TN_ERR_INVALID_ARGUMENT, "step must be nonzero");
        return NULL;
    }
    if (!((step > 0 && end >= start) || (step < 0 && end <= start))) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    double count = ceil((end - start) / step);             /* an infinite step: 0 */
    if (!(count >= 0 && count <= (double)INT64_MAX / 2)) { /* beyond: no buffer could hold it */
        tn__error(TN_ERR_SHAPE, "invalid size, possible overflow?");
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

/* Random values are drawn on the CPU (the thread's generator), whatever the
 * device they go to. */
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
    return t;
}

tn_tensor *tn_rand(int ndim, const int64_t *shape, tn_dtype dtype) {
    return tn__ret(random_fill(ndim, shape, dtype, false));
}

tn_tensor *tn_randn(int ndim, const int64_t *shape, tn_dtype dtype) {
    return tn__ret(random_fill(ndim, shape, dtype, true));
}

/* ---- *_like: a's shape, dtype and device; contiguous; no history ------------ */

enum like_kind { LIKE_EMPTY, LIKE_FULL, LIKE_RAND, LIKE_RANDN };

static tn_tensor *like(const char *fn, const tn_tensor *a, enum like_kind kind, double v) {
    TN_CHECK_NULL_ARG_IN(fn, a, "self");
    tn_device dev = tn__dev(a);
    if (kind == LIKE_EMPTY) return tn__ret(tn__empty_on(a->ndim, a->shape, a->dtype, dev));
    if (kind == LIKE_FULL) {
        if (tn__check_scalar(v, a->dtype) < 0) return NULL;
        return tn__ret(tn__full_on(a->ndim, a->shape, a->dtype, v, dev));
    }
    tn_tensor *t = random_fill(a->ndim, a->shape, a->dtype, kind == LIKE_RANDN);
    if (!t || dev.type == TN_CPU) return tn__ret(t);
    tn_tensor *d = tn__copy_to_device(t, a->dtype, dev);
    tn_release(t);
    return tn__ret(d);
}

tn_tensor *tn_empty_like(const tn_tensor *a) { return like(__func__, a, LIKE_EMPTY, 0); }
tn_tensor *tn_zeros_like(const tn_tensor *a) { return like(__func__, a, LIKE_FULL, 0); }
tn_tensor *tn_ones_like(const tn_tensor *a) { return like(__func__, a, LIKE_FULL, 1); }
tn_tensor *tn_full_like(const tn_tensor *a, double value) {
    return like(__func__, a, LIKE_FULL, value);
}
tn_tensor *tn_rand_like(const tn_tensor *a) { return like(__func__, a, LIKE_RAND, 0); }
tn_tensor *tn_randn_like(const tn_tensor *a) { return like(__func__, a, LIKE_RANDN, 0); }
