/* The CPU's layer-norm kernel: the backend table's `layer_norm` entry
 * (tn_ln_args in engine/core/kernel_args.h). Rows are contiguous. Forward:
 * threads own whole rows. Backward, one pass: threads own whole blocks of
 * TN_LN_ROW_BLOCK rows, writing each row's dx and the block's partial sums
 * of the weight and bias gradients, which threads owning whole columns then
 * combine in block order: the same bits whatever the thread count. Row sums
 * are OpenMP SIMD reductions in double (GCC does not vectorise hand-written
 * lanes with conversions): their order is fixed by the build's vector
 * width, never by the thread count.
 */
#include <math.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define TN_IMPL "layer_norm_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

typedef struct ln_kernels {
    void (*fwd_row)(const tn_ln_args *a, int64_t r);
    void (*bwd_rows)(const tn_ln_args *a, int64_t r0, int64_t r1, double *pw, double *pb);
} ln_kernels;
#define LN_KERNELS(ID, CT, S) [ID] = {ln_fwd_row_##S, ln_bwd_rows_##S},
static const ln_kernels kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(LN_KERNELS)};

/* The backward in one pass over blocks of TN_LN_ROW_BLOCK rows: each row's
 * dx, and the block's partial sums of dweight and dbias (part: 2 cols
 * doubles per block, or NULL); then each column's partials are summed in
 * block order. */
static void ln_backward(const tn_ln_args *a, double *part) {
    int64_t nb = (a->rows + TN_LN_ROW_BLOCK - 1) / TN_LN_ROW_BLOCK, n = a->cols;
    const ln_kernels *kr = &kernels[a->dtype];
    size_t es = tn__dtype_sizes[a->dtype];
    int nt = tn__threads_for(a->rows * n);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("layer_norm");
#pragma omp for schedule(static) nowait
        for (int64_t k = 0; k < nb; k++) {
            int64_t r0 = k * TN_LN_ROW_BLOCK;
            int64_t r1 = r0 + TN_LN_ROW_BLOCK < a->rows ? r0 + TN_LN_ROW_BLOCK : a->rows;
            double *pw = part ? part + 2 * k * n : NULL, *pb = pw ? pw + n : NULL;
            for (int64_t j = 0; pw && j < 2 * n; j++)
                pw[j] = 0;
            kr->bwd_rows(a, r0, r1, pw, pb);
        }
    }
    if (!part) return;
    nt = tn__threads_for(nb * n);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("layer_norm weights");
#pragma omp for schedule(static) nowait
        for (int64_t j = 0; j < n; j++) {
            double sw = 0, sb = 0;
            for (int64_t k = 0; k < nb; k++) {
                sw += part[2 * k * n + j];
                sb += part[2 * k * n + n + j];
            }
            if (a->dweight) tn__store((char *)a->dweight + j * es, a->dtype, sw);
            if (a->dbias) tn__store((char *)a->dbias + j * es, a->dtype, sb);
        }
    }
}

tn_status tn__cpu_layer_norm(int dev, const tn_ln_args *a) {
    (void)dev;
    if ((unsigned)a->dtype >= TN_DTYPE_COUNT || !kernels[a->dtype].fwd_row)
        return tn__error(TN_ERR_DTYPE, "layer_norm: no CPU kernel for %s", tn_dtype_name(a->dtype));
    if (a->rows == 0 || a->cols == 0) return TN_OK;
    if (a->mode == TN_LN_BWD) {
        double *part = NULL;
        if (a->dweight || a->dbias) {
            int64_t nb = (a->rows + TN_LN_ROW_BLOCK - 1) / TN_LN_ROW_BLOCK;
            if (!(part = tn__malloc((size_t)(nb * a->cols * 2) * sizeof *part)))
                return tn_last_status();
        }
        ln_backward(a, part);
        tn__mfree(part);
        return TN_OK;
    }
    void (*fwd_row)(const tn_ln_args *, int64_t) = kernels[a->dtype].fwd_row;
    int nt = tn__threads_for(a->rows * a->cols);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("layer_norm");
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < a->rows; r++)
            fwd_row(a, r);
    }
    return TN_OK;
}
