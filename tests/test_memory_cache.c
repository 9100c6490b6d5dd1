/* tests/test_memory_cache.c — freed big CPU buffers keep their pages for the
 * next allocation, and tn_memory_release_cached gives them back
 * (engine/core/alloc.c, "Big buffers"; docs/api.md §11).
 *
 * Resident memory is read from /proc/self/statm. Sanitizer builds allocate
 * through the sanitizer's allocator instead (nothing of ours is kept there):
 * they check the call's contract only. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "util.h"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <stdio.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define MIB (1024.0 * 1024.0)

static double resident_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    long size = 0, resident = 0;
    assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / MIB;
}

/* A 64 MiB float32 tensor, every page written. */
static tn_tensor *big_filled(float v) {
    int64_t n = 16 << 20;
    tn_tensor *t = tn_full(1, &n, TN_F32, v);
    assert_non_null(t);
    return t;
}

static double sum_of(const tn_tensor *t) {
    tn_tensor *s = tn_sum(t);
    double v = 0;
    assert_non_null(s);
    assert_int_equal(tn_item(s, &v), TN_OK);
    tn_release(s);
    return v;
}

static void test_big_pages_kept_then_released(void **state) {
    (void)state;
    assert_int_equal(tn_memory_release_cached(), TN_OK); /* nothing cached yet: fine */
    const double r0 = resident_mib();
    tn_tensor *a = big_filled(1.0f);
    const double r1 = resident_mib();
    tn_release(a);
    const double r2 = resident_mib();
    /* the same size again: the freed pages, not fresh ones */
    tn_tensor *b = big_filled(2.0f);
    assert_float_equal(sum_of(b), 2.0 * (16 << 20), 0);
    const double r3 = resident_mib();
    tn_release(b);
    assert_int_equal(tn_memory_release_cached(), TN_OK);
    const double r4 = resident_mib();
    print_message("resident MiB: start %.1f, filled %.1f, freed %.1f, refilled %.1f, "
                  "released %.1f\n",
                  r0, r1, r2, r3, r4);
    if (SANITIZED) return;
    assert_true(r1 - r0 > 56);  /* the tensor's pages are resident */
    assert_true(r1 - r2 < 8);   /* freed: still resident, kept for reuse */
    assert_true(r3 - r2 < 8);   /* refilled in the kept pages: no new 64 MiB */
    assert_true(r3 - r4 > 56);  /* released: given back */
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long minor_faults(void) {
    struct rusage u;
    assert_int_equal(getrusage(RUSAGE_SELF, &u), 0);
    return u.ru_minflt;
}

/* A training loop's pattern: the same big buffer freed and made again, for
 * longer than the allocator's purge period would allow. The pages stay: after
 * the first round, refilling the buffer faults (almost) nothing in. */
static void test_churn_faults_nothing(void **state) {
    (void)state;
    tn_release(big_filled(0.0f));
    const long f0 = minor_faults();
    const double t0 = now_s();
    int rounds = 0;
    while (now_s() - t0 < 1.5 || rounds < 20) {
        tn_release(big_filled((float)rounds));
        rounds++;
    }
    const long faults = minor_faults() - f0;
    /* a fresh 64 MiB is 16,384 faults of 4 KiB (32 of 2 MiB with huge pages) */
    print_message("%d rounds of 64 MiB: %ld minor faults\n", rounds, faults);
    if (!SANITIZED) assert_true(faults < rounds * 4);
    assert_int_equal(tn_memory_release_cached(), TN_OK);
}

/* A second thread's buffers are the same arena's: released from any thread. */
static void *alloc_free_big(void *arg) {
    (void)arg;
    tn_tensor *t = big_filled(3.0f);
    tn_release(t);
    return NULL;
}

static void test_release_from_another_thread(void **state) {
    (void)state;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, alloc_free_big, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    const double before = resident_mib();
    assert_int_equal(tn_memory_release_cached(), TN_OK);
    const double after = resident_mib();
    if (!SANITIZED) assert_true(before - after > 56);
    /* live tensors are untouched */
    tn_tensor *t = big_filled(4.0f);
    assert_int_equal(tn_memory_release_cached(), TN_OK);
    assert_float_equal(sum_of(t), 4.0 * (16 << 20), 0);
    tn_release(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_big_pages_kept_then_released),
        TT_TEST(test_release_from_another_thread),
        TT_TEST(test_churn_faults_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
