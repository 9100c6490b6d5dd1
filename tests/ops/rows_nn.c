/* tests/ops/rows_nn.c — rows of matmul, linear, the losses, layer_norm, dropout and
 * scaled_dot_product_attention. References: naive loops (triple-loop products, two-pass
 * statistics, a softmax per attention row). */
#include <math.h>

#include "op_table.h"

/* Leading ("batch") dims of io's first n inputs, each of which has `mat[k]` matrix dims at its
 * end, broadcast into b's output shape; tt_ref_bcast_at(b, k, i) is then input k's batch. */
static bool batch_dims(const tt_ref_io *io, int n, const int *mat, tt_ref_io *b) {
    *b = (tt_ref_io){.nin = n, .out_cap = INT64_MAX};
    for (int k = 0; k < n; k++) {
        b->ndim[k] = io->ndim[k] > mat[k] ? io->ndim[k] - mat[k] : 0;
        b->shape[k] = io->shape[k];
    }
    return tt_ref_broadcast(b, n);
}

/* torch.matmul: a 1-D operand is a row (a) or a column (b), its dim removed after */
static bool ref_matmul(tt_ref_io *io) {
    int na = io->ndim[0], nb = io->ndim[1];
    const int64_t *sa = io->shape[0], *sb = io->shape[1];
    if (!na || !nb) return false;
    int64_t m = na > 1 ? sa[na - 2] : 1, k = sa[na - 1], n = nb > 1 ? sb[nb - 1] : 1;
    tt_ref_io bt;
    if (k != (nb > 1 ? sb[nb - 2] : sb[0]) || !batch_dims(io, 2, (int[]){2, 2}, &bt)) return false;
    int64_t shape[TN_MAX_DIMS + 2];
    int nd = bt.out_ndim;
    for (int d = 0; d < nd; d++)
        shape[d] = bt.out_shape[d];
    if (na > 1) shape[nd++] = m;
    if (nb > 1) shape[nd++] = n;
    if (!tt_ref_set_shape(io, nd, shape)) return false;
    int64_t batches = tt_numel(bt.out_ndim, bt.out_shape);
    for (int64_t b = 0; b < batches; b++) {
        const double *a = io->x[0] + tt_ref_bcast_at(&bt, 0, b) * m * k;
        const double *w = io->x[1] + tt_ref_bcast_at(&bt, 1, b) * k * n;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t l = 0; l < k; l++)
                    s += a[i * k + l] * w[l * n + j];
                io->out[(b * m + i) * n + j] = s;
            }
    }
    return true;
}
static tn_tensor *call_matmul(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_matmul(in[0], in[1]);
}

/* linear(x (*, in), w (out, in), b (out) when p[0]) */
static bool ref_linear(tt_ref_io *io) {
    int nx = io->ndim[0];
    if (nx < 1 || io->ndim[1] != 2 || io->ndim[2] != 1) return false;
    int64_t in = io->shape[0][nx - 1], out = io->shape[1][0], shape[TN_MAX_DIMS];
    if (io->shape[1][1] != in || io->shape[2][0] != out) return false;
    for (int d = 0; d < nx - 1; d++)
        shape[d] = io->shape[0][d];
    shape[nx - 1] = out;
    if (!tt_ref_set_shape(io, nx, shape)) return false;
    int64_t rows = tt_numel(nx - 1, io->shape[0]);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double s = io->p[0] ? io->x[2][o] : 0;
            for (int64_t i = 0; i < in; i++)
                s += io->x[0][r * in + i] * io->x[1][o * in + i];
            io->out[r * out + o] = s;
        }
    return true;
}
static tn_tensor *call_linear(tn_tensor *const *in, const double *p) {
    return tn_linear(in[0], in[1], p[0] ? in[2] : NULL);
}

