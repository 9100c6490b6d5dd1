/* engine/cuda/cuda_internal.h — what the CUDA backend's files share: device
 * state (one stream per device), error reporting, the device guard, the
 * caching allocator's entry points and small dtype helpers.
 *
 * CUDA C++17, host side written as C-like C++: pthread mutexes and
 * pthread_once rather than std::mutex / std::call_once, nothing throws
 * (built with -fno-exceptions). The launch stubs nvcc generates still use
 * the C++ runtime, which cmake/cuda.cmake links for C programs.
 */
#ifndef TN_CUDA_INTERNAL_H
#define TN_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "../core/backend.h"

namespace tnc {

/* Per-device state, initialised on the device's first use (device()). */
struct device_state {
    pthread_mutex_t lock; /* guards the lazy initialisation below */
    int ready;            /* 1 once stream, nf_words and sm_count are set (atomic acquire/release) */
    cudaStream_t stream;  /* every entry enqueues here, from every thread */
    int sm_count;         /* sizes grids where the result does not depend on the size */
    unsigned long long *nf_words; /* nonfinite_check's words (device memory), ~0 = none */
    cublasHandle_t blas;  /* created by the first product (gemm.cu), under blas_lock */
    pthread_mutex_t blas_lock;
};

/* The backend table (backend.cu), handed to core by register.cu or plugin.cu.
 * Whether or not a GPU is present: core asks device_count() (decided once,
 * lazily) before it uses a CUDA device. */
const tn_backend *backend_table();

/* Devices usable by this process (0: none). Decided once, thread-safely. */
int device_count();

/* The state of device `dev` in *out, initialised on first use; a negative
 * status after tn__error when dev is out of range or the init failed. */
tn_status device(int dev, device_state **out);

/* Makes `dev` the calling thread's current device for the guard's lifetime
 * and restores the previous one after: entries may be called from threads
 * that use another device themselves. */
class dev_guard {
  public:
    explicit dev_guard(int dev) : prev_(-1) {
        int cur = -1;
        if (cudaGetDevice(&cur) != cudaSuccess) {
            cudaGetLastError();
            cur = -1;
        }
        if (cur != dev) {
            prev_ = cur;
            if (cudaSetDevice(dev) != cudaSuccess) cudaGetLastError();
        }
    }
    ~dev_guard() {
        if (prev_ >= 0 && cudaSetDevice(prev_) != cudaSuccess) cudaGetLastError();
    }
    dev_guard(const dev_guard &) = delete;
    dev_guard &operator=(const dev_guard &) = delete;

