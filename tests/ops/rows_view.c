/* tests/ops/rows_view.c — rows of the views (view, reshape, transpose, permute, narrow, select,
 * expand, squeeze, unsqueeze, flatten, contiguous) and of cat and stack. References: a view is a
 * (shape, strides, offset) over the row-major input, read element by element; shape-only views
 * keep the values in order. */
#include "op_table.h"

/* Output = the input read through (nd, shape, stride, offset). */
static bool strided(tt_ref_io *io, int nd, const int64_t *shape, const int64_t *stride,
                    int64_t off) {
    if (!tt_ref_set_shape(io, nd, shape)) return false;
    int64_t n = tt_numel(nd, shape);
    for (int64_t j = 0; j < n; j++) {
        int64_t at = off, r = j;
        for (int d = nd - 1; d >= 0; d--) {
            at += r % shape[d] * stride[d];
            r /= shape[d];
        }
        io->out[j] = io->x[0][at];
    }
    return true;
}

/* Input 0's contiguous strides. */
static void strides_of(const tt_ref_io *io, int64_t *st) {
    int64_t s = 1;
    for (int d = io->ndim[0] - 1; d >= 0; d--) {
        st[d] = s;
        s *= io->shape[0][d];
    }
}

/* Same values in the same order, shape (nd, shape). */
static bool same_values(tt_ref_io *io, int nd, const int64_t *shape) {
    if (tt_numel(nd, shape) != tt_numel(io->ndim[0], io->shape[0])) return false;
    int64_t st[TN_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d];
    }
    return strided(io, nd, shape, st, 0);
}

