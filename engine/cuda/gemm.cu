/* engine/cuda/gemm.cu — matrix products through cuBLAS.
 *
 * Layout: our C = A·B is row-major with element strides; cuBLAS is
 * column-major. A row-major matrix with unit column stride is, read
 * column-major, its transpose; so we ask cuBLAS for C^T = B^T · A^T, which
 * it writes column-major into exactly our C (leading dimension rsc, C's row
 * stride). Each input is usable when one of its strides is 1:
 *   unit column stride  -> its transpose is plain column-major: op N, ld = row stride;
 *   unit row stride     -> it is column-major itself:           op T, ld = column stride.
 * The engine makes operands contiguous before calling; an operand with no
 * unit stride is TN_ERR_INVALID_ARGUMENT.
 *
 * Batches: the batch dims are merged where all three operands step
 * uniformly; the innermost merged dim becomes one strided-batched call
 * (stride 0 broadcasts an operand), the outer ones a loop.
 *
 * bfloat16 and float16 (the table's gemm_halves): half operands and output,
 * CUBLAS_COMPUTE_32F on tensor cores, each output rounded once.
 *
 * One cuBLAS handle per device, bound to the device's stream and created
 * with the default math mode, which never uses TF32, and reduced-precision
 * split-K reductions disallowed. float32 products ask
 * for CUBLAS_COMPUTE_32F_FAST_TF32 per call when tn_cuda_set_allow_tf32 is
 * on, CUBLAS_COMPUTE_32F otherwise: a per-call choice, because the handle is
 * shared by every thread and changing its math mode would race.
 */
#include <limits.h>

#include "cuda_internal.h"

