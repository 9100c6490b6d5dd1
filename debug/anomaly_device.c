/* Anomaly mode's NaN/Inf checks on device tensors, without a host sync per
 * op. A check enqueues a kernel that records a tag in the device's flag word
 * (first record wins, in stream order, so the first producer of a
 * non-finite value is the one recorded: the values it read were checked
 * before it). The host polls the flag at synchronisation points — the end
 * of a backward call, tn_synchronize, reads of device data — and turns the
 * tag back into the op it names through a ring of check records.
 *
 * Records: a global ring of TN_NF_RING slots claimed with a relaxed
 * fetch_add (the slot's owner is the only writer until the ring wraps); a
 * record carries its tag, so a slot reused since the check is recognised
 * and reported without its details rather than misattributed.
 */
#include <stdio.h>

#include "../engine/autograd/autograd_internal.h"
#include "anomaly_internal.h"

#define TN_NF_RING 4096

typedef struct nf_record {
    _Atomic uint32_t tag; /* 0: being written / empty */
    bool backward;
    int index; /* output index */
    const char *name; /* static: an op name or a node's grad_fn name */
    tn_backtrace bt;  /* forward: the op's call; backward: the node's forward call */
} nf_record;

static nf_record g_ring[TN_NF_RING];
static _Atomic uint32_t g_next = 0; /* relaxed: only hands out distinct slots */

/* A tag for a new record (1 .. 2^31-1, never 0). */
static uint32_t record(bool backward, int index, const char *name, const tn_backtrace *bt) {
    uint32_t t = atomic_fetch_add_explicit(&g_next, 1, memory_order_relaxed) % 0x7fffffffu + 1;
    nf_record *r = &g_ring[t % TN_NF_RING];
    atomic_store_explicit(&r->tag, 0, memory_order_relaxed);
    r->backward = backward;
    r->index = index;
    r->name = name;
    if (bt) r->bt = *bt;
    else r->bt.n = 0;
    /* release: pairs with the acquire load in report(), which then sees the
     * fields written above */
    atomic_store_explicit(&r->tag, t, memory_order_release);
    return t;
}

/* Enqueues the check of t (float, on a device) under tag. */
static tn_status enqueue(const tn_tensor *t, uint32_t tag) {
    if (!t || !tn__is_float(t->dtype) || tn__numel(t->ndim, t->shape) == 0) return TN_OK;
    const tn_backend *be = tn__backend_of(tn__dev(t));
    if (!be) return tn_last_status();
    tn_tensor *c = tn__is_contiguous(t) ? tn__retain((tn_tensor *)t) : tn__copy_as(t, t->dtype);
    if (!c) return tn_last_status();
    tn_status st = be->nonfinite_check(tn__dev(c).index, c->dtype, tn__ptr(c),
                                       tn__numel(c->ndim, c->shape), tag);
    tn_release(c); /* stream order keeps the block alive for the kernel */
    return st;
}

tn_status tn__anomaly_device_check_backward(tn_node *n, tn_tensor *const *gi) {
    for (int i = 0; i < n->n_in; i++) {
        if (!gi[i] || tn__on_cpu(gi[i])) continue;
        tn_status st = enqueue(gi[i], record(true, i, n->fn->name, n->trace));
        if (st < 0) return st;
    }
    return TN_OK;
}

void tn__anomaly_device_check_forward(const char *op, const tn_tensor *out) {
    tn_backtrace bt;
    tn__bt_capture(&bt);
    if (enqueue(out, record(false, 0, op, &bt)) < 0) tn_clear_error(); /* a check never fails an op */
}

/* Turns a polled flag into the report and, for backward, the error. */
static tn_status report(uint32_t flag, bool in_backward) {
    uint32_t tag = flag & ~TN_NONFINITE_INF;
    const char *what = flag & TN_NONFINITE_INF ? "inf" : "nan";
    nf_record *r = &g_ring[tag % TN_NF_RING];
    bool known = atomic_load_explicit(&r->tag, memory_order_acquire) == tag;
    const char *name = known ? r->name : "(an op whose check record was overwritten)";
    tn_anomaly_report *rep = tn__report_begin(known && r->backward ? TN_ANOMALY_NAN_BACKWARD
                                                                   : TN_ANOMALY_NAN_FORWARD,
                                              name);
    if (known && r->bt.n) tn__report_set_forward(rep, &r->bt);
    tn__report_set_output_index(rep, known ? r->index : 0);
    if (known && r->backward && in_backward)
        return tn__error(TN_ERR_NAN, "Function '%s' returned %s values in its %dth output.", name,
                         what, r->index);
    const char *who = tn__report_first_culprit(rep);
    tn__warn("Function '%s' returned %s values in its %dth output (%s, on the device)%s%s.", name,
             what, known ? r->index : 0, known && r->backward ? "backward" : "forward",
             who ? ", called from " : "", who ? who : "");
    return TN_OK;
}

tn_status tn__anomaly_device_poll(tn_device dev, bool in_backward) {
    const tn_backend *be = dev.type == TN_CPU ? NULL : tn__backends[dev.type];
    if (!be || !be->nonfinite_poll) return TN_OK;
    uint32_t flag = be->nonfinite_poll(dev.index);
    return flag ? report(flag, in_backward) : TN_OK;
}

tn_status tn__anomaly_poll_devices(bool in_backward) {
    if (!tn__anomaly_nan()) return TN_OK;
    tn_status st = TN_OK;
    for (int d = 0, n = tn_cuda_device_count(); d < n; d++) {
        tn_status s = tn__anomaly_device_poll(TN_DEVICE_CUDA(d), in_backward);
        if (st == TN_OK) st = s;
    }
    return st;
}
