/* debug/debug_internal.h — the debug folder's private header: what its
 * files share (backtraces and thread identity, symbols, anomaly mode's write
 * ring, reports and hook entries, check_nan's scan). Only debug/ and its
 * tests include it; the engine reaches debug/ through engine/core/hooks.h.
 *
 * Capture is cheap and allocation-free beyond fixed-size records: program
 * counters only (unw_backtrace). Everything symbolic happens in report.c
 * when a report is read or printed.
 *
 *   anomaly.c     switches (relaxed atomic flags, TENET_DETECT_ANOMALY), the
 *                 per-storage write ring, the hooks the engine calls
 *   anomaly_device.c check_nan on device tensors (batched checks, polls)
 *   backtrace.c   tn__bt_capture, the thread's identity (tn__thread_id,
 *                 tn__os_tid, tn__thread_name)
 *   symbolize.c   pc -> function, file:line (libdw), dladdr fallback
 *   report.c      the thread's report object, accessors, printing
 *   nonfinite.c   check_nan's scan of a CPU tensor (tn__nonfinite_cpu)
 *   repeat.c      repeated reports: printed once, then counted and summarised
 *   grad_monitor.c the gradient health monitor (its own hook entries)
 *   graph_dot.c   tn_graph_dot
 *   race.c, profile*.c take backtraces and thread names from it (beside
 *                 their own headers, race.h and profile_internal.h)
 */
#ifndef TN_DEBUG_DEBUG_INTERNAL_H
#define TN_DEBUG_DEBUG_INTERNAL_H

#include <pthread.h>
#include <stdio.h>

#include "../engine/autograd/autograd_internal.h"
#include "tenet/debug.h"

/* The switches live in engine/core/hooks.h (the engine reads them). */
static inline unsigned tn__anomaly(void) {
    return tn__anomaly_mode();
}

/* ---- NaN / Inf (nonfinite.c) --------------------------------------------------- */
/* 0: every element of the CPU tensor t is finite (or t is not float); 1: a
 * NaN; 2: an Inf and no NaN. Reads t in place; never fails. */
int tn__nonfinite_cpu(const tn_tensor *t);

/* ---- backtraces (backtrace.c) ------------------------------------------------ */
#define TN_BT_MAX 32
typedef struct tn_backtrace {
    int n;
    void *pc[TN_BT_MAX];
} tn_backtrace;
/* Program counters of the caller's stack, innermost first (this function's
 * own frame skipped). No allocation, no locks, async-signal-unsafe-free. */
void tn__bt_capture(tn_backtrace *bt);
/* A small number naming the calling thread (1, 2, ... in order of first use),
 * never reused: the race detector's access ids. Reports name threads by
 * tn__os_tid and tn__thread_name instead. */
uint64_t tn__thread_id(void);
/* The calling thread's OS id (gettid(): gdb's LWP, top -H, perf, TSan's
 * tid=). Cached per thread; a fork child's thread gets its own. */
uint64_t tn__os_tid(void);
/* The calling thread's name (pthread_getname_np; a thread that never set
 * one has its process's), NUL-terminated; "" when it cannot be read. Read
 * at the thread's first call, then again when 10 ms have passed (a rename
 * shows within 10 ms). No allocation, no lock. */
#define TN_THREAD_NAME 16 /* Linux's limit, NUL included */
_Static_assert(TN_THREAD_NAME % 8 == 0, "the write ring stores names as 8-byte words");
void tn__thread_name(char name[TN_THREAD_NAME]);
/* `thread 4127 "loader-2"` (the name left out when empty) into buf. */
void tn__format_thread(char *buf, size_t n, uint64_t os_tid, const char *name);

/* ---- the write ring (anomaly.c) ---------------------------------------------- */
/* One write to a storage as the ring returns it. */
typedef struct tn_write_snap {
    const char *op;       /* static string */
    uint64_t version;     /* version its counter reached */
    uint64_t epoch;       /* storage write epoch after the write */
    uint64_t tid;         /* the writer's OS thread id */
    char thread_name[TN_THREAD_NAME];
    const void *vblock;   /* identity of the writer's version counter */
    tn_backtrace bt;
} tn_write_snap;
/* Records an in-place write of `t` (after its version bump) when anomaly
 * mode is on. Lock-free; a write that cannot get a slot is counted as dropped. */
