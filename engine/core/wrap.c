/* Tensors over memory tenet does not own: tn_from_blob, and tn__wrap for the
 * DLPack import (engine/io/dlpack.c). The memory stays the caller's: its
 * release callback runs when the last tenet reference to it goes, and never
 * when the wrap fails (the caller still owns it then). */
#include <stdint.h>

#include "device.h"
#include "wrap.h"

/* The elements (shape, strides) reaches from its first one, into *span
 * (0 for an empty tensor); an error for a negative stride or an overflow. */
static tn_status span_of(int ndim, const int64_t *shape, const int64_t *strides, size_t es,
                         int64_t *span) {
    int64_t numel = 1, s = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d]; /* checked by tn__check_shape */
    for (int d = 0; d < ndim; d++) {
        if (strides[d] < 0)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "stride %lld of dim %d is negative: tenet has no negative strides",
                             (long long)strides[d], d);
        int64_t reach;
        if (shape[d] > 0 &&
            (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
             __builtin_add_overflow(s, reach, &s)))
            return tn__error(TN_ERR_SHAPE, "the strides reach beyond int64 elements");
    }
    if (numel == 0) s = 0;
    if ((uint64_t)s > SIZE_MAX / 2 / es)
        return tn__error(TN_ERR_SHAPE, "the strides reach %lld elements: too large", (long long)s);
    *span = s;
    return TN_OK;
}

tn_tensor *tn__wrap(void *data, tn_dtype dtype, int ndim, const int64_t *shape,
                    const int64_t *strides, tn_device dev, void (*release)(void *), void *ctx) {
    int64_t numel, span = 0, contiguous[TN_MAX_DIMS];
    if (tn__check_shape(ndim, shape, dtype, &numel) < 0) return NULL;
    if (!strides) {
        tn__contiguous_strides(ndim, shape, contiguous);
        strides = contiguous;
    }
    size_t es = tn__dtype_sizes[dtype];
    if (span_of(ndim, shape, strides, es, &span) < 0) return NULL;
    if (!data && numel > 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "data is NULL for a tensor of %lld elements",
                  (long long)numel);
        return NULL;
    }
    if ((uintptr_t)data % es != 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "data %p is not aligned to its %zu-byte elements",
                  data, es);
        return NULL;
    }
    if (tn__check_device(dev) < 0) return NULL;
    tn_tensor *t = tn__handle_new(ndim, shape, strides, dtype);
    if (!t) return NULL;
    t->storage = tn__storage_wrap(data, (size_t)span * es, dev, release, ctx);
    if (!t->storage || !tn__version_attach(t)) {
        if (t->storage) t->storage->release = NULL; /* failed: the memory stays the caller's */
        tn_release(t);
        return NULL;
    }
    return t;
}

tn_tensor *tn_from_blob(void *data, tn_dtype dtype, int ndim, const int64_t *shape,
                        const int64_t *strides, tn_device device, void (*deleter)(void *ctx),
                        void *ctx) {
    if (ndim > 0) TN_CHECK_NULL_PTR(shape, "shape");
    return tn__ret(tn__wrap(data, dtype, ndim, shape, strides, device, deleter, ctx));
}

uint64_t tn__tensor_digest(const tn_tensor *t) {
    int64_t n = tn__numel(t->ndim, t->shape), idx[TN_MAX_DIMS] = {0}, off = 0;
    const unsigned char *p = (const unsigned char *)tn__ptr(t);
    size_t es = tn__dtype_sizes[t->dtype];
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++) {
        for (size_t b = 0; b < es; b++)
            h = (h ^ p[off * (int64_t)es + (int64_t)b]) * 0x100000001b3ull;
        for (int d = t->ndim - 1; d >= 0; d--) { /* next element, last dim fastest */
            off += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
    return h;
}
