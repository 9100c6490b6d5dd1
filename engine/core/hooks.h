/* engine/core/hooks.h — where the layers above plug into the engine.
 *
 * The engine calls out of its own layer only through this table, never by
 * name: debug/ (anomaly mode, the race detector, the gradient monitor, the
 * timeline profiler, the numerics recorder) is a side-car that installs its
 * entries from constructors (debug/hooks.c, debug/profile.c,
 * debug/numerics.c), and autograd/
 * installs the one core needs to free a tensor's autograd meta
 * (engine/autograd/node.c). So core, cpu/, autograd/ and ops/ compile and
 * link without debug/, and the debug code sees the engine only through the
 * headers below it (docs/design.md, "Layers").
 *
 * Cost when the debug modes are off: every call site first tests a switch
 * that debug/ sets (one relaxed load and one predictable branch); the table
 * is read only behind that branch. Entries are installed before main, by
 * constructors, and read without ordering afterwards. The library is linked
 * whole (the static archive is one prelinked object, like the shared
 * library), so an entry is always installed before the switch or the state
 * that leads to it can exist: a call site never tests an entry for NULL.
 */
#ifndef TN_CORE_HOOKS_H
#define TN_CORE_HOOKS_H

#include "internal.h"

/* ---- the switches (set by debug/, read on hot paths) --------------------------------- */

#define TN_ANOMALY_ON 1u
#define TN_ANOMALY_NAN 2u
#define TN_ANOMALY_UNTRACKED_ERR 4u
#define TN_ANOMALY_LOCAL_SEEN 0x100u

/* Anomaly mode, process-wide. Relaxed: a plain setting; no data is
 * published with it. Bit TN_ANOMALY_LOCAL_SEEN is set once any thread has
 * used a thread-local override, and only then is the thread-local word read
 * (0: no override; else 0x80 | its flags). */
extern _Atomic unsigned tn__anomaly_flags;
extern _Thread_local unsigned tn__anomaly_local;
static inline unsigned tn__anomaly_mode(void) {
    unsigned g = atomic_load_explicit(&tn__anomaly_flags, memory_order_relaxed);
    if (TN_UNLIKELY(g & TN_ANOMALY_LOCAL_SEEN) && tn__anomaly_local)
        return tn__anomaly_local & 0x7fu;
    return g & 0xffu;
}
static inline bool tn__anomaly_enabled(void) { return tn__anomaly_mode() & TN_ANOMALY_ON; }
static inline bool tn__anomaly_nan(void) { return tn__anomaly_mode() & TN_ANOMALY_NAN; }

/* check_nan on a device: how many threads hold checks not yet enqueued
 * (debug/anomaly_device.c batches them). Relaxed: it only says whether a
 * thread should look at its own batch, which it then reads itself; a
 * thread's own increments are seen by that thread in program order. */
extern _Atomic unsigned tn__nf_batched;
static inline bool tn__nf_any_batched(void) {
    return atomic_load_explicit(&tn__nf_batched, memory_order_relaxed) != 0;
}

/* The race detector. Relaxed: a plain setting read at each kernel; the
 * per-storage state carries its own ordering (debug/race.c). */
extern _Atomic unsigned tn__race_flag;
static inline bool tn__races_on(void) {
    return atomic_load_explicit(&tn__race_flag, memory_order_relaxed) != 0;
}

/* The gradient monitor (debug/grad_monitor.c). Relaxed: a plain setting read
 * once per backward pass; the thresholds are read by debug/ behind it. */
extern _Atomic unsigned tn__monitor_flag;
static inline bool tn__monitor_on(void) {
    return atomic_load_explicit(&tn__monitor_flag, memory_order_relaxed) != 0;
}

/* The gradient monitor: how many threads hold a report whose device results
 * are not read yet (debug/grad_monitor.c completes it at the thread's next
 * synchronisation point). Relaxed, as tn__nf_batched: it only says whether a
 * thread should look at its own report, which it then reads itself. */
extern _Atomic unsigned tn__mon_pending;
static inline bool tn__mon_any_pending(void) {
    return atomic_load_explicit(&tn__mon_pending, memory_order_relaxed) != 0;
}

