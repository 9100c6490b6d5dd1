/* tests/test_anomaly_writers.c — anomaly mode's in-place report with several
 * writer threads: one thread writes once after the save (the culprit: the
 * write to the saved version + 1), others write in bursts of 10^5, before
 * the check or racing it. The report must name the culprit every time, list
 * no write past the version the check read, fold the bursts into one line
 * per call site and count the writes it does not list.
 *
 * The writers write disjoint rows of one tensor (views: one storage, one
 * version counter), so the test itself has no data race. */
#define _GNU_SOURCE /* open_memstream, pthread_setname_np */
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug/debug_internal.h"

#define NOINLINE __attribute__((noinline))
#define BURST 100000

/* A statement after each tenet call (no tail call: the writer's frame stays
 * on the stack). Relaxed: a counter no one reads. */
static _Atomic int sink;

static void assert_contains(const char *text, const char *needle) {
    if (!strstr(text, needle)) fail_msg("text\n%s\ndoes not contain \"%s\"", text, needle);
}

typedef struct writer {
    pthread_t th;
    tn_tensor *row; /* its own row of the saved tensor */
    const char *name;
    _Atomic int *go;   /* bursts start when the culprit has written */
    _Atomic int *done; /* writes finished, all threads */
    _Atomic uint64_t written;
    uint64_t tid;
    int failures;
} writer;

static int culprit_line;
static NOINLINE void culprit_write(writer *w) {
    culprit_line = __LINE__ + 1;
    if (tn_add_scalar_(w->row, 1) != TN_OK) w->failures++;
    atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}

static NOINLINE void burst_write(writer *w) {
    if (tn_mul_scalar_(w->row, 1) != TN_OK) w->failures++;
    atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}

static void *culprit_main(void *arg) {
    writer *w = arg;
    pthread_setname_np(pthread_self(), w->name);
    w->tid = tn__os_tid();
    culprit_write(w);
    /* release: the write (and its record) before the bursts start */
    atomic_store_explicit(w->go, 1, memory_order_release);
    atomic_fetch_add_explicit(w->done, 1, memory_order_release);
    return NULL;
}

