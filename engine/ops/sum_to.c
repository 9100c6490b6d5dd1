/* Summing a gradient back to an input's shape (broadcast reduction), the
 * engine's step after every backward formula. */
#include "pointwise_driver.h"

/* Dims of g (ndim gn) that are reduced to reach shape (ndim n). */
static int reduced_dims(const tn_tensor *g, int n, const int64_t *shape, int *dims) {
    int k = 0, lead = g->ndim - n;
    for (int i = 0; i < g->ndim; i++)
        if (i < lead || (shape[i - lead] == 1 && g->shape[i] != 1)) dims[k++] = i;
    return k;
}

static tn_tensor *sum_to_fast(tn_tensor *g, int n, const int64_t *shape) {
    tn_tensor *out = tn__zeros(n, shape, g->dtype);
    if (!out) return NULL;
    /* out viewed with g's rank: leading dims and reduced dims get stride 0 */
    int64_t st[TN_MAX_DIMS];
    int lead = g->ndim - n;
    for (int i = 0; i < g->ndim; i++)
        st[i] = i < lead || (shape[i - lead] == 1 && g->shape[i] != 1) ? 0 : out->stride[i - lead];
    tn_tensor *ov = tn__alias(out, g->ndim, g->shape, st, 0);
    if (!ov) {
        tn_release(out);
        return NULL;
    }
    /* out's elements repeat in ov (stride 0): rows in order, on one thread */
    tn_status status = tn__dev_pointwise(TN_PW_ACCUM, g->dtype, 2, (tn_tensor *const[]){ov, g},
                                         NULL, true);
    tn_release(ov);
    if (status < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

tn_tensor *tn__sum_to(tn_tensor *g, int ndim, const int64_t *shape, tn_dtype dt) {
    int dims[TN_MAX_DIMS];
    int k = reduced_dims(g, ndim, shape, dims);
    tn_tensor *r;
    if (k == 0 && g->ndim == ndim) {
        r = tn__retain(g);
    } else if (!tn__grad_enabled() && tn__is_float(g->dtype) && tn__on_cpu(g)) {
        r = sum_to_fast(g, ndim, shape);
    } else { /* differentiable (create_graph): sum over dims, then reshape */
        tn_tensor *cur = tn__retain(g);
        for (int i = k - 1; i >= 0 && cur; i--) {
            tn_tensor *nx = tn_sum_dim(cur, dims[i], true);
            tn_release(cur);
            cur = nx;
        }
        r = cur ? tn_reshape(cur, ndim, shape) : NULL;
        tn_release(cur);
    }
    if (!r || r->dtype == dt) return r;
    tn_tensor *c = tn__to_dtype_autograd(r, dt);
    tn_release(r);
    return c;
}
