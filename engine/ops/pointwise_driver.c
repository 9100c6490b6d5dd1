/* The shared pointwise driver (see pointwise_driver.h). */
#include "pointwise_driver.h"

tn_status tn__pw_check_dtype(const char *op, const tn_loop_fn *loops, tn_dtype dt) {
    if (tn__valid_dtype(dt) && loops[dt]) return TN_OK;
    return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for '%s'", op, tn_dtype_name(dt));
}

/* Inputs converted to the compute dtype; a NULL slot means "use as is". */
static tn_status cast_inputs(const tn_tensor *a, const tn_tensor *b, tn_dtype dt,
                             tn_tensor **ca, tn_tensor **cb) {
    *ca = *cb = NULL;
    if (a->dtype != dt && !(*ca = tn__copy_as(a, dt))) return tn_last_status();
    if (b && b->dtype != dt && !(*cb = tn__copy_as(b, dt))) {
        tn_release(*ca);
        *ca = NULL;
        return tn_last_status();
    }
    return TN_OK;
}

tn_status tn__pw_binary_into(const char *op, const tn_loop_fn *loops, tn_tensor *out,
                             const tn_tensor *a, const tn_tensor *b, tn_dtype compute) {
    tn_status st = tn__pw_check_dtype(op, loops, compute);
    if (st < 0) return st;
    tn_tensor *ca, *cb;
    if ((st = cast_inputs(a, b, compute, &ca, &cb)) < 0) return st;
    tn_iter it;
    tn__iter_init(&it, 3, (tn_tensor *const[]){out, ca ? ca : (tn_tensor *)a,
                                                cb ? cb : (tn_tensor *)b});
    tn__iter_run(&it, loops[compute], NULL, true);
    tn__storage_wrote(out->storage);
    tn_release(ca);
    tn_release(cb);
    return TN_OK;
}

tn_tensor *tn__pw_binary(const char *op, const tn_loop_fn *loops, const tn_tensor *a,
                         const tn_tensor *b, tn_dtype compute, tn_dtype out_dt) {
    int nd;
    int64_t shape[TN_MAX_DIMS];
    if (tn__pw_check_dtype(op, loops, compute) < 0) return NULL;
    if (tn__broadcast_shape(a->ndim, a->shape, b->ndim, b->shape, &nd, shape) < 0) return NULL;
    tn_tensor *out = tn__empty(nd, shape, out_dt);
    if (out && tn__pw_binary_into(op, loops, out, a, b, compute) < 0) {
        tn_release(out);
        return NULL;
    }
    tn__anomaly_forward(op, out, 2, (const tn_tensor *[]){a, b});
    return out;
}

tn_status tn__pw_unary_into(const char *op, const tn_loop_fn *loops, tn_tensor *out,
                            const tn_tensor *a, const tn_pw_ctx *ctx) {
    tn_status st = tn__pw_check_dtype(op, loops, out->dtype);
    if (st < 0) return st;
    tn_tensor *ca, *unused;
    if ((st = cast_inputs(a, NULL, out->dtype, &ca, &unused)) < 0) return st;
    tn_iter it;
    tn__iter_init(&it, 2, (tn_tensor *const[]){out, ca ? ca : (tn_tensor *)a});
    tn__iter_run(&it, loops[out->dtype], (void *)ctx, true);
    tn__storage_wrote(out->storage);
    tn_release(ca);
    return TN_OK;
}

tn_tensor *tn__pw_unary(const char *op, const tn_loop_fn *loops, const tn_tensor *a,
                        tn_dtype compute, const tn_pw_ctx *ctx) {
    if (tn__pw_check_dtype(op, loops, compute) < 0) return NULL;
    tn_tensor *out = tn__empty(a->ndim, a->shape, compute);
    if (out && tn__pw_unary_into(op, loops, out, a, ctx) < 0) {
        tn_release(out);
        return NULL;
    }
    tn__anomaly_forward(op, out, 1, (const tn_tensor *[]){a});
    return out;
}

static int category(tn_dtype d) { return d == TN_BOOL ? 0 : tn__is_float(d) ? 2 : 1; }

tn_status tn__inplace_prepare(const char *op, tn_tensor *self, const tn_tensor *src,
                              tn_dtype result_dt) {
    TN_CHECK_NULL_ARG_ST(self, "self");
    tn_status st = tn__check_inplace(self);
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
    if (!src) return TN_OK;
    int nd;
    int64_t shape[TN_MAX_DIMS];
    if (tn__broadcast_shape(self->ndim, self->shape, src->ndim, src->shape, &nd, shape) < 0)
        return TN_ERR_SHAPE;
    if (nd != self->ndim || memcmp(shape, self->shape, (size_t)nd * sizeof *shape) != 0) {
        char a[160], b[160];
        tn__format_shape(a, sizeof a, self->ndim, self->shape);
        tn__format_shape(b, sizeof b, nd, shape);
        return tn__error(TN_ERR_SHAPE,
                         "output with shape %s doesn't match the broadcast shape %s", a, b);
    }
    (void)op;
    return TN_OK;
}
