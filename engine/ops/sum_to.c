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

/* Serial accumulation of g into out (out broadcast over the reduced dims):
 * out operand strides are 0 there, so rows never run in parallel. */
#define ACC(T)                                                                            \
    static void acc_##T(void *c, int64_t n, char **p, const int64_t *s) {                 \
        (void)c;                                                                          \
        if (s[0] == 0) {                                                                  \
            T acc = 0;                                                                    \
            for (int64_t i = 0; i < n; i++) acc += *(const T *)(p[1] + i * s[1]);         \
            *(T *)p[0] += acc;                                                            \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++)                                               \
                *(T *)(p[0] + i * s[0]) += *(const T *)(p[1] + i * s[1]);                 \
        }                                                                                 \
    }
ACC(float)
ACC(double)
static const tn_loop_fn acc_loops[TN_DTYPE_COUNT] = {acc_float, acc_double};

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
    tn_iter it;
    tn__iter_init(&it, 2, (tn_tensor *const[]){ov, g});
    tn__iter_run(&it, acc_loops[g->dtype], NULL, false);
    tn_release(ov);
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
