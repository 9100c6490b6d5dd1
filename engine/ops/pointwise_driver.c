/* The shared pointwise driver (see pointwise_driver.h). */
#include "pointwise_driver.h"

tn_status tn__pw_check_dtype(const char *op, tn_pw_code code, tn_dtype dt) {
    if (tn_pw_supports(code, dt)) return TN_OK;
    return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for '%s'", op, tn_dtype_name(dt));
}

/* An input as the kernel needs it: dtype dt on device dev (a CPU scalar
 * joining a device op moves there). NULL slot: use the input as is. */
/* An input of an op writing `out` that reads out's memory through another
 * geometry (x.add_(x[0]), a transposed alias): on the CPU each row reads a
 * broadcast input before writing, but GPU threads would race with the
 * writes, so a device kernel gets a copy. The same view is fine (each
 * element reads what it then writes). */
static bool overlaps_otherwise(const tn_tensor *x, const tn_tensor *out) {
    if (x->storage != out->storage || tn__on_cpu(out)) return false;
    if (x->offset != out->offset || x->ndim != out->ndim) return true;
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != out->shape[i] || x->stride[i] != out->stride[i]) return true;
    return false;
}

static inline tn_status prepare_input(const tn_tensor *x, tn_dtype dt, const tn_tensor *out,
                                      tn_tensor **c) {
    *c = NULL;
    tn_device dev = tn__dev(out);
    if (x->dtype == dt && tn__same_device(tn__dev(x), dev) && !overlaps_otherwise(x, out))
        return TN_OK;
    return (*c = tn__copy_to_device(x, dt, dev)) ? TN_OK : tn_last_status();
}

/* out = code(a, b) on out's device; devices checked by the caller. */
static tn_status binary_run(tn_pw_code code, tn_tensor *out, const tn_tensor *a,
                            const tn_tensor *b, tn_dtype compute) {
    tn_tensor *ca = NULL, *cb = NULL;
    tn_status st;
    if ((st = prepare_input(a, compute, out, &ca)) < 0 ||
        (st = prepare_input(b, compute, out, &cb)) < 0) {
        tn_release(ca);
        return st;
    }
    st = tn__dev_pointwise(code, compute, 3,
                           (tn_tensor *const[]){out, ca ? ca : (tn_tensor *)a,
                                                cb ? cb : (tn_tensor *)b},
                           NULL, false);
    if (st == TN_OK) tn__storage_wrote(out->storage);
    tn_release(ca);
    tn_release(cb);
    return st;
}

tn_status tn__pw_binary_into(const char *op, tn_pw_code code, tn_tensor *out,
                             const tn_tensor *a, const tn_tensor *b, tn_dtype compute) {
    tn_status st = tn__pw_check_dtype(op, code, compute);
    tn_device dev;
    if (st == TN_OK) st = tn__result_device(3, (const tn_tensor *[]){out, a, b}, &dev);
    return st < 0 ? st : binary_run(code, out, a, b, compute);
}

tn_tensor *tn__pw_binary(const char *op, tn_pw_code code, const tn_tensor *a,
                         const tn_tensor *b, tn_dtype compute, tn_dtype out_dt) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    int nd;
    int64_t shape[TN_MAX_DIMS];
    tn_device dev;
    if (tn__pw_check_dtype(op, code, compute) < 0) return NULL;
    if (tn__result_device(2, (const tn_tensor *[]){a, b}, &dev) < 0) return NULL;
    if (tn__broadcast_shape(a->ndim, a->shape, b->ndim, b->shape, &nd, shape) < 0) return NULL;
    tn_tensor *out = tn__empty_on(nd, shape, out_dt, dev);
    if (out && binary_run(code, out, a, b, compute) < 0) {
        tn_release(out);
        return NULL;
    }
    tn__op_done(op, t0, out, 2, (const tn_tensor *[]){a, b});
    return out;
}

/* out = code(a; ctx) on out's device; devices checked by the caller. */
static tn_status unary_run(tn_pw_code code, tn_tensor *out, const tn_tensor *a,
                           const tn_pw_ctx *ctx) {
    tn_tensor *ca;
    tn_status st = prepare_input(a, out->dtype, out, &ca);
    if (st < 0) return st;
    st = tn__dev_pointwise(code, out->dtype, 2,
                           (tn_tensor *const[]){out, ca ? ca : (tn_tensor *)a}, ctx, false);
    if (st == TN_OK) tn__storage_wrote(out->storage);
    tn_release(ca);
    return st;
}

tn_status tn__pw_unary_into(const char *op, tn_pw_code code, tn_tensor *out,
                            const tn_tensor *a, const tn_pw_ctx *ctx) {
    tn_status st = tn__pw_check_dtype(op, code, out->dtype);
    tn_device dev;
    if (st == TN_OK) st = tn__result_device(2, (const tn_tensor *[]){out, a}, &dev);
    return st < 0 ? st : unary_run(code, out, a, ctx);
}

tn_tensor *tn__pw_unary(const char *op, tn_pw_code code, const tn_tensor *a,
                        tn_dtype compute, const tn_pw_ctx *ctx) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    if (tn__pw_check_dtype(op, code, compute) < 0) return NULL;
    tn_tensor *out = tn__empty_on(a->ndim, a->shape, compute, tn__dev(a));
    if (out && unary_run(code, out, a, ctx) < 0) {
        tn_release(out);
        return NULL;
    }
    tn__op_done(op, t0, out, 1, (const tn_tensor *[]){a});
    return out;
}

static int category(tn_dtype d) { return d == TN_BOOL ? 0 : tn__is_float(d) ? 2 : 1; }

tn_status tn__inplace_prepare(const char *op, tn_tensor *self, const tn_tensor *src,
                              tn_dtype result_dt) {
    TN_CHECK_NULL_ARG_ST(self, "self");
    tn_status st = tn__check_inplace(self, src);
    if (st < 0) return st;
    for (int i = 0; i < self->ndim; i++)
        if (self->stride[i] == 0 && self->shape[i] > 1)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "unsupported operation: more than one element of the written-to "
                             "tensor refers to a single memory location. Please clone() the "
                             "tensor before performing the operation.");
    if (category(result_dt) > category(self->dtype))
        return tn__error(TN_ERR_DTYPE, "result type %s can't be cast to the desired output type %s",
                         tn_dtype_name(result_dt), tn_dtype_name(self->dtype));
    (void)op;
    return src ? tn__check_broadcast_into(self, src->ndim, src->shape) : TN_OK;
}

const char *tn__torch_scalar_name(tn_dtype d) {
    static const char *const n[TN_DTYPE_COUNT] = {"Float", "Double", "Short",    "Int",
                                                  "Long",  "Bool",   "BFloat16", "Half"};
    return n[d];
}

const char *tn__torch_cpp_name(tn_dtype d) {
    static const char *const n[TN_DTYPE_COUNT] = {
        "float", "double", "short int", "int", "long int", "bool", "c10::BFloat16", "c10::Half"};
    return n[d];
}
