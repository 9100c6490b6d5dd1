/* tests/ops/rows_reduce.c — rows of the reductions (whole tensor and along a dim), argmax,
 * argmin, max/min along a dim with their indices,
 * logsumexp, var, std, and the along-dim maps softmax and log_softmax. References fold each
 * slice of the input along the dim with a plain loop. */
#include <math.h>

#include "op_table.h"

/* A slice: n values x[0], x[s], x[2s], ... */
typedef double (*fold_fn)(const double *x, int64_t n, int64_t s, const double *p);

static double fold_sum(const double *x, int64_t n, int64_t s, const double *p) {
    (void)p;
    double a = 0;
    for (int64_t i = 0; i < n; i++)
        a += x[i * s];
    return a;
}
static double fold_mean(const double *x, int64_t n, int64_t s, const double *p) {
    return fold_sum(x, n, s, p) / (double)n;
}
static double fold_max(const double *x, int64_t n, int64_t s, const double *p) {
    (void)p;
    double a = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        a = x[i * s] > a ? x[i * s] : a;
    return a;
}
static double fold_min(const double *x, int64_t n, int64_t s, const double *p) {
    (void)p;
    double a = INFINITY;
    for (int64_t i = 0; i < n; i++)
        a = x[i * s] < a ? x[i * s] : a;
    return a;
}
static double fold_argmax(const double *x, int64_t n, int64_t s, const double *p) {
    (void)p;
    int64_t k = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i * s] > x[k * s]) k = i;
    return (double)k;
}
static double fold_argmin(const double *x, int64_t n, int64_t s, const double *p) {
    (void)p;
    int64_t k = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i * s] < x[k * s]) k = i;
    return (double)k;
}
static double fold_logsumexp(const double *x, int64_t n, int64_t s, const double *p) {
    (void)p;
    double a = 0;
    for (int64_t i = 0; i < n; i++)
        a += exp(x[i * s]);
    return log(a);
}
/* p[1]: the correction */
static double fold_var(const double *x, int64_t n, int64_t s, const double *p) {
    double m = fold_mean(x, n, s, p), a = 0, div = (double)n - p[1];
    for (int64_t i = 0; i < n; i++)
        a += (x[i * s] - m) * (x[i * s] - m);
    return a / (div > 0 ? div : 0);
}
static double fold_std(const double *x, int64_t n, int64_t s, const double *p) {
    return sqrt(fold_var(x, n, s, p));
}

/* Folds every slice along dim (whole: the flattened tensor to 0-D). */
static bool reduce(tt_ref_io *io, fold_fn f, bool whole, int dim, bool keepdim) {
    if (whole) {
        int64_t n = tt_numel(io->ndim[0], io->shape[0]);
        if (!tt_ref_set_shape(io, 0, NULL)) return false;
        io->out[0] = f(io->x[0], n, 1, io->p);
        return true;
    }
    int64_t outer, len, inner;
    if (!tt_ref_reduce_shape(io, dim, keepdim, &outer, &len, &inner)) return false;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            io->out[o * inner + i] = f(io->x[0] + o * len * inner + i, len, inner, io->p);
    return true;
}

#define WHOLE(n, fold)                                                                             \
    static bool ref_##n(tt_ref_io *io) { return reduce(io, fold, true, 0, false); }                \
    static tn_tensor *call_##n(tn_tensor *const *in, const double *p) {                            \
        (void)p;                                                                                   \
        return tn_##n(in[0]);                                                                      \
    }
/* p: dim, keepdim (var, std: dim, correction, keepdim) */
#define ALONG(n, fold)                                                                             \
    static bool ref_##n(tt_ref_io *io) {                                                           \
        return reduce(io, fold, false, (int)io->p[0], io->p[1] != 0);                              \
    }                                                                                              \
    static tn_tensor *call_##n(tn_tensor *const *in, const double *p) {                            \
        return tn_##n(in[0], (int)p[0], p[1] != 0);                                                \
    }
