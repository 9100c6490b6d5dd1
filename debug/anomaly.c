/* Anomaly mode: the switches, the per-storage write ring, and the hooks the
 * engine calls (node creation, version bumps, saved-tensor unpack, backward
 * and forward NaN checks).
 *
 * check_nan also keeps, with a storage's ring, the origin of the non-finite
 * values it holds: the forward op that produced them from finite inputs,
 * passed on by the ops that relay them. A backward node whose non-finite
 * output comes with a non-finite saved tensor is then reported as a relay,
 * with that origin, rather than as the producer.
 *
 * The write ring (one per storage, made on the first write recorded in
 * anomaly mode) keeps the last TN_RING writes through ANY alias of the
 * storage: {op, version reached, write epoch, thread, version-counter
 * identity, backtrace}. Keeping it with the storage rather than with the
 * version counter lets one ring answer both questions: which tracked writes
 * moved a saved tensor's version (same counter), and which untracked writes
 * (.data: another counter) changed its bytes.
 *
 * The latest writes alone can miss the one a version error is about: the
 * first write after the save (the save's version + 1), when many writes
 * follow it. A save in anomaly mode marks its version counter
 * (tn__version_save, engine/core/hooks.h) and the write that reaches the
 * marked version is also kept in one of TN_FIRST `first` slots, under the
 * same ticket, where only later saves' first writes replace it. Snapshots
 * merge both, one record per ticket.
 *
 * Ring protocol (multi-producer, lock-free): a writer takes a ticket with
 * fetch_add on `head`; its slot is ticket % TN_RING. Each slot has a
 * sequence word: 0 = empty, odd = being written, 2*(ticket+1) = complete
 * for that ticket. A writer CASes the slot's sequence from an even value to
 * odd; if the slot is mid-write (odd: a writer a whole ring behind) or the
 * CAS loses, the write is counted in `dropped` instead of corrupting the
 * slot. The fields are relaxed atomics; the final release store of the
 * sequence publishes them, and a reader validates a slot seqlock-style
 * (acquire load, copy, acquire fence, reload).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../engine/autograd/autograd_internal.h"
#include "debug_internal.h"

/* Each distinct warning is printed once, then counted (repeat.c). */
static tn_repeats g_warnings = TN_REPEATS_INIT;

void tn__anomaly_warn(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint64_t key = tn__repeat_hash(TN_HASH_SEED, msg, strlen(msg));
    if (!tn__repeat_note(&g_warnings, key, stderr)) return;
    tn__warn("%s", msg);
    /* the summary names the warning by its first sentence */
    const char *end = strstr(msg, ". ");
    int len = end ? (int)(end - msg) + 1 : (int)strlen(msg);
    char label[200];
    snprintf(label, sizeof label, "warning: \"%.*s\"", len > 160 ? 160 : len, msg);
    tn__repeat_label(&g_warnings, key, label);
}

__attribute__((destructor)) static void warnings_at_exit(void) {
    tn__repeat_flush(&g_warnings, stderr, false);
}

void tn_set_detect_anomaly(bool enabled, bool check_nan) {
    unsigned g = atomic_load_explicit(&tn__anomaly_flags, memory_order_relaxed);
    unsigned keep = g & (TN_ANOMALY_UNTRACKED_ERR | TN_ANOMALY_LOCAL_SEEN);
    unsigned f = keep | (enabled ? TN_ANOMALY_ON : 0) | (enabled && check_nan ? TN_ANOMALY_NAN : 0);
    atomic_store_explicit(&tn__anomaly_flags, f, memory_order_relaxed);
    tn__anomaly_nf_flush_thread(); /* checks made under the old mode still run */
    if (!enabled) tn__repeat_flush(&g_warnings, stderr, false);
}

void tn_set_detect_anomaly_local(int mode) {
    tn__anomaly_nf_flush_thread(); /* checks made under the old mode still run */
    if (mode < 0) {
        tn__anomaly_local = 0;
        return;
    }
    if (mode == 0) tn__repeat_flush(&g_warnings, stderr, false);
    /* the untracked-error option stays process-wide */
    unsigned g = atomic_load_explicit(&tn__anomaly_flags, memory_order_relaxed);
    tn__anomaly_local = 0x80u | (g & TN_ANOMALY_UNTRACKED_ERR) | (mode >= 1 ? TN_ANOMALY_ON : 0) |
                        (mode >= 2 ? TN_ANOMALY_NAN : 0);
    atomic_fetch_or_explicit(&tn__anomaly_flags, TN_ANOMALY_LOCAL_SEEN, memory_order_relaxed);
}

