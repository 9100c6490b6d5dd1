/* engine/cuda/nonfinite.cu — anomaly mode's NaN/Inf check without a host
 * synchronisation per op.
 *
 * Each device has one 32-bit flag word in device memory (backend.cu makes
 * it with the stream). nonfinite_check enqueues a kernel that, on finding a
 * NaN or Inf, swaps the tag in when the word is still 0: the first tag in
 * stream order wins (a later check only runs after the earlier one ended).
 * nonfinite_poll enqueues the read-back and the reset on the same stream and
 * waits for them: that wait is the synchronisation point.
 */
#include "cuda_internal.h"

namespace tnc {

namespace {

constexpr int NF_THREADS = 256;

template <typename T>
__global__ void __launch_bounds__(NF_THREADS)
    nonfinite_kernel(const T *p, int64_t n, uint32_t *flag, uint32_t tag) {
    /* a tag is already recorded (by an earlier check, or this one): nothing
     * this block finds can change it */
    if (*reinterpret_cast<volatile uint32_t *>(flag) != 0) return;
    const int64_t G = static_cast<int64_t>(gridDim.x) * NF_THREADS;
    bool bad = false, nan = false;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * NF_THREADS + threadIdx.x; i < n && !bad;
         i += G) {
        bad = !isfinite(p[i]);
        nan = isnan(p[i]);
    }
    /* the first record wins; NaN is tag, Inf tag | TN_NONFINITE_INF (backend.h) */
    if (bad) atomicCAS(flag, 0u, nan ? tag : tag | TN_NONFINITE_INF);
}

} // namespace

extern "C" tn_status tn__cuda_nonfinite_check(int dev, tn_dtype dt, const void *p, int64_t n,
                                              uint32_t tag) {
    if (tag == 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA nonfinite check: tag 0 is reserved");
    if (n < 0) return tn__error(TN_ERR_SHAPE, "CUDA nonfinite check: negative count");
    if (dt != TN_F32 && dt != TN_F64) {
        if (dtype_size(dt) == 0)
            return tn__error(TN_ERR_DTYPE, "CUDA nonfinite check: unknown dtype %d", (int)dt);
        return TN_OK; /* integers and bool are always finite */
    }
    if (n == 0) return TN_OK;
    if (!p) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA nonfinite check: pointer is NULL");
    device_state *ds;
    tn_status st = device(dev, &ds);
    if (st < 0) return st;
    dev_guard guard(dev);
    int64_t blocks = ceil_div(n, NF_THREADS * 4);
    const int64_t max_blocks = static_cast<int64_t>(ds->sm_count) * 8 * 4;
    if (blocks > max_blocks) blocks = max_blocks;
    if (dt == TN_F32)
        nonfinite_kernel<float><<<static_cast<unsigned>(blocks), NF_THREADS, 0, ds->stream>>>(
            static_cast<const float *>(p), n, ds->flag, tag);
    else
        nonfinite_kernel<double><<<static_cast<unsigned>(blocks), NF_THREADS, 0, ds->stream>>>(
            static_cast<const double *>(p), n, ds->flag, tag);
    return launch_check("nonfinite check");
}

/* The poll has no status of its own: a CUDA failure is reported through
 * tn__error and reads as "nothing recorded"; the same (sticky) error fails
 * the next synchronize or copy as well. */
extern "C" uint32_t tn__cuda_nonfinite_poll(int dev) {
    device_state *ds;
    if (device(dev, &ds) < 0) return 0;
    dev_guard guard(dev);
    uint32_t tag = 0;
    cudaError_t e = cudaMemcpyAsync(&tag, ds->flag, sizeof tag, cudaMemcpyDeviceToHost, ds->stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(ds->flag, 0, sizeof(uint32_t), ds->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ds->stream);
    if (e != cudaSuccess) {
        cuda_fail(e, "nonfinite poll");
        return 0;
    }
    return tag;
}

} // namespace tnc
