/* debug/numerics_internal.h — the numerics recorder's private header, shared
 * by the recorder (numerics.c), its summary scan (numerics_scan.c) and its
 * call sites (numerics_site.c). The record's format: docs/numerics.md. */
#ifndef TN_DEBUG_NUMERICS_INTERNAL_H
#define TN_DEBUG_NUMERICS_INTERNAL_H

#include "debug_internal.h"

/* The format's version, written in the record's first line. */
#define TN_NUM_FORMAT_VERSION 1

/* One tensor's summary. ok false: it could not be made (out of memory). */
typedef struct tn_num_summary {
    bool ok;
    int64_t n, nan, inf;
    double min, max, mean, l2, amax; /* over the elements that are not NaN */
    uint64_t hash;                   /* of the values as float32, in order */
} tn_num_summary;

/* The summary of t (any dtype, any device, any strides). Never fails: a
 * summary that cannot be made has ok false. */
void tn__num_summarize(const tn_tensor *t, tn_num_summary *s);

/* A thread's cache of symbolised program counters (numerics_site.c). */
typedef struct tn_num_sites tn_num_sites;
/* "file:line" of the program's call into tenet on the calling thread's
 * stack (the first frame outside tenet), into buf; "?" when there is none.
 * *cache is made on first use (NULL: symbolises every time). */
void tn__num_call_site(tn_num_sites **cache, char *buf, size_t n);
void tn__num_sites_free(tn_num_sites *c);

#endif
