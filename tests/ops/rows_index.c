/* tests/ops/rows_index.c — rows of the indexing ops (embedding, index_select, gather,
 * scatter_add) and the masks (where, masked_fill, tril, triu). References: plain loops over
 * the index values. */
#include "op_table.h"

/* embedding(weight (num, dim), indices (*)) -> (*, dim) */
static bool ref_embedding(tt_ref_io *io) {
    if (io->ndim[0] != 2 || io->ndim[1] + 1 > TN_MAX_DIMS) return false;
    int64_t dim = io->shape[0][1], shape[TN_MAX_DIMS], n = tt_numel(io->ndim[1], io->shape[1]);
    for (int d = 0; d < io->ndim[1]; d++)
        shape[d] = io->shape[1][d];
    shape[io->ndim[1]] = dim;
    if (!tt_ref_set_shape(io, io->ndim[1] + 1, shape)) return false;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < dim; j++)
            io->out[i * dim + j] = io->x[0][(int64_t)io->x[1][i] * dim + j];
    return true;
}
static tn_tensor *call_embedding(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_embedding(in[0], in[1]);
}

/* index_select(a, p[0], index (n)) */
static bool ref_index_select(tt_ref_io *io) {
    int64_t outer, len, inner, n = tt_numel(io->ndim[1], io->shape[1]);
    if (!tt_ref_reduce_shape(io, (int)io->p[0], true, &outer, &len, &inner)) return false;
    int64_t shape[TN_MAX_DIMS];
    int dim = (int)io->p[0];
    tt_ref_dim(&dim, io->ndim[0]);
    for (int d = 0; d < io->ndim[0]; d++)
        shape[d] = d == dim ? n : io->shape[0][d];
    if (!tt_ref_set_shape(io, io->ndim[0], shape)) return false;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < n; k++)
            for (int64_t i = 0; i < inner; i++)
                io->out[(o * n + k) * inner + i] =
                    io->x[0][(o * len + (int64_t)io->x[1][k]) * inner + i];
    return true;
}
static tn_tensor *call_index_select(tn_tensor *const *in, const double *p) {
    return tn_index_select(in[0], (int)p[0], in[1]);
}

/* Position j of a row-major shape (nd, s) moved to coordinate c along dim, as an offset in
 * the row-major shape (nd, t). */
static int64_t moved(int64_t j, int nd, const int64_t *s, const int64_t *t, int dim, int64_t c) {
    int64_t off = 0, mul = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t i = j % s[d];
        j /= s[d];
        off += (d == dim ? c : i) * mul;
        mul *= t[d];
    }
    return off;
}

/* gather(a, p[0], index): out[p] = a[p with p[dim] = index[p]], index's shape */
static bool ref_gather(tt_ref_io *io) {
    int dim = (int)io->p[0], nd = io->ndim[0];
    if (!tt_ref_dim(&dim, nd) || io->ndim[1] != nd || !tt_ref_set_shape(io, nd, io->shape[1]))
        return false;
    for (int64_t j = 0; j < tt_numel(nd, io->shape[1]); j++)
        io->out[j] = io->x[0][moved(j, nd, io->shape[1], io->shape[0], dim, (int64_t)io->x[1][j])];
    return true;
}
static tn_tensor *call_gather(tn_tensor *const *in, const double *p) {
    return tn_gather(in[0], (int)p[0], in[1]);
}

/* scatter_add(a, p[0], index, src): a copy of a, out[index moved] += src[p] over index */
static bool ref_scatter_add(tt_ref_io *io) {
    int dim = (int)io->p[0], nd = io->ndim[0];
    if (!tt_ref_dim(&dim, nd) || io->ndim[1] != nd || io->ndim[2] != nd ||
        !tt_ref_set_shape(io, nd, io->shape[0]))
        return false;
    for (int64_t j = 0; j < tt_numel(nd, io->shape[0]); j++)
        io->out[j] = io->x[0][j];
    for (int64_t j = 0; j < tt_numel(nd, io->shape[1]); j++)
        io->out[moved(j, nd, io->shape[1], io->shape[0], dim, (int64_t)io->x[1][j])] +=
            io->x[2][moved(j, nd, io->shape[1], io->shape[2], -1, 0)];
    return true;
}
static tn_tensor *call_scatter_add(tn_tensor *const *in, const double *p) {
    return tn_scatter_add(in[0], (int)p[0], in[1], in[2]);
}

