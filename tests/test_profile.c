/* The timeline profiler (include/tenet/profile.h): its errors, threads that
 * record while profiling, the summary, nothing recorded when off. The trace's
 * shape is checked by check_trace.py (the profile_trace test). */
#define _GNU_SOURCE /* gettid */
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_step.h"
#include "tenet/testing.h"

#define TRACE "test_profile_trace.json"
/* call fails with status st and a message containing needle */
#define EXPECT_ERR(call, st, needle)                                                               \
    do {                                                                                           \
        assert_int_equal((call), (st));                                                            \
        tt_assert_error((st), (needle));                                                           \
    } while (0)

/* The whole file (the caller frees it), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static void test_errors(void **state) {
    (void)state;
    EXPECT_ERR(tn_profile_end(TRACE), TN_ERR_INVALID_ARGUMENT, "not running");
    EXPECT_ERR(tn_profile_summary(NULL, 5), TN_ERR_INVALID_ARGUMENT, "f is NULL");
    assert_int_equal(tn_profile_begin(), TN_OK);
    assert_true(tn_profile_enabled());
    EXPECT_ERR(tn_profile_begin(), TN_ERR_INVALID_ARGUMENT, "is running");
    assert_int_equal(prof_step(), TN_OK);
    /* a file that cannot be opened: an error, and the profiler stops all the same */
    EXPECT_ERR(tn_profile_end("/nonexistent-dir/trace.json"), TN_ERR_IO, "cannot open");
    assert_false(tn_profile_enabled());
    EXPECT_ERR(tn_profile_end(NULL), TN_ERR_INVALID_ARGUMENT, "not running");
}

typedef struct worker {
    pthread_t th;
    int tid;
    tn_status st;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    w->tid = (int)gettid();
    w->st = TN_OK;
    for (int i = 0; i < 4 && w->st == TN_OK; i++)
        w->st = prof_step();
    return NULL;
}

/* Four threads train while profiling: each appears in the trace by its OS id,
 * and the summary counts their nodes. */
static void test_threads(void **state) {
    (void)state;
    worker w[4];
    assert_int_equal(tn_profile_begin(), TN_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(w[i].th, NULL);
    assert_int_equal(tn_profile_end(TRACE), TN_OK);
    char *s = slurp(TRACE);
    assert_non_null(s);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(w[i].st, TN_OK);
        char want[64];
        snprintf(want, sizeof want, "\"ph\":\"X\",\"pid\":%d,\"tid\":%d,", (int)getpid(), w[i].tid);
        assert_non_null(strstr(s, want));
    }
    free(s);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(tn_profile_summary(f, 3), TN_OK);
    rewind(f);
    char table[4096] = {0};
    size_t n = fread(table, 1, sizeof table - 1, f);
    fclose(f);
    assert_true(n > 0);
    assert_non_null(strstr(table, "self ms"));
    assert_non_null(strstr(table, "self time total"));
    remove(TRACE);
}

/* Sessions begin and end while threads train: what they record in between
 * is theirs; ThreadSanitizer checks the hand-over of the buffers. */
static atomic_bool stop;

static void *trainer(void *arg) {
    tn_status *st = arg;
    while (*st == TN_OK && !atomic_load_explicit(&stop, memory_order_relaxed))
        *st = prof_step();
    return NULL;
}

static void test_sessions_while_training(void **state) {
    (void)state;
    pthread_t th[3];
    tn_status st[3] = {TN_OK, TN_OK, TN_OK};
    atomic_store_explicit(&stop, false, memory_order_relaxed);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, trainer, &st[i]), 0);
    for (int k = 0; k < 20; k++) {
        assert_int_equal(tn_profile_begin(), TN_OK);
        assert_int_equal(prof_step(), TN_OK);
        assert_int_equal(tn_profile_end(k % 2 ? TRACE : NULL), TN_OK);
    }
    atomic_store_explicit(&stop, true, memory_order_relaxed);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(st[i], TN_OK);
    assert_int_equal(tn_profile_summary(stdout, 3), TN_OK);
    remove(TRACE);
}

/* A trace file's table (tenet-prof), and the reader's errors. */
static void test_summary_file(void **state) {
    (void)state;
    assert_int_equal(tn_profile_begin(), TN_OK);
    assert_int_equal(prof_step(), TN_OK);
    assert_int_equal(tn_profile_end(TRACE), TN_OK);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(tn_profile_summary_file(TRACE, f, 0), TN_OK);
    rewind(f);
    char table[4096] = {0};
    assert_true(fread(table, 1, sizeof table - 1, f) > 0);
    assert_non_null(strstr(table, "MmBackward0"));
    assert_non_null(strstr(table, "self time total"));
    EXPECT_ERR(tn_profile_summary_file("/nonexistent-dir/t.json", f, 5), TN_ERR_IO, "cannot open");
    EXPECT_ERR(tn_profile_summary_file(TRACE, NULL, 5), TN_ERR_INVALID_ARGUMENT, "NULL");
    fclose(f);
    FILE *g = fopen(TRACE, "w");
    assert_non_null(g);
    fputs("{\"traceEvents\": 3}", g);
    fclose(g);
    EXPECT_ERR(tn_profile_summary_file(TRACE, stdout, 5), TN_ERR_FORMAT, "no traceEvents");
    g = fopen(TRACE, "w");
    assert_non_null(g);
    fputs("not json", g);
    fclose(g);
    EXPECT_ERR(tn_profile_summary_file(TRACE, stdout, 5), TN_ERR_FORMAT, "not JSON");
    remove(TRACE);
}

/* Each allocation of a profiled step and of the end fails in turn: the step
 * fails cleanly or goes on (a lost event is counted, not an error), the end
 * writes its file or fails with TN_ERR_OUT_OF_MEMORY; nothing leaks (the
 * teardown counts tensors, ASan the rest). */
static void test_oom_walk(void **state) {
    (void)state;
    bool fired = true;
    for (int64_t n = 1; fired && n < 5000; n++) {
        assert_int_equal(tn_profile_begin(), TN_OK);
        tn_test_fail_alloc_at(n);
        tn_status st = prof_step();
        tn_status end = tn_profile_end(TRACE);
        fired = tn_test_alloc_failed();
        tn_test_fail_alloc_at(0);
        assert_true(st == TN_OK || st == TN_ERR_OUT_OF_MEMORY);
        assert_true(end == TN_OK || end == TN_ERR_OUT_OF_MEMORY);
        assert_false(tn_profile_enabled());
    }
    assert_false(fired); /* the walk reached a run with no failure */
    remove(TRACE);
}

/* Ops run while off are not recorded; a session with none writes no span. */
static void test_off_records_nothing(void **state) {
    (void)state;
    assert_int_equal(prof_step(), TN_OK);
    assert_int_equal(tn_profile_begin(), TN_OK);
    assert_int_equal(tn_profile_end(TRACE), TN_OK);
    char *s = slurp(TRACE);
    assert_non_null(s);
    assert_null(strstr(s, "\"ph\":\"X\""));
    assert_non_null(strstr(s, "\"traceEvents\""));
    free(s);
    remove(TRACE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_errors),       TT_TEST(test_threads),  TT_TEST(test_sessions_while_training),
        TT_TEST(test_summary_file), TT_TEST(test_oom_walk), TT_TEST(test_off_records_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
