/* Tensor handles: allocation, aliases, release, metadata accessors. */
#include <stdio.h>

#include "device.h"
#include "hooks.h"


tn_tensor *tn__handle_new(int ndim, const int64_t *shape, const int64_t *stride, tn_dtype dt) {
    tn_tensor *t = tn__calloc_small(sizeof *t);
    if (!t) return NULL;
    atomic_init(&t->refcount, 1);
    atomic_init(&t->weak, 1);
    t->ndim = ndim;
    t->dtype = dt;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    tn__count_tensors(1);
    return t;
}

tn_tensor *tn__empty_on(int ndim, const int64_t *shape, tn_dtype dt, tn_device dev) {
    int64_t numel;
    if (tn__check_shape(ndim, shape, dt, &numel) < 0) return NULL;
    int64_t stride[TN_MAX_DIMS];
    tn__contiguous_strides(ndim, shape, stride);
    tn_tensor *t = tn__handle_new(ndim, shape, stride, dt);
    if (!t) return NULL;
    t->storage = tn__storage_new((size_t)numel * tn__dtype_sizes[dt], dev);
    if (!t->storage || !tn__version_attach(t)) {
        tn_release(t);
        return NULL;
    }
    return t;
}

tn_tensor *tn__empty(int ndim, const int64_t *shape, tn_dtype dt) {
    return tn__empty_on(ndim, shape, dt, TN_DEVICE_CPU);
}

tn_tensor *tn__zeros_on(int ndim, const int64_t *shape, tn_dtype dt, tn_device dev) {
    if (dev.type != TN_CPU) return tn__full_on(ndim, shape, dt, 0, dev);
    tn_tensor *t = tn__empty_on(ndim, shape, dt, dev);
    if (t) memset(t->storage->data, 0, t->storage->nbytes);
    return t;
}

tn_tensor *tn__zeros(int ndim, const int64_t *shape, tn_dtype dt) {
    return tn__zeros_on(ndim, shape, dt, TN_DEVICE_CPU);
}

