/* tn_write_inplace: in-place writes by code outside tenet (a collective, a
 * library's kernel) made visible to autograd and the debug modes as tenet's
 * own in-place ops are: one version bump, the race detector's access, the
 * anomaly record under the caller's name. */
#include "hooks.h"

tn_status tn_write_inplace(tn_tensor *t, const char *op, tn_write_fn fn, void *ctx) {
    if (!t || !op || !fn)
        return tn__null_arg(!t, "tn_write_inplace: argument '%s' is NULL",
                            !t ? "t" : !op ? "op" : "fn");
    if (!tn__is_contiguous(t))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_write_inplace: the tensor must be contiguous");
    tn_race_access ra; /* t written */
    tn__race_begin(&ra, 1, (const tn_tensor *const *)&t, 1u, "external");
    tn_status st = fn(tn__ptr(t), tn__numel(t->ndim, t->shape), ctx);
    tn__race_end(&ra);
    tn__version_bump(t, op);
    return st;
}
