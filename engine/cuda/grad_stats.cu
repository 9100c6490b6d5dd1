/* engine/cuda/grad_stats.cu — the measure of device gradients for the
 * gradient monitor and clip_grad_norm_ (backend.h, grad_stats), without a
 * host synchronisation each.
 *
 * One call measures up to TN_GRAD_STATS_MAX contiguous tensors of one dtype
 * in two launches: the first gives each tensor a number of blocks fixed by
 * its element count (one per GS_PER_BLOCK elements, at most GS_BLOCKS_PER:
 * enough to keep every SM of a large GPU streaming, as a gradient of 4M
 * elements needs) and each block writes a partial (sum of squares in float64,
 * largest |value|) to scratch memory; the second folds each tensor's partials
 * into `out`, one block per tensor, each thread a fixed stride of partials in
 * order, then the block's fixed tree. Which thread reads which elements and
 * the order of every fold depend on the counts alone, so the same tensors
 * give the same bits on every run. A NaN wins the maximum (the CPU's rule);
 * the sum of squares then is NaN too.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

constexpr int GS_THREADS = 256;
constexpr int GS_BLOCKS_PER = 1024; /* per tensor */
constexpr int64_t GS_PER_BLOCK = GS_THREADS * 16; /* elements a block takes before another joins */

/* The launch's tensors, passed by value (under 1 KiB of kernel parameters). */
struct gs_batch {
    const void *p[TN_GRAD_STATS_MAX];
    int64_t n[TN_GRAD_STATS_MAX];
    int first[TN_GRAD_STATS_MAX + 1]; /* tensor i's blocks: [first[i], first[i + 1]) */
    int count;
};

struct gs_part {
    double sq, mx;
};

__device__ __forceinline__ double max_nan(double a, double b) { return a != a || a > b ? a : b; }

__device__ __forceinline__ gs_part combine(gs_part a, gs_part b) {
    return {a.sq + b.sq, max_nan(a.mx, b.mx)};
}

/* warp_fold's shuffle of a part */
__device__ __forceinline__ gs_part shfl_down(gs_part v, int off) {
    return {tnc::shfl_down(v.sq, off), tnc::shfl_down(v.mx, off)};
}

/* The block's parts folded in a fixed order (warps by shuffles, then thread 0 over the warps);
 * the result is thread 0's. Every thread of the block calls it. */
__device__ gs_part block_fold(gs_part acc) {
    acc = warp_fold(acc, [](gs_part a, gs_part b) { return combine(a, b); });
    __shared__ gs_part warp[GS_THREADS / 32];
    if (threadIdx.x % 32 == 0) warp[threadIdx.x / 32] = acc;
    __syncthreads();
    gs_part s = warp[0];
    if (threadIdx.x == 0)
        for (int w = 1; w < GS_THREADS / 32; w++)
            s = combine(s, warp[w]);
    return s;
}

template <typename T>
__global__ void __launch_bounds__(GS_THREADS) gs_partial_kernel(gs_batch b, gs_part *parts) {
    int t = 0; /* this block's tensor */
    while (t + 1 < b.count && static_cast<int>(blockIdx.x) >= b.first[t + 1])
        t++;
    const int nb = b.first[t + 1] - b.first[t], k = static_cast<int>(blockIdx.x) - b.first[t];
    const T *p = static_cast<const T *>(b.p[t]);
    gs_part acc = {0, 0};
    for (int64_t i = static_cast<int64_t>(k) * GS_THREADS + threadIdx.x; i < b.n[t];
         i += static_cast<int64_t>(nb) * GS_THREADS) {
        double v = static_cast<double>(ld(p[i]));
        acc.sq += v * v;
        acc.mx = max_nan(v < 0 ? -v : v, acc.mx);
    }
    acc = block_fold(acc);
    if (threadIdx.x == 0) parts[blockIdx.x] = acc;
}

/* Block t folds tensor t's partials: thread j those at j, j + GS_THREADS, ... in order, then
 * the block's tree. */
__global__ void __launch_bounds__(GS_THREADS)
    gs_final_kernel(gs_batch b, const gs_part *parts, double *out) {
    const int t = static_cast<int>(blockIdx.x);
    gs_part s = {0, 0};
    for (int k = b.first[t] + static_cast<int>(threadIdx.x); k < b.first[t + 1]; k += GS_THREADS)
        s = combine(s, parts[k]);
    s = block_fold(s);
    if (threadIdx.x == 0) {
        out[2 * t] = s.sq;
        out[2 * t + 1] = s.mx;
    }
}

/* The two launches for element type T on the device made current. */
template <typename T>
tn_status stats(int dev, device_state *ds, const gs_batch &b, int count, double *out) {
    const int blocks = b.first[count];
    scratch parts(dev, static_cast<size_t>(blocks) * sizeof(gs_part));
    if (!parts.get()) return TN_ERR_OUT_OF_MEMORY; /* alloc set the message */
    gs_part *pp = static_cast<gs_part *>(parts.get());
    gs_partial_kernel<T><<<static_cast<unsigned>(blocks), GS_THREADS, 0, ds->stream>>>(b, pp);
    gs_final_kernel<<<static_cast<unsigned>(count), GS_THREADS, 0, ds->stream>>>(b, pp, out);
    return launch_check("grad_stats");
}

} // namespace

extern "C" tn_status tn__cuda_grad_stats(int dev, tn_dtype dt, int count, const void *const *p,
                                         const int64_t *n, double *out) {
    if (dt != TN_F32 && dt != TN_F64 && dt != TN_BF16 && dt != TN_F16)
        return tn__error(TN_ERR_DTYPE, "CUDA grad_stats: float dtypes only (got dtype %d)",
                         (int)dt);
    if (count < 0 || count > TN_GRAD_STATS_MAX)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA grad_stats: %d tensors (1 to %d)", count,
                         TN_GRAD_STATS_MAX);
    if (count == 0) return TN_OK;
    if (!out) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA grad_stats: out is NULL");
    gs_batch b;
    b.count = count;
    b.first[0] = 0;
    for (int i = 0; i < count; i++) {
        if (n[i] < 0 || (n[i] > 0 && !p[i]))
            return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA grad_stats: tensor %d: %s", i,
                             n[i] < 0 ? "negative count" : "pointer is NULL");
        b.p[i] = p[i];
        b.n[i] = n[i];
        int64_t nb = ceil_div(n[i], GS_PER_BLOCK);
        nb = nb < 1 ? 1 : nb > GS_BLOCKS_PER ? GS_BLOCKS_PER : nb;
        b.first[i + 1] = b.first[i] + static_cast<int>(nb);
    }
    return on_device(dev, [&](device_state *ds) {
        return dispatch<DT_FLOAT>(dt, "grad_stats", [&](auto tag) {
            return stats<typename decltype(tag)::type>(dev, ds, b, count, out);
        });
    });
}

} // namespace tnc
