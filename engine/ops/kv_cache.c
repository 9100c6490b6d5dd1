/* The KV cache of tenet/kv_cache.h: per layer, keys and values (B, H, Tmax,
 * D) allocated once and written by slots; attention through the fused
 * kernel (attention.c's tn__sdpa_offset) with the causal offset S - n and,
 * under left padding, a bool key mask (B, 1, 1, Tmax) made once by
 * set_padding and read through a (B, 1, 1, S) view.
 */
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"

struct tn_kv_cache {
    int layers;
    int64_t B, H, Tmax, D;
    tn_dtype dtype;
    tn_device dev;
    tn_tensor **k, **v; /* per layer, (B, H, Tmax, D) contiguous */
    int64_t *len;       /* per layer: slots written */
    int64_t *pad;       /* per row: leading padding slots */
    tn_tensor *keep;    /* bool (B, 1, 1, Tmax): key takes part; NULL without padding */
};

static tn_status bad_layer(const tn_kv_cache *c, int layer, const char *fn) {
    return tn__error(TN_ERR_INDEX, "%s: layer %d out of range for a cache of %d layers", fn, layer,
                     c->layers);
}

tn_kv_cache *tn_kv_cache_new(int layers, int64_t batch, int64_t heads, int64_t max_len,
                             int64_t head_dim, tn_dtype dtype, tn_device device) {
    if (layers < 1 || batch < 1 || heads < 1 || max_len < 1 || head_dim < 1) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "tn_kv_cache_new: layers, batch, heads, max_len and head_dim must be positive, "
                  "got %d, %lld, %lld, %lld, %lld",
                  layers, (long long)batch, (long long)heads, (long long)max_len,
                  (long long)head_dim);
        return NULL;
    }
    if (!tn__valid_dtype(dtype) || !tn__is_float(dtype)) {
        tn__error(TN_ERR_DTYPE, "tn_kv_cache_new: float32, float64, bfloat16 or float16, not %s",
                  tn__valid_dtype(dtype) ? tn_dtype_name(dtype) : "?");
        return NULL;
    }
    /* keys and values of every layer: each may fit alone where all of them cannot */
    const int64_t shape[4] = {batch, heads, max_len, head_dim};
    int64_t numel;
    uint64_t total;
    if (tn__check_shape(4, shape, dtype, &numel) < 0) {
        tn__error(tn_last_status(), "tn_kv_cache_new: %s", tn_last_error());
        return NULL;
    }
    /* each layer's two buffers with their handles and storages (~512 bytes each) */
    if (__builtin_mul_overflow((uint64_t)numel * tn__dtype_sizes[dtype] + 512, 2 * (uint64_t)layers,
                               &total))
        total = UINT64_MAX;
    if (device.type == TN_CPU && tn__check_total_bytes("tn_kv_cache_new", total) < 0) return NULL;
    tn_kv_cache *c = tn__calloc_quiet(1, sizeof *c);
    if (!c) {
        tn__error(TN_ERR_OUT_OF_MEMORY, "tn_kv_cache_new: out of memory");
        return NULL;
    }
    *c = (tn_kv_cache){.layers = layers,
                       .B = batch,
                       .H = heads,
                       .Tmax = max_len,
                       .D = head_dim,
                       .dtype = dtype,
                       .dev = device};
    c->k = tn__calloc_quiet((size_t)layers, sizeof *c->k);
    c->v = tn__calloc_quiet((size_t)layers, sizeof *c->v);
    c->len = tn__calloc_quiet((size_t)layers, sizeof *c->len);
    c->pad = tn__calloc_quiet((size_t)batch, sizeof *c->pad);
    if (!(c->k && c->v && c->len && c->pad)) {
        tn_kv_cache_free(c);
        tn__error(TN_ERR_OUT_OF_MEMORY, "tn_kv_cache_new: out of memory");
        return NULL;
    }
    bool ok = true;
    for (int l = 0; ok && l < layers; l++)
        ok = (c->k[l] = tn__empty_on(4, shape, dtype, device)) &&
             (c->v[l] = tn__empty_on(4, shape, dtype, device));
    if (!ok) {
        tn_status st = tn_last_status();
        tn_kv_cache_free(c); /* sets no error */
        tn__error(st, "tn_kv_cache_new: %s", tn_last_error());
        return NULL;
    }
    return c;
}

void tn_kv_cache_free(tn_kv_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->layers; l++) {
        if (c->k) tn_release(c->k[l]);
        if (c->v) tn_release(c->v[l]);
    }
    tn_release(c->keep);
    tn__mfree(c->k), tn__mfree(c->v), tn__mfree(c->len), tn__mfree(c->pad);
    tn__mfree(c);
}

