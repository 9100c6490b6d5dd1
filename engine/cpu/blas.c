/* float32/float64 products through CBLAS (OpenBLAS), see blas.h.
 *
 * Layout: every operand is handed to CBLAS in row-major order, as stored
 * (CblasNoTrans, unit stride along its rows) or as the transpose of a
 * stored matrix (CblasTrans, unit stride along its columns); a stride along
 * a dimension of size 1 is never read, so any value does there. Anything
 * else (two non-unit strides, a broadcast stride 0, a leading dimension
 * over INT_MAX) is declined and runs on tenet's kernel, which reads any
 * strides.
 *
 * Threads. OpenBLAS's OpenMP build (0.3.21) takes its thread count per
 * call from the calling thread's OpenMP default (omp_get_max_threads), and
 * when that differs from its global count it resets the global count and
 * frees or allocates its per-thread buffers (openblas_set_num_threads does
 * the same). Done from two user threads at once, one can free a buffer the
 * other is computing in. So tenet never lets OpenBLAS thread. At first use
 * it sets OpenBLAS's global count to one (openblas_set_num_threads(1),
 * once, under pthread_once; then it restores the caller's OpenMP default,
 * which that call also sets), and it parallelises itself, on as many
 * threads as its own kernel would use (tn__threads_for): one product is
 * cut into row (or column) blocks, one CBLAS call each inside tenet's own
 * OpenMP parallel region, where OpenBLAS runs serially (it checks
 * omp_in_parallel before anything else); a batch is split across threads
 * by product. A call made outside a parallel region sets the calling
 * thread's OpenMP default to 1 around it, so that OpenBLAS sees 1 and
 * touches nothing global. Serial OpenBLAS calls from several threads at
 * once are safe (its buffer pool is shared under a lock), so any number of
 * user threads may multiply at once, each on tenet's thread count. On 2
 * cores the split costs nothing against OpenBLAS's own threading (sgemm
 * 1024: 213 vs 215 GFLOP/s).
 *
 * A pthreads build of OpenBLAS would start its own thread pool; one thread
 * set at first use keeps it off too. An OpenMP build in a tenet built
 * without OpenMP cannot be held to one thread per calling thread (tenet
 * cannot set the caller's OpenMP default), so it is not used at all.
 *
 * Results: each block is one ordinary CBLAS product, but which OpenBLAS
 * kernel path a block takes may depend on its size, so unlike tenet's
 * kernel the bits may change with the thread count (tests compare with a
 * tolerance; tn_set_blas(false) gives bit-reproducible results).
 */
#include "blas.h"
#include "tenet/runtime.h" /* tn_set_blas, tn_blas_enabled: exported */

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef TENET_HAVE_CBLAS
#include <cblas.h>
#ifndef TENET_HAVE_OPENBLAS_THREADS
/* The library is OpenBLAS (cmake/blas.cmake finds nothing else), but this
 * cblas.h does not declare its thread controls. */
void openblas_set_num_threads(int num_threads);
int openblas_get_parallel(void);
char *openblas_get_corename(void);
#endif
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

static _Atomic int g_mode = TN__BLAS_AUTO;

/* TENET_BLAS=0 (or off) at load time turns dispatch off, =all takes every
 * product CBLAS can express; anything else keeps the size policy. */
__attribute__((constructor)) static void blas_from_env(void) {
    const char *e = getenv("TENET_BLAS");
    if (!e || !*e) return;
    if (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "OFF"))
        tn__blas_set_mode(TN__BLAS_OFF);
    else if (!strcmp(e, "all") || !strcmp(e, "ALL"))
        tn__blas_set_mode(TN__BLAS_ALL);
}

void tn__blas_set_mode(tn__blas_mode mode) {
    atomic_store_explicit(&g_mode, (int)mode, memory_order_relaxed);
}

tn__blas_mode tn__blas_get_mode(void) {
    return (tn__blas_mode)atomic_load_explicit(&g_mode, memory_order_relaxed);
}

void tn_set_blas(bool enabled) { tn__blas_set_mode(enabled ? TN__BLAS_AUTO : TN__BLAS_OFF); }

