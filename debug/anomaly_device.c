/* Anomaly mode's NaN/Inf checks on device tensors, without a host sync or a
 * kernel launch per op. Each check takes a record (what was checked, where
 * it was called from) numbered by a process-wide sequence, and joins the
 * calling thread's batch; a batch goes to the device as one launch (core's
 * tn__dev_nonfinite_check: the backend's nonfinite_check) when it holds
 * TN_NONFINITE_MAX checks, when a check for another device comes, before a
 * kernel writes a tensor it holds, at the thread's synchronisation points
 * and at its exit. The device keeps
 * the smallest key found non-finite per word (forward, backward): the
 * earliest check, so the first producer of a non-finite value is the one
 * reported, as the values it read were checked before it. The host polls the
 * words at synchronisation points — the end of a backward call,
 * tn_synchronize, reads of device data — of the devices a batch ran on since
 * the last poll, and turns the keys back into ops through a ring of records.
 *
 * A batched check reads its tensor when the batch runs, so it must run
 * before anything writes that tensor: every kernel the engine runs over
 * tensors (engine/core/device.c, copy.c, reduce.c, write_inplace.c: the race
 * detector's brackets) and every transfer into device memory calls
 * nf_before_write first while a batch is pending. A batch holds its tensors'
 * storages, never the tensors (no graph is kept alive); a tensor that is a
 * permuted or broadcast dense block is checked in place, any other strided
 * one through a contiguous copy made at once.
 *
 * Records: a global ring of TN_NF_RING slots claimed with a relaxed
 * fetch_add (the slot's owner is the only writer until the ring wraps); a
 * record carries its sequence number, so a slot reused since the check is
 * recognised and reported without its details rather than misattributed.
 */
#include <pthread.h>
#include <stdio.h>

#include "../engine/autograd/autograd_internal.h"
#include "debug_internal.h"

#define TN_NF_RING 4096

typedef struct nf_record {
    _Atomic uint64_t seq; /* 0: being written / empty */
    bool backward;
    int index; /* output index */
    const char *name; /* static: an op name or a node's grad_fn name */
    tn_backtrace bt;  /* forward: the op's call; backward: the node's forward call */
} nf_record;

static nf_record g_ring[TN_NF_RING];
static _Atomic uint64_t g_seq = 0; /* relaxed: only hands out distinct, increasing numbers */

/* A sequence number for a new record (1, 2, ...; never 0). */
static uint64_t record(bool backward, int index, const char *name, const tn_backtrace *bt) {
    uint64_t s = atomic_fetch_add_explicit(&g_seq, 1, memory_order_relaxed) + 1;
    nf_record *r = &g_ring[s % TN_NF_RING];
    atomic_store_explicit(&r->seq, 0, memory_order_relaxed);
    r->backward = backward;
    r->index = index;
    r->name = name;
    if (bt) r->bt = *bt;
    else r->bt.n = 0;
    /* release: pairs with the acquire load in lookup(), which then sees the
     * fields written above */
    atomic_store_explicit(&r->seq, s, memory_order_release);
    return s;
}

/* The record of sequence s, or NULL when its slot was reused since. */
static const nf_record *lookup(uint64_t s) {
    const nf_record *r = &g_ring[s % TN_NF_RING];
    return atomic_load_explicit(&((nf_record *)r)->seq, memory_order_acquire) == s ? r : NULL;
}

/* ---- the calling thread's batch ------------------------------------------------------------ */

typedef struct nf_batch {
    tn_device dev;
    int count;
    tn_nf_item item[TN_NONFINITE_MAX];
    tn_storage *hold[TN_NONFINITE_MAX]; /* owned: keeps each item's memory until it ran */
} nf_batch;

static _Thread_local nf_batch tls_batch;

/* Devices whose words may hold a finding: a flag set after a batch was
 * enqueued there and taken by the poll that reads them, so that a poll skips a
 * device no check ran on since (a backward on the CPU polls no GPU: no context
 * made, no wait). Devices past the table are always polled. */
#define NF_TRACKED 64
static _Atomic unsigned char g_checked[NF_TRACKED];

static void mark_checked(tn_device dev) {
    /* release: pairs with the acquire exchange in take_checked(): a poll that
     * takes the flag is enqueued after the checks that set it */
    if (dev.index >= 0 && dev.index < NF_TRACKED)
        atomic_store_explicit(&g_checked[dev.index], 1, memory_order_release);
}

/* Whether dev had checks since the last poll that took its flag (taking it). */
static bool take_checked(tn_device dev) {
    if (dev.index < 0 || dev.index >= NF_TRACKED) return true;
    return atomic_exchange_explicit(&g_checked[dev.index], 0, memory_order_acquire) != 0;
}