tn_status tn_kv_cache_reset(tn_kv_cache *c) {
    TN_CHECK_NULL_PTR_ST(c, "cache");
    memset(c->len, 0, (size_t)c->layers * sizeof *c->len);
    return tn_kv_cache_set_padding(c, NULL);
}

/* The key mask of pad: keep[b, t] = t >= pad[b], on the cache's device. */
static tn_tensor *make_keep(const tn_kv_cache *c, const int64_t *pad) {
    tn_tensor *h = tn__empty(4, (int64_t[]){c->B, 1, 1, c->Tmax}, TN_BOOL);
    if (!h) return NULL;
    uint8_t *p = (uint8_t *)tn__ptr(h);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t t = 0; t < c->Tmax; t++)
            p[b * c->Tmax + t] = t >= pad[b];
    tn_tensor *d = tn__on_device(h, c->dev);
    tn_release(h);
    return d;
}

tn_status tn_kv_cache_set_padding(tn_kv_cache *c, const int64_t *pad) {
    TN_CHECK_NULL_PTR_ST(c, "cache");
    for (int l = 0; l < c->layers; l++)
        if (c->len[l])
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "tn_kv_cache_set_padding: layer %d already holds %lld positions: "
                             "set the padding of an empty cache (tn_kv_cache_reset)",
                             l, (long long)c->len[l]);
    bool any = false;
    for (int64_t b = 0; pad && b < c->B; b++) {
        if (pad[b] < 0 || pad[b] > c->Tmax)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "tn_kv_cache_set_padding: pad[%lld] = %lld outside [0, %lld]",
                             (long long)b, (long long)pad[b], (long long)c->Tmax);
        any |= pad[b] > 0;
    }
    tn_tensor *keep = any ? make_keep(c, pad) : NULL;
    if (any && !keep) return tn_last_status();
    tn_release(c->keep);
    c->keep = keep;
    for (int64_t b = 0; b < c->B; b++)
        c->pad[b] = pad ? pad[b] : 0;
    return TN_OK;
}

int64_t tn_kv_cache_length(const tn_kv_cache *c, int layer) {
    if (!c) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_kv_cache_length: cache is NULL"), -1;
    if (layer < 0 || layer >= c->layers) return bad_layer(c, layer, "tn_kv_cache_length"), -1;
    return c->len[layer];
}

int64_t tn_kv_cache_max_length(const tn_kv_cache *c) {
    if (!c) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_kv_cache_max_length: cache is NULL"), -1;
    return c->Tmax;
}

/* Slots [t0, t0 + n) of a layer's tensor as a (B, H, n, D) alias. */
static tn_tensor *slots(const tn_kv_cache *c, tn_tensor *t, int64_t t0, int64_t n) {
    const int64_t shape[4] = {c->B, c->H, n, c->D};
    const int64_t stride[4] = {c->H * c->Tmax * c->D, c->Tmax * c->D, c->D, 1};
    return tn__alias(t, 4, shape, stride, t0 * c->D);
}

/* x must be (B, H, n, D) for some n, of the cache's dtype and device. */
static tn_status check_operand(const tn_kv_cache *c, const tn_tensor *x, const char *fn,
                               const char *name) {
    const int64_t want[4] = {c->B, c->H, x->ndim == 4 ? x->shape[2] : 0, c->D};
    if (x->ndim != 4 || memcmp(x->shape, want, sizeof want) != 0) {
        char got[128], exp[128];
        tn__format_shape(got, sizeof got, x->ndim, x->shape);
        snprintf(exp, sizeof exp, "[%lld, %lld, n, %lld]", (long long)c->B, (long long)c->H,
                 (long long)c->D);
        return tn__error(TN_ERR_SHAPE, "%s: %s of shape %s, the cache expects %s", fn, name, got,
                         exp);
    }
    if (x->dtype != c->dtype)
        return tn__error(TN_ERR_DTYPE, "%s: %s is %s, the cache holds %s", fn, name,
                         tn_dtype_name(x->dtype), tn_dtype_name(c->dtype));
    if (!tn__same_device(tn__dev(x), c->dev)) {
        char a[32], b[32];
        return tn__error(TN_ERR_DEVICE, "%s: %s is on %s, the cache on %s", fn, name,
                         tn__device_str(tn__dev(x), a, sizeof a),
                         tn__device_str(c->dev, b, sizeof b));
    }
    return TN_OK;
}