WHOLE(sum, fold_sum)
WHOLE(mean, fold_mean)
WHOLE(max, fold_max)
WHOLE(min, fold_min)
WHOLE(argmax, fold_argmax)
ALONG(sum_dim, fold_sum)
ALONG(mean_dim, fold_mean)
ALONG(max_dim, fold_max)
ALONG(argmax_dim, fold_argmax)
WHOLE(argmin, fold_argmin)
ALONG(min_dim, fold_min)
ALONG(argmin_dim, fold_argmin)
/* max/min with indices: the indices (the values are the _dim rows') */
static bool ref_max_dim_indices(tt_ref_io *io) { return ref_argmax_dim(io); }
static bool ref_min_dim_indices(tt_ref_io *io) { return ref_argmin_dim(io); }
static tn_tensor *indices_body(tn_tensor *const *in, const double *p, bool max) {
    tn_tensor *idx = NULL;
    tn_tensor *v = (max ? tn_max_dim_with_indices : tn_min_dim_with_indices)(in[0], (int)p[0],
                                                                             p[1] != 0, &idx);
    return v ? idx : NULL; /* v: the scope's */
}
static tn_tensor *max_indices_body(tn_tensor *const *in, const double *p) {
    return indices_body(in, p, true);
}
static tn_tensor *min_indices_body(tn_tensor *const *in, const double *p) {
    return indices_body(in, p, false);
}
static tn_tensor *call_max_dim_indices(tn_tensor *const *in, const double *p) {
    return tt_scoped(max_indices_body, in, p);
}
static tn_tensor *call_min_dim_indices(tn_tensor *const *in, const double *p) {
    return tt_scoped(min_indices_body, in, p);
}
ALONG(logsumexp, fold_logsumexp)

/* vector_norm; p: ord, keepdim, ndims (0: all), dims... */
static bool ref_vector_norm(tt_ref_io *io) {
    int nd = io->ndim[0], nsel = (int)io->p[2], ond = 0;
    const int64_t *sh = io->shape[0];
    double ord = io->p[0];
    bool sel[TN_MAX_DIMS] = {false}, keep = io->p[1] != 0;
    for (int i = 0; i < nsel; i++) {
        int d = (int)io->p[3 + i];
        if (!tt_ref_dim(&d, nd) || sel[d]) return false;
        sel[d] = true;
    }
    int64_t oshape[TN_MAX_DIMS], n = tt_numel(nd, sh);
    for (int d = 0; d < nd; d++) {
        if (nsel == 0) sel[d] = true;
        if (!sel[d]) oshape[ond++] = sh[d];
        else if (keep) oshape[ond++] = 1;
    }
    if (!tt_ref_set_shape(io, ond, oshape)) return false;
    int64_t on = tt_numel(ond, oshape);
    for (int64_t j = 0; j < on; j++)
        io->out[j] = isinf(ord) ? (ord > 0 ? -INFINITY : INFINITY) : 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i, o = 0, m = 1;
        for (int d = nd - 1; d >= 0; d--) { /* the output position of element i */
            int64_t c = r % sh[d];
            r /= sh[d];
            if (!sel[d]) o += c * m, m *= sh[d];
        }
        double a = fabs(io->x[0][i]), *y = &io->out[o];
        if (isinf(ord)) *y = ord > 0 ? fmax(*y, a) : fmin(*y, a);
        else *y += ord == 0 ? (a != 0) : pow(a, ord);
    }
    for (int64_t j = 0; j < on && !isinf(ord) && ord != 0; j++)
        io->out[j] = pow(io->out[j], 1 / ord);
    return n > 0 || !isinf(ord);
}
static tn_tensor *call_vector_norm(tn_tensor *const *in, const double *p) {
    int dims[2] = {(int)p[3], (int)p[4]};
    return tn_vector_norm(in[0], p[0], (int)p[2], dims, p[1] != 0);
}
static bool ref_var_dim(tt_ref_io *io) {
    return reduce(io, fold_var, false, (int)io->p[0], io->p[2] != 0);
}
static bool ref_std_dim(tt_ref_io *io) {
    return reduce(io, fold_std, false, (int)io->p[0], io->p[2] != 0);
}
static tn_tensor *call_var_dim(tn_tensor *const *in, const double *p) {
    return tn_var_dim(in[0], (int)p[0], p[1], p[2] != 0);
}
static tn_tensor *call_std_dim(tn_tensor *const *in, const double *p) {
    return tn_std_dim(in[0], (int)p[0], p[1], p[2] != 0);
}

