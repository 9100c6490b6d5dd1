/* tenet/debug.h — anomaly detection that names the culprit.
 *
 * In anomaly mode tenet records, cheaply (program counters only):
 *   - the forward backtrace of every autograd node created;
 *   - every in-place write to a storage (op, new version, thread, backtrace),
 *     in a small lock-free ring kept with the storage; a thread is named as
 *     gdb, top, perf and ThreadSanitizer name it: its OS id and its name
 *     (`thread 4127 "loader-2"`);
 * and reports, as a structured object returned with the error:
 *   - a saved tensor modified in place: the failing node, the forward
 *     backtrace of the op that saved it, and every in-place op that moved
 *     the version since, each with its thread and backtrace;
 *   - a write through an untracked alias (.data) to a saved tensor's storage,
 *     which PyTorch lets corrupt gradients silently (a warning by default,
 *     an error with tn_set_anomaly_untracked_error(true));
 *   - with check_nan, the first op that PRODUCES NaN/Inf from finite inputs,
 *     in backward (an error, as PyTorch) or in forward (a warning + report).
 *     A backward node whose non-finite output only carries a value it saved
 *     in forward (ExpBackward0 times its saved NaN result) is not the
 *     producer: the error names it, as PyTorch does, and the report names the
 *     forward op that produced the value first (tn_anomaly_report_relayed_by).
 * Symbols (function, file:line through libdw; dladdr names without debug
 * info) are resolved only when a report is read or printed.
 *
 * Warnings on stderr (a failed backward's "Error detected in ...", forward
 * NaN/Inf, untracked writes) are printed once per distinct text; repeats are
 * counted and summarised in one line ("... repeated N more times") at most
 * once a second (TENET_REPORT_INTERVAL=<seconds>) and when anomaly mode is
 * switched off or the process exits. Reports are made every time.
 *
 * Threads: the switches are process-wide and may change at any time from any
 * thread (relaxed atomics); a thread may override them for itself
 * (tn_set_detect_anomaly_local). Reports are per thread.
 */
#ifndef TENET_DEBUG_H
#define TENET_DEBUG_H

#include <stdio.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* torch.autograd.set_detect_anomaly(enabled, check_nan). Also read at start
 * from TENET_DETECT_ANOMALY: "1" = on, "nan" = on with NaN/Inf checks. */
void tn_set_detect_anomaly(bool enabled, bool check_nan);
/* Thread-local override of the process-wide switch for the calling thread
 * only: -1 follows the process-wide setting again, 0 off, 1 on, 2 on with
 * NaN/Inf checks. */
void tn_set_detect_anomaly_local(int mode);
/* Whether anomaly mode is on for the calling thread. */
bool tn_is_anomaly_enabled(void);
bool tn_is_anomaly_check_nan_enabled(void);
/* Untracked writes to a saved tensor fail backward (TN_ERR_INPLACE_MODIFIED)
 * instead of warning. Default false. */
void tn_set_anomaly_untracked_error(bool as_error);

typedef enum tn_anomaly_kind {
    TN_ANOMALY_INPLACE = 1,      /* saved tensor's version moved */
    TN_ANOMALY_UNTRACKED = 2,    /* saved tensor's storage written behind autograd */
    TN_ANOMALY_NAN_BACKWARD = 3, /* a backward node produced NaN/Inf from finite values */
    /* a forward op produced NaN/Inf from finite inputs: reported there (a
     * warning), or by backward when a node relayed the value (TN_ERR_NAN) */
    TN_ANOMALY_NAN_FORWARD = 4,
    TN_ANOMALY_SECOND_BACKWARD = 5 /* saved tensors already freed */
} tn_anomaly_kind;

/* One stack frame, symbolised lazily. function/file may be NULL when
 * unknown; line is 0 then. Strings live as long as the report. */
typedef struct tn_frame {
    void *pc;
    const char *function;
    const char *file;
    int line;
} tn_frame;

/* A write (in-place op) that moved a saved tensor's storage. The thread is
 * named as the system tools name it: thread_id is the OS thread id
 * (gettid(): gdb's "LWP 4127", top -H, perf, ThreadSanitizer's "tid=4127"),
 * thread_name the name it had when it wrote (pthread_setname_np; a thread
 * that never set one has its process's name; a rename shows within 10 ms). */
