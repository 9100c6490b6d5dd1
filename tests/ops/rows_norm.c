/* tests/ops/rows_norm.c — rows of batch_norm and group_norm. References: two-pass statistics
 * per unit (a channel over the batch and trailing dims; a sample's group of channels), then the
 * per-channel affine.
 *
 * batch_norm's running statistics are made by its adapter (the table's inputs are x, weight and
 * bias): running_mean[c] = 0.1 c - 0.1, running_var[c] = 0.5 + 0.25 c, in x's dtype and on its
 * device; tests/test_batch_norm.c checks their update.
 */
#include <math.h>

#include "op_table.h"

/* x (n, c, *) as n, c, s; false below 2 dims */
static bool ncs(const tt_ref_io *io, int64_t *n, int64_t *c, int64_t *s) {
    int nx = io->ndim[0];
    if (nx < 2) return false;
    *n = io->shape[0][0], *c = io->shape[0][1], *s = tt_numel(nx - 2, io->shape[0] + 2);
    return true;
}

static bool param_fits(const tt_ref_io *io, int k, bool has, int64_t c) {
    return !has || (io->ndim[k] == 1 && io->shape[k][0] == c);
}

/* out for the planes of one unit: planes (i, ch) for i in [i0, i1), ch in [c0, c1), statistics
 * mean and rstd given (fixed) or computed */
static void ref_unit(tt_ref_io *io, int64_t c, int64_t s, int64_t i0, int64_t i1, int64_t c0,
                     int64_t c1, const double *fixed, const bool has[2], double eps) {
    const double *x = io->x[0];
    double m = 0, v = 0, cnt = (double)((i1 - i0) * (c1 - c0) * s);
    for (int pass = 0; !fixed && pass < 2; pass++)
        for (int64_t i = i0; i < i1; i++)
            for (int64_t ch = c0; ch < c1; ch++)
                for (int64_t j = 0; j < s; j++) {
                    double d = x[(i * c + ch) * s + j];
                    if (pass == 0)
                        m += d / cnt;
                    else
                        v += (d - m) * (d - m) / cnt;
                }
    if (fixed) m = fixed[0], v = fixed[1];
    for (int64_t i = i0; i < i1; i++)
        for (int64_t ch = c0; ch < c1; ch++)
            for (int64_t j = 0; j < s; j++) {
                int64_t at = (i * c + ch) * s + j;
                io->out[at] = (x[at] - m) / sqrt(v + eps) * (has[0] ? io->x[1][ch] : 1) +
                              (has[1] ? io->x[2][ch] : 0);
            }
}

/* batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps): p =
 * training, has weight, has bias, has running statistics, momentum, eps */
static bool ref_batch_norm(tt_ref_io *io) {
    int64_t n, c, s;
    bool train = io->p[0] != 0, has[2] = {io->p[1] != 0, io->p[2] != 0};
    if (!ncs(io, &n, &c, &s) || !param_fits(io, 1, has[0], c) || !param_fits(io, 2, has[1], c) ||
        (train && n * s == 1) || (!train && !io->p[3]) ||
        !tt_ref_set_shape(io, io->ndim[0], io->shape[0]))
        return false;
    for (int64_t ch = 0; ch < c; ch++) {
        double run[2] = {0.1 * (double)ch - 0.1, 0.5 + 0.25 * (double)ch};
        ref_unit(io, c, s, 0, n, ch, ch + 1, train ? NULL : run, has, io->p[5]);
    }
    return true;
}
static tn_tensor *running(tn_tensor *x, int64_t c, double a, double b) {
    tn_tensor *r = tn_arange(0, (double)c, 1, TN_F64);
    tn_tensor *v = r ? tn_add_scalar(tn_mul_scalar(r, a), b) : NULL;
    return v ? tn_to(v, tn_dtype_of(x), tn_device_of(x)) : NULL;
}
static tn_tensor *body_batch_norm(tn_tensor *const *in, const double *p) {
    int64_t c = tn_ndim(in[0]) >= 2 ? tn_shape(in[0])[1] : 1;
    tn_tensor *rm = p[3] ? running(in[0], c, 0.1, -0.1) : NULL;
    tn_tensor *rv = p[3] ? running(in[0], c, 0.25, 0.5) : NULL;
    if (p[3] && (!rm || !rv)) return NULL;
    return tn_batch_norm(in[0], rm, rv, p[1] ? in[1] : NULL, p[2] ? in[2] : NULL, p[0] != 0, p[4],
                         p[5]);
}
static tn_tensor *call_batch_norm(tn_tensor *const *in, const double *p) {
    return tt_scoped(body_batch_norm, in, p);
}

