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
/* The writes that moved the version (or the untracked writes), oldest first. */
int tn_anomaly_report_n_writes(const tn_anomaly_report *r);
const tn_write_event *tn_anomaly_report_write(const tn_anomaly_report *r, int i);
/* Writes since the save that could not be listed: lost to contention, plus
 * one when older records were overwritten by newer writes (a lower bound). */
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

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
