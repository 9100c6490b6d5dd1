// Host emulation of the CUDA subset used by engine/cuda (test harness only).
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmath>
#include <type_traits>
#include <functional>
using std::isfinite;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
struct uint3e { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
namespace emu {
extern uint3e g_tid, g_bid;
extern dim3 g_grid, g_block;
void barrier(int scope); // 0 warp, 1 block
extern unsigned char g_slots[32][32][16];
struct cfgs { dim3 grid, block; size_t sh; void *st; };
inline cfgs cfg(dim3 g, dim3 b, size_t s = 0, void *st = nullptr) { return {g, b, s, st}; }
void run_grid(const cfgs &c, std::function<void()> body);
void set_launch_error(int e);
template <class... P, class... A> void launch(const cfgs &c, void (*k)(P...), A... a) {
    std::function<void()> body = [=]() { k(a...); };
    run_grid(c, body);
}
}
#define threadIdx (emu::g_tid)
#define blockIdx (emu::g_bid)
#define gridDim (emu::g_grid)
#define blockDim (emu::g_block)
inline void __syncthreads() { emu::barrier(1); }
// a block barrier that counts the threads passing p (1-D blocks; the threads of a block run
// as coroutines, so the count needs no atomics); the next call's first barrier keeps acc until
// every thread has read it
inline int __syncthreads_count(int p) {
    static int acc;
    emu::barrier(1);
    if (threadIdx.x == 0) acc = 0;
    emu::barrier(1);
    if (p) acc++;
    emu::barrier(1);
    return acc;
}
inline int __syncthreads_or(int p) { return __syncthreads_count(p) != 0; }
template <typename T> T __shfl_down_sync(unsigned, T v, int off) {
    static_assert(sizeof(T) <= 16, "");
    unsigned lane = threadIdx.x % 32;
    memcpy(emu::g_slots[threadIdx.x / 32][lane], &v, sizeof v);
    emu::barrier(0);
    T r = v;
    if (lane + off < 32) memcpy(&r, emu::g_slots[threadIdx.x / 32][lane + off], sizeof r);
    emu::barrier(0);
    return r;
}
template <typename T> T __shfl_sync(unsigned, T v, int src) {
    unsigned lane = threadIdx.x % 32;
    memcpy(emu::g_slots[threadIdx.x / 32][lane], &v, sizeof v);
    emu::barrier(0);
    T r;
    memcpy(&r, emu::g_slots[threadIdx.x / 32][src], sizeof r);
    emu::barrier(0);
    return r;
}
inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned v) { unsigned o = *p; if (o == cmp) *p = v; return o; }
inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) { unsigned long long o = *p; if (v < o) *p = v; return o; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }

// ---- runtime ----
typedef enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9, cudaErrorInvalidDevice = 101 } cudaError_t;
typedef struct emu_stream *cudaStream_t;
typedef enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 } cudaMemcpyKind;
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
#define cudaStreamNonBlocking 1
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaGetDevice(int *);
cudaError_t cudaSetDevice(int);
cudaError_t cudaDeviceGetAttribute(int *, cudaDeviceAttr, int);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *, unsigned);
cudaError_t cudaStreamDestroy(cudaStream_t);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMemsetAsync(void *, int, size_t, cudaStream_t);
cudaError_t cudaMemset2DAsync(void *, size_t, int, size_t, size_t, cudaStream_t);
cudaError_t cudaMemcpyAsync(void *, const void *, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaGetLastError();
cudaError_t cudaMemGetInfo(size_t *, size_t *);
typedef struct emu_event *cudaEvent_t;
#define cudaEventDisableTiming 2
#define cudaHostAllocPortable 1
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *, unsigned);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaHostAlloc(void **, size_t, unsigned);
cudaError_t cudaFreeHost(void *);
const char *cudaGetErrorString(cudaError_t);
// ---- cublas ----
typedef struct emu_blas *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_ALLOC_FAILED = 3, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 } cublasMath_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77, CUBLAS_COMPUTE_64F = 70 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasCreate(cublasHandle_t *);
cublasStatus_t cublasDestroy(cublasHandle_t);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
const char *cublasGetStatusString(cublasStatus_t);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long, const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);
void emu_check_ptr(const void *p, const char *what);