typedef struct tn_write_event {
    const char *op;       /* "add_", "zero_", "copy_", ... */
    uint64_t version;     /* the version it produced (its own counter's) */
    uint64_t thread_id;   /* the writing thread's OS id */
    bool tracked;         /* false: through an alias with another counter (.data) */
    int n_frames;
    const tn_frame *frames; /* innermost first; engine frames trimmed */
    const char *thread_name; /* "" when it could not be read; lives as long as the report */
} tn_write_event;

typedef struct tn_anomaly_report tn_anomaly_report;

/* The report of the last anomaly on this thread (borrowed; valid until the
 * next anomaly on this thread), or NULL when none. */
const tn_anomaly_report *tn_last_anomaly(void);
/* Forgets this thread's report. */
void tn_anomaly_clear(void);

tn_anomaly_kind tn_anomaly_report_kind(const tn_anomaly_report *r);
/* Name of the failing backward node ("MulBackward0") or forward op ("sqrt"). */
const char *tn_anomaly_report_node(const tn_anomaly_report *r);
/* Forward backtrace of the failing node (the op that saved the tensor).
 * *n_frames = 0 when the graph was recorded with anomaly mode off. */
const tn_frame *tn_anomaly_report_forward_trace(const tn_anomaly_report *r, int *n_frames);
/* The saved tensor: dtype, shape, output index (-1 for an input), versions. */
tn_status tn_anomaly_report_saved(const tn_anomaly_report *r, tn_dtype *dtype, int *ndim,
                                  const int64_t **shape, int *output_nr,
                                  uint64_t *saved_version, uint64_t *current_version);
/* The writes that moved the version (or the untracked writes), oldest first.
 * For a version error: those from the saved version + 1 (the first write
 * after the save, kept apart so that later writes never push it out) to the
 * version the check read (a write after the check is left out), as far as
 * they were recorded: the latest ones and the first one. */
int tn_anomaly_report_n_writes(const tn_anomaly_report *r);
const tn_write_event *tn_anomaly_report_write(const tn_anomaly_report *r, int i);
/* Writes since the save that could not be listed. Version errors: exactly
 * (checked version - saved version) - listed. Untracked writes: lost to
 * contention, plus one when older records were overwritten by newer writes
 * (a lower bound). */
uint64_t tn_anomaly_report_dropped(const tn_anomaly_report *r);
/* NaN reports: index of the non-finite output. */
int tn_anomaly_report_output_index(const tn_anomaly_report *r);
/* NaN reports: the backward node ("MulBackward0") that failed with
 * TN_ERR_NAN although it only relayed a non-finite value that a tensor it
 * saved in forward already held; NULL when the report names no relay. The
 * report then names the forward op that produced the value first (kind
 * TN_ANOMALY_NAN_FORWARD, node "log", its forward trace), found when that op
 * ran with check_nan on; otherwise (kind TN_ANOMALY_NAN_BACKWARD) it names
 * the relaying node itself and says that the producer was not recorded.
 * Borrowed, lives as long as the report. */
const char *tn_anomaly_report_relayed_by(const tn_anomaly_report *r);
/* Human-readable report with every backtrace as function (file:line). */
tn_status tn_anomaly_report_print(const tn_anomaly_report *r, FILE *f);

/* The autograd graph that produces root, as Graphviz DOT: nodes with their
 * names, saved tensors with shapes and versions (stale ones in red), the
 * node of the last anomaly on this thread highlighted. Render with
 * `dot -Tsvg graph.dot > graph.svg`. */
tn_status tn_graph_dot(const tn_tensor *root, FILE *f);

