/* debug/numerics.c — the numerics recorder (include/tenet/numerics.h): its
 * switch, its sessions, and the records of ops, backward nodes and optimiser
 * updates, as JSON lines (docs/numerics.md).
 *
 * The engine calls in through the num_* hook entries (engine/core/hooks.h)
 * when tn__numerics_flag is set. Each thread writes its lines into a text
 * buffer of its own, with no lock: the buffers form a list that only grows
 * (a push is a CAS), and a buffer past TN_NUM_FLUSH bytes is written to the
 * file under the file's mutex (whole lines, so threads' lines never mix
 * within one). The session's end switches the flag off, waits for each
 * buffer's owner to leave it (its busy word, as the profiler's), writes what
 * is left and closes the file.
 *
 * An op's record stays open until the thread's next record: the node that
 * autograd makes for the op's output is linked after the op ends (num_link)
 * or, for the ops that make it inside, just before (kept until the op's
 * record), and its number goes into the op's record, which is how the
 * comparer matches backward nodes across runs by identity rather than by
 * order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../engine/core/hooks.h"
#include "numerics_internal.h"
#include "tenet/io.h"
#include "tenet/numerics.h"
#include "tenet/threads.h"
#include "tenet/version.h"

#define TN_NUM_FLUSH (1u << 20)
#define TN_NUM_SITE 128

typedef struct nbuf {
    struct nbuf *next; /* set before the buffer is published */
    /* seq_cst: the owner stores 1 then loads the switch; the end stores the
     * switch then loads this: either the owner sees the recorder off or the
     * end waits for it (as the profiler's tn_pbuf.busy). Stores of 0 are
     * releases, paired with the end's acquire loads. */
    _Atomic int busy;
    uint64_t session; /* the session index and seq belong to */
    int index;        /* the thread's number in the session, in order of first record */
    uint64_t seq;
    char *text;
    size_t len, cap;
    bool failed;          /* out of memory: lines were lost */
    const void *open_out; /* the output of the open op record (NULL: none open) */
    const void *link_out; /* an output linked to node link_node before its op's record */
    uint64_t link_node;
    tn_num_sites *sites;
} nbuf;

static _Atomic(nbuf *) g_bufs; /* seq_cst: see nbuf.busy */
static _Thread_local nbuf *tls_buf;
static _Thread_local bool tls_inside; /* the recorder's own work: not recorded */
static pthread_mutex_t g_session_mu = PTHREAD_MUTEX_INITIALIZER; /* begin / end */
static pthread_mutex_t g_file_mu = PTHREAD_MUTEX_INITIALIZER;    /* the file's writes */
static FILE *g_file;                                             /* under g_file_mu */
/* Read by recording threads once they saw the switch on (seq_cst load, after
 * begin's seq_cst store of the switch, which follows these writes). */
static _Atomic uint64_t g_session;
static _Atomic int g_next_index;
static char g_path[4096], g_dir[4200], g_filter[1024];
static bool g_no_sites, g_all_tensors;

/* ---- the thread's buffer ---------------------------------------------------------------- */

static nbuf *own_buffer(void) {
    if (TN_LIKELY(tls_buf != NULL)) return tls_buf;
    nbuf *b = tn__calloc_quiet(1, sizeof *b);
    if (!b) return NULL;
    nbuf *head = atomic_load_explicit(&g_bufs, memory_order_relaxed);
    do
        b->next = head;
    while (!atomic_compare_exchange_weak_explicit(&g_bufs, &head, b, memory_order_seq_cst,
                                                  memory_order_relaxed));
    return tls_buf = b;
}

/* The thread's buffer, entered for a record; NULL when the recorder is off,
 * the buffer cannot be made, or this is the recorder's own work. */
static nbuf *enter(void) {
    if (tls_inside) return NULL;
    nbuf *b = own_buffer();
    if (!b) return NULL;
    atomic_store_explicit(&b->busy, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&tn__numerics_flag, memory_order_seq_cst)) {
        atomic_store_explicit(&b->busy, 0, memory_order_release);
        return NULL;
    }
    uint64_t s = atomic_load_explicit(&g_session, memory_order_relaxed);
    if (b->session != s) { /* the first record of this session on this thread */
        b->session = s;
        b->seq = 0;
        b->len = 0;
        b->open_out = b->link_out = NULL;
        b->index = atomic_fetch_add_explicit(&g_next_index, 1, memory_order_relaxed);
    }
    tls_inside = true;
    return b;
}