/* softmax / log_softmax along p[0] */
static bool softmax_ref(tt_ref_io *io, bool log_) {
    int64_t outer, len, inner;
    if (!tt_ref_reduce_shape(io, (int)io->p[0], true, &outer, &len, &inner) ||
        !tt_ref_set_shape(io, io->ndim[0], io->shape[0]))
        return false;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *x = io->x[0] + o * len * inner + i;
            double *y = io->out + o * len * inner + i;
            double lse = fold_logsumexp(x, len, inner, io->p);
            for (int64_t k = 0; k < len; k++)
                y[k * inner] = log_ ? x[k * inner] - lse : exp(x[k * inner] - lse);
        }
    return true;
}
static bool ref_softmax(tt_ref_io *io) { return softmax_ref(io, false); }
static bool ref_log_softmax(tt_ref_io *io) { return softmax_ref(io, true); }
static tn_tensor *call_softmax(tn_tensor *const *in, const double *p) {
    return tn_softmax(in[0], (int)p[0]);
}
static tn_tensor *call_log_softmax(tn_tensor *const *in, const double *p) {
    return tn_log_softmax(in[0], (int)p[0]);
}

static const tt_case whole_cases[] = {
    {.tag = "2x3x4", .ndim = {3}, .shape = {{2, 3, 4}}},
    {.tag = "3x4", .ndim = {2}, .shape = {{3, 4}}},
    {.tag = "0-d", .ndim = {0}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}},
};
/* max, min, argmax: an empty input has no maximum */
static const tt_case whole_nonempty_cases[] = {
    {.tag = "2x3x4", .ndim = {3}, .shape = {{2, 3, 4}}},
    {.tag = "3x4", .ndim = {2}, .shape = {{3, 4}}},
    {.tag = "0-d", .ndim = {0}},
};
static const tt_case dim_cases[] = {
    {.tag = "dim1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1, 0}},
    {.tag = "dim-1_keep", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-1, 1}},
    {.tag = "dim0", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 0}},
    {.tag = "0-d", .ndim = {0}, .p = {0, 1}},
    {.tag = "empty_kept_dim", .ndim = {2}, .shape = {{0, 3}}, .p = {1, 0}},
};
static const tt_case dim_sum_cases[] = {
    {.tag = "dim1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1, 0}},
    {.tag = "dim-1_keep", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-1, 1}},
    {.tag = "dim0", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 0}},
    {.tag = "0-d", .ndim = {0}, .p = {0, 1}},
    {.tag = "empty_reduced_dim", .ndim = {2}, .shape = {{0, 3}}, .p = {0, 0}},
    {.tag = "empty_kept_dim", .ndim = {2}, .shape = {{0, 3}}, .p = {1, 1}},
};
static const tt_case norm_cases[] = {
    /* p: ord, keepdim, ndims, dims */
    {.tag = "l2_all", .ndim = {2}, .shape = {{3, 4}}, .p = {2, 0, 0}},
    {.tag = "l1_dim1", .ndim = {2}, .shape = {{3, 4}}, .p = {1, 0, 1, 1}},
    {.tag = "inf_dim0_keep", .ndim = {2}, .shape = {{3, 4}}, .p = {INFINITY, 1, 1, 0}},
    {.tag = "-inf_dim-1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-INFINITY, 0, 1, -1}},
    {.tag = "p3_dims02", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {3, 0, 2, 0, 2}},
    {.tag = "p1.5_keep", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1.5, 1, 2, 2, 1}},
    {.tag = "p0.5", .ndim = {2}, .shape = {{3, 4}}, .p = {0.5, 0, 1, 1}},
    {.tag = "0-d", .ndim = {0}, .p = {2, 0, 0}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}, .p = {2, 0, 1, 0}},
};
static const tt_case norm0_cases[] = {
    {.tag = "l0_all", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 0, 0}},
    {.tag = "l0_dim1", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 1, 1, 1}},
};
static const tt_case var_cases[] = {
    /* p: dim, correction, keepdim */
    {.tag = "dim1_c1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1, 1, 0}},
    {.tag = "dim-1_c0_keep", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-1, 0, 1}},
    {.tag = "dim0_c2", .ndim = {2}, .shape = {{4, 3}}, .p = {0, 2, 0}},
    {.tag = "empty_kept_dim", .ndim = {2}, .shape = {{0, 3}}, .p = {1, 1, 0}},
};
static const tt_case softmax_cases[] = {
    {.tag = "dim1", .ndim = {2}, .shape = {{3, 4}}, .p = {1}},
    {.tag = "dim0_3d", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {0}},
    {.tag = "dim-1_3d", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-1}},
    {.tag = "0-d", .ndim = {0}, .p = {0}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}, .p = {1}},
};