/* The timeline profiler (debug/profile.c). Relaxed: a plain setting read at
 * each op; the profiler's per-thread buffers carry their own ordering. */
extern _Atomic unsigned tn__profile_flag;
static inline bool tn__profile_on(void) {
    return atomic_load_explicit(&tn__profile_flag, memory_order_relaxed) != 0;
}

/* The numerics recorder (debug/numerics.c). Relaxed: a plain setting read
 * at each op, node and optimiser update; it pairs with nothing, for the
 * recorder's per-thread buffers carry their own ordering (a seq_cst busy word
 * against the session's end, as the profiler's). */
extern _Atomic unsigned tn__numerics_flag;
static inline bool tn__numerics_on(void) {
    return atomic_load_explicit(&tn__numerics_flag, memory_order_relaxed) != 0;
}

/* ---- the table ------------------------------------------------------------------------ */

typedef struct tn_saved tn_saved;

#define TN_RACE_MAX_OPS 4
/* One kernel's registered accesses (n = 0: nothing tracked). */
typedef struct tn_race_access {
    int n;
    struct tn_race_slot *slot[TN_RACE_MAX_OPS];
} tn_race_access;

typedef struct tn_hooks {
    /* -- installed by autograd/ -- */
    /* A tensor's autograd meta is freed with the tensor (engine/core/tensor.c). */
    void (*meta_free)(tn_autograd_meta *m);

    /* -- installed by debug/, called by core -- */
    /* Anomaly mode: an in-place write of t moved its version to `version`
     * (op: a static string). */
    void (*version_bump)(const tn_tensor *t, uint64_t version, const char *op);
    /* The last reference to s is gone and it carries debug state (its ring or
     * race fields are set). */
    void (*storage_free)(tn_storage *s);
    /* check_nan: a synchronisation point of dev (a read of device data,
     * tn_synchronize); reports what the device's NaN checks found. */
    tn_status (*device_poll)(tn_device dev, bool in_backward);
    /* The same for every device (the end of a backward call). */
    tn_status (*poll_devices)(bool in_backward);
    /* check_nan on a device: a kernel or a transfer is about to write
     * operand k of ops (bit k of write_mask): the calling thread's batched
     * checks of those tensors run first. */
    void (*nf_before_write)(int nops, const tn_tensor *const *ops, unsigned write_mask);
    /* Race detector: a kernel over ops (operand k written when bit k of
     * write_mask is set) is about to run / has run; `kind` names the family. */
    void (*race_begin)(tn_race_access *ra, int nops, const tn_tensor *const *ops,
                       unsigned write_mask, const char *kind);
    void (*race_end)(tn_race_access *ra);

    /* -- installed by debug/, called by autograd/ (anomaly mode on) -- */
    /* Captures the forward trace and the parent; TN_ERR_OUT_OF_MEMORY (and
     * nothing kept) when the trace cannot be stored: the node is not made. */
    tn_status (*node_new)(tn_node *n);
    void (*node_free)(tn_node *n); /* n has a trace or a parent */
    tn_node *(*set_running)(tn_node *n); /* returns the previous one */
    /* Version mismatch of a saved tensor: builds the report, returns the first
     * culprit ("fn (file:line)") or NULL. */
    const char *(*inplace_report)(tn_node *n, const tn_saved *s, uint64_t cur);
    /* Untracked write to a saved tensor: warning + report, or the error. */
    tn_status (*check_untracked)(tn_node *n, const tn_saved *s);
    /* Any other backward failure of n: attach the node's report. */
    void (*backward_error)(tn_node *n, tn_status st);
    /* check_nan: a backward output non-finite from finite gradients. */
    tn_status (*check_backward)(tn_node *n, tn_tensor *const *go, tn_tensor *const *gi);

    /* -- installed by debug/, called by autograd/ (the gradient monitor on) --
     * A backward pass's record: begin returns it (NULL out of memory: the
     * pass is not monitored), node/leaf measure each gradient made (gi: the
     * node's input gradients, NULL entries skipped; g: a leaf's summed
     * gradient), end publishes it as the thread's report (st: the pass's
     * status; a failed pass publishes nothing), pending while its device
     * measures are not read back. Called on the thread that runs the pass,
     * which runs its nodes serially. */
    void *(*monitor_begin)(void);
    void (*monitor_node)(void *rec, tn_node *n, tn_tensor *const *gi);
    void (*monitor_leaf)(void *rec, tn_grad_cell *c, const tn_tensor *g);
    void (*monitor_end)(void *rec, tn_status st);
    /* A synchronisation point of the calling thread: completes its pending
     * report (tn__mon_pending). */
    void (*monitor_sync)(void);
    /* tn_grad_scaler_scale on the calling thread (engine/optim/): the next
     * monitored pass there is of a loss scaled by `scale`, from a scaler that
     * has made `steps` updates, `skipped` of them after inf/NaN gradients,
     * the last `in_row` in a row. */
    void (*monitor_scaled)(double scale, int64_t steps, int64_t skipped, int64_t in_row);

    /* -- installed by debug/, called by ops/ (check_nan on) -- */
    /* Warn + report when `out` is non-finite and every input finite. */
    void (*check_forward)(const char *op, const tn_tensor *out, int n_in,
                          const tn_tensor *const *in);

    /* -- installed by debug/, called by ops/ and autograd/ (the profiler on) --
     * now: the profiler's clock (µs, > 0). op: a forward op or an op inside
     * backward that began at t0 made `out` from in[0..n_in). node: the
     * backward node `name` (creation number seq) ran from t0 until now.
     * link: node seq was made the grad_fn of `out` (a flow from the op that
     * made out to the node's backward). */
    double (*prof_now)(void);
    void (*prof_op)(const char *op, double t0, const tn_tensor *out, int n_in,
                    const tn_tensor *const *in);
    void (*prof_node)(const char *name, uint64_t seq, double t0);
    void (*prof_link)(const tn_tensor *out, uint64_t seq);
    /* omp: member `member` of a team of `team` threads ran its share of the OpenMP region
     * `region` from t0 until now (tn__omp_span_end, engine/core/threads.c). */
    void (*prof_omp)(const char *region, double t0, int team, int member);

    /* -- installed by debug/, called by ops/, autograd/ and optim/ (the numerics
     * recorder on) --
     * op: a forward op made `out` from in[0..n_in) (outside engine code).
     * link: node seq was made the grad_fn of `out` (ties the node to its op).
     * node: backward node n ran: go[0..n->n_out) its incoming gradients (NULL
     * entries: none), gi[0..n->n_in) the gradients it sends to its inputs.
     * update: an optimiser (`name`) wrote parameter i of its list (p, after the
     * update) from gradient g. */
    void (*num_op)(const char *op, const tn_tensor *out, int n_in, const tn_tensor *const *in);
    void (*num_link)(const tn_tensor *out, uint64_t seq);
    void (*num_node)(tn_node *n, tn_tensor *const *go, tn_tensor *const *gi);
    void (*num_update)(const char *name, int i, const tn_tensor *p, const tn_tensor *g);
} tn_hooks;

