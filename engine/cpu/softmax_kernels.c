/* The CPU's softmax-family kernel: the backend table's `softmax` entry
 * (softmax and log_softmax, forward and backward; tn_sm_args in
 * engine/core/kernel_args.h). The contiguous operands are seen as
 * (outer, d, inner) around the softmax dim; work is split into rows of one
 * outer index and up to CHUNK adjacent inner positions, and threads own
 * whole rows, so every output element is computed the same way whatever
 * the thread count.
 */
#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define CHUNK 256

#define TN_IMPL "softmax_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

typedef void (*sm_row_fn)(int mode, const void *x, const void *y, void *out, int64_t dn,
                          int64_t inner, int64_t w);
#define SM_ROW(ID, CT, S) [ID] = sm_row_##S,
static const sm_row_fn sm_rows[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(SM_ROW)};

tn_status tn__cpu_softmax(int dev, const tn_sm_args *a) {
    (void)dev;
    sm_row_fn row = (unsigned)a->dtype < TN_DTYPE_COUNT ? sm_rows[a->dtype] : NULL;
    if (!row)
        return tn__error(TN_ERR_DTYPE, "softmax: no CPU kernel for %s", tn_dtype_name(a->dtype));
    int64_t chunks = (a->inner + CHUNK - 1) / CHUNK, rows = a->outer * chunks;
    int nt = tn__threads_for(a->outer * a->d * a->inner);
    (void)nt; /* only read by OpenMP */
    size_t es = tn__dtype_sizes[a->dtype];
    const char *xp = a->x, *yp = a->y;
    char *op = a->out;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        TN_OMP_SPAN("softmax");
#pragma omp for schedule(static) nowait
        for (int64_t r = 0; r < rows; r++) {
            int64_t o = r / chunks, i0 = r % chunks * CHUNK;
            int64_t w = a->inner - i0 < CHUNK ? a->inner - i0 : CHUNK;
            size_t off = (size_t)(o * a->d * a->inner + i0) * es;
            const char *y = yp ? yp + off : NULL;
            row(a->mode, xp + off, y, op + off, a->d, a->inner, w);
        }
    }
    return TN_OK;
}
