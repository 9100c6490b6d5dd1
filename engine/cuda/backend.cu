/* engine/cuda/backend.cu — the CUDA backend table: device discovery, the
 * per-device stream, errors, copies and synchronisation. Core gets the table
 * from register.cu (static library) or plugin.cu (libtenet-cuda.so).
 *
 * One stream per device, created non-blocking (it never waits for the legacy
 * default stream), shared by every thread: stream order is the only ordering
 * the engine needs (see backend.h), and it lets the caching allocator reuse a
 * freed block at once.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

namespace tnc {

namespace {

pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
int g_count = 0;
device_state *g_devs = nullptr;

/* Decides once whether CUDA is usable: a missing driver, a driver too old
 * for this runtime or no GPU all mean "no device", never an error. */
void probe() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError();
        return;
    }
    device_state *d = static_cast<device_state *>(calloc(static_cast<size_t>(n), sizeof *d));
    if (!d) return;
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&d[i].lock, nullptr);
        pthread_mutex_init(&d[i].blas_lock, nullptr);
    }
    g_devs = d;
    g_count = n;
}

/* Creates the stream and the non-finite words of a device; called once,
 * under the device's lock, with the device current. */
tn_status init_device(device_state *s, int dev) {
    TNC_TRY(cudaDeviceGetAttribute(&s->sm_count, cudaDevAttrMultiProcessorCount, dev));
    cudaStream_t st = nullptr;
    TNC_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    void *flag = nullptr;
    const size_t bytes = TN_NONFINITE_WORDS * sizeof(unsigned long long);
    cudaError_t e = cudaMalloc(&flag, bytes);
    if (e == cudaSuccess) e = cudaMemsetAsync(flag, 0xff, bytes, st); /* nothing recorded */
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) {
        tn_status r = cuda_fail(e, "creating the device's state");
        if (flag) cudaFree(flag);
        cudaStreamDestroy(st);
        return r;
    }
    s->stream = st;
    s->nf_words = static_cast<unsigned long long *>(flag);
    return TN_OK;
}

} // namespace

int device_count() {
    pthread_once(&g_probe_once, probe);
    return g_count;
}

tn_status device(int dev, device_state **out) {
    *out = nullptr;
    int n = device_count();
    if (dev < 0 || dev >= n)
        return tn__error(TN_ERR_DEVICE, "CUDA error: invalid device ordinal (cuda:%d of %d)", dev,
                         n);
    device_state *s = &g_devs[dev];
    if (__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE)) {
        *out = s;
        return TN_OK;
    }
    pthread_mutex_lock(&s->lock);
    tn_status st = TN_OK;
    if (!s->ready) {
        dev_guard g(dev);
        st = init_device(s, dev);
        if (st == TN_OK) __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->lock);
    if (st == TN_OK) *out = s;
    return st;
}

tn_status cuda_fail(cudaError_t e, const char *what) {
    cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    tn_status st = e == cudaErrorMemoryAllocation ? TN_ERR_OUT_OF_MEMORY : TN_ERR_DEVICE;
    return tn__error(st, "CUDA error: %s (%s)", cudaGetErrorString(e), what);
}

tn_status cublas_fail(cublasStatus_t s, const char *what) {
    tn_status st = s == CUBLAS_STATUS_ALLOC_FAILED ? TN_ERR_OUT_OF_MEMORY : TN_ERR_DEVICE;
    return tn__error(st, "CUDA error: %s (%s)", cublasGetStatusString(s), what);
}

tn_status launch_check(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TN_OK : cuda_fail(e, what);
}

const char *dtype_name(tn_dtype dt) {
    /* in tn_dtype's order (include/tenet/types.h) */
    static const char *const names[] = {"Float", "Double", "Short",    "Int",
                                        "Long",  "Bool",   "BFloat16", "Half"};
    static_assert(sizeof names / sizeof *names == TN_DTYPE_COUNT, "a name per dtype");
    return dt >= 0 && dt < TN_DTYPE_COUNT ? names[dt] : "unknown dtype";
}

namespace {

int be_device_count(void) { return device_count(); }

void *be_alloc(int dev, size_t bytes) { return alloc(dev, bytes); }

void be_free(int dev, void *p, size_t bytes) { free_block(dev, p, bytes); }

void be_mem_stats(int dev, tn_device_mem_stats *out) { mem_stats(dev, out); }

/* H2D and D2H go through the device's stream, so they are ordered after the
 * work that produced (or will read) the device buffer, and wait for the copy
 * itself: the host buffer is free to reuse / read on return. */
tn_status be_memcpy(int dev, void *dst, const void *src, size_t bytes, tn_copy_kind kind) {
    if (bytes == 0) return TN_OK;
    if (!dst || !src) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA memcpy: NULL pointer");
    cudaMemcpyKind k;
    switch (kind) {
    case TN_COPY_H2D:
        k = cudaMemcpyHostToDevice;
        break;
    case TN_COPY_D2H:
        k = cudaMemcpyDeviceToHost;
        break;
    case TN_COPY_D2D:
        k = cudaMemcpyDeviceToDevice;
        break;
    default:
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA memcpy: unknown copy kind %d", (int)kind);
    }
    device_state *s;
    tn_status st = device(dev, &s);
    if (st < 0) return st;
    dev_guard g(dev);
    TNC_TRY(cudaMemcpyAsync(dst, src, bytes, k, s->stream));
    if (kind != TN_COPY_D2D) TNC_TRY(cudaStreamSynchronize(s->stream));
    return TN_OK;
}

tn_status be_synchronize(int dev) {
    device_state *s;
    tn_status st = device(dev, &s);
    if (st < 0) return st;
    dev_guard g(dev);
    TNC_TRY(cudaStreamSynchronize(s->stream));
    return TN_OK;
}

/* Positional: C++17 has no designated initialisers. The order is backend.h's. */
const tn_backend g_backend = {
    "cuda",
    be_device_count,
    be_alloc,
    be_free,
    be_mem_stats,
    be_memcpy,
    be_synchronize,
    tn__cuda_pointwise,
    tn__cuda_copy,
    tn__cuda_fill,
    tn__cuda_reduce,
    tn__cuda_gemm,
    (1u << TN_BF16) | (1u << TN_F16), /* gemm_halves: both on tensor cores */
    tn__cuda_softmax,
    tn__cuda_nonfinite_check,
    tn__cuda_nonfinite_poll,
    tn__cuda_cross_entropy,
    tn__cuda_index,
    tn__cuda_layer_norm,
    tn__cuda_conv,
    tn__cuda_pool,
    tn__cuda_attention,
    tn__cuda_grad_stats,
    tn__cuda_readback_begin,
    tn__cuda_readback_end,
    tn__cuda_channel_norm,
    0u, /* attention_halves: none, core's float32 copies */
};

} // namespace

const tn_backend *backend_table() { return &g_backend; }

} // namespace tnc