/* The one table (engine/core/hooks.c). Each layer writes its own entries,
 * from constructors only. */
extern tn_hooks tn__hooks;

/* ---- call sites of core ------------------------------------------------------------------ */

/* Bumps the version (release: pairs with the acquire load in saved-tensor
 * unpack, so a reader that sees the new version sees the write) and, in
 * anomaly mode, records the write with `op` (a static string). */
static inline uint64_t tn__version_bump(tn_tensor *t, const char *op) {
    tn__storage_wrote(t->storage);
    if (!t->version) return 0; /* an inference tensor: no counter (written in inference mode) */
    uint64_t v = atomic_fetch_add_explicit(&t->version->version, 1, memory_order_release) + 1;
    if (TN_UNLIKELY(tn__anomaly_mode() & TN_ANOMALY_ON)) tn__hooks.version_bump(t, v, op);
    return v;
}

/* The version a save of t records. In anomaly mode it also marks the
 * counter so that the write that moves it next (the first write after the
 * save, the one the version check blames) is kept by the write ring
 * whatever follows. Marking and the writer's check are a store-then-load
 * pair on each side (first_after_save, then version here; version, then
 * first_after_save in debug/anomaly.c's record), each with a seq_cst fence
 * between: of a save and a racing write, at least one sees the other's
 * store, so the write that reaches the recorded version + 1 finds the mark.
 * When the version moves in between, the save takes the newer version. */