bool tn_is_anomaly_enabled(void) { return tn__anomaly() & TN_ANOMALY_ON; }
bool tn_is_anomaly_check_nan_enabled(void) { return tn__anomaly() & TN_ANOMALY_NAN; }

void tn_set_anomaly_untracked_error(bool as_error) {
    if (tn__anomaly_local) /* keep this thread's override in step */
        tn__anomaly_local = as_error ? tn__anomaly_local | TN_ANOMALY_UNTRACKED_ERR
                                     : tn__anomaly_local & ~TN_ANOMALY_UNTRACKED_ERR;
    if (as_error)
        atomic_fetch_or_explicit(&tn__anomaly_flags, TN_ANOMALY_UNTRACKED_ERR,
                                 memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&tn__anomaly_flags, ~TN_ANOMALY_UNTRACKED_ERR,
                                  memory_order_relaxed);
}

__attribute__((constructor)) static void read_environment(void) {
    const char *e = getenv("TENET_DETECT_ANOMALY");
    if (!e || !*e || !strcmp(e, "0")) return;
    tn_set_detect_anomaly(true, !strcmp(e, "nan"));
}

/* ---- the write ring ------------------------------------------------------------ */

#define TN_RING 16
#define TN_FIRST 4 /* first writes after the latest saves */
_Static_assert(TN_SNAP_MAX == TN_RING + TN_FIRST, "a snapshot holds every slot");

typedef struct ring_slot {
    _Atomic uint64_t seq;
    _Atomic(const char *) op;
    _Atomic uint64_t version, epoch, tid;
    _Atomic uint64_t name[TN_THREAD_NAME / 8]; /* the thread's name, 8 bytes a word */
    _Atomic(const void *) vblock;
    _Atomic int n;
    _Atomic(void *) pc[TN_BT_MAX];
} ring_slot;

/* check_nan: the forward op that first produced the non-finite values a
 * storage holds (found at that op, inherited by the ops that pass them on).
 * Immutable once published. */
typedef struct nan_origin {
    uint64_t seq; /* order of production: the lowest came first */
    char op[64];  /* a copy: a custom function's name may not outlive the tensor */
    tn_backtrace bt;
} nan_origin;

typedef struct tn_write_ring {
    _Atomic uint64_t head;
    _Atomic uint64_t dropped;
    _Atomic uint64_t evicted_epoch; /* newest epoch among overwritten records */
    _Atomic(nan_origin *) origin;   /* set once (first producer wins), freed with the ring */
    _Atomic uint64_t first_head;    /* tickets of the first slots */
    ring_slot slot[TN_RING];
    ring_slot first[TN_FIRST];
} tn_write_ring;

/* Out of memory, the write is not recorded: the write itself has happened
 * (this runs at its version bump) and cannot fail any more, and a report on
 * the storage then says that the write was not recorded ("or dropped"). */
static tn_write_ring *ring_get(tn_storage *s) {
    /* acquire: pairs with the release CAS that installed it (zeroed memory
     * must be visible before the pointer). */
    tn_write_ring *r = atomic_load_explicit(&s->ring, memory_order_acquire);
    if (r) return r;
    tn_write_ring *fresh = tn__calloc_quiet(1, sizeof *fresh);
    if (!fresh) return NULL;
    if (atomic_compare_exchange_strong_explicit(&s->ring, &r, fresh, memory_order_acq_rel,
                                                memory_order_acquire))
        return fresh;
    tn__mfree(fresh); /* another writer installed one first */
    return r;
}

void tn__ring_free(tn_storage *s) {
    tn_write_ring *r = atomic_load_explicit(&s->ring, memory_order_acquire);
    if (!r) return;
    /* relaxed: the last reference is gone; the storage's acq_rel release
     * ordered every store to the ring before this */
    tn__mfree(atomic_load_explicit(&r->origin, memory_order_relaxed));
    tn__mfree(r);
}

/* One write as the writer captured it. */
typedef struct write_rec {
    const char *op;
    uint64_t version, epoch, tid;
    char name[TN_THREAD_NAME];
    const void *vblock;
    tn_backtrace bt;
} write_rec;

