/* tenet/profile.h — a timeline of what the engine ran.
 *
 *   tn_profile_begin();
 *   ... forward, backward, optimiser steps, on any threads ...
 *   tn_profile_end("trace.json");      // Chrome trace-event JSON
 *   tn_profile_summary(stdout, 10);    // the top ops by self time
 *   // later, from the file: tenet-prof trace.json (tn_profile_summary_file)
 *
 * The file opens in Perfetto (ui.perfetto.dev, "Open trace file") or
 * chrome://tracing ("Load"). It holds, per thread (OS id and name):
 *   - every forward op and every op inside backward as a span ("X"), with the
 *     input shapes, the dtype, the bytes it read and wrote, and its FLOPs
 *     where they are known (matmul, linear);
 *   - every backward node as a span named as its grad_fn ("MulBackward0"),
 *     linked by a flow arrow ("s"/"f") to the span of the forward op that
 *     made it;
 *   - each OpenMP worker's share of a parallel region inside an op, a span
 *     "omp <region>" (category "omp"; args: team size and member number);
 *   - the bytes of live tensor storage over time, a counter ("C").
 * Or set TENET_PROFILE=path: the profiler runs from the library's load to
 * the process's exit, which writes the file.
 *
 * Threads: begin and end may be called from any thread; every thread's ops
 * are recorded into buffers of its own, without locks. Ops running while
 * tn_profile_end runs may be left out of the trace. Cost when off: one
 * relaxed load and a branch per op.
 */
#ifndef TENET_PROFILE_H
#define TENET_PROFILE_H

#include <stdio.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* Starts recording. TN_ERR_INVALID_ARGUMENT when the profiler is running. */
tn_status tn_profile_begin(void);
/* Stops recording, writes the trace to `path` (NULL: writes no file) and
 * frees what was recorded, keeping the per-op table tn_profile_summary
 * prints. TN_ERR_INVALID_ARGUMENT when not profiling; TN_ERR_IO when the file
 * cannot be written (the recording is discarded all the same). */
tn_status tn_profile_end(const char *path);
/* Whether the profiler is recording. */
bool tn_profile_enabled(void);
/* The last ended recording's ops, as a table sorted by self time (the time
 * in an op less the time in the ops and nodes inside it): name, calls, self
 * and total time, average, share of all self time. top <= 0: every row.
 * TN_ERR_INVALID_ARGUMENT when f is NULL or no recording has ended. */
tn_status tn_profile_summary(FILE *f, int top);
/* The same table for a trace file tn_profile_end wrote (its "X" events), as
 * the tenet-prof command prints it. TN_ERR_IO: the file cannot be read;
 * TN_ERR_FORMAT: it is not a trace. */
tn_status tn_profile_summary_file(const char *path, FILE *f, int top);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
