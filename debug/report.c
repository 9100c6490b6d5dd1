/* The anomaly report of a thread: built by the engine with tn__report_*,
 * read with the public accessors, printed with tn_anomaly_report_print.
 *
 * Building stores raw program counters only. The first read (an accessor
 * that returns frames, print, first_culprit) symbolises every backtrace of
 * the report at once, trims tenet's own frames and caches the frames and
 * their strings in the report's arena until the next report on the thread.
 *
 * Memory: the report header lives in thread-local storage, so a report can
 * always be started (never NULL, even out of memory); its write and parent
 * lists and the arena are on the heap, allocated on the thread's first
 * anomaly, reused by later ones, and freed by tn_anomaly_clear or at thread
 * exit. Out of memory, writes are counted as dropped and frames print as raw
 * addresses: the report is made to explain another error, which is the one
 * the call returns, so its own allocations (tn__malloc_quiet) fail quietly
 * and leave a shorter report. A report is read on the thread that made it
 * (not thread-safe).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "debug_internal.h"

#define REP_NAME 96
#define REP_MAX_WRITES 64
#define REP_MAX_PARENTS 16
#define REP_SYM_BUF 1024

typedef struct rep_trace {
    bool present;
    tn_backtrace bt;
    const tn_frame *frames; /* symbolised and trimmed, in the arena */
    int n_frames;
} rep_trace;

typedef struct rep_write {
    const char *op;
    uint64_t version, tid;
    char thread_name[TN_THREAD_NAME];
    bool tracked;
    rep_trace trace;
} rep_write;

typedef struct rep_parent {
    char name[REP_NAME];
    rep_trace trace;
} rep_parent;

typedef struct rep_body {
    rep_parent parents[REP_MAX_PARENTS];
    rep_write writes[REP_MAX_WRITES];
    tn_write_event events[REP_MAX_WRITES];
} rep_body;

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} arena_chunk;

struct tn_anomaly_report {
    tn_anomaly_kind kind;
    char node[REP_NAME];
    rep_trace forward;
    bool has_saved;
    tn_dtype dtype;
    int ndim, output_nr, output_index, n_writes, n_parents;
    int64_t shape[TN_MAX_DIMS];
    uint64_t saved_version, current_version, dropped, overflow;
    char relay[REP_NAME]; /* NaN: the backward node that only relayed it; "" when none */
    int relay_output;
    bool outside; /* UNTRACKED: the write came from outside tenet (shared memory) */
    bool symbolised;
    rep_body *body;     /* NULL when it could not be allocated */
    arena_chunk *arena; /* chunks in use, newest first */
    char culprit[768];
};

static _Thread_local tn_anomaly_report tls_report;
static _Thread_local bool tls_active;

/* ---- memory -------------------------------------------------------------------------- */

