/* The tensor race detector (include/tenet/threads.h; internals in debug/race.h).
 *
 * Per storage, made lazily while the detector is on: TN_RACE_SLOTS slots,
 * each naming one in-flight access by its state word
 *     0                    free
 *     id << 2              claimed: its range is being written
 *     id << 2 | ACTIVE     in flight (| WRITE for a write)
 * with the accessed byte range and the accessing thread's record (kind of
 * kernel and call stack). An access id is (thread number << 40 | sequence),
 * unique, so a slot's word never takes the same value twice (no ABA).
 *
 * Detection is Dekker's pattern: each access makes its slots ACTIVE with
 * seq_cst stores, then scans the other slots of the same storages with
 * seq_cst loads. For two overlapping accesses, one of the two stores comes
 * first in the single seq_cst order, so at least one of the two scans sees
 * the other: no overlap in time goes unseen by both. When both see it, the
 * pair is reported once: the reporter must first move the `reported` word of
 * the record holding the lower of the two ids to that id (CAS), which only
 * one of them can do.
 *
 * Reading another thread's record (its stack) is a seqlock on the record's
 * id: the owner sets id to 0, rewrites the fields with release stores, then
 * stores the new id; a reader loads the fields with acquire loads and keeps
 * its copy only if it read the same id before and after. (Release/acquire
 * on the fields instead of fences: ThreadSanitizer ignores fences, and on
 * x86 these orders cost nothing.) The slots' ranges are read the same way.
 * Every shared field is atomic, so ThreadSanitizer sees no race here.
 *
 * Records are per thread, reused after the thread exits, never freed (a
 * reader may still be copying one): memory stays bounded by the largest
 * number of threads alive at once. The only locks: pthread_once for the
 * thread-exit key, and g_report_lock while a report is formatted and printed
 * (report time only).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>

#include "debug_internal.h"
#include "race.h"

#define TN_RACE_SLOTS 16
#define ST_ACTIVE 1u
#define ST_WRITE 2u
#define TID_SHIFT 40
#define TID_MASK ((UINT64_C(1) << 22) - 1)
#define SEQ_MASK ((UINT64_C(1) << TID_SHIFT) - 1)
#define REPORT_MAX 8192
#define USER_FRAMES 8

typedef struct tn_race_rec {
    _Atomic uint64_t id;       /* access these fields describe; 0 while rewritten */
    _Atomic uint64_t reported; /* an access of this record already reported */
    _Atomic(const char *) kind;
    _Atomic(const char *) op; /* tn__race_op's name, or NULL */
    _Atomic uint64_t os_tid;  /* the accessing thread, as the OS and its tools name it */
    _Atomic uint64_t name[TN_THREAD_NAME / 8];
    _Atomic int n;
    _Atomic(void *) pc[TN_BT_MAX];
    _Atomic bool in_use;
    struct tn_race_rec *next; /* immutable once the record is published */
} tn_race_rec;

typedef struct tn_race_slot {
    _Atomic uint64_t state;
    _Atomic uintptr_t lo, hi; /* bytes [lo, hi) */
    _Atomic(tn_race_rec *) rec;
} tn_race_slot;

struct tn_race_state {
    alignas(TN_CACHELINE) tn_race_slot slot[TN_RACE_SLOTS];
};

/* Bumped at each switch-on; a note carries the value it saw, so a note left
 * unconsumed when the detector went off is never applied after it comes back
 * on. Relaxed: a plain counter, no data is published with it. */
static _Atomic uint64_t g_gen;
static _Atomic uint64_t g_reports;  /* relaxed: a statistic */
static _Atomic uint64_t g_overflow; /* accesses not tracked: no free slot */
static atomic_flag g_overflow_warned = ATOMIC_FLAG_INIT;
static _Atomic(FILE *) g_stream; /* NULL: stderr */
static _Atomic bool g_quiet;

