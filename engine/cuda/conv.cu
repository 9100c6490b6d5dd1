/* engine/cuda/conv.cu — convolution's im2col and col2im (tn_conv_args), float32 and float64;
 * the products around them are the gemm entry's (cuBLAS).
 *
 * The arithmetic is the CPU's (engine/cpu/conv_kernels.c):
 *  - im2col: a block per column row (image, channel, tap), its threads over the row;
 *  - col2im: a thread per image element gathers the column entries that read it, kernel taps
 *    in order (i, j), so the sum is the CPU's, in the CPU's order: the same bits, no atomics.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

/* Index arithmetic in I: int32_t when every index of the call fits (fits32), int64_t
 * otherwise. A 64-bit division costs the GPU several times a 32-bit one, and these kernels
 * divide for every element. */

/* Which output position reads image row/col `p` through tap `k`: p = o*s - pad + k*d. */
template <typename I>
__device__ __forceinline__ bool tap_hit(I p, I k, I s, I pad, I d, I n_out, I *o) {
    const I t = p + pad - k * d;
    if (t < 0 || t % s) return false;
    *o = t / s;
    return *o < n_out;
}

/* A block per column row (image, channel, tap), grid-strided over the rows; its threads walk
 * the row's output positions, so the row's own divisions are once per thread and row, and
 * each element costs one division (its output row). Writes coalesce along the row, reads
 * along the image row (stride sw). */
template <typename T, typename I> __global__ void __launch_bounds__(256) im2col(tn_conv_args a) {
    const I L = static_cast<I>(a.oh * a.ow), kk = static_cast<I>(a.kh * a.kw);
    const I rows = static_cast<I>(a.nb * a.c) * kk, per_img = static_cast<I>(a.c) * kk;
    const I ow = static_cast<I>(a.ow), kw = static_cast<I>(a.kw);
    const I h = static_cast<I>(a.h), w = static_cast<I>(a.w);
    const T *im = static_cast<const T *>(a.im);
    T *col = static_cast<T *>(a.col);
    for (I row = static_cast<I>(blockIdx.x); row < rows; row += static_cast<I>(gridDim.x)) {
        const I b = row / per_img, r = row - b * per_img;
        const I ci = r / kk, i = (r - ci * kk) / kw, j = r % kw;
        const I y0 = i * static_cast<I>(a.dh) - static_cast<I>(a.ph);
        const I x0 = j * static_cast<I>(a.dw) - static_cast<I>(a.pw);
        const T *src = im + b * a.ims + static_cast<int64_t>(ci) * a.h * a.w;
        T *dst = col + b * a.cols + static_cast<int64_t>(r) * L;
        for (I pos = static_cast<I>(threadIdx.x); pos < L; pos += static_cast<I>(blockDim.x)) {
            const I oy = pos / ow, ox = pos - oy * ow;
            const I iy = oy * static_cast<I>(a.sh) + y0, ix = ox * static_cast<I>(a.sw) + x0;
            const bool in = iy >= 0 && iy < h && ix >= 0 && ix < w;
            dst[pos] = in ? src[static_cast<int64_t>(iy) * w + ix] : static_cast<T>(0);
        }
    }
}

template <typename T, typename I> __global__ void __launch_bounds__(256) col2im(tn_conv_args a) {
    const I L = static_cast<I>(a.oh * a.ow), kk = static_cast<I>(a.kh * a.kw);
    const I h = static_cast<I>(a.h), w = static_cast<I>(a.w), hw = h * w;
    const I per = static_cast<I>(a.c) * hw, total = static_cast<I>(a.nb) * per;
    const I kh = static_cast<I>(a.kh), kw = static_cast<I>(a.kw), ow = static_cast<I>(a.ow);
    const I sh = static_cast<I>(a.sh), sw = static_cast<I>(a.sw), ph = static_cast<I>(a.ph),
            pw = static_cast<I>(a.pw), dh = static_cast<I>(a.dh), dw = static_cast<I>(a.dw);
    const I oh = static_cast<I>(a.oh);
    const T *col = static_cast<const T *>(a.col);
    T *im = static_cast<T *>(a.im);
    for (I e = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); e < total;
         e += static_cast<I>(gridDim.x * blockDim.x)) {
        const I b = e / per, ci = (e - b * per) / hw, yx = e % hw, y = yx / w, x = yx - y * w;
        const T *src = col + b * a.cols + static_cast<int64_t>(ci) * kk * L;
        T s = 0; /* the CPU adds in the image's dtype too, taps in order */
        for (I i = 0; i < kh; i++) {
            I oy;
            if (!tap_hit<I>(y, i, sh, ph, dh, oh, &oy)) continue;
            for (I j = 0; j < kw; j++) {
                I ox;
                if (!tap_hit<I>(x, j, sw, pw, dw, ow, &ox)) continue;
                s += src[static_cast<int64_t>(i * kw + j) * L + oy * ow + ox];
            }
        }
        im[b * a.ims + static_cast<int64_t>(ci) * hw + yx] = s;
    }
}

/* Every index the kernels form fits I = int32_t, with room for a grid-stride step past the
 * end (at most sm_count * 32 * 256 threads, far below 2^30). */
bool fits32(const tn_conv_args *a) {
    const int64_t lim = INT32_MAX / 2;
    return a->nb * a->c * a->kh * a->kw <= lim && a->nb * a->c * a->h * a->w <= lim &&
           a->oh * a->ow <= lim && a->c * a->kh * a->kw * a->oh * a->ow <= lim &&
           a->h + a->ph + (a->kh - 1) * a->dh <= lim && a->w + a->pw + (a->kw - 1) * a->dw <= lim &&
           a->oh * a->sh + a->h <= lim && a->ow * a->sw + a->w <= lim;
}

template <typename T, typename I> void run(device_state *ds, const tn_conv_args *a) {
    if (a->mode == TN_CONV_IM2COL) {
        const unsigned grid = grid_clamp(ds, a->nb * a->c * a->kh * a->kw);
        im2col<T, I><<<grid, 256, 0, ds->stream>>>(*a);
    } else {
        const unsigned grid = grid_clamp(ds, ceil_div(a->nb * a->c * a->h * a->w, 256));
        col2im<T, I><<<grid, 256, 0, ds->stream>>>(*a);
    }
}

template <typename T> tn_status launch(device_state *ds, const tn_conv_args *a) {
    const bool fwd = a->mode == TN_CONV_IM2COL;
    const int64_t n =
        fwd ? a->nb * a->c * a->kh * a->kw * a->oh * a->ow : a->nb * a->c * a->h * a->w;
    if (n == 0) return TN_OK;
    if (fits32(a)) run<T, int32_t>(ds, a);
    else run<T, int64_t>(ds, a);
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
