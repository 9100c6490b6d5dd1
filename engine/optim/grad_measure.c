/* The per-gradient sum of squares and max |g| of a list of gradients, by
 * core's tn__dev_grad_stats (engine/core/device.h; the backend's grad_stats):
 * up to TN_GRAD_STATS_MAX gradients a launch, into one buffer of core's read
 * once, so a GPU waits once per call, not once per gradient. Used by
 * tn_clip_grad_norm_ (the 2- and inf-norms) and the gradient scaler (the
 * inf/NaN check: max |g| is NaN when g holds a NaN, inf when it holds an
 * inf). */
#include "optim_internal.h"

/* Whether the device every gradient is on measures (grad_stats) and each gradient is empty or
 * one dense block of a float dtype; *dev gets that device. */
static bool stats_device(int n, tn_tensor *const *grads, tn_device *dev) {
    bool any = false;
    for (int i = 0; i < n; i++) {
        const tn_tensor *g = grads[i];
        int64_t cnt;
        if (!g) continue;
        if (any && !tn__same_device(*dev, tn__dev(g))) return false;
        *dev = tn__dev(g), any = true;
        if (!tn__is_float(g->dtype) || (tn_numel(g) > 0 && !tn__dense_block(g, false, &cnt)))
            return false;
    }
    return any && tn__dev_has_grad_stats(*dev);
}

/* Enqueues the measures in batches of one dtype (k: results so far) and reads them. */
static tn_status measure(tn_device dev, int n, tn_tensor *const *grads, int m, double *host) {
    tn_dev_results res;
    if (tn__dev_results_init(&res, dev, 2 * m, host) < 0) return tn_last_status();
    tn_status st = TN_OK;
    for (int i = 0, k = 0; i < n && st == TN_OK;) {
        const tn_tensor *batch[TN_GRAD_STATS_MAX];
        int b = 0;
        for (; i < n && b < TN_GRAD_STATS_MAX; i++) {
            const tn_tensor *g = grads[i];
            if (!g || tn_numel(g) == 0) continue;
            if (b > 0 && g->dtype != batch[0]->dtype) break;
            batch[b++] = g;
        }
        st = tn__dev_grad_stats(&res, k, b, batch);
        k += b;
    }
    tn_status rs = tn__dev_results_read(&res, st == TN_OK ? host : NULL); /* the one wait */
    if (st == TN_OK) st = rs;
    if (dev.type != TN_CPU) st = tn__sync_point(dev, st); /* a read of device data, as tn_item */
    return st;
}

tn_status tn__optim_grad_stats(int n, tn_tensor *const *grads, double **host, int *m, bool *done) {
    tn_device dev = TN_DEVICE_CPU;
    *host = NULL, *m = 0;
    *done = stats_device(n, grads, &dev);
    int cnt = 0; /* the gradients with elements, in order */
    for (int i = 0; *done && i < n; i++)
        cnt += grads[i] && tn_numel(grads[i]) > 0;
    if (!*done || cnt == 0) return TN_OK;
    double *h = tn__alloc(2 * (size_t)cnt * sizeof(double));
    if (!h) return tn_last_status();
    tn_status st = measure(dev, n, grads, cnt, h);
    if (st < 0) {
        tn__free(h);
        return st;
    }
    *host = h, *m = cnt;
    return TN_OK;
}
