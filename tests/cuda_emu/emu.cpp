#include "emu.h"
#include "../../engine/core/half.h"
#include <map>
#include <mutex>
static std::recursive_mutex g_emu_lock; /* host threads launch concurrently: one at a time */
#include <sys/mman.h>
#include <vector>

namespace emu {
uint3e g_tid, g_bid;
dim3 g_grid, g_block;
unsigned char g_slots[32][32][16];
static thread_local int g_last_error = 0;
void set_launch_error(int e) { g_last_error = e; }

extern "C" void emu_switch(void **save_sp, void *load_sp);
asm(".text\n.globl emu_switch\n.type emu_switch,@function\nemu_switch:\n"
    " pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n pushq %r14\n pushq %r15\n"
    " movq %rsp, (%rdi)\n movq %rsi, %rsp\n"
    " popq %r15\n popq %r14\n popq %r13\n popq %r12\n popq %rbx\n popq %rbp\n ret\n");
struct thr {
    void *sp;
    bool done, waiting;
    int scope;
    unsigned long gen;
};
static std::vector<thr> T;
static std::vector<char *> &stacks = *new std::vector<char *>; // never destroyed: a root for LeakSanitizer at exit
static const size_t STACK = 256 * 1024;
static void *sched_sp;
static int cur;
static unsigned long warp_gen[32], block_gen;
static int warp_arrived[32], block_arrived, live_warp[32], live_block;
static std::function<void()> *g_body;
unsigned long long g_launches = 0, g_threads = 0;

static void set_tid(int i) { g_tid = {(unsigned)i, 0, 0}; }

static void entry() {
    (*g_body)();
    int w = cur / 32;
    T[cur].done = true;
    live_warp[w]--;
    live_block--;
    if (live_warp[w] > 0 && warp_arrived[w] == live_warp[w]) { warp_arrived[w] = 0; warp_gen[w]++; }
    if (live_block > 0 && block_arrived == live_block) { block_arrived = 0; block_gen++; }
    emu_switch(&T[cur].sp, sched_sp);
    abort(); /* never resumed */
}

void barrier(int scope) {
    int w = cur / 32;
    if (scope == 0) {
        unsigned long g = warp_gen[w];
        if (++warp_arrived[w] == live_warp[w]) { warp_arrived[w] = 0; warp_gen[w]++; return; }
        T[cur].waiting = true, T[cur].scope = 0, T[cur].gen = g;
    } else {
        unsigned long g = block_gen;
        if (++block_arrived == live_block) { block_arrived = 0; block_gen++; return; }
        T[cur].waiting = true, T[cur].scope = 1, T[cur].gen = g;
    }
    emu_switch(&T[cur].sp, sched_sp);
}

unsigned long g_stream_ops; // kernels, copies and waits on the stream (emu_stream_ops)
void run_grid(const cfgs &c, std::function<void()> body) {
    std::lock_guard<std::recursive_mutex> lk(g_emu_lock);
    g_stream_ops++;
    if (c.grid.x < 1 || c.grid.y != 1 || c.grid.z != 1 || c.block.x < 1 || c.block.x > 1024 ||
        c.block.y != 1 || c.block.z != 1 || c.block.x % 32 != 0) {
        fprintf(stderr, "EMU: bad launch config grid %u block %u\n", c.grid.x, c.block.x);
        g_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    g_launches++;
    g_body = &body;
    int nt = (int)c.block.x;
    while ((int)stacks.size() < nt) stacks.push_back((char *)malloc(STACK));
    T.resize(nt);
    g_grid = c.grid;
    g_block = c.block;
    for (unsigned b = 0; b < c.grid.x; b++) {
        g_bid = {b, 0, 0};
        for (int i = 0; i < nt; i++) {
            T[i].done = T[i].waiting = false;
            /* a fresh stack: six zero registers, then entry as the return address */
            uintptr_t top = ((uintptr_t)stacks[i] + STACK - 64) & ~(uintptr_t)15;
            void **sp = (void **)top;
            for (int r = 0; r < 6; r++) sp[r] = nullptr;
            sp[6] = (void *)entry;
            sp[7] = nullptr;
            T[i].sp = sp;
        }
        for (int w = 0; w < 32; w++) { warp_arrived[w] = 0; live_warp[w] = 0; }
        for (int i = 0; i < nt; i++) live_warp[i / 32]++;
        block_arrived = 0;
        live_block = nt;
        g_threads += nt;
        int left = nt;
        while (left > 0) {
            bool progressed = false;
            for (int i = 0; i < nt; i++) {
                thr &t = T[i];
                if (t.done) continue;
                if (t.waiting) {
                    unsigned long g = t.scope == 0 ? warp_gen[i / 32] : block_gen;
                    if (g == t.gen) continue;
                    t.waiting = false;
                }
                cur = i;
                set_tid(i);
                emu_switch(&sched_sp, t.sp);
                progressed = true;
                if (t.done) left--;
            }
            if (!progressed) {
                fprintf(stderr, "EMU: deadlock in block %u\n", b);
                abort();
            }
        }
    }
}
} // namespace emu

// ---- runtime ----
static std::map<void *, std::pair<void *, size_t>> g_maps;
cudaError_t cudaGetDeviceCount(int *n) {
    if (getenv("EMU_NODEV")) return cudaErrorInvalidDevice;
    *n = 1;
    return cudaSuccess;
}
static int g_dev = 0;
cudaError_t cudaGetDevice(int *d) { *d = g_dev; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { if (d != 0) return cudaErrorInvalidDevice; g_dev = d; return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = getenv("EMU_SMS") ? atoi(getenv("EMU_SMS")) : 2; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)malloc(1); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) {
    std::lock_guard<std::recursive_mutex> lk(g_emu_lock);
    size_t r256 = (n + 255) / 256 * 256, total = (r256 + 4095) / 4096 * 4096 + 4096;
    char *m = (char *)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
    mprotect(m + total - 4096, 4096, PROT_NONE);
    char *ret = m + total - 4096 - r256;
    memset(ret, 0xA5, r256); // garbage, as cudaMalloc gives
    g_maps[ret] = {m, total};
    *p = ret;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    std::lock_guard<std::recursive_mutex> lk(g_emu_lock);
    auto it = g_maps.find(p);
    if (it == g_maps.end()) return cudaErrorInvalidValue;
    munmap(it->second.first, it->second.second);
    g_maps.erase(it);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { memset(p, v, n); return cudaSuccess; }
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t) {
    if (pitch < w) return cudaErrorInvalidValue;
    for (size_t r = 0; r < h; r++) memset((char *)p + r * pitch, v, w);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { emu::g_stream_ops++; memmove(d, s, n); return cudaSuccess; }
static unsigned long g_waits; // host waits for the device (emu_waits)
cudaError_t cudaStreamSynchronize(cudaStream_t) { emu::g_stream_ops++; g_waits++; return cudaSuccess; }
// for tests that check that some work never reaches the device (a weak symbol there)
extern "C" unsigned long emu_stream_ops(void) { return emu::g_stream_ops; }
extern "C" unsigned long emu_waits(void) { return g_waits; }
cudaError_t cudaGetLastError() { int e = emu::g_last_error; emu::g_last_error = 0; return (cudaError_t)e; }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = 1; *t = 2; return cudaSuccess; }
// work runs when enqueued: an event is complete once recorded; synchronising on one that was
// never recorded or was destroyed is a bug of the caller
struct emu_event { int recorded; };
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = new emu_event{0}; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) { if (!e) return cudaErrorInvalidValue; e->recorded = 1; return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e || !e->recorded) { fprintf(stderr, "EMU: cudaEventSynchronize on an event never recorded\n"); abort(); }
    g_waits++;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) { *p = malloc(n); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { static char b[32]; snprintf(b, sizeof b, "emu error %d", (int)e); return b; }

struct emu_blas { int x; };
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new emu_blas(); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
const char *cublasGetStatusString(cublasStatus_t s) { static char b[32]; snprintf(b, sizeof b, "emu blas %d", (int)s); return b; }

/* A column-major product in the accumulator type S over storage type T (halves: float32 sums,
 * one rounding of each output, as cuBLAS's CUBLAS_COMPUTE_32F without reduced-precision
 * reductions). */
template <typename T, typename S> static S ld_as(T v) {
    if constexpr (std::is_same<T, tn_bf16>::value) return tn_bf16_to_f32(v);
    else if constexpr (std::is_same<T, tn_f16>::value) return tn_f16_to_f32(v);
    else return v;
}
template <typename T, typename S> static T st_as(S v) {
    if constexpr (std::is_same<T, tn_bf16>::value) return tn_f32_to_bf16(v);
    else if constexpr (std::is_same<T, tn_f16>::value) return tn_f32_to_f16(v);
    else return v;
}
template <typename T, typename S>
static void gemm_col(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, S alpha, const T *A, int lda, long long sa, const T *B, int ldb, long long sb, S beta, T *C, int ldc, long long sc, int batch) {
    for (int b = 0; b < batch; b++) {
        const T *a = A + b * sa, *bb = B + b * sb;
        T *c = C + b * sc;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                S s = 0;
                for (int p = 0; p < k; p++) {
                    S x = ld_as<T, S>(ta == CUBLAS_OP_N ? a[i + (long)p * lda] : a[p + (long)i * lda]);
                    S y = ld_as<T, S>(tb == CUBLAS_OP_N ? bb[p + (long)j * ldb] : bb[j + (long)p * ldb]);
                    s += x * y;
                }
                T &o = c[i + (long)j * ldc];
                o = st_as<T, S>(beta == 0 ? alpha * s : alpha * s + beta * ld_as<T, S>(o));
            }
    }
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B, cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t) {
    auto mx = [](int v) { return v > 1 ? v : 1; };
    if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (lda < mx(ta == CUBLAS_OP_N ? m : k) || ldb < mx(tb == CUBLAS_OP_N ? k : n) || ldc < mx(m)) {
        fprintf(stderr, "EMU cublas: bad ld: ta %d tb %d m %d n %d k %d lda %d ldb %d ldc %d\n", ta, tb, m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (at != bt || at != ct) return CUBLAS_STATUS_INVALID_VALUE;
    const float fa = *(const float *)alpha, fb = *(const float *)beta;
    switch (at) {
    case CUDA_R_32F:
        if (comp != CUBLAS_COMPUTE_32F && comp != CUBLAS_COMPUTE_32F_FAST_TF32) return CUBLAS_STATUS_INVALID_VALUE;
        gemm_col<float, float>(ta, tb, m, n, k, fa, (const float *)A, lda, sa, (const float *)B, ldb, sb, fb, (float *)C, ldc, sc, batch);
        break;
    case CUDA_R_16BF: /* float32 alpha and beta with CUBLAS_COMPUTE_32F */
        if (comp != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_INVALID_VALUE;
        gemm_col<tn_bf16, float>(ta, tb, m, n, k, fa, (const tn_bf16 *)A, lda, sa, (const tn_bf16 *)B, ldb, sb, fb, (tn_bf16 *)C, ldc, sc, batch);
        break;
    case CUDA_R_16F:
        if (comp != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_INVALID_VALUE;
        gemm_col<tn_f16, float>(ta, tb, m, n, k, fa, (const tn_f16 *)A, lda, sa, (const tn_f16 *)B, ldb, sb, fb, (tn_f16 *)C, ldc, sc, batch);
        break;
    case CUDA_R_64F:
        if (comp != CUBLAS_COMPUTE_64F) return CUBLAS_STATUS_INVALID_VALUE;
        gemm_col<double, double>(ta, tb, m, n, k, *(const double *)alpha, (const double *)A, lda, sa, (const double *)B, ldb, sb, *(const double *)beta, (double *)C, ldc, sc, batch);
        break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
void emu_check_ptr(const void *p, const char *what) {
    if (!p) return;
    std::lock_guard<std::recursive_mutex> lk(g_emu_lock);
    auto it = g_maps.upper_bound((void *)p);
    if (it != g_maps.begin()) {
        --it;
        char *base = (char *)it->second.first;
        if ((char *)p >= (char *)it->first && (char *)p < base + it->second.second - 4096) return;
    }
    fprintf(stderr, "EMU: non-device pointer %p in %s\n", p, what);
    abort();
}