bool tn_blas_enabled(void) { return tn__blas_available() && tn__blas_get_mode() != TN__BLAS_OFF; }

#ifndef TENET_HAVE_CBLAS

bool tn__blas_available(void) { return false; }

tn_status tn__gemm_blas(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch) {
    (void)dt, (void)g, (void)batch;
    return TN__BLAS_DECLINED;
}

#else

/* ---- when CBLAS is worth it -------------------------------------------------------- */

/* Measured on 2 cores (docs/performance.md, "CPU matmul: CBLAS dispatch"):
 * what decides is the vector width of OpenBLAS's kernels (chosen at load
 * time for the CPU it detects) against the width of tenet's kernel
 * set that runs (isa.h). As wide or wider (AVX-512 kernels against ours, or AVX2
 * kernels against a tenet built for AVX2): OpenBLAS is faster on nearly
 * every shape (1.1-1.9x on big products, more on small ones), so it takes
 * everything. Narrower (OpenBLAS's AVX2 kernels against our AVX-512 one,
 * e.g. 0.3.21 on a CPU newer than it knows): ours is 1.3-1.9x faster
 * unless the product is tiny (under 32768 multiply-adds: OpenBLAS 2-7x,
 * its call costs less than our setup) or C is narrower than our register
 * tile (n < NR, down to one column: OpenBLAS 1.2-20x, we pad or loop). */

/* Bits per vector of tenet's kernel: the set that runs (isa.h). */
static int our_width(void) { return tn__cpu_isa_bits(); }

/* Bits per vector of OpenBLAS's kernels for its core name (x86 names; any
 * other core counts as 128, i.e. as wide as a non-x86 build of ours). */
static int blas_width(const char *core) {
    static const char *const w512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    static const char *const w256[] = {"haswell",    "zen",         "sandybridge", "bulldozer",
                                       "piledriver", "steamroller", "excavator"};
    char lc[32] = {0};
    for (size_t i = 0; core && core[i] && i < sizeof lc - 1; i++)
        lc[i] = (char)(core[i] >= 'A' && core[i] <= 'Z' ? core[i] - 'A' + 'a' : core[i]);
    for (size_t i = 0; i < sizeof w512 / sizeof *w512; i++)
        if (!strcmp(lc, w512[i])) return 512;
    for (size_t i = 0; i < sizeof w256 / sizeof *w256; i++)
        if (!strcmp(lc, w256[i])) return 256;
    return 128;
}

/* The width NR of gemm.c's register tile: two vectors. */
#define OUR_NR(dt) (2 * our_width() / (8 * (int)tn_dtype_size(dt)))
#define SMALL_MNK 32768

static bool g_blas_wide; /* OpenBLAS's kernels at least as wide as ours */

static bool worth_blas(tn_dtype dt, const tn_gemm *g) {
    return g_blas_wide || g->m * g->n * g->k < SMALL_MNK || g->n < OUR_NR(dt);
}

/* ---- setup, once per process ------------------------------------------------------ */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_usable;

static void blas_init(void) {
    int parallel = openblas_get_parallel(); /* 0 serial, 1 pthreads, 2 OpenMP */
#ifndef _OPENMP
    if (parallel == 2) return;              /* see the top of the file */
#else
    (void)parallel;
    int icv = omp_get_max_threads();
#endif
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(icv); /* the OpenMP build set this thread's default to 1 too */
#endif
    g_blas_wide = blas_width(openblas_get_corename()) >= our_width();
    g_usable = true;
}

bool tn__blas_available(void) {
    pthread_once(&g_once, blas_init);
    return g_usable;
}

/* ---- layout ------------------------------------------------------------------------ */

/* One operand as CBLAS sees it: trans (stored transposed) and its leading
 * dimension. */
typedef struct opnd {
    enum CBLAS_TRANSPOSE trans;
    int ld;
} opnd;

static int64_t max1(int64_t x) { return x > 1 ? x : 1; }

