/* Measures for the layers above the ops (device.h): the gradients' sums of
 * squares and largest |value| (clip_grad_norm_, the gradient monitor) with
 * their read-back, and anomaly mode's batched NaN/Inf checks on a device.
 * optim/ and debug/ reach these kernels only here, as ops reach theirs
 * through device.c: core owns the scratch memory and the read-back, and
 * brackets every launch for the race detector. */
#include "device.h"
#include "hooks.h"

/* The table of dev's type when it is loaded, without loading it or setting an error (NULL:
 * not built or not loaded: then no tensor was ever on such a device). The callers' device
 * holds tensors or was counted, so its index is valid. */
static const tn_backend *table_quiet(tn_device dev) { return tn__backend_loaded(dev.type); }

int tn__dev_count_loaded(tn_device_type type) {
    const tn_backend *be = type == TN_CPU ? NULL : tn__backend_loaded(type);
    return be ? be->device_count() : 0;
}

bool tn__dev_has_grad_stats(tn_device dev) {
    const tn_backend *be = table_quiet(dev);
    return be && be->grad_stats;
}

tn_status tn__dev_results_init(tn_dev_results *r, tn_device dev, int n, double *host) {
    *r = (tn_dev_results){.dev = dev, .bytes = (size_t)n * sizeof(double)};
    if (dev.type == TN_CPU) {
        r->mem = host;
        return TN_OK;
    }
    const tn_backend *be = tn__backend_of(dev);
    if (!be) return tn_last_status();
    r->mem = be->alloc(dev.index, r->bytes);
    return r->mem ? TN_OK : tn_last_status();
}

tn_status tn__dev_grad_stats(tn_dev_results *r, int first, int count, const tn_tensor *const *ts) {
    const tn_backend *be = tn__table_of(r->dev);
    if (!be) return tn_last_status();
    if (!be->grad_stats || !r->mem || count < 1 || count > TN_GRAD_STATS_MAX ||
        (size_t)(first + count) * 2 * sizeof(double) > r->bytes)
        return tn__error(TN_ERR_INTERNAL, "grad_stats: no kernel or bad arguments");
    /* the race detector registers TN_RACE_MAX_OPS operands a bracket: while it is on, launches
     * of that many tensors (each tensor's results do not depend on the others': same bits) */
    const int step = tn__races_on() ? TN_RACE_MAX_OPS : count;
    tn_status st = TN_OK;
    for (int k = 0; k < count && st == TN_OK; k += step) {
        const int b = count - k < step ? count - k : step;
        const void *p[TN_GRAD_STATS_MAX];
        int64_t n[TN_GRAD_STATS_MAX];
        for (int i = 0; i < b; i++) {
            p[i] = tn__ptr(ts[k + i]);
            n[i] = tn__numel(ts[k + i]->ndim, ts[k + i]->shape); /* a dense block holds them */
        }
        tn_race_access ra; /* every tensor read; the results are not a tensor */
        tn__race_begin(&ra, b, ts + k, 0u, "grad_stats");
        st = be->grad_stats(r->dev.index, ts[k]->dtype, b, p, n, r->mem + 2 * (first + k));
        tn__race_end(&ra);
    }
    return st;
}

tn_status tn__dev_results_readback_begin(tn_dev_results *r) {
    if (r->dev.type == TN_CPU || r->ticket) return TN_OK;
    const tn_backend *be = tn__backend_of(r->dev);
    if (!be) return tn_last_status();
    if (!be->readback_begin || !be->readback_end || !r->mem || r->bytes > TN_READBACK_MAX)
        return TN_OK; /* none here: read with a plain copy */
    tn_status st = be->readback_begin(r->dev.index, r->mem, r->bytes, &r->ticket);
    if (st < 0) return st;
    be->free(r->dev.index, r->mem, r->bytes); /* stream order: after the copy */
    r->mem = NULL;
    return TN_OK;
}

tn_status tn__dev_results_read(tn_dev_results *r, double *host) {
    tn_status st = TN_OK;
    if (r->dev.type == TN_CPU) {
        if (host && r->mem && host != r->mem) memcpy(host, r->mem, r->bytes);
    } else {
        /* loaded at init (tn__backend_of), and a table stays */
        const tn_backend *be = tn__backend_loaded(r->dev.type);
        if (r->ticket) st = be->readback_end(r->ticket, host);
        if (r->mem && host) st = be->memcpy(r->dev.index, host, r->mem, r->bytes, TN_COPY_D2H);
        if (r->mem) be->free(r->dev.index, r->mem, r->bytes);
    }
    r->mem = NULL;
    r->ticket = NULL;
    return st;
}

/* ---- anomaly mode's checks --------------------------------------------------------------- */

/* dev's table when it has the batched check (never the CPU's), else NULL. */
static const tn_backend *nonfinite_table(tn_device dev) {
    const tn_backend *be = dev.type == TN_CPU ? NULL : table_quiet(dev);
    return be && be->nonfinite_check && be->nonfinite_poll ? be : NULL;
}

bool tn__dev_has_nonfinite(tn_device dev) { return nonfinite_table(dev) != NULL; }

tn_status tn__dev_nonfinite_check(tn_device dev, int count, const tn_nf_item *items) {
    const tn_backend *be = nonfinite_table(dev);
    if (!be) return tn__error(TN_ERR_INTERNAL, "no nonfinite check on this device");
    /* The one launch without a race bracket: it has no tensor to register (a batch holds its
     * items' storages, never the tensors, so that no graph stays alive; the detector watches
     * host tensors, these are device memory; the launch writes only the device's words), and
     * it runs from inside another kernel's bracket (nf_before_write), before that one
     * registers its operands. */
    return be->nonfinite_check(dev.index, count, items);
}

tn_status tn__dev_nonfinite_poll(tn_device dev, uint64_t out[TN_NONFINITE_WORDS]) {
    for (int w = 0; w < TN_NONFINITE_WORDS; w++)
        out[w] = 0;
    const tn_backend *be = nonfinite_table(dev);
    return be ? be->nonfinite_poll(dev.index, out) : TN_OK;
}
