/* engine/cuda/channel_norm.cu — batch norm and group norm forward and backward over contiguous
 * (n, c, s) tensors (tn_cn_args), float32 and float64.
 *
 * The formulas are the CPU's (engine/cpu/channel_norm_kernels.c): statistics and the
 * normalisation in double, rounded once; the running statistics updated from the double
 * statistics. Each order of operations is fixed (deterministic), though not the CPU's, so the
 * last bits may differ from it:
 *  - statistics: a block per unit; each thread folds its strided elements plane by plane, then
 *    the warps' fixed shuffle trees and warp 0 over the warps in order;
 *  - backward sums: a block per plane likewise, then a thread per channel (dweight, dbias) or
 *    per unit (the dx terms) walks its planes in order;
 *  - y and dx: a thread per element.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"
#include "rows.cuh"

namespace tnc {

namespace {

template <typename T> struct cn_params {
    int64_t n, c, s, groups, units, per_unit;
    double count, eps, momentum;
    bool fixed;
    const T *x, *w, *b, *var, *dy;
    T *mean, *rstd, *rm, *rv, *y, *dx, *dw, *db;
    double *ud; /* per unit: mean, rstd in double (forward) */
    double *ps; /* per plane: sum(dy), sum(dy (x - mean)) (backward) */
    double *ug; /* per unit: the dx terms sum(w dy), sum(w dy (x - mean)) (backward) */
};

constexpr int THREADS = 256;

__device__ __forceinline__ int64_t unit_of(int64_t p, int64_t c, int64_t groups) {
    const int64_t ch = p % c;
    return groups ? p / c * groups + ch / (c / groups) : ch;
}

__device__ __forceinline__ int64_t plane_of(int64_t u, int64_t j, int64_t c, int64_t groups) {
    return groups ? u / groups * c + u % groups * (c / groups) + j : j * c + u;
}

/* The block's sum, in every thread (group_allreduce's fixed tree); sh: THREADS / 32 slots */
__device__ __forceinline__ double block_sum(double v, double *sh) {
    return group_allreduce<THREADS>(v, op_add<double>(), sh);
}

/* sum over unit u of x (centred false) or of (x - m)^2 */
template <typename T>
__device__ double unit_sum(const cn_params<T> &a, int64_t u, bool centred, double m, double *sh) {
    double acc = 0;
    for (int64_t j = 0; j < a.per_unit; j++) {
        const T *x = a.x + plane_of(u, j, a.c, a.groups) * a.s;
        for (int64_t e = threadIdx.x; e < a.s; e += THREADS) {
            const double v = static_cast<double>(x[e]);
            acc += centred ? (v - m) * (v - m) : v;
        }
    }
    return block_sum(acc, sh);
}

template <typename T> __global__ void __launch_bounds__(THREADS) cn_stats(cn_params<T> a) {
    __shared__ double sh[THREADS / 32];
    for (int64_t u = blockIdx.x; u < a.units; u += gridDim.x) { /* block-uniform */
        const double m = unit_sum(a, u, false, 0.0, sh) / a.count;
        const double ss = unit_sum(a, u, true, m, sh);
        if (threadIdx.x == 0) {
            const double rs = 1.0 / ::sqrt(ss / a.count + a.eps);
            a.ud[2 * u] = m;
            a.ud[2 * u + 1] = rs;
            a.mean[u] = static_cast<T>(m);
            a.rstd[u] = static_cast<T>(rs);
            const double mo = a.momentum;
            if (a.rm) a.rm[u] = static_cast<T>(mo * m + (1 - mo) * static_cast<double>(a.rm[u]));
            if (a.rv)
                a.rv[u] = static_cast<T>(mo * (ss / (a.count - 1)) +
                                         (1 - mo) * static_cast<double>(a.rv[u]));
        }
    }
}