static inline uint64_t tn__version_save(const tn_tensor *t) {
    uint64_t v = tn__version_get(t);
    if (TN_LIKELY(!(tn__anomaly_mode() & TN_ANOMALY_ON))) return v;
    for (;;) {
        uint64_t mark = atomic_load_explicit(&t->version->first_after_save, memory_order_relaxed);
        /* relaxed: a higher mark is a later save's; the fence below orders ours */
        while (mark < v + 1 &&
               !atomic_compare_exchange_weak_explicit(&t->version->first_after_save, &mark, v + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
        }
        atomic_thread_fence(memory_order_seq_cst); /* pairs with the fence in record_write */
        uint64_t again = tn__version_get(t);
        if (again == v) return v;
        v = again;
    }
}

/* A synchronisation point of dev (see device_poll); st passes through. */
static inline tn_status tn__sync_point(tn_device dev, tn_status st) {
    if (TN_UNLIKELY(tn__mon_any_pending())) tn__hooks.monitor_sync();
    if (TN_UNLIKELY(tn__anomaly_nan() || tn__nf_any_batched()) && st == TN_OK)
        return tn__hooks.device_poll(dev, false);
    return st;
}

/* Before a write into the operands of ops flagged in write_mask, outside a
 * race bracket (a transfer into device memory). */
static inline void tn__before_write(int nops, const tn_tensor *const *ops, unsigned write_mask) {
    if (TN_UNLIKELY(tn__nf_any_batched())) tn__hooks.nf_before_write(nops, ops, write_mask);
}

/* Brackets a kernel over tensors for the race detector (and, first, runs the
 * thread's batched NaN checks of the tensors it writes). */
static inline void tn__race_begin(tn_race_access *ra, int nops, const tn_tensor *const *ops,
                                  unsigned write_mask, const char *kind) {
    ra->n = 0;
    tn__before_write(nops, ops, write_mask);
    if (TN_UNLIKELY(tn__races_on())) tn__hooks.race_begin(ra, nops, ops, write_mask, kind);
}
/* Always ends what begin registered, even if the detector was switched off
 * in between. */
static inline void tn__race_end(tn_race_access *ra) {
    if (TN_UNLIKELY(ra->n)) tn__hooks.race_end(ra);
}

/* The profiler's start stamp of an op or a node: 0 when it is off. */
static inline double tn__prof_start(void) {
    return TN_UNLIKELY(tn__profile_on()) ? tn__hooks.prof_now() : 0;
}

/* ---- call site of ops/ -------------------------------------------------------------------- */

/* The forward check every producing op calls on its result (cheap when off). */
static inline void tn__anomaly_forward(const char *op, const tn_tensor *out, int n_in,
                                       const tn_tensor *const *in) {
    if (TN_UNLIKELY(tn__anomaly_nan()) && out && !tn__in_engine())
        tn__hooks.check_forward(op, out, n_in, in);
}

/* The end of a producing op that began at t0 = tn__prof_start(): the forward
 * check, the op's span when the profiler was on at its start, and its record
 * when the numerics recorder is on. */
static inline void tn__op_done(const char *op, double t0, const tn_tensor *out, int n_in,
                               const tn_tensor *const *in) {
    tn__anomaly_forward(op, out, n_in, in);
    if (TN_UNLIKELY(t0 > 0) && out) tn__hooks.prof_op(op, t0, out, n_in, in);
    if (TN_UNLIKELY(tn__numerics_on()) && out && !tn__in_engine())
        tn__hooks.num_op(op, out, n_in, in);
}

#endif