/* Writes w into sl under `ticket` (seqlock: odd while being written); a
 * ring slot `evicts` (the record it replaces counts in evicted_epoch). A
 * slot mid-write (a writer a whole ring behind) or a lost CAS is not
 * touched: false, the write is dropped from this slot. */
static bool fill_slot(tn_write_ring *r, ring_slot *sl, bool evicts, uint64_t ticket,
                      const write_rec *w) {
    uint64_t seq = atomic_load_explicit(&sl->seq, memory_order_relaxed);
    /* acquire: the field stores below stay after the claim */
    if ((seq & 1) || !atomic_compare_exchange_strong_explicit(
                         &sl->seq, &seq, seq | 1, memory_order_acquire, memory_order_relaxed))
        return false;
    if (seq && evicts) { /* overwriting a complete record of the ring: remember how recent */
        uint64_t e = atomic_load_explicit(&sl->epoch, memory_order_relaxed);
        uint64_t cur = atomic_load_explicit(&r->evicted_epoch, memory_order_relaxed);
        while (e > cur &&
               !atomic_compare_exchange_weak_explicit(&r->evicted_epoch, &cur, e,
                                                      memory_order_relaxed, memory_order_relaxed)) {
        }
    }
    atomic_store_explicit(&sl->op, w->op, memory_order_relaxed);
    atomic_store_explicit(&sl->version, w->version, memory_order_relaxed);
    atomic_store_explicit(&sl->epoch, w->epoch, memory_order_relaxed);
    atomic_store_explicit(&sl->tid, w->tid, memory_order_relaxed);
    for (int i = 0; i < TN_THREAD_NAME / 8; i++) {
        uint64_t word;
        memcpy(&word, w->name + 8 * i, 8);
        atomic_store_explicit(&sl->name[i], word, memory_order_relaxed);
    }
    atomic_store_explicit(&sl->vblock, w->vblock, memory_order_relaxed);
    atomic_store_explicit(&sl->n, w->bt.n, memory_order_relaxed);
    for (int i = 0; i < w->bt.n; i++)
        atomic_store_explicit(&sl->pc[i], w->bt.pc[i], memory_order_relaxed);
    /* release: publishes the fields above to readers that acquire seq. */
    atomic_store_explicit(&sl->seq, 2 * (ticket + 1), memory_order_release);
    return true;
}

/* Whether the write that reached `version` is the first after a save of
 * its counter. The fence pairs with the one in tn__version_save: our
 * version bump (before it) and the save's mark (before its fence) cannot
 * both be missed by the other side. */
static bool first_after_save(const tn_tensor *t, uint64_t version) {
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&t->version->first_after_save, memory_order_relaxed) == version;
}

void tn__anomaly_record_write(const tn_tensor *t, uint64_t version, const char *op) {
    write_rec w = {
        .op = op, .version = version, .tid = tn__os_tid(), .vblock = (const void *)t->version};
    bool first = first_after_save(t, version);
    tn__bt_capture(&w.bt);
    tn__thread_name(w.name);
    tn_write_ring *r = ring_get(t->storage);
    if (!r) return;
    w.epoch = atomic_load_explicit(&t->storage->write_epoch, memory_order_relaxed);
    uint64_t ticket = atomic_fetch_add_explicit(&r->head, 1, memory_order_relaxed);
    bool kept = fill_slot(r, &r->slot[ticket % TN_RING], true, ticket, &w);
    if (first) {
        uint64_t k = atomic_fetch_add_explicit(&r->first_head, 1, memory_order_relaxed);
        kept |= fill_slot(r, &r->first[k % TN_FIRST], false, ticket, &w);
    }
    if (!kept) atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

static bool read_slot(ring_slot *sl, tn_write_snap *w, uint64_t *ticket) {
    uint64_t s1 = atomic_load_explicit(&sl->seq, memory_order_acquire);
    if (s1 == 0 || (s1 & 1)) return false;
    w->op = atomic_load_explicit(&sl->op, memory_order_relaxed);
    w->version = atomic_load_explicit(&sl->version, memory_order_relaxed);
    w->epoch = atomic_load_explicit(&sl->epoch, memory_order_relaxed);
    w->tid = atomic_load_explicit(&sl->tid, memory_order_relaxed);
    for (int i = 0; i < TN_THREAD_NAME / 8; i++) {
        uint64_t word = atomic_load_explicit(&sl->name[i], memory_order_relaxed);
        memcpy(w->thread_name + 8 * i, &word, 8);
    }
    w->thread_name[TN_THREAD_NAME - 1] = '\0'; /* a torn copy is dropped below anyway */
    w->vblock = atomic_load_explicit(&sl->vblock, memory_order_relaxed);
    int n = atomic_load_explicit(&sl->n, memory_order_relaxed);
    w->bt.n = n < 0 ? 0 : n > TN_BT_MAX ? TN_BT_MAX : n;
    for (int i = 0; i < w->bt.n; i++)
        w->bt.pc[i] = atomic_load_explicit(&sl->pc[i], memory_order_relaxed);
    /* acquire fence: orders the field loads before the re-check (seqlock). */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&sl->seq, memory_order_relaxed) != s1) return false;
    *ticket = s1 / 2 - 1;
    return true;
}