void tn__anomaly_record_write(const tn_tensor *t, uint64_t version, const char *op);
/* Writes still in the ring (the latest ones and the first ones after the
 * latest saves) with epoch > since_epoch, oldest first, each once; at most
 * TN_SNAP_MAX. */
#define TN_SNAP_MAX 20 /* TN_RING + TN_FIRST (anomaly.c) */
int tn__ring_snapshot(const tn_storage *s, uint64_t since_epoch, tn_write_snap *out, int max,
                      uint64_t *dropped);
void tn__ring_free(tn_storage *s);

/* Anomaly mode's warnings on stderr (as tn__warn), each distinct text once,
 * its repeats counted and summarised (repeat.c); pending counts are printed
 * when the mode is switched off and at exit. */
void tn__anomaly_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the engine's events (anomaly.c, anomaly_device.c; installed in
 * engine/core/hooks.h's table by debug/hooks.c) ------------------------------ */
tn_status tn__anomaly_on_node(tn_node *n); /* capture the forward trace, parent */
void tn__anomaly_node_free(tn_node *n);
tn_node *tn__anomaly_set_running(tn_node *n); /* returns the previous one */
/* Builds the report of a version mismatch; returns the first culprit
 * ("fn (file:line)") or NULL. */
const char *tn__anomaly_inplace_report(tn_node *n, const tn_saved *s, uint64_t cur);
/* Untracked write to a saved tensor: warning + report, or the error. */
tn_status tn__anomaly_check_untracked(tn_node *n, const tn_saved *s);
/* Any other backward failure of n: attach the node's report. */
void tn__anomaly_backward_error(tn_node *n, tn_status st);
/* check_nan: a backward output non-finite from finite gradients -> TN_ERR_NAN. */
tn_status tn__anomaly_check_backward(tn_node *n, tn_tensor *const *go, tn_tensor *const *gi);
/* check_nan: warn + report when `out` is non-finite and every input finite. */
void tn__anomaly_check_forward(const char *op, const tn_tensor *out, int n_in,
                               const tn_tensor *const *in);
/* Device tensors (anomaly_device.c): the checks are batched per thread,
 * enqueued as one launch per batch, and the result polled at
 * synchronisation points; poll runs the thread's batch for that device
 * first and returns TN_ERR_NAN for a backward culprit when in_backward,
 * else warns. nf_before_write: the hook of that name (core/hooks.h);
 * nf_flush_thread enqueues the calling thread's batch (a switch of the
 * mode). */
tn_status tn__anomaly_device_check_backward(tn_node *n, tn_tensor *const *gi);
void tn__anomaly_device_check_forward(const char *op, const tn_tensor *out);
tn_status tn__anomaly_device_poll(tn_device dev, bool in_backward);
/* Polls every device. */
tn_status tn__anomaly_poll_devices(bool in_backward);
void tn__anomaly_nf_before_write(int nops, const tn_tensor *const *ops, unsigned write_mask);
void tn__anomaly_nf_flush_thread(void);

/* ---- reports (report.c) ------------------------------------------------------ */
/* Starts this thread's new report (replacing the previous one). Never NULL:
 * on OOM a static fallback report is used. */
tn_anomaly_report *tn__report_begin(tn_anomaly_kind kind, const char *node_name);
/* The node's forward trace; NULL: recorded with anomaly mode off. */
void tn__report_set_forward(tn_anomaly_report *r, const tn_backtrace *bt);
/* create_graph: the node that was running backward when this one was made
 * (PyTorch's "Previous calculation was induced by ..."), outermost last. */
void tn__report_add_parent(tn_anomaly_report *r, const char *node_name, const tn_backtrace *bt);
void tn__report_set_saved(tn_anomaly_report *r, const tn_tensor *t, int output_nr,
                          uint64_t saved_version, uint64_t current_version);
void tn__report_add_write(tn_anomaly_report *r, const tn_write_snap *w, bool tracked);
void tn__report_set_dropped(tn_anomaly_report *r, uint64_t dropped);
/* An untracked write that came from outside tenet (a digest of shared memory moved). */
void tn__report_set_outside(tn_anomaly_report *r);
void tn__report_set_output_index(tn_anomaly_report *r, int index);
/* NaN: node_name's output `output_index` was non-finite only because a
 * tensor it saved was (tn_anomaly_report_relayed_by). */
