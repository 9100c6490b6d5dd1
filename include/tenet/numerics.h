/* tenet/numerics.h — a record of the numbers a run computed, op by op, to
 * find where two runs part ways (bf16 against float32, a device against the
 * CPU, N threads against 1, tenet against PyTorch).
 *
 *   tn_numerics_begin("run_a.jsonl", NULL);
 *   ... forward, backward, optimiser steps, on any threads ...
 *   tn_numerics_end();
 *   // the same program changed (dtype, device, threads), into run_b.jsonl, then:
 *   //   tenet-diverge run_a.jsonl run_b.jsonl
 *
 * Or set TENET_NUMERICS=path: the recorder runs from the library's load to
 * the process's exit (TENET_NUMERICS_TENSORS=filter as the options' filter).
 *
 * The record (JSON lines, docs/numerics.md) holds, per thread, in order:
 *   - every forward op called by the program (not the ops that run inside
 *     backward or inside another op): its name, the program's call site
 *     (file:line of the first frame outside tenet), and for each input and
 *     output its shape, dtype and a summary (min, max, mean, L2 norm, max |x|,
 *     NaN and Inf counts, a hash of the values);
 *   - every backward node: its name, the forward op that made it, the
 *     summaries of the gradients it received and of those it sent on;
 *   - every optimiser update of a parameter: the parameter after it and its
 *     gradient;
 * and, for the records the filter selects, the tensors themselves, in a
 * safetensors file per record in the folder PATH.tensors beside the record.
 *
 * Threads: begin and end may be called from any thread; each thread records
 * into a buffer of its own, without locks. Records made while tn_numerics_end
 * runs may be left out. Cost: off, one relaxed load per op, node and update;
 * on, a scan of each tensor (threaded above a size) and a stack walk per
 * record.
 */
#ifndef TENET_NUMERICS_H
#define TENET_NUMERICS_H

#include <stdbool.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

typedef struct tn_numerics_options {
    /* Whose tensors to save: NULL or "" for none, "all" for every record's,
     * else comma-separated patterns, each matched as a substring of the
     * record's name ("gelu", "AddmmBackward0") or its call site
     * ("gpt_model.c:201"). Borrowed: copied by begin. */
    const char *tensors;
    /* Skip the call sites (no stack walk): faster, but the comparer then
     * aligns and names ops without them. */
    bool no_sites;
} tn_numerics_options;

/* Starts recording into `path` (written by tn_numerics_end; options may be
 * NULL: the defaults). TN_ERR_INVALID_ARGUMENT when path is NULL or a
 * recording is running. */
tn_status tn_numerics_begin(const char *path, const tn_numerics_options *options);
/* Stops recording and writes the file. TN_ERR_INVALID_ARGUMENT when not
 * recording; TN_ERR_IO when the file cannot be written. */
tn_status tn_numerics_end(void);
/* Whether the recorder is on. */
bool tn_numerics_enabled(void);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
