/* fuzz/op_tensor.c — creation, conversion and metadata ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* tn_empty/zeros/ones/full/rand/randn and tn_scalar:
 * variant, dtype, ndim, shape..., value, dst */
void tf_op_create(tf_state *s) {
    uint8_t v = tf_byte(s) % 7;
    tn_dtype dt = tf_dtype(s);
    int ndim = tf_ndim(s);
    int64_t shape[TF_LIST];
    tf_shape(s, ndim, shape);
    double value = tf_scalar(s);
    uint8_t dst = tf_dst(s);
    if (!tf_affordable(tf_numel_of(ndim, shape), 0)) return;
    tn_tensor *t = NULL;
    switch (v) {
    case 0:
        t = tn_empty(ndim, shape, dt);
        break;
    case 1:
        t = tn_zeros(ndim, shape, dt);
        break;
    case 2:
        t = tn_ones(ndim, shape, dt);
        break;
    case 3:
        t = tn_full(ndim, shape, dt, value);
        break;
    case 4:
        t = tn_rand(ndim, shape, dt);
        break;
    case 5:
        t = tn_randn(ndim, shape, dt);
        break;
    default:
        t = tn_scalar(value, dt);
        break;
    }
    tf_put(s, dst, t);
}

/* Values that fit each dtype (the harness converts without undefined
 * behaviour; NaN and ±Inf reach integer tensors through the ops). */
static void store_element(char *p, tn_dtype dt, uint8_t b) {
    static const int64_t ints[16] = {0,         1,         -1,     2,     3,         -2,
                                     100,       32767,     -32768, 32768, INT32_MAX, INT32_MIN,
                                     INT64_MAX, INT64_MIN, 7,      5};
    static const double floats[16] = {0,   1,        -1,        0.5,  -2.5, 3,     1e-3,  100,
                                      NAN, INFINITY, -INFINITY, -0.0, 1e30, 1e-40, 65504, 7};
    int64_t i = ints[b % 16];
    double d = floats[b % 16];
    switch (dt) {
    case TN_F32:
        *(float *)p = (float)d;
        break;
    case TN_F64:
        *(double *)p = d;
        break;
    case TN_I16:
        *(int16_t *)p = (int16_t)i;
        break;
    case TN_I32:
        *(int32_t *)p = (int32_t)i;
        break;
    case TN_I64:
        *(int64_t *)p = i;
        break;
    case TN_BF16: { /* the float's high half */
        float f = (float)d;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(p, &h, sizeof h);
        break;
    }
    case TN_F16: { /* the same values as float16 bits (1e30 overflows: inf; 1e-40: the
                    * smallest subnormal) */
        static const uint16_t halves[16] = {0x0000, 0x3c00, 0xbc00, 0x3800, 0xc100, 0x4200,
                                            0x1419, 0x5640, 0x7e00, 0x7c00, 0xfc00, 0x8000,
                                            0x7c00, 0x0001, 0x7bff, 0x4700};
        memcpy(p, &halves[b % 16], sizeof(uint16_t));
        break;
    }
    default:
        *(bool *)p = b & 1;
        break;
    }
}

/* tn_tensor_from: dtype, ndim, shape..., flags (requires_grad, NULL data),
 * one byte per element, dst. */
void tf_op_tensor_from(tf_state *s) {
    tn_dtype dt = tf_dtype(s);
    int ndim = tf_ndim(s);
    int64_t shape[TF_LIST];
    tf_shape(s, ndim, shape);
    uint8_t flags = tf_byte(s);
    uint64_t n = tf_numel_of(ndim, shape);
    bool valid = dt >= 0 && dt < TN_DTYPE_COUNT;
    size_t esize = valid ? tn_dtype_size(dt) : 8;
    /* a size beyond the budget gets one element: the library must refuse it before reading */
    size_t count = n <= TF_BUDGET ? (size_t)n : 1;
    char *buf = calloc(count ? count : 1, esize);
    for (size_t k = 0; k < count && valid; k++) {
        uint8_t b = tf_byte(s);
        if (buf) store_element(buf + k * esize, dt, b);
    }
    uint8_t dst = tf_dst(s);
    if (buf && tf_affordable(n, 0))
        tf_put(s, dst, tn_tensor_from(flags & 2 ? NULL : buf, dt, ndim, shape, flags & 1));
    free(buf);
}

