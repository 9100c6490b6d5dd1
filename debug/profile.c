/* debug/profile.c — the timeline profiler's recorder and its switch
 * (include/tenet/profile.h).
 *
 * The engine calls in through the prof_* hook entries (engine/core/hooks.h)
 * when tn__profile_flag is set: an op's span when it ends (it noted its start
 * stamp), a backward node's span when it ends, and the link from an output to
 * the node made its grad_fn (the flow from the forward op to the node).
 *
 * Each thread appends to a buffer of its own (profile_internal.h) with no
 * lock: the buffers form a list that only grows (a push is a CAS), and the
 * session's end walks it once the switch is off, waiting for each buffer's
 * owner to leave it (its busy word). Begin and end take a mutex (not a hot
 * path); recording never does.
 */
#define _GNU_SOURCE /* getpid */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../engine/core/hooks.h"
#include "profile_internal.h"
#include "tenet/profile.h"

/* The list of every thread's buffer. seq_cst: a push is ordered before its
 * owner's load of the switch, and the end's walk after its store of the
 * switch to 0 (see tn_pbuf.busy), so a buffer whose owner recorded is seen. */
static _Atomic(tn_pbuf *) g_bufs;
static _Thread_local tn_pbuf *tls_buf;
static pthread_mutex_t g_session = PTHREAD_MUTEX_INITIALIZER; /* begin / end */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static tn_pbuf *own_buffer(void) {
    if (TN_LIKELY(tls_buf != NULL)) return tls_buf;
    tn_pbuf *b = tn__calloc_quiet(1, sizeof *b);
    if (!b) return NULL;
    b->tid = tn__os_tid();
    b->last_live = -1;
    tn_pbuf *head = atomic_load_explicit(&g_bufs, memory_order_relaxed);
    do
        b->next = head; /* seq_cst: see g_bufs */
    while (!atomic_compare_exchange_weak_explicit(&g_bufs, &head, b, memory_order_seq_cst,
                                                  memory_order_relaxed));
    return tls_buf = b;
}

/* Enters the thread's buffer for recording: NULL when the profiler is off
 * (or the buffer cannot be made). Leave with leave(). */
static tn_pbuf *enter(void) {
    tn_pbuf *b = own_buffer();
    if (!b) return NULL;
    atomic_store_explicit(&b->busy, 1, memory_order_seq_cst); /* see tn_pbuf.busy */
    if (!atomic_load_explicit(&tn__profile_flag, memory_order_seq_cst)) {
        atomic_store_explicit(&b->busy, 0, memory_order_release);
        return NULL;
    }
    return b;
}

/* release: pairs with the end's acquire load of busy; it sees what we wrote. */
static void leave(tn_pbuf *b) { atomic_store_explicit(&b->busy, 0, memory_order_release); }

