/* tests/ops/rows_split.c — rows of the ops returning several views: split, split_with_sizes,
 * chunk, unbind. Each adapter returns one piece (its index is the last parameter), the others
 * released, so the table checks the piece's values and the gradient through the one node with
 * zeros for the unused pieces. References: the piece is a slice of the row-major input. */
#include "op_table.h"

#define MAX_PIECES 16

/* Output = input 0's [start, start + len) along dim (drop: the dim removed, len 1). */
static bool slice(tt_ref_io *io, int dim, int64_t start, int64_t len, bool drop) {
    int nd = io->ndim[0];
    const int64_t *sh = io->shape[0];
    int64_t shape[TN_MAX_DIMS] = {0}, outer = 1, inner = 1;
    int ond = 0;
    for (int d = 0; d < nd; d++) {
        if (d < dim) outer *= sh[d];
        if (d > dim) inner *= sh[d];
        if (d != dim) shape[ond++] = sh[d];
        else if (!drop) shape[ond++] = len;
    }
    if (!tt_ref_set_shape(io, ond, shape)) return false;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < len; i++)
            for (int64_t j = 0; j < inner; j++)
                io->out[(o * len + i) * inner + j] = io->x[0][(o * sh[dim] + start + i) * inner + j];
    return true;
}

/* Piece k of pieces of size `size` along dim; false when there is no such piece. */
static bool sized_piece(tt_ref_io *io, int64_t size, int dim, int64_t k) {
    if (io->ndim[0] == 0 || !tt_ref_dim(&dim, io->ndim[0]) || size <= 0) return false;
    int64_t len = io->shape[0][dim], start = k * size;
    if (k < 0 || start >= len) return false;
    return slice(io, dim, start, start + size > len ? len - start : size, false);
}

/* The piece p[k_at] of n pieces in out (released but that one: tt_scoped owns them). */
static tn_tensor *pick(tn_status st, tn_tensor **out, int n, double k) {
    if (st < 0) return NULL;
    if (k < 0 || k >= n) {
        tn_set_error(TN_ERR_INVALID_ARGUMENT, "no piece %d of %d", (int)k, n);
        return NULL;
    }
    return out[(int)k];
}

/* p: split_size, dim, piece */
static bool ref_split(tt_ref_io *io) {
    return sized_piece(io, (int64_t)io->p[0], (int)io->p[1], (int64_t)io->p[2]);
}
static tn_tensor *split_body(tn_tensor *const *in, const double *p) {
    tn_tensor *out[MAX_PIECES];
    int n = 0;
    tn_status st = tn_split(in[0], (int64_t)p[0], (int)p[1], out, MAX_PIECES, &n);
    return pick(st, out, n, p[2]);
}
static tn_tensor *call_split(tn_tensor *const *in, const double *p) {
    return tt_scoped(split_body, in, p);
}

/* p: chunks, dim, piece */
static bool ref_chunk(tt_ref_io *io) {
    int dim = (int)io->p[1];
    int64_t chunks = (int64_t)io->p[0];
    if (io->ndim[0] == 0 || !tt_ref_dim(&dim, io->ndim[0]) || chunks <= 0) return false;
    int64_t len = io->shape[0][dim];
    return sized_piece(io, (len + chunks - 1) / chunks, dim, (int64_t)io->p[2]);
}
static tn_tensor *chunk_body(tn_tensor *const *in, const double *p) {
    tn_tensor *out[MAX_PIECES];
    int n = 0;
    if (p[0] > MAX_PIECES) return NULL;
    tn_status st = tn_chunk(in[0], (int)p[0], (int)p[1], out, &n);
    return pick(st, out, n, p[2]);
}
static tn_tensor *call_chunk(tn_tensor *const *in, const double *p) {
    return tt_scoped(chunk_body, in, p);
}