  private:
    int prev_;
};

/* Reports a failed CUDA runtime call: TN_ERR_OUT_OF_MEMORY for allocation
 * failures, TN_ERR_DEVICE otherwise, message "CUDA error: <text> (<what>)".
 * Clears the thread's (non-sticky) last error so it is not reported twice. */
tn_status cuda_fail(cudaError_t e, const char *what);
tn_status cublas_fail(cublasStatus_t s, const char *what);
/* After kernel launches: the launch error, if any, as cuda_fail. */
tn_status launch_check(const char *what);

/* The head of every entry that takes an argument block with a mode: a NULL
 * block, or a mode outside [0, modes), is TN_ERR_INVALID_ARGUMENT
 * ("CUDA <what>: ..."). */
template <typename A> tn_status check_args(const char *what, const A *a, int modes) {
    if (!a) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA %s: arguments are NULL", what);
    if (a->mode < 0 || a->mode >= modes)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA %s: unknown mode %d", what, a->mode);
    return TN_OK;
}

#define TNC_TRY(call)                                                                              \
    do {                                                                                           \
        cudaError_t tnc_e_ = (call);                                                               \
        if (tnc_e_ != cudaSuccess) return ::tnc::cuda_fail(tnc_e_, #call);                         \
    } while (0)

/* Caching allocator (alloc.cu). */
void *alloc(int dev, size_t bytes);
void free_block(int dev, void *p, size_t bytes);
void mem_stats(int dev, tn_device_mem_stats *out);

/* Scratch memory for one entry (reduction partials): taken from the caching
 * allocator and given back as soon as the kernels that use it are enqueued;
 * the next user of the block is later on the same stream. 0 bytes: none. */
class scratch {
  public:
    scratch(int dev, size_t bytes)
        : dev_(dev), bytes_(bytes), p_(bytes ? alloc(dev, bytes) : nullptr) {}
    ~scratch() {
        if (p_) free_block(dev_, p_, bytes_);
    }
    void *get() const { return p_; }
    scratch(const scratch &) = delete;
    scratch &operator=(const scratch &) = delete;

  private:
    int dev_;
    size_t bytes_;
    void *p_;
};

/* ---- dtypes ---- */

/* bytes per element; 0 for an unknown dtype */
inline size_t dtype_size(tn_dtype dt) {
    /* in tn_dtype's order (include/tenet/types.h) */
    constexpr size_t sizes[] = {4, 8, 2, 4, 8, 1, 2, 2};
    static_assert(sizeof sizes / sizeof *sizes == TN_DTYPE_COUNT, "a size per dtype");
    return dt >= 0 && dt < TN_DTYPE_COUNT ? sizes[dt] : 0;
}

/* PyTorch's names, for messages. */
const char *dtype_name(tn_dtype dt);

/* check_args for the entries with float32 and float64 kernels only. */
template <typename A> tn_status check_float_args(const char *what, const A *a, int modes) {
    const tn_status st = check_args(what, a, modes);
    if (st < 0 || a->dtype == TN_F32 || a->dtype == TN_F64) return st;
    return tn__error(TN_ERR_DTYPE, "CUDA %s: not implemented for '%s'", what, dtype_name(a->dtype));
}

/* Tensor elements, as the CPU's TN_CVT (engine/core/convert.h): bool stores
 * v != 0, a float or double becomes an integer through tn_cvt_*, any other
 * conversion is a cast. */
template <typename OT> struct cvt_to {
    template <typename V> __host__ __device__ static OT f(V v) {
        if constexpr (std::is_floating_point<V>::value && std::is_same<OT, int64_t>::value)
            return tn_cvt_i64(static_cast<double>(v));
        else if constexpr (std::is_floating_point<V>::value && std::is_same<OT, int32_t>::value)
            return tn_cvt_i32(static_cast<double>(v));
        else if constexpr (std::is_floating_point<V>::value && std::is_same<OT, int16_t>::value)
            return tn_cvt_i16(static_cast<double>(v));
        else
            return static_cast<OT>(v);
    }
};
/* A double scalar (c0, c1, a fill value), as the CPU's TN_SCALAR: integers
 * through int64, wrapped to the element width. */
template <typename OT> __host__ __device__ inline OT scalar_to(double v) {
    if constexpr (std::is_same<OT, uint8_t>::value) return static_cast<uint8_t>(v != 0);
    else if constexpr (std::is_floating_point<OT>::value) return static_cast<OT>(v);
    else return static_cast<OT>(static_cast<uint64_t>(tn_scalar_to_i64(v)));
}
template <> struct cvt_to<uint8_t> {
    template <typename V> __host__ __device__ static uint8_t f(V v) {
        return static_cast<uint8_t>(v != 0);
    }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace tnc

/* Entries of the table, defined in the files named. */
extern "C" {
tn_status tn__cuda_pointwise(int dev, tn_pw_code code, tn_dtype dt, const tn_iter *it,
                             const void *ctx);                                   /* pointwise.cu */
tn_status tn__cuda_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it); /* copy.cu */
tn_status tn__cuda_fill(int dev, tn_dtype dt, const tn_iter *it, double v);      /* copy.cu */
tn_status tn__cuda_reduce(int dev, const tn_red_args *a);                        /* reduce.cu */
tn_status tn__cuda_gemm(int dev, tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b);
tn_status tn__cuda_softmax(int dev, const tn_sm_args *a); /* softmax.cu */
tn_status tn__cuda_nonfinite_check(int dev, int count, const tn_nf_item *items); /* nonfinite.cu */
tn_status tn__cuda_nonfinite_poll(int dev, uint64_t out[TN_NONFINITE_WORDS]);
tn_status tn__cuda_cross_entropy(int dev, const tn_ce_args *a); /* cross_entropy.cu */
tn_status tn__cuda_index(int dev, const tn_index_args *a); /* index.cu */
tn_status tn__cuda_layer_norm(int dev, const tn_ln_args *a); /* layer_norm.cu */
tn_status tn__cuda_channel_norm(int dev, const tn_cn_args *a); /* channel_norm.cu */
tn_status tn__cuda_conv(int dev, const tn_conv_args *a); /* conv.cu */
tn_status tn__cuda_pool(int dev, const tn_pool_args *a); /* pool.cu */
tn_status tn__cuda_attention(int dev, const tn_attn_args *a); /* attention.cu */
tn_status tn__cuda_grad_stats(int dev, tn_dtype dt, int count, const void *const *p,
                              const int64_t *n, double *out); /* grad_stats.cu */
tn_status tn__cuda_readback_begin(int dev, const void *src, size_t bytes,
                                  void **ticket);                  /* readback.cu */
tn_status tn__cuda_readback_end(void *ticket, void *dst);          /* readback.cu */
}

#endif
