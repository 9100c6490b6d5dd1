/* debug/tensor_scan.h — reading a CPU tensor in place, a run of elements at
 * a time, for the debug tools' scans (check_nan's NaN/Inf test, the gradient
 * monitor's norms): the whole tensor in chunks when it is contiguous, else
 * one run per row of its last dim, through its strides. No copy, no
 * allocation. Units are independent: callers split them over threads. */
#ifndef TN_DEBUG_TENSOR_SCAN_H
#define TN_DEBUG_TENSOR_SCAN_H

#include "../engine/core/internal.h"

typedef struct tn_scan_plan {
    const tn_tensor *t;
    const char *base;
    int64_t es;   /* element size, bytes */
    bool flat;    /* contiguous: one row cut into chunks of `len` */
    int64_t n;    /* elements */
    int64_t len;  /* elements per unit (the last flat chunk may be shorter) */
    int64_t step; /* element stride within a unit */
    int64_t units;
} tn_scan_plan;

/* The plan of t (CPU); false for an empty tensor (nothing to read). */
static inline bool tn__scan_plan(tn_scan_plan *sp, const tn_tensor *t) {
    *sp = (tn_scan_plan){.t = t, .n = tn__numel(t->ndim, t->shape)};
    if (sp->n == 0) return false;
    sp->base = tn__ptr(t);
    sp->es = (int64_t)tn__dtype_sizes[t->dtype];
    sp->flat = t->ndim == 0 || tn__is_contiguous(t);
    if (sp->flat) {
        sp->len = sp->n > TN_GRAIN ? TN_GRAIN : sp->n;
        sp->step = 1;
        sp->units = (sp->n + sp->len - 1) / sp->len;
    } else {
        sp->len = t->shape[t->ndim - 1];
        sp->step = t->stride[t->ndim - 1];
        sp->units = sp->n / sp->len;
    }
    return true;
}

/* Unit u: its first element and its length. */
static inline const char *tn__scan_unit(const tn_scan_plan *sp, int64_t u, int64_t *len) {
    *len = sp->flat && u == sp->units - 1 ? sp->n - u * sp->len : sp->len;
    if (sp->flat) return sp->base + u * sp->len * sp->es;
    const tn_tensor *t = sp->t;
    int64_t off = 0;
    for (int d = t->ndim - 2; d >= 0; d--) { /* row u's index over the outer dims */
        off += (u % t->shape[d]) * t->stride[d];
        u /= t->shape[d];
    }
    return sp->base + off * sp->es;
}

#endif