/* p: dim, piece, n, sizes[n] (n <= 3) */
static bool ref_split_with_sizes(tt_ref_io *io) {
    int dim = (int)io->p[0], k = (int)io->p[1], n = (int)io->p[2];
    if (io->ndim[0] == 0 || !tt_ref_dim(&dim, io->ndim[0]) || k < 0 || k >= n || n > 3)
        return false;
    int64_t start = 0, total = 0;
    for (int i = 0; i < n; i++) {
        if (io->p[3 + i] < 0) return false;
        if (i < k) start += (int64_t)io->p[3 + i];
        total += (int64_t)io->p[3 + i];
    }
    if (total != io->shape[0][dim]) return false;
    return slice(io, dim, start, (int64_t)io->p[3 + k], false);
}
static tn_tensor *split_with_sizes_body(tn_tensor *const *in, const double *p) {
    tn_tensor *out[3];
    int64_t sizes[3];
    int n = (int)p[2];
    if (n < 0 || n > 3) return NULL;
    for (int i = 0; i < n; i++)
        sizes[i] = (int64_t)p[3 + i];
    tn_status st = tn_split_with_sizes(in[0], n, sizes, (int)p[0], out);
    return pick(st, out, n, p[1]);
}
static tn_tensor *call_split_with_sizes(tn_tensor *const *in, const double *p) {
    return tt_scoped(split_with_sizes_body, in, p);
}

/* p: dim, piece */
static bool ref_unbind(tt_ref_io *io) {
    int dim = (int)io->p[0];
    int64_t k = (int64_t)io->p[1];
    if (io->ndim[0] == 0 || !tt_ref_dim(&dim, io->ndim[0])) return false;
    if (k < 0 || k >= io->shape[0][dim]) return false;
    return slice(io, dim, k, 1, true);
}
static tn_tensor *unbind_body(tn_tensor *const *in, const double *p) {
    tn_tensor *out[MAX_PIECES];
    int n = 0;
    tn_status st = tn_unbind(in[0], (int)p[0], out, MAX_PIECES, &n);
    return pick(st, out, n, p[1]);
}
static tn_tensor *call_unbind(tn_tensor *const *in, const double *p) {
    return tt_scoped(unbind_body, in, p);
}

static const tt_case split_cases[] = {
    {.tag = "dim0_last", .ndim = {2}, .shape = {{5, 3}}, .p = {2, 0, 2}},
    {.tag = "dim0_mid", .ndim = {2}, .shape = {{5, 3}}, .p = {2, 0, 1}},
    {.tag = "dim-1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {3, -1, 0}},
    {.tag = "whole", .ndim = {1}, .shape = {{4}}, .p = {9, 0, 0}},
    {.tag = "empty_other", .ndim = {2}, .shape = {{0, 4}}, .p = {2, 1, 1}},
};
static const tt_case chunk_cases[] = {
    {.tag = "even", .ndim = {2}, .shape = {{6, 2}}, .p = {3, 0, 1}},
    {.tag = "ragged", .ndim = {2}, .shape = {{2, 5}}, .p = {4, 1, 2}},
    {.tag = "3d", .ndim = {3}, .shape = {{2, 4, 3}}, .p = {2, 1, 0}},
};
static const tt_case split_with_sizes_cases[] = {
    {.tag = "three", .ndim = {2}, .shape = {{2, 6}}, .p = {1, 1, 3, 1, 3, 2}},
    {.tag = "empty_piece", .ndim = {2}, .shape = {{4, 2}}, .p = {0, 2, 3, 1, 0, 3}},
    {.tag = "one", .ndim = {1}, .shape = {{5}}, .p = {0, 0, 1, 5}},
};
static const tt_case unbind_cases[] = {
    {.tag = "dim0", .ndim = {2}, .shape = {{3, 4}}, .p = {0, 1}},
    {.tag = "dim-1", .ndim = {3}, .shape = {{2, 3, 4}}, .p = {-1, 3}},
    {.tag = "1d", .ndim = {1}, .shape = {{4}}, .p = {0, 2}},
};

const tt_op tt_rows_split[] = {
    {.name = "split",
     .torch = "torch.split",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(split_cases),
     .call = call_split,
     .ref = ref_split,
     .golden = "split"},
    {.name = "split_with_sizes",
     .torch = "torch.split(sizes)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(split_with_sizes_cases),
     .call = call_split_with_sizes,
     .ref = ref_split_with_sizes,
     .golden = "split_with_sizes"},
    {.name = "chunk",
     .torch = "torch.chunk",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(chunk_cases),
     .call = call_chunk,
     .ref = ref_chunk,
     .golden = "chunk"},
    {.name = "unbind",
     .torch = "torch.unbind",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unbind_cases),
     .call = call_unbind,
     .ref = ref_unbind,
     .golden = "unbind"},
};
const int tt_nrows_split = (int)(sizeof tt_rows_split / sizeof tt_rows_split[0]);
