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

/* Row sums in double: sum(x), sum((x - m)^2), and sum(dy w), sum(dy w x). */
#define DEFINE_ROW_SUMS(SUF, T)                                                                    \
    static double row_sum_##SUF(const T *x, int64_t n) {                                           \
        double s = 0;                                                                              \
        _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < n; j++) s += (double)x[j];    \
        return s;                                                                                  \
    }                                                                                              \
    static double row_sqdev_##SUF(const T *x, int64_t n, double m) {                               \
        double s = 0;                                                                              \
        _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < n; j++) {                     \
            double d = (double)x[j] - m;                                                           \
            s += d * d;                                                                            \
        }                                                                                          \
        return s;                                                                                  \
    }                                                                                              \
    /* *s1 = sum(dy w), *s2 = sum(dy w x) (w NULL: 1). GCC does not vectorise the lanes            \
     * form of two sums with conversions: an OpenMP SIMD reduction, whose order is fixed by        \
     * the build (the vector width), not by the thread count. */                                   \
    static void row_dots_##SUF(const T *dy, const T *w, const T *x, int64_t n, double *s1,         \
                               double *s2) {                                                       \
        double a1 = 0, a2 = 0;                                                                     \
        if (w) {                                                                                   \
            _Pragma("omp simd reduction(+ : a1, a2)") for (int64_t j = 0; j < n; j++) {            \
                double g = (double)dy[j] * (double)w[j];                                           \
                a1 += g;                                                                           \
                a2 += g * (double)x[j];                                                            \
            }                                                                                      \
        } else {                                                                                   \
            _Pragma("omp simd reduction(+ : a1, a2)") for (int64_t j = 0; j < n; j++) {            \
                a1 += (double)dy[j];                                                               \
                a2 += (double)dy[j] * (double)x[j];                                                \
            }                                                                                      \
        }                                                                                          \
        *s1 = a1;                                                                                  \
        *s2 = a2;                                                                                  \
    }

/* Forward of one row: statistics, then y = (x - mean) rstd w + b in double,
 * rounded once (PyTorch's float32 arithmetic, x rstd - mean rstd, loses up to
 * a few ulp to cancellation; this is within its rounding). */
#define DEFINE_LN_FWD_ROW(SUF, T)                                                                  \
    static void ln_fwd_row_##SUF(const tn_ln_args *a, int64_t r) {                                 \
        int64_t n = a->cols;                                                                       \
        const T *x = (const T *)a->x + r * n, *w = a->weight, *b = a->bias;                        \
        T *y = (T *)a->y + r * n;                                                                  \
        double m = row_sum_##SUF(x, n) / (double)n;                                                \
        double var = row_sqdev_##SUF(x, n, m) / (double)n;                                         \
        double rs = 1.0 / sqrt(var + a->eps);                                                      \
        ((T *)a->mean)[r] = (T)m;                                                                  \
        ((T *)a->rstd)[r] = (T)rs;                                                                 \
        if (w && b)                                                                                \
            for (int64_t j = 0; j < n; j++)                                                        \
                y[j] = (T)(((double)x[j] - m) * rs * (double)w[j] + (double)b[j]);                 \
        else if (w)                                                                                \
            for (int64_t j = 0; j < n; j++)                                                        \
                y[j] = (T)(((double)x[j] - m) * rs * (double)w[j]);                                \
        else if (b)                                                                                \
            for (int64_t j = 0; j < n; j++)                                                        \
                y[j] = (T)(((double)x[j] - m) * rs + (double)b[j]);                                \
        else                                                                                       \
            for (int64_t j = 0; j < n; j++)                                                        \
                y[j] = (T)(((double)x[j] - m) * rs);                                               \
    }

/* dx of one row from the saved statistics: rstd (dy w - mean(dy w) -
 * xhat mean(dy w xhat)) with xhat = (x - mean) rstd, in double. */