static pthread_mutex_t g_report_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last[REPORT_MAX]; /* under g_report_lock */
static size_t g_last_len;
/* Each pair of call sites is printed once, then counted (repeat.c). */
static tn_repeats g_repeats = TN_REPEATS_INIT;

/* Where reports go now; NULL: nowhere. */
static FILE *report_stream(void) {
    if (atomic_load_explicit(&g_quiet, memory_order_relaxed)) return NULL;
    FILE *f = atomic_load_explicit(&g_stream, memory_order_relaxed);
    return f ? f : stderr;
}

/* ---- the switch --------------------------------------------------------------------- */

void tn_set_detect_races(bool enabled) {
    if (enabled) {
        /* libunwind initialises itself lazily behind a plain flag: do it
         * here, usually before the threads that will capture exist. */
        tn_backtrace warm;
        tn__bt_capture(&warm);
        atomic_fetch_add_explicit(&g_gen, 1, memory_order_relaxed);
    }
    atomic_store_explicit(&tn__race_flag, enabled ? 1u : 0u, memory_order_relaxed);
    if (!enabled) tn__repeat_flush(&g_repeats, report_stream(), false);
}

bool tn_is_detect_races_enabled(void) { return tn__races_on(); }

uint64_t tn_race_reports(void) { return atomic_load_explicit(&g_reports, memory_order_relaxed); }

void tn_race_reports_reset(void) {
    tn__repeat_flush(&g_repeats, report_stream(), true);
    pthread_mutex_lock(&g_report_lock);
    atomic_store_explicit(&g_reports, 0, memory_order_relaxed);
    g_last_len = 0;
    g_last[0] = '\0';
    pthread_mutex_unlock(&g_report_lock);
}

void tn_set_race_report_stream(FILE *f) {
    atomic_store_explicit(&g_stream, f, memory_order_relaxed);
    atomic_store_explicit(&g_quiet, f == NULL, memory_order_relaxed);
}

size_t tn_race_last_report(char *buf, size_t size) {
    pthread_mutex_lock(&g_report_lock);
    size_t n = g_last_len;
    if (buf && size) {
        size_t c = n < size - 1 ? n : size - 1;
        memcpy(buf, g_last, c);
        buf[c] = '\0';
    }
    pthread_mutex_unlock(&g_report_lock);
    return n;
}

/* The counts of repeats not summarised yet (the stream is valid while the
 * detector is on). */
__attribute__((destructor)) static void race_at_exit(void) {
    if (tn__races_on()) tn__repeat_flush(&g_repeats, report_stream(), false);
}

__attribute__((constructor)) static void race_from_env(void) {
    const char *e = getenv("TENET_DETECT_RACES");
    if (e && strcmp(e, "1") == 0) tn_set_detect_races(true);
}

/* ---- per-thread records ------------------------------------------------------------- */

static _Atomic(tn_race_rec *) g_recs; /* every record ever made (a stack, never popped) */
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static bool g_key_ok;
static _Thread_local tn_race_rec *tls_rec;
static _Thread_local uint64_t tls_seq;
static _Thread_local bool tls_in_flight;
static _Thread_local const char *tls_op; /* tn__race_op, until the next begin */

static void rec_on_thread_exit(void *p) {
    /* release: the next owner (acquire CAS below) sees our last stores. */
    atomic_store_explicit(&((tn_race_rec *)p)->in_use, false, memory_order_release);
}

static void make_key(void) { g_key_ok = pthread_key_create(&g_key, rec_on_thread_exit) == 0; }

