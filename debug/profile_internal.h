/* debug/profile_internal.h — the timeline profiler's records, shared by the
 * recorder (profile.c), the trace writer (profile_json.c) and the per-op
 * table (profile_summary.c). */
#ifndef TN_DEBUG_PROFILE_INTERNAL_H
#define TN_DEBUG_PROFILE_INTERNAL_H

#include <stdio.h>

#include "debug_internal.h" /* TN_THREAD_NAME */

#define TN_PEV_NAME 40  /* op and node names are copied: a custom function's may not outlive it */
#define TN_PEV_MAX_IN 3 /* input shapes recorded per op */
#define TN_PCHUNK 256   /* events per buffer chunk */
#define TN_PSHAPES 4096 /* dims per shape block */

typedef enum { TN_PEV_OP, TN_PEV_NODE, TN_PEV_COUNTER, TN_PEV_OMP } tn_pev_kind;

/* One event. OP, NODE and OMP: a span [ts, ts + dur) in µs. COUNTER: at ts,
 * the bytes of live tensor storage in `bytes`. OMP: one worker's share of an
 * OpenMP region, member `member` of a team of `team`. */
typedef struct tn_pev {
    uint8_t kind, n_in;
    int8_t dtype; /* OP: the output's */
    int8_t ndim[TN_PEV_MAX_IN];
    char name[TN_PEV_NAME];
    double ts, dur;
    uint64_t flow;        /* OP: 1 + seq of the node it made; NODE: 1 + its seq */
    int64_t bytes, flops; /* flops < 0: not known */
    int32_t team, member; /* OMP */
    /* OP: the n_in input shapes one after the other (ndim[i] dims each), in
     * the buffer's shape blocks */
    const int64_t *dims;
} tn_pev;

/* Input shapes, kept apart so that an event stays small (most events are
 * nodes and counters, and most shapes are short). */
typedef struct tn_pshapes {
    struct tn_pshapes *next;
    int n;
    int64_t v[TN_PSHAPES];
} tn_pshapes;

typedef struct tn_pchunk {
    struct tn_pchunk *next;
    int n;
    tn_pev ev[TN_PCHUNK];
} tn_pchunk;

/* One thread's buffer, for the process's lifetime (threads' TLS points at
 * them; never unlinked). Only the owner writes it, inside busy = 1; the
 * session's end reads and empties it once busy is 0 and the switch off. */
typedef struct tn_pbuf {
    struct tn_pbuf *next; /* the list of buffers; set before the buffer is published */
    /* seq_cst: the owner's store of 1 and the end's store of the switch to 0
     * are each followed by a load of the other (profile.c, enter/collect):
     * either the owner sees the switch off, or the end waits for it. The
     * store of 0 is a release, paired with the end's acquire load. */
    _Atomic int busy;
    uint64_t tid;
    char tname[TN_THREAD_NAME];
    tn_pchunk *head, *tail;
    tn_pshapes *shapes;      /* the newest block first */
    int64_t dropped;         /* events lost to out-of-memory */
    int64_t last_live;       /* the last counter value this thread emitted (-1: none) */
    tn_pev *last_op;         /* the last op span (a node made after it links to it) */
    const void *last_out;    /* ... and its output */
    const void *pending_out; /* a node linked to an output before its op's span ended */
    uint64_t pending_flow;
} tn_pbuf;

/* Writes the Chrome trace of the buffers in list `bufs` to f (pid: the
 * process). TN_ERR_OUT_OF_MEMORY when the flow table cannot be built. */
tn_status tn__prof_write_json(FILE *f, const tn_pbuf *bufs, int pid);

/* ---- the per-op table (profile_summary.c) ---- */
/* A span as the table reads it (name: borrowed; self: scratch). */
typedef struct tn_prof_span {
    const char *name;
    uint64_t tid;
    double ts, dur, self; /* µs */
} tn_prof_span;

typedef struct tn_prof_row {
    char name[TN_PEV_NAME];
    int64_t calls;
    double self, total; /* µs */
} tn_prof_row;

typedef struct tn_prof_table {
    tn_prof_row *rows; /* by self time, most first (owned) */
    size_t n;
} tn_prof_table;

/* The table of spans[0..n) (reordered). TN_ERR_OUT_OF_MEMORY: t is empty. */
tn_status tn__prof_table_make(tn_prof_table *t, tn_prof_span *spans, size_t n);
void tn__prof_table_clear(tn_prof_table *t);
/* The top rows of t (top <= 0: all), the column heads and the total. */
tn_status tn__prof_table_print(const tn_prof_table *t, FILE *f, int top);

/* The table of the buffers in `bufs`, kept until the next call (or
 * tn__prof_table_free) for tn_profile_summary (tn__prof_summary_print). */
tn_status tn__prof_table_build(const tn_pbuf *bufs);
void tn__prof_table_free(void);
tn_status tn__prof_summary_print(FILE *f, int top);

#endif
