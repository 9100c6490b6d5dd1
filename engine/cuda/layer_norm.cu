/* engine/cuda/layer_norm.cu — layer norm forward and backward over
 * contiguous (rows, cols) tensors (tn_ln_args), float32 and float64.
 *
 * The formulas are the CPU's (engine/cpu/layer_norm_kernels.c): statistics
 * and the normalisation in double, rounded once. Each order of operations
 * is fixed (deterministic), though not the CPU's, so the last bits may
 * differ from it:
 *  - forward and dx: a warp per row; each lane folds its strided elements
 *    in order, then a fixed shuffle tree;
 *  - dweight / dbias: a thread per column walks the rows in order.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

template <typename T> struct ln_params {
    int64_t rows, cols;
    double eps;
    const T *x, *w, *b, *dy;
    T *mean, *rstd, *y, *dx, *dw, *db;
};

constexpr int ROWS_PER_BLOCK = 8; /* warps of a 256-thread block */

template <typename T> __global__ void __launch_bounds__(256) ln_fwd(ln_params<T> a) {
    const int lane = threadIdx.x % 32;
    const int64_t n = a.cols;
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * ROWS_PER_BLOCK + threadIdx.x / 32;
         r < a.rows; r += static_cast<int64_t>(gridDim.x) * ROWS_PER_BLOCK) { /* warp-uniform */
        const T *x = a.x + r * n;
        T *y = a.y + r * n;
        double s = 0;
        for (int64_t j = lane; j < n; j += 32)
            s += static_cast<double>(x[j]);
        const double m = warp_sum(s) / static_cast<double>(n);
        double q = 0;
        for (int64_t j = lane; j < n; j += 32) {
            const double d = static_cast<double>(x[j]) - m;
            q += d * d;
        }
        const double rs = 1.0 / ::sqrt(warp_sum(q) / static_cast<double>(n) + a.eps);
        if (lane == 0) {
            a.mean[r] = static_cast<T>(m);
            a.rstd[r] = static_cast<T>(rs);
        }
        for (int64_t j = lane; j < n; j += 32) {
            double v = (static_cast<double>(x[j]) - m) * rs;
            if (a.w) v *= static_cast<double>(a.w[j]);
            if (a.b) v += static_cast<double>(a.b[j]);
            y[j] = static_cast<T>(v);
        }
    }
}

template <typename T> __global__ void __launch_bounds__(256) ln_dx(ln_params<T> a) {
    const int lane = threadIdx.x % 32;
    const int64_t n = a.cols;
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * ROWS_PER_BLOCK + threadIdx.x / 32;
         r < a.rows; r += static_cast<int64_t>(gridDim.x) * ROWS_PER_BLOCK) {
        const T *x = a.x + r * n, *dy = a.dy + r * n;
        T *dx = a.dx + r * n;
        const double m = static_cast<double>(a.mean[r]), rs = static_cast<double>(a.rstd[r]);
        double s1 = 0, s2 = 0;
        for (int64_t j = lane; j < n; j += 32) {
            const double g = static_cast<double>(dy[j]) * (a.w ? static_cast<double>(a.w[j]) : 1.0);
            s1 += g;
            s2 += g * static_cast<double>(x[j]);
        }
        const double db = warp_sum(s1), ds = warp_sum(s2);
        const double mg = db / static_cast<double>(n),
                     mgx = (ds - m * db) * rs / static_cast<double>(n);
        for (int64_t j = lane; j < n; j += 32) {
            const double g = static_cast<double>(dy[j]) * (a.w ? static_cast<double>(a.w[j]) : 1.0);
            dx[j] = static_cast<T>(rs * (g - mg - (static_cast<double>(x[j]) - m) * rs * mgx));
        }
    }
}

template <typename T> __global__ void __launch_bounds__(256) ln_params_grad(ln_params<T> a) {
    const int64_t n = a.cols;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x; j < n;
         j += static_cast<int64_t>(gridDim.x) * 256) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < a.rows; r++) {
            const double g = static_cast<double>(a.dy[r * n + j]);
            const double xh =
                (static_cast<double>(a.x[r * n + j]) - static_cast<double>(a.mean[r])) *
                static_cast<double>(a.rstd[r]);
            sw += g * xh;
            sb += g;
        }
        if (a.dw) a.dw[j] = static_cast<T>(sw);
        if (a.db) a.db[j] = static_cast<T>(sb);
    }
}

template <typename T> tn_status launch(device_state *ds, const tn_ln_args *a) {
    ln_params<T> p;
    p.rows = a->rows;
    p.cols = a->cols;
    p.eps = a->eps;
    p.x = static_cast<const T *>(a->x);
    p.w = static_cast<const T *>(a->weight);
    p.b = static_cast<const T *>(a->bias);
    p.dy = static_cast<const T *>(a->dy);
    p.mean = static_cast<T *>(a->mean);
    p.rstd = static_cast<T *>(a->rstd);
    p.y = static_cast<T *>(a->y);
    p.dx = static_cast<T *>(a->dx);
    p.dw = static_cast<T *>(a->dweight);
    p.db = static_cast<T *>(a->dbias);
    const unsigned row_grid = grid_clamp(ds, ceil_div(a->rows, ROWS_PER_BLOCK));
    if (a->mode == TN_LN_FWD) {
        ln_fwd<T><<<row_grid, 256, 0, ds->stream>>>(p);
        return launch_check("layer_norm");
    }
    if (a->dweight || a->dbias) {
        ln_params_grad<T><<<grid_clamp(ds, ceil_div(a->cols, 256)), 256, 0, ds->stream>>>(p);
        tn_status st = launch_check("layer_norm");
        if (st < 0) return st;
    }
    if (a->dx) ln_dx<T><<<row_grid, 256, 0, ds->stream>>>(p);
    return launch_check("layer_norm");
}

} // namespace

extern "C" tn_status tn__cuda_layer_norm(int dev, const tn_ln_args *a) {
    tn_status st = check_float_args("layer_norm", a, TN_LN_BWD + 1);
    if (st < 0) return st;
    if (a->rows < 0 || a->cols < 0)
        return tn__error(TN_ERR_SHAPE, "CUDA layer_norm: negative size");
    if (a->rows == 0 || a->cols == 0) return TN_OK;
    const bool fwd = a->mode == TN_LN_FWD;
    if (!a->x || !a->mean || !a->rstd || (fwd && !a->y) || (!fwd && !a->dy))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA layer_norm: NULL operand");
    return on_device_float(dev, a->dtype,
                           [&](device_state *ds, auto t) { return launch<decltype(t)>(ds, a); });
}

} // namespace tnc