/* where(cond, a, b) over the broadcast shape */
static bool ref_where(tt_ref_io *io) {
    if (!tt_ref_broadcast(io, 3)) return false;
    for (int64_t j = 0; j < tt_numel(io->out_ndim, io->out_shape); j++)
        io->out[j] = io->x[0][tt_ref_bcast_at(io, 0, j)] ? io->x[1][tt_ref_bcast_at(io, 1, j)]
                                                         : io->x[2][tt_ref_bcast_at(io, 2, j)];
    return true;
}
static tn_tensor *call_where(tn_tensor *const *in, const double *p) {
    (void)p;
    return tn_where(in[0], in[1], in[2]);
}
static double f_masked_fill(double x, double m, const double *p) { return m != 0 ? p[0] : x; }
static tn_tensor *call_masked_fill(tn_tensor *const *in, const double *p) {
    return tn_masked_fill(in[0], in[1], p[0]);
}

/* tril / triu(a, p[0]) on the last two dims */
static bool tri(tt_ref_io *io, bool lower) {
    int nd = io->ndim[0];
    if (nd < 2 || !tt_ref_set_shape(io, nd, io->shape[0])) return false;
    int64_t r = io->shape[0][nd - 2], c = io->shape[0][nd - 1], k = (int64_t)io->p[0];
    for (int64_t j = 0; j < tt_numel(nd, io->shape[0]); j++) {
        int64_t d = j % c - j / c % r;
        io->out[j] = (lower ? d <= k : d >= k) ? io->x[0][j] : 0;
    }
    return true;
}
static bool ref_tril(tt_ref_io *io) { return tri(io, true); }
static bool ref_triu(tt_ref_io *io) { return tri(io, false); }
static tn_tensor *call_tril(tn_tensor *const *in, const double *p) {
    return tn_tril(in[0], (int64_t)p[0]);
}
static tn_tensor *call_triu(tn_tensor *const *in, const double *p) {
    return tn_triu(in[0], (int64_t)p[0]);
}

