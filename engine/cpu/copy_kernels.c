/* The CPU's copy and fill kernels (backend.h's copy and fill entries): every
 * dtype pair, contiguous, broadcast, transposed and strided rows. */
#include "cpu_backend.h"
#include "dtype_dispatch.h"

/* dst is (N), src is (N) or broadcast (stride 0): out[i] = (D)src[i]. */
#define DEFINE_COPY(DID, DT, DS, SID, ST, SS)                                            \
    static void copy_##DS##_##SS(void *ctx, int64_t n, char **p, const int64_t *s) {     \
        (void)ctx;                                                                       \
        if (s[0] == sizeof(DT) && s[1] == sizeof(ST)) {                                  \
            DT *o = (DT *)p[0];                                                          \
            const ST *x = (const ST *)p[1];                                              \
            for (int64_t i = 0; i < n; i++) o[i] = TN_CVT(DT, x[i]);                     \
        } else if (s[0] == sizeof(DT) && s[1] == 0) {                                   \
            DT *o = (DT *)p[0];                                                          \
            DT v = TN_CVT(DT, *(const ST *)p[1]);                                        \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                    \
        } else if (s[0] == sizeof(DT) && s[1] % (int64_t)sizeof(ST) == 0) {             \
            /* a transposed source (iter.c tiles it): indexed, so it vectorises      \
             * as a gather */                                                        \
            DT *o = (DT *)p[0];                                                          \
            const ST *x = (const ST *)p[1];                                              \
            int64_t xs = s[1] / (int64_t)sizeof(ST);                                     \
            for (int64_t i = 0; i < n; i++) o[i] = TN_CVT(DT, x[i * xs]);                \
        } else {                                                                         \
            char *o = p[0];                                                              \
            const char *x = p[1];                                                        \
            for (int64_t i = 0; i < n; i++, o += s[0], x += s[1])                        \
                *(DT *)o = TN_CVT(DT, *(const ST *)x);                                   \
        }                                                                                \
    }

#define DEFINE_COPY_FROM(SID, ST, SS) TN_FOR_EACH_DTYPE_D(DEFINE_COPY, SID, ST, SS)
#define TN_FOR_EACH_DTYPE_D(M, SID, ST, SS)                                              \
    M(TN_F32, float, f32, SID, ST, SS)                                                   \
    M(TN_F64, double, f64, SID, ST, SS)                                                  \
    M(TN_I16, int16_t, i16, SID, ST, SS)                                                 \
    M(TN_I32, int32_t, i32, SID, ST, SS)                                                 \
    M(TN_I64, int64_t, i64, SID, ST, SS)                                                 \
    M(TN_BOOL, uint8_t, b8, SID, ST, SS)
TN_FOR_EACH_DTYPE(DEFINE_COPY_FROM)

#define COPY_ENTRY(DID, DT, DS, SID, ST, SS) [DID][SID] = copy_##DS##_##SS,
#define COPY_ROW(SID, ST, SS) TN_FOR_EACH_DTYPE_D(COPY_ENTRY, SID, ST, SS)
static const tn_loop_fn copy_loops[TN_DTYPE_COUNT][TN_DTYPE_COUNT] = {
    TN_FOR_EACH_DTYPE(COPY_ROW)};

#define DEFINE_FILL(ID, T, S)                                                            \
    static void fill_##S(void *ctx, int64_t n, char **p, const int64_t *s) {             \
        T v = TN_SCALAR(T, *(const double *)ctx);                                        \
        if (s[0] == sizeof(T)) {                                                         \
            T *o = (T *)p[0];                                                            \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                    \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = v;                 \
        }                                                                                \
    }
TN_FOR_EACH_DTYPE(DEFINE_FILL)
#define FILL_ENTRY(ID, T, S) [ID] = fill_##S,
static const tn_loop_fn fill_loops[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(FILL_ENTRY)};


tn_status tn__cpu_copy(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it) {
    (void)dev;
    tn__iter_run(it, copy_loops[dst][src], NULL);
    return TN_OK;
}

tn_status tn__cpu_fill(int dev, tn_dtype dt, const tn_iter *it, double v) {
    (void)dev;
    tn__iter_run(it, fill_loops[dt], &v);
    return TN_OK;
}
