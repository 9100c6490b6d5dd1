/* Devices: availability, the result-device rule, and the dispatch of kernel
 * families to the CPU kernels or a device backend (device.h; reductions:
 * reduce.c). */
#include <stdio.h>

#include "device.h"
#include "hooks.h"
#include "widen.h"

/* relaxed: a plain setting, read when a product is enqueued. */
static _Atomic bool g_allow_tf32 = false;

bool tn__tf32_allowed(void) { return atomic_load_explicit(&g_allow_tf32, memory_order_relaxed); }

void tn_cuda_set_allow_tf32(bool allow) {
    atomic_store_explicit(&g_allow_tf32, allow, memory_order_relaxed);
}

bool tn_cuda_is_available(void) { return tn_cuda_device_count() > 0; }

/* Loads the CUDA back end on the first call (libtenet.so: its plugin). */
int tn_cuda_device_count(void) {
    const tn_backend *be = tn__backend_load(TN_CUDA); /* NULL: the error says why */
    int n = be ? be->device_count() : 0;
    if (be && n == 0) tn__error(TN_ERR_DEVICE, "No CUDA GPUs are available");
    return n;
}

const char *tn__device_str(tn_device d, char *buf, size_t n) {
    if (d.type == TN_CPU) snprintf(buf, n, "cpu");
    else if (d.type == TN_CUDA) snprintf(buf, n, "cuda:%d", d.index);
    else snprintf(buf, n, "device type %d", (int)d.type);
    return buf;
}

tn_status tn__check_device(tn_device d) {
    if (d.type == TN_CPU) {
        if (d.index == 0 || d.index == -1) return TN_OK;
        return tn__error(TN_ERR_DEVICE, "CPU device index must be 0 or -1, got %d", d.index);
    }
    const tn_backend *be = tn__backend_load(d.type); /* NULL: the error says why */
    if (!be) return tn_last_status();
    int n = be->device_count();
    if (n == 0) return tn__error(TN_ERR_DEVICE, "No CUDA GPUs are available");
    if (d.index < 0 || d.index >= n)
        return tn__error(TN_ERR_DEVICE, "CUDA error: invalid device ordinal (cuda:%d of %d)",
                         d.index, n);
    return TN_OK;
}

const tn_backend *tn__backend_of(tn_device d) {
    /* the check loaded d's back end, and ordered its table before this read */
    return tn__check_device(d) < 0 ? NULL : tn__backends[d.type];
}

tn_status tn_synchronize(tn_device d) {
    if (d.type == TN_CPU) return tn__check_device(d);
    const tn_backend *be = tn__backend_of(d);
    tn_status st = be ? be->synchronize(d.index) : tn_last_status();
    return tn__sync_point(d, st); /* anomaly mode: the forward NaN/Inf its checks found */
}

tn_status tn__result_device_slow(int n, const tn_tensor *const *ts, tn_device *out) {
    const tn_tensor *first = NULL;
    for (int i = 0; i < n; i++) {
        const tn_tensor *t = ts[i];
        if (!t || (tn__on_cpu(t) && t->ndim == 0)) continue; /* CPU scalars join any device */
        if (!first) {
            first = t;
        } else if (!tn__same_device(tn__dev(first), tn__dev(t))) {
            char a[32], b[32];
            return tn__error(TN_ERR_DEVICE,
                             "Expected all tensors to be on the same device, but found at least "
                             "two devices, %s and %s!",
                             tn__device_str(tn__dev(first), a, sizeof a),
                             tn__device_str(tn__dev(t), b, sizeof b));
        }
    }
    *out = first ? tn__dev(first) : TN_DEVICE_CPU;
    return TN_OK;
}

tn_tensor *tn__on_device(const tn_tensor *t, tn_device d) {
    if (tn__same_device(tn__dev(t), d)) return tn__retain(t);
    return tn__copy_to_device(t, t->dtype, d);
}

/* A fused family's call with half operands: the float32 kernel on float32
 * copies (widen.h). F is the family's arguments, copied, with dtype set to
 * float32; the variadic list names its pointer arguments; CALL runs on the
 * copies' operands, w.ops. */
