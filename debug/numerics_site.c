/* debug/numerics_site.c — the call site of each numerics record: the first
 * frame of the stack outside tenet, as "file:line".
 *
 * The stack is walked on every record (program counters only, as anomaly
 * mode does); symbols are looked up once per program counter per thread: a
 * training loop calls tenet from a few hundred places, so after its first
 * step every lookup is a hit in the thread's own table, with no lock (the
 * symboliser's mutex is taken on a miss only).
 */
#include <pthread.h>
#include <string.h>

#include "numerics_internal.h"

#define TN_SITE_SLOTS 1024 /* a power of two */
#define TN_SITE_PROBE 8
#define TN_SITE_TEXT 104

typedef struct site_slot {
    void *pc; /* NULL: empty */
    bool engine;
    char where[TN_SITE_TEXT];
} site_slot;

struct tn_num_sites {
    site_slot slot[TN_SITE_SLOTS];
};

/* The folder tenet's sources are named under in this build's line tables
 * ("../../" when the compiler was given relative paths), from this file's
 * own name as the symboliser gives it. */
static char g_root[512];
static pthread_once_t g_root_once = PTHREAD_ONCE_INIT;

static void find_root(void) {
    char buf[1024];
    tn_frame f;
    if (!tn__symbolize((void *)(uintptr_t)tn__num_sites_free, &f, buf, sizeof buf) || !f.file)
        return;
    const char *tail = strstr(f.file, "debug/numerics_site.c");
    size_t n = tail ? (size_t)(tail - f.file) : 0;
    if (tail && n < sizeof g_root) memcpy(g_root, f.file, n), g_root[n] = '\0';
}

/* tenet's own frame: the symboliser's test, or a file under tenet's folders
 * as this build names them. */
static bool is_tenet(const tn_frame *f) {
    if (tn__frame_is_engine(f)) return true;
    pthread_once(&g_root_once, find_root);
    size_t n = strlen(g_root);
    if (!f->file || !n || strncmp(f->file, g_root, n) != 0) return false;
    const char *rest = f->file + n;
    return !strncmp(rest, "engine/", 7) || !strncmp(rest, "debug/", 6) ||
           !strncmp(rest, "include/", 8);
}

static void lookup(void *pc, site_slot *s) {
    char buf[1024];
    tn_frame f;
    s->pc = pc;
    /* a return address: pc - 1 is inside the call, so the line is the call's */
    if (!tn__symbolize((char *)pc - 1, &f, buf, sizeof buf)) {
        s->engine = false;
        snprintf(s->where, sizeof s->where, "?");
        return;
    }
    s->engine = is_tenet(&f);
    size_t n = strlen(g_root); /* tenet's tree as the build named it: the path inside it */
    if (f.file && n && !strncmp(f.file, g_root, n)) f.file += n;
    while (f.file && !strncmp(f.file, "../", 3)) /* a program built in a folder below */
        f.file += 3;
    tn__frame_where(s->where, sizeof s->where, &f);
}

static const site_slot *slot_of(tn_num_sites *c, void *pc, site_slot *scratch) {
    if (!c) {
        lookup(pc, scratch);
        return scratch;
    }
    size_t h = ((uintptr_t)pc >> 2) * 0x9E3779B97F4A7C15ull >> 54;
    for (int k = 0; k < TN_SITE_PROBE; k++) {
        site_slot *s = &c->slot[(h + (size_t)k) & (TN_SITE_SLOTS - 1)];
        if (s->pc == pc) return s;
        if (!s->pc) {
            lookup(pc, s);
            return s;
        }
    }
    site_slot *s = &c->slot[h & (TN_SITE_SLOTS - 1)]; /* full run: the first gives way */
    lookup(pc, s);
    return s;
}

void tn__num_call_site(tn_num_sites **cache, char *buf, size_t n) {
    if (!*cache) *cache = tn__calloc_quiet(1, sizeof **cache);
    tn_backtrace bt;
    tn__bt_capture(&bt);
    site_slot scratch;
    for (int i = 0; i < bt.n; i++) {
        const site_slot *s = slot_of(*cache, bt.pc[i], &scratch);
        if (!s->engine) {
            snprintf(buf, n, "%s", s->where);
            return;
        }
    }
    snprintf(buf, n, "?");
}

void tn__num_sites_free(tn_num_sites *c) { tn__mfree(c); }