/* eval: mean given, rstd from the given variance */
template <typename T> __global__ void cn_fixed_stats(cn_params<T> a) {
    for (int64_t u = static_cast<int64_t>(blockIdx.x) * THREADS + threadIdx.x; u < a.units;
         u += static_cast<int64_t>(gridDim.x) * THREADS) {
        const double rs = 1.0 / ::sqrt(static_cast<double>(a.var[u]) + a.eps);
        a.ud[2 * u] = static_cast<double>(a.mean[u]);
        a.ud[2 * u + 1] = rs;
        a.rstd[u] = static_cast<T>(rs);
    }
}

template <typename T> __global__ void cn_apply(cn_params<T> a) {
    const int64_t total = a.n * a.c * a.s;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * THREADS + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * THREADS) {
        const int64_t p = i / a.s, ch = p % a.c, u = unit_of(p, a.c, a.groups);
        double v = (static_cast<double>(a.x[i]) - a.ud[2 * u]) * a.ud[2 * u + 1];
        if (a.w) v *= static_cast<double>(a.w[ch]);
        if (a.b) v += static_cast<double>(a.b[ch]);
        a.y[i] = static_cast<T>(v);
    }
}

template <typename T> __global__ void __launch_bounds__(THREADS) cn_plane_sums(cn_params<T> a) {
    __shared__ double sh[THREADS / 32];
    for (int64_t p = blockIdx.x; p < a.n * a.c; p += gridDim.x) {
        const double m = static_cast<double>(a.mean[unit_of(p, a.c, a.groups)]);
        const T *x = a.x + p * a.s, *dy = a.dy + p * a.s;
        double s1 = 0, s2 = 0;
        for (int64_t e = threadIdx.x; e < a.s; e += THREADS) {
            const double g = static_cast<double>(dy[e]);
            s1 += g;
            s2 += g * (static_cast<double>(x[e]) - m);
        }
        s1 = block_sum(s1, sh);
        s2 = block_sum(s2, sh);
        if (threadIdx.x == 0) {
            a.ps[2 * p] = s1;
            a.ps[2 * p + 1] = s2;
        }
    }
}

/* dweight, dbias per channel; the dx terms per unit (thread k < c: a channel, then units) */
template <typename T> __global__ void cn_terms(cn_params<T> a) {
    for (int64_t k = static_cast<int64_t>(blockIdx.x) * THREADS + threadIdx.x; k < a.c + a.units;
         k += static_cast<int64_t>(gridDim.x) * THREADS) {
        double s1 = 0, s2 = 0;
        if (k < a.c) {
            for (int64_t i = 0; i < a.n; i++) {
                const int64_t p = i * a.c + k;
                s1 += a.ps[2 * p];
                s2 += a.ps[2 * p + 1] * static_cast<double>(a.rstd[unit_of(p, a.c, a.groups)]);
            }
            if (a.dw) a.dw[k] = static_cast<T>(s2);
            if (a.db) a.db[k] = static_cast<T>(s1);
            continue;
        }
        const int64_t u = k - a.c;
        for (int64_t j = 0; j < a.per_unit; j++) {
            const int64_t p = plane_of(u, j, a.c, a.groups);
            const double w = a.w ? static_cast<double>(a.w[p % a.c]) : 1.0;
            s1 += w * a.ps[2 * p];
            s2 += w * a.ps[2 * p + 1];
        }
        a.ug[2 * u] = s1;
        a.ug[2 * u + 1] = s2;
    }
}

template <typename T> __global__ void cn_dx(cn_params<T> a) {
    const int64_t total = a.n * a.c * a.s;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * THREADS + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * THREADS) {
        const int64_t p = i / a.s, u = unit_of(p, a.c, a.groups);
        const double rs = static_cast<double>(a.rstd[u]);
        const double w = a.w ? static_cast<double>(a.w[p % a.c]) : 1.0;
        double v = static_cast<double>(a.dy[i]) * rs * w;
        if (!a.fixed) {
            const double xc = static_cast<double>(a.x[i]) - static_cast<double>(a.mean[u]);
            v += -rs * rs * rs * a.ug[2 * u + 1] / a.count * xc - rs * a.ug[2 * u] / a.count;
        }
        a.dx[i] = static_cast<T>(v);
    }
}

