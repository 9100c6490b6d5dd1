/* debug/nonfinite.c — check_nan's scan of a CPU tensor for NaN and Inf.
 *
 * With check_nan on, every op's output and every gradient a backward node
 * produces is scanned, so the scan must cost a small fraction of the op that
 * made the tensor. It reads the tensor in place through its strides (no copy,
 * no allocation: it cannot fail), a row at a time — the whole tensor when it is
 * contiguous — testing exponent bits: a float is NaN or Inf exactly when its
 * exponent field is all ones. The row loop is branch-free integer work that
 * the compiler vectorises, and rows (or chunks of one long row) are split
 * over OpenMP threads above the grain (TN_GRAIN elements), each thread OR-ing
 * its own flag; below it the scan opens no parallel region. Only
 * a tensor found non-finite is read again, element by element, to tell NaN
 * (which wins) from Inf: that happens once per anomaly, not per op.
 */
#include <string.h>

#include "debug_internal.h"
#include "tensor_scan.h"

#define EXP32 0x7f800000u
#define EXP64 0x7ff0000000000000ull
#define EXPBF16 0x7f80u
#define EXPF16 0x7c00u

/* 1 when one of the n elements at p (byte stride s) has an all-ones exponent */
#define ROW_SCAN(NAME, U, EXP)                                                                     \
    static unsigned NAME(const char *p, int64_t n, int64_t s) {                                    \
        unsigned acc = 0;                                                                          \
        if (s == (int64_t)sizeof(U)) {                                                             \
            for (int64_t i = 0; i < n; i++) {                                                      \
                U b;                                                                               \
                memcpy(&b, p + i * (int64_t)sizeof(U), sizeof b);                                  \
                acc |= (b & EXP) == EXP;                                                           \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                U b;                                                                               \
                memcpy(&b, p + i * s, sizeof b);                                                   \
                acc |= (b & EXP) == EXP;                                                           \
            }                                                                                      \
        }                                                                                          \
        return acc;                                                                                \
    }
ROW_SCAN(row_bad_f32, uint32_t, EXP32)
ROW_SCAN(row_bad_f64, uint64_t, EXP64)
ROW_SCAN(row_bad_bf16, uint16_t, EXPBF16)
ROW_SCAN(row_bad_f16, uint16_t, EXPF16)

typedef unsigned (*row_scan_fn)(const char *p, int64_t n, int64_t s);
static row_scan_fn row_scan_of(tn_dtype dt) {
    return dt == TN_F32 ? row_bad_f32 : dt == TN_F64 ? row_bad_f64 : dt == TN_BF16 ? row_bad_bf16
                                                                                   : row_bad_f16;
}

/* units [u0, u1) of the plan: nonzero when one holds a NaN or an Inf */
static unsigned scan_units(const tn_scan_plan *sp, int64_t u0, int64_t u1) {
    const int64_t step = sp->step * sp->es;
    const row_scan_fn row_bad = row_scan_of(sp->t->dtype);
    unsigned bad = 0;
    for (int64_t u = u0; u < u1; u++) {
        int64_t len;
        const char *p = tn__scan_unit(sp, u, &len);
        bad |= row_bad(p, len, step);
    }
    return bad;
}

static bool any_nonfinite(const tn_tensor *t) {
    tn_scan_plan sp;
    if (!tn__scan_plan(&sp, t)) return false;
    const int nt = tn__threads_for(sp.n);
    /* Below the grain (tn__threads_for: 1), no parallel region at all: even one that its if
     * clause keeps serial costs libgomp 1-2 us (a team made and ended), which on a tiny graph
     * is most of the op the scan checks (tiny_anomaly_nan, docs/performance.md). */
    if (nt <= 1) return scan_units(&sp, 0, sp.units) != 0;
    unsigned bad = 0;
#pragma omp parallel num_threads(nt) reduction(| : bad)
    {
        TN_OMP_SPAN("nonfinite");
#pragma omp for schedule(static) nowait
        for (int64_t u = 0; u < sp.units; u++)
            bad |= scan_units(&sp, u, u + 1);
    }
    return bad != 0;
}

/* 1: a NaN; 2: an Inf and no NaN (the rare path: element by element). */
static int classify(const tn_tensor *t) {
    int64_t n = tn__numel(t->ndim, t->shape), idx[TN_MAX_DIMS] = {0}, off = 0;
    const char *p = tn__ptr(t);
    int res = 0;
    for (int64_t i = 0; i < n && res != 1; i++) {
        double v = tn__load(p + off * (int64_t)tn__dtype_sizes[t->dtype], t->dtype);
        if (v != v)
            res = 1;
        else if (v - v != 0)
            res = 2;
        for (int d = t->ndim - 1; d >= 0; d--) { /* next element, last dim fastest */
            off += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
    return res;
}

int tn__nonfinite_cpu(const tn_tensor *t) {
    if (!tn__is_float(t->dtype)) return 0;
    return any_nonfinite(t) ? classify(t) : 0;
}