#define WIDEN_CALL(NOPS, OPS, WRITTEN, CALL, ...)                                               \
    do {                                                                                           \
        void *const fields[] = {__VA_ARGS__};                                                      \
        tn_widen w;                                                                                \
        tn_status wst = tn__widen_begin(&w, NOPS, OPS, WRITTEN, fields,                            \
                                        (int)(sizeof fields / sizeof *fields));                    \
        if (wst == TN_OK) wst = (CALL);                                                            \
        return tn__widen_end(&w, wst);                                                             \
    } while (0)

/* ---- dispatch ---------------------------------------------------------------------------- */

/* Whether a back end is asked a call of dtype dt itself: any non-half dtype, and a half one
 * whose bit its table sets (gemm_halves, attention_halves); it may still decline that call
 * (TN__DECLINED), and core then makes float32 copies (WIDEN_CALL). */
static bool asks_backend(uint32_t halves, tn_dtype dt) {
    return !tn__is_half(dt) || (halves & (1u << dt));
}

tn_status tn__dev_pointwise(tn_pw_code code, tn_dtype dt, int nops, tn_tensor *const *ops,
                            const void *ctx, bool serial) {
    tn_device dev = tn__dev(ops[0]);
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    tn_iter it;
    tn__iter_init(&it, nops, ops);
    if (it.numel == 0) return TN_OK; /* empty: no kernel on any back end */
    it.serial = serial;
    tn_race_access ra; /* operand 0 written, the others read */
    tn__race_begin(&ra, nops, (const tn_tensor *const *)ops, 1u, "elementwise");
    tn_status st = be->pointwise(dev.index, code, dt, &it, ctx);
    tn__race_end(&ra);
    return st;
}

tn_status tn__dev_gemm(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b, tn_device dev,
                       int nops, const tn_tensor *const *ops) {
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    tn_status st = TN__DECLINED;
    if (asks_backend(be->gemm_halves, dt)) {
        tn_race_access ra; /* C written, A and B read */
        tn__race_begin(&ra, nops, ops, 1u, "matmul");
        st = be->gemm(dev.index, dt, g, b);
        tn__race_end(&ra);
    }
    if (st == TN__DECLINED && tn__is_half(dt)) { /* float32 copies through the float32 gemm */
        tn_gemm f = *g;
        WIDEN_CALL(nops, ops, 1u, tn__dev_gemm(TN_F32, &f, b, dev, nops, w.ops), &f.a, &f.b,
                   &f.c);
    }
    return st == TN__DECLINED
               ? tn__error(TN_ERR_INTERNAL, "gemm declined a %s product", tn_dtype_name(dt))
               : st;
}

tn_status tn__dev_softmax(const tn_sm_args *a, tn_device dev, int nops,
                          const tn_tensor *const *ops) {
    if (a->outer == 0 || a->d == 0 || a->inner == 0) return TN_OK; /* empty */
    if (tn__is_half(a->dtype)) {
        tn_sm_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(nops, ops, 1u, tn__dev_softmax(&f, dev, nops, w.ops), &f.x, &f.y, &f.out);
    }
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    tn_race_access ra; /* out written, x and y read */
    tn__race_begin(&ra, nops, ops, 1u, "softmax");
    tn_status st = be->softmax(dev.index, a);
    tn__race_end(&ra);
    if (st == TN_OK) tn__storage_wrote(ops[0]->storage);
    return st;
}

bool tn__dev_has_cross_entropy(tn_device dev) {
    const tn_backend *be = tn__table_of(dev);
    return be && be->cross_entropy;
}

tn_status tn__dev_cross_entropy(const tn_ce_args *a, tn_device dev, int nops,
                                const tn_tensor *const *ops) {
    bool fwd = a->mode == TN_CE_FWD;
    if (tn__is_half(a->dtype)) {
        tn_ce_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(nops, ops, fwd ? 3u : 1u, tn__dev_cross_entropy(&f, dev, nops, w.ops), &f.x,
                   &f.stats, &f.loss, &f.g, &f.gx);
    }
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->cross_entropy) return tn__error(TN_ERR_INTERNAL, "no fused cross_entropy kernel");
    tn_race_access ra; /* forward: loss and stats written; backward: gx */
    tn__race_begin(&ra, nops, ops, fwd ? 3u : 1u, "cross_entropy");
    tn_status st = be->cross_entropy(dev.index, a);
    tn__race_end(&ra);
    if (st == TN_OK) tn__storage_wrote(ops[0]->storage);
    if (st == TN_OK && fwd) tn__storage_wrote(ops[1]->storage);
    return st;
}