/* cross_entropy(logits (N, C), targets (N)): mean of -log_softmax[target] */
static bool ref_cross_entropy(tt_ref_io *io) {
    if (io->ndim[0] != 2 || io->ndim[1] != 1 || io->shape[1][0] != io->shape[0][0]) return false;
    int64_t n = io->shape[0][0], c = io->shape[0][1];
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *x = io->x[0] + i * c;
        double z = 0;
        for (int64_t j = 0; j < c; j++)
            z += exp(x[j]);
        s += log(z) - x[(int64_t)io->x[1][i]];
    }
    io->out[0] = s / (double)n;
    return tt_ref_set_shape(io, 0, NULL);
}
static tn_tensor *call_cross_entropy(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_cross_entropy(in[0], in[1]);
}

/* mse_loss(a, b): mean((a - b)^2) over the broadcast shape */
static bool ref_mse_loss(tt_ref_io *io) {
    if (!tt_ref_broadcast(io, 2)) return false;
    int64_t n = tt_numel(io->out_ndim, io->out_shape);
    double s = 0;
    for (int64_t j = 0; j < n; j++) {
        double d = io->x[0][tt_ref_bcast_at(io, 0, j)] - io->x[1][tt_ref_bcast_at(io, 1, j)];
        s += d * d;
    }
    io->out[0] = s / (double)n;
    return tt_ref_set_shape(io, 0, NULL);
}
static tn_tensor *call_mse_loss(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_mse_loss(in[0], in[1]);
}

/* layer_norm(x, weight, bias): p = n_norm_dims, has weight, has bias, eps; the normalised
 * shape is x's last n_norm_dims sizes, weight's and bias's shape */
static bool ref_layer_norm(tt_ref_io *io) {
    int nn = (int)io->p[0], nx = io->ndim[0];
    if (nn < 1 || nn > nx || !tt_ref_set_shape(io, nx, io->shape[0])) return false;
    int64_t d = tt_numel(nn, io->shape[0] + nx - nn), rows = tt_numel(nx - nn, io->shape[0]);
    for (int64_t r = 0; r < rows; r++) {
        const double *x = io->x[0] + r * d;
        double m = 0, v = 0;
        for (int64_t i = 0; i < d; i++)
            m += x[i] / (double)d;
        for (int64_t i = 0; i < d; i++)
            v += (x[i] - m) * (x[i] - m) / (double)d;
        for (int64_t i = 0; i < d; i++)
            io->out[r * d + i] = (x[i] - m) / sqrt(v + io->p[3]) * (io->p[1] ? io->x[1][i] : 1) +
                                 (io->p[2] ? io->x[2][i] : 0);
    }
    return true;
}
static tn_tensor *call_layer_norm(tn_tensor *const *in, const double *p) {
    int nn = (int)p[0], nx = tn_ndim(in[0]);
    int64_t shape[TN_MAX_DIMS] = {0};
    for (int i = 0; i < nn && i < TN_MAX_DIMS; i++) /* x too small: the op refuses nn */
        shape[i] = nx - nn + i >= 0 ? tn_shape(in[0])[nx - nn + i] : 1;
    return tn_layer_norm(in[0], nn, shape, p[1] ? in[1] : NULL, p[2] ? in[2] : NULL, p[3]);
}

/* dropout(x, p, training): the deterministic settings only (p = 0 or not training: x; p = 1:
 * zeros); the random mask is tests/test_nn.c's */
static double f_dropout(double x, double y, const double *p) {
    (void)y;
    return p[0] == 1 && p[1] ? 0 * x : x;
}
static tn_tensor *call_dropout(tn_tensor *const *in, const double *p) {
    return tn_dropout(in[0], p[0], p[1] != 0);
}

