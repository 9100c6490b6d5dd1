/* engine/cuda/softmax.cu — softmax / log_softmax forward and backward over
 * contiguous (outer, d, inner) tensors (tn_sm_args), float32 and float64.
 *
 * The formulas are the CPU's (engine/cpu/softmax_kernels.c, DEFINE_SM_ROW): the max with
 * NaN winning, sums in the element type, softmax as exp(x - max) times the
 * reciprocal of the sum, log_softmax as (x - max) - log(sum).
 *
 * Layouts, each with a fixed order of operations (deterministic):
 *  - inner > 1, or short rows: one thread per (outer, inner) row, walking d
 *    in order as the CPU does (neighbouring threads read neighbouring
 *    elements when inner > 1);
 *  - inner == 1 and d >= 17: a warp (d < 2048) or a block of 512 threads per
 *    row; each thread folds its strided elements in order, then a fixed tree.
 */
#include "cuda_internal.h"
#include "rows.cuh"

namespace tnc {

namespace {

template <typename T> struct sm_params {
    int mode;
    int64_t outer, d, inner;
    const T *x, *y;
    T *out;
};

template <typename T> __global__ void __launch_bounds__(256) sm_thread_rows(sm_params<T> a) {
    const int64_t rows = a.outer * a.inner, G = static_cast<int64_t>(gridDim.x) * 256;
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x; r < rows; r += G) {
        const int64_t o = r / a.inner, i = r - o * a.inner, st = a.inner;
        const int64_t base = o * a.d * a.inner + i;
        const T *x = a.x + base;
        T *out = a.out + base;
        if (a.mode == TN_SM_FWD || a.mode == TN_LSM_FWD) {
            T m = x[0];
            for (int64_t k = 1; k < a.d; k++)
                m = max_nan(m, x[k * st]);
            T s = 0;
            for (int64_t k = 0; k < a.d; k++)
                s += ex(x[k * st] - m);
            if (a.mode == TN_SM_FWD) {
                s = 1 / s;
                for (int64_t k = 0; k < a.d; k++)
                    out[k * st] = ex(x[k * st] - m) * s;
            } else {
                s = lg(s);
                for (int64_t k = 0; k < a.d; k++)
                    out[k * st] = (x[k * st] - m) - s;
            }
        } else {
            const T *y = a.y + base;
            T s = 0;
            for (int64_t k = 0; k < a.d; k++)
                s += a.mode == TN_SM_BWD ? x[k * st] * y[k * st] : x[k * st];
            for (int64_t k = 0; k < a.d; k++) {
                const int64_t e = k * st;
                out[e] = a.mode == TN_SM_BWD ? y[e] * (x[e] - s) : x[e] - ex(y[e]) * s;
            }
        }
    }
}

/* GROUP threads per row of d contiguous elements (inner == 1). Blocks of
 * 256 threads hold 8 warp groups; a 512-thread group is its block. */
template <int GROUP, typename T>
__global__ void __launch_bounds__(GROUP > 256 ? GROUP : 256) sm_group_rows(sm_params<T> a) {
    constexpr int BLOCK = GROUP > 256 ? GROUP : 256;
    constexpr int PER_BLOCK = BLOCK / GROUP;
    __shared__ T sh[GROUP / 32];
    const int t = threadIdx.x % GROUP;
    const int64_t d = a.d;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * PER_BLOCK + threadIdx.x / GROUP;
         row < a.outer; row += static_cast<int64_t>(gridDim.x) * PER_BLOCK) { /* group-uniform */
        const T *x = a.x + row * d;
        T *out = a.out + row * d;
        if (a.mode == TN_SM_FWD || a.mode == TN_LSM_FWD) {
            T m = -INFINITY;
            for (int64_t k = t; k < d; k += GROUP)
                m = max_nan(m, x[k]);
            m = group_allreduce<GROUP>(m, op_max<T>(), sh);
            T s = 0;
            for (int64_t k = t; k < d; k += GROUP)
                s += ex(x[k] - m);
            s = group_allreduce<GROUP>(s, op_add<T>(), sh);
            if (a.mode == TN_SM_FWD) {
                s = 1 / s;
                for (int64_t k = t; k < d; k += GROUP)
                    out[k] = ex(x[k] - m) * s;
            } else {
                s = lg(s);
                for (int64_t k = t; k < d; k += GROUP)
                    out[k] = (x[k] - m) - s;
            }
        } else {
            const T *y = a.y + row * d;
            T s = 0;
            for (int64_t k = t; k < d; k += GROUP)
                s += a.mode == TN_SM_BWD ? x[k] * y[k] : x[k];
            s = group_allreduce<GROUP>(s, op_add<T>(), sh);
            for (int64_t k = t; k < d; k += GROUP)
                out[k] = a.mode == TN_SM_BWD ? y[k] * (x[k] - s) : x[k] - ex(y[k]) * s;
        }
    }
}

template <typename T> tn_status launch(device_state *ds, const tn_sm_args *a) {
    sm_params<T> p;
    p.mode = a->mode;
    p.outer = a->outer;
    p.d = a->d;
    p.inner = a->inner;
    p.x = static_cast<const T *>(a->x);
    p.y = static_cast<const T *>(a->y);
    p.out = static_cast<T *>(a->out);
    auto grid = [&](int64_t blocks) { return grid_clamp(ds, blocks); };
    const row_layout layout = row_layout_for(a->d);
    if (a->inner > 1 || layout == ROWS_THREAD) {
        sm_thread_rows<T><<<grid(ceil_div(a->outer * a->inner, 256)), 256, 0, ds->stream>>>(p);
    } else if (layout == ROWS_WARP) {
        sm_group_rows<32, T><<<grid(ceil_div(a->outer, 8)), 256, 0, ds->stream>>>(p);
    } else {
        sm_group_rows<512, T><<<grid(a->outer), 512, 0, ds->stream>>>(p);
    }
    return launch_check("softmax");
}

} // namespace

extern "C" tn_status tn__cuda_softmax(int dev, const tn_sm_args *a) {
    tn_status st = check_float_args("softmax", a, TN_LSM_BWD + 1);
    if (st < 0) return st;
    if (a->outer < 0 || a->d < 0 || a->inner < 0)
        return tn__error(TN_ERR_SHAPE, "CUDA softmax: negative size");
    if (a->outer == 0 || a->d == 0 || a->inner == 0) return TN_OK;
    const bool bwd = a->mode == TN_SM_BWD || a->mode == TN_LSM_BWD;
    if (!a->x || !a->out || (bwd && !a->y))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA softmax: NULL operand");
    return on_device_float(dev, a->dtype,
                           [&](device_state *ds, auto t) { return launch<decltype(t)>(ds, a); });
}

} // namespace tnc
