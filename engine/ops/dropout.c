/* dropout, forward and backward. The mask is drawn on the host from the
 * calling thread's generator (engine/core/random.c: seeded by
 * tn_manual_seed, reproducible per thread), one uniform draw per element in
 * row-major order: kept when u < 1 - p. It holds 1 / (1 - p) where kept and
 * 0 elsewhere, in x's dtype, is moved to x's device, and the output is
 * x * mask (a pointwise product: both back ends). p == 1 gives x * 0.
 *
 * Node layout: NativeDropoutBackward0: input {x}; saved {0: the mask}. The
 * backward is g * mask, a public op (the mask is a constant), so double
 * backward works.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pointwise_driver.h"

static tn_status dropout_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *mask = tn__node_unpack(n, 0);
    TN_TRY(mask);
    gi[0] = tn_mul(go[0], mask);
    tn_release(mask);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info dropout_fn = {"NativeDropoutBackward0", dropout_bw};

/* Draws the scaled mask into m (contiguous, on the host). */
static void draw_mask(tn_tensor *m, double p) {
    int64_t n = tn__numel(m->ndim, m->shape);
    double keep = 1 - p, scale = p < 1 ? 1 / keep : 0;
    if (m->dtype == TN_F32) {
        float *v = (float *)tn__ptr(m), s = (float)scale;
        for (int64_t i = 0; i < n; i++)
            v[i] = tn__rand_uniform() < keep ? s : 0.0f;
    } else if (m->dtype == TN_F64) {
        double *v = (double *)tn__ptr(m);
        for (int64_t i = 0; i < n; i++)
            v[i] = tn__rand_uniform() < keep ? scale : 0.0;
    } else { /* the halves: the scale rounded to the dtype, as torch's mask */
        char *v = tn__ptr(m);
        size_t es = tn__dtype_sizes[m->dtype];
        for (int64_t i = 0; i < n; i++)
            tn__store(v + (size_t)i * es, m->dtype, tn__rand_uniform() < keep ? scale : 0.0);
    }
}

/* "1.5", "-0.1", "2.0": as Python prints a float */
static void py_float(char *buf, size_t n, double v) {
    snprintf(buf, n, "%.17g", v);
    for (int prec = 1; prec <= 17; prec++) { /* shortest form that reads back */
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (isfinite(v) && !strpbrk(buf, ".en")) strncat(buf, ".0", n - strlen(buf) - 1);
}

tn_tensor *tn_dropout(const tn_tensor *x, double p, bool training) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(x, "input");
    if (!(p >= 0 && p <= 1)) {
        char v[40];
        py_float(v, sizeof v, p);
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "dropout probability has to be between 0 and 1, but got %s", v);
        return NULL;
    }
    if (p == 0 || !training) return tn__ret(tn__retain(x));
    if (!tn__is_float(x->dtype)) {
        tn__error(TN_ERR_DTYPE, "result type %s can't be cast to the desired output type %s",
                  tn_dtype_name(TN_F32), tn_dtype_name(x->dtype));
        return NULL;
    }
    /* Everything that can fail is made before the generator moves (a failed
     * call draws nothing): the mask on the host and on x's device, the
     * output, the node with its output and the saved mask. */
    tn_device dev = tn__dev(x);
    tn_tensor *host = tn__empty(x->ndim, x->shape, x->dtype);
    tn_tensor *mask = host && tn__on_cpu(x) ? tn__retain(host)
                      : host                ? tn__empty_on(x->ndim, x->shape, x->dtype, dev)
                                            : NULL;
    tn_tensor *out = mask ? tn__empty_on(x->ndim, x->shape, x->dtype, dev) : NULL;
    tn_status st = out ? TN_OK : tn_last_status();
    tn_node *n = NULL;
    if (st == TN_OK && tn__needs_grad(1, &x)) {
        n = tn__node_new(&dropout_fn, 1, &x, 1, 1);
        st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) st = tn__node_save(n, 0, mask, false);
    }
    if (st == TN_OK) {
        draw_mask(host, p);
        if (mask != host) st = tn__dev_transfer(mask, host);
    }
    if (st == TN_OK) st = tn__pw_binary_into("dropout", TN_PW_mul, out, x, mask, x->dtype);
    tn__node_release(n);
    tn_release(host);
    tn_release(mask);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    tn__op_done("dropout", t0, out, 1, &x);
    return tn__ret(out);
}