/* Adds slot sl's record to out[0, *n) unless its ticket is there already. */
static void snap_slot(ring_slot *sl, uint64_t since_epoch, tn_write_snap *out, uint64_t *tickets,
                      int *n, int max) {
    uint64_t ticket;
    if (*n == max || !read_slot(sl, &out[*n], &ticket) || out[*n].epoch <= since_epoch) return;
    for (int i = 0; i < *n; i++)
        if (tickets[i] == ticket) return;
    tickets[(*n)++] = ticket;
}

int tn__ring_snapshot(const tn_storage *s, uint64_t since_epoch, tn_write_snap *out, int max,
                      uint64_t *dropped) {
    tn_write_ring *r = atomic_load_explicit(&((tn_storage *)s)->ring, memory_order_acquire);
    *dropped = 0;
    if (!r) return 0;
    uint64_t tickets[TN_SNAP_MAX];
    if (max > TN_SNAP_MAX) max = TN_SNAP_MAX;
    int n = 0;
    for (int i = 0; i < TN_FIRST; i++)
        snap_slot(&r->first[i], since_epoch, out, tickets, &n, max);
    for (int i = 0; i < TN_RING; i++)
        snap_slot(&r->slot[i], since_epoch, out, tickets, &n, max);
    /* Oldest first: insertion sort. Writes through one version counter by
     * their versions (two writers may claim ring tickets in the other order
     * than they moved the counter), others by ticket. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && (out[j - 1].vblock == out[j].vblock
                                      ? out[j - 1].version > out[j].version
                                      : tickets[j - 1] > tickets[j]);
             j--) {
            tn_write_snap w = out[j];
            out[j] = out[j - 1];
            out[j - 1] = w;
            uint64_t t = tickets[j];
            tickets[j] = tickets[j - 1];
            tickets[j - 1] = t;
        }
    /* Writes lost to contention, plus (at least) one when a record newer
     * than the save has been overwritten by later writes. */
    *dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed) +
               (atomic_load_explicit(&r->evicted_epoch, memory_order_relaxed) > since_epoch);
    return n;
}

/* ---- node creation ----------------------------------------------------------------- */

/* The node whose backward is running on this thread (create_graph chains). */
static _Thread_local tn_node *tls_running;

tn_node *tn__anomaly_set_running(tn_node *n) {
    tn_node *prev = tls_running;
    tls_running = n;
    return prev;
}

/* Anomaly mode promises every node its forward trace (a report without one
 * reads as "recorded with anomaly mode off"), so a node whose trace cannot
 * be stored is not made: the op fails with TN_ERR_OUT_OF_MEMORY. */
tn_status tn__anomaly_on_node(tn_node *n) {
    tn_backtrace *bt = tn__malloc(sizeof *bt);
    if (!bt) return TN_ERR_OUT_OF_MEMORY;
    tn__bt_capture(bt);
    n->trace = bt;
    if (tls_running) {
        n->parent = tls_running;
        tn__node_retain(n->parent);
    }
    return TN_OK;
}

void tn__anomaly_node_free(tn_node *n) {
    tn__mfree(n->trace);
    if (n->parent) tn__node_release(n->parent);
}

/* ---- reports ------------------------------------------------------------------------- */

static tn_anomaly_report *node_report(tn_anomaly_kind kind, tn_node *n) {
    tn_anomaly_report *r = tn__report_begin(kind, n->fn->name);
    tn__report_set_forward(r, n->trace);
    for (tn_node *p = n->parent; p; p = p->parent)
        tn__report_add_parent(r, p->fn->name, p->trace);
    return r;
}

