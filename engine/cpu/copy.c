/* Copy with broadcast and dtype conversion, fill: the kernels behind
 * contiguous(), clone(), copy_(), to() and creation. */
#include "../core/device.h"
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

/* dst and src on different devices (shapes checked): the bytes cross once,
 * as a contiguous block in dst's dtype and shape, converted and broadcast
 * on the source's device and scattered into a strided dst on its own. */
static tn_status copy_across(tn_tensor *dst, const tn_tensor *src) {
    bool direct = src->dtype == dst->dtype && tn__same_shape(src, dst) && tn__is_contiguous(src);
    tn_tensor *stage = direct ? tn__retain((tn_tensor *)src)
                              : tn__empty_on(dst->ndim, dst->shape, dst->dtype, tn__dev(src));
    tn_status st = stage ? TN_OK : tn_last_status();
    if (st == TN_OK && !direct) st = tn__copy_into(stage, src);
    tn_tensor *land = NULL;
    if (st == TN_OK) {
        land = tn__is_contiguous(dst) ? tn__retain(dst) : tn__empty_like(dst);
        st = land ? tn__dev_transfer(land, stage) : tn_last_status();
    }
    if (st == TN_OK && land != dst) st = tn__copy_into(dst, land);
    tn_release(land);
    tn_release(stage);
    if (st == TN_OK) tn__storage_wrote(dst->storage);
    return st;
}

tn_status tn__copy_into(tn_tensor *dst, const tn_tensor *src) {
    int nd;
    int64_t shape[TN_MAX_DIMS];
    if (tn__broadcast_shape(dst->ndim, dst->shape, src->ndim, src->shape, &nd, shape) < 0)
        return TN_ERR_SHAPE;
    if (nd != dst->ndim || memcmp(shape, dst->shape, (size_t)nd * sizeof *shape) != 0) {
        char a[128], b[128];
        tn__format_shape(a, sizeof a, src->ndim, src->shape);
        tn__format_shape(b, sizeof b, dst->ndim, dst->shape);
        return tn__error(TN_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s",
                         b, a);
    }
    if (!tn__same_device(tn__dev(dst), tn__dev(src))) return copy_across(dst, src);
    tn_iter it;
    tn__iter_init(&it, 2, (tn_tensor *const[]){dst, (tn_tensor *)src});
    if (tn__on_cpu(dst)) {
        tn__iter_run(&it, copy_loops[dst->dtype][src->dtype], NULL, true);
    } else {
        const tn_backend *be = tn__backend_of(tn__dev(dst));
        tn_status st = be ? be->copy(tn__dev(dst).index, dst->dtype, src->dtype, &it) : TN_ERR_DEVICE;
        if (st < 0) return st;
    }
    tn__storage_wrote(dst->storage);
    return TN_OK;
}

tn_tensor *tn__copy_to_device(const tn_tensor *src, tn_dtype dt, tn_device dev) {
    tn_tensor *t = tn__empty_on(src->ndim, src->shape, dt, dev);
    if (t && tn__copy_into(t, src) < 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

tn_tensor *tn__copy_as(const tn_tensor *src, tn_dtype dt) {
    return tn__copy_to_device(src, dt, tn__dev(src));
}

tn_tensor *tn__cast(const tn_tensor *src, tn_dtype dt) {
    if (src->dtype == dt) return tn__retain((tn_tensor *)src);
    return tn__copy_as(src, dt);
}

#define DEFINE_FILL(ID, T, S)                                                            \
    static void fill_##S(void *ctx, int64_t n, char **p, const int64_t *s) {             \
        T v = TN_CVT(T, *(const double *)ctx);                                           \
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

tn_status tn__fill_into(tn_tensor *dst, double v) {
    tn_iter it;
    tn__iter_init(&it, 1, (tn_tensor *const[]){dst});
    if (tn__on_cpu(dst)) {
        tn__iter_run(&it, fill_loops[dst->dtype], &v, true);
    } else {
        const tn_backend *be = tn__backend_of(tn__dev(dst));
        tn_status st = be ? be->fill(tn__dev(dst).index, dst->dtype, &it, v) : TN_ERR_DEVICE;
        if (st < 0) return st;
    }
    tn__storage_wrote(dst->storage);
    return TN_OK;
}
