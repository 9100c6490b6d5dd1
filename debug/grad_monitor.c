/* debug/grad_monitor.c — the gradient health monitor (include/tenet/debug.h).
 *
 * The engine calls in through four hook entries (engine/core/hooks.h) when
 * tn__monitor_flag is set: begin a pass's record, measure each node's input
 * gradients as they are made and each leaf's summed gradient at delivery,
 * end (publish the record as the thread's report, warn about the first
 * alarm). A monitored pass runs its nodes serially on the calling thread, so
 * the record needs no synchronisation; the switch, the thresholds and the
 * watch list are process-wide.
 *
 * Measuring reads the gradient in place where it is one dense block (a
 * transpose's too; anything else through a contiguous copy) with core's
 * tn__dev_grad_stats (engine/core/device.h; the backend's grad_stats): the
 * sum of squares and the largest |value| in float64 over a partition fixed by
 * the size, the same bits whatever the thread count; on the CPU at once.
 * Device gradients are measured on their device without a host wait each: a
 * pass gathers up to TN_GRAD_STATS_MAX of them (held until measured) and
 * enqueues one measure of the lot into results of core's (tn_dev_results).
 * Where the device cannot, the gradient is copied to the host and measured
 * there.
 *
 * A pass with device measures does not wait for them either: each measure's
 * read-back is enqueued behind it (tn__dev_results_readback_begin) and the
 * pass's end publishes the report as pending; the pass returns while the
 * device still runs it, and the host goes on enqueueing (the optimiser, the
 * next forward). The report is completed — results read
 * (tn__dev_results_read waits for those copies only), entries judged in
 * the order they were made, the alarm's warning printed — on this thread at
 * the first of: tn_last_grad_monitor, a synchronisation point (tn__sync_point:
 * tn_synchronize, a read of device data), the next monitored pass's start,
 * thread exit, process exit. A pass without device measures completes at its
 * end, as before.
 *
 * Memory: the record grows by doubling; out of memory, the pass goes on and
 * its report says it was cut short (nothing fails because of the monitor).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/core/hooks.h"
#include "debug_internal.h"

#define MON_NAME 64

typedef struct mon_entry {
    char name[MON_NAME];
    int input; /* the node's input; -1: a leaf */
    double norm, max_abs;
    tn_grad_health health;
    bool unread;    /* could not be measured (a device copy failed): NaN, never an alarm */
    bool has_trace; /* trace: the node's forward call, for the alarm */
    tn_backtrace trace;
} mon_entry;

/* The gradient scaler of a pass of a scaled loss (tn_grad_scaler_scale told the monitor). */
typedef struct mon_scaled {
    bool set;
    double scale;
    int64_t steps, skipped, in_row;
} mon_scaled;

struct tn_grad_monitor_report {
    mon_entry *e;
    int n, cap;
    bool truncated;
    mon_scaled scaler;
    int overflow; /* first OVERFLOW entry, -1 */
    int alarm;    /* first entry that crossed, -1 */
    tn_backtrace trace;
    bool has_trace;
    /* the alarm trace, symbolised when first read */
    bool symbolised;
    int n_frames, first;
    tn_frame frames[TN_BT_MAX];
    char sym[TN_BT_MAX][256];
};

/* ---- settings ------------------------------------------------------------------------ */

/* Relaxed: plain settings, read at the start of a pass. */
static _Atomic double g_explode, g_vanish;

void tn_set_grad_monitor(bool enabled, double explode_norm, double vanish_norm) {
    atomic_store_explicit(&g_explode, explode_norm > 0 ? explode_norm : 0, memory_order_relaxed);
    atomic_store_explicit(&g_vanish, vanish_norm > 0 ? vanish_norm : 0, memory_order_relaxed);
    atomic_store_explicit(&tn__monitor_flag, enabled ? 1u : 0u, memory_order_relaxed);
}

bool tn_is_grad_monitor_enabled(void) { return tn__monitor_on(); }

/* The watch list: immutable once published, replaced whole. A pass takes a
 * reference under the lock (once per pass, not per gradient), so a list
 * replaced meanwhile lives until the passes that use it end. */
typedef struct watch_list {
    int refs; /* under g_watch_lock */
    int n;
    tn_tensor **params;
    char (*names)[MON_NAME];
} watch_list;

static pthread_mutex_t g_watch_lock = PTHREAD_MUTEX_INITIALIZER;
static watch_list *g_watch;