/* Enqueues the thread's batch (one launch) and lets its storages go: stream
 * order keeps their memory until the check ran. */
static tn_status flush(nf_batch *b) {
    if (!b->count) return TN_OK;
    tn_status st = tn__dev_nonfinite_check(b->dev, b->count, b->item);
    if (st == TN_OK) mark_checked(b->dev);
    for (int i = 0; i < b->count; i++)
        tn__storage_release(b->hold[i]);
    b->count = 0;
    /* relaxed: pairs with nothing; a thread only acts on its own batch, whose
     * count it reads itself (the global count only says whether to look) */
    atomic_fetch_sub_explicit(&tn__nf_batched, 1, memory_order_relaxed);
    return st;
}

/* A thread that exits with checks pending still runs them (another thread's
 * poll may report them) and lets their storages go. */
static pthread_key_t g_exit_key;
static bool g_exit_key_ok;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
static void on_thread_exit(void *b) {
    if (flush(b) < 0) tn_clear_error();
}
static void make_exit_key(void) {
    g_exit_key_ok = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
}

/* Adds the check of t (float, on a device, not empty) under sequence s;
 * word 0: forward, 1: backward. */
static tn_status enqueue(const tn_tensor *t, uint64_t s, int word) {
    nf_batch *b = &tls_batch;
    if (b->count && !tn__same_device(b->dev, tn__dev(t))) {
        tn_status st = flush(b);
        if (st < 0) return st;
    }
    /* a permuted or broadcast dense tensor is checked in place (its block
     * holds exactly its values); any other strided one through a contiguous
     * copy made now, whose storage is the batch's alone */
    int64_t n = 0;
    const bool dense = tn__dense_block(t, true, &n);
    tn_tensor *c = dense ? tn__retain(t) : tn__copy_as(t, t->dtype);
    if (!c) return tn_last_status();
    if (!b->count) {
        pthread_once(&g_exit_once, make_exit_key);
        /* without the key (out of memory at its creation) a thread that
         * exits with checks pending keeps their storages: nothing else */
        if (g_exit_key_ok && !pthread_getspecific(g_exit_key))
            (void)pthread_setspecific(g_exit_key, b);
        b->dev = tn__dev(t);
        /* relaxed: see flush() */
        atomic_fetch_add_explicit(&tn__nf_batched, 1, memory_order_relaxed);
    }
    int i = b->count++;
    b->item[i] = (tn_nf_item){.p = tn__ptr(c),
                              .n = dense ? n : tn__numel(c->ndim, c->shape),
                              .key = s << 1,
                              .dt = c->dtype,
                              .word = word};
    tn__storage_retain(c->storage);
    b->hold[i] = c->storage;
    tn_release(c);
    return b->count == TN_NONFINITE_MAX ? flush(b) : TN_OK;
}

/* Hook: a kernel is about to write operand k of ops (bit k of write_mask);
 * when one of them is held by this thread's batch, the batch runs first. */
void tn__anomaly_nf_before_write(int nops, const tn_tensor *const *ops, unsigned write_mask) {
    nf_batch *b = &tls_batch;
    if (!b->count) return;
    for (int k = 0; k < nops; k++) {
        if (!(write_mask >> k & 1u) || !ops[k]) continue;
        for (int i = 0; i < b->count; i++)
            if (b->hold[i] == ops[k]->storage) {
                if (flush(b) < 0) tn_clear_error(); /* a check never fails an op */
                return;
            }
    }
}

/* ---- checks -------------------------------------------------------------------------------- */

static bool checked(const tn_tensor *t) {
    return t && !tn__on_cpu(t) && tn__is_float(t->dtype) && tn__numel(t->ndim, t->shape) > 0;
}

tn_status tn__anomaly_device_check_backward(tn_node *n, tn_tensor *const *gi) {
    for (int i = 0; i < n->n_in; i++) {
        if (!checked(gi[i])) continue;
        tn_status st = enqueue(gi[i], record(true, i, n->fn->name, n->trace), 1);
        if (st < 0) return st;
    }
    return TN_OK;
}

void tn__anomaly_device_check_forward(const char *op, const tn_tensor *out) {
    if (!checked(out)) return;
    /* the trace the op's node took in anomaly mode, else a new one */
    const tn_node *fn = out->ag ? out->ag->grad_fn : NULL;
    tn_backtrace bt;
    const tn_backtrace *use = fn && fn->trace ? fn->trace : &bt;
    if (use == &bt) tn__bt_capture(&bt);
    if (enqueue(out, record(false, 0, op, use), 0) < 0)
        tn_clear_error(); /* a check never fails an op */
}

/* ---- polls ----------------------------------------------------------------------------------- */