/* p[0] sizes p[1..]: one may be -1 */
static bool ref_view(tt_ref_io *io) {
    int nd = (int)io->p[0];
    int64_t shape[TN_MAX_DIMS], known = 1, infer = -1;
    for (int d = 0; d < nd; d++) {
        shape[d] = (int64_t)io->p[1 + d];
        if (shape[d] == -1)
            infer = d;
        else
            known *= shape[d];
    }
    if (infer >= 0) shape[infer] = known ? tt_numel(io->ndim[0], io->shape[0]) / known : 0;
    return same_values(io, nd, shape);
}
static void shape_of(const double *p, int64_t *shape) {
    for (int d = 0; d < (int)p[0] && d < TN_MAX_DIMS; d++)
        shape[d] = (int64_t)p[1 + d];
}
static tn_tensor *call_view(tn_tensor *const *in, const double *p) {
    int64_t shape[TN_MAX_DIMS];
    shape_of(p, shape);
    return tn_view(in[0], (int)p[0], shape);
}
static tn_tensor *call_reshape(tn_tensor *const *in, const double *p) {
    int64_t shape[TN_MAX_DIMS];
    shape_of(p, shape);
    return tn_reshape(in[0], (int)p[0], shape);
}
/* p: the new order of the dims (p[0] = ndim) for permute; dim0, dim1 for transpose */
static bool ref_permute(tt_ref_io *io) {
    int nd = io->ndim[0];
    int64_t st[TN_MAX_DIMS], shape[TN_MAX_DIMS], ost[TN_MAX_DIMS];
    strides_of(io, st);
    if ((int)io->p[0] != nd) return false;
    for (int d = 0; d < nd; d++) {
        int s = (int)io->p[1 + d];
        if (!tt_ref_dim(&s, nd)) return false;
        shape[d] = io->shape[0][s], ost[d] = st[s];
    }
    return strided(io, nd, shape, ost, 0);
}
static tn_tensor *call_permute(tn_tensor *const *in, const double *p) {
    int dims[TN_MAX_DIMS];
    for (int d = 0; d < (int)p[0] && d < TN_MAX_DIMS; d++)
        dims[d] = (int)p[1 + d];
    return tn_permute(in[0], (int)p[0], dims);
}
static bool ref_transpose(tt_ref_io *io) {
    int nd = io->ndim[0], a = (int)io->p[0], b = (int)io->p[1];
    int64_t st[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    if (!tt_ref_dim(&a, nd) || !tt_ref_dim(&b, nd)) return false;
    strides_of(io, st);
    for (int d = 0; d < nd; d++)
        shape[d] = io->shape[0][d];
    int64_t t = shape[a];
    shape[a] = shape[b], shape[b] = t;
    t = st[a], st[a] = st[b], st[b] = t;
    return strided(io, nd, shape, st, 0);
}
static tn_tensor *call_transpose(tn_tensor *const *in, const double *p) {
    return tn_transpose(in[0], (int)p[0], (int)p[1]);
}
/* narrow: p = dim, start, length; select: p = dim, index (negative counts from the end) */
static bool ref_narrow_select(tt_ref_io *io, bool select) {
    int nd = io->ndim[0], dim = (int)io->p[0];
    int64_t st[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    if (!tt_ref_dim(&dim, nd) || !nd) return false;
    strides_of(io, st);
    int64_t start = (int64_t)io->p[1], size = io->shape[0][dim];
    if (start < 0) start += size;
    int64_t off = start * st[dim];
    int k = 0;
    for (int d = 0; d < nd; d++) {
        if (d == dim && select) continue;
        shape[k] = d == dim ? (int64_t)io->p[2] : io->shape[0][d];
        st[k++] = st[d];
    }
    return strided(io, k, shape, st, off);
}
static bool ref_narrow(tt_ref_io *io) { return ref_narrow_select(io, false); }
static bool ref_select(tt_ref_io *io) { return ref_narrow_select(io, true); }
static tn_tensor *call_narrow(tn_tensor *const *in, const double *p) {
    return tn_narrow(in[0], (int)p[0], (int64_t)p[1], (int64_t)p[2]);
}
static tn_tensor *call_select(tn_tensor *const *in, const double *p) {
    return tn_select(in[0], (int)p[0], (int64_t)p[1]);
}
/* expand: p as view's; -1 keeps a size, new dims on the left */
static bool ref_expand(tt_ref_io *io) {
    int nd = (int)io->p[0], nx = io->ndim[0];
    int64_t st[TN_MAX_DIMS], shape[TN_MAX_DIMS], ost[TN_MAX_DIMS];
    if (nd < nx) return false;
    strides_of(io, st);
    for (int d = 0; d < nd; d++) {
        int xd = d - (nd - nx);
        int64_t s = (int64_t)io->p[1 + d], xs = xd >= 0 ? io->shape[0][xd] : 1;
        shape[d] = s == -1 ? xs : s;
        if (xd >= 0 && xs != 1 && xs != shape[d]) return false;
        ost[d] = xd >= 0 && xs != 1 ? st[xd] : 0;
    }
    return strided(io, nd, shape, ost, 0);
}
static tn_tensor *call_expand(tn_tensor *const *in, const double *p) {
    int64_t shape[TN_MAX_DIMS];
    shape_of(p, shape);
    return tn_expand(in[0], (int)p[0], shape);
}
/* squeeze (p[0] < -100: every size-1 dim), squeeze_dim (p[0]), unsqueeze (p[0]) */
static bool ref_squeeze_dim(tt_ref_io *io) {
    int nd = io->ndim[0], dim = (int)io->p[0], k = 0;
    int64_t shape[TN_MAX_DIMS];
    bool all = io->p[0] < -100;
    if (!all && !tt_ref_dim(&dim, nd)) return false;
    for (int d = 0; d < nd; d++)
        if (io->shape[0][d] != 1 || (!all && d != dim)) shape[k++] = io->shape[0][d];
    return same_values(io, k, shape);
}
static bool ref_squeeze(tt_ref_io *io) {
    double p[1] = {-1000};
    const double *saved = io->p;
    io->p = p;
    bool ok = ref_squeeze_dim(io);
    io->p = saved;
    return ok;
}
static bool ref_unsqueeze(tt_ref_io *io) {
    int nd = io->ndim[0], dim = (int)io->p[0], k = 0;
    int64_t shape[TN_MAX_DIMS];
    if (dim < 0) dim += nd + 1;
    if (dim < 0 || dim > nd) return false;
    for (int d = 0; d <= nd; d++)
        shape[k++] = d == dim ? 1 : io->shape[0][d < dim ? d : d - 1];
    return same_values(io, k, shape);
}
static tn_tensor *call_squeeze(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_squeeze(in[0]);
}
static tn_tensor *call_squeeze_dim(tn_tensor *const *in, const double *p) {
    return tn_squeeze_dim(in[0], (int)p[0]);
}
static tn_tensor *call_unsqueeze(tn_tensor *const *in, const double *p) {
    return tn_unsqueeze(in[0], (int)p[0]);
}
/* flatten: p = start_dim, end_dim */
static bool ref_flatten(tt_ref_io *io) {
    int nd = io->ndim[0], a = (int)io->p[0], b = (int)io->p[1], k = 0;
    int64_t shape[TN_MAX_DIMS];
    if (!tt_ref_dim(&a, nd) || !tt_ref_dim(&b, nd) || a > b) return false;
    if (!nd) return same_values(io, 1, (int64_t[]){1});
    for (int d = 0; d < nd; d++) {
        if (d > a && d <= b)
            shape[k - 1] *= io->shape[0][d];
        else
            shape[k++] = io->shape[0][d];
    }
    return same_values(io, k, shape);
}
static tn_tensor *call_flatten(tn_tensor *const *in, const double *p) {
    return tn_flatten(in[0], (int)p[0], (int)p[1]);
}
static bool ref_contiguous(tt_ref_io *io) { return same_values(io, io->ndim[0], io->shape[0]); }
static tn_tensor *call_contiguous(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_contiguous(in[0]);
}

/* cat / stack of the first p[1] inputs along p[0] (stack: each input unsqueezed at dim) */
static bool join(tt_ref_io *io, bool stack) {
    int n = (int)io->p[1], nd = io->ndim[0], dim = (int)io->p[0];
    int ond = stack ? nd + 1 : nd;
    if (n < 1 || n > io->nin || !tt_ref_dim(&dim, ond) || !nd) return false;
    int64_t shape[TN_MAX_DIMS], total = 0, outer = 1, inner = 1;
    for (int k = 0; k < n; k++) {
        if (io->ndim[k] != nd) return false;
        total += stack ? 1 : io->shape[k][dim];
    }
    for (int d = 0; d < ond; d++) {
        shape[d] = d == dim ? total : io->shape[0][stack && d > dim ? d - 1 : d];
        if (d < dim) outer *= shape[d];
        if (d > dim) inner *= shape[d];
    }
    if (!tt_ref_set_shape(io, ond, shape)) return false;
    int64_t at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n; k++) {
            int64_t len = stack ? 1 : io->shape[k][dim];
            for (int64_t i = 0; i < len * inner; i++)
                io->out[at++] = io->x[k][o * len * inner + i];
        }
    return true;
}
static bool ref_cat(tt_ref_io *io) { return join(io, false); }
static bool ref_stack(tt_ref_io *io) { return join(io, true); }
static tn_tensor *call_cat(tn_tensor *const *in, const double *p) {
    return tn_cat((int)p[1], in, (int)p[0]);
}
static tn_tensor *call_stack(tn_tensor *const *in, const double *p) {
    return tn_stack((int)p[1], in, (int)p[0]);
}

static const tt_case view_cases[] = {
    /* p: ndim, sizes */
    {.tag = "6x4", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {2, 6, 4}},
    {.tag = "infer", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {2, 4, -1}},
    {.tag = "to_0d", .ndim = {1}, .shape = {{1}}, .p = {0}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}, .p = {2, 3, 0}},
};
static const tt_case transpose_cases[] = {
    {.tag = "0_2", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {0, 2}},
    {.tag = "neg", .ndim = {2}, .shape = {{3, 4}}, .p = {-1, -2}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}, .p = {0, 1}},
};
static const tt_case permute_cases[] = {
    {.tag = "201", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {3, 2, 0, 1}},
    {.tag = "0-d", .ndim = {0}, .p = {0}},
};
static const tt_case narrow_cases[] = {
    /* p: dim, start, length */
    {.tag = "dim1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1, 1, 2}},
    {.tag = "last", .ndim = {2}, .shape = {{3, 4}}, .p = {-1, 2, 2}},
    {.tag = "to_empty", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 1, 0}},
};
static const tt_case select_cases[] = {
    /* p: dim, index */
    {.tag = "dim1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1, 2}},
    {.tag = "neg", .ndim = {2}, .shape = {{3, 4}}, .p = {0, -1}},
    {.tag = "to_0d", .ndim = {1}, .shape = {{5}}, .p = {0, 3}},
};
static const tt_case expand_cases[] = {
    /* p: ndim, sizes */
    {.tag = "new_dims", .ndim = {2}, .shape = {{3, 1}}, .p = {3, 2, 3, 4}},
    {.tag = "keep", .ndim = {2}, .shape = {{3, 1}}, .p = {2, -1, 5}},
    {.tag = "0d", .ndim = {0}, .p = {2, 2, 3}},
    {.tag = "to_empty", .ndim = {1}, .shape = {{1}}, .p = {2, 0, 1}},
};
static const tt_case squeeze_cases[] = {
    {.tag = "some", .ndim = {4}, .shape = {{2, 1, 3, 1}}},
    {.tag = "all", .ndim = {2}, .shape = {{1, 1}}},
    {.tag = "empty", .ndim = {3}, .shape = {{0, 1, 2}}},
};
static const tt_case squeeze_dim_cases[] = {
    {.tag = "one", .ndim = {4}, .shape = {{2, 1, 3, 1}}, .p = {1}},
    {.tag = "noop", .ndim = {4}, .shape = {{2, 1, 3, 1}}, .p = {0}},
    {.tag = "0-d", .ndim = {0}, .p = {0}},
};
static const tt_case unsqueeze_cases[] = {
    {.tag = "mid", .ndim = {2}, .shape = {{2, 3}}, .p = {1}},
    {.tag = "end", .ndim = {2}, .shape = {{2, 3}}, .p = {-1}},
    {.tag = "0-d", .ndim = {0}, .p = {0}},
    {.tag = "empty", .ndim = {1}, .shape = {{0}}, .p = {0}},
};
static const tt_case flatten_cases[] = {
    /* p: start, end */
    {.tag = "1_2", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {1, 2}},
    {.tag = "all", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {0, -1}},
    {.tag = "0-d", .ndim = {0}, .p = {0, -1}},
};
static const tt_case contiguous_cases[] = {
    {.tag = "3x4", .ndim = {2}, .shape = {{3, 4}}},
    {.tag = "2x3x2", .ndim = {3}, .shape = {{2, 3, 2}}},
    {.tag = "0-d", .ndim = {0}},
    {.tag = "empty", .ndim = {2}, .shape = {{3, 0}}},
};
static const tt_case cat_cases[] = {
    /* p: dim, count */
    {.tag = "dim0", .ndim = {2, 2, 2}, .shape = {{2, 3}, {1, 3}, {3, 3}}, .p = {0, 3}},
    {.tag = "dim-1", .ndim = {2, 2, 2}, .shape = {{2, 3}, {2, 1}, {2, 2}}, .p = {-1, 3}},
    {.tag = "one", .ndim = {2, 2, 2}, .shape = {{2, 3}, {2, 3}, {2, 3}}, .p = {1, 1}},
    {.tag = "empty_part", .ndim = {2, 2, 2}, .shape = {{2, 3}, {0, 3}, {1, 3}}, .p = {0, 3}},
};
static const tt_case stack_cases[] = {
    /* p: dim, count */
    {.tag = "dim0", .ndim = {2, 2, 2}, .shape = {{2, 3}, {2, 3}, {2, 3}}, .p = {0, 3}},
    {.tag = "dim2", .ndim = {2, 2, 2}, .shape = {{2, 3}, {2, 3}, {2, 3}}, .p = {2, 2}},
    {.tag = "1d", .ndim = {1, 1, 1}, .shape = {{4}, {4}, {4}}, .p = {-1, 3}},
};

const tt_op tt_rows_view[] = {
    {.name = "view",
     .torch = "Tensor.view",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(view_cases),
     .call = call_view,
     .ref = ref_view,
     .golden = "view",
     .flags = TT_CONTIGUOUS_ONLY},
    {.name = "reshape",
     .torch = "torch.reshape",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(view_cases),
     .call = call_reshape,
     .ref = ref_view,
     .golden = "reshape"},
    {.name = "transpose",
     .torch = "torch.transpose",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(transpose_cases),
     .call = call_transpose,
     .ref = ref_transpose,
     .golden = "transpose"},
    {.name = "permute",
     .torch = "torch.permute",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(permute_cases),
     .call = call_permute,
     .ref = ref_permute,
     .golden = "permute"},
    {.name = "narrow",
     .torch = "torch.narrow",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(narrow_cases),
     .call = call_narrow,
     .ref = ref_narrow,
     .golden = "narrow"},
    {.name = "select",
     .torch = "torch.select",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(select_cases),
     .call = call_select,
     .ref = ref_select,
     .golden = "select"},
    {.name = "expand",
     .torch = "Tensor.expand",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(expand_cases),
     .call = call_expand,
     .ref = ref_expand,
     .golden = "expand"},
    {.name = "squeeze",
     .torch = "torch.squeeze",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(squeeze_cases),
     .call = call_squeeze,
     .ref = ref_squeeze,
     .golden = "squeeze"},
    {.name = "squeeze_dim",
     .torch = "torch.squeeze(dim=)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(squeeze_dim_cases),
     .call = call_squeeze_dim,
     .ref = ref_squeeze_dim,
     .golden = "squeeze_dim"},
    {.name = "unsqueeze",
     .torch = "torch.unsqueeze",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unsqueeze_cases),
     .call = call_unsqueeze,
     .ref = ref_unsqueeze,
     .golden = "unsqueeze"},
    {.name = "flatten",
     .torch = "torch.flatten",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(flatten_cases),
     .call = call_flatten,
     .ref = ref_flatten,
     .golden = "flatten"},
    {.name = "contiguous",
     .torch = "Tensor.contiguous",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC | TT_DT(TN_BOOL),
     .backends = TT_ALL_BACKENDS,
     TT_CASES(contiguous_cases),
     .call = call_contiguous,
     .ref = ref_contiguous,
     .golden = "contiguous"},
    {.name = "cat",
     .torch = "torch.cat",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(cat_cases),
     .call = call_cat,
     .ref = ref_cat,
     .golden = "cat"},
    {.name = "stack",
     .torch = "torch.stack",
     .arity = 3,
     .diff = 7,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(stack_cases),
     .call = call_stack,
     .ref = ref_stack,
     .golden = "stack"},
};
const int tt_nrows_view = (int)(sizeof tt_rows_view / sizeof tt_rows_view[0]);