/* scaled_dot_product_attention(q (*, L, E), k (*, S, E), v (*, S, Ev)), p[0]: is_causal */
static bool ref_sdpa(tt_ref_io *io) {
    int nq = io->ndim[0], nk = io->ndim[1], nv = io->ndim[2];
    if (nq < 2 || nk < 2 || nv < 2) return false;
    int64_t L = io->shape[0][nq - 2], E = io->shape[0][nq - 1], S = io->shape[1][nk - 2];
    int64_t Ev = io->shape[2][nv - 1];
    tt_ref_io bt;
    if (io->shape[1][nk - 1] != E || io->shape[2][nv - 2] != S || S > 64 ||
        !batch_dims(io, 3, (int[]){2, 2, 2}, &bt))
        return false;
    int64_t shape[TN_MAX_DIMS + 2];
    for (int d = 0; d < bt.out_ndim; d++)
        shape[d] = bt.out_shape[d];
    shape[bt.out_ndim] = L, shape[bt.out_ndim + 1] = Ev;
    if (!tt_ref_set_shape(io, bt.out_ndim + 2, shape)) return false;
    for (int64_t b = 0; b < tt_numel(bt.out_ndim, bt.out_shape); b++) {
        const double *q = io->x[0] + tt_ref_bcast_at(&bt, 0, b) * L * E;
        const double *k = io->x[1] + tt_ref_bcast_at(&bt, 1, b) * S * E;
        const double *v = io->x[2] + tt_ref_bcast_at(&bt, 2, b) * S * Ev;
        for (int64_t i = 0; i < L; i++) {
            double s[64], z = 0;
            for (int64_t j = 0; j < S; j++) {
                double d = 0;
                for (int64_t e = 0; e < E; e++)
                    d += q[i * E + e] * k[j * E + e];
                s[j] = io->p[0] && j > i ? 0 : exp(d / sqrt((double)E));
                z += s[j];
            }
            for (int64_t e = 0; e < Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j < S; j++)
                    o += z > 0 ? s[j] / z * v[j * Ev + e] : 0;
                io->out[(b * L + i) * Ev + e] = o;
            }
        }
    }
    return true;
}
static tn_tensor *call_sdpa(tn_tensor *const *in, const double *p) {
    return tn_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, p[0] != 0);
}

static const tt_case matmul_cases[] = {
    {.tag = "2d_2d", .ndim = {2, 2}, .shape = {{3, 4}, {4, 2}}},
    {.tag = "1d_1d", .ndim = {1, 1}, .shape = {{4}, {4}}},
    {.tag = "2d_1d", .ndim = {2, 1}, .shape = {{3, 4}, {4}}},
    {.tag = "1d_3d", .ndim = {1, 3}, .shape = {{4}, {2, 4, 3}}},
    {.tag = "bcast_4d_3d", .ndim = {4, 3}, .shape = {{2, 1, 3, 4}, {2, 4, 2}}},
    {.tag = "empty_k", .ndim = {2, 2}, .shape = {{3, 0}, {0, 2}}},
    {.tag = "empty_m", .ndim = {2, 2}, .shape = {{0, 4}, {4, 2}}},
};
static const tt_case linear_cases[] = {
    /* p: has bias */
    {.tag = "2d", .ndim = {2, 2, 1}, .shape = {{4, 3}, {2, 3}, {2}}, .p = {1}},
    {.tag = "3d", .ndim = {3, 2, 1}, .shape = {{2, 3, 3}, {4, 3}, {4}}, .p = {1}},
    {.tag = "1d_nobias", .ndim = {1, 2, 1}, .shape = {{3}, {2, 3}, {2}}, .p = {0}},
    {.tag = "empty_batch", .ndim = {2, 2, 1}, .shape = {{0, 3}, {2, 3}, {2}}, .p = {1}},
};
static const tt_case ce_cases[] = {
    {.tag = "4x5", .ndim = {2, 1}, .shape = {{4, 5}, {4}}, .index_max = 5},
    {.tag = "3x2", .ndim = {2, 1}, .shape = {{3, 2}, {3}}, .index_max = 2},
    {.tag = "empty_batch", .ndim = {2, 1}, .shape = {{0, 3}, {0}}, .index_max = 3},
};
static const tt_case mse_cases[] = {
    {.tag = "same", .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}},
    {.tag = "bcast", .ndim = {2, 1}, .shape = {{3, 4}, {4}}},
    {.tag = "0-d", .ndim = {0, 0}},
    {.tag = "empty", .ndim = {2, 1}, .shape = {{0, 4}, {4}}},
};
static const tt_case ln_cases[] = {
    /* p: n_norm_dims, has weight, has bias, eps */
    {.tag = "1d_wb", .ndim = {3, 1, 1}, .shape = {{2, 3, 5}, {5}, {5}}, .p = {1, 1, 1, 1e-5}},
    {.tag = "2d_w", .ndim = {3, 2, 2}, .shape = {{2, 3, 4}, {3, 4}, {3, 4}}, .p = {2, 1, 0, 0.1}},
    {.tag = "1d_b", .ndim = {2, 1, 1}, .shape = {{4, 6}, {6}, {6}}, .p = {1, 0, 1, 1e-5}},
    {.tag = "plain", .ndim = {2, 1, 1}, .shape = {{3, 4}, {4}, {4}}, .p = {1, 0, 0, 1e-5}},
    {.tag = "empty_rows", .ndim = {2, 1, 1}, .shape = {{0, 4}, {4}, {4}}, .p = {1, 1, 1, 1e-5}},
};
static const tt_case dropout_cases[] = {
    /* p: p, training */
    {.tag = "p0", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 1}},
    {.tag = "eval", .ndim = {2}, .shape = {{2, 3}}, .p = {0.5, 0}},
    {.tag = "p1", .ndim = {1}, .shape = {{5}}, .p = {1, 1}},
    {.tag = "0-d", .ndim = {0}, .p = {0, 1}},
};
static const tt_case sdpa_cases[] = {
    /* p: is_causal */
    {.tag = "3d", .ndim = {3, 3, 3}, .shape = {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}}, .p = {0}},
    {.tag = "causal", .ndim = {3, 3, 3}, .shape = {{1, 4, 3}, {1, 4, 3}, {1, 4, 2}}, .p = {1}},
    {.tag = "2d_causal_l_lt_s", .ndim = {2, 2, 2}, .shape = {{3, 4}, {5, 4}, {5, 2}}, .p = {1}},
    {.tag = "bcast", .ndim = {3, 2, 3}, .shape = {{2, 3, 4}, {5, 4}, {1, 5, 3}}, .p = {0}},
    {.tag = "empty_l", .ndim = {3, 3, 3}, .shape = {{2, 0, 4}, {2, 5, 4}, {2, 5, 3}}, .p = {0}},
};