static void leave(nbuf *b) {
    tls_inside = false;
    atomic_store_explicit(&b->busy, 0, memory_order_release); /* pairs with collect() */
}

static void put(nbuf *b, const char *fmt, ...) TN_PRINTF(2, 3);
static void put(nbuf *b, const char *fmt, ...) {
    for (int tries = 0; tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = vsnprintf(b->text ? b->text + b->len : NULL, b->text ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < room) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + (size_t)k + 1)
            cap *= 2;
        char *t = tn__malloc_quiet(cap);
        if (!t) {
            b->failed = true;
            return;
        }
        if (b->len) memcpy(t, b->text, b->len);
        tn__mfree(b->text);
        b->text = t;
        b->cap = cap;
    }
}

static void write_out(nbuf *b) {
    if (!b->len) return;
    pthread_mutex_lock(&g_file_mu);
    if (g_file) fwrite(b->text, 1, b->len, g_file);
    pthread_mutex_unlock(&g_file_mu);
    b->len = 0;
}

/* Ends the open op record, if any. */
static void close_open(nbuf *b) {
    if (!b->open_out) return;
    put(b, "}\n");
    b->open_out = NULL;
    if (b->len >= TN_NUM_FLUSH) write_out(b);
}

/* ---- what a record holds ---------------------------------------------------------------- */

static void put_num(nbuf *b, const char *key, double v, bool wide) {
    if (v != v)
        put(b, ",\"%s\":\"nan\"", key);
    else if (isinf(v))
        put(b, ",\"%s\":\"%sinf\"", key, v < 0 ? "-" : "");
    else
        put(b, wide ? ",\"%s\":%.17g" : ",\"%s\":%.9g", key, v);
}