/* group_norm(x, num_groups, weight, bias, eps): p = num_groups, has weight, has bias, eps */
static bool ref_group_norm(tt_ref_io *io) {
    int64_t n, c, s, g = (int64_t)io->p[0];
    bool has[2] = {io->p[1] != 0, io->p[2] != 0};
    if (!ncs(io, &n, &c, &s) || g <= 0 || c % g || (n * c / g) * s == 1 ||
        !param_fits(io, 1, has[0], c) || !param_fits(io, 2, has[1], c) ||
        !tt_ref_set_shape(io, io->ndim[0], io->shape[0]))
        return false;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < g; k++)
            ref_unit(io, c, s, i, i + 1, k * (c / g), (k + 1) * (c / g), NULL, has, io->p[3]);
    return true;
}
static tn_tensor *call_group_norm(tn_tensor *const *in, const double *p) {
    return tn_group_norm(in[0], (int64_t)p[0], p[1] ? in[1] : NULL, p[2] ? in[2] : NULL, p[3]);
}

static const tt_case bn_cases[] = {
    /* p: training, has weight, has bias, has running statistics, momentum, eps */
    {.tag = "1d_train",
     .ndim = {2, 1, 1},
     .shape = {{4, 3}, {3}, {3}},
     .p = {1, 1, 1, 1, 0.1, 1e-5}},
    {.tag = "3d_train_w",
     .ndim = {3, 1, 1},
     .shape = {{2, 3, 4}, {3}, {3}},
     .p = {1, 1, 0, 0, 0.1, 1e-5}},
    {.tag = "2d_train_b",
     .ndim = {4, 1, 1},
     .shape = {{2, 2, 3, 3}, {2}, {2}},
     .p = {1, 0, 1, 1, 0.3, 1e-3}},
    {.tag = "2d_eval",
     .ndim = {4, 1, 1},
     .shape = {{2, 2, 3, 3}, {2}, {2}},
     .p = {0, 1, 1, 1, 0.1, 1e-5}},
    {.tag = "eval_plain",
     .ndim = {3, 1, 1},
     .shape = {{3, 2, 5}, {2}, {2}},
     .p = {0, 0, 0, 1, 0.1, 1e-5}},
    {.tag = "batch1",
     .ndim = {3, 1, 1},
     .shape = {{1, 3, 4}, {3}, {3}},
     .p = {1, 1, 1, 1, 0.1, 1e-5}},
    {.tag = "empty_spatial", /* no weight, bias or running statistics */
     .ndim = {3, 1, 1},
     .shape = {{2, 3, 0}, {0}, {0}},
     .p = {1, 0, 0, 0, 0.1, 1e-5}},
};
static const tt_case gn_cases[] = {
    /* p: num_groups, has weight, has bias, eps */
    {.tag = "3d_wb", .ndim = {3, 1, 1}, .shape = {{2, 6, 3}, {6}, {6}}, .p = {3, 1, 1, 1e-5}},
    {.tag = "4d_w", .ndim = {4, 1, 1}, .shape = {{2, 4, 2, 3}, {4}, {4}}, .p = {2, 1, 0, 1e-3}},
    {.tag = "2d_b", .ndim = {2, 1, 1}, .shape = {{3, 4}, {4}, {4}}, .p = {1, 0, 1, 1e-5}},
    {.tag = "per_channel", .ndim = {3, 1, 1}, .shape = {{2, 3, 4}, {3}, {3}}, .p = {3, 0, 0, 1e-5}},
    {.tag = "empty_spatial",
     .ndim = {3, 1, 1},
     .shape = {{2, 6, 0}, {0}, {0}},
     .p = {3, 0, 0, 1e-5}},
};

const tt_op tt_rows_norm[] = {
    {.name = "batch_norm",
     .torch = "torch.nn.functional.batch_norm",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(bn_cases),
     .call = call_batch_norm,
     .ref = ref_batch_norm,
     .golden = "batch_norm",
     .tol = 8},
    {.name = "group_norm",
     .torch = "torch.nn.functional.group_norm",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(gn_cases),
     .call = call_group_norm,
     .ref = ref_group_norm,
     .golden = "group_norm",
     .tol = 8},
};
const int tt_nrows_norm = (int)(sizeof tt_rows_norm / sizeof tt_rows_norm[0]);