static tn_pev *append(tn_pbuf *b) {
    if (!b->tail || b->tail->n == TN_PCHUNK) {
        tn_pchunk *c = tn__malloc_quiet(sizeof *c);
        if (!c) {
            b->dropped++;
            return NULL;
        }
        c->next = NULL;
        c->n = 0;
        if (b->tail)
            b->tail->next = c;
        else
            b->head = c;
        b->tail = c;
        if (b->head == c) tn__thread_name(b->tname); /* the name as of the session's start */
    }
    tn_pev *e = &b->tail->ev[b->tail->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static void set_name(tn_pev *e, const char *name) {
    size_t n = strnlen(name ? name : "?", TN_PEV_NAME - 1);
    memcpy(e->name, name ? name : "?", n);
    e->name[n] = '\0';
}

/* The live-bytes counter, when it moved since this thread last said it. */
static void sample_memory(tn_pbuf *b, double ts) {
    int64_t live = tn__bytes_live();
    if (live == b->last_live) return;
    tn_pev *e = append(b);
    if (!e) return;
    e->kind = TN_PEV_COUNTER;
    e->ts = ts;
    e->bytes = b->last_live = live;
}

static int64_t tensor_bytes(const tn_tensor *t) {
    return t ? tn__numel(t->ndim, t->shape) * (int64_t)tn__dtype_sizes[t->dtype] : 0;
}

/* 2·M·N·K of a product: out has M·N elements (batched), K is a's last dim. */
static int64_t op_flops(const char *op, const tn_tensor *out, int n_in,
                        const tn_tensor *const *in) {
    bool product = !strcmp(op, "matmul") || !strcmp(op, "linear");
    if (!product || n_in < 1 || !in[0] || in[0]->ndim < 1) return -1;
    return 2 * tn__numel(out->ndim, out->shape) * in[0]->shape[in[0]->ndim - 1];
}

/* Room for n dims in b's shape blocks, or NULL (out of memory). */
static int64_t *shape_room(tn_pbuf *b, int n) {
    if (!b->shapes || b->shapes->n + n > TN_PSHAPES) {
        tn_pshapes *s = tn__malloc_quiet(sizeof *s);
        if (!s) return NULL;
        s->next = b->shapes;
        s->n = 0;
        b->shapes = s;
    }
    int64_t *p = b->shapes->v + b->shapes->n;
    b->shapes->n += n;
    return p;
}

/* The first TN_PEV_MAX_IN inputs' shapes (none when out of memory: the
 * span keeps the rest). */
static void record_shapes(tn_pbuf *b, tn_pev *e, int n_in, const tn_tensor *const *in) {
    int k = n_in < TN_PEV_MAX_IN ? n_in : TN_PEV_MAX_IN, total = 0;
    for (int i = 0; i < k; i++)
        total += in[i] ? in[i]->ndim : 0;
    int64_t *p = shape_room(b, total);
    if (!p) return;
    e->dims = p;
    for (int i = 0; i < k; i++) {
        if (!in[i]) continue; /* an absent input: an empty shape */
        e->ndim[i] = (int8_t)in[i]->ndim;
        memcpy(p, in[i]->shape, (size_t)in[i]->ndim * sizeof *p);
        p += in[i]->ndim;
    }
    e->n_in = (uint8_t)k;
}

/* A span's event, or NULL (out of memory: counted as dropped). */
static tn_pev *span(tn_pbuf *b, tn_pev_kind kind, const char *name, double t0, double t1) {
    tn_pev *e = append(b);
    if (!e) return NULL;
    e->kind = (uint8_t)kind;
    set_name(e, name);
    e->ts = t0;
    e->dur = t1 - t0;
    e->flops = -1;
    return e;
}

static void prof_op(const char *op, double t0, const tn_tensor *out, int n_in,
                    const tn_tensor *const *in) {
    double t1 = now_us();
    tn_pbuf *b = enter();
    if (!b) return;
    tn_pev *e = span(b, TN_PEV_OP, op, t0, t1);
    if (e) {
        e->dtype = (int8_t)out->dtype;
        e->bytes = tensor_bytes(out);
        e->flops = op_flops(op, out, n_in, in);
        for (int i = 0; i < n_in; i++)
            e->bytes += tensor_bytes(in[i]);
        record_shapes(b, e, n_in, in);
        if (b->pending_out == out) e->flow = b->pending_flow; /* linked before its span ended */
        b->pending_out = NULL;
        b->last_op = e;
        b->last_out = out;
    }
    sample_memory(b, t1);
    leave(b);
}

static void prof_node(const char *name, uint64_t seq, double t0) {
    double t1 = now_us();
    tn_pbuf *b = enter();
    if (!b) return;
    tn_pev *e = span(b, TN_PEV_NODE, name, t0, t1);
    if (e) e->flow = seq + 1;
    sample_memory(b, t1);
    leave(b);
}

static void prof_omp(const char *region, double t0, int team, int member) {
    double t1 = now_us();
    tn_pbuf *b = enter();
    if (!b) return;
    tn_pev *e = span(b, TN_PEV_OMP, region, t0, t1);
    if (e) e->team = team, e->member = member;
    leave(b);
}

static void prof_link(const tn_tensor *out, uint64_t seq) {
    tn_pbuf *b = enter();
    if (!b) return;
    if (b->last_op && b->last_out == out && !b->last_op->flow) {
        b->last_op->flow = seq + 1;
    } else {
        b->pending_out = out;
        b->pending_flow = seq + 1;
    }
    b->last_out = NULL;
    leave(b);
}

/* ---- sessions ------------------------------------------------------------------------- */

static bool g_ended_once; /* under g_session: a table exists */

/* Off, then every buffer left by its owner: the end owns them all. */
static tn_pbuf *collect(void) {
    atomic_store_explicit(&tn__profile_flag, 0, memory_order_seq_cst);   /* see tn_pbuf.busy */
    tn_pbuf *bufs = atomic_load_explicit(&g_bufs, memory_order_seq_cst); /* see g_bufs */
    for (tn_pbuf *b = bufs; b; b = b->next)
        while (atomic_load_explicit(&b->busy, memory_order_acquire)) /* pairs with leave() */
            sched_yield();
    return bufs;
}

static void empty(tn_pbuf *bufs) {
    for (tn_pbuf *b = bufs; b; b = b->next) {
        for (tn_pchunk *c = b->head, *next; c; c = next) {
            next = c->next;
            tn__mfree(c);
        }
        for (tn_pshapes *p = b->shapes, *next; p; p = next) {
            next = p->next;
            tn__mfree(p);
        }
        b->shapes = NULL;
        b->head = b->tail = NULL;
        b->dropped = 0;
        b->last_live = -1;
        b->last_op = NULL;
        b->last_out = b->pending_out = NULL;
    }
}

tn_status tn_profile_begin(void) {
    pthread_mutex_lock(&g_session);
    bool on = atomic_load_explicit(&tn__profile_flag, memory_order_relaxed);
    /* seq_cst (a release at least): pairs with the seq_cst load in enter(),
     * so an owner that sees the profiler on sees its buffer as the last end
     * emptied it (under this mutex) */
    if (!on) atomic_store_explicit(&tn__profile_flag, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&g_session);
    if (on) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_profile_begin: the profiler is running");
    return TN_OK;
}

static tn_status write_file(const char *path, const tn_pbuf *bufs) {
    FILE *f = fopen(path, "w");
    if (!f) return tn__error(TN_ERR_IO, "tn_profile_end: cannot open '%s' for writing", path);
    tn_status st = tn__prof_write_json(f, bufs, (int)getpid());
    if (fclose(f) != 0 && st == TN_OK)
        st = tn__error(TN_ERR_IO, "tn_profile_end: cannot write '%s'", path);
    return st;
}

tn_status tn_profile_end(const char *path) {
    pthread_mutex_lock(&g_session);
    if (!atomic_load_explicit(&tn__profile_flag, memory_order_relaxed)) {
        pthread_mutex_unlock(&g_session);
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_profile_end: the profiler is not running");
    }
    tn_pbuf *bufs = collect();
    tn_status st = tn__prof_table_build(bufs);
    g_ended_once = st == TN_OK;
    tn_status wst = path ? write_file(path, bufs) : TN_OK;
    empty(bufs);
    pthread_mutex_unlock(&g_session);
    return wst < 0 ? wst : st;
}

bool tn_profile_enabled(void) { return tn__profile_on(); }

tn_status tn_profile_summary(FILE *f, int top) {
    if (!f) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_profile_summary: f is NULL");
    pthread_mutex_lock(&g_session);
    tn_status st = g_ended_once ? tn__prof_summary_print(f, top)
                                : tn__error(TN_ERR_INVALID_ARGUMENT,
                                            "tn_profile_summary: no profile has ended yet");
    pthread_mutex_unlock(&g_session);
    return st;
}

/* ---- TENET_PROFILE=path: from load to exit -------------------------------------------- */

static char g_env_path[4096];

static void env_end(void) {
    if (tn_profile_end(g_env_path) < 0)
        fprintf(stderr, "tenet: TENET_PROFILE: %s\n", tn_last_error());
}

/* At exit, after env_end: the last table. The buffers stay reachable from
 * g_bufs (threads still running may hold theirs). */
__attribute__((destructor)) static void release_table(void) {
    pthread_mutex_lock(&g_session);
    tn__prof_table_free();
    g_ended_once = false;
    pthread_mutex_unlock(&g_session);
}

__attribute__((constructor)) static void install(void) {
    tn__hooks.prof_now = now_us;
    tn__hooks.prof_op = prof_op;
    tn__hooks.prof_node = prof_node;
    tn__hooks.prof_link = prof_link;
    tn__hooks.prof_omp = prof_omp;
    const char *p = getenv("TENET_PROFILE");
    if (!p || !*p || strlen(p) >= sizeof g_env_path) return;
    strcpy(g_env_path, p);
    if (tn_profile_begin() == TN_OK) atexit(env_end);
}