static const tt_case embedding_cases[] = {
    {.tag = "2d_index", .ndim = {2, 2}, .shape = {{5, 3}, {2, 3}}, .index_max = 5},
    {.tag = "0d_index", .ndim = {2, 0}, .shape = {{4, 2}}, .index_max = 4},
    {.tag = "empty_index", .ndim = {2, 1}, .shape = {{4, 2}, {0}}, .index_max = 4},
};
static const tt_case index_select_cases[] = {
    /* p: dim */
    {.tag = "dim0", .ndim = {2, 1}, .shape = {{4, 3}, {5}}, .p = {0}, .index_max = 4},
    {.tag = "dim-1_3d", .ndim = {3, 1}, .shape = {{2, 3, 4}, {3}}, .p = {-1}, .index_max = 4},
    {.tag = "0d_index", .ndim = {2, 0}, .shape = {{3, 4}}, .p = {1}, .index_max = 4},
    {.tag = "empty_index", .ndim = {2, 1}, .shape = {{3, 4}, {0}}, .p = {0}, .index_max = 3},
};
static const tt_case gather_cases[] = {
    /* p: dim */
    {.tag = "dim0", .ndim = {2, 2}, .shape = {{3, 4}, {2, 4}}, .p = {0}, .index_max = 3},
    {.tag = "dim1_small", .ndim = {2, 2}, .shape = {{3, 4}, {2, 2}}, .p = {1}, .index_max = 4},
    {.tag = "3d", .ndim = {3, 3}, .shape = {{2, 3, 4}, {2, 2, 3}}, .p = {-1}, .index_max = 4},
    {.tag = "empty_index", .ndim = {2, 2}, .shape = {{3, 4}, {0, 4}}, .p = {0}, .index_max = 3},
};
static const tt_case scatter_add_cases[] = {
    /* p: dim */
    {.tag = "dim0", .ndim = {2, 2, 2}, .shape = {{3, 4}, {2, 4}, {2, 4}}, .p = {0}, .index_max = 3},
    {.tag = "dim1_big_src",
     .ndim = {2, 2, 2},
     .shape = {{3, 4}, {2, 3}, {3, 4}},
     .p = {1},
     .index_max = 4},
    {.tag = "3d",
     .ndim = {3, 3, 3},
     .shape = {{2, 3, 4}, {2, 2, 2}, {2, 2, 2}},
     .p = {-1},
     .index_max = 4},
};
static const tt_case where_cases[] = {
    {.tag = "same", .ndim = {2, 2, 2}, .shape = {{2, 3}, {2, 3}, {2, 3}}},
    {.tag = "bcast", .ndim = {1, 2, 3}, .shape = {{3}, {2, 1}, {4, 1, 3}}},
    {.tag = "0d_other", .ndim = {2, 2, 0}, .shape = {{2, 2}, {2, 2}}},
    {.tag = "empty", .ndim = {2, 1, 1}, .shape = {{0, 3}, {3}, {3}}},
};
static const tt_case masked_fill_cases[] = {
    /* p: value (integral: integer dtypes take it as is) */
    {.tag = "row_mask", .ndim = {2, 1}, .shape = {{3, 4}, {4}}, .p = {2}},
    {.tag = "bcast_out", .ndim = {1, 2}, .shape = {{4}, {2, 4}}, .p = {-1}},
    {.tag = "0-d", .ndim = {0, 0}, .p = {3}},
    {.tag = "empty", .ndim = {2, 1}, .shape = {{0, 4}, {4}}, .p = {1}},
};
static const tt_case tri_cases[] = {
    /* p: diagonal */
    {.tag = "0", .ndim = {2}, .shape = {{3, 4}}, .p = {0}},
    {.tag = "1", .ndim = {2}, .shape = {{4, 3}}, .p = {1}},
    {.tag = "-1_3d", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-1}},
    {.tag = "far", .ndim = {2}, .shape = {{3, 4}}, .p = {7}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 4}}, .p = {0}},
};

const tt_op tt_rows_index[] = {
    {.name = "embedding",
     .torch = "torch.nn.functional.embedding",
     .arity = 2,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_INDEX},
     TT_CASES(embedding_cases),
     .call = call_embedding,
     .ref = ref_embedding,
     .golden = "embedding"},
    {.name = "index_select",
     .torch = "torch.index_select",
     .arity = 2,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_INDEX},
     TT_CASES(index_select_cases),
     .call = call_index_select,
     .ref = ref_index_select,
     .golden = "index_select"},
    {.name = "gather",
     .torch = "torch.gather",
     .arity = 2,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_INDEX},
     TT_CASES(gather_cases),
     .call = call_gather,
     .ref = ref_gather,
     .golden = "gather"},
    {.name = "scatter_add",
     .torch = "torch.scatter_add",
     .arity = 3,
     .diff = 5,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_INDEX, TT_ANY},
     TT_CASES(scatter_add_cases),
     .call = call_scatter_add,
     .ref = ref_scatter_add,
     .golden = "scatter_add"},
    {.name = "where",
     .torch = "torch.where",
     .arity = 3,
     .diff = 6,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_MASK, TT_ANY, TT_ANY},
     TT_CASES(where_cases),
     .call = call_where,
     .ref = ref_where,
     .golden = "where"},
    {.name = "masked_fill",
     .torch = "Tensor.masked_fill",
     .arity = 2,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_MASK},
     TT_CASES(masked_fill_cases),
     .call = call_masked_fill,
     .ref = tt_ref_map2,
     .f = f_masked_fill,
     .golden = "masked_fill"},
    {.name = "tril",
     .torch = "torch.tril",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(tri_cases),
     .call = call_tril,
     .ref = ref_tril,
     .golden = "tril"},
    {.name = "triu",
     .torch = "torch.triu",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(tri_cases),
     .call = call_triu,
     .ref = ref_triu,
     .golden = "triu"},
};
const int tt_nrows_index = (int)(sizeof tt_rows_index / sizeof tt_rows_index[0]);
