/* tests/test_report_repeats.c — debug output that repeats does not flood:
 * the race detector prints each pair of call sites once in full, anomaly
 * mode each distinct warning once; repeats are counted and summarised in
 * one line at most once an interval (debug/repeat.c) and when the mode is
 * switched off. The interval is set here (tn__report_interval_set): an
 * hour, so that no summary is due before the switch-off, or 0, a summary
 * per repeat. No timing is asserted. */
#define _GNU_SOURCE /* open_memstream, pthread_barrier_t */
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug/debug_internal.h"
#include "debug/race.h"

#define REPEATS 10000
/* A failed backward in anomaly mode builds and symbolises a report (~1 ms):
 * fewer of them. */
#define PASSES 1000

static int count(const char *s, const char *needle) {
    int n = 0;
    size_t len = strlen(needle);
    for (size_t i = 0; s[i]; i++)
        n += strncmp(s + i, needle, len) == 0;
    return n;
}

static int lines(const char *s) { return count(s, "\n"); }

/* ---- the race detector ---------------------------------------------------------- */

/* Holds `rounds` write accesses to t open, one after the other, each until
 * the main thread has made its own (overlapping) access. */
typedef struct holder {
    pthread_barrier_t bar;
    tn_tensor *t;
    int rounds;
} holder;

static void *hold_accesses(void *p) {
    holder *h = p;
    const tn_tensor *ops[2] = {h->t, h->t};
    for (int i = 0; i < h->rounds; i++) {
        tn_race_access ra = {0};
        tn__race_note(h, 2, ops);
        tn__race_begin_slow(&ra, h, "test");
        pthread_barrier_wait(&h->bar); /* in flight */
        pthread_barrier_wait(&h->bar); /* the main thread's access is done */
        tn__race_end(&ra);
    }
    return NULL;
}

/* `rounds` identical races (same two call sites), reported into a memory
 * stream; returns the text printed once the detector is off (caller frees). */
static char *race_rounds(int rounds) {
    tn_tensor *x = tn_zeros(1, (const int64_t[]){64}, TN_F32);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    tn_race_reports_reset();
    tn_set_race_report_stream(f);
    tn_set_detect_races(true);
    holder h = {.t = x, .rounds = rounds};
    pthread_barrier_init(&h.bar, NULL, 2);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hold_accesses, &h), 0);
    for (int i = 0; i < rounds; i++) {
        pthread_barrier_wait(&h.bar);
        assert_int_equal(tn_add_scalar_(x, 1), TN_OK);
        pthread_barrier_wait(&h.bar);
    }
    pthread_join(th, NULL);
    pthread_barrier_destroy(&h.bar);
    assert_int_equal(tn_race_reports(), (uint64_t)rounds); /* every one is counted */
    tn_set_detect_races(false);                            /* prints the pending count */
    tn_set_race_report_stream(stderr);
    tn_race_reports_reset();
    fclose(f);
    tn_release(x);
    return text;
}

static void race_repeats_summarised(void **state) {
    (void)state;
    tn__report_interval_set(3600);
    char *text = race_rounds(REPEATS);
    assert_int_equal(count(text, "tenet: race detected"), 1);
    assert_int_equal(count(text, " repeated "), 1);
    char want[128];
    snprintf(want, sizeof want, " repeated %d more times\n", REPEATS - 1);
    if (!strstr(text, want)) fail_msg("output\n%s\nlacks \"%s\"", text, want);
    /* the summary names the pair by its call sites */
    assert_non_null(strstr(text, "tenet: race detector: the race between write add_scalar_ ("));
    assert_non_null(strstr(text, " and write "));
    assert_true(lines(text) < 40); /* the report (two stacks) and one summary */
    free(text);
    tn__report_interval_set(1);
}

static void race_interval_zero(void **state) {
    (void)state;
    tn__report_interval_set(0); /* a summary line per repeat */
    char *text = race_rounds(3);
    assert_int_equal(count(text, "tenet: race detected"), 1);
    assert_int_equal(count(text, " repeated 1 more time\n"), 2);
    free(text);
    tn__report_interval_set(1);
}

/* ---- anomaly mode ---------------------------------------------------------------- */

/* One backward that fails with the same version error, from the same call
 * sites, each time. */
static void failing_pass(void) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tn_ones(1, (const int64_t[]){4}, TN_F32);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    tn_tensor *y = tn_exp(x); /* saves its output */
    assert_int_equal(tn_mul_scalar_(y, 2), TN_OK);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_INPLACE_MODIFIED);
    tn_scope_end();
}

static void anomaly_warnings_summarised(void **state) {
    (void)state;
    tn__report_interval_set(3600);
    tt_capture c;
    tt_capture_begin(&c);
    tn_set_detect_anomaly(true, false);
    for (int i = 0; i < PASSES; i++)
        failing_pass();
    tn_set_detect_anomaly(false, false); /* prints the pending count */
    tt_capture_text(&c);
    long bytes = ftell(c.tmp);
    const char *text = tt_capture_end(&c);
    tn_anomaly_clear();
    tn__report_interval_set(1);
    assert_true(bytes < (long)sizeof c.text); /* all of it read */
    assert_int_equal(count(text, "tenet: warning: Error detected in ExpBackward0"), 1);
    char want[160];
    snprintf(want, sizeof want,
             "tenet: warning: \"Error detected in ExpBackward0, created by failing_pass (");
    if (!strstr(text, want)) fail_msg("output\n%s\nlacks \"%s\"", text, want);
    snprintf(want, sizeof want, ").\" repeated %d more times\n", PASSES - 1);
    if (!strstr(text, want)) fail_msg("output\n%s\nlacks \"%s\"", text, want);
    assert_int_equal(lines(text), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(race_repeats_summarised),
        TT_TEST(race_interval_zero),
        TT_TEST(anomaly_warnings_summarised),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