static tn_race_rec *my_rec(void) {
    if (TN_LIKELY(tls_rec)) return tls_rec;
    pthread_once(&g_key_once, make_key);
    if (!g_key_ok) return NULL;
    /* acquire: pairs with the release push below, so `next` is readable. */
    tn_race_rec *r = atomic_load_explicit(&g_recs, memory_order_acquire);
    for (; r; r = r->next) {
        bool used = false;
        if (!atomic_load_explicit(&r->in_use, memory_order_relaxed) &&
            atomic_compare_exchange_strong_explicit(&r->in_use, &used, true, memory_order_acquire,
                                                    memory_order_relaxed))
            break;
    }
    if (!r) {
        r = tn__calloc_quiet(1, sizeof *r);
        if (!r) return NULL;
        atomic_init(&r->in_use, true);
        tn_race_rec *head = atomic_load_explicit(&g_recs, memory_order_relaxed);
        do
            r->next = head; /* release: publishes r's initialised fields */
        while (!atomic_compare_exchange_weak_explicit(&g_recs, &head, r, memory_order_release,
                                                      memory_order_relaxed));
    }
    if (pthread_setspecific(g_key, r) != 0) {
        atomic_store_explicit(&r->in_use, false, memory_order_release);
        return NULL;
    }
    return tls_rec = r;
}

/* Owner side of the record's seqlock. */
static void rec_fill(tn_race_rec *r, uint64_t id, const char *kind, const char *op,
                     const tn_backtrace *bt) {
    char name[TN_THREAD_NAME];
    tn__thread_name(name); /* now: the thread may have been renamed since its last access */
    atomic_store_explicit(&r->id, 0, memory_order_relaxed);
    /* release: a reader that sees any store below (acquire) also sees
     * id == 0 on its second read of id, and drops its copy. */
    atomic_store_explicit(&r->kind, kind, memory_order_release);
    atomic_store_explicit(&r->op, op, memory_order_release);
    atomic_store_explicit(&r->os_tid, tn__os_tid(), memory_order_release);
    for (int i = 0; i < TN_THREAD_NAME / 8; i++) {
        uint64_t word;
        memcpy(&word, name + 8 * i, 8);
        atomic_store_explicit(&r->name[i], word, memory_order_release);
    }
    atomic_store_explicit(&r->n, bt->n, memory_order_release);
    for (int i = 0; i < bt->n; i++)
        atomic_store_explicit(&r->pc[i], bt->pc[i], memory_order_release);
    /* release: pairs with the reader's first (acquire) load of id. */
    atomic_store_explicit(&r->id, id, memory_order_release);
}

typedef struct snap {
    bool ok;        /* kind, op and bt are access id's */
    bool thread_ok; /* os_tid and name are its thread's */
    uint64_t id, os_tid;
    const char *kind, *op;
    char name[TN_THREAD_NAME];
    tn_backtrace bt;
} snap;

/* Reader side: a consistent copy of access `id`'s fields, or ok = false
 * when the owner has moved on to another access. The thread's identity is
 * kept (thread_ok) when the copy is consistent and of the same thread's
 * later access: the record is another thread's only after the owner exited. */
static snap rec_read(const tn_race_rec *r, uint64_t id) {
    snap s = {.ok = false, .thread_ok = false, .id = id};
    if (!r) return s;
    uint64_t before = atomic_load_explicit(&r->id, memory_order_acquire);
    if (before == 0 || before >> TID_SHIFT != id >> TID_SHIFT) return s;
    /* acquire: pairs with the owner's release stores in rec_fill. */
    s.kind = atomic_load_explicit(&r->kind, memory_order_acquire);
    s.op = atomic_load_explicit(&r->op, memory_order_acquire);
    s.os_tid = atomic_load_explicit(&r->os_tid, memory_order_acquire);
    for (int i = 0; i < TN_THREAD_NAME / 8; i++) {
        uint64_t word = atomic_load_explicit(&r->name[i], memory_order_acquire);
        memcpy(s.name + 8 * i, &word, 8);
    }
    s.name[TN_THREAD_NAME - 1] = '\0';
    s.bt.n = atomic_load_explicit(&r->n, memory_order_acquire);
    if (s.bt.n < 0 || s.bt.n > TN_BT_MAX) s.bt.n = 0;
    for (int i = 0; i < s.bt.n; i++)
        s.bt.pc[i] = atomic_load_explicit(&r->pc[i], memory_order_acquire);
    if (atomic_load_explicit(&r->id, memory_order_relaxed) != before) return s;
    s.thread_ok = true;
    s.ok = before == id;
    return s;
}