tn_status tn_kv_cache_append(tn_kv_cache *c, int layer, const tn_tensor *k, const tn_tensor *v) {
    static const char fn[] = "tn_kv_cache_append";
    TN_CHECK_NULL_PTR_ST(c, "cache");
    TN_CHECK_NULL_ARG_ST(k, "k");
    TN_CHECK_NULL_ARG_ST(v, "v");
    if (layer < 0 || layer >= c->layers) return bad_layer(c, layer, fn);
    tn_status st = check_operand(c, k, fn, "k");
    if (st == TN_OK) st = check_operand(c, v, fn, "v");
    if (st == TN_OK && v->shape[2] != k->shape[2])
        st = tn__error(TN_ERR_SHAPE, "%s: k holds %lld positions and v %lld", fn,
                       (long long)k->shape[2], (long long)v->shape[2]);
    if (st < 0) return st;
    int64_t n = k->shape[2], len = c->len[layer];
    if (n > c->Tmax - len)
        return tn__error(TN_ERR_INDEX,
                         "%s: layer %d holds %lld of its %lld positions: %lld more do not fit "
                         "(nothing appended)",
                         fn, layer, (long long)len, (long long)c->Tmax, (long long)n);
    tn_tensor *dk = slots(c, c->k[layer], len, n), *dv = dk ? slots(c, c->v[layer], len, n) : NULL;
    st = dv ? tn__copy_into(dk, k) : tn_last_status();
    if (st == TN_OK) st = tn__copy_into(dv, v);
    tn_release(dk), tn_release(dv);
    if (st == TN_OK) c->len[layer] = len + n;
    return st;
}

tn_tensor *tn_kv_cache_attention(tn_kv_cache *c, int layer, const tn_tensor *q) {
    static const char fn[] = "tn_kv_cache_attention";
    TN_CHECK_NULL_PTR(c, "cache");
    TN_CHECK_NULL_ARG(q, "q");
    if (layer < 0 || layer >= c->layers) return bad_layer(c, layer, fn), NULL;
    if (check_operand(c, q, fn, "q") < 0) return NULL;
    int64_t n = q->shape[2], S = c->len[layer];
    if (n > S) {
        tn__error(TN_ERR_SHAPE,
                  "%s: %lld queries but layer %d holds %lld positions (append the new keys and "
                  "values first)",
                  fn, (long long)n, layer, (long long)S);
        return NULL;
    }
    if (tn__grad_enabled() && tn__requires_grad(q)) {
        tn__error(TN_ERR_AUTOGRAD,
                  "%s: the cache is for inference and records no gradient, "
                  "but q requires grad: call it under no-grad",
                  fn);
        return NULL;
    }
    tn_tensor *k = slots(c, c->k[layer], 0, S), *v = k ? slots(c, c->v[layer], 0, S) : NULL;
    tn_tensor *m = v && c->keep ? tn__alias(c->keep, 4, (int64_t[]){c->B, 1, 1, S},
                                            (int64_t[]){c->Tmax, c->Tmax, c->Tmax, 1}, 0)
                                : NULL;
    tn_tensor *out = v && (m || !c->keep) ? tn__sdpa_offset(q, k, v, m, S - n) : NULL;
    tn_release(k), tn_release(v), tn_release(m);
    return out ? tn__ret(out) : NULL;
}

tn_tensor *tn_kv_cache_positions(const tn_kv_cache *c, int64_t n) {
    TN_CHECK_NULL_PTR(c, "cache");
    if (n < 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "tn_kv_cache_positions: n = %lld", (long long)n);
        return NULL;
    }
    tn_tensor *h = tn__empty(2, (int64_t[]){c->B, n}, TN_I64);
    if (!h) return NULL;
    int64_t *p = (int64_t *)tn__ptr(h);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < n; i++) {
            int64_t pos = c->len[0] + i - c->pad[b];
            p[b * n + i] = pos > 0 ? pos : 0;
        }
    tn_tensor *d = tn__on_device(h, c->dev);
    tn_release(h);
    return d ? tn__ret(d) : NULL;
}

static tn_tensor *cached_view(const tn_kv_cache *c, int layer, bool keys, const char *fn) {
    TN_CHECK_NULL_(fn, c, "cache", false, NULL);
    if (layer < 0 || layer >= c->layers) return bad_layer(c, layer, fn), NULL;
    tn_tensor *t = keys ? c->k[layer] : c->v[layer];
    const int64_t shape[4] = {c->B, c->H, c->len[layer], c->D};
    tn_tensor *view = tn__make_view(t, 4, shape, t->stride, 0, NULL, NULL);
    return view ? tn__ret(view) : NULL;
}

tn_tensor *tn_kv_cache_keys(const tn_kv_cache *c, int layer) {
    return cached_view(c, layer, true, "tn_kv_cache_keys");
}

tn_tensor *tn_kv_cache_values(const tn_kv_cache *c, int layer) {
    return cached_view(c, layer, false, "tn_kv_cache_values");
}
