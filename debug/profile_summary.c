/* debug/profile_summary.c — the profiler's per-op table (tn_profile_summary):
 * for each op or node name, its calls, its total time and its self time (the
 * time less the spans directly inside it), as torch.profiler's
 * key_averages(), sorted by self time. */
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

typedef struct prof_row {
    char name[TN_PEV_NAME];
    int64_t calls;
    double self, total; /* µs */
} prof_row;

/* The last ended recording's table (under the session mutex of profile.c). */
static prof_row *g_rows;
static size_t g_n_rows;

typedef struct span_stack {
    const tn_pev **v;
    size_t n, cap;
} span_stack;

static prof_row *row_of(prof_row **rows, size_t *n, size_t *cap, const char *name) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*rows)[i].name, name)) return &(*rows)[i];
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        prof_row *r = tn__realloc(*rows, c * sizeof *r);
        if (!r) return NULL;
        *rows = r;
        *cap = c;
    }
    prof_row *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof *r);
    memcpy(r->name, name, sizeof r->name);
    return r;
}

/* A thread's spans come in the order they ended: those already on the stack
 * that began inside span e are its direct children (theirs were popped). */
static tn_status add_span(span_stack *s, const tn_pev *e, prof_row *row) {
    double self = e->dur;
    while (s->n && s->v[s->n - 1]->ts >= e->ts)
        self -= s->v[--s->n]->dur;
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        const tn_pev **v = tn__realloc(s->v, c * sizeof *v);
        if (!v) return TN_ERR_OUT_OF_MEMORY;
        s->v = v;
        s->cap = c;
    }
    s->v[s->n++] = e;
    row->calls++;
    row->total += e->dur;
    row->self += self;
    return TN_OK;
}

static tn_status build(const tn_pbuf *bufs, prof_row **rows, size_t *n) {
    size_t cap = 0;
    span_stack s = {0};
    tn_status st = TN_OK;
    for (const tn_pbuf *b = bufs; b && st == TN_OK; b = b->next) {
        s.n = 0;
        for (const tn_pchunk *c = b->head; c && st == TN_OK; c = c->next)
            for (int i = 0; i < c->n && st == TN_OK; i++) {
                const tn_pev *e = &c->ev[i];
                if (e->kind == TN_PEV_COUNTER) continue;
                prof_row *r = row_of(rows, n, &cap, e->name);
                st = r ? add_span(&s, e, r) : TN_ERR_OUT_OF_MEMORY;
            }
    }
    tn__mfree(s.v);
    return st;
}

static int by_self(const void *a, const void *b) {
    double x = ((const prof_row *)a)->self, y = ((const prof_row *)b)->self;
    return (x < y) - (x > y);
}

tn_status tn__prof_table_build(const tn_pbuf *bufs) {
    tn__prof_table_free();
    prof_row *rows = NULL;
    size_t n = 0;
    if (build(bufs, &rows, &n) < 0) {
        tn__mfree(rows);
        return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory summarising a profile");
    }
    if (n) qsort(rows, n, sizeof *rows, by_self);
    g_rows = rows;
    g_n_rows = n;
    return TN_OK;
}

void tn__prof_table_free(void) {
    tn__mfree(g_rows);
    g_rows = NULL;
    g_n_rows = 0;
}

tn_status tn__prof_summary_print(FILE *f, int top) {
    double all = 0;
    for (size_t i = 0; i < g_n_rows; i++)
        all += g_rows[i].self;
    size_t n = top > 0 && (size_t)top < g_n_rows ? (size_t)top : g_n_rows;
    fprintf(f, "%-28s %8s %12s %7s %12s %10s\n", "name", "calls", "self ms", "self %", "total ms",
            "avg us");
    for (size_t i = 0; i < n; i++) {
        const prof_row *r = &g_rows[i];
        fprintf(f, "%-28s %8lld %12.3f %6.1f%% %12.3f %10.2f\n", r->name, (long long)r->calls,
                r->self / 1e3, all > 0 ? 100 * r->self / all : 0.0, r->total / 1e3,
                r->total / (double)r->calls);
    }
    fprintf(f, "self time total: %.3f ms over %zu names\n", all / 1e3, g_n_rows);
    return TN_OK;
}