const tt_op tt_rows_reduce[] = {
    {.name = "sum",
     .torch = "torch.sum",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(whole_cases),
     .call = call_sum,
     .ref = ref_sum,
     .golden = "sum"},
    {.name = "mean",
     .torch = "torch.mean",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(whole_cases),
     .call = call_mean,
     .ref = ref_mean,
     .golden = "mean"},
    {.name = "max",
     .torch = "torch.max",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(whole_nonempty_cases),
     .call = call_max,
     .ref = ref_max,
     .golden = "max"},
    {.name = "min",
     .torch = "torch.min",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(whole_nonempty_cases),
     .call = call_min,
     .ref = ref_min,
     .golden = "min"},
    {.name = "sum_dim",
     .torch = "torch.sum(dim=)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_sum_cases),
     .call = call_sum_dim,
     .ref = ref_sum_dim,
     .golden = "sum_dim"},
    {.name = "mean_dim",
     .torch = "torch.mean(dim=)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_mean_dim,
     .ref = ref_mean_dim,
     .golden = "mean_dim"},
    {.name = "max_dim",
     .torch = "torch.max(dim=)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_max_dim,
     .ref = ref_max_dim,
     .golden = "max_dim"},
    {.name = "argmax",
     .torch = "torch.argmax",
     .arity = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(whole_nonempty_cases),
     .call = call_argmax,
     .ref = ref_argmax,
     .golden = "argmax",
     .flags = TT_NO_GRAD},
    {.name = "argmax_dim",
     .torch = "torch.argmax(dim=)",
     .arity = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_argmax_dim,
     .ref = ref_argmax_dim,
     .golden = "argmax_dim",
     .flags = TT_NO_GRAD},
    {.name = "min_dim",
     .torch = "torch.min(dim=)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_min_dim,
     .ref = ref_min_dim,
     .golden = "min_dim"},
    {.name = "max_dim_with_indices",
     .torch = "torch.max(dim=).indices",
     .arity = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_max_dim_indices,
     .ref = ref_max_dim_indices,
     .golden = "max_dim_indices",
     .flags = TT_NO_GRAD},
    {.name = "min_dim_with_indices",
     .torch = "torch.min(dim=).indices",
     .arity = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_min_dim_indices,
     .ref = ref_min_dim_indices,
     .golden = "min_dim_indices",
     .flags = TT_NO_GRAD},
    {.name = "argmin",
     .torch = "torch.argmin",
     .arity = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(whole_nonempty_cases),
     .call = call_argmin,
     .ref = ref_argmin,
     .golden = "argmin",
     .flags = TT_NO_GRAD},
    {.name = "argmin_dim",
     .torch = "torch.argmin(dim=)",
     .arity = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(dim_cases),
     .call = call_argmin_dim,
     .ref = ref_argmin_dim,
     .golden = "argmin_dim",
     .flags = TT_NO_GRAD},
    {.name = "vector_norm",
     .torch = "torch.linalg.vector_norm",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(norm_cases),
     .call = call_vector_norm,
     .ref = ref_vector_norm,
     .golden = "vector_norm",
     .tol = 2},
    {.name = "vector_norm_ord0",
     .torch = "torch.linalg.vector_norm(ord=0)",
     .arity = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(norm0_cases),
     .call = call_vector_norm,
     .ref = ref_vector_norm,
     .golden = "vector_norm",
     .flags = TT_NO_GRAD},
    {.name = "logsumexp",
     .torch = "torch.logsumexp",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_SMALL},
     TT_CASES(dim_sum_cases),
     .call = call_logsumexp,
     .ref = ref_logsumexp,
     .golden = "logsumexp"},
    {.name = "var_dim",
     .torch = "torch.var",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(var_cases),
     .call = call_var_dim,
     .ref = ref_var_dim,
     .golden = "var_dim",
     .tol = 4},
    {.name = "std_dim",
     .torch = "torch.std",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(var_cases),
     .call = call_std_dim,
     .ref = ref_std_dim,
     .golden = "std_dim",
     .tol = 4},
    {.name = "softmax",
     .torch = "torch.softmax",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_SMALL},
     TT_CASES(softmax_cases),
     .call = call_softmax,
     .ref = ref_softmax,
     .golden = "softmax"},
    {.name = "log_softmax",
     .torch = "torch.log_softmax",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_SMALL},
     TT_CASES(softmax_cases),
     .call = call_log_softmax,
     .ref = ref_log_softmax,
     .golden = "log_softmax"},
};
const int tt_nrows_reduce = (int)(sizeof tt_rows_reduce / sizeof tt_rows_reduce[0]);
