/* tests/ops/rows_loss.c — rows of nll_loss and cross_entropy_ex (class weights, ignore_index,
 * reductions, (N, C, d...) inputs, label smoothing). One reference computes both from the
 * log-probabilities: per target position the weighted NLL and the smoothing term, then the
 * reduction. p: reduction (0 mean, 1 sum, 2 none), ignore_index, label_smoothing, has weight;
 * inputs: input, target (int64), weight (C, used when p[3]). */
#include <math.h>

#include "op_table.h"

static bool ref_loss(tt_ref_io *io, bool softmax) {
    int nd = io->ndim[0], cd = nd == 1 ? 0 : 1;
    if (nd < 1 || nd > 4 || io->ndim[1] != (nd == 1 ? 0 : nd - 1)) return false;
    const int64_t *sh = io->shape[0];
    int64_t c = sh[cd], nb = nd == 1 ? 1 : sh[0], inner = 1;
    for (int d = cd + 1; d < nd; d++)
        inner *= sh[d];
    int red = (int)io->p[0];
    int64_t ignore = (int64_t)io->p[1];
    double ls = io->p[2], num = 0, smooth = 0, total = 0;
    const double *w = io->p[3] != 0 ? io->x[2] : NULL;
    for (int64_t i = 0; i < nb * inner; i++) {
        const double *x = io->x[0] + (i / inner) * c * inner + i % inner; /* stride inner */
        double m = -INFINITY, z = 0, lse = 0;
        for (int64_t j = 0; softmax && j < c; j++)
            m = x[j * inner] > m ? x[j * inner] : m;
        for (int64_t j = 0; softmax && j < c; j++)
            z += exp(x[j * inner] - m);
        if (softmax) lse = m + log(z);
        int64_t t = (int64_t)io->x[1][i];
        double nll = 0, sm = 0;
        if (t != ignore) {
            if (t < 0 || t >= c) return false;
            nll = -(w ? w[t] : 1) * (x[t * inner] - lse);
            for (int64_t j = 0; j < c; j++)
                sm -= (w ? w[j] : 1) * (x[j * inner] - lse);
            total += w ? w[t] : 1;
        }
        if (red == 2) io->out[i] = (1 - ls) * nll + ls / (double)c * sm;
        num += nll, smooth += sm;
    }
    if (red == 2) return tt_ref_set_shape(io, io->ndim[1], io->shape[1]);
    double div = red == 0 ? total : 1;
    io->out[0] = (1 - ls) * num / div + ls / (double)c * smooth / div;
    return tt_ref_set_shape(io, 0, NULL);
}
static bool ref_nll_loss(tt_ref_io *io) { return io->p[2] == 0 && ref_loss(io, false); }
static bool ref_cross_entropy_ex(tt_ref_io *io) { return ref_loss(io, true); }

static tn_tensor *call_nll_loss(tn_tensor *const *in, const double *p) {
    return tn_nll_loss(in[0], in[1], p[3] != 0 ? in[2] : NULL, (tn_reduction)p[0], (int64_t)p[1]);
}
static tn_tensor *call_cross_entropy_ex(tn_tensor *const *in, const double *p) {
    return tn_cross_entropy_ex(in[0], in[1], p[3] != 0 ? in[2] : NULL, (tn_reduction)p[0],
                               (int64_t)p[1], p[2]);
}

static const tt_case loss_cases[] = {
    {.tag = "2d_mean", .ndim = {2, 1, 1}, .shape = {{4, 5}, {4}, {5}}, .p = {0, -100, 0, 0},
     .index_max = 5},
    {.tag = "2d_sum_weight", .ndim = {2, 1, 1}, .shape = {{4, 5}, {4}, {5}}, .p = {1, -100, 0, 1},
     .index_max = 5},
    {.tag = "2d_mean_weight_ignore", .ndim = {2, 1, 1}, .shape = {{6, 3}, {6}, {3}},
     .p = {0, 1, 0, 1}, .index_max = 3},
    {.tag = "1d_none", .ndim = {1, 0, 1}, .shape = {{5}, {0}, {5}}, .p = {2, -100, 0, 0},
     .index_max = 5},
    {.tag = "3d_none_ignore", .ndim = {3, 2, 1}, .shape = {{2, 3, 4}, {2, 4}, {3}},
     .p = {2, 2, 0, 0}, .index_max = 3},
    {.tag = "4d_mean_weight", .ndim = {4, 3, 1}, .shape = {{2, 3, 2, 2}, {2, 2, 2}, {3}},
     .p = {0, -100, 0, 1}, .index_max = 3},
};
static const tt_case smooth_cases[] = {
    {.tag = "2d_mean", .ndim = {2, 1, 1}, .shape = {{4, 5}, {4}, {5}}, .p = {0, -100, 0.1, 0},
     .index_max = 5},
    {.tag = "2d_mean_weight_ignore", .ndim = {2, 1, 1}, .shape = {{6, 3}, {6}, {3}},
     .p = {0, 1, 0.2, 1}, .index_max = 3},
    {.tag = "3d_none", .ndim = {3, 2, 1}, .shape = {{2, 3, 4}, {2, 4}, {3}}, .p = {2, -100, 0.3, 0},
     .index_max = 3},
    {.tag = "2d_sum_weight", .ndim = {2, 1, 1}, .shape = {{4, 5}, {4}, {5}}, .p = {1, -100, 0.25, 1},
     .index_max = 5},
    {.tag = "3d_mean_plain", .ndim = {3, 2, 1}, .shape = {{2, 3, 4}, {2, 4}, {3}}, .p = {0, -100, 0, 0},
     .index_max = 3},
};

const tt_op tt_rows_loss[] = {
    {.name = "nll_loss",
     .torch = "torch.nn.functional.nll_loss",
     .arity = 3,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_TARGET, TT_POS},
     TT_CASES(loss_cases),
     .call = call_nll_loss,
     .ref = ref_nll_loss,
     .golden = "nll_loss",
     .tol = 2},
    {.name = "cross_entropy_ex",
     .torch = "torch.nn.functional.cross_entropy(weight=, ignore_index=, reduction=, "
              "label_smoothing=)",
     .arity = 3,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_TARGET, TT_POS},
     TT_CASES(smooth_cases),
     .call = call_cross_entropy_ex,
     .ref = ref_cross_entropy_ex,
     .golden = "cross_entropy_ex",
     .tol = 2},
};
const int tt_nrows_loss = (int)(sizeof tt_rows_loss / sizeof tt_rows_loss[0]);