static void *arena_alloc(tn_anomaly_report *r, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_chunk *c = r->arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        arena_chunk *fresh = tn__malloc_quiet(sizeof *fresh + cap);
        if (!fresh) return NULL;
        fresh->next = c;
        fresh->used = 0;
        fresh->cap = cap;
        r->arena = c = fresh;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

static const char *arena_strdup(tn_anomaly_report *r, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = arena_alloc(r, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Keeps the newest chunk for the next report; frees the others. */
static void arena_reset(tn_anomaly_report *r, bool keep_one) {
    arena_chunk *c = r->arena, *keep = keep_one ? c : NULL;
    if (keep) {
        keep->used = 0;
        c = c->next;
        keep->next = NULL;
    }
    while (c) {
        arena_chunk *next = c->next;
        tn__mfree(c);
        c = next;
    }
    r->arena = keep;
}

static void report_free(void *p) {
    tn_anomaly_report *r = p;
    arena_reset(r, false);
    tn__mfree(r->body);
    r->body = NULL;
}

/* Frees the heap parts at thread exit (the header is thread-local). */
static pthread_key_t exit_key;
static bool exit_key_ok;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, report_free) == 0; }

/* ---- building (engine side) ------------------------------------------------------------ */

static void copy_name(char *dst, const char *src) {
    snprintf(dst, REP_NAME, "%s", src ? src : "(unknown)");
}

static void set_trace(rep_trace *t, const tn_backtrace *bt) {
    t->present = bt != NULL;
    if (bt) t->bt = *bt;
    t->frames = NULL;
    t->n_frames = 0;
}

tn_anomaly_report *tn__report_begin(tn_anomaly_kind kind, const char *node_name) {
    tn_anomaly_report *r = &tls_report;
    if (!r->body) {
        r->body = tn__malloc_quiet(sizeof *r->body);
        pthread_once(&exit_once, make_exit_key);
        if (r->body && exit_key_ok) pthread_setspecific(exit_key, r);
    }
    if (r->arena) arena_reset(r, true);
    r->kind = kind;
    copy_name(r->node, node_name);
    set_trace(&r->forward, NULL);
    r->has_saved = false;
    r->ndim = 0;
    r->output_nr = -1;
    r->output_index = -1;
    r->n_writes = r->n_parents = 0;
    r->saved_version = r->current_version = r->dropped = r->overflow = 0;
    r->relay[0] = '\0';
    r->relay_output = -1;
    r->symbolised = false;
    r->culprit[0] = '\0';
    tls_active = true;
    return r;
}

void tn__report_set_forward(tn_anomaly_report *r, const tn_backtrace *bt) {
    set_trace(&r->forward, bt);
    r->symbolised = false;
}

void tn__report_add_parent(tn_anomaly_report *r, const char *node_name, const tn_backtrace *bt) {
    if (!r->body || r->n_parents == REP_MAX_PARENTS) return;
    rep_parent *p = &r->body->parents[r->n_parents++];
    copy_name(p->name, node_name);
    set_trace(&p->trace, bt);
    r->symbolised = false;
}

void tn__report_set_saved(tn_anomaly_report *r, const tn_tensor *t, int output_nr,
                          uint64_t saved_version, uint64_t current_version) {
    r->has_saved = t != NULL;
    if (t) {
        r->dtype = t->dtype;
        r->ndim = t->ndim;
        memcpy(r->shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
    }
    r->output_nr = output_nr;
    r->saved_version = saved_version;
    r->current_version = current_version;
}

void tn__report_add_write(tn_anomaly_report *r, const tn_write_snap *w, bool tracked) {
    if (!r->body || r->n_writes == REP_MAX_WRITES) {
        r->overflow++;
        return;
    }
    rep_write *e = &r->body->writes[r->n_writes++];
    e->op = w->op ? w->op : "(unknown op)";
    e->version = w->version;
    e->tid = w->tid;
    memcpy(e->thread_name, w->thread_name, TN_THREAD_NAME);
    e->thread_name[TN_THREAD_NAME - 1] = '\0';
    e->tracked = tracked;
    set_trace(&e->trace, &w->bt);
    r->symbolised = false;
}

void tn__report_set_dropped(tn_anomaly_report *r, uint64_t dropped) { r->dropped = dropped; }
void tn__report_set_outside(tn_anomaly_report *r) { r->outside = true; }
void tn__report_set_relay(tn_anomaly_report *r, const char *node_name, int output_index) {
    copy_name(r->relay, node_name);
    r->relay_output = output_index;
}
void tn__report_set_output_index(tn_anomaly_report *r, int index) { r->output_index = index; }

/* ---- symbolisation ---------------------------------------------------------------------- */

/* pc -> frame memo for one symbolisation pass: the same call sites recur in
 * every backtrace of a report (main, the training loop, ...). */
#define MEMO_SIZE 512 /* power of two; > every distinct pc a report can hold */
typedef struct memo {
    void *pc[MEMO_SIZE];
    tn_frame frame[MEMO_SIZE];
} memo;

static void symbolize_one(tn_anomaly_report *r, memo *m, void *pc, tn_frame *out) {
    size_t h = ((uintptr_t)pc >> 2) * 0x9E3779B97F4A7C15ull >> 32;
    for (size_t i = 0; m && i < MEMO_SIZE; i++, h++) {
        size_t k = h & (MEMO_SIZE - 1);
        if (m->pc[k] == pc) {
            *out = m->frame[k];
            return;
        }
        if (!m->pc[k]) {
            m->pc[k] = pc;
            symbolize_one(r, NULL, pc, &m->frame[k]);
            *out = m->frame[k];
            return;
        }
    }
    char buf[REP_SYM_BUF];
    /* every captured pc is a return address: pc - 1 is inside the call */
    tn__symbolize((char *)pc - 1, out, buf, sizeof buf);
    out->pc = pc;
    out->function = arena_strdup(r, out->function);
    out->file = arena_strdup(r, out->file);
    if (!out->file) out->line = 0;
}

static bool is_runtime_start(const tn_frame *f) {
    static const char *const names[] = {"__libc_start_call_main",
                                        "__libc_start_main",
                                        "__libc_start_main_impl",
                                        "_start",
                                        "start_thread",
                                        "clone",
                                        "clone3",
                                        "__clone",
                                        "__clone3",
                                        "__clone_internal"};
    if (!f->function) return false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(f->function, names[i])) return true;
    return false;
}

/* First frame to show: past the innermost run of tenet's frames. A frame
 * without line info (a static engine helper in a build without -g) does not
 * end the run; the first non-engine frame with a source line does. When
 * every frame is tenet's, nothing is trimmed. */
int tn__first_user_frame(const tn_frame *f, int n) {
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (tn__frame_is_engine(&f[i]))
            last = i;
        else if (f[i].line > 0)
            break;
    }
    return last + 1 < n ? last + 1 : 0;
}