tn_status tn__dev_layer_norm(const tn_ln_args *a, tn_device dev, int nops,
                             const tn_tensor *const *ops, unsigned written) {
    if (a->rows == 0 || a->cols == 0) return TN_OK; /* empty: the op fills what it needs */
    if (tn__is_half(a->dtype)) {
        tn_ln_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(nops, ops, written, tn__dev_layer_norm(&f, dev, nops, w.ops, written), &f.x,
                   &f.weight, &f.bias, &f.mean, &f.rstd, &f.y, &f.dy, &f.dx, &f.dweight,
                   &f.dbias);
    }
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->layer_norm) return tn__error(TN_ERR_INTERNAL, "no layer_norm kernel");
    tn_race_access ra;
    tn__race_begin(&ra, nops, ops, written, "layer_norm");
    tn_status st = be->layer_norm(dev.index, a);
    tn__race_end(&ra);
    for (int i = 0; st == TN_OK && i < nops; i++)
        if ((written >> i & 1u) && ops[i]) tn__storage_wrote(ops[i]->storage);
    return st;
}

tn_status tn__dev_channel_norm(const tn_cn_args *a, tn_device dev, int nops,
                               const tn_tensor *const *ops, unsigned written) {
    if (a->n == 0 || a->c == 0 || a->s == 0) return TN_OK; /* empty: the op fills what it needs */
    if (tn__is_half(a->dtype)) {
        tn_cn_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(nops, ops, written, tn__dev_channel_norm(&f, dev, nops, w.ops, written), &f.x,
                   &f.weight, &f.bias, &f.mean, &f.rstd, &f.var, &f.running_mean,
                   &f.running_var, &f.y, &f.dy, &f.dx, &f.dweight, &f.dbias);
    }
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->channel_norm) return tn__error(TN_ERR_INTERNAL, "no batch_norm kernel");
    tn_race_access ra;
    tn__race_begin(&ra, nops, ops, written, "batch_norm");
    tn_status st = be->channel_norm(dev.index, a);
    tn__race_end(&ra);
    for (int i = 0; st == TN_OK && i < nops; i++)
        if ((written >> i & 1u) && ops[i]) tn__storage_wrote(ops[i]->storage);
    return st;
}

tn_status tn__dev_attention(const tn_attn_args *a, tn_device dev, int nops, int n_out,
                            const tn_tensor *const *ops) {
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->attention) return tn__error(TN_ERR_INTERNAL, "no fused attention kernel");
    tn_status st = TN__DECLINED;
    if (asks_backend(be->attention_halves, a->dtype)) {
        tn_race_access ra;
        tn__race_begin(&ra, nops, ops, (1u << n_out) - 1u, "scaled_dot_product_attention");
        st = be->attention(dev.index, a);
        tn__race_end(&ra);
    }
    if (st == TN__DECLINED && tn__is_half(a->dtype)) { /* float32 copies */
        tn_attn_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(nops, ops, (1u << n_out) - 1u, tn__dev_attention(&f, dev, nops, n_out, w.ops),
                   &f.q, &f.k, &f.v, &f.mask, &f.o, &f.lse, &f.dout, &f.dq, &f.dk, &f.dv);
    }
    if (st == TN__DECLINED)
        return tn__error(TN_ERR_INTERNAL, "attention declined a %s call", tn_dtype_name(a->dtype));
    for (int i = 0; st == TN_OK && i < n_out; i++) tn__storage_wrote(ops[i]->storage);
    return st;
}

tn_status tn__dev_conv(const tn_conv_args *a, tn_device dev, const tn_tensor *const ops[2]) {
    int64_t nim = a->nb * a->c * a->h * a->w, ncol = a->nb * a->c * a->kh * a->kw * a->oh * a->ow;
    if ((a->mode == TN_CONV_IM2COL ? ncol : nim) == 0) return TN_OK; /* nothing to write */
    if (tn__is_half(a->dtype)) {
        tn_conv_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(2, ops, 1u, tn__dev_conv(&f, dev, w.ops), &f.im, &f.col);
    }
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->conv) return tn__error(TN_ERR_INTERNAL, "no convolution kernel");
    tn_race_access ra;
    tn__race_begin(&ra, 2, ops, 1u, a->mode == TN_CONV_IM2COL ? "im2col" : "col2im");
    tn_status st = be->conv(dev.index, a);
    tn__race_end(&ra);
    if (st == TN_OK) tn__storage_wrote(ops[0]->storage);
    return st;
}