const tt_op tt_rows_nn[] = {
    {.name = "matmul",
     .torch = "torch.matmul",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(matmul_cases),
     .call = call_matmul,
     .ref = ref_matmul,
     .golden = "matmul",
     .tol = 2},
    {.name = "linear",
     .torch = "torch.nn.functional.linear",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(linear_cases),
     .call = call_linear,
     .ref = ref_linear,
     .golden = "linear",
     .tol = 2},
    {.name = "cross_entropy",
     .torch = "torch.nn.functional.cross_entropy",
     .arity = 2,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_TARGET},
     TT_CASES(ce_cases),
     .call = call_cross_entropy,
     .ref = ref_cross_entropy,
     .golden = "cross_entropy",
     .tol = 2},
    {.name = "mse_loss",
     .torch = "torch.nn.functional.mse_loss",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(mse_cases),
     .call = call_mse_loss,
     .ref = ref_mse_loss,
     .golden = "mse_loss",
     .tol = 2},
    {.name = "layer_norm",
     .torch = "torch.nn.functional.layer_norm",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(ln_cases),
     .call = call_layer_norm,
     .ref = ref_layer_norm,
     .golden = "layer_norm",
     .tol = 8},
    {.name = "dropout",
     .torch = "torch.nn.functional.dropout",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dropout_cases),
     .call = call_dropout,
     .ref = tt_ref_map1,
     .f = f_dropout,
     .no_golden = "a random mask (tests/test_nn.c checks it; PyTorch's generator differs)"},
    {.name = "scaled_dot_product_attention",
     .torch = "torch.nn.functional.scaled_dot_product_attention",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_SMALL, TT_SMALL, TT_ANY},
     TT_CASES(sdpa_cases),
     .call = call_sdpa,
     .ref = ref_sdpa,
     .golden = "sdpa",
     .tol = 8},
};
const int tt_nrows_nn = (int)(sizeof tt_rows_nn / sizeof tt_rows_nn[0]);