static void put_tensor(nbuf *b, const tn_tensor *t) {
    if (!t) {
        put(b, "null");
        return;
    }
    put(b, "{\"shape\":[");
    for (int d = 0; d < t->ndim; d++)
        put(b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
    put(b, "],\"dtype\":\"%s\",\"device\":\"%s\"", tn_dtype_name(t->dtype),
        t->storage->device.type == TN_CPU ? "cpu" : "cuda");
    tn_num_summary s;
    tn__num_summarize(t, &s);
    if (!s.ok) {
        put(b, ",\"missing\":true}");
        return;
    }
    put_num(b, "min", s.n - s.nan ? s.min : NAN, false);
    put_num(b, "max", s.n - s.nan ? s.max : NAN, false);
    put_num(b, "mean", s.mean, true);
    put_num(b, "l2", s.l2, true);
    put_num(b, "amax", s.amax, false);
    put(b, ",\"nan\":%lld,\"inf\":%lld,\"hash\":\"%016llx\"}", (long long)s.nan, (long long)s.inf,
        (unsigned long long)s.hash);
}

static void put_list(nbuf *b, const char *key, int n, const tn_tensor *const *t) {
    put(b, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        if (i) put(b, ",");
        put_tensor(b, t[i]);
    }
    put(b, "]");
}

/* The JSON string s (names and paths: quotes and backslashes escaped). */
static void put_str(nbuf *b, const char *key, const char *s) {
    put(b, ",\"%s\":\"", key);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            put(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            put(b, "\\u%04x", *s);
        else
            put(b, "%c", *s);
    }
    put(b, "\"");
}

/* Whether the filter selects a record named `name` made at `site`. */
static bool selected(const char *name, const char *site) {
    if (g_all_tensors) return true;
    if (!g_filter[0]) return false;
    char pat[sizeof g_filter];
    for (const char *p = g_filter; *p;) {
        size_t k = strcspn(p, ",");
        if (k && k < sizeof pat) {
            memcpy(pat, p, k);
            pat[k] = '\0';
            if (strstr(name, pat) || (site && strstr(site, pat))) return true;
        }
        p += k + (p[k] == ',');
    }
    return false;
}

/* The tensors of a selected record, in PATH.tensors/T-SEQ.safetensors. */
static void save_tensors(nbuf *b, int n_in, const char *in_key, const tn_tensor *const *in,
                         int n_out, const char *out_key, const tn_tensor *const *out) {
    enum { MAX = 16 };
    char names[MAX][24], file[4400];
    const char *np[MAX];
    tn_tensor *ts[MAX];
    int n = 0;
    for (int i = 0; i < n_in + n_out && n < MAX; i++) {
        const tn_tensor *t = i < n_in ? in[i] : out[i - n_in];
        if (!t) continue;
        snprintf(names[n], sizeof names[n], "%s%d", i < n_in ? in_key : out_key,
                 i < n_in ? i : i - n_in);
        np[n] = names[n];
        ts[n++] = (tn_tensor *)t;
    }
    if (!n) return;
    mkdir(g_dir, 0777); /* EEXIST from the second record on */
    snprintf(file, sizeof file, "%s/%d-%llu.safetensors", g_dir, b->index,
             (unsigned long long)b->seq);
    tn__internal_enter(); /* the copies a save makes belong to no user scope */
    tn_status st = tn_save_tensors(file, n, np, ts);
    tn__internal_leave();
    if (st == TN_OK) {
        const char *base = strrchr(g_dir, '/');
        char rel[4400];
        snprintf(rel, sizeof rel, "%s/%d-%llu.safetensors", base ? base + 1 : g_dir, b->index,
                 (unsigned long long)b->seq);
        put_str(b, "file", rel);
    }
}

/* The record's common head: kind, thread, sequence number, name, site. */
static void head(nbuf *b, const char *kind, const char *name, char *site) {
    close_open(b);
    site[0] = '\0';
    if (!g_no_sites) tn__num_call_site(&b->sites, site, TN_NUM_SITE);
    put(b, "{\"k\":\"%s\",\"t\":%d,\"seq\":%llu", kind, b->index, (unsigned long long)++b->seq);
    put_str(b, "name", name);
    if (site[0]) put_str(b, "site", site);
}

/* ---- the hook entries ------------------------------------------------------------------- */

static void num_op(const char *op, const tn_tensor *out, int n_in, const tn_tensor *const *in) {
    nbuf *b = enter();
    if (!b) return;
    char site[TN_NUM_SITE];
    head(b, "op", op, site);
    put_list(b, "in", n_in, in);
    put_list(b, "out", 1, &out);
    if (selected(op, site)) save_tensors(b, n_in, "in", in, 1, "out", &out);
    b->open_out = out;        /* closed by the next record, after num_link */
    if (b->link_out == out) { /* the op made its node before it ended */
        put(b, ",\"node\":%llu", (unsigned long long)b->link_node);
        close_open(b);
    }
    b->link_out = NULL;
    leave(b);
}

static void num_link(const tn_tensor *out, uint64_t seq) {
    nbuf *b = enter();
    if (!b) return;
    if (b->open_out == out) {
        put(b, ",\"node\":%llu", (unsigned long long)seq);
        close_open(b);
    } else { /* the op's record is still to come: the last link before it is its output's */
        b->link_out = out;
        b->link_node = seq;
    }
    leave(b);
}

static void num_node(tn_node *n, tn_tensor *const *go, tn_tensor *const *gi) {
    nbuf *b = enter();
    if (!b) return;
    char site[TN_NUM_SITE];
    head(b, "node", n->fn->name, site);
    b->link_out = NULL;
    put(b, ",\"node\":%llu", (unsigned long long)n->seq);
    put_list(b, "in", n->n_out, (const tn_tensor *const *)go);
    put_list(b, "out", n->n_in, (const tn_tensor *const *)gi);
    if (selected(n->fn->name, NULL))
        save_tensors(b, n->n_out, "gin", (const tn_tensor *const *)go, n->n_in, "gout",
                     (const tn_tensor *const *)gi);
    put(b, "}\n");
    if (b->len >= TN_NUM_FLUSH) write_out(b);
    leave(b);
}

static void num_update(const char *name, int i, const tn_tensor *p, const tn_tensor *g) {
    nbuf *b = enter();
    if (!b) return;
    char site[TN_NUM_SITE];
    head(b, "update", name, site);
    b->link_out = NULL;
    put(b, ",\"param\":%d", i);
    put_list(b, "in", 1, &g);
    put_list(b, "out", 1, &p);
    if (selected(name, site)) save_tensors(b, 1, "grad", &g, 1, "param", &p);
    put(b, "}\n");
    if (b->len >= TN_NUM_FLUSH) write_out(b);
    leave(b);
}

/* ---- sessions ------------------------------------------------------------------------- */

tn_status tn_numerics_begin(const char *path, const tn_numerics_options *options) {
    if (!path || !*path || strlen(path) >= sizeof g_path)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_numerics_begin: path is NULL, empty or too long");
    const char *filter = options && options->tensors ? options->tensors : "";
    if (strlen(filter) >= sizeof g_filter)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_numerics_begin: the tensor filter is too long");
    pthread_mutex_lock(&g_session_mu);
    if (atomic_load_explicit(&tn__numerics_flag, memory_order_relaxed)) {
        pthread_mutex_unlock(&g_session_mu);
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_numerics_begin: the recorder is running");
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        pthread_mutex_unlock(&g_session_mu);
        return tn__error(TN_ERR_IO, "tn_numerics_begin: cannot open '%s' for writing", path);
    }
    strcpy(g_path, path);
    snprintf(g_dir, sizeof g_dir, "%s.tensors", path);
    g_all_tensors = !strcmp(filter, "all");
    strcpy(g_filter, g_all_tensors ? "" : filter);
    g_no_sites = options && options->no_sites;
    fprintf(f,
            "{\"format\":\"tenet-numerics\",\"version\":%d,\"producer\":\"tenet %s\","
            "\"threads\":%d}\n",
            TN_NUM_FORMAT_VERSION, tn_version_string(), tn_get_num_threads());
    pthread_mutex_lock(&g_file_mu);
    g_file = f;
    pthread_mutex_unlock(&g_file_mu);
    atomic_fetch_add_explicit(&g_session, 1, memory_order_relaxed);
    atomic_store_explicit(&g_next_index, 0, memory_order_relaxed);
    /* seq_cst: pairs with the seq_cst load in enter(): a thread that sees the
     * recorder on sees the session's settings above */
    atomic_store_explicit(&tn__numerics_flag, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&g_session_mu);
    return TN_OK;
}

/* Off, then every buffer left by its owner and written out. */
static void collect(void) {
    atomic_store_explicit(&tn__numerics_flag, 0, memory_order_seq_cst); /* see nbuf.busy */
    uint64_t s = atomic_load_explicit(&g_session, memory_order_relaxed);
    for (nbuf *b = atomic_load_explicit(&g_bufs, memory_order_seq_cst); b; b = b->next) {
        while (atomic_load_explicit(&b->busy, memory_order_acquire)) /* pairs with leave() */
            sched_yield();
        if (b->session != s) continue;
        close_open(b);
        write_out(b);
        if (b->failed) fprintf(stderr, "tenet: numerics: out of memory, records were lost\n");
        b->failed = false;
    }
}

tn_status tn_numerics_end(void) {
    pthread_mutex_lock(&g_session_mu);
    if (!atomic_load_explicit(&tn__numerics_flag, memory_order_relaxed)) {
        pthread_mutex_unlock(&g_session_mu);
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_numerics_end: the recorder is not running");
    }
    collect();
    pthread_mutex_lock(&g_file_mu);
    FILE *f = g_file;
    g_file = NULL;
    pthread_mutex_unlock(&g_file_mu);
    bool bad = ferror(f) != 0;
    bad = fclose(f) != 0 || bad;
    pthread_mutex_unlock(&g_session_mu);
    if (bad) return tn__error(TN_ERR_IO, "tn_numerics_end: cannot write '%s'", g_path);
    return TN_OK;
}

bool tn_numerics_enabled(void) { return tn__numerics_on(); }

/* ---- TENET_NUMERICS=path: from load to exit -------------------------------------------- */

static void env_end(void) {
    if (tn_numerics_end() < 0) fprintf(stderr, "tenet: TENET_NUMERICS: %s\n", tn_last_error());
}

__attribute__((constructor)) static void install(void) {
    tn__hooks.num_op = num_op;
    tn__hooks.num_link = num_link;
    tn__hooks.num_node = num_node;
    tn__hooks.num_update = num_update;
    const char *p = getenv("TENET_NUMERICS");
    if (!p || !*p) return;
    tn_numerics_options o = {.tensors = getenv("TENET_NUMERICS_TENSORS")};
    if (tn_numerics_begin(p, &o) == TN_OK)
        atexit(env_end);
    else
        fprintf(stderr, "tenet: TENET_NUMERICS: %s\n", tn_last_error());
}