/* Lists the ring's writes since the save: same counter (tracked) or, for
 * untracked reports, other counters. Tracked writes are those that moved
 * the version from the saved one to `cur`, the one the check read: a write
 * past it came after the check. Of those cur - saved writes, the ones not
 * listed are the report's dropped count; untracked ones have no such count
 * (the ring's own losses). Returns how many were listed. */
static int add_writes(tn_anomaly_report *r, const tn_saved *s, bool tracked, uint64_t cur) {
    tn_write_snap w[TN_SNAP_MAX];
    uint64_t dropped;
    int n = tn__ring_snapshot(s->orig->storage, s->epoch, w, TN_SNAP_MAX, &dropped), listed = 0;
    for (int i = 0; i < n; i++) {
        bool same = w[i].vblock == (const void *)s->orig->version;
        if (same != tracked) continue;
        if (tracked && (w[i].version <= s->version || w[i].version > cur)) continue;
        tn__report_add_write(r, &w[i], tracked);
        listed++;
    }
    if (tracked) dropped = cur - s->version > (uint64_t)listed ? cur - s->version - listed : 0;
    tn__report_set_dropped(r, dropped);
    return listed;
}

const char *tn__anomaly_inplace_report(tn_node *n, const tn_saved *s, uint64_t cur) {
    tn_anomaly_report *r = node_report(TN_ANOMALY_INPLACE, n);
    tn__report_set_saved(r, s->orig, s->is_output ? s->output_nr : -1, s->version, cur);
    add_writes(r, s, true, cur);
    return tn__report_first_culprit(r);
}

/* The report of an untracked write to saved slot s (its versions set). */
static tn_anomaly_report *untracked_report(tn_node *n, const tn_saved *s, uint64_t *cur) {
    tn_anomaly_report *r = node_report(TN_ANOMALY_UNTRACKED, n);
    *cur = tn__version_get(s->orig);
    tn__report_set_saved(r, s->orig, s->is_output ? s->output_nr : -1, s->version, *cur);
    return r;
}

/* An untracked write's verdict, as the switch says: TN_ERR_INPLACE_MODIFIED
 * with msg, or a warning; by names the writer (", written by ...") or is "",
 * hint ends the warning. */
static tn_status untracked_verdict(tn_node *n, const tn_saved *s, const char *msg, const char *by,
                                   const char *hint) {
    char type[200];
    tn__format_shape(type, sizeof type, s->orig->ndim, s->orig->shape);
    if (tn__anomaly() & TN_ANOMALY_UNTRACKED_ERR)
        return tn__error(TN_ERR_INPLACE_MODIFIED, "%s: [%s %s], saved by %s%s.", msg,
                         tn_dtype_name(s->orig->dtype), type, n->fn->name, by);
    tn__anomaly_warn("%s: [%s %s], saved by %s%s. The gradient may be silently wrong%s", msg,
                     tn_dtype_name(s->orig->dtype), type, n->fn->name, by, hint);
    return TN_OK;
}

/* A saved tensor over memory shared with another framework (tn_from_blob,
 * DLPack): tenet's counters cannot see that framework's writes, so the save
 * took a digest of the bytes; a different digest now, with no write of
 * tenet's since, is a write from outside. */
static tn_status check_outside(tn_node *n, const tn_saved *s) {
    if ((uint32_t)tn__tensor_digest(s->orig) == s->digest) return TN_OK;
    uint64_t v;
    tn__report_set_outside(untracked_report(n, s, &v));
    return untracked_verdict(n, s,
                             "a variable needed for gradient computation was written outside "
                             "tenet (memory shared through DLPack or tn_from_blob)",
                             "", ".");
}

