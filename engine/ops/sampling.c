/* Random integers from the calling thread's generator: torch.randint,
 * torch.randperm and torch.multinomial. Drawn on the host (tenet's stream,
 * not torch's: tn_manual_seed makes them reproducible per thread), then
 * placed on the input's device (multinomial). No autograd. */
#include <math.h>

#include "ops_internal.h"
#include "pointwise_driver.h"

/* A uniform integer in [0, n) (n >= 1), without modulo bias. */
static uint64_t below(uint64_t n) {
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, r;
    do
        r = tn__rand_u64();
    while (r >= lim);
    return r % n;
}

tn_tensor *tn_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, tn_dtype dtype) {
    if (low >= high) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                  (long long)low, (long long)high);
        return NULL;
    }
    if (tn__valid_dtype(dtype) && dtype != TN_BOOL &&
        (tn__check_scalar((double)low, dtype) < 0 || tn__check_scalar((double)(high - 1), dtype) < 0))
        return NULL;
    tn_tensor *t = tn__empty(ndim, shape, TN_I64);
    if (!t) return NULL;
    int64_t n = tn__numel(ndim, shape), *v = (int64_t *)(void *)tn__ptr(t);
    uint64_t span = (uint64_t)high - (uint64_t)low;
    for (int64_t i = 0; i < n; i++)
        v[i] = (int64_t)((uint64_t)low + below(span));
    if (dtype == TN_I64) return tn__ret(t);
    tn_tensor *c = tn__copy_to_device(t, dtype, TN_DEVICE_CPU);
    tn_release(t);
    return tn__ret(c);
}

tn_tensor *tn_randperm(int64_t n, tn_dtype dtype) {
    if (n < 0) {
        tn__error(TN_ERR_SHAPE, "Trying to create tensor with negative dimension %lld: [%lld]",
                  (long long)n, (long long)n);
        return NULL;
    }
    tn_tensor *t = tn__empty(1, &n, TN_I64);
    if (!t) return NULL;
    int64_t *v = (int64_t *)(void *)tn__ptr(t);
    for (int64_t i = 0; i < n; i++) { /* Fisher-Yates, inside out */
        int64_t j = (int64_t)below((uint64_t)i + 1);
        v[i] = v[j];
        v[j] = i;
    }
    if (dtype == TN_I64) return tn__ret(t);
    tn_tensor *c = tn__copy_to_device(t, dtype, TN_DEVICE_CPU);
    tn_release(t);
    return tn__ret(c);
}

/* PyTorch 1.13's checks of a multinomial's input, in its order. */
static tn_status multinomial_check(const tn_tensor *p, int64_t k, bool replacement) {
    if (!tn__is_float(p->dtype))
        return tn__error(TN_ERR_DTYPE,
                         "multinomial only supports floating-point dtypes for input, got: %s",
                         tn__torch_scalar_name(p->dtype));
    if (k <= 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "cannot sample n_sample <= 0 samples");
    if (p->ndim < 1 || p->ndim > 2)
        return tn__error(TN_ERR_SHAPE, "prob_dist must be 1 or 2 dim");
    if (!replacement && k > p->shape[p->ndim - 1])
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    return TN_OK;
}

/* One row's k draws from w[0..c) (checked: finite, >= 0, positive sum). */
static void draw_row(const double *w, int64_t c, int64_t k, bool replacement, double *key,
                     int64_t *out) {
    if (replacement) { /* inverse CDF */
        double total = 0;
        for (int64_t j = 0; j < c; j++)
            key[j] = total += w[j];
        for (int64_t s = 0; s < k; s++) {
            double u = tn__rand_uniform() * total;
            int64_t lo = 0, hi = c - 1; /* the first j with cdf[j] > u and w[j] > 0 */
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (key[mid] > u) hi = mid;
                else lo = mid + 1;
            }
            while (lo > 0 && w[lo] == 0) lo--; /* rounding at the top: the last positive */
            out[s] = lo;
        }
        return;
    }
    /* without replacement: the k largest w / Exp(1) (PyTorch 1.13's scheme) */
    for (int64_t j = 0; j < c; j++) {
        double e;
        do
            e = -log1p(-tn__rand_uniform());
        while (!(e > 0));
        key[j] = w[j] / e;
    }
    for (int64_t s = 0; s < k; s++) {
        int64_t best = -1;
        for (int64_t j = 0; j < c; j++)
            if (key[j] >= 0 && (best < 0 || key[j] > key[best])) best = j;
        out[s] = best;
        key[best] = -1;
    }
}

tn_tensor *tn_multinomial(const tn_tensor *probs, int64_t num_samples, bool replacement) {
    TN_CHECK_NULL_ARG(probs, "self");
    if (multinomial_check(probs, num_samples, replacement) < 0) return NULL;
    int64_t c = probs->shape[probs->ndim - 1], rows = probs->ndim == 2 ? probs->shape[0] : 1;
    int64_t n = rows * c, shape[2] = {rows, num_samples};
    double *w = tn__calloc((size_t)(n ? n : 1), sizeof *w);
    double *key = w ? tn__calloc((size_t)(c ? c : 1), sizeof *key) : NULL;
    tn_tensor *out = key ? tn__empty(probs->ndim, probs->ndim == 2 ? shape : shape + 1, TN_I64)
                         : NULL;
    tn_status st = out && tn_copy_to_f64(probs, w, n) == TN_OK ? TN_OK : tn_last_status();
    for (int64_t r = 0; r < rows && st == TN_OK; r++) {
        double total = 0;
        for (int64_t j = 0; j < c && st == TN_OK; j++) {
            if (!isfinite(w[r * c + j]) || w[r * c + j] < 0)
                st = tn__error(TN_ERR_INVALID_ARGUMENT,
                               "probability tensor contains either `inf`, `nan` or element < 0");
            total += w[r * c + j];
        }
        if (st == TN_OK && !(total > 0))
            st = tn__error(TN_ERR_INVALID_ARGUMENT,
                           "invalid multinomial distribution (sum of probabilities <= 0)");
    }
    int64_t *o = out ? (int64_t *)(void *)tn__ptr(out) : NULL;
    for (int64_t r = 0; r < rows && st == TN_OK; r++)
        draw_row(w + r * c, c, num_samples, replacement, key, o + r * num_samples);
    tn__mfree(w);
    tn__mfree(key);
    if (st == TN_OK && tn__dev(probs).type != TN_CPU) {
        tn_tensor *d = tn__on_device(out, tn__dev(probs));
        tn_release(out);
        out = d;
    }
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__ret(out);
}
