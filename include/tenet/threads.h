/* tenet/threads.h — the concurrency contract and the tensor race detector.
 *
 * The contract (docs/threads.md has the details and the evidence):
 *   - Any number of threads may create tensors, run ops and run backward at
 *     the same time. Reading shared tensors from several threads is safe.
 *   - Concurrent backward into shared leaves is safe and EXACT: N threads x M
 *     passes of (w*2).sum() leave w.grad == 2*N*M in every element
 *     (lock-free exchange-and-merge accumulation, no update lost).
 *   - Several threads backward through ONE graph: with retain_graph all
 *     succeed and their gradients add up; without it exactly one succeeds
 *     and the others get "Trying to backward through the graph a second
 *     time ..." (TN_ERR_AUTOGRAD); nothing crashes, nothing leaks.
 *   - In-place writes to one tensor from several threads at once are the
 *     caller's race, as in PyTorch; version counters stay exact (no bump is
 *     lost) and the race detector below reports the overlap.
 *   - Grad mode, scopes, errors and anomaly reports are per thread.
 *   - OpenMP inside ops: nested parallelism is never used (an op called
 *     from an OpenMP worker runs serially); an op of `work` elements uses
 *     min(tn_get_num_threads(), work / (TN_GRAIN/2)) threads and none below
 *     TN_GRAIN (32768) elements. With many user threads each calling large
 *     ops, call tn_set_num_threads(1) so user threads are the parallelism.
 *
 * Race detector (debug): while on, every CPU kernel (pointwise ops, copies,
 * fills, in-place ops, optimiser steps, matrix products, reductions,
 * softmax, the fused cross-entropy, the gradients' measures of
 * clip_grad_norm_ and the gradient monitor) registers its access (storage, byte
 * range, read or write) for the time the kernel runs. A write that
 * overlaps another thread's in-flight read or write of the same bytes, or a
 * read that overlaps another thread's in-flight write, is reported once: a
 * warning on stderr naming both ops, both threads and both call stacks
 * (symbolised only when reported). The same pair of call sites is printed
 * in full once; its repeats are counted, and summarised in one line ("the
 * race between ... repeated N more times") at most once a second
 * (TENET_REPORT_INTERVAL=<seconds> to change it) and when the detector is
 * switched off, reset, or the process exits. Lock-free; costs a backtrace
 * per kernel.
 * It sees races that overlap in time; a race whose accesses happen not to
 * overlap in one run is not reported (run longer or under ThreadSanitizer).
 *
 * Threads: every function here may be called from any thread at any time.
 */
#ifndef TENET_THREADS_H
#define TENET_THREADS_H

#include <stdio.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* Parallel backward (process-wide, off by default): independent branches of
 * one graph run as OpenMP tasks on up to tn_get_num_threads() threads, with
 * results bit-identical to the serial order (gradients are summed in a
 * fixed order). Off by default because most graphs are chains whose large
 * ops already use every thread inside the op; an op inside a task runs on
 * one thread. Ignored in anomaly mode and inside an OpenMP region. */
void tn_set_parallel_backward(bool enabled);
bool tn_is_parallel_backward(void);

/* Switches the race detector on or off, process-wide. Also switched on at
 * start by the environment variable TENET_DETECT_RACES=1. Accesses already
 * in flight when it is switched on are not seen. */
void tn_set_detect_races(bool enabled);
bool tn_is_detect_races_enabled(void);

/* Number of races reported since start or the last reset (process-wide),
 * repeats of a pair included. */
uint64_t tn_race_reports(void);
/* Sets the count back to 0 and forgets the last report and the pairs seen
 * (their pending repeat counts are printed first). */
void tn_race_reports_reset(void);

/* Where reports are printed: stderr by default; NULL prints nothing (they
 * are still counted and kept as the last report). The stream must stay
 * valid while the detector is on. */
void tn_set_race_report_stream(FILE *f);

/* Copies the text of the most recent report printed in full (a repeat of
 * a pair is not formatted) into buf (NUL-terminated, truncated to size)
 * and returns its full length; 0 when none. */
size_t tn_race_last_report(char *buf, size_t size);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