tn_status tn__anomaly_check_untracked(tn_node *n, const tn_saved *s) {
    uint64_t now = atomic_load_explicit(&s->orig->storage->write_epoch, memory_order_relaxed);
    if (now == s->epoch) return s->digested ? check_outside(n, s) : TN_OK;
    /* Build into a scratch check first: only a write through another
     * counter is an untracked write (tracked ones moved the version). */
    tn_write_snap w[TN_SNAP_MAX];
    uint64_t dropped;
    int n_w = tn__ring_snapshot(s->orig->storage, s->epoch, w, TN_SNAP_MAX, &dropped), other = 0;
    for (int i = 0; i < n_w; i++)
        other += w[i].vblock != (const void *)s->orig->version;
    if (!other) return TN_OK;
    uint64_t v;
    tn_anomaly_report *r = untracked_report(n, s, &v);
    add_writes(r, s, false, v);
    const char *who = tn__report_first_culprit(r);
    char by[900];
    snprintf(by, sizeof by, ", written by %s", who ? who : "(unknown)");
    return untracked_verdict(n, s,
                             "a variable needed for gradient computation was modified through an "
                             "alias that autograd does not track (e.g. .data)",
                             by,
                             "; tn_anomaly_report_print(tn_last_anomaly(), stderr) shows every "
                             "write.");
}

void tn__anomaly_backward_error(tn_node *n, tn_status st) {
    /* version, untracked and NaN failures built their report already */
    if (st == TN_ERR_AUTOGRAD) node_report(TN_ANOMALY_SECOND_BACKWARD, n);
    /* As PyTorch's warning "Error detected in MulBackward0 ...": one line on
     * stderr naming the forward call; the report object has the rest. */
    const tn_anomaly_report *r = tn_last_anomaly();
    if (!r) return;
    const char *relay = tn_anomaly_report_relayed_by(r);
    bool relayed = relay && !strcmp(relay, n->fn->name);
    if (!relayed && strcmp(tn_anomaly_report_node(r), n->fn->name)) return;
    int nf = 0;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &nf);
    char where[700] = "";
    if (nf > 0 && f[0].function)
        snprintf(where, sizeof where, "%s (%s:%d)", f[0].function,
                 f[0].file ? tn__short_path(f[0].file) : "?", f[0].line);
    if (relayed && tn_anomaly_report_kind(r) == TN_ANOMALY_NAN_FORWARD)
        tn__anomaly_warn(
            "Error detected in %s, which only relays a nan/inf value it saved in forward: "
            "the value was produced by '%s'%s%s. tn_anomaly_report_print(tn_last_anomaly(), "
            "f) prints the whole report.",
            n->fn->name, tn_anomaly_report_node(r), *where ? ", called from " : "", where);
    else if (*where)
        tn__anomaly_warn(
            "Error detected in %s, created by %s.%s tn_anomaly_report_print(tn_last_anomaly(), "
            "f) prints the whole report.",
            n->fn->name, where,
            relayed ? " It only relays a nan/inf value it saved in forward, whose producer "
                      "was not recorded (check_nan was off in forward, or the value came in "
                      "as data)."
                    : "");
    else
        tn__anomaly_warn(
            "Error detected in %s. No forward pass information available. Enable detect "
            "anomaly during forward pass for more information.",
            n->fn->name);
}

/* ---- NaN / Inf checks ------------------------------------------------------------------ */

/* 0: all finite; 1: NaN present; 2: Inf (and no NaN). A CPU tensor is
 * scanned in place (nonfinite.c); a device tensor (a mixed-device node's
 * other side) is copied to the host first. */
static int nonfinite(const tn_tensor *t) {
    if (!t || !tn__is_float(t->dtype)) return 0;
    if (tn__on_cpu(t)) return tn__nonfinite_cpu(t);
    tn_tensor *c = tn__copy_to_device(t, t->dtype, TN_DEVICE_CPU);
    int res = c ? tn__nonfinite_cpu(c) : 0;
    tn_release(c);
    return res;
}

/* ---- where a non-finite value came from ----------------------------------------------- */

/* Relaxed: only hands out increasing numbers; nothing is published with it. */
static _Atomic uint64_t g_origin_seq;

static const nan_origin *origin_get(const tn_storage *s) {
    /* acquire (both): pair with the release CAS that installed the ring
     * (ring_get) and the origin (origin_set), whose fields are then seen */
    tn_write_ring *r = atomic_load_explicit(&((tn_storage *)s)->ring, memory_order_acquire);
    return r ? atomic_load_explicit(&r->origin, memory_order_acquire) : NULL;
}

/* Records where s's non-finite values came from, unless it is known already
 * (they were there first). Out of memory nothing is recorded: a later
 * report then says that the producer is unknown. */
