/* The numerics recorder (include/tenet/numerics.h): what a record holds (ops
 * with their call sites and summaries, backward nodes tied to their ops,
 * optimiser updates), the tensors a filter saves, the sessions' errors, and
 * records from several threads at once. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int64_t S23[] = {2, 3};

/* The whole file (the caller frees it). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return s;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void tmp_path(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/tmp/tenet_numerics_%s_%d.jsonl", tag, (int)getpid());
}

static void test_records_ops_nodes_updates(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "basic");
    tn_tensor *x = tt_f32(2, S23, (const float[]){1, -2, 3, -4, 5, -6}, true);
    tn_sgd *opt = tn_sgd_new(1, &x, 0.1, 0, 0);
    assert_non_null(opt);
    assert_int_equal(tn_numerics_begin(path, NULL), TN_OK);
    assert_true(tn_numerics_enabled());
    tn_tensor *y = tn_mul(x, x), *loss = tn_sum(y);
    assert_int_equal(tn_backward(loss, NULL, false), TN_OK);
    assert_int_equal(tn_sgd_step(opt), TN_OK);
    assert_int_equal(tn_numerics_end(), TN_OK);
    assert_false(tn_numerics_enabled());
    char *s = slurp(path);
    assert_non_null(strstr(s, "{\"format\":\"tenet-numerics\",\"version\":1,"));
    /* mul: its call site, inputs, output summary, and the node it made */
    const char *mul = strstr(s, "{\"k\":\"op\",\"t\":0,\"seq\":1,\"name\":\"mul\",\"site\":\"");
    assert_non_null(mul);
    assert_non_null(strstr(mul, "tests/test_numerics.c:"));
    assert_non_null(strstr(mul,
                           "\"out\":[{\"shape\":[2,3],\"dtype\":\"float32\",\"device\":\"cpu\","
                           "\"min\":1,\"max\":36,\"mean\":15.166666666666666,"));
    assert_non_null(strstr(s, "\"name\":\"MulBackward0\""));
    assert_int_equal(count(s, "\"k\":\"op\""), 2);
    assert_int_equal(count(s, "\"k\":\"node\""), 2);
    assert_int_equal(count(s, "\"k\":\"update\""), 1);
    /* the node's number in the op's record and in the node's */
    const char *link = strstr(mul, "\"node\":");
    assert_non_null(link);
    char key[64];
    snprintf(key, sizeof key, "\"name\":\"MulBackward0\",\"site\"");
    assert_non_null(strstr(s, key));
    long id = strtol(link + 7, NULL, 10);
    snprintf(key, sizeof key, "\"node\":%ld,\"in\"", id);
    assert_non_null(strstr(s, key));
    free(s);
    remove(path);
    tn_sgd_free(opt);
    tn_release(loss);
    tn_release(y);
    tn_release(x);
}

static void test_nonfinite_summary(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "nonfinite");
    tn_tensor *x = tt_f32(1, (const int64_t[]){4}, (const float[]){1, NAN, INFINITY, -2}, false);
    assert_int_equal(tn_numerics_begin(path, &(tn_numerics_options){.no_sites = true}), TN_OK);
    tn_tensor *y = tn_mul_scalar(x, 1);
    assert_int_equal(tn_numerics_end(), TN_OK);
    char *s = slurp(path);
    assert_null(strstr(s, "\"site\""));
    assert_non_null(strstr(s, "\"out\":[{\"shape\":[4],\"dtype\":\"float32\",\"device\":\"cpu\","
                              "\"min\":-2,\"max\":\"inf\",\"mean\":\"inf\",\"l2\":\"inf\","
                              "\"amax\":\"inf\",\"nan\":1,\"inf\":1,"));
    free(s);
    remove(path);
    tn_release(y);
    tn_release(x);
}

static void test_filter_saves_tensors(void **state) {
    (void)state;
    char path[256], file[400], dir[300];
    tmp_path(path, sizeof path, "filter");
    tn_tensor *a = tt_f32(2, S23, (const float[]){1, 2, 3, 4, 5, 6}, false);
    tn_tensor *b = tt_f32(2, S23, (const float[]){6, 5, 4, 3, 2, 1}, false);
    assert_int_equal(tn_numerics_begin(path, &(tn_numerics_options){.tensors = "sub,mul"}), TN_OK);
    tn_tensor *s1 = tn_add(a, b), *s2 = tn_mul(a, b);
    assert_int_equal(tn_numerics_end(), TN_OK);
    char *s = slurp(path);
    assert_int_equal(count(s, "\"file\":"), 1); /* mul's, not add's */
    assert_non_null(strstr(s, "\"file\":\"tenet_numerics_filter_"));
    snprintf(file, sizeof file, "%s.tensors/0-2.safetensors", path);
    tn_state_dict *sd = tn_load(file);
    assert_non_null(sd);
    assert_true(tn_state_dict_contains(sd, "in0") && tn_state_dict_contains(sd, "in1") &&
                tn_state_dict_contains(sd, "out0"));
    tn_state_dict_free(sd);
    free(s);
    remove(file);
    snprintf(dir, sizeof dir, "%s.tensors", path);
    rmdir(dir);
    remove(path);
    tn_release(s1);
    tn_release(s2);
    tn_release(a);
    tn_release(b);
}

static void test_session_errors(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "errors");
    tt_assert_error(tn_numerics_begin(NULL, NULL), "path is NULL");
    tt_assert_error(tn_numerics_end(), "not running");
    tt_assert_error(tn_numerics_begin("/nonexistent-dir/x.jsonl", NULL), "cannot open");
    assert_int_equal(tn_numerics_begin(path, NULL), TN_OK);
    tt_assert_error(tn_numerics_begin(path, NULL), "is running");
    assert_int_equal(tn_numerics_end(), TN_OK);
    remove(path);
}

#define THREADS 4
#define OPS 50

static void *worker(void *arg) {
    tn_tensor *x = arg;
    for (int i = 0; i < OPS; i++)
        tn_release(tn_mul_scalar(x, 2.0));
    return NULL;
}

/* Four threads record at once, each into its own numbering. */
static void test_threads(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "threads");
    tn_tensor *x = tt_f32(2, S23, (const float[]){1, 2, 3, 4, 5, 6}, false);
    assert_int_equal(tn_numerics_begin(path, NULL), TN_OK);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, worker, x), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    assert_int_equal(tn_numerics_end(), TN_OK);
    char *s = slurp(path), key[64];
    assert_int_equal(count(s, "\"k\":\"op\""), THREADS * OPS);
    for (int t = 0; t < THREADS; t++) {
        snprintf(key, sizeof key, "\"t\":%d,\"seq\":%d,", t, OPS);
        assert_int_equal(count(s, key), 1);
        snprintf(key, sizeof key, "\"t\":%d,\"seq\":%d,", t, OPS + 1);
        assert_int_equal(count(s, key), 0);
    }
    free(s);
    remove(path);
    tn_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_records_ops_nodes_updates),
        TT_TEST(test_nonfinite_summary),
        TT_TEST(test_filter_saves_tensors),
        TT_TEST(test_session_errors),
        TT_TEST(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
