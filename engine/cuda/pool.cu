/* engine/cuda/pool.cu — max and average pooling (tn_pool_args), float32 and float64, forward
 * and backward.
 *
 * The arithmetic is the CPU's (engine/cpu/pool_impl.h), so both back ends give the same bits:
 *  - forward: a thread per output element scans its window's taps in order (i, j), the max
 *    taking the first of equal values and any NaN, the average summing in the dtype from 0;
 *  - backward: a thread per input element gathers the gradients of the outputs that reach it
 *    in output order (y, then x), as the CPU's scatter adds them: no atomics.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

/* The output o of a sliding window that reads p through tap k: p = o*s - pad + k*d. */
__device__ __forceinline__ bool tap_hit(int64_t p, int64_t k, int64_t s, int64_t pad, int64_t d,
                                        int64_t n_out, int64_t *o) {
    const int64_t t = p + pad - k * d;
    if (t < 0 || t % s) return false;
    *o = t / s;
    return *o < n_out;
}

/* The first index at or after x0 - k*d (k >= 0) that is >= 0. */
__device__ __forceinline__ int64_t first_in(int64_t x0, int64_t d) {
    return x0 >= 0 ? x0 : x0 + (-x0 + d - 1) / d * d;
}

#define GRID_LOOP(e, total)                                                                        \
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < (total);     \
         e += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T> __global__ void __launch_bounds__(256) pool_fwd(tn_pool_args a) {
    const int64_t L = a.oh * a.ow, total = a.planes * L;
    const bool max = a.mode == TN_POOL_MAX_FWD;
    T *y = static_cast<T *>(a.out);
    GRID_LOOP(e, total) {
        const int64_t p = e / L, oy = e % L / a.ow, ox = e % a.ow;
        const T *x = static_cast<const T *>(a.in) + p * a.h * a.w;
        int64_t y0, y1, x0, x1, dh = a.dh, dw = a.dw;
        if (a.adaptive) {
            y0 = tn_pool_start(oy, a.oh, a.h), y1 = tn_pool_end(oy, a.oh, a.h);
            x0 = tn_pool_start(ox, a.ow, a.w), x1 = tn_pool_end(ox, a.ow, a.w);
            dh = dw = 1;
        } else { /* the taps inside the plane */
            y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
            y1 = y0 + (a.kh - 1) * dh + 1, x1 = x0 + (a.kw - 1) * dw + 1;
            y0 = first_in(y0, dh), x0 = first_in(x0, dw);
            y1 = y1 < a.h ? y1 : a.h, x1 = x1 < a.w ? x1 : a.w;
        }
        T s = max ? static_cast<T>(-INFINITY) : static_cast<T>(0);
        int64_t mi = y0 * a.w + x0;
        for (int64_t iy = y0; iy < y1; iy += dh)
            for (int64_t ix = x0; ix < x1; ix += dw) {
                const T v = x[iy * a.w + ix];
                if (!max)
                    s += v;
                else if (v > s || v != v)
                    s = v, mi = iy * a.w + ix;
            }
        if (max) {
            a.idx[e] = mi;
        } else if (a.adaptive) {
            s = s / static_cast<T>(y1 - y0) / static_cast<T>(x1 - x0);
        } else {
            const int64_t d = tn_pool_avg_div(&a, oy, ox);
            s = d ? s / static_cast<T>(d) : static_cast<T>(0);
        }
        y[e] = s;
    }
}

/* Output (oy, ox)'s term of input element e = (p, iy, ix), or nothing. */
template <typename T>
__device__ __forceinline__ void bwd_term(const tn_pool_args &a, const T *g, const int64_t *idx,
                                         int64_t p, int64_t hit, int64_t oy, int64_t ox, T *s) {
    const int64_t o = (p * a.oh + oy) * a.ow + ox;
    if (a.mode == TN_POOL_MAX_BWD) {
        if (idx[o] == hit) *s += g[o];
    } else if (a.adaptive) {
        const int64_t kh = tn_pool_end(oy, a.oh, a.h) - tn_pool_start(oy, a.oh, a.h);
        const int64_t kw = tn_pool_end(ox, a.ow, a.w) - tn_pool_start(ox, a.ow, a.w);
        *s += g[o] / static_cast<T>(kh) / static_cast<T>(kw);
    } else {
        const int64_t d = tn_pool_avg_div(&a, oy, ox);
        if (d) *s += g[o] / static_cast<T>(d);
    }
}

template <typename T> __global__ void __launch_bounds__(256) pool_bwd(tn_pool_args a) {
    const int64_t hw = a.h * a.w, total = a.planes * hw;
    const bool max = a.mode == TN_POOL_MAX_BWD;
    const int64_t dh = max ? a.dh : 1, dw = max ? a.dw : 1;
    const T *g = static_cast<const T *>(a.in);
    T *gx = static_cast<T *>(a.out);
    GRID_LOOP(e, total) {
        const int64_t p = e / hw, iy = e % hw / a.w, ix = e % a.w, hit = e % hw;
        T s = 0;
        if (a.adaptive) { /* outputs y with start(y) <= iy < end(y), ascending */
            const int64_t ylo = iy * a.oh / a.h, yhi = ((iy + 1) * a.oh + a.h - 1) / a.h;
            const int64_t xlo = ix * a.ow / a.w, xhi = ((ix + 1) * a.ow + a.w - 1) / a.w;
            for (int64_t oy = ylo; oy < yhi && oy < a.oh; oy++)
                for (int64_t ox = xlo; ox < xhi && ox < a.ow; ox++)
                    bwd_term(a, g, a.idx, p, hit, oy, ox, &s);
        } else { /* taps from the last: the outputs in ascending order */
            for (int64_t i = a.kh - 1; i >= 0; i--) {
                int64_t oy;
                if (!tap_hit(iy, i, a.sh, a.ph, dh, a.oh, &oy)) continue;
                for (int64_t j = a.kw - 1; j >= 0; j--) {
                    int64_t ox;
                    if (tap_hit(ix, j, a.sw, a.pw, dw, a.ow, &ox))
                        bwd_term(a, g, a.idx, p, hit, oy, ox, &s);
                }
            }
        }
        gx[e] = s;
    }
}

template <typename T> tn_status launch(device_state *ds, const tn_pool_args *a) {
    const bool fwd = a->mode == TN_POOL_MAX_FWD || a->mode == TN_POOL_AVG_FWD;
    const int64_t n = a->planes * (fwd ? a->oh * a->ow : a->h * a->w);
    if (n == 0) return TN_OK;
    const unsigned grid = grid_clamp(ds, ceil_div(n, 256));
    if (fwd)
        pool_fwd<T><<<grid, 256, 0, ds->stream>>>(*a);
    else
        pool_bwd<T><<<grid, 256, 0, ds->stream>>>(*a);
    return launch_check(fwd ? "pool" : "pool_backward");
}

} // namespace

extern "C" tn_status tn__cuda_pool(int dev, const tn_pool_args *a) {
    tn_status st = check_float_args("pool", a, TN_POOL_AVG_BWD + 1);
    if (st < 0) return st;
    const bool max = a->mode == TN_POOL_MAX_FWD || a->mode == TN_POOL_MAX_BWD;
    if (!a->in || !a->out || (max && !a->idx))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA pool: NULL operand");
    return on_device_float(dev, a->dtype,
                           [&](device_state *ds, auto t) { return launch<decltype(t)>(ds, a); });
}

} // namespace tnc