namespace tnc {

namespace {

tn_status get_handle(int dev, device_state *ds, cublasHandle_t *out) {
    if (__atomic_load_n(&ds->blas, __ATOMIC_ACQUIRE)) {
        *out = ds->blas;
        return TN_OK;
    }
    pthread_mutex_lock(&ds->blas_lock);
    tn_status st = TN_OK;
    if (!ds->blas) {
        cublasHandle_t h = nullptr;
        cublasStatus_t s = cublasCreate(&h);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(h, ds->stream);
        /* halves' split-K partial sums stay float32 (their compute type), never
         * rounded to the output's 16 bits on the way */
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasSetMathMode(h, static_cast<cublasMath_t>(
                                         CUBLAS_DEFAULT_MATH |
                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
        if (s != CUBLAS_STATUS_SUCCESS) {
            st = cublas_fail(s, "creating the cuBLAS handle");
            if (h) cublasDestroy(h);
        } else {
            __atomic_store_n(&ds->blas, h, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ds->blas_lock);
    (void)dev;
    *out = ds->blas;
    return st;
}

/* cuBLAS view of a row-major rows x cols operand with strides rs, cs: the
 * op to apply and the leading dimension. False when neither stride is 1. */
bool operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, cublasOperation_t *op,
             int64_t *ld) {
    if (rows == 0 || cols == 0) { /* nothing is read (k == 0) */
        *op = CUBLAS_OP_N;
        *ld = cols > 1 ? cols : 1;
        return true;
    }
    /* a dim of size 1 has no meaningful stride: let it take any valid one */
    if (cols == 1) cs = 1;
    if (rows == 1) rs = cols > 1 ? cols : 1;
    if (cs == 1 && rs >= (cols > 1 ? cols : 1)) { /* X^T is column-major cols x rows */
        *op = CUBLAS_OP_N;
        *ld = rs;
        return true;
    }
    if (rows == 1) rs = 1;
    if (rs == 1 && cs >= (rows > 1 ? rows : 1)) { /* X is column-major rows x cols */
        *op = CUBLAS_OP_T;
        *ld = cs;
        return true;
    }
    return false;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

struct plan {
    cublasOperation_t opa, opb;
    int m, n, k;
    int64_t lda, ldb, ldc;
};

/* One strided-batched call: count products, operand i at a + i*sa etc. */
tn_status call(cublasHandle_t h, tn_dtype dt, const plan &p, const char *a, const char *b, char *c,
               int64_t sa, int64_t sb, int64_t sc, int64_t count, bool accumulate) {
    const size_t es = dtype_size(dt);
    while (count > 0) {
        const int chunk = count > INT_MAX ? INT_MAX : static_cast<int>(count);
        cublasStatus_t s;
        /* C^T (n x m) = op(B^T) (n x k) . op(A^T) (k x m) */
        if (dt == TN_F32) {
            const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
            const cublasComputeType_t ct =
                tn__tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
            s = cublasGemmStridedBatchedEx(
                h, p.opb, p.opa, p.n, p.m, p.k, &one, b, CUDA_R_32F, static_cast<int>(p.ldb), sb, a,
                CUDA_R_32F, static_cast<int>(p.lda), sa, &beta, c, CUDA_R_32F,
                static_cast<int>(p.ldc), sc, chunk, ct, CUBLAS_GEMM_DEFAULT);
        } else if (dt == TN_BF16 || dt == TN_F16) {
            /* tensor cores, float32 products and sums, one rounding of each output */
            const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
            const cudaDataType t = dt == TN_BF16 ? CUDA_R_16BF : CUDA_R_16F;
            s = cublasGemmStridedBatchedEx(h, p.opb, p.opa, p.n, p.m, p.k, &one, b, t,
                                           static_cast<int>(p.ldb), sb, a, t,
                                           static_cast<int>(p.lda), sa, &beta, c, t,
                                           static_cast<int>(p.ldc), sc, chunk, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT);
        } else {
            const double one = 1.0, beta = accumulate ? 1.0 : 0.0;
            s = cublasGemmStridedBatchedEx(
                h, p.opb, p.opa, p.n, p.m, p.k, &one, b, CUDA_R_64F, static_cast<int>(p.ldb), sb, a,
                CUDA_R_64F, static_cast<int>(p.lda), sa, &beta, c, CUDA_R_64F,
                static_cast<int>(p.ldc), sc, chunk, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
        }
        if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail(s, "cublasGemmStridedBatchedEx");
        count -= chunk;
        a += static_cast<int64_t>(chunk) * sa * static_cast<int64_t>(es);
        b += static_cast<int64_t>(chunk) * sb * static_cast<int64_t>(es);
        c += static_cast<int64_t>(chunk) * sc * static_cast<int64_t>(es);
    }
    return TN_OK;
}

/* k == 0: every product is an empty sum. C += 0 leaves C; C = 0 zeroes it
 * here rather than trusting the library's quick-return rules. */
tn_status empty_sum(device_state *ds, const tn_gemm *g, int nb, const int64_t *bshape,
                    const int64_t *bsc, int64_t es) {
    if (g->accumulate) return TN_OK;
    int64_t total = 1;
    for (int d = 0; d < nb; d++)
        total *= bshape[d];
    const int64_t pitch = (g->rsc > g->n ? g->rsc : g->n) * es;
    for (int64_t t = 0; t < total; t++) {
        int64_t rem = t, oc = 0;
        for (int d = nb - 1; d >= 0; d--) {
            oc += rem % bshape[d] * bsc[d];
            rem /= bshape[d];
        }
        TNC_TRY(cudaMemset2DAsync(static_cast<char *>(g->c) + oc * es, static_cast<size_t>(pitch),
                                  0, static_cast<size_t>(g->n * es), static_cast<size_t>(g->m),
                                  ds->stream));
    }
    return TN_OK;
}

} // namespace

extern "C" tn_status tn__cuda_gemm(int dev, tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b) {
    if (!g) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA matmul: arguments are NULL");
    if (dt != TN_F32 && dt != TN_F64 && dt != TN_BF16 && dt != TN_F16)
        return tn__error(TN_ERR_DTYPE,
                         "CUDA matmul supports float32, float64, bfloat16 and float16 only (got "
                         "'%s')",
                         dtype_name(dt));
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return tn__error(TN_ERR_SHAPE, "CUDA matmul: negative size");
    if (!fits_int(g->m) || !fits_int(g->n) || !fits_int(g->k))
        return tn__error(
            TN_ERR_SHAPE,
            "CUDA matmul: sizes m=%lld n=%lld k=%lld exceed the 32-bit range of cuBLAS",
            (long long)g->m, (long long)g->n, (long long)g->k);

    /* merged batch dims, outermost first */
    int nb = 0;
    int64_t bshape[TN_MAX_DIMS], bsa[TN_MAX_DIMS], bsb[TN_MAX_DIMS], bsc[TN_MAX_DIMS];
    int64_t total = 1;
    if (b) {
        if (b->ndim < 0 || b->ndim > TN_MAX_DIMS)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA matmul: %d batch dims", b->ndim);
        for (int d = 0; d < b->ndim; d++) {
            if (b->shape[d] < 0) return tn__error(TN_ERR_SHAPE, "CUDA matmul: negative batch size");
            total *= b->shape[d];
            if (b->shape[d] == 1) continue;
            if (nb > 0 && bsa[nb - 1] == b->bsa[d] * b->shape[d] &&
                bsb[nb - 1] == b->bsb[d] * b->shape[d] && bsc[nb - 1] == b->bsc[d] * b->shape[d]) {
                bshape[nb - 1] *= b->shape[d];
                bsa[nb - 1] = b->bsa[d];
                bsb[nb - 1] = b->bsb[d];
                bsc[nb - 1] = b->bsc[d];
            } else {
                bshape[nb] = b->shape[d];
                bsa[nb] = b->bsa[d];
                bsb[nb] = b->bsb[d];
                bsc[nb] = b->bsc[d];
                nb++;
            }
        }
    }
    if (g->m == 0 || g->n == 0 || total == 0) return TN_OK;

    plan p;
    p.m = static_cast<int>(g->m);
    p.n = static_cast<int>(g->n);
    p.k = static_cast<int>(g->k);
    /* our A (m x k) is cuBLAS's second operand, our B (k x n) its first */
    if (!operand(g->m, g->k, g->rsa, g->csa, &p.opa, &p.lda) ||
        !operand(g->k, g->n, g->rsb, g->csb, &p.opb, &p.ldb))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "CUDA matmul: an operand has no unit stride (A strides %lld, %lld; B "
                         "strides %lld, %lld); make it contiguous first",
                         (long long)g->rsa, (long long)g->csa, (long long)g->rsb,
                         (long long)g->csb);
    p.ldc = g->m == 1 ? (g->rsc > g->n ? g->rsc : g->n) : g->rsc;
    if (p.ldc < g->n)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "CUDA matmul: C's row stride %lld is below n=%lld", (long long)g->rsc,
                         (long long)g->n);
    if (p.ldc < 1) p.ldc = 1;
    if (!fits_int(p.lda) || !fits_int(p.ldb) || !fits_int(p.ldc))
        return tn__error(TN_ERR_SHAPE,
                         "CUDA matmul: a leading dimension exceeds the 32-bit range of cuBLAS");
    if (g->k > 0 && (!g->a || !g->b))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA matmul: NULL operand");
    if (!g->c) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA matmul: NULL output");

    device_state *ds;
    tn_status st = device(dev, &ds);
    if (st < 0) return st;
    dev_guard guard(dev);
    cublasHandle_t h;
    st = get_handle(dev, ds, &h);
    if (st < 0) return st;

    const int64_t es = static_cast<int64_t>(dtype_size(dt));
    const char *a0 = static_cast<const char *>(g->a), *b0 = static_cast<const char *>(g->b);
    char *c0 = static_cast<char *>(g->c);
    if (g->k == 0) return empty_sum(ds, g, nb, bshape, bsc, es);
    if (nb == 0) return call(h, dt, p, a0, b0, c0, 0, 0, 0, 1, g->accumulate);

    /* loop over the outer batch dims, one strided-batched call for the innermost */
    const int in = nb - 1;
    int64_t outer = 1;
    for (int d = 0; d < in; d++)
        outer *= bshape[d];
    for (int64_t o = 0; o < outer; o++) {
        int64_t rem = o, oa = 0, ob = 0, oc = 0;
        for (int d = in - 1; d >= 0; d--) {
            int64_t i = rem % bshape[d];
            rem /= bshape[d];
            oa += i * bsa[d];
            ob += i * bsb[d];
            oc += i * bsc[d];
        }
        st = call(h, dt, p, a0 + oa * es, b0 + ob * es, c0 + oc * es, bsa[in], bsb[in], bsc[in],
                  bshape[in], g->accumulate);
        if (st < 0) return st;
    }
    return TN_OK;
}

} // namespace tnc
