/* Repeated debug reports (debug_internal.h, "repeats"): the race detector
 * and anomaly mode's warnings print each distinct report once in full, then
 * count its repeats and print one summary line per report at most once an
 * interval (1 s; TENET_REPORT_INTERVAL=seconds, or tn__report_interval_set),
 * and the counts still pending when the mode ends or the process exits.
 *
 * A table of the last TN_REPEAT_KEYS distinct keys per kind of report,
 * under its own mutex: this runs only when a report is made, never on the
 * paths that find nothing to report. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <time.h>

#include "debug_internal.h"

/* relaxed: a setting read on its own; nothing is published with it */
static _Atomic int64_t g_interval_ns = 1000000000;

void tn__report_interval_set(double seconds) {
    int64_t ns = seconds <= 0 ? 0 : seconds > 1e9 ? INT64_MAX : (int64_t)(seconds * 1e9);
    atomic_store_explicit(&g_interval_ns, ns, memory_order_relaxed);
}

__attribute__((constructor)) static void interval_from_env(void) {
    const char *e = getenv("TENET_REPORT_INTERVAL");
    if (!e || !*e) return;
    char *end;
    double s = strtod(e, &end);
    if (end != e && s >= 0) tn__report_interval_set(s);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void summary(FILE *f, tn_repeat *e) {
    if (f && e->pending)
        fprintf(f, "tenet: %s repeated %llu more time%s\n", e->label,
                (unsigned long long)e->pending, e->pending == 1 ? "" : "s");
    if (f && e->pending) fflush(f);
    e->pending = 0;
}

/* The entry for key, or a free one (the least recently printed when the
 * table is full: its pending count is printed first). */
static tn_repeat *entry(tn_repeats *r, uint64_t key, FILE *f, bool *fresh) {
    tn_repeat *oldest = &r->e[0];
    for (int i = 0; i < r->n; i++) {
        if (r->e[i].key == key) {
            *fresh = false;
            return &r->e[i];
        }
        if (r->e[i].last < oldest->last) oldest = &r->e[i];
    }
    *fresh = true;
    if (r->n < TN_REPEAT_KEYS) return &r->e[r->n++];
    summary(f, oldest);
    return oldest;
}

bool tn__repeat_note(tn_repeats *r, uint64_t key, FILE *f) {
    int64_t t = now_ns();
    pthread_mutex_lock(&r->lock);
    bool fresh;
    tn_repeat *e = entry(r, key, f, &fresh);
    if (fresh) {
        *e = (tn_repeat){.key = key, .last = t};
    } else {
        e->pending++;
        int64_t gap = atomic_load_explicit(&g_interval_ns, memory_order_relaxed);
        if (t - e->last >= gap) {
            summary(f, e);
            e->last = t;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return fresh;
}

void tn__repeat_label(tn_repeats *r, uint64_t key, const char *label) {
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->n; i++)
        if (r->e[i].key == key) snprintf(r->e[i].label, sizeof r->e[i].label, "%s", label);
    pthread_mutex_unlock(&r->lock);
}

void tn__repeat_flush(tn_repeats *r, FILE *f, bool forget) {
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->n; i++)
        summary(f, &r->e[i]);
    if (forget) r->n = 0;
    pthread_mutex_unlock(&r->lock);
}

uint64_t tn__repeat_hash(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) /* FNV-1a */
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}