/* One past the last frame to show: the C runtime below main / the thread
 * start routine says nothing to the user. */
int tn__last_user_frame(const tn_frame *f, int start, int n) {
    for (int i = start; i < n; i++)
        if (f[i].function && !strcmp(f[i].function, "main")) return i + 1;
    while (n > start + 1 && is_runtime_start(&f[n - 1]))
        n--;
    return n;
}

static void symbolize_trace(tn_anomaly_report *r, memo *m, rep_trace *t) {
    t->frames = NULL;
    t->n_frames = 0;
    if (!t->present || t->bt.n <= 0) return;
    tn_frame *f = arena_alloc(r, (size_t)t->bt.n * sizeof *f);
    if (!f) return;
    for (int i = 0; i < t->bt.n; i++)
        symbolize_one(r, m, t->bt.pc[i], &f[i]);
    int start = tn__first_user_frame(f, t->bt.n);
    t->frames = f + start;
    t->n_frames = tn__last_user_frame(f, start, t->bt.n) - start;
}

static void symbolize_report(tn_anomaly_report *r) {
    if (r->symbolised) return;
    arena_reset(r, true);           /* drop a previous pass's frames */
    memo *m = tn__calloc_quiet(1, sizeof *m); /* NULL: symbolise without the memo */
    symbolize_trace(r, m, &r->forward);
    for (int i = 0; i < r->n_parents; i++)
        symbolize_trace(r, m, &r->body->parents[i].trace);
    for (int i = 0; i < r->n_writes; i++) {
        rep_write *w = &r->body->writes[i];
        symbolize_trace(r, m, &w->trace);
        r->body->events[i] =
            (tn_write_event){w->op,           w->version,    w->tid, w->tracked, w->trace.n_frames,
                             w->trace.frames, w->thread_name};
    }
    tn__mfree(m);
    r->symbolised = true;
}

static tn_anomaly_report *readable(const tn_anomaly_report *r) {
    tn_anomaly_report *w = (tn_anomaly_report *)r; /* lazily filled caches */
    symbolize_report(w);
    return w;
}

void tn__frame_where(char *buf, size_t n, const tn_frame *f) {
    const char *file = tn__short_path(f->file);
    if (file && f->line > 0)
        snprintf(buf, n, "%s:%d", file, f->line);
    else
        snprintf(buf, n, "%s", file ? file : "?");
}

/* "fn (file:line)" into buf. */
static void format_frame(char *buf, size_t n, const tn_frame *f) {
    char where[600];
    tn__frame_where(where, sizeof where, f);
    if (f->function)
        snprintf(buf, n, "%s (%s)", f->function, where);
    else
        snprintf(buf, n, "%p (%s)", f->pc, where);
}

const char *tn__report_first_culprit(tn_anomaly_report *r) {
    symbolize_report(r);
    const rep_trace *t = NULL;
    const rep_write *w = r->n_writes > 0 ? &r->body->writes[0] : NULL;
    /* a version error is about the first write after the save: a later one is not its cause */
    if (w && r->kind == TN_ANOMALY_INPLACE && w->version != r->saved_version + 1) return NULL;
    if (w)
        t = &w->trace;
    else if (r->kind == TN_ANOMALY_NAN_FORWARD)
        t = &r->forward;
    if (!t || t->n_frames == 0) return NULL;
    format_frame(r->culprit, sizeof r->culprit, &t->frames[0]);
    if (w && w->tid != tn__os_tid()) { /* another thread's write: say which */
        size_t len = strlen(r->culprit);
        char who[64];
        tn__format_thread(who, sizeof who, w->tid, w->thread_name);
        snprintf(r->culprit + len, sizeof r->culprit - len, " on %s", who);
    }
    return r->culprit;
}