/* ---- notes: the operands of the next kernel on this thread --------------------------- */

static _Thread_local struct {
    const void *key;
    uint64_t gen;
    int n;
    tn_storage *s[TN_RACE_MAX_OPS];
    uintptr_t lo[TN_RACE_MAX_OPS], hi[TN_RACE_MAX_OPS];
    bool write[TN_RACE_MAX_OPS];
} tls_note;

/* Bytes [lo, hi) spanned by t's elements (any strides, negative included). */
static void extent(const tn_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    int64_t es = (int64_t)tn__dtype_sizes[t->dtype], a = 0, b = es;
    for (int d = 0; d < t->ndim; d++) {
        int64_t e = (t->shape[d] - 1) * t->stride[d] * es;
        if (e < 0)
            a += e;
        else
            b += e;
    }
    uintptr_t p = (uintptr_t)tn__ptr(t);
    *lo = p + (uintptr_t)a; /* a <= 0: modular arithmetic subtracts */
    *hi = p + (uintptr_t)b;
}

void tn__race_note_slow(const void *key, int nops, const tn_tensor *const *ops,
                        unsigned write_mask) {
    tls_note.key = key;
    tls_note.gen = atomic_load_explicit(&g_gen, memory_order_relaxed);
    int n = 0;
    for (int k = 0; k < nops && k < TN_RACE_MAX_OPS; k++) {
        const tn_tensor *t = ops[k];
        if (!t || !t->storage || t->storage->device.type != TN_CPU ||
            tn__numel(t->ndim, t->shape) == 0)
            continue;
        uintptr_t lo, hi;
        extent(t, &lo, &hi);
        int j = 0;
        while (j < n && tls_note.s[j] != t->storage)
            j++;
        if (j == n) { /* a new storage */
            tls_note.s[n] = t->storage;
            tls_note.lo[n] = lo;
            tls_note.hi[n] = hi;
            tls_note.write[n++] = (write_mask >> k) & 1u;
            continue;
        }
        /* the same storage as an earlier operand (in place): one access */
        if (lo < tls_note.lo[j]) tls_note.lo[j] = lo;
        if (hi > tls_note.hi[j]) tls_note.hi[j] = hi;
        tls_note.write[j] |= (write_mask >> k) & 1u;
    }
    tls_note.n = n;
}

/* ---- per-storage state ------------------------------------------------------------- */