/* ---- gradient health monitor ----------------------------------------------------
 * What people add hooks for in PyTorch, built in: while the monitor is on,
 * every backward pass measures each gradient it produces (the L2 norm and
 * the largest |value|, summed in float64): every backward node's gradient
 * for each of its inputs, in the order the nodes run, then each leaf's
 * gradient of the pass (its contributions summed, before it is added into
 * .grad). An entry is EXPLODING when its norm exceeds explode_norm (> 0; 0
 * turns the check off) or is not finite; a leaf is VANISHING when its
 * gradient is all zeros or its norm is below vanish_norm. The report of the
 * pass names the first entry that crossed a threshold, with the forward
 * backtrace of the node that produced it when anomaly mode recorded the graph,
 * and a warning names it on stderr. Leaves are named by tn_grad_monitor_watch
 * ("transformer.h.0.mlp.c_fc.weight"), else "leaf [shape]"; the watched
 * parameters' rows form the per-layer table of the step.
 *
 * With a gradient scaler (tenet/autocast.h): tn_grad_scaler_scale, called
 * while the monitor is on, marks the thread's next monitored pass as one of
 * a loss scaled by the scaler's scale. That pass's norms and max |g| are
 * divided by the scale (the true gradients', which the thresholds judge), a
 * gradient that is not finite at a scale above 1 is OVERFLOW — the scaler's
 * business: it skips the step and backs off, no alarm, no warning — and the
 * table shows the scale, the steps the scaler skipped so far and where the
 * pass first overflowed. At a scale of 1 or less no scaling overflowed: a
 * gradient that is not finite explodes as in any pass.
 *
 * Cost when off: one relaxed load per backward pass. When on: one read of
 * every gradient; backward then runs its nodes one after the other on the
 * calling thread (as with anomaly mode), in PyTorch's order. Functional
 * passes (tn_autograd_grad) are not monitored. Threads: the switch and the
 * watch list are process-wide; reports are per thread (the thread that
 * called backward). On a GPU the pass does not wait for its measures: the
 * report and its warning complete at the thread's next synchronisation point
 * (tn_synchronize, tn_item, a copy to the host), its next monitored pass,
 * tn_last_grad_monitor, or the thread's or the process's exit. */
void tn_set_grad_monitor(bool enabled, double explode_norm, double vanish_norm);
bool tn_is_grad_monitor_enabled(void);
/* Names parameters for the monitor's table (wandb.watch): the list replaces
 * the previous one; n = 0 clears it. Names are copied; the parameters are
 * retained until the list is replaced or cleared. */
tn_status tn_grad_monitor_watch(int n, const char *const *names, tn_tensor *const *params);

typedef enum tn_grad_health {
    TN_GRAD_OK = 0,
    TN_GRAD_EXPLODING = 1,
    TN_GRAD_VANISHING = 2,
    TN_GRAD_OVERFLOW = 3 /* not finite in a pass of a scaled loss (below): the scaler's */
} tn_grad_health;

typedef struct tn_grad_monitor_report tn_grad_monitor_report;
/* The report of the last monitored backward pass on this thread (borrowed,
 * valid until the next one on this thread), or NULL. */
const tn_grad_monitor_report *tn_last_grad_monitor(void);
int tn_grad_monitor_count(const tn_grad_monitor_report *r);
/* Entry i: the node ("MmBackward0") or the leaf's name; *input the node's
 * input the gradient is for (-1 for a leaf); *health its verdict. Borrowed. */
const char *tn_grad_monitor_entry(const tn_grad_monitor_report *r, int i, int *input,
                                  double *norm, double *max_abs, tn_grad_health *health);
/* Index of the first entry that crossed a threshold, -1 when none. */
int tn_grad_monitor_first_alarm(const tn_grad_monitor_report *r);
/* Whether the pass was of a scaled loss (above); *scale (1.0 when not), and
 * the scaler's *skipped of *steps when its scale was taken (any may be
 * NULL). False for a NULL report. */
bool tn_grad_monitor_loss_scale(const tn_grad_monitor_report *r, double *scale, int64_t *skipped,
                                int64_t *steps);
/* The forward backtrace of the first alarm's node (*n_frames = 0 for a leaf
 * or a graph recorded with anomaly mode off). */
const tn_frame *tn_grad_monitor_alarm_trace(const tn_grad_monitor_report *r, int *n_frames);
/* The table: the watched parameters' gradient norms (or every leaf's), the
 * nodes that crossed a threshold, the first alarm with its backtrace. */
tn_status tn_grad_monitor_print(const tn_grad_monitor_report *r, FILE *f);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