/* ---- public accessors ------------------------------------------------------------------ */

const tn_anomaly_report *tn_last_anomaly(void) { return tls_active ? &tls_report : NULL; }

void tn_anomaly_clear(void) {
    tls_active = false;
    report_free(&tls_report);
}

#define CHECK_REPORT(r, ret)                                                                       \
    do {                                                                                           \
        if (TN_UNLIKELY(!(r))) {                                                                   \
            tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'r' is NULL", __func__);              \
            return ret;                                                                            \
        }                                                                                          \
    } while (0)

tn_anomaly_kind tn_anomaly_report_kind(const tn_anomaly_report *r) {
    CHECK_REPORT(r, (tn_anomaly_kind)0);
    return r->kind;
}

const char *tn_anomaly_report_node(const tn_anomaly_report *r) {
    CHECK_REPORT(r, NULL);
    return r->node;
}

const tn_frame *tn_anomaly_report_forward_trace(const tn_anomaly_report *r, int *n_frames) {
    if (n_frames) *n_frames = 0;
    CHECK_REPORT(r, NULL);
    const rep_trace *t = &readable(r)->forward;
    if (n_frames) *n_frames = t->n_frames;
    return t->n_frames ? t->frames : NULL;
}

tn_status tn_anomaly_report_saved(const tn_anomaly_report *r, tn_dtype *dtype, int *ndim,
                                  const int64_t **shape, int *output_nr, uint64_t *saved_version,
                                  uint64_t *current_version) {
    CHECK_REPORT(r, TN_ERR_INVALID_ARGUMENT);
    if (!r->has_saved)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_anomaly_report_saved: this report (%s in %s) names no saved tensor",
                         r->kind == TN_ANOMALY_NAN_FORWARD ? "forward NaN/Inf" : "backward",
                         r->node);
    if (dtype) *dtype = r->dtype;
    if (ndim) *ndim = r->ndim;
    if (shape) *shape = r->shape;
    if (output_nr) *output_nr = r->output_nr;
    if (saved_version) *saved_version = r->saved_version;
    if (current_version) *current_version = r->current_version;
    return TN_OK;
}

int tn_anomaly_report_n_writes(const tn_anomaly_report *r) {
    CHECK_REPORT(r, 0);
    return r->n_writes;
}

const tn_write_event *tn_anomaly_report_write(const tn_anomaly_report *r, int i) {
    CHECK_REPORT(r, NULL);
    if (i < 0 || i >= r->n_writes) {
        tn__error(TN_ERR_INDEX,
                  "tn_anomaly_report_write: index %d out of range (the report has "
                  "%d writes)",
                  i, r->n_writes);
        return NULL;
    }
    return &readable(r)->body->events[i];
}

uint64_t tn_anomaly_report_dropped(const tn_anomaly_report *r) {
    CHECK_REPORT(r, 0);
    return r->dropped + r->overflow;
}

int tn_anomaly_report_output_index(const tn_anomaly_report *r) {
    CHECK_REPORT(r, -1);
    return r->output_index;
}

const char *tn_anomaly_report_relayed_by(const tn_anomaly_report *r) {
    CHECK_REPORT(r, NULL);
    return r->relay[0] ? r->relay : NULL;
}

/* ---- printing -------------------------------------------------------------------------- */

static void print_frames(FILE *f, const rep_trace *t, int indent) {
    if (t->n_frames == 0) { /* symbolisation ran out of memory: raw addresses */
        for (int i = 0; i < t->bt.n; i++)
            fprintf(f, "%*s#%d %p\n", indent, "", i, t->bt.pc[i]);
        return;
    }
    for (int i = 0; i < t->n_frames; i++) {
        char line[1200];
        format_frame(line, sizeof line, &t->frames[i]);
        fprintf(f, "%*s#%d %s\n", indent, "", i, line);
    }
}

static const char *no_forward_info =
    "No forward pass information available. Enable detect anomaly during forward pass for more "
    "information.";

static void print_headline(FILE *f, const tn_anomaly_report *r) {
    const char *what = "";
    switch (r->kind) {
    case TN_ANOMALY_INPLACE:
        what = "one of the variables needed for gradient computation has been modified by an "
               "inplace operation";
        break;
    case TN_ANOMALY_UNTRACKED:
        what = r->outside
                   ? "a variable needed for gradient computation was written outside tenet (its "
                     "memory is shared with another framework, through DLPack or "
                     "tn_from_blob), which no version counter can see: its gradient may be "
                     "silently wrong"
                   : "a variable needed for gradient computation was written through an alias "
                     "with its own version counter (.data?), which autograd cannot see: its "
                     "gradient may be silently wrong";
        break;
    case TN_ANOMALY_NAN_BACKWARD:
        fprintf(f, "tenet anomaly: Function '%s' returned nan/inf values in its %dth output.\n",
                r->node, r->output_index);
        return;
    case TN_ANOMALY_NAN_FORWARD:
        fprintf(f,
                "tenet anomaly: Function '%s' returned nan/inf values in its %dth output "
                "(forward, from finite inputs).\n",
                r->node, r->output_index);
        return;
    case TN_ANOMALY_SECOND_BACKWARD:
        what = "a saved tensor needed for gradient computation is gone: freed by an earlier "
               "backward (use retain_graph) or detached in place";
        break;
    }
    fprintf(f, "tenet anomaly: %s\n", what);
}

static void print_saved(FILE *f, const tn_anomaly_report *r) {
    char shape[200], whose[REP_NAME + 32];
    tn__format_shape(shape, sizeof shape, r->ndim, r->shape);
    if (r->output_nr < 0)
        snprintf(whose, sizeof whose, "input of %s", r->node);
    else
        snprintf(whose, sizeof whose, "output %d of %s", r->output_nr, r->node);
    if (r->saved_version != r->current_version || r->kind != TN_ANOMALY_UNTRACKED)
        fprintf(f,
                "  saved tensor: [%s %s], %s, saved at version %" PRIu64 ", now at version %" PRIu64
                "\n",
                tn_dtype_name(r->dtype), shape, whose, r->saved_version, r->current_version);
    else
        fprintf(f,
                "  saved tensor: [%s %s], %s, still at version %" PRIu64
                " but its memory was written\n",
                tn_dtype_name(r->dtype), shape, whose, r->saved_version);
}

static void print_forward(FILE *f, const tn_anomaly_report *r) {
    if (!r->forward.present) {
        fprintf(f, "  %s\n", no_forward_info);
        return;
    }
    if (r->kind == TN_ANOMALY_NAN_FORWARD)
        fprintf(f, "  forward call that produced it:\n");
    else if (r->has_saved)
        fprintf(f, "  forward call that saved it (%s created at):\n", r->node);
    else
        fprintf(f, "  forward call that created %s:\n", r->node);
    print_frames(f, &r->forward, 4);
    for (int i = 0; i < r->n_parents; i++) {
        const rep_parent *p = &r->body->parents[i];
        if (!p->trace.present) {
            fprintf(f, "  Previous calculation was induced by %s. %s\n", p->name, no_forward_info);
            continue;
        }
        fprintf(f, "  Previous calculation was induced by %s, created at:\n", p->name);
        print_frames(f, &p->trace, 4);
    }
}

/* Whether writes a and b came from the same call: op, thread, kind and
 * the innermost frame shown. */
static bool same_call(const rep_write *a, const rep_write *b) {
    if (a->tid != b->tid || a->tracked != b->tracked || strcmp(a->op, b->op)) return false;
    if (a->trace.n_frames == 0 || b->trace.n_frames == 0)
        return a->trace.n_frames == b->trace.n_frames;
    return a->trace.frames[0].pc == b->trace.frames[0].pc;
}

/* A run of `n` identical writes from w on: one line, with its call site. */
static void print_run(FILE *f, const rep_write *w, int n, uint64_t last_version) {
    char who[64], site[800] = "";
    tn__format_thread(who, sizeof who, w->tid, w->thread_name);
    if (w->trace.n_frames > 0) {
        site[0] = ',';
        site[1] = ' ';
        format_frame(site + 2, sizeof site - 2, &w->trace.frames[0]);
    }
    if (w->tracked)
        fprintf(f, "    %s \u00d7%d -> versions %" PRIu64 "..%" PRIu64 ", %s%s\n", w->op, n,
                w->version, last_version, who, site);
    else
        fprintf(f, "    %s \u00d7%d (untracked), %s%s\n", w->op, n, who, site);
}

static void print_write(FILE *f, const rep_write *w) {
    char who[64];
    tn__format_thread(who, sizeof who, w->tid, w->thread_name);
    if (w->tracked)
        fprintf(f, "    %s -> version %" PRIu64 ", %s\n", w->op, w->version, who);
    else
        fprintf(f, "    %s (untracked: its alias's own counter -> version %" PRIu64 "), %s\n",
                w->op, w->version, who);
    print_frames(f, &w->trace, 6);
}

/* The writes, oldest first; a run of identical consecutive writes (same
 * op, thread and call site) is folded into one line. */
static void print_writes(FILE *f, const tn_anomaly_report *r) {
    bool untracked = r->kind == TN_ANOMALY_UNTRACKED;
    if (r->n_writes == 0) {
        if (r->kind == TN_ANOMALY_INPLACE || untracked)
            fprintf(f, "  the writes since the save were not recorded (made with anomaly mode "
                       "off, or dropped)\n");
    } else if (untracked) {
        fprintf(f,
                "  untracked writes since the save (%d), written through an alias with its own "
                "version counter (.data?):\n",
                r->n_writes);
    } else {
        fprintf(f, "  in-place writes since the save (%d):\n", r->n_writes);
    }
    if (r->kind == TN_ANOMALY_INPLACE && r->n_writes > 0 &&
        r->body->writes[0].version != r->saved_version + 1)
        fprintf(f,
                "    (the first write after the save, to version %" PRIu64 ", was not recorded)\n",
                r->saved_version + 1);
    for (int i = 0; i < r->n_writes;) {
        const rep_write *w = &r->body->writes[i];
        int n = 1;
        while (i + n < r->n_writes && same_call(w, &r->body->writes[i + n]))
            n++;
        if (n == 1)
            print_write(f, w);
        else
            print_run(f, w, n, r->body->writes[i + n - 1].version);
        i += n;
    }
    uint64_t lost = r->dropped + r->overflow;
    if (lost && r->kind == TN_ANOMALY_INPLACE)
        fprintf(f,
                "  at least %" PRIu64 " more write(s) between the save and the check are not "
                "listed (overwritten by later ones, or dropped)\n",
                lost);
    else if (lost)
        fprintf(f,
                "  %" PRIu64 " more write(s) to this storage were dropped or overwritten before "
                "they could be listed\n",
                lost);
}

/* A backward node's non-finite output that only carried a value saved in
 * forward: say where backward stopped, and why the report names another op. */
static void print_relay(FILE *f, const tn_anomaly_report *r) {
    if (!r->relay[0]) return;
    if (r->kind == TN_ANOMALY_NAN_FORWARD) {
        fprintf(f,
                "  relayed to backward by %s: its %dth output is nan/inf only because a tensor "
                "it saved in forward already was; backward stopped there (TN_ERR_NAN)\n",
                r->relay, r->relay_output);
        return;
    }
    fprintf(f,
            "  %s only relays it: a tensor it saved in forward was already nan/inf. The op that "
            "produced that value was not recorded (it ran without check_nan, or the value came "
            "in as data): run the forward pass with tn_set_detect_anomaly(true, true) to have it "
            "named\n",
            r->relay);
}

tn_status tn_anomaly_report_print(const tn_anomaly_report *r, FILE *f) {
    CHECK_REPORT(r, TN_ERR_INVALID_ARGUMENT);
    TN_CHECK_NULL_PTR_ST(f, "f");
    r = readable(r);
    print_headline(f, r);
    if (r->kind == TN_ANOMALY_NAN_FORWARD)
        fprintf(f, "  forward op: %s\n", r->node);
    else
        fprintf(f, "  failing node: %s\n", r->node);
    if (r->has_saved) print_saved(f, r);
    print_forward(f, r);
    print_relay(f, r);
    print_writes(f, r);
    if (ferror(f))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_anomaly_report_print: writing failed");
    return TN_OK;
}