tn_tensor *tn__full_on(int ndim, const int64_t *shape, tn_dtype dt, double v, tn_device dev) {
    tn_tensor *t = tn__empty_on(ndim, shape, dt, dev);
    if (t && tn__fill_into(t, v) < 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

tn_tensor *tn__full(int ndim, const int64_t *shape, tn_dtype dt, double v) {
    return tn__full_on(ndim, shape, dt, v, TN_DEVICE_CPU);
}

tn_tensor *tn__empty_like(const tn_tensor *t) {
    return tn__empty_on(t->ndim, t->shape, t->dtype, tn__dev(t));
}
tn_tensor *tn__zeros_like(const tn_tensor *t) {
    return tn__zeros_on(t->ndim, t->shape, t->dtype, tn__dev(t));
}

tn_tensor *tn__alias(const tn_tensor *src, int ndim, const int64_t *shape, const int64_t *stride,
                     int64_t offset) {
    tn_tensor *t = tn__handle_new(ndim, shape, stride, src->dtype);
    if (!t) return NULL;
    t->offset = offset;
    t->storage = src->storage;
    tn__storage_retain(src->storage);
    t->version = src->version;
    tn__version_retain(src->version);
    return t;
}

tn_tensor *tn__detached_alias(const tn_tensor *src) {
    return tn__alias(src, src->ndim, src->shape, src->stride, src->offset);
}

tn_tensor *tn_retain(tn_tensor *t) {
    if (t) tn__retain(t);
    return t;
}

void tn_release(tn_tensor *t) {
    if (!t) return;
    if (TN_UNLIKELY(atomic_load_explicit(&t->scoped, memory_order_relaxed)))
        tn__scope_on_release(t);
    /* acq_rel: pairs with the other owners' releases so the last one sees
     * every write made through the handle before tearing it down. */
    int64_t old = atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old != 1) return;
    tn__internal_enter(); /* teardown releases are not the user's */
    if (t->ag) tn__hooks.meta_free(t->ag); /* autograd/ installed it before making any */
    tn_release(t->view_base);
    tn__storage_release(t->storage);
    tn__version_release(t->version);
    tn__count_tensors(-1);
    /* Weak holders (saved tensors) still read the handle's geometry, storage
     * and version fields, which teardown leaves as they were: the holders
     * keep the storage and version counter alive themselves. */
    /* The strong references' weak one. acquire: pairs with the release of
     * weak holders that are done with the handle. A load of 1 means no weak
     * reference is left and none can be made (no strong one is). */
    if (atomic_load_explicit(&t->weak, memory_order_acquire) == 1 ||
        atomic_fetch_sub_explicit(&t->weak, 1, memory_order_acq_rel) == 1)
        tn__free_small(t);
    tn__internal_leave();
}

void tn__weak_release(tn_tensor *t) {
    /* acq_rel: the last holder, weak or strong, frees after every other's
     * reads of the handle. */
    if (!t) return;
    int64_t old = atomic_fetch_sub_explicit(&t->weak, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old == 1) tn__free_small(t);
}

/* ---- metadata ---------------------------------------------------------------- */

#define META_CHECK(t, ret)                                                              \
    do {                                                                                \
        if (!(t)) {                                                                     \
            tn__null_arg(true, "%s: argument 't' is NULL", __func__);                  \
            return ret;                                                                 \
        }                                                                               \
    } while (0)

int tn_ndim(const tn_tensor *t) {
    META_CHECK(t, -1);
    return t->ndim;
}
const int64_t *tn_shape(const tn_tensor *t) {
    META_CHECK(t, NULL);
    return t->shape;
}
const int64_t *tn_stride(const tn_tensor *t) {
    META_CHECK(t, NULL);
    return t->stride;
}
int64_t tn_size(const tn_tensor *t, int dim) {
    META_CHECK(t, -1);
    if (t->ndim == 0) {
        tn__error(TN_ERR_INDEX, "dimension specified as %d but tensor has no dimensions", dim);
        return -1;
    }
    int d = tn__wrap_dim(dim, t->ndim);
    return d < 0 ? -1 : t->shape[d];
}
int64_t tn_numel(const tn_tensor *t) {
    META_CHECK(t, -1);
    return tn__numel(t->ndim, t->shape);
}
tn_dtype tn_dtype_of(const tn_tensor *t) {
    META_CHECK(t, (tn_dtype)-1);
    return t->dtype;
}
tn_device tn_device_of(const tn_tensor *t) {
    META_CHECK(t, TN_DEVICE_CPU);
    return t->storage->device;
}
void *tn_data_ptr(const tn_tensor *t) {
    META_CHECK(t, NULL);
    return tn__ptr(t);
}
bool tn_is_contiguous(const tn_tensor *t) {
    META_CHECK(t, false);
    return tn__is_contiguous(t);
}
bool tn_shares_storage(const tn_tensor *a, const tn_tensor *b) {
    return a && b && a->storage == b->storage;
}
int64_t tn_version(const tn_tensor *t) {
    META_CHECK(t, -1);
    if (tn__is_inference(t)) {
        tn__error(TN_ERR_AUTOGRAD, "Inference tensors do not track version counter.");
        return -1;
    }
    return (int64_t)tn__version_get(t);
}
tn_status tn_item(const tn_tensor *t, double *out) {
    META_CHECK(t, TN_ERR_INVALID_ARGUMENT);
    if (!out) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_item: argument 'out' is NULL");
    int64_t n = tn__numel(t->ndim, t->shape);
    if (n != 1)
        return tn__error(TN_ERR_SHAPE,
                         "a Tensor with %lld elements cannot be converted to Scalar", (long long)n);
    char v[sizeof(double)];
    tn_status st = tn__dev_read(t, v, tn__dtype_sizes[t->dtype]);
    if (st < 0) return st;
    *out = tn__load(v, t->dtype);
    return TN_OK;
}

tn_status tn_copy_to(const tn_tensor *t, void *buffer, size_t bytes) {
    META_CHECK(t, TN_ERR_INVALID_ARGUMENT);
    size_t need = (size_t)tn__numel(t->ndim, t->shape) * tn__dtype_sizes[t->dtype];
    if (!buffer && need) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_copy_to: buffer is NULL");
    if (bytes < need)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_copy_to: buffer of %zu bytes is too small "
                         "for %zu bytes", bytes, need);
    if (tn__is_contiguous(t)) return need ? tn__dev_read(t, buffer, need) : TN_OK;
    tn_tensor *c = tn__copy_as(t, t->dtype); /* on t's device */
    if (!c) return tn_last_status();
    tn_status st = tn__dev_read(c, buffer, need);
    tn_release(c);
    return st;
}

tn_status tn_copy_to_f64(const tn_tensor *t, double *buffer, int64_t count) {
    META_CHECK(t, TN_ERR_INVALID_ARGUMENT);
    int64_t n = tn__numel(t->ndim, t->shape);
    if (!buffer && n) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_copy_to_f64: buffer is NULL");
    if (count < n)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_copy_to_f64: buffer of %lld elements is too "
                         "small for %lld", (long long)count, (long long)n);
    tn_tensor *c = tn__copy_as(t, TN_F64);
    if (!c) return tn_last_status();
    tn_status st = n ? tn__dev_read(c, buffer, (size_t)n * sizeof(double)) : TN_OK;
    tn_release(c);
    return st;
}
