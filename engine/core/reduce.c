/* The reduction dispatcher (device.h's tn__dev_reduce): checks the operands,
 * fills the sums of an empty input, builds tn_red_args from the tensors and
 * runs the device's `reduce` entry (the CPU's included), bracketed for the
 * race detector; the outputs' storages record the write. */
#include "device.h"
#include "hooks.h"

/* An output of the reduction: contiguous, nout elements of dtype dt, on dev. */
static tn_status check_out(const tn_tensor *t, const char *what, int64_t nout, tn_dtype dt,
                           tn_device dev) {
    if (!t) return TN_OK;
    if (!tn__same_device(tn__dev(t), dev) || t->dtype != dt || !tn__is_contiguous(t) ||
        tn__numel(t->ndim, t->shape) != nout)
        return tn__error(TN_ERR_INTERNAL, "reduce: bad %s output", what);
    return TN_OK;
}

static tn_status check(tn_red_op op, const tn_tensor *in, int dim, const tn_tensor *vals,
                       const tn_tensor *idx, int64_t *reduced) {
    if (dim >= (in->ndim ? in->ndim : 1) || (op == TN_RED_SUM && idx))
        return tn__error(TN_ERR_INTERNAL, "reduce: bad dim %d or outputs", dim);
    int64_t nout = 1, kept[TN_MAX_DIMS];
    *reduced = dim < 0 ? tn__numel(in->ndim, in->shape) : in->ndim ? in->shape[dim] : 1;
    if (dim >= 0 && in->ndim) {
        memcpy(kept, in->shape, (size_t)in->ndim * sizeof *kept);
        kept[dim] = 1;
        nout = tn__numel(in->ndim, kept);
    }
    tn_dtype vdt = op == TN_RED_SUM && !tn__is_float(in->dtype) ? TN_I64 : in->dtype;
    tn_status st = check_out(vals, "value", nout, vdt, tn__dev(in));
    if (st == TN_OK) st = check_out(idx, "index", nout, TN_I64, tn__dev(in));
    if (st == TN_OK && *reduced == 0 && nout > 0 && op != TN_RED_SUM)
        st = tn__error(TN_ERR_INDEX, "reduce: %s of an empty range",
                       op == TN_RED_MAX ? "max" : "min");
    return st;
}

tn_status tn__dev_reduce(tn_red_op op, const tn_tensor *in, int dim, tn_tensor *vals,
                         tn_tensor *idx, double div) {
    int64_t reduced;
    tn_status st = check(op, in, dim, vals, idx, &reduced);
    if (st < 0) return st;
    if (tn__numel(in->ndim, in->shape) == 0) /* empty slices: sum 0 (mean NaN) */
        return vals && tn__numel(vals->ndim, vals->shape) ? tn__fill_into(vals, 0.0 / div) : TN_OK;
    if (dim < 0 && !tn__is_contiguous(in))
        return tn__error(TN_ERR_INTERNAL, "reduce: a whole reduction needs a contiguous input");
    tn_device dev = tn__dev(in);
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    tn_red_args a = {.op = op, .dtype = in->dtype, .in = tn__ptr(in), .ndim = in->ndim,
                     .dim = dim, .vals = vals ? tn__ptr(vals) : NULL,
                     .idx = idx ? (int64_t *)tn__ptr(idx) : NULL, .div = div};
    memcpy(a.shape, in->shape, (size_t)in->ndim * sizeof *a.shape);
    memcpy(a.stride, in->stride, (size_t)in->ndim * sizeof *a.stride);
    const tn_tensor *ops[3] = {vals, idx, in};
    tn_race_access ra; /* vals and idx written, in read */
    tn__race_begin(&ra, 3, ops, 3u, "reduce");
    st = be->reduce(dev.index, &a);
    tn__race_end(&ra);
    if (st == TN_OK && vals) tn__storage_wrote(vals->storage);
    if (st == TN_OK && idx) tn__storage_wrote(idx->storage);
    return st;
}