template <typename T> tn_status launch(device_state *ds, int dev, const tn_cn_args *a) {
    cn_params<T> p = {};
    p.n = a->n, p.c = a->c, p.s = a->s, p.groups = a->groups;
    p.units = a->groups ? a->n * a->groups : a->c;
    p.per_unit = a->groups ? a->c / a->groups : a->n;
    p.count = static_cast<double>(p.per_unit * a->s);
    p.eps = a->eps, p.momentum = a->momentum, p.fixed = a->fixed;
    p.x = static_cast<const T *>(a->x);
    p.w = static_cast<const T *>(a->weight);
    p.b = static_cast<const T *>(a->bias);
    p.var = static_cast<const T *>(a->var);
    p.dy = static_cast<const T *>(a->dy);
    p.mean = static_cast<T *>(a->mean);
    p.rstd = static_cast<T *>(a->rstd);
    p.rm = static_cast<T *>(a->running_mean);
    p.rv = static_cast<T *>(a->running_var);
    p.y = static_cast<T *>(a->y);
    p.dx = static_cast<T *>(a->dx);
    p.dw = static_cast<T *>(a->dweight);
    p.db = static_cast<T *>(a->dbias);
    const int64_t planes = a->n * a->c, total = planes * a->s;
    const unsigned elem_grid = grid_clamp(ds, ceil_div(total, THREADS));
    if (a->mode == TN_CN_FWD) {
        scratch ud(dev, static_cast<size_t>(2 * p.units) * sizeof(double));
        p.ud = static_cast<double *>(ud.get());
        if (a->fixed)
            cn_fixed_stats<T>
                <<<grid_clamp(ds, ceil_div(p.units, THREADS)), THREADS, 0, ds->stream>>>(p);
        else
            cn_stats<T><<<grid_clamp(ds, p.units), THREADS, 0, ds->stream>>>(p);
        tn_status st = launch_check("batch_norm");
        if (st < 0) return st;
        cn_apply<T><<<elem_grid, THREADS, 0, ds->stream>>>(p);
        return launch_check("batch_norm");
    }
    scratch ps(dev, static_cast<size_t>(2 * (planes + p.units)) * sizeof(double));
    p.ps = static_cast<double *>(ps.get());
    p.ug = p.ps + 2 * planes;
    cn_plane_sums<T><<<grid_clamp(ds, planes), THREADS, 0, ds->stream>>>(p);
    tn_status st = launch_check("batch_norm");
    if (st < 0) return st;
    cn_terms<T><<<grid_clamp(ds, ceil_div(a->c + p.units, THREADS)), THREADS, 0, ds->stream>>>(p);
    st = launch_check("batch_norm");
    if (st < 0 || !a->dx) return st;
    cn_dx<T><<<elem_grid, THREADS, 0, ds->stream>>>(p);
    return launch_check("batch_norm");
}

} // namespace

extern "C" tn_status tn__cuda_channel_norm(int dev, const tn_cn_args *a) {
    tn_status st = check_float_args("batch_norm", a, TN_CN_BWD + 1);
    if (st < 0) return st;
    if (a->n < 0 || a->c < 0 || a->s < 0 || a->groups < 0 || (a->groups && a->c % a->groups))
        return tn__error(TN_ERR_SHAPE, "CUDA batch_norm: bad geometry");
    if (a->n == 0 || a->c == 0 || a->s == 0) return TN_OK;
    const bool fwd = a->mode == TN_CN_FWD;
    if (!a->x || !a->mean || !a->rstd || (fwd && !a->y) || (!fwd && !a->dy) ||
        (fwd && a->fixed && !a->var))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA batch_norm: NULL operand");
    return on_device_float(
        dev, a->dtype, [&](device_state *ds, auto t) { return launch<decltype(t)>(ds, dev, a); });
}

} // namespace tnc