static void origin_set(tn_storage *s, const nan_origin *o) {
    tn_write_ring *r = ring_get(s);
    if (!r || atomic_load_explicit(&r->origin, memory_order_relaxed)) return;
    nan_origin *mine = tn__malloc_quiet(sizeof *mine), *none = NULL;
    if (!mine) return;
    *mine = *o;
    /* release: publishes *mine to origin_get's acquire load */
    if (!atomic_compare_exchange_strong_explicit(&r->origin, &none, mine, memory_order_release,
                                                 memory_order_relaxed))
        tn__mfree(mine); /* another thread recorded one first */
}

/* The earliest origin among t's if it is non-finite; *any: it is. */
static const nan_origin *earlier_origin(const tn_tensor *t, const nan_origin *best, bool *any) {
    if (!t || !nonfinite(t)) return best;
    *any = true;
    const nan_origin *o = origin_get(t->storage);
    return o && (!best || o->seq < best->seq) ? o : best;
}

/* ---- backward ------------------------------------------------------------------------------ */

/* n's output `index` is non-finite and its saved tensor (or its inner
 * node's) already was: n only relays a value from forward. PyTorch's error
 * names n; the report names the forward op that produced the value first,
 * as the forward warning did, or says that it was not recorded. */
static void relay_report(tn_node *n, int index, const nan_origin *o) {
    tn_anomaly_report *r;
    if (o) {
        r = tn__report_begin(TN_ANOMALY_NAN_FORWARD, o->op);
        tn__report_set_forward(r, &o->bt);
        tn__report_set_output_index(r, 0);
    } else {
        r = node_report(TN_ANOMALY_NAN_BACKWARD, n);
        tn__report_set_output_index(r, index);
    }
    tn__report_set_relay(r, n->fn->name, index);
}

tn_status tn__anomaly_check_backward(tn_node *n, tn_tensor *const *go, tn_tensor *const *gi) {
    for (int i = 0; i < n->n_in; i++)
        if (gi[i] && !tn__on_cpu(gi[i])) return tn__anomaly_device_check_backward(n, gi);
    for (int i = 0; i < n->n_in; i++) {
        int bad = nonfinite(gi[i]);
        if (!bad) continue;
        /* the output gradients are read only now: a non-finite one makes
         * this propagation, not this node's doing */
        for (int k = 0; k < n->n_out; k++)
            if (nonfinite(go[k])) return TN_OK;
        /* the saved slots are held until the node's backward returns */
        const nan_origin *o = NULL;
        bool relay = false;
        for (const tn_node *m = n; m; m = m == n ? n->inner : NULL)
            for (int k = 0; k < m->n_saved; k++)
                if (m->saved[k].defined) o = earlier_origin(m->saved[k].orig, o, &relay);
        if (relay) {
            relay_report(n, i, o);
        } else {
            tn_anomaly_report *r = node_report(TN_ANOMALY_NAN_BACKWARD, n);
            tn__report_set_output_index(r, i);
        }
        return tn__error(TN_ERR_NAN, "Function '%s' returned %s values in its %dth output.",
                         n->fn->name, bad == 1 ? "nan" : "inf", i);
    }
    return TN_OK;
}

/* ---- forward ------------------------------------------------------------------------------- */

void tn__anomaly_check_forward(const char *op, const tn_tensor *out, int n_in,
                               const tn_tensor *const *in) {
    if (!tn__on_cpu(out)) {
        tn__anomaly_device_check_forward(op, out);
        return;
    }
    int bad = nonfinite(out);
    if (!bad) return;
    const nan_origin *from = NULL;
    bool relay = false;
    for (int i = 0; i < n_in; i++)
        from = earlier_origin(in[i], from, &relay);
    if (relay) { /* propagation: out carries its inputs' origin on */
        if (from) origin_set(out->storage, from);
        return;
    }
    nan_origin o = {.seq = atomic_fetch_add_explicit(&g_origin_seq, 1, memory_order_relaxed)};
    snprintf(o.op, sizeof o.op, "%s", op);
    tn__bt_capture(&o.bt);
    origin_set(out->storage, &o);
    tn_anomaly_report *r = tn__report_begin(TN_ANOMALY_NAN_FORWARD, op);
    tn__report_set_forward(r, &o.bt);
    tn__report_set_output_index(r, 0);
    const char *who = tn__report_first_culprit(r);
    tn__anomaly_warn(
        "Function '%s' returned %s values in its 0th output (forward, from finite inputs)%s%s.", op,
        bad == 1 ? "nan" : "inf", who ? ", called from " : "", who ? who : "");
}