void tn__report_set_relay(tn_anomaly_report *r, const char *node_name, int output_index);
/* "fn (file:line)" of the first write listed (symbolises it), or NULL. The
 * string lives as long as the report. */
const char *tn__report_first_culprit(tn_anomaly_report *r);

/* ---- repeated reports (repeat.c) --------------------------------------------- */
/* One kind of report (the race detector's, anomaly mode's warnings): each
 * distinct report, by a key, is printed in full once; its repeats are
 * counted, and a summary line "tenet: <label> repeated N more times" is
 * printed when a repeat comes at least the interval after the report's
 * last line, and for the counts pending at tn__repeat_flush (the mode
 * switched off, process exit). Thread-safe (a mutex, taken only when a
 * report is made). Zero-initialise with TN_REPEATS_INIT. */
#define TN_REPEAT_KEYS 64
typedef struct tn_repeat {
    uint64_t key, pending;
    int64_t last; /* when its last line was printed (ns, monotonic) */
    char label[200];
} tn_repeat;
typedef struct tn_repeats {
    pthread_mutex_t lock;
    int n;
    tn_repeat e[TN_REPEAT_KEYS];
} tn_repeats;
#define TN_REPEATS_INIT                                                                            \
    { .lock = PTHREAD_MUTEX_INITIALIZER }
/* True: key is new, print the report in full (then name it with
 * tn__repeat_label). False: a repeat, counted; its summary, when due, went
 * to f (NULL: printed nowhere). */
bool tn__repeat_note(tn_repeats *r, uint64_t key, FILE *f);
void tn__repeat_label(tn_repeats *r, uint64_t key, const char *label);
/* Prints the pending counts to f (NULL: drops them); forget: the reports
 * become new again. */
void tn__repeat_flush(tn_repeats *r, FILE *f, bool forget);
/* FNV-1a of data, continuing from h (start with TN_HASH_SEED). */
#define TN_HASH_SEED 0xcbf29ce484222325ULL
uint64_t tn__repeat_hash(uint64_t h, const void *data, size_t n);
/* The interval between two summary lines of one report (default 1 s, or
 * TENET_REPORT_INTERVAL in seconds at start); 0: a line per repeat. */
void tn__report_interval_set(double seconds);

/* ---- symbols (symbolize.c) --------------------------------------------------- */
/* Resolves pc into f (strings copied into buf of size n). Returns false when
 * nothing is known (f->function = NULL). Thread-safe. pc is looked up as
 * given: for a return address (every captured pc) pass pc - 1, so the line
 * is the call's. Without line info, f->file names the shared object. */
bool tn__symbolize(void *pc, tn_frame *f, char *buf, size_t n);
/* The name of the function whose machine code holds pc, as the symbol table
 * has it (not an inlined callee's): the function a frame belongs to. False
 * when unknown. Thread-safe. */
bool tn__symbol_name(void *pc, char *buf, size_t n);
/* True for frames inside tenet itself (trimmed from reports). */
bool tn__frame_is_engine(const tn_frame *f);
/* file relative to tenet's source tree or the working directory when under
 * one of them (for printing), else file itself. */
const char *tn__short_path(const char *file);
/* One past the last frame of f[start, n) worth showing: through main, or
 * without the C runtime that starts a thread (report.c). */
int tn__last_user_frame(const tn_frame *f, int start, int n);
/* The first frame worth showing: past the innermost run of tenet's own
 * frames (all of them when every frame is tenet's). */
int tn__first_user_frame(const tn_frame *f, int n);
/* "file:line" of a frame (short path; "?" without a file) into buf (report.c). */
void tn__frame_where(char *buf, size_t n, const tn_frame *f);
/* Tests: force the fallbacks. FULL: libdw then dladdr (default); DLADDR:
 * dladdr only (no debug info); NONE: nothing (a stripped binary). */
typedef enum tn_sym_mode { TN_SYM_FULL = 0, TN_SYM_DLADDR = 1, TN_SYM_NONE = 2 } tn_sym_mode;
void tn__symbolize_set_mode(tn_sym_mode m);

#endif
