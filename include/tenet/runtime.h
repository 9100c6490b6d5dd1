/* tenet/runtime.h — threads and memory.
 *
 * Threads: tn_set_num_threads is process-wide (relaxed atomic), read by ops
 * at their start. tn_memory_stats may be called from any thread.
 */
#ifndef TENET_RUNTIME_H
#define TENET_RUNTIME_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* Number of OpenMP threads an op may use (>= 1); default: OpenMP's. */
void tn_set_num_threads(int n);
int tn_get_num_threads(void);

/* CPU float32/float64 matmul through CBLAS (OpenBLAS), in builds that found
 * it (CMake option TENET_BLAS): on by default, for the products where it was
 * measured faster than tenet's kernel (docs/performance.md). Process-wide;
 * the environment variable TENET_BLAS=0 turns it off at load time. Off,
 * results are bit-identical whatever the thread count; on, they may differ
 * in the last bits between thread counts. tn_blas_enabled: built with CBLAS,
 * usable, and on. */
void tn_set_blas(bool enabled);
bool tn_blas_enabled(void);

/* The CPU kernels this process runs, as PyTorch's
 * torch.backends.cpu.get_cpu_capability(): "baseline" (any x86-64, SSE2),
 * "avx2" (AVX2 + FMA) or "avx512" (AVX-512 F/BW/DQ/VL), chosen once when the
 * library loads: the best this CPU supports, or at most the level named by
 * the environment variable TENET_ISA (baseline, avx2, avx512). "native" in a
 * build made with TENET_NATIVE=ON (-march=native, one kernel set). Results
 * may differ between levels in the last bits (fused multiply-adds, the SIMD
 * width of sums), never between runs or thread counts at one level. A
 * static string; never fails. */
const char *tn_cpu_capability(void);

typedef struct tn_memory_stats_t {
    size_t bytes_live;      /* tensor storage bytes currently allocated */
    size_t bytes_peak;      /* high-water mark of bytes_live, sampled at each allocation
                             * of 64 KiB or more and at each call of tn_memory_stats */
    int64_t storages_live;  /* storages currently allocated */
    int64_t tensors_live;   /* tensor handles currently alive */
    size_t allocator_active;/* jemalloc's stats.active (0 when unavailable) */
    /* CUDA devices, summed over devices (0 without CUDA): */
    size_t cuda_bytes_live;     /* bytes of live device storages */
    size_t cuda_bytes_peak;     /* high-water mark of cuda_bytes_live */
    size_t cuda_bytes_reserved; /* held by the caching allocator (live + cached) */
} tn_memory_stats_t;

tn_status tn_memory_stats(tn_memory_stats_t *out);

/* Gives the pages of freed CPU tensor buffers back to the operating system.
 * A freed buffer of 4 MiB or more keeps its pages for the next allocation (a
 * training step reuses them instead of faulting and zeroing fresh pages), so
 * a process holds up to its peak of such buffers until it calls this, as
 * torch.cuda.empty_cache() does for PyTorch's device cache; the calling
 * thread's cache of small blocks goes back to the allocator too. Live
 * tensors are untouched. Any thread; TN_ERR_INTERNAL if jemalloc refused. */
tn_status tn_memory_release_cached(void);

/* ---- CUDA (all callable in every build; without CUDA there are no devices) ----
 * Work on a device is asynchronous: kernels are enqueued on the device's one
 * stream and run in order. Reading values on the host (tn_item, tn_copy_to,
 * tn_print, tn_to to the CPU) waits for them; tn_synchronize waits for all.
 * Every function here may be called from any thread. */
/* True when at least one CUDA device is usable. Never fails; when false,
 * tn_last_error() says why (TN_ERR_DEVICE): built without CUDA, the CUDA
 * plugin or a CUDA library it needs could not be loaded (the loader's
 * message), or no GPU. libtenet.so loads its CUDA plugin (libtenet-cuda.so,
 * beside it, or the file named by the environment variable TENET_CUDA_PLUGIN)
 * on the first call that needs CUDA (this one, or any use of a CUDA device),
 * once per process; a program that never asks loads no CUDA library. */
bool tn_cuda_is_available(void);
/* Usable CUDA devices: 0 without CUDA, its libraries, a driver or a GPU
 * (never a failure; 0 sets tn_last_error() as tn_cuda_is_available). */
int tn_cuda_device_count(void);
/* Waits for every kernel enqueued on the device (CPU: returns at once); in
 * anomaly mode it also reports the forward NaN/Inf its device checks found.
 * TN_ERR_DEVICE + message: a device this build or machine does not have
 * (bad type or index), or a CUDA failure. */
tn_status tn_synchronize(tn_device device);
/* float32 matmul on CUDA may use TF32 tensor cores (faster, ~1e-3 relative
 * error). Off by default, as PyTorch; process-wide (relaxed atomic, read when
 * a product is enqueued). */
void tn_cuda_set_allow_tf32(bool allow);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