tn_status tn__dev_pool(const tn_pool_args *a, tn_device dev, const tn_tensor *const ops[3]) {
    bool fwd = a->mode == TN_POOL_MAX_FWD || a->mode == TN_POOL_AVG_FWD;
    if (a->planes * (fwd ? a->oh * a->ow : a->h * a->w) == 0) return TN_OK; /* nothing to write */
    if (tn__is_half(a->dtype)) { /* idx (int64) is never widened */
        tn_pool_args f = *a;
        f.dtype = TN_F32;
        WIDEN_CALL(ops[2] ? 3 : 2, ops, 1u, tn__dev_pool(&f, dev, w.ops), &f.in, &f.out);
    }
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->pool) return tn__error(TN_ERR_INTERNAL, "no pooling kernel");
    unsigned written = a->mode == TN_POOL_MAX_FWD ? 5u : 1u;
    tn_race_access ra;
    tn__race_begin(&ra, ops[2] ? 3 : 2, ops, written, fwd ? "pool" : "pool_backward");
    tn_status st = be->pool(dev.index, a);
    tn__race_end(&ra);
    if (st == TN_OK) tn__storage_wrote(ops[0]->storage);
    if (st == TN_OK && written == 5u) tn__storage_wrote(ops[2]->storage);
    return st;
}

tn_status tn__dev_read(const tn_tensor *t, void *host, size_t n) {
    if (tn__on_cpu(t)) {
        memcpy(host, tn__ptr(t), n);
        return TN_OK;
    }
    const tn_backend *be = tn__backend_of(tn__dev(t));
    tn_status st = be ? be->memcpy(tn__dev(t).index, host, tn__ptr(t), n, TN_COPY_D2H)
                      : tn_last_status();
    /* a synchronisation point: report what anomaly mode's checks found */
    (void)tn__sync_point(tn__dev(t), st);
    return st;
}

tn_status tn__dev_write(tn_tensor *t, const void *host, size_t n) {
    if (tn__on_cpu(t)) {
        memcpy(tn__ptr(t), host, n);
        return TN_OK;
    }
    tn__before_write(1, (const tn_tensor *const *)&t, 1u);
    const tn_backend *be = tn__backend_of(tn__dev(t));
    return be ? be->memcpy(tn__dev(t).index, tn__ptr(t), host, n, TN_COPY_H2D) : tn_last_status();
}

tn_status tn__dev_transfer(tn_tensor *dst, const tn_tensor *src) {
    size_t n = (size_t)tn__numel(src->ndim, src->shape) * tn__dtype_sizes[src->dtype];
    if (n == 0) return TN_OK;
    if (tn__on_cpu(src)) return tn__dev_write(dst, tn__ptr(src), n);
    if (tn__on_cpu(dst)) return tn__dev_read(src, tn__ptr(dst), n);
    if (tn__same_device(tn__dev(src), tn__dev(dst))) {
        tn__before_write(1, (const tn_tensor *const *)&dst, 1u);
        const tn_backend *be = tn__backend_of(tn__dev(dst));
        return be ? be->memcpy(tn__dev(dst).index, tn__ptr(dst), tn__ptr(src), n, TN_COPY_D2D)
                  : tn_last_status();
    }
    /* two GPUs: through the host (peer copies are not worth it for a rare path) */
    void *tmp = tn__alloc(n);
    tn_status st = tmp ? tn__dev_read(src, tmp, n) : tn_last_status();
    if (st == TN_OK) st = tn__dev_write(dst, tmp, n);
    tn__free(tmp);
    return st;
}

tn_status tn__dev_index(const tn_index_args *a, tn_device dev, const tn_tensor *const ops[3]) {
    const tn_backend *be = tn__table_of(dev);
    if (!be) return tn_last_status();
    if (!be->index) return tn__error(TN_ERR_DEVICE, "no indexing kernel on this device");
    tn_race_access ra; /* out written (and read by the adds), src and idx read */
    tn__race_begin(&ra, 3, ops, 1u, "index");
    tn_status st = be->index(dev.index, a);
    tn__race_end(&ra);
    if (st == TN_OK) tn__storage_wrote(ops[0]->storage);
    return st;
}
