/* fma_peak: the machine's float32 FLOP limit, independent fused multiply-adds
 * on every thread. The one file of tenet-bench compiled with -march=native
 * (bench/CMakeLists.txt): it measures this machine's widest FMAs, whatever
 * the library's kernel set. Only this case runs its instructions, so the
 * other cases still run under valgrind. */
#include "bench.h"

#ifdef __x86_64__
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
typedef __m512 vf;
#define VF_LANES 16
#define VF_SET1 _mm512_set1_ps
#define VF_FMA _mm512_fmadd_ps
#define VF_ADD _mm512_add_ps
#define VF_SUM _mm512_reduce_add_ps
#elif defined(__FMA__)
typedef __m256 vf;
#define VF_LANES 8
#define VF_SET1 _mm256_set1_ps
#define VF_FMA _mm256_fmadd_ps
#define VF_ADD _mm256_add_ps
static float VF_SUM(__m256 x) {
    float f[8];
    _mm256_storeu_ps(f, x);
    return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#else
typedef float vf;
#define VF_LANES 1
#define VF_SET1(x) (x)
#define VF_FMA(a, b, c) ((a) * (b) + (c))
#define VF_ADD(a, b) ((a) + (b))
#define VF_SUM(x) (x)
#endif
/* Enough independent chains to cover FMA latency x FMA pipes. */
#define FMA_CHAINS 16
#define FMA_INNER 4096

typedef struct fma_state {
    int threads;
    volatile float sink;
} fma_state;

static int fma_body(void *st, int64_t iters) {
    fma_state *f = st;
    float total = 0;
#pragma omp parallel num_threads(f->threads) reduction(+ : total)
    {
        vf acc[FMA_CHAINS];
        vf x = VF_SET1(0.999999f), y = VF_SET1(1e-7f);
        for (int k = 0; k < FMA_CHAINS; k++)
            acc[k] = VF_SET1((float)k);
        for (int64_t it = 0; it < iters * FMA_INNER; it++)
            for (int k = 0; k < FMA_CHAINS; k++)
                acc[k] = VF_FMA(acc[k], x, y);
        vf s = acc[0];
        for (int k = 1; k < FMA_CHAINS; k++)
            s = VF_ADD(s, acc[k]);
        total += VF_SUM(s);
    }
    f->sink = total;
    return 0;
}

int bench_fma_peak(const bench_opts *o) {
    fma_state f = {.threads = o->threads};
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    if (bench_time(o, fma_body, &f, 0.05, secs) < 0) return -1;
    double flops = 2.0 * VF_LANES * FMA_CHAINS * FMA_INNER * o->threads;
    bench_result r = {.name = "fma_peak", .unit = "GFLOP/s", .higher_is_better = true};
    for (int i = 0; i < o->repeat; i++)
        v[i] = bench_gflops(flops, secs[i]);
    bench_stats(&r, v, o->repeat);
    bench_extra(&r, "lanes", VF_LANES);
    bench_emit(&r);
    return 0;
}