#define DEFINE_LN_DX_ROW(SUF, T)                                                                   \
    static void ln_dx_row_##SUF(const tn_ln_args *a, int64_t r) {                                  \
        int64_t n = a->cols;                                                                       \
        const T *x = (const T *)a->x + r * n, *dy = (const T *)a->dy + r * n, *w = a->weight;      \
        T *dx = (T *)a->dx + r * n;                                                                \
        double m = (double)((const T *)a->mean)[r], rs = (double)((const T *)a->rstd)[r];          \
        double db, ds;                                                                             \
        row_dots_##SUF(dy, w, x, n, &db, &ds);                                                     \
        /* sum(dy w xhat) = (ds - m db) rs */                                                      \
        double mg = db / (double)n, mgx = (ds - m * db) * rs / (double)n;                          \
        if (w)                                                                                     \
            for (int64_t j = 0; j < n; j++)                                                        \
                dx[j] =                                                                            \
                    (T)(rs * ((double)dy[j] * (double)w[j] - mg - ((double)x[j] - m) * rs * mgx)); \
        else                                                                                       \
            for (int64_t j = 0; j < n; j++)                                                        \
                dx[j] = (T)(rs * ((double)dy[j] - mg - ((double)x[j] - m) * rs * mgx));            \
    }

/* Adds one row's terms to the partial sums of dweight (pw) and dbias (pb). */
#define DEFINE_LN_PARTIAL(SUF, T)                                                                  \
    static void ln_partial_##SUF(const tn_ln_args *a, int64_t r, double *pw, double *pb) {         \
        int64_t n = a->cols;                                                                       \
        const T *x = (const T *)a->x + r * n, *dy = (const T *)a->dy + r * n;                      \
        double m = (double)((const T *)a->mean)[r], rs = (double)((const T *)a->rstd)[r];          \
        for (int64_t j = 0; j < n; j++) {                                                          \
            pw[j] += (double)dy[j] * (((double)x[j] - m) * rs);                                    \
            pb[j] += (double)dy[j];                                                                \
        }                                                                                          \
    }

DEFINE_ROW_SUMS(f32, float)
DEFINE_ROW_SUMS(f64, double)
DEFINE_LN_FWD_ROW(f32, float)
DEFINE_LN_FWD_ROW(f64, double)
DEFINE_LN_DX_ROW(f32, float)
DEFINE_LN_DX_ROW(f64, double)
DEFINE_LN_PARTIAL(f32, float)
DEFINE_LN_PARTIAL(f64, double)

static void store(tn_dtype dt, void *p, int64_t j, double v) {
    if (dt == TN_F32)
        ((float *)p)[j] = (float)v;
    else
        ((double *)p)[j] = v;
}

/* The backward in one pass over blocks of TN_LN_ROW_BLOCK rows: each row's
 * dx, and the block's partial sums of dweight and dbias (part: 2 cols
 * doubles per block, or NULL); then each column's partials are summed in
 * block order. */
static void ln_backward(const tn_ln_args *a, double *part) {
    int64_t nb = (a->rows + TN_LN_ROW_BLOCK - 1) / TN_LN_ROW_BLOCK, n = a->cols;
    bool f32 = a->dtype == TN_F32;
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
            for (int64_t r = r0; r < r1; r++) {
                if (a->dx && f32)
                    ln_dx_row_f32(a, r);
                else if (a->dx)
                    ln_dx_row_f64(a, r);
                if (pw && f32)
                    ln_partial_f32(a, r, pw, pb);
                else if (pw)
                    ln_partial_f64(a, r, pw, pb);
            }
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
            if (a->dweight) store(a->dtype, a->dweight, j, sw);
            if (a->dbias) store(a->dtype, a->dbias, j, sb);
        }
    }
}

tn_status tn__cpu_layer_norm(int dev, const tn_ln_args *a) {
    (void)dev;
    if (a->dtype != TN_F32 && a->dtype != TN_F64)
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
    bool f32 = a->dtype == TN_F32;
    int nt = tn__threads_for(a->rows * a->cols);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("layer_norm");
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < a->rows; r++) {
            if (f32)
                ln_fwd_row_f32(a, r);
            else
                ln_fwd_row_f64(a, r);
        }
    }
    return TN_OK;
}