/* An r x q operand whose element (i,j) is at i*rs + j*cs. */
static bool layout(int64_t r, int64_t q, int64_t rs, int64_t cs, opnd *o) {
    if (cs == 1 || q == 1) { /* rows contiguous: as stored, ld = row stride */
        int64_t ld = r == 1 ? max1(q) : rs;
        if (ld >= max1(q) && ld <= INT_MAX) {
            *o = (opnd){CblasNoTrans, (int)ld};
            return true;
        }
    }
    if (rs == 1 || r == 1) { /* columns contiguous: the transpose of a stored q x r */
        int64_t ld = q == 1 ? max1(r) : cs;
        if (ld >= max1(r) && ld <= INT_MAX) {
            *o = (opnd){CblasTrans, (int)ld};
            return true;
        }
    }
    return false;
}

/* ---- the calls ------------------------------------------------------------------------ */

typedef struct plan {
    tn_dtype dt;
    opnd a, b;
    int ldc;
    size_t es;
    bool acc;
} plan;

/* y = op(M)·x (+ y) through gemv: M is the stored matrix (rows x cols, ld),
 * read transposed when trans. beta = 1 always, with y zeroed first when not
 * accumulating: gemv's beta = 0 scales y by zero, and some OpenBLAS versions
 * keep a NaN of the (uninitialised) output that way. */
static void gemv(const plan *p, enum CBLAS_TRANSPOSE trans, int rows, int cols, const void *m,
                 int ld, const void *x, int incx, void *y, int incy, int leny) {
    if (p->dt == TN_F32) {
        if (!p->acc)
            for (int i = 0; i < leny; i++)
                ((float *)y)[(int64_t)i * incy] = 0;
        cblas_sgemv(CblasRowMajor, trans, rows, cols, 1.0f, m, ld, x, incx, 1.0f, y, incy);
    } else {
        if (!p->acc)
            for (int i = 0; i < leny; i++)
                ((double *)y)[(int64_t)i * incy] = 0;
        cblas_dgemv(CblasRowMajor, trans, rows, cols, 1.0, m, ld, x, incx, 1.0, y, incy);
    }
}

static enum CBLAS_TRANSPOSE flip(enum CBLAS_TRANSPOSE t) {
    return t == CblasNoTrans ? CblasTrans : CblasNoTrans;
}

/* C[i0:i1, j0:j1] of the product g, one CBLAS call: gemv for one column or
 * one row of C (matrix-vector products: gemm's packing costs it 4-8x
 * there), gemm otherwise. */
static void block(const plan *p, const tn_gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    int m = (int)(i1 - i0), n = (int)(j1 - j0), k = (int)g->k;
    int64_t es = (int64_t)p->es;
    const char *a = (const char *)g->a + i0 * g->rsa * es;
    const char *b = (const char *)g->b + j0 * g->csb * es;
    char *c = (char *)g->c + (i0 * g->rsc + j0) * es;
    if (n == 1) { /* c[:, 0] = A·b: A as stored (m x k) or its transpose (k x m) */
        bool t = p->a.trans == CblasTrans;
        gemv(p, p->a.trans, t ? k : m, t ? m : k, a, p->a.ld, b, p->b.ld, c, p->ldc, m);
        return;
    }
    if (m == 1) { /* c[0, :] = B^T·a: B stored (k x n), or (n x k) when transposed */
        bool t = p->b.trans == CblasTrans;
        int inca = p->a.trans == CblasNoTrans ? 1 : p->a.ld;
        gemv(p, flip(p->b.trans), t ? n : k, t ? k : n, b, p->b.ld, a, inca, c, 1, n);
        return;
    }
    if (p->dt == TN_F32)
        cblas_sgemm(CblasRowMajor, p->a.trans, p->b.trans, m, n, k, 1.0f, (const float *)a, p->a.ld,
                    (const float *)b, p->b.ld, p->acc ? 1.0f : 0.0f, (float *)c, p->ldc);
    else
        cblas_dgemm(CblasRowMajor, p->a.trans, p->b.trans, m, n, k, 1.0, (const double *)a, p->a.ld,
                    (const double *)b, p->b.ld, p->acc ? 1.0 : 0.0, (double *)c, p->ldc);
}

/* Blocks are cut at multiples of this many rows or columns, so that no
 * block ends in a sliver of a register tile. */
#define BLAS_ALIGN 32

