/* tests/ops/ref.c — what the reference implementations share: broadcasting, dims, shapes.
 * Plain loops over row-major double arrays; nothing here calls the library's kernels. */
#include "op_table.h"

int64_t tt_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

bool tt_ref_set_shape(tt_ref_io *io, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TN_MAX_DIMS) return false;
    io->out_ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        io->out_shape[i] = shape[i];
    }
    return tt_numel(ndim, shape) <= io->out_cap;
}

bool tt_ref_broadcast(tt_ref_io *io, int n) {
    int nd = 0;
    for (int k = 0; k < n; k++)
        nd = io->ndim[k] > nd ? io->ndim[k] : nd;
    int64_t shape[TN_MAX_DIMS];
    for (int d = 0; d < nd; d++) { /* d counts from the right */
        int64_t s = 1;
        for (int k = 0; k < n; k++) {
            int kd = io->ndim[k] - 1 - d;
            int64_t sk = kd >= 0 ? io->shape[k][kd] : 1;
            if (sk != 1 && s != 1 && sk != s) return false;
            if (sk != 1) s = sk;
        }
        shape[nd - 1 - d] = s;
    }
    return tt_ref_set_shape(io, nd, shape);
}

int64_t tt_ref_bcast_at(const tt_ref_io *io, int k, int64_t j) {
    int64_t off = 0, mul = 1;
    for (int d = io->out_ndim - 1, kd = io->ndim[k] - 1; d >= 0; d--, kd--) {
        int64_t i = j % io->out_shape[d];
        j /= io->out_shape[d];
        if (kd < 0) continue;
        int64_t sk = io->shape[k][kd];
        off += (sk == 1 ? 0 : i) * mul;
        mul *= sk;
    }
    return off;
}

bool tt_ref_map1(tt_ref_io *io) {
    if (!tt_ref_set_shape(io, io->ndim[0], io->shape[0])) return false;
    int64_t n = tt_numel(io->ndim[0], io->shape[0]);
    for (int64_t j = 0; j < n; j++)
        io->out[j] = io->op->f(io->x[0][j], 0, io->p);
    return true;
}

bool tt_ref_map2(tt_ref_io *io) {
    if (!tt_ref_broadcast(io, 2)) return false;
    int64_t n = tt_numel(io->out_ndim, io->out_shape);
    for (int64_t j = 0; j < n; j++)
        io->out[j] = io->op->f(io->x[0][tt_ref_bcast_at(io, 0, j)],
                               io->x[1][tt_ref_bcast_at(io, 1, j)], io->p);
    return true;
}

bool tt_ref_dim(int *dim, int ndim) {
    int n = ndim ? ndim : 1; /* a 0-D tensor takes dim 0 and -1, as PyTorch */
    if (*dim < -n || *dim >= n) return false;
    if (*dim < 0) *dim += n;
    return true;
}

bool tt_ref_reduce_shape(tt_ref_io *io, int dim, bool keepdim, int64_t *outer, int64_t *len,
                         int64_t *inner) {
    int nd = io->ndim[0];
    const int64_t *s = io->shape[0];
    if (!tt_ref_dim(&dim, nd)) return false;
    *outer = 1, *len = 1, *inner = 1;
    int64_t shape[TN_MAX_DIMS];
    int on = 0;
    for (int d = 0; d < nd; d++) {
        if (d < dim) *outer *= s[d];
        if (d > dim) *inner *= s[d];
        if (d == dim) *len = s[d];
        if (d != dim || keepdim) shape[on++] = d == dim ? 1 : s[d];
    }
    return tt_ref_set_shape(io, on, shape);
}
