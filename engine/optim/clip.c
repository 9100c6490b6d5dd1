/* torch.nn.utils.clip_grad_norm_ (torch 1.13): the norm of all gradients
 * together, then every gradient scaled in place by the clamped coefficient;
 * and clip_grad_value_: every gradient clamped in place.
 *
 * The per-gradient sums are taken in float64 (torch sums in the gradients'
 * dtype), then the coefficient is rounded as torch computes it: in the
 * gradients' dtype, max_norm / (norm + 1e-6) evaluated as
 * reciprocal(norm + 1e-6) * max_norm (Tensor.__rtruediv__), clamped to 1.
 * So a float32 model clips by the same factor as torch to the last bit
 * whenever the two norms round to the same float.
 *
 * The 2-norm and the inf-norm, when every gradient is one dense block on one
 * device (the usual case), are measured in place by tn__optim_grad_stats
 * (grad_measure.c): on a GPU one wait per call, not one per gradient, and no
 * float64 temporaries. Other norms and layouts take every gradient through
 * float64 ops, one read each. */
#include <math.h>

#include "optim_internal.h"

/* sum |g|^p over g (p finite) or max |g| (p infinite), in float64 */
static tn_status norm_part(const tn_tensor *g, double p, double *out) {
    *out = 0;
    if (tn_numel(g) == 0) return TN_OK;
    tn_tensor *g64 = tn__cast(g, TN_F64), *a = NULL, *r = NULL;
    if (g64) a = p == 2 ? tn_mul(g64, g64) : tn_abs(g64);
    if (a && isfinite(p) && p != 1 && p != 2) {
        tn_tensor *ap = tn_pow_scalar(a, p);
        tn_release(a);
        a = ap;
    }
    if (a) r = isinf(p) ? tn_max(a) : tn_sum(a);
    tn_status st = r ? tn_item(r, out) : tn_last_status();
    tn_release(r);
    tn_release(a);
    tn_release(g64);
    return st;
}

/* v rounded to dt */
static double round_to(tn_dtype dt, double v) {
    uint16_t b;
    tn__store(&b, dt, v);
    return tn__load(&b, dt);
}

/* torch's float arithmetic for the coefficient, in the gradients' dtype */
static double clip_coef(double max_norm, double total, tn_dtype dt) {
    double c;
    if (dt == TN_F32) {
        float t = (float)total + (float)1e-6;
        c = (double)((1.0f / t) * (float)max_norm);
    } else if (tn__is_half(dt)) { /* each tensor op rounds to the dtype */
        double t = round_to(dt, round_to(dt, total) + 1e-6);
        c = round_to(dt, round_to(dt, 1.0 / t) * max_norm);
    } else {
        c = (1.0 / (total + 1e-6)) * max_norm;
    }
    return c > 1.0 ? 1.0 : c; /* torch.clamp(max=1.0) passes a NaN on */
}

static tn_status check_params(const char *fn, int n, tn_tensor *const *params) {
    if (n < 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: n = %d is negative", fn, n);
    if (n > 0 && !params) return tn__null_arg(false, "%s: argument 'params' is NULL", fn);
    for (int i = 0; i < n; i++)
        if (!params[i]) return tn__null_arg(true, "%s: params[%d] is NULL", fn, i);
    return TN_OK;
}

static tn_status check_args(int n, tn_tensor *const *params, double max_norm, double p) {
    if (check_params("tn_clip_grad_norm_", n, params) < 0) return tn_last_status();
    if (isnan(max_norm))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_clip_grad_norm_: max_norm is NaN");
    if (!(p > 0))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_clip_grad_norm_: norm_type must be positive (or INFINITY), got %g", p);
    return TN_OK;
}

/* The running fold of the parts: max for p = inf (a NaN wins), else the sum. */
static double fold(double acc, double part, double p) {
    return isinf(p) ? (part > acc || isnan(part) ? part : acc) : acc + part;
}

/* The parts for p = 2 (sums of squares) or inf (max |g|) by grad_stats, folded in the
 * gradients' order: into *acc, *done = true; *done = false where it cannot. */
static tn_status stats_parts(int n, tn_tensor *const *grads, double p, double *acc, bool *done) {
    double *host;
    int m;
    tn_status st = tn__optim_grad_stats(n, grads, &host, &m, done);
    for (int k = 0; k < m && st == TN_OK; k++)
        *acc = fold(*acc, host[2 * k + (isinf(p) ? 1 : 0)], p);
    tn__free(host);
    return st;
}

/* The gradients' total norm from the parts: max for p = inf, else the
 * p-th root of their sum (torch's norm of the per-gradient norms). */
static tn_status total_norm(int n, tn_tensor *const *grads, double p, double *total) {
    double acc = 0;
    bool done = false;
    tn_status st = p == 2 || isinf(p) ? stats_parts(n, grads, p, &acc, &done) : TN_OK;
    for (int i = 0; i < n && !done && st == TN_OK; i++) {
        double part;
        if (grads[i] && (st = norm_part(grads[i], p, &part)) == TN_OK) acc = fold(acc, part, p);
    }
    if (st < 0) return st;
    *total = isinf(p) ? acc : p == 2 ? sqrt(acc) : p == 1 ? acc : pow(acc, 1.0 / p);
    return TN_OK;
}

tn_status tn_clip_grad_norm_(int n, tn_tensor *const *params, double max_norm, double norm_type,
                             double *total_norm_out) {
    tn_status st = check_args(n, params, max_norm, norm_type);
    if (st < 0) return st;
    tn_tensor **grads = n ? tn__calloc_small((size_t)n * sizeof *grads) : NULL;
    if (n && !grads) return TN_ERR_OUT_OF_MEMORY;
    tn__internal_enter();
    bool prev = tn_set_grad_enabled(false);
    tn_dtype dt = TN_F32;
    int first = -1;
    for (int i = 0; i < n; i++) {
        grads[i] = tn_grad(params[i]); /* NULL without one (or a non-leaf: torch warns) */
        if (grads[i] && first < 0) first = i, dt = tn_dtype_of(grads[i]);
    }
    double total = 0;
    st = first < 0 ? TN_OK : total_norm(n, grads, norm_type, &total);
    if (st == TN_OK && first >= 0) {
        double c = clip_coef(max_norm, total, dt);
        for (int i = 0; i < n && st == TN_OK; i++) /* only a device can fail here */
            if (grads[i]) st = tn_mul_scalar_(grads[i], c);
    }
    for (int i = 0; i < n; i++)
        tn_release(grads[i]);
    tn_set_grad_enabled(prev);
    tn__internal_leave();
    tn__free_small(grads);
    if (st == TN_OK && total_norm_out) *total_norm_out = total;
    return st < 0 ? st : TN_OK;
}

tn_status tn_clip_grad_value_(int n, tn_tensor *const *params, double clip_value) {
    tn_status st = check_params(__func__, n, params);
    if (st < 0) return st;
    if (isnan(clip_value))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_clip_grad_value_: clip_value is NaN");
    tn__internal_enter();
    bool prev = tn_set_grad_enabled(false);
    for (int i = 0; i < n && st == TN_OK; i++) { /* only a device can fail here */
        tn_tensor *g = tn_grad(params[i]);
        if (g) st = tn_clamp_(g, -clip_value, clip_value);
        tn_release(g);
    }
    tn_set_grad_enabled(prev);
    tn__internal_leave();
    return st;
}