static struct tn_race_state *state_of(tn_storage *s) {
    /* acquire: pairs with the acq_rel CAS that installed it (zeroed slots). */
    struct tn_race_state *st = atomic_load_explicit(&s->race, memory_order_acquire);
    if (TN_LIKELY(st)) return st;
    struct tn_race_state *mine = tn__aligned_quiet(TN_CACHELINE, sizeof *mine);
    if (!mine) return NULL;
    memset(mine, 0, sizeof *mine);
    if (atomic_compare_exchange_strong_explicit(&s->race, &st, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    tn__mfree(mine);
    return st;
}

void tn__race_free(tn_storage *s) {
    tn__mfree(atomic_load_explicit(&s->race, memory_order_relaxed));
}

static tn_race_slot *claim(struct tn_race_state *st, uint64_t id, uintptr_t lo, uintptr_t hi,
                           tn_race_rec *rec) {
    for (int i = 0; i < TN_RACE_SLOTS; i++) {
        tn_race_slot *sl = &st->slot[i];
        uint64_t free_word = 0;
        if (atomic_load_explicit(&sl->state, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(&sl->state, &free_word, id << 2,
                                                     memory_order_relaxed, memory_order_relaxed))
            continue;
        /* release: a scanner that reads a value stored below (acquire) also
         * sees our claim on its re-check of the state word (seqlock). */
        atomic_store_explicit(&sl->lo, lo, memory_order_release);
        atomic_store_explicit(&sl->hi, hi, memory_order_release);
        atomic_store_explicit(&sl->rec, rec, memory_order_release);
        return sl;
    }
    atomic_fetch_add_explicit(&g_overflow, 1, memory_order_relaxed);
    if (!atomic_flag_test_and_set_explicit(&g_overflow_warned, memory_order_relaxed))
        tn__warn("race detector: more than %d kernels in flight on one storage; the excess "
                 "ones are not checked",
                 TN_RACE_SLOTS);
    return NULL;
}

/* ---- reports ------------------------------------------------------------------------ */

typedef struct side {
    bool write;
    const char *how; /* "" or " (still running)" */
    snap s;
} side;

/* The op of a public entry point's symbol ("tn_add_scalar_.part.0" ->
 * "add_scalar_") into buf; false for anything else. */
static bool public_op(const char *sym, char *buf, size_t n) {
    if (!sym || strncmp(sym, "tn_", 3) != 0 || strncmp(sym, "tn__", 4) == 0) return false;
    size_t len = strcspn(sym + 3, "."); /* gcc's clones: .part.N, .constprop.N, .isra.N */
    if (len == 0 || len >= n) return false;
    memcpy(buf, sym + 3, len);
    buf[len] = '\0';
    return true;
}

/* Appends one side: its thread, its op and the user's frames (from the
 * first frame outside tenet on). The op is named as the user called it:
 * the outermost public entry point on the stack, by the symbol of the frame
 * (the library is built without sibling calls, so an entry point that ends
 * by calling its driver keeps its frame: tn_add_scalar_, not unary_). The
 * outermost engine function stands in when no public frame is known (the
 * user's frame #0 is the call itself in any case). */
static void put_side(char *buf, size_t *len, const side *sd, char *site, size_t site_n) {
    size_t n = *len;
#define PUT(...)                                                                                   \
    (n += (size_t)snprintf(buf + n, n < REPORT_MAX ? REPORT_MAX - n : 0, __VA_ARGS__),             \
     n = n < REPORT_MAX ? n : REPORT_MAX - 1)
    tn_frame f[TN_BT_MAX];
    char names[TN_BT_MAX][256], sym[256], op[128] = "";
    int nf = sd->s.ok ? sd->s.bt.n : 0, first_user = -1;
    const char *outer = NULL;
    for (int i = 0; i < nf; i++) {
        tn__symbolize((char *)sd->s.bt.pc[i] - 1, &f[i], names[i], sizeof names[i]);
        if (first_user >= 0) continue;
        if (!tn__frame_is_engine(&f[i])) {
            first_user = i;
            continue;
        }
        if (tn__symbol_name((char *)sd->s.bt.pc[i] - 1, sym, sizeof sym))
            public_op(sym, op, sizeof op); /* outermost so far */
        if (f[i].function) outer = f[i].function;
    }
    char who[64] = "thread ?";
    if (sd->s.thread_ok) tn__format_thread(who, sizeof who, sd->s.os_tid, sd->s.name);
    const char *opname = sd->s.ok && sd->s.op ? sd->s.op : *op ? op : outer ? outer : "?";
    PUT("  %s by %s in %s [%s kernel]%s%s\n", sd->write ? "write" : "read", who, opname,
        sd->s.ok && sd->s.kind ? sd->s.kind : "?", sd->how,
        sd->s.ok ? ", called from:" : ": it ended before its stack could be read");
    int from = first_user >= 0 ? first_user : 0,
        to = nf > from ? tn__last_user_frame(f, from, nf) : nf;
    if (from < to && f[from].function && f[from].file && f[from].line > 0)
        snprintf(site, site_n, "%s %s (%s:%d)", sd->write ? "write" : "read", opname,
                 tn__short_path(f[from].file), f[from].line);
    else
        snprintf(site, site_n, "%s %s", sd->write ? "write" : "read", opname);
    for (int i = from, k = 0; i < to && k < USER_FRAMES; i++, k++) {
        if (f[i].function && f[i].file && f[i].line > 0)
            PUT("    #%d %s (%s:%d)\n", k, f[i].function, tn__short_path(f[i].file), f[i].line);
        else if (f[i].function)
            PUT("    #%d %s (%s)\n", k, f[i].function, f[i].file ? f[i].file : "?");
        else
            PUT("    #%d %p\n", k, sd->s.bt.pc[i]);
    }
#undef PUT
    *len = n;
}

/* The pair's call sites, whichever side reports: both stacks as captured
 * (the same call site gives the same program counters), either order. */
static uint64_t pair_key(const side *a, const side *b) {
    uint64_t h[2];
    const side *sd[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        h[i] = tn__repeat_hash(TN_HASH_SEED, &sd[i]->write, sizeof sd[i]->write);
        if (sd[i]->s.ok)
            h[i] = tn__repeat_hash(h[i], sd[i]->s.bt.pc, (size_t)sd[i]->s.bt.n * sizeof(void *));
    }
    return h[0] < h[1] ? tn__repeat_hash(h[0], &h[1], sizeof h[1])
                       : tn__repeat_hash(h[1], &h[0], sizeof h[0]);
}

static void report(const tn_storage *s, uintptr_t lo, uintptr_t hi, const side *me,
                   const side *peer) {
    atomic_fetch_add_explicit(&g_reports, 1, memory_order_relaxed);
    uint64_t key = pair_key(me, peer);
    pthread_mutex_lock(&g_report_lock);
    /* a pair seen before: counted, its summary printed when due */
    if (!tn__repeat_note(&g_repeats, key, report_stream())) {
        pthread_mutex_unlock(&g_report_lock);
        return;
    }
    size_t n = (size_t)snprintf(
        g_last, REPORT_MAX,
        "tenet: race detected (TENET_DETECT_RACES): a %s overlaps another thread's %s of the "
        "same tensor memory (bytes %llu..%llu of storage %p)\n",
        me->write ? "write" : "read", peer->write ? "write" : "read",
        (unsigned long long)(lo - (uintptr_t)s->data),
        (unsigned long long)(hi - (uintptr_t)s->data), (const void *)s);
    if (n >= REPORT_MAX) n = REPORT_MAX - 1;
    char site[2][300], label[sizeof site + 64];
    put_side(g_last, &n, me, site[0], sizeof site[0]);
    put_side(g_last, &n, peer, site[1], sizeof site[1]);
    g_last_len = n;
    snprintf(label, sizeof label, "race detector: the race between %s and %s", site[0], site[1]);
    tn__repeat_label(&g_repeats, key, label);
    FILE *f = report_stream();
    if (f) {
        fputs(g_last, f);
        fflush(f);
    }
    pthread_mutex_unlock(&g_report_lock);
}

/* Our access `id` (bytes [lo,hi), write?) overlaps the in-flight access
 * `pid` of record prec: report the pair unless its other side did. */
static void conflict(const tn_storage *s, uint64_t id, tn_race_rec *rec, bool write, uint64_t pid,
                     tn_race_rec *prec, bool pwrite, uintptr_t lo, uintptr_t hi) {
    uint64_t lower = id < pid ? id : pid;
    tn_race_rec *lr = lower == id ? rec : prec;
    uint64_t r = atomic_load_explicit(&lr->reported, memory_order_relaxed);
    /* relaxed: the CAS only elects one reporter; nothing is published. */
    if (r == lower || !atomic_compare_exchange_strong_explicit(
                          &lr->reported, &r, lower, memory_order_relaxed, memory_order_relaxed))
        return;
    side me = {write, "", rec_read(rec, id)};
    side peer = {pwrite, " (in flight)", rec_read(prec, pid)};
    report(s, lo, hi, &me, &peer);
}

static void scan(const tn_storage *s, struct tn_race_state *st, const tn_race_slot *mine,
                 uint64_t id, tn_race_rec *rec, uintptr_t lo, uintptr_t hi, bool write) {
    for (int i = 0; i < TN_RACE_SLOTS; i++) {
        tn_race_slot *sl = &st->slot[i];
        if (sl == mine) continue;
        /* seq_cst: the load half of Dekker's pattern (see the top). */
        uint64_t w = atomic_load_explicit(&sl->state, memory_order_seq_cst);
        if (!(w & ST_ACTIVE)) continue;
        uint64_t pid = w >> 2;
        bool pwrite = w & ST_WRITE;
        if ((pid >> TID_SHIFT) == (id >> TID_SHIFT) || (!pwrite && !write)) continue;
        /* acquire: pairs with the release stores in claim(); the range is
         * pid's only if the word did not change meanwhile. */
        uintptr_t plo = atomic_load_explicit(&sl->lo, memory_order_acquire);
        uintptr_t phi = atomic_load_explicit(&sl->hi, memory_order_acquire);
        tn_race_rec *prec = atomic_load_explicit(&sl->rec, memory_order_acquire);
        if (atomic_load_explicit(&sl->state, memory_order_relaxed) != w) continue;
        if (plo < hi && lo < phi)
            conflict(s, id, rec, write, pid, prec, pwrite, plo > lo ? plo : lo,
                     phi < hi ? phi : hi);
    }
}

/* ---- begin / end ------------------------------------------------------------------- */

void tn__race_op_slow(const char *op) { tls_op = op; }

void tn__race_begin_slow(tn_race_access *ra, const void *key, const char *kind) {
    int n = tls_note.n;
    const char *opname = tls_op;
    tls_note.n = 0; /* consumed, whatever happens next */
    tls_op = NULL;
    if (!n || tls_note.key != key || tls_in_flight ||
        tls_note.gen != atomic_load_explicit(&g_gen, memory_order_relaxed))
        return;
    tn_race_rec *rec = my_rec();
    if (!rec) return;
    uint64_t id = (tn__thread_id() & TID_MASK) << TID_SHIFT | (++tls_seq & SEQ_MASK);
    tn_backtrace bt;
    tn__bt_capture(&bt);
    rec_fill(rec, id, kind, opname, &bt);
    struct {
        struct tn_race_state *st;
        tn_storage *s;
        uintptr_t lo, hi;
        bool write;
    } op[TN_RACE_MAX_OPS];
    for (int j = 0; j < n; j++) {
        struct tn_race_state *st = state_of(tls_note.s[j]);
        tn_race_slot *sl = st ? claim(st, id, tls_note.lo[j], tls_note.hi[j], rec) : NULL;
        if (!sl) continue;
        op[ra->n].st = st;
        op[ra->n].s = tls_note.s[j];
        op[ra->n].lo = tls_note.lo[j];
        op[ra->n].hi = tls_note.hi[j];
        op[ra->n].write = tls_note.write[j];
        ra->slot[ra->n++] = sl;
    }
    if (!ra->n) return;
    tls_in_flight = true;
    /* seq_cst: the store half of Dekker's pattern; also a release of the
     * range and record stored in claim(). */
    for (int i = 0; i < ra->n; i++)
        atomic_store_explicit(&ra->slot[i]->state,
                              id << 2 | ST_ACTIVE | (op[i].write ? ST_WRITE : 0),
                              memory_order_seq_cst);
    for (int i = 0; i < ra->n; i++)
        scan(op[i].s, op[i].st, ra->slot[i], id, rec, op[i].lo, op[i].hi, op[i].write);
}

void tn__race_end_slow(tn_race_access *ra) {
    /* release: the kernel's accesses happen before the slot is seen free. */
    for (int i = 0; i < ra->n; i++)
        atomic_store_explicit(&ra->slot[i]->state, 0, memory_order_release);
    ra->n = 0;
    tls_in_flight = false;
}