/* tn_arange: start, end, step, dtype, dst */
void tf_op_arange(tf_state *s) {
    double start = tf_scalar(s), end = tf_scalar(s), step = tf_scalar(s);
    tn_dtype dt = tf_dtype(s);
    uint8_t dst = tf_dst(s);
    double n = ceil((end - start) / step);
    /* NaN, infinite or negative counts and step 0 are refused by the library */
    bool refused = !(n >= 0) || !isfinite(n) || n >= 9.2e18;
    if (!refused && !tf_affordable((uint64_t)n, 0)) return;
    tf_put(s, dst, tn_arange(start, end, step, dt));
}

/* tn_new_tensor (variant 0) or tn_to: variant, src, dtype, device,
 * requires_grad (new_tensor only), dst */
void tf_op_convert(tf_state *s) {
    bool to = tf_bool(s);
    tn_tensor *src = tf_in(s);
    tn_dtype dt = tf_dtype(s);
    tn_device dev = tf_device(s);
    bool rg = tf_bool(s);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(src);
    if (!tf_affordable(n, n)) return;
    tf_put(s, dst, to ? tn_to(src, dt, dev) : tn_new_tensor(src, dt, dev, rg));
}

static void inspect_values(tf_state *s, tn_tensor *t, uint8_t v) {
    uint64_t n = tf_numel(t);
    int64_t shrink = tf_byte(s) % 3; /* 1, 2: a buffer too small by that much */
    if (n > TF_BUDGET) return;
    double *buf = calloc(n + 1, sizeof *buf);
    if (!buf) return;
    tn_status st;
    if (v == 1) {
        st = tn_copy_to_f64(t, buf, (int64_t)n - shrink);
        tf_check_status(st, "tn_copy_to_f64");
    } else {
        size_t bytes = (size_t)n * (t ? tn_dtype_size(tn_dtype_of(t)) : 1);
        st = tn_copy_to(t, buf, bytes >= (size_t)shrink ? bytes - (size_t)shrink : 0);
        tf_check_status(st, "tn_copy_to");
    }
    free(buf);
}

static void inspect_text(tf_state *s, tn_tensor *t, uint8_t v) {
    char buf[96];
    size_t size = tf_byte(s) % sizeof buf;
    uint64_t n = tf_numel(t);
    if (!tf_affordable(n, n)) return;
    if (v == 3) {
        memset(buf, 'Z', sizeof buf);
        (void)tn_format(t, buf, size);
        for (size_t k = size; k < sizeof buf; k++)
            if (buf[k] != 'Z') tf_fail("tn_format wrote past its buffer of %zu bytes", size);
        if (size && !memchr(buf, 0, size)) tf_fail("tn_format left its text unterminated");
    } else {
        tf_check_status(tn_print(t, s->sink), "tn_print");
    }
}

static void inspect_meta(tf_state *s, tn_tensor *t) {
    tn_tensor *other = tf_in(s);
    int dim = tf_dim(s);
    tn_dtype dt = tf_dtype(s);
    int code = -(int)(tf_byte(s) % 16);
    (void)tn_ndim(t);
    (void)tn_shape(t);
    (void)tn_stride(t);
    (void)tn_size(t, dim);
    (void)tn_numel(t);
    (void)tn_dtype_of(t);
    (void)tn_device_of(t);
    (void)tn_dtype_name(dt);
    (void)tn_dtype_size(dt);
    (void)tn_data_ptr(t);
    (void)tn_is_contiguous(t);
    (void)tn_shares_storage(t, other);
    (void)tn_version(t);
    (void)tn_requires_grad(t);
    (void)tn_is_leaf(t);
    (void)tn_grad_fn_name(t);
    (void)tn_status_string((tn_status)code);
}

/* Reads: variant, slot, variant's operands. */
void tf_op_inspect(tf_state *s) {
    uint8_t v = tf_byte(s) % 6;
    tn_tensor *t = tf_in(s);
    switch (v) {
    case 0: {
        double x;
        uint64_t n = tf_numel(t);
        if (n <= TF_BUDGET) tf_check_status(tn_item(t, &x), "tn_item");
        break;
    }
    case 1:
    case 2:
        inspect_values(s, t, v);
        break;
    case 3:
    case 4:
        inspect_text(s, t, v);
        break;
    default: {
        inspect_meta(s, t);
        tn_memory_stats_t ms;
        tf_check_status(tn_memory_stats(&ms), "tn_memory_stats");
        break;
    }
    }
}