static void watch_unref(watch_list *w) {
    if (!w) return;
    pthread_mutex_lock(&g_watch_lock);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&g_watch_lock);
    if (!last) return;
    for (int i = 0; i < w->n; i++)
        tn_release(w->params[i]);
    tn__mfree(w->params);
    tn__mfree(w->names);
    tn__mfree(w);
}

static watch_list *watch_ref(void) {
    pthread_mutex_lock(&g_watch_lock);
    watch_list *w = g_watch;
    if (w) w->refs++;
    pthread_mutex_unlock(&g_watch_lock);
    return w;
}

tn_status tn_grad_monitor_watch(int n, const char *const *names, tn_tensor *const *params) {
    if (n < 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_grad_monitor_watch: n = %d", n);
    if (n > 0 && (!names || !params))
        return tn__null_arg(false, "tn_grad_monitor_watch: argument '%s' is NULL",
                            names ? "params" : "names");
    for (int i = 0; i < n; i++) {
        if (!names[i]) return tn__null_arg(false, "tn_grad_monitor_watch: names[%d] is NULL", i);
        if (!params[i]) return tn__null_arg(true, "tn_grad_monitor_watch: params[%d] is NULL", i);
    }
    watch_list *w = NULL;
    if (n) {
        w = tn__calloc(1, sizeof *w);
        if (w) w->params = tn__calloc((size_t)n, sizeof *w->params);
        if (w && w->params) w->names = tn__calloc((size_t)n, sizeof *w->names);
        if (!w || !w->params || !w->names) {
            if (w) tn__mfree(w->params);
            tn__mfree(w);
            return TN_ERR_OUT_OF_MEMORY;
        }
        w->refs = 1;
        w->n = n;
        for (int i = 0; i < n; i++) {
            w->params[i] = tn__retain(params[i]);
            snprintf(w->names[i], MON_NAME, "%s", names[i]);
        }
    }
    pthread_mutex_lock(&g_watch_lock);
    watch_list *old = g_watch;
    g_watch = w;
    pthread_mutex_unlock(&g_watch_lock);
    watch_unref(old);
    return TN_OK;
}

/* ---- measuring ------------------------------------------------------------------------ */

/* Unreadable (out of memory, a device copy failed): NaN in the table, never an alarm. */
static void mark_unread(mon_entry *e) {
    e->norm = e->max_abs = (double)NAN;
    e->unread = true;
    tn_clear_error();
}

/* What grad_stats reads for gradient t (non-empty): t itself (retained) when it is one dense
 * block (a transpose's too: the sums over the block are the sums over its elements, and the
 * block has numel(t) of them), else a contiguous copy; NULL when that copy fails. */
static tn_tensor *measurable(const tn_tensor *t) {
    int64_t n;
    return tn__dense_block(t, false, &n) ? tn__retain(t) : tn__copy_as(t, t->dtype);
}

/* Measures CPU gradient t for e (grad_stats, at once). */
static void measure_cpu(mon_entry *e, const tn_tensor *t) {
    e->norm = e->max_abs = 0;
    if (tn_numel(t) == 0) return;
    tn_tensor *c = measurable(t);
    double v[2];
    tn_dev_results r;
    if (!c || tn__dev_results_init(&r, TN_DEVICE_CPU, 2, v) < 0 ||
        tn__dev_grad_stats(&r, 0, 1, (const tn_tensor *const *)&c) < 0) {
        mark_unread(e);
    } else {
        e->norm = sqrt(v[0]);
        e->max_abs = v[1];
    }
    if (c) (void)tn__dev_results_read(&r, NULL); /* the CPU's: nothing to wait for */
    tn_release(c);
}

/* Through a host copy (a device that cannot measure, or ran out of memory). */
static void measure_on_host(mon_entry *e, const tn_tensor *t) {
    tn_tensor *c = tn__copy_to_device(t, t->dtype, TN_DEVICE_CPU);
    if (c)
        measure_cpu(e, c);
    else
        mark_unread(e);
    tn_release(c);
}

/* ---- the pass's record ---------------------------------------------------------------- */

/* Device measures enqueued and not yet read: results 2 k and 2 k + 1 are entry[k]'s sum of
 * squares and max |value|. */
typedef struct mon_batch {
    struct mon_batch *next;
    int count;
    tn_dev_results res; /* core's; its read-back begun when it could be */
    int entry[TN_GRAD_STATS_MAX];
} mon_batch;

typedef struct mon_pass {
    tn_grad_monitor_report rep;
    double explode, vanish;
    watch_list *watch;
    /* device gradients gathered for the next measure (dense blocks, retained), one dtype and
     * device at a time */
    int n_held;
    tn_tensor *held[TN_GRAD_STATS_MAX];
    int held_entry[TN_GRAD_STATS_MAX];
    mon_batch *batches, *last_batch; /* in the order they were enqueued */
    bool pending; /* published with batches not yet read (counted in tn__mon_pending) */
} mon_pass;

/* The scaler of this thread's next monitored pass (monitor_scaled), taken by that pass. */
static _Thread_local mon_scaled tls_scaled;

static void monitor_scaled(double scale, int64_t steps, int64_t skipped, int64_t in_row) {
    tls_scaled = (mon_scaled){true, scale, steps, skipped, in_row};
}

static mon_pass *pass_new(void) {
    mon_pass *p = tn__calloc_quiet(1, sizeof *p);
    if (!p) return NULL;
    p->rep.alarm = p->rep.overflow = -1;
    p->rep.scaler = tls_scaled;
    tls_scaled.set = false;
    p->explode = atomic_load_explicit(&g_explode, memory_order_relaxed);
    p->vanish = atomic_load_explicit(&g_vanish, memory_order_relaxed);
    p->watch = watch_ref();
    return p;
}

static mon_entry *add_entry(mon_pass *p) {
    tn_grad_monitor_report *r = &p->rep;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        mon_entry *e = cap < (1 << 24) ? tn__malloc_quiet((size_t)cap * sizeof *e) : NULL;
        if (!e) {
            r->truncated = true;
            return NULL;
        }
        if (r->n) memcpy(e, r->e, (size_t)r->n * sizeof *e);
        tn__mfree(r->e);
        r->e = e;
        r->cap = cap;
    }
    mon_entry *e = &r->e[r->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Entry i's health, and the pass's alarm if it is the first to cross (entries are judged in
 * order, at the pass's end). A gradient that could not be read raises none (a NaN one explodes).
 * In a pass of a scaled loss the measures are divided by the scale first, so that the
 * thresholds apply to the true gradients, and a gradient that is not finite at a scale above 1
 * is the scaler's overflow (OVERFLOW, no alarm: its step is skipped and the scale backs off);
 * at a scale of 1 or less no scaling made it, and it explodes. */
static void judge(mon_pass *p, int i) {
    mon_entry *e = &p->rep.e[i];
    const mon_scaled *sc = &p->rep.scaler;
    if (sc->set && !e->unread) {
        e->norm /= sc->scale;
        e->max_abs /= sc->scale;
    }
    bool overflow = sc->set && sc->scale > 1 && !isfinite(e->norm);
    bool exploding = p->explode > 0 && !(e->norm <= p->explode);
    bool vanishing = e->input < 0 && (e->max_abs == 0 || (p->vanish > 0 && e->norm < p->vanish));
    e->health = e->unread   ? TN_GRAD_OK
                : overflow  ? TN_GRAD_OVERFLOW
                : exploding ? TN_GRAD_EXPLODING
                : vanishing ? TN_GRAD_VANISHING
                            : TN_GRAD_OK;
    if (overflow && p->rep.overflow < 0) p->rep.overflow = i;
    if (e->health == TN_GRAD_OK || overflow || p->rep.alarm >= 0) return;
    p->rep.alarm = i;
    p->rep.trace = e->trace;
    p->rep.has_trace = e->has_trace;
}

/* Enqueues the measure of the held gradients and lets them go (stream order keeps their
 * memory until the kernels ran). Where the device cannot, they are measured through the host
 * now. */
static void flush_held(mon_pass *p) {
    if (!p->n_held) return;
    tn_device d = tn__dev(p->held[0]);
    mon_batch *b = tn__dev_has_grad_stats(d) ? tn__calloc_quiet(1, sizeof *b) : NULL;
    bool measured = false;
    if (b && tn__dev_results_init(&b->res, d, 2 * p->n_held, NULL) == TN_OK) {
        measured =
            tn__dev_grad_stats(&b->res, 0, p->n_held, (const tn_tensor *const *)p->held) == TN_OK;
        if (!measured) (void)tn__dev_results_read(&b->res, NULL);
    }
    if (measured) {
        b->count = p->n_held;
        if (tn__dev_results_readback_begin(&b->res) < 0)
            tn_clear_error(); /* read with a plain copy when the report completes */
        memcpy(b->entry, p->held_entry, (size_t)p->n_held * sizeof *b->entry);
        if (p->last_batch)
            p->last_batch->next = b;
        else
            p->batches = b;
        p->last_batch = b;
    } else {
        tn__mfree(b);
        tn_clear_error(); /* the monitor never fails the pass */
        for (int k = 0; k < p->n_held; k++) {
            mon_entry *e = &p->rep.e[p->held_entry[k]];
            measure_on_host(e, p->held[k]);
        }
    }
    for (int k = 0; k < p->n_held; k++)
        tn_release(p->held[k]);
    p->n_held = 0;
}

/* Reads every enqueued measure back into its entries (waiting for the device
 * until they are done), or only lets them go (keep false: a failed pass). */
static void read_batches(mon_pass *p, bool keep) {
    for (mon_batch *b = p->batches, *next; b; b = next) {
        next = b->next;
        double v[2 * TN_GRAD_STATS_MAX];
        bool ok = tn__dev_results_read(&b->res, keep ? v : NULL) == TN_OK;
        if (!ok) tn_clear_error();
        for (int k = 0; keep && k < b->count; k++) {
            mon_entry *e = &p->rep.e[b->entry[k]];
            e->norm = ok ? sqrt(v[2 * k]) : (double)NAN;
            e->max_abs = ok ? v[2 * k + 1] : (double)NAN;
            e->unread = !ok;
        }
        tn__mfree(b);
    }
    p->batches = p->last_batch = NULL;
}

/* Measures gradient t for entry i: on the CPU at once, on a device later (held). */
static void measure(mon_pass *p, int i, const tn_tensor *t) {
    mon_entry *e = &p->rep.e[i];
    if (tn__on_cpu(t)) {
        measure_cpu(e, t);
        return;
    }
    if (p->n_held &&
        (p->held[0]->dtype != t->dtype || !tn__same_device(tn__dev(p->held[0]), tn__dev(t))))
        flush_held(p);
    tn_tensor *c = measurable(t);
    if (!c) {
        tn_clear_error();
        measure_on_host(e, t);
        return;
    }
    p->held[p->n_held] = c;
    p->held_entry[p->n_held++] = i;
    if (p->n_held == TN_GRAD_STATS_MAX) flush_held(p);
}

static void monitor_node(void *rec, tn_node *n, tn_tensor *const *gi) {
    mon_pass *p = rec;
    for (int i = 0; i < n->n_in; i++) {
        if (!gi[i] || !tn__is_float(gi[i]->dtype)) continue;
        mon_entry *e = add_entry(p);
        if (!e) return;
        snprintf(e->name, sizeof e->name, "%s", n->fn->name);
        e->input = i;
        if (n->trace) {
            e->trace = *n->trace;
            e->has_trace = true;
        }
        measure(p, p->rep.n - 1, gi[i]);
    }
}

static void leaf_name(const mon_pass *p, const tn_grad_cell *c, const tn_tensor *g, char *buf) {
    for (int i = 0; p->watch && i < p->watch->n; i++)
        if (tn__leaf_cell(p->watch->params[i]) == c) {
            snprintf(buf, MON_NAME, "%s", p->watch->names[i]);
            return;
        }
    int k = snprintf(buf, MON_NAME, "leaf [");
    for (int d = 0; d < g->ndim && k < MON_NAME; d++)
        k += snprintf(buf + k, (size_t)(MON_NAME - k), "%s%lld", d ? ", " : "",
                      (long long)g->shape[d]);
    if (k < MON_NAME) snprintf(buf + k, (size_t)(MON_NAME - k), "]");
}

static void monitor_leaf(void *rec, tn_grad_cell *c, const tn_tensor *g) {
    mon_pass *p = rec;
    if (!tn__is_float(g->dtype)) return;
    mon_entry *e = add_entry(p);
    if (!e) return;
    leaf_name(p, c, g, e->name);
    e->input = -1;
    measure(p, p->rep.n - 1, g);
}

/* ---- the thread's report --------------------------------------------------------------- */

static _Thread_local tn_grad_monitor_report *tls_report;
static pthread_key_t exit_key;
static bool exit_key_ok;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Completes the pass's report: reads its results, judges its entries, warns
 * about the first alarm. On the thread that ran the pass. */
static void resolve(mon_pass *p) {
    if (p->pending) { /* first: a read below never completes it a second time */
        p->pending = false;
        /* relaxed: see tn__mon_pending (hooks.h) */
        atomic_fetch_sub_explicit(&tn__mon_pending, 1, memory_order_relaxed);
    }
    read_batches(p, true);
    for (int i = 0; i < p->rep.n; i++)
        judge(p, i);
    const tn_grad_monitor_report *r = &p->rep;
    if (r->alarm < 0) return;
    const mon_entry *e = &r->e[r->alarm];
    char what[96] = "";
    if (e->input >= 0) snprintf(what, sizeof what, " (its gradient for input %d)", e->input);
    tn__warn("gradient monitor: %s gradient in %s%s: norm %.4g, max |g| %.4g (thresholds: "
             "explode %.4g, vanish %.4g); tn_grad_monitor_print(tn_last_grad_monitor(), stderr) "
             "prints the step's table.",
             e->health == TN_GRAD_EXPLODING ? "exploding" : "vanishing", e->name, what, e->norm,
             e->max_abs, p->explode, p->vanish);
}

/* The report is the pass block's first member. */
static mon_pass *pass_of(tn_grad_monitor_report *r) { return (mon_pass *)r; }

/* Completes the calling thread's report if it is pending. */
static void resolve_mine(void) {
    if (tls_report && pass_of(tls_report)->pending) resolve(pass_of(tls_report));
}

static void report_free(void *r) {
    if (!r) return;
    mon_pass *p = pass_of(r);
    if (p->pending) resolve(p); /* thread exit: its warning is still due */
    tn__mfree(p->rep.e);
    tn__mfree(p);
}
static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, report_free) == 0; }

/* The main thread runs no key destructor: its last pending report completes at exit (registered
 * once a device was used, so it runs before the device runtime's own exit handlers). */
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;
static void at_exit(void) { resolve_mine(); }
static void register_at_exit(void) { atexit(at_exit); }

static void monitor_sync(void) { resolve_mine(); }

static void *monitor_begin(void) {
    resolve_mine();
    return pass_new();
}

static void monitor_end(void *rec, tn_status st) {
    mon_pass *p = rec;
    watch_unref(p->watch);
    p->watch = NULL;
    flush_held(p);
    if (st < 0) {
        read_batches(p, false);
        report_free(&p->rep);
        return;
    }
    pthread_once(&exit_once, make_exit_key);
    report_free(tls_report);
    tls_report = &p->rep;
    if (exit_key_ok) pthread_setspecific(exit_key, tls_report);
    if (!p->batches) {
        resolve(p);
        return;
    }
    pthread_once(&atexit_once, register_at_exit);
    p->pending = true;
    atomic_fetch_add_explicit(&tn__mon_pending, 1, memory_order_relaxed);
}

__attribute__((constructor)) static void install(void) {
    tn__hooks.monitor_begin = monitor_begin;
    tn__hooks.monitor_node = monitor_node;
    tn__hooks.monitor_leaf = monitor_leaf;
    tn__hooks.monitor_end = monitor_end;
    tn__hooks.monitor_sync = monitor_sync;
    tn__hooks.monitor_scaled = monitor_scaled;
}

/* ---- reading it ------------------------------------------------------------------------ */

const tn_grad_monitor_report *tn_last_grad_monitor(void) {
    resolve_mine();
    return tls_report;
}

int tn_grad_monitor_count(const tn_grad_monitor_report *r) { return r ? r->n : 0; }

const char *tn_grad_monitor_entry(const tn_grad_monitor_report *r, int i, int *input, double *norm,
                                  double *max_abs, tn_grad_health *health) {
    if (!r || i < 0 || i >= r->n) {
        tn__error(TN_ERR_INDEX, "tn_grad_monitor_entry: no entry %d (the report has %d)", i,
                  r ? r->n : 0);
        return NULL;
    }
    const mon_entry *e = &r->e[i];
    if (input) *input = e->input;
    if (norm) *norm = e->norm;
    if (max_abs) *max_abs = e->max_abs;
    if (health) *health = e->health;
    return e->name;
}

int tn_grad_monitor_first_alarm(const tn_grad_monitor_report *r) { return r ? r->alarm : -1; }

bool tn_grad_monitor_loss_scale(const tn_grad_monitor_report *r, double *scale, int64_t *skipped,
                                int64_t *steps) {
    bool set = r && r->scaler.set;
    if (scale) *scale = set ? r->scaler.scale : 1.0;
    if (skipped) *skipped = set ? r->scaler.skipped : 0;
    if (steps) *steps = set ? r->scaler.steps : 0;
    return set;
}

const tn_frame *tn_grad_monitor_alarm_trace(const tn_grad_monitor_report *r, int *n_frames) {
    *n_frames = 0;
    if (!r || !r->has_trace) return NULL;
    tn_grad_monitor_report *w = (tn_grad_monitor_report *)r; /* a lazily filled cache */
    if (!w->symbolised) {
        for (int i = 0; i < w->trace.n; i++) {
            /* every captured pc is a return address: pc - 1 is inside the call */
            tn__symbolize((char *)w->trace.pc[i] - 1, &w->frames[i], w->sym[i], sizeof w->sym[i]);
            w->frames[i].pc = w->trace.pc[i];
        }
        w->first = tn__first_user_frame(w->frames, w->trace.n);
        w->n_frames = tn__last_user_frame(w->frames, w->first, w->trace.n) - w->first;
        w->symbolised = true;
    }
    *n_frames = w->n_frames;
    return w->frames + w->first;
}

static const char *health_name(tn_grad_health h) {
    return h == TN_GRAD_EXPLODING   ? "EXPLODING"
           : h == TN_GRAD_VANISHING ? "VANISHING"
           : h == TN_GRAD_OVERFLOW  ? "OVERFLOW"
                                    : "";
}

/* The scaler's lines of the table: the scale the norms were divided by, the steps it skipped,
 * where this pass overflowed. */
static void print_scaler(const tn_grad_monitor_report *r, FILE *f) {
    const mon_scaled *sc = &r->scaler;
    if (!sc->set) return;
    fprintf(f,
            "  loss scaled by %g (gradient scaler): the norms are divided by it; %lld of %lld "
            "steps skipped so far",
            sc->scale, (long long)sc->skipped, (long long)sc->steps);
    if (sc->in_row > 0) fprintf(f, ", the last %lld in a row", (long long)sc->in_row);
    fprintf(f, "\n");
    if (r->overflow < 0) return;
    const mon_entry *e = &r->e[r->overflow];
    fprintf(f, "  OVERFLOW at this scale, first in %s", e->name);
    if (e->input >= 0) fprintf(f, " (input %d)", e->input);
    fprintf(f, ": the scaler skips this step and the scale backs off\n");
}

tn_status tn_grad_monitor_print(const tn_grad_monitor_report *r, FILE *f) {
    TN_CHECK_NULL_PTR_ST(r, "r");
    TN_CHECK_NULL_PTR_ST(f, "f");
    fprintf(f, "gradient monitor: %d gradients measured%s\n", r->n,
            r->truncated ? " (out of memory: the record was cut short)" : "");
    print_scaler(r, f);
    fprintf(f, "  %-48s %12s %12s\n", "parameter (leaf gradient of the pass)", "norm", "max |g|");
    for (int i = 0; i < r->n; i++)
        if (r->e[i].input < 0)
            fprintf(f, "  %-48s %12.4g %12.4g %s\n", r->e[i].name, r->e[i].norm, r->e[i].max_abs,
                    health_name(r->e[i].health));
    bool header = false;
    for (int i = 0; i < r->n; i++) {
        const mon_entry *e = &r->e[i];
        if (e->input < 0 || e->health == TN_GRAD_OK || e->health == TN_GRAD_OVERFLOW) continue;
        if (!header) fprintf(f, "  backward nodes over a threshold, in the order they ran:\n");
        header = true;
        fprintf(f, "  %-40s in %-4d %12.4g %12.4g %s\n", e->name, e->input, e->norm, e->max_abs,
                health_name(e->health));
    }
    if (r->alarm < 0) {
        fprintf(f, "  no gradient crossed a threshold\n");
        return TN_OK;
    }
    const mon_entry *e = &r->e[r->alarm];
    fprintf(f, "  first alarm: %s gradient in %s", health_name(e->health), e->name);
    if (e->input >= 0) fprintf(f, " (input %d)", e->input);
    fprintf(f, "\n");
    int n;
    const tn_frame *fr = tn_grad_monitor_alarm_trace(r, &n);
    if (e->input >= 0 && n == 0)
        fprintf(f, "  its forward call was not recorded: turn anomaly mode on "
                   "(tn_set_detect_anomaly) before the forward pass to see it\n");
    for (int i = 0; i < n; i++) {
        char where[600];
        tn__frame_where(where, sizeof where, &fr[i]);
        fprintf(f, "    #%d %s (%s)\n", i, fr[i].function ? fr[i].function : "?", where);
    }
    return TN_OK;
}