static void *burst_main(void *arg) {
    writer *w = arg;
    pthread_setname_np(pthread_self(), w->name);
    w->tid = tn__os_tid();
    while (!atomic_load_explicit(w->go, memory_order_acquire)) { /* pairs with culprit_main */
    }
    for (int i = 0; i < BURST; i++) {
        burst_write(w);
        /* relaxed: a progress count the main thread only waits on */
        atomic_fetch_add_explicit(&w->written, 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(w->done, 1, memory_order_release);
    return NULL;
}


static int count(const char *s, const char *needle) {
    int n = 0;
    size_t len = strlen(needle);
    for (size_t i = 0; s[i]; i++)
        n += strncmp(s + i, needle, len) == 0;
    return n;
}

/* What every report must say, whatever the interleaving. */
static void check_report(const writer *culprit, int n_writers) {
    char want[256];
    /* the hint names the first write after the save */
    snprintf(want, sizeof want, "modified in place by culprit_write (");
    assert_contains(tn_last_error(), want);
    snprintf(want, sizeof want, "test_anomaly_writers.c:%d) on thread %llu \"culprit\".",
             culprit_line, (unsigned long long)culprit->tid);
    assert_contains(tn_last_error(), want);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    uint64_t saved, cur;
    assert_int_equal(tn_anomaly_report_saved(r, NULL, NULL, NULL, NULL, &saved, &cur), TN_OK);
    assert_int_equal(saved, 0);
    int n = tn_anomaly_report_n_writes(r);
    assert_true(n >= 1);
    const tn_write_event *first = tn_anomaly_report_write(r, 0);
    assert_string_equal(first->op, "add_scalar_");
    assert_int_equal(first->version, 1);
    assert_int_equal(first->thread_id, culprit->tid);
    assert_string_equal(first->thread_name, "culprit");
    for (int i = 0; i < n; i++) { /* none written after the check */
        const tn_write_event *w = tn_anomaly_report_write(r, i);
        assert_true(w->version > saved && w->version <= cur);
        if (i > 0) assert_true(w->version > tn_anomaly_report_write(r, i - 1)->version);
    }
    /* every write that moved the version is listed or counted */
    assert_int_equal(tn_anomaly_report_dropped(r), cur - saved - (uint64_t)n);
    char *text = tt_report_text(r);
    snprintf(want, sizeof want, "    add_scalar_ -> version 1, thread %llu \"culprit\"\n",
             (unsigned long long)culprit->tid);
    assert_contains(text, want);
    if (cur - saved > (uint64_t)n) {
        snprintf(want, sizeof want, "  at least %llu more write(s) between the save and the check",
                 (unsigned long long)(cur - saved - (uint64_t)n));
        assert_contains(text, want);
    }
    /* a run of one thread's writes is folded into one line, with its call site */
    int runs = 0, folded = 0;
    for (int i = 1; i < n; i++) {
        const tn_write_event *w = tn_anomaly_report_write(r, i);
        bool same = i > 1 && tn_anomaly_report_write(r, i - 1)->thread_id == w->thread_id;
        runs += !same;
        folded += same;
    }
    if (folded) {
        assert_contains(text, "mul_scalar_ \u00d7");
        assert_contains(text, ", burst_write (");
    }
    assert_int_equal(count(text, "\n    mul_scalar_ "), runs); /* one line per run */
    free(text);
}

/* One round: x (n_writers rows) is saved by mul; the culprit writes its row
 * once, then n_writers - 1 threads write theirs BURST times each; backward
 * checks after every write finished, or (racing) while the bursts run. */
static void round_of(int n_writers, bool racing) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *x = tn_zeros(2, (const int64_t[]){n_writers, 8}, TN_F32);
    tn_tensor *a = tn_ones(1, (const int64_t[]){8}, TN_F32);
    assert_int_equal(tn_requires_grad_(a, true), TN_OK);
    tn_tensor *s = tn_sum(tn_mul(a, x)); /* MulBackward0 saves x */
    _Atomic int go = 0, done = 0;
    writer w[3] = {0};
    static const char *names[3] = {"culprit", "burst-1", "burst-2"};
    for (int i = 0; i < n_writers; i++) {
        w[i].row = tn_select(x, 0, i);
        w[i].name = names[i];
        w[i].go = &go;
        w[i].done = &done;
    }
    for (int i = n_writers - 1; i >= 0; i--) /* the bursts wait for the culprit */
        assert_int_equal(pthread_create(&w[i].th, NULL, i ? burst_main : culprit_main, &w[i]), 0);
    if (racing) { /* check once every burst is under way */
        for (int i = 1; i < n_writers; i++)
            while (atomic_load_explicit(&w[i].written, memory_order_relaxed) < BURST / 10) {
            }
    } else {
        while (atomic_load_explicit(&done, memory_order_acquire) < n_writers) { /* pairs with */
        }                                                                       /* the writers' */
    }
    assert_int_equal(tn_backward(s, NULL, true), TN_ERR_INPLACE_MODIFIED);
    check_report(&w[0], n_writers);
    for (int i = 0; i < n_writers; i++) {
        pthread_join(w[i].th, NULL);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(tn_version(x), 1 + (int64_t)(n_writers - 1) * BURST);
    tn_set_detect_anomaly(false, false);
    tn_scope_end();
}

static void two_writers(void **state) {
    (void)state;
    round_of(2, false);
}

static void three_writers(void **state) {
    (void)state;
    round_of(3, false);
}

static void writes_racing_the_check(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        round_of(3, true);
}

/* The first write after each save is kept (marks move forward): x is saved,
 * written, saved again by a second node, written, then written 1,000 times. */
static int second_line;
static NOINLINE void second_culprit(tn_tensor *x) {
    second_line = __LINE__ + 1;
    assert_int_equal(tn_add_scalar_(x, -1), TN_OK);
    atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}

static void later_save_keeps_its_first_write(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *x = tn_zeros(1, (const int64_t[]){4}, TN_F32);
    tn_tensor *a = tn_ones(1, (const int64_t[]){4}, TN_F32);
    assert_int_equal(tn_requires_grad_(a, true), TN_OK);
    tn_tensor *s0 = tn_sum(tn_mul(a, x));          /* saved at 0 */
    assert_int_equal(tn_mul_scalar_(x, 2), TN_OK); /* version 1: s0's culprit */
    tn_tensor *s = tn_sum(tn_mul(a, x));           /* saved at 1 */
    second_culprit(x);                             /* version 2: s's culprit */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(tn_mul_scalar_(x, 1), TN_OK); /* 3 .. 1002 */
    assert_int_equal(tn_backward(s0, NULL, false), TN_ERR_INPLACE_MODIFIED);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    const tn_write_event *w = tn_anomaly_report_write(r, 0);
    assert_non_null(w);
    assert_int_equal(w->version, 1);
    assert_true(w->n_frames > 0);
    assert_string_equal(w->frames[0].function, "later_save_keeps_its_first_write");
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    r = tn_last_anomaly();
    w = tn_anomaly_report_write(r, 0);
    assert_non_null(w);
    assert_string_equal(w->op, "add_scalar_");
    assert_int_equal(w->version, 2);
    char want[128];
    snprintf(want, sizeof want, "modified in place by second_culprit (");
    assert_contains(tn_last_error(), want);
    snprintf(want, sizeof want, "test_anomaly_writers.c:%d).", second_line);
    assert_contains(tn_last_error(), want);
    assert_int_equal(tn_anomaly_report_dropped(r), 1001 - (uint64_t)tn_anomaly_report_n_writes(r));
    tn_set_detect_anomaly(false, false);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(two_writers),
        TT_TEST(three_writers),
        TT_TEST(writes_racing_the_check),
        TT_TEST(later_save_keeps_its_first_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
