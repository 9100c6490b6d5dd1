/* engine/cuda/nonfinite.cu — anomaly mode's NaN/Inf checks, batched, without
 * a host synchronisation per op (backend.h: nonfinite_check / _poll).
 *
 * Each device has TN_NONFINITE_WORDS 64-bit words in device memory
 * (backend.cu makes them with the stream), all ones when nothing is
 * recorded. One nonfinite_check call scans up to TN_NONFINITE_MAX tensors in
 * one launch: each tensor gets a number of blocks fixed by its size; a block
 * that finds a NaN lowers its word to the tensor's key with atomicMin, an
 * Inf (and no NaN in the block's share) to key | TN_NONFINITE_INF. The
 * smallest key wins whatever the order the blocks ran in, so the result does
 * not depend on scheduling. A block whose word is already at or below its
 * key has nothing to add and returns at once: a run full of NaN stays cheap.
 * nonfinite_poll enqueues the read-back and the reset on the same stream and
 * waits for them: that wait is the synchronisation point.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

constexpr int NF_THREADS = 256;
constexpr int64_t NF_PER_BLOCK = NF_THREADS * 8; /* elements a block takes before another joins */

/* The launch's tensors, passed by value (under 2 KiB of kernel parameters). */
struct nf_batch {
    const void *p[TN_NONFINITE_MAX];
    int64_t n[TN_NONFINITE_MAX];
    unsigned long long key[TN_NONFINITE_MAX];
    int first[TN_NONFINITE_MAX + 1]; /* tensor i's blocks: [first[i], first[i + 1]) */
    unsigned char dt[TN_NONFINITE_MAX]; /* a float tn_dtype */
    unsigned char word[TN_NONFINITE_MAX];
    int count;
};

/* 0: finite; 1: NaN; 2: Inf. The halves as float32, which holds them exactly. */
template <typename T> __device__ __forceinline__ int classify(T x) {
    const compute_t<T> v = ld(x);
    return isfinite(v) ? 0 : isnan(v) ? 1 : 2;
}

/* The share of block k of nb over p[0, n): NaN wins over Inf. */
template <typename T> __device__ int scan(const T *p, int64_t n, int k, int nb) {
    int found = 0;
    for (int64_t i = static_cast<int64_t>(k) * NF_THREADS + threadIdx.x; i < n;
         i += static_cast<int64_t>(nb) * NF_THREADS) {
        int c = classify(p[i]);
        if (c == 1) return 1;
        if (c) found = 2;
    }
    return found;
}

__global__ void __launch_bounds__(NF_THREADS)
    nonfinite_kernel(nf_batch b, unsigned long long *words) {
    int t = 0; /* this block's tensor */
    while (t + 1 < b.count && static_cast<int>(blockIdx.x) >= b.first[t + 1])
        t++;
    unsigned long long *w = words + b.word[t];
    /* a smaller (earlier) key is already recorded: nothing here can lower it */
    if (*reinterpret_cast<volatile unsigned long long *>(w) <= b.key[t]) return;
    const int nb = b.first[t + 1] - b.first[t], k = static_cast<int>(blockIdx.x) - b.first[t];
    const void *p = b.p[t];
    const int64_t n = b.n[t];
    const int c = b.dt[t] == TN_F64    ? scan(static_cast<const double *>(p), n, k, nb)
                  : b.dt[t] == TN_BF16 ? scan(static_cast<const tn_bf16 *>(p), n, k, nb)
                  : b.dt[t] == TN_F16  ? scan(static_cast<const tn_f16 *>(p), n, k, nb)
                                       : scan(static_cast<const float *>(p), n, k, nb);
    if (c) atomicMin(w, c == 1 ? b.key[t] : b.key[t] | TN_NONFINITE_INF);
}

} // namespace

extern "C" tn_status tn__cuda_nonfinite_check(int dev, int count, const tn_nf_item *items) {
    if (count < 0 || count > TN_NONFINITE_MAX)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA nonfinite check: %d tensors (0 to %d)",
                         count, TN_NONFINITE_MAX);
    if (count && !items)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA nonfinite check: items is NULL");
    device_state *ds;
    tn_status st = device(dev, &ds);
    if (st < 0) return st;
    nf_batch b;
    b.count = 0;
    b.first[0] = 0;
    const int64_t cap = static_cast<int64_t>(ds->sm_count) * 8; /* blocks per tensor */
    for (int i = 0; i < count; i++) {
        const tn_nf_item *it = &items[i];
        if (it->key == 0 || (it->key & TN_NONFINITE_INF) || it->key >> 63)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "CUDA nonfinite check: item %d: key must be even, nonzero, < 2^63",
                             i);
        if (it->word < 0 || it->word >= TN_NONFINITE_WORDS)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA nonfinite check: item %d: word %d",
                             i, it->word);
        if (it->n < 0 || (it->n > 0 && !it->p))
            return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA nonfinite check: item %d: %s", i,
                             it->n < 0 ? "negative count" : "pointer is NULL");
        if (dtype_size(it->dt) == 0)
            return tn__error(TN_ERR_DTYPE, "CUDA nonfinite check: item %d: unknown dtype %d", i,
                             (int)it->dt);
        const bool is_float =
            it->dt == TN_F32 || it->dt == TN_F64 || it->dt == TN_BF16 || it->dt == TN_F16;
        if (!is_float || it->n == 0)
            continue; /* integers and bool are always finite; nothing to scan */
        int j = b.count++;
        b.p[j] = it->p;
        b.n[j] = it->n;
        b.key[j] = it->key;
        b.dt[j] = static_cast<unsigned char>(it->dt);
        b.word[j] = static_cast<unsigned char>(it->word);
        int64_t nb = ceil_div(it->n, NF_PER_BLOCK);
        nb = nb > cap ? cap : nb;
        b.first[j + 1] = b.first[j] + static_cast<int>(nb);
    }
    if (b.count == 0) return TN_OK;
    dev_guard guard(dev);
    nonfinite_kernel<<<static_cast<unsigned>(b.first[b.count]), NF_THREADS, 0, ds->stream>>>(
        b, ds->nf_words);
    return launch_check("nonfinite check");
}

extern "C" tn_status tn__cuda_nonfinite_poll(int dev, uint64_t out[TN_NONFINITE_WORDS]) {
    for (int w = 0; w < TN_NONFINITE_WORDS; w++)
        out[w] = 0;
    return on_device(dev, [&](device_state *ds) {
        unsigned long long words[TN_NONFINITE_WORDS];
        cudaError_t e = cudaMemcpyAsync(words, ds->nf_words, sizeof words,
                                        cudaMemcpyDeviceToHost, ds->stream);
        if (e == cudaSuccess) e = cudaMemsetAsync(ds->nf_words, 0xff, sizeof words, ds->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(ds->stream);
        if (e != cudaSuccess) return cuda_fail(e, "nonfinite poll");
        for (int w = 0; w < TN_NONFINITE_WORDS; w++)
            out[w] = words[w] == ~0ull ? 0 : words[w];
        return TN_OK;
    });
}

} // namespace tnc
