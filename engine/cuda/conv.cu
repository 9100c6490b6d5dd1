/* engine/cuda/conv.cu — convolution's im2col and col2im (tn_conv_args), float32 and float64;
 * the products around them are the gemm entry's (cuBLAS).
 *
 * The arithmetic is the CPU's (engine/cpu/conv_kernels.c):
 *  - im2col: a thread per column element (image, column row, output position), grid-strided;
 *  - col2im: a thread per image element gathers the column entries that read it, kernel taps
 *    in order (i, j), so the sum is the CPU's, in the CPU's order: the same bits, no atomics.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

/* Which output position reads image row/col `p` through tap `k`: p = o*s - pad + k*d. */
__device__ __forceinline__ bool tap_hit(int64_t p, int64_t k, int64_t s, int64_t pad, int64_t d,
                                        int64_t n_out, int64_t *o) {
    const int64_t t = p + pad - k * d;
    if (t < 0 || t % s) return false;
    *o = t / s;
    return *o < n_out;
}

template <typename T> __global__ void __launch_bounds__(256) im2col(tn_conv_args a) {
    const int64_t L = a.oh * a.ow, kk = a.kh * a.kw, per = a.c * kk * L, total = a.nb * per;
    const T *im = static_cast<const T *>(a.im);
    T *col = static_cast<T *>(a.col);
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t b = e / per, r = e % per / L, pos = e % L;
        const int64_t ci = r / kk, i = r % kk / a.kw, j = r % a.kw;
        const int64_t iy = pos / a.ow * a.sh - a.ph + i * a.dh;
        const int64_t ix = pos % a.ow * a.sw - a.pw + j * a.dw;
        const bool in = iy >= 0 && iy < a.h && ix >= 0 && ix < a.w;
        col[b * a.cols + r * L + pos] =
            in ? im[b * a.ims + (ci * a.h + iy) * a.w + ix] : static_cast<T>(0);
    }
}

template <typename T> __global__ void __launch_bounds__(256) col2im(tn_conv_args a) {
    const int64_t L = a.oh * a.ow, kk = a.kh * a.kw, per = a.c * a.h * a.w, total = a.nb * per;
    const T *col = static_cast<const T *>(a.col);
    T *im = static_cast<T *>(a.im);
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t b = e / per, ci = e % per / (a.h * a.w), y = e % (a.h * a.w) / a.w,
                      x = e % a.w;
        T s = 0; /* the CPU adds in the image's dtype too, taps in order */
        for (int64_t i = 0; i < a.kh; i++) {
            int64_t oy;
            if (!tap_hit(y, i, a.sh, a.ph, a.dh, a.oh, &oy)) continue;
            for (int64_t j = 0; j < a.kw; j++) {
                int64_t ox;
                if (!tap_hit(x, j, a.sw, a.pw, a.dw, a.ow, &ox)) continue;
                s += col[b * a.cols + (ci * kk + i * a.kw + j) * L + oy * a.ow + ox];
            }
        }
        im[b * a.ims + (ci * a.h + y) * a.w + x] = s;
    }
}

template <typename T> tn_status launch(device_state *ds, const tn_conv_args *a) {
    const bool fwd = a->mode == TN_CONV_IM2COL;
    const int64_t n =
        fwd ? a->nb * a->c * a->kh * a->kw * a->oh * a->ow : a->nb * a->c * a->h * a->w;
    if (n == 0) return TN_OK;
    const unsigned grid = grid_clamp(ds, ceil_div(n, 256));
    if (fwd)
        im2col<T><<<grid, 256, 0, ds->stream>>>(*a);
    else
        col2im<T><<<grid, 256, 0, ds->stream>>>(*a);
    return launch_check(fwd ? "im2col" : "col2im");
}

} // namespace

extern "C" tn_status tn__cuda_conv(int dev, const tn_conv_args *a) {
    tn_status st = check_float_args("conv", a, TN_CONV_COL2IM + 1);
    if (st < 0) return st;
    if (!a->im || !a->col) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA conv: NULL operand");
    return on_device_float(dev, a->dtype,
                           [&](device_state *ds, auto t) { return launch<decltype(t)>(ds, a); });
}

} // namespace tnc
