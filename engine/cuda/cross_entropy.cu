/* engine/cuda/cross_entropy.cu — the fused cross-entropy (backend.h,
 * cross_entropy; tn_ce_args in engine/core/kernel_args.h), float32 and
 * float64: log-softmax and NLL in one pass, with no log-probability tensor and
 * nothing built on the host.
 *
 * Forward: each row's max m and log_s = log(sum exp(x - m)) are folded as
 * softmax.cu's log_softmax folds them (the same layout by row length, the
 * same strided order and tree: rows.cuh), so they equal the two-step values
 * on this device; each row's target term goes to scratch in double, and one
 * block folds the terms in a fixed order into the loss. Backward: one thread
 * per element from the saved row statistics, the scale -g / count read from
 * the loss's gradient on the device, so a backward pass never waits here.
 * The targets were checked by the op (each in [0, c) or ignore_index).
 */
#include "cuda_internal.h"
#include "rows.cuh"

namespace tnc {

namespace {

template <typename T> struct ce_params {
    int64_t n, c, ign;
    const T *x;
    const int64_t *t;
    T *stats;
    double *part; /* forward: the rows' target terms */
    const T *g;   /* backward: the loss's gradient */
    double count;
    T *gx;
};

/* GROUP threads per row (1: a thread walks its row in order). */
template <int GROUP, typename T>
__global__ void __launch_bounds__(GROUP > 256 ? GROUP : 256) ce_fwd_rows(ce_params<T> a) {
    constexpr int BLOCK = GROUP > 256 ? GROUP : 256;
    constexpr int PER_BLOCK = BLOCK / GROUP;
    __shared__ T sh[GROUP > 32 ? GROUP / 32 : 1];
    (void)sh; /* GROUP 1: no tree */
    const int k0 = static_cast<int>(threadIdx.x) % GROUP;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * PER_BLOCK + threadIdx.x / GROUP;
         row < a.n; row += static_cast<int64_t>(gridDim.x) * PER_BLOCK) { /* group-uniform */
        const T *x = a.x + row * a.c;
        T m = -INFINITY;
        for (int64_t k = k0; k < a.c; k += GROUP)
            m = max_nan(m, x[k]);
        if constexpr (GROUP > 1) m = group_allreduce<GROUP>(m, op_max<T>(), sh);
        T s = 0;
        for (int64_t k = k0; k < a.c; k += GROUP)
            s += ex(x[k] - m);
        if constexpr (GROUP > 1) s = group_allreduce<GROUP>(s, op_add<T>(), sh);
        if (k0 == 0) {
            const T ls = lg(s);
            const int64_t t = a.t[row];
            a.stats[2 * row] = m;
            a.stats[2 * row + 1] = ls;
            a.part[row] = t == a.ign ? 0.0 : static_cast<double>((x[t] - m) - ls);
        }
    }
}

/* One block: loss = -(the terms folded in a fixed order) / count. */
template <typename T> __global__ void __launch_bounds__(256) ce_loss(ce_params<T> a, T *loss) {
    __shared__ double sh[256 / 32];
    double s = 0;
    for (int64_t i = threadIdx.x; i < a.n; i += 256)
        s += a.part[i];
    s = group_allreduce<256>(s, op_add<double>(), sh);
    if (threadIdx.x == 0) *loss = static_cast<T>(-s / a.count);
}

template <typename T> __global__ void __launch_bounds__(256) ce_bwd(ce_params<T> a) {
    const T S = static_cast<T>(-static_cast<double>(*a.g) / a.count);
    const int64_t total = a.n * a.c, G = static_cast<int64_t>(gridDim.x) * 256;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x; e < total; e += G) {
        const int64_t i = e / a.c, j = e - i * a.c, t = a.t[i];
        T v = 0;
        if (t != a.ign) {
            const T m = a.stats[2 * i], ls = a.stats[2 * i + 1];
            v = (j == t ? S : static_cast<T>(0)) - ex((a.x[e] - m) - ls) * S;
        }
        a.gx[e] = v;
    }
}

template <typename T> tn_status run(int dev, device_state *ds, const tn_ce_args *a) {
    ce_params<T> p;
    p.n = a->n;
    p.c = a->c;
    p.ign = a->ignore_index;
    p.x = static_cast<const T *>(a->x);
    p.t = a->target;
    p.stats = static_cast<T *>(a->stats);
    p.part = nullptr;
    p.g = static_cast<const T *>(a->g);
    p.count = a->count;
    p.gx = static_cast<T *>(a->gx);
    auto grid = [&](int64_t blocks) { return grid_clamp(ds, blocks); };
    if (a->mode == TN_CE_BWD) {
        if (p.n * p.c > 0) ce_bwd<T><<<grid(ceil_div(p.n * p.c, 256)), 256, 0, ds->stream>>>(p);
        return launch_check("cross_entropy backward");
    }
    scratch part(dev, static_cast<size_t>(p.n > 0 ? p.n : 1) * sizeof(double));
    if (!part.get()) return TN_ERR_OUT_OF_MEMORY; /* alloc set the message */
    p.part = static_cast<double *>(part.get());
    if (p.n > 0) {
        switch (row_layout_for(p.c)) {
        case ROWS_THREAD:
            ce_fwd_rows<1, T><<<grid(ceil_div(p.n, 256)), 256, 0, ds->stream>>>(p);
            break;
        case ROWS_WARP:
            ce_fwd_rows<32, T><<<grid(ceil_div(p.n, 8)), 256, 0, ds->stream>>>(p);
            break;
        case ROWS_BLOCK:
            ce_fwd_rows<512, T><<<grid(p.n), 512, 0, ds->stream>>>(p);
            break;
        }
    }
    ce_loss<T><<<1, 256, 0, ds->stream>>>(p, static_cast<T *>(a->loss));
    return launch_check("cross_entropy");
}

} // namespace

extern "C" tn_status tn__cuda_cross_entropy(int dev, const tn_ce_args *a) {
    tn_status st = check_float_args("cross_entropy", a, TN_CE_BWD + 1);
    if (st < 0) return st;
    if (a->n < 0 || a->c < 0 || (a->n > 0 && a->c == 0))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA cross_entropy: %lld rows of %lld",
                         static_cast<long long>(a->n), static_cast<long long>(a->c));
    const bool fwd = a->mode == TN_CE_FWD;
    if ((a->n > 0 && (!a->x || !a->target || !a->stats)) || (fwd && !a->loss) ||
        (!fwd && a->n * a->c > 0 && (!a->gx || !a->g)))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA cross_entropy: a pointer is NULL");
    return on_device_float(dev, a->dtype,
                           [&](device_state *ds, auto t) { return run<decltype(t)>(dev, ds, a); });
}

} // namespace tnc
