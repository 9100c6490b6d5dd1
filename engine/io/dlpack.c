/* DLPack export and import (include/tenet/dlpack_io.h). */
#include <dlpack/dlpack.h>

#include "../core/device.h"
#include "../core/wrap.h"

/* What tn_to_dlpack hands out: the managed tensor, its shape and strides, and
 * the reference that keeps the memory alive. */
typedef struct export_ctx {
    DLManagedTensor m;
    int64_t shape[TN_MAX_DIMS];
    int64_t strides[TN_MAX_DIMS];
    tn_tensor *ref;
} export_ctx;

static void export_deleter(DLManagedTensor *m) {
    if (!m) return;
    export_ctx *c = m->manager_ctx;
    tn_release(c->ref);
    tn__mfree(c);
}

static bool dl_dtype_of(tn_dtype dt, DLDataType *out) {
    static const DLDataType map[TN_DTYPE_COUNT] = {
        [TN_F32] = {kDLFloat, 32, 1}, [TN_F64] = {kDLFloat, 64, 1},
        [TN_I16] = {kDLInt, 16, 1},   [TN_I32] = {kDLInt, 32, 1},
        [TN_I64] = {kDLInt, 64, 1},   [TN_BOOL] = {kDLUInt, 8, 1},
        [TN_BF16] = {kDLBfloat, 16, 1}, [TN_F16] = {kDLFloat, 16, 1},
    };
    if (!tn__valid_dtype(dt)) return false;
    *out = map[dt];
    return true;
}

/* kDLBool (DLPack 0.8) holds bytes 0/1 as tenet's bool; 0.6's header lacks the name. */
enum { DL_BOOL_CODE = 6 };

static bool tn_dtype_of_dl(DLDataType d, tn_dtype *out) {
    if (d.lanes != 1) return false;
    for (int dt = 0; dt < TN_DTYPE_COUNT; dt++) {
        DLDataType m;
        if (dl_dtype_of((tn_dtype)dt, &m) && m.code == d.code && m.bits == d.bits) {
            *out = (tn_dtype)dt;
            return true;
        }
    }
    if (d.code == DL_BOOL_CODE && d.bits == 8) {
        *out = TN_BOOL;
        return true;
    }
    return false;
}

struct DLManagedTensor *tn_to_dlpack(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "t");
    DLDataType dtype;
    if (!dl_dtype_of(t->dtype, &dtype)) {
        tn__error(TN_ERR_DTYPE, "tn_to_dlpack: dtype %d has no DLPack type", (int)t->dtype);
        return NULL;
    }
    if (!tn__on_cpu(t) && tn_synchronize(tn__dev(t)) < 0) return NULL; /* the kernels that write it */
    export_ctx *c = tn__malloc(sizeof *c);
    if (!c) return NULL;
    *c = (export_ctx){.ref = tn__retain(t)};
    for (int d = 0; d < t->ndim; d++) {
        c->shape[d] = t->shape[d];
        c->strides[d] = t->stride[d];
    }
    c->m.manager_ctx = c;
    c->m.deleter = export_deleter;
    DLTensor *dl = &c->m.dl_tensor;
    dl->data = tn__ptr(t);
    dl->device = (DLDevice){tn__on_cpu(t) ? kDLCPU : kDLCUDA, tn__on_cpu(t) ? 0 : t->storage->device.index};
    dl->ndim = t->ndim;
    dl->dtype = dtype;
    dl->shape = c->shape;
    dl->strides = c->strides;
    dl->byte_offset = 0;
    return &c->m;
}

/* Every byte of a CPU uint8 import is 0 or 1 (tenet's bool kernels count bytes). */
static bool bytes_are_bools(const tn_tensor *t) {
    int64_t n = tn__numel(t->ndim, t->shape), idx[TN_MAX_DIMS] = {0}, off = 0;
    const uint8_t *p = (const uint8_t *)tn__ptr(t);
    for (int64_t i = 0; i < n; i++) {
        if (p[off] > 1) return false;
        for (int d = t->ndim - 1; d >= 0; d--) { /* next element, last dim fastest */
            off += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
    return true;
}

static void import_release(void *ctx) {
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

tn_tensor *tn_from_dlpack(struct DLManagedTensor *m) {
    TN_CHECK_NULL_ARG(m, "m");
    const DLTensor *dl = &m->dl_tensor;
    tn_dtype dt;
    if (!tn_dtype_of_dl(dl->dtype, &dt)) {
        tn__error(TN_ERR_DTYPE,
                  "tn_from_dlpack: unsupported DLPack dtype (code %u, bits %u, lanes %u): tenet "
                  "takes float16/32/64, bfloat16, int16/32/64 and uint8 or bool bytes, lanes 1",
                  (unsigned)dl->dtype.code, (unsigned)dl->dtype.bits, (unsigned)dl->dtype.lanes);
        return NULL;
    }
    tn_device dev;
    if (dl->device.device_type == kDLCPU || dl->device.device_type == kDLCUDAHost) {
        dev = TN_DEVICE_CPU;
    } else if (dl->device.device_type == kDLCUDA) {
        dev = TN_DEVICE_CUDA(dl->device.device_id);
    } else {
        tn__error(TN_ERR_DEVICE, "tn_from_dlpack: DLPack device type %d is not one tenet has",
                  (int)dl->device.device_type);
        return NULL;
    }
    if (dl->ndim < 0 || dl->ndim > TN_MAX_DIMS) {
        tn__error(TN_ERR_SHAPE, "tn_from_dlpack: %d dims, tenet has at most %d", dl->ndim,
                  TN_MAX_DIMS);
        return NULL;
    }
    if (dl->ndim > 0 && !dl->shape) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "tn_from_dlpack: shape is NULL for %d dims", dl->ndim);
        return NULL;
    }
    size_t es = tn__dtype_sizes[dt];
    if (dl->byte_offset % es != 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "tn_from_dlpack: byte_offset %llu is not a multiple of the %zu-byte elements",
                  (unsigned long long)dl->byte_offset, es);
        return NULL;
    }
    char *data = dl->data ? (char *)dl->data + dl->byte_offset : NULL;
    /* NULL strides: compact row-major (DLPack before 0.8 allows it) */
    tn_tensor *t = tn__wrap(data, dt, dl->ndim, dl->shape, dl->strides, dev, import_release, m);
    if (t && dt == TN_BOOL && dl->dtype.code == kDLUInt && tn__on_cpu(t) && !bytes_are_bools(t)) {
        t->storage->release = NULL; /* refused: m stays the caller's */
        tn_release(t);
        tn__error(TN_ERR_DTYPE, "tn_from_dlpack: uint8 values other than 0 and 1: tenet reads "
                                "uint8 only as bool and has no uint8 dtype");
        return NULL;
    }
    return tn__ret(t);
}