/* Turns polled keys into the reports and, for backward, the error: the
 * forward producer is warned about; a backward one in backward is the
 * error, with PyTorch's text, and when a forward value went non-finite
 * first, its report names that op as the origin and the node as a relay
 * (the device keeps no per-node evidence of saved values: the CPU's relay
 * test is the finer one). */
static tn_status report(const uint64_t key[TN_NONFINITE_WORDS], bool in_backward) {
    const nf_record *f = NULL, *bw = NULL;
    uint64_t fs = key[0] >> 1, bs = key[1] >> 1;
    if (key[0]) f = lookup(fs);
    if (key[1]) bw = lookup(bs);
    if (key[0]) {
        const char *name = f ? f->name : "(an op whose check record was overwritten)";
        tn_anomaly_report *rep = tn__report_begin(TN_ANOMALY_NAN_FORWARD, name);
        if (f && f->bt.n) tn__report_set_forward(rep, &f->bt);
        tn__report_set_output_index(rep, 0);
        const char *who = tn__report_first_culprit(rep);
        tn__anomaly_warn(
            "Function '%s' returned %s values in its 0th output (forward, on the device)%s%s.",
            name, key[0] & TN_NONFINITE_INF ? "inf" : "nan", who ? ", called from " : "",
            who ? who : "");
    }
    if (!key[1]) return TN_OK;
    const char *name = bw ? bw->name : "(a node whose check record was overwritten)";
    const char *what = key[1] & TN_NONFINITE_INF ? "inf" : "nan";
    int index = bw ? bw->index : 0;
    tn_anomaly_report *rep;
    if (key[0] && fs < bs) { /* a relay of the forward value, as far as the device can tell */
        rep = tn__report_begin(TN_ANOMALY_NAN_FORWARD, f ? f->name : name);
        if (f && f->bt.n) tn__report_set_forward(rep, &f->bt);
        tn__report_set_output_index(rep, 0);
        tn__report_set_relay(rep, name, index);
    } else {
        rep = tn__report_begin(TN_ANOMALY_NAN_BACKWARD, name);
        if (bw && bw->bt.n) tn__report_set_forward(rep, &bw->bt);
        tn__report_set_output_index(rep, index);
    }
    const char *who = tn__report_first_culprit(rep);
    if (in_backward) {
        /* PyTorch's "Error detected in ..." line, as the CPU's backward gives */
        if (key[0] && fs < bs)
            tn__anomaly_warn(
                "Error detected in %s (on the device), after a nan/inf value made in forward "
                "by '%s'%s%s. tn_anomaly_report_print(tn_last_anomaly(), f) prints the "
                "whole report.",
                name, f ? f->name : "(an op whose check record was overwritten)",
                who ? ", called from " : "", who ? who : "");
        else if (who)
            tn__anomaly_warn(
                "Error detected in %s (on the device), created by %s. "
                "tn_anomaly_report_print(tn_last_anomaly(), f) prints the whole report.",
                name, who);
        return tn__error(TN_ERR_NAN, "Function '%s' returned %s values in its %dth output.", name,
                         what, index);
    }
    tn__anomaly_warn(
        "Function '%s' returned %s values in its %dth output (backward, on the device)%s%s.", name,
        what, index, who ? ", called from " : "", who ? who : "");
    return TN_OK;
}

tn_status tn__anomaly_device_poll(tn_device dev, bool in_backward) {
    if (!tn__dev_has_nonfinite(dev)) return TN_OK;
    nf_batch *b = &tls_batch;
    /* check_nan switched off (by another thread) while some thread still
     * holds checks: only a thread with checks of its own polls */
    if (!tn__anomaly_nan() && !b->count) return TN_OK;
    tn_status st = b->count && tn__same_device(b->dev, dev) ? flush(b) : TN_OK;
    if (!take_checked(dev)) return st; /* no check ran there since the last poll */
    uint64_t key[TN_NONFINITE_WORDS];
    tn_status ps = tn__dev_nonfinite_poll(dev, key);
    if (ps < 0) mark_checked(dev); /* unread: the next poll tries again */
    if (st == TN_OK) st = ps;
    tn_status rs = ps == TN_OK ? report(key, in_backward) : TN_OK;
    return st < 0 ? st : rs;
}

tn_status tn__anomaly_poll_devices(bool in_backward) {
    tn_status st = TN_OK;
    /* CUDA not loaded: no device tensor to check, and no reason to load it */
    for (int d = 0, n = tn__dev_count_loaded(TN_CUDA); d < n; d++) {
        tn_status s = tn__anomaly_device_poll(TN_DEVICE_CUDA(d), in_backward);
        if (st == TN_OK) st = s;
    }
    return st;
}

void tn__anomaly_nf_flush_thread(void) {
    if (tls_batch.count && flush(&tls_batch) < 0) tn_clear_error();
}
