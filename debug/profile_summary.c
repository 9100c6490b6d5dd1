/* debug/profile_summary.c — the profiler's per-op table (tn_profile_summary):
 * for each op or node name, its calls, its total time and its self time (the
 * time less the spans directly inside it), as torch.profiler's
 * key_averages(), sorted by self time. Made from a recording's buffers or
 * from a trace file's spans (profile_read.c). */
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

/* The last ended recording's table (under the session mutex of profile.c). */
static tn_prof_table g_table;

static int by_start(const void *a, const void *b) {
    const tn_prof_span *x = a, *y = b;
    if (x->tid != y->tid) return (x->tid > y->tid) - (x->tid < y->tid);
    if (x->ts != y->ts) return (x->ts > y->ts) - (x->ts < y->ts);
    return (x->dur < y->dur) - (x->dur > y->dur); /* the enclosing span first */
}

static int by_self(const void *a, const void *b) {
    double x = ((const tn_prof_row *)a)->self, y = ((const tn_prof_row *)b)->self;
    return (x < y) - (x > y);
}

static tn_prof_row *row_of(tn_prof_table *t, size_t *cap, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (!strncmp(t->rows[i].name, name, TN_PEV_NAME - 1)) return &t->rows[i];
    if (t->n == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        tn_prof_row *r = tn__realloc(t->rows, c * sizeof *r);
        if (!r) return NULL;
        t->rows = r;
        *cap = c;
    }
    tn_prof_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    strncpy(r->name, name, TN_PEV_NAME - 1);
    return r;
}

/* Spans in start order, per thread: the open spans form a stack, and each
 * span's time leaves its parent's self time. spans[i].self is scratch. */
static tn_status fill(tn_prof_table *t, tn_prof_span *spans, size_t n) {
    size_t cap = 0, depth = 0;
    size_t *open = n ? tn__malloc_quiet(n * sizeof *open) : NULL;
    if (n && !open) return TN_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        tn_prof_span *e = &spans[i];
        while (depth && (spans[open[depth - 1]].tid != e->tid ||
                         spans[open[depth - 1]].ts + spans[open[depth - 1]].dur <= e->ts))
            depth--;
        if (depth) spans[open[depth - 1]].self -= e->dur;
        e->self += e->dur;
        open[depth++] = i;
    }
    tn__mfree(open);
    for (size_t i = 0; i < n; i++) {
        tn_prof_row *r = row_of(t, &cap, spans[i].name);
        if (!r) return TN_ERR_OUT_OF_MEMORY;
        r->calls++;
        r->total += spans[i].dur;
        r->self += spans[i].self;
    }
    return TN_OK;
}

tn_status tn__prof_table_make(tn_prof_table *t, tn_prof_span *spans, size_t n) {
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < n; i++)
        spans[i].self = 0;
    if (n) qsort(spans, n, sizeof *spans, by_start);
    if (fill(t, spans, n) < 0) {
        tn__prof_table_clear(t);
        return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory summarising a profile");
    }
    if (t->n) qsort(t->rows, t->n, sizeof *t->rows, by_self);
    return TN_OK;
}

void tn__prof_table_clear(tn_prof_table *t) {
    tn__mfree(t->rows);
    memset(t, 0, sizeof *t);
}

tn_status tn__prof_table_build(const tn_pbuf *bufs) {
    tn__prof_table_clear(&g_table);
    size_t n = 0;
    for (const tn_pbuf *b = bufs; b; b = b->next)
        for (const tn_pchunk *c = b->head; c; c = c->next)
            for (int i = 0; i < c->n; i++)
                n += c->ev[i].kind == TN_PEV_OP || c->ev[i].kind == TN_PEV_NODE;
    tn_prof_span *spans = n ? tn__malloc_quiet(n * sizeof *spans) : NULL;
    if (n && !spans) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory summarising a profile");
    size_t k = 0;
    for (const tn_pbuf *b = bufs; b; b = b->next)
        for (const tn_pchunk *c = b->head; c; c = c->next)
            for (int i = 0; i < c->n; i++)
                if (c->ev[i].kind == TN_PEV_OP || c->ev[i].kind == TN_PEV_NODE)
                    spans[k++] =
                        (tn_prof_span){c->ev[i].name, b->tid, c->ev[i].ts, c->ev[i].dur, 0};
    tn_status st = tn__prof_table_make(&g_table, spans, n);
    tn__mfree(spans);
    return st;
}

void tn__prof_table_free(void) { tn__prof_table_clear(&g_table); }

tn_status tn__prof_table_print(const tn_prof_table *t, FILE *f, int top) {
    double all = 0;
    for (size_t i = 0; i < t->n; i++)
        all += t->rows[i].self;
    size_t n = top > 0 && (size_t)top < t->n ? (size_t)top : t->n;
    fprintf(f, "%-28s %8s %12s %7s %12s %10s\n", "name", "calls", "self ms", "self %", "total ms",
            "avg us");
    for (size_t i = 0; i < n; i++) {
        const tn_prof_row *r = &t->rows[i];
        fprintf(f, "%-28s %8lld %12.3f %6.1f%% %12.3f %10.2f\n", r->name, (long long)r->calls,
                r->self / 1e3, all > 0 ? 100 * r->self / all : 0.0, r->total / 1e3,
                r->total / (double)r->calls);
    }
    fprintf(f, "self time total: %.3f ms over %zu names\n", all / 1e3, t->n);
    return TN_OK;
}

tn_status tn__prof_summary_print(FILE *f, int top) {
    return tn__prof_table_print(&g_table, f, top);
}