/* Part t of ntask of product g: a range of rows, or of columns when C is
 * wider than tall (each block then repacks A instead of B: the smaller). */
static void part(const plan *p, const tn_gemm *g, int t, int ntask) {
    bool by_cols = g->n > g->m;
    int64_t len = by_cols ? g->n : g->m, units = (len + BLAS_ALIGN - 1) / BLAS_ALIGN;
    int64_t lo = units * t / ntask * BLAS_ALIGN, hi = units * (t + 1) / ntask * BLAS_ALIGN;
    if (hi > len) hi = len;
    if (hi <= lo) return;
    if (by_cols)
        block(p, g, 0, g->m, lo, hi);
    else
        block(p, g, lo, hi, 0, g->n);
}

static void run(const plan *p, const tn_gemm *g, const tn_gemm_batch *batch, int64_t nbatch,
                int nt) {
#ifdef _OPENMP
    if (nt > 1 && nbatch >= nt) { /* whole products per thread */
#pragma omp parallel num_threads(nt)
        {
            TN_OMP_SPAN("gemm batch");
#pragma omp for schedule(static) nowait
            for (int t = 0; t < nt; t++)
                for (int64_t bi = nbatch * t / nt; bi < nbatch * (t + 1) / nt; bi++) {
                    tn_gemm one;
                    tn__gemm_batch_item(g, batch, bi, p->es, &one);
                    part(p, &one, 0, 1);
                }
        }
        return;
    }
    if (nt > 1) { /* each product cut into blocks across the threads */
        for (int64_t bi = 0; bi < nbatch; bi++) {
            tn_gemm one = *g;
            if (batch) tn__gemm_batch_item(g, batch, bi, p->es, &one);
#pragma omp parallel num_threads(nt)
            {
                TN_OMP_SPAN("gemm blocks");
#pragma omp for schedule(static, 1) nowait
                for (int t = 0; t < nt; t++)
                    part(p, &one, t, nt);
            }
        }
        return;
    }
    /* serial: OpenBLAS must not thread either (see the top of the file) */
    int icv = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (icv != 1) omp_set_num_threads(1);
#endif
    for (int64_t bi = 0; bi < nbatch; bi++) {
        tn_gemm one = *g;
        if (batch) tn__gemm_batch_item(g, batch, bi, p->es, &one);
        part(p, &one, 0, 1);
    }
#ifdef _OPENMP
    if (icv != 1) omp_set_num_threads(icv);
#endif
}

tn_status tn__gemm_blas(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch) {
    if (dt != TN_F32 && dt != TN_F64) return TN__BLAS_DECLINED;
    tn__blas_mode mode = tn__blas_get_mode();
    if (mode == TN__BLAS_OFF || !tn__blas_available()) return TN__BLAS_DECLINED;
    /* empty products are the caller's (CBLAS would leave C alone for k = 0) */
    if (g->m <= 0 || g->n <= 0 || g->k <= 0) return TN__BLAS_DECLINED;
    if (g->m > INT_MAX || g->n > INT_MAX || g->k > INT_MAX) return TN__BLAS_DECLINED;
    plan p = {.dt = dt, .es = tn_dtype_size(dt), .acc = g->accumulate};
    if (!layout(g->m, g->k, g->rsa, g->csa, &p.a) || !layout(g->k, g->n, g->rsb, g->csb, &p.b))
        return TN__BLAS_DECLINED;
    int64_t ldc = g->m == 1 ? max1(g->n) : g->rsc;
    if (ldc < max1(g->n) || ldc > INT_MAX) return TN__BLAS_DECLINED;
    p.ldc = (int)ldc;
    if (mode == TN__BLAS_AUTO && !worth_blas(dt, g)) return TN__BLAS_DECLINED;
    int64_t nbatch = batch ? tn__numel(batch->ndim, batch->shape) : 1;
    if (nbatch <= 0) return TN__BLAS_DECLINED;
    /* the same thread count as tenet's kernel (gemm.c) */
    int nt = tn__threads_for(tn__gemm_work(g) * nbatch);
    run(&p, g, batch, nbatch, nt);
    return TN_OK;
}

#endif
