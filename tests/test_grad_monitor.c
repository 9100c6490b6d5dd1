/* The gradient health monitor (include/tenet/debug.h): what it measures, in
 * which order, which entry raises the alarm, the names of watched leaves,
 * the forward backtrace of the culprit, reports per thread, errors. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/backend.h"

#define NOINLINE __attribute__((noinline))
static volatile int sink;

static const int64_t S23[] = {2, 3}, S3[] = {3};

static tn_tensor *leaf(int nd, const int64_t *shape, const double *v) {
    return tt_f64(nd, shape, v, true);
}

/* loss = sum(1000 * (x * w)) + sum(v * 0): MulBackward0 (the scalar) makes a
 * gradient of norm 1000 sqrt(6); v's gradient is all zeros. Kept in a frame
 * of its own so that the alarm's forward trace can be checked. */
static NOINLINE tn_tensor *forward(tn_tensor *x, tn_tensor *w, tn_tensor *v) {
    tn_tensor *big = tn_mul_scalar(tn_mul(x, w), 1000);
    tn_tensor *loss = tn_add(tn_sum(big), tn_sum(tn_mul_scalar(v, 0)));
    sink++;
    return loss;
}

static void one_pass(bool anomaly, double explode, double vanish) {
    tn_tensor *x = tt_f64(2, S23, (const double[]){1, 2, 3, 4, 5, 6}, false);
    tn_tensor *w = leaf(1, S3, (const double[]){0.5, -1, 2});
    tn_tensor *v = leaf(1, S3, (const double[]){1, 1, 1});
    tn_set_detect_anomaly(anomaly, false);
    tn_tensor *loss = forward(x, w, v);
    tn_set_detect_anomaly(false, false);
    assert_int_equal(
        tn_grad_monitor_watch(2, (const char *const[]){"w", "v"}, (tn_tensor *const[]){w, v}),
        TN_OK);
    tn_set_grad_monitor(true, explode, vanish);
    assert_int_equal(tn_backward(loss, NULL, false), TN_OK);
    tn_set_grad_monitor(false, 0, 0);
}

static void test_entries_in_backward_order(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    one_pass(false, 0, 0);
    const tn_grad_monitor_report *r = tn_last_grad_monitor();
    assert_non_null(r);
    /* nodes as they run (latest first), then the leaves of the pass */
    int input;
    double norm, mx;
    tn_grad_health h;
    int n = tn_grad_monitor_count(r), mul_scalar = -1, leaf_w = -1, leaf_v = -1;
    for (int i = 0; i < n; i++) {
        const char *name = tn_grad_monitor_entry(r, i, &input, &norm, &mx, &h);
        assert_non_null(name);
        /* no thresholds: only an all-zero leaf (v) is flagged */
        assert_int_equal(h, strcmp(name, "v") ? TN_GRAD_OK : TN_GRAD_VANISHING);
        if (!strcmp(name, "MulBackward0") && mul_scalar < 0 && fabs(norm - 1000 * sqrt(6)) < 1e-9)
            mul_scalar = i;
        if (!strcmp(name, "w")) leaf_w = i, assert_int_equal(input, -1);
        if (!strcmp(name, "v")) leaf_v = i;
    }
    assert_true(mul_scalar >= 0 && leaf_w > mul_scalar && leaf_v > mul_scalar);
    /* w's gradient: 1000 x summed over rows = 1000 [5, 7, 9] */
    tn_grad_monitor_entry(r, leaf_w, &input, &norm, &mx, &h);
    assert_true(fabs(norm - 1000 * sqrt(25.0 + 49 + 81)) < 1e-6 && mx == 9000);
    assert_int_equal(tn_grad_monitor_first_alarm(r), leaf_v); /* all zeros: vanishing */
    tn_grad_monitor_entry(r, leaf_v, NULL, &norm, &mx, &h);
    assert_true(norm == 0 && mx == 0 && h == TN_GRAD_VANISHING);
    assert_null(tn_grad_monitor_entry(r, n, NULL, NULL, NULL, NULL));
    tt_assert_error(TN_ERR_INDEX, "no entry");
    assert_int_equal(tn_grad_monitor_watch(0, NULL, NULL), TN_OK);
    tn_scope_end();
}

/* The first node over the explode threshold, with the forward call that
 * made it when anomaly mode recorded the graph. */
static void test_exploding_names_node_and_forward_call(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    one_pass(true, 100, 0);
    const tn_grad_monitor_report *r = tn_last_grad_monitor();
    int a = tn_grad_monitor_first_alarm(r), input;
    double norm;
    tn_grad_health h;
    assert_true(a >= 0);
    assert_string_equal(tn_grad_monitor_entry(r, a, &input, &norm, NULL, &h), "MulBackward0");
    assert_int_equal(h, TN_GRAD_EXPLODING);
    assert_true(fabs(norm - 1000 * sqrt(6)) < 1e-9);
    int nf;
    const tn_frame *f = tn_grad_monitor_alarm_trace(r, &nf);
    assert_true(nf > 0);
    assert_non_null(f[0].function);
    assert_string_equal(f[0].function, "forward");
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_int_equal(tn_grad_monitor_print(r, mem), TN_OK);
    fclose(mem);
    assert_non_null(strstr(buf, "first alarm: EXPLODING gradient in MulBackward0 (input 0)"));
    assert_non_null(strstr(buf, "#0 forward (tests/test_grad_monitor.c:"));
    assert_non_null(strstr(buf, "v ")); /* the table's rows */
    assert_non_null(strstr(buf, "VANISHING"));
    free(buf);
    /* the same without anomaly mode: no trace, the print says how to get one */
    one_pass(false, 100, 0);
    r = tn_last_grad_monitor();
    tn_grad_monitor_alarm_trace(r, &nf);
    assert_int_equal(nf, 0);
    mem = open_memstream(&buf, &len);
    tn_grad_monitor_print(r, mem);
    fclose(mem);
    assert_non_null(strstr(buf, "turn anomaly mode on"));
    free(buf);
    assert_int_equal(tn_grad_monitor_watch(0, NULL, NULL), TN_OK);
    tn_scope_end();
}

/* Off: a pass leaves the last report alone; unwatched leaves are named by
 * shape; a small-norm threshold flags a leaf under it. */
static void test_off_and_unwatched(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    one_pass(false, 0, 0);
    const tn_grad_monitor_report *before = tn_last_grad_monitor();
    tn_tensor *w = leaf(1, S3, (const double[]){1, 2, 3});
    assert_int_equal(tn_backward(tn_sum(tn_mul(w, w)), NULL, false), TN_OK);
    assert_ptr_equal(tn_last_grad_monitor(), before); /* monitor off */
    assert_int_equal(tn_grad_monitor_watch(0, NULL, NULL), TN_OK);
    tn_set_grad_monitor(true, 0, 100.0);
    assert_true(tn_is_grad_monitor_enabled());
    assert_int_equal(tn_backward(tn_sum(tn_mul(w, w)), NULL, false), TN_OK);
    tn_set_grad_monitor(false, 0, 0);
    const tn_grad_monitor_report *r = tn_last_grad_monitor();
    int a = tn_grad_monitor_first_alarm(r);
    tn_grad_health h;
    double norm;
    assert_string_equal(tn_grad_monitor_entry(r, a, NULL, &norm, NULL, &h), "leaf [3]");
    assert_true(h == TN_GRAD_VANISHING && fabs(norm - 2 * sqrt(14)) < 1e-12);
    tn_scope_end();
}

/* A failed pass publishes nothing; functional passes are not monitored. */
static void test_failed_and_functional_passes(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    one_pass(false, 0, 0);
    const tn_grad_monitor_report *before = tn_last_grad_monitor();
    tn_tensor *a = leaf(1, S3, (const double[]){1, 2, 3});
    tn_tensor *out = tn_sigmoid(a);
    tn_tensor *d = tn_detach(out);
    assert_int_equal(tn_zero_(d), TN_OK);
    tn_set_grad_monitor(true, 1, 0);
    assert_int_equal(tn_backward(tn_sum(out), NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_ptr_equal(tn_last_grad_monitor(), before);
    tn_tensor *g = NULL;
    tn_tensor *b = leaf(1, S3, (const double[]){1, 2, 3});
    assert_int_equal(tn_autograd_grad(1, (tn_tensor *[]){tn_sum(tn_mul(b, b))}, NULL, 1,
                                      (tn_tensor *[]){b}, &g, false, false),
                     TN_OK);
    assert_ptr_equal(tn_last_grad_monitor(), before);
    tn_set_grad_monitor(false, 0, 0);
    assert_int_equal(tn_grad_monitor_watch(0, NULL, NULL), TN_OK);
    tn_scope_end();
}

static void test_watch_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = leaf(1, S3, (const double[]){1, 2, 3});
    tn_clear_error();
    assert_int_equal(tn_grad_monitor_watch(-1, NULL, NULL), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_grad_monitor_watch(1, NULL, (tn_tensor *const[]){w}),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "'names' is NULL");
    tn_clear_error();
    assert_int_equal(tn_grad_monitor_watch(1, (const char *const[]){NULL}, (tn_tensor *const[]){w}),
                     TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(
        tn_grad_monitor_watch(1, (const char *const[]){"w"}, (tn_tensor *const[]){NULL}),
        TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "params[0] is NULL");
    tn_clear_error();
    assert_int_equal(tn_grad_monitor_print(NULL, stderr), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_grad_monitor_count(NULL), 0);
    assert_int_equal(tn_grad_monitor_first_alarm(NULL), -1);
    tn_scope_end();
}

/* Reports are per thread: each thread's backward gets its own, while
 * another thread replaces the watch list. */
typedef struct worker {
    pthread_t tid;
    double scale;
    int ok;
} worker;

static void *worker_main(void *arg) {
    worker *wk = arg;
    for (int it = 0; it < 50; it++) {
        if (tn_scope_begin() != TN_OK) return NULL;
        tn_tensor *w = tt_f64(1, S3, (const double[]){1, 2, 3}, true);
        tn_status st = tn_backward(tn_sum(tn_mul_scalar(w, wk->scale)), NULL, false);
        const tn_grad_monitor_report *r = tn_last_grad_monitor();
        int n = tn_grad_monitor_count(r);
        double norm = -1;
        if (st == TN_OK && n > 0) tn_grad_monitor_entry(r, n - 1, NULL, &norm, NULL, NULL);
        wk->ok += st == TN_OK && fabs(norm - wk->scale * sqrt(3)) < 1e-9;
        tn_scope_end();
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    tn_set_grad_monitor(true, 0, 0);
    worker wk[3] = {{.scale = 1}, {.scale = 2}, {.scale = 3}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&wk[i].tid, NULL, worker_main, &wk[i]), 0);
    for (int it = 0; it < 50; it++) { /* the watch list changes under them */
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *p = tt_f64(1, S3, (const double[]){1, 2, 3}, true);
        assert_int_equal(
            tn_grad_monitor_watch(1, (const char *const[]){"p"}, (tn_tensor *const[]){p}), TN_OK);
        tn_scope_end();
    }
    for (int i = 0; i < 3; i++)
        pthread_join(wk[i].tid, NULL);
    tn_set_grad_monitor(false, 0, 0);
    assert_int_equal(tn_grad_monitor_watch(0, NULL, NULL), TN_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(wk[i].ok, 50);
}

/* The CPU backend's grad_stats (the monitor's and clip_grad_norm_'s measure) against plain
 * loops: sums within rounding, exact maxima, the same bits for 1 and 2 threads, a NaN, float64,
 * refused arguments. Sizes: empty, one element, and past the first blocks and the block cap. */
static void test_cpu_grad_stats(void **state) {
    (void)state;
    const tn_backend *cpu = tn__backends[TN_CPU];
    enum { K = 6 };
    const int64_t n[K] = {0, 1, 37, 40000, 300001, 3000017};
    float *h[K];
    const void *p[K];
    for (int k = 0; k < K; k++) {
        h[k] = malloc((size_t)(n[k] ? n[k] : 1) * sizeof(float));
        for (int64_t i = 0; i < n[k]; i++)
            h[k][i] = (float)((double)((i * 7919 + k * 131) % 2001 - 1000) / 64.0);
        p[k] = h[k];
    }
    double got[2 * K], again[2 * K];
    const int threads = tn_get_num_threads();
    tn_set_num_threads(2);
    assert_int_equal(cpu->grad_stats(0, TN_F32, K, p, n, got), TN_OK);
    for (int k = 0; k < K; k++)
        tt_assert_sq_max(h[k], n[k], &got[2 * k]);
    tn_set_num_threads(1);
    assert_int_equal(cpu->grad_stats(0, TN_F32, K, p, n, again), TN_OK);
    tn_set_num_threads(threads);
    assert_memory_equal(got, again, sizeof got);
    h[5][2999999] = NAN; /* in the last block */
    assert_int_equal(cpu->grad_stats(0, TN_F32, 1, &p[5], &n[5], got), TN_OK);
    assert_true(isnan(got[0]) && isnan(got[1]));
    const double hv[3] = {3, -4, 0.5};
    const void *pv = hv;
    const int64_t n3 = 3;
    assert_int_equal(cpu->grad_stats(0, TN_F64, 1, &pv, &n3, got), TN_OK);
    assert_true(got[0] == 25.25 && got[1] == 4);
    assert_int_equal(cpu->grad_stats(0, TN_I32, 1, &pv, &n3, got), TN_ERR_DTYPE);
    assert_int_equal(cpu->grad_stats(0, TN_F64, TN_GRAD_STATS_MAX + 1, p, n, got),
                     TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(cpu->grad_stats(0, TN_F64, 1, &pv, &n3, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(cpu->grad_stats(0, TN_F64, 0, NULL, NULL, NULL), TN_OK);
    for (int k = 0; k < K; k++)
        free(h[k]);
}

/* sum(x * w) for float32 x (2, 3) of value v and a float32 leaf w = {0.5, -1, 2}: w's gradient is
 * x's column sums, {2 v, 2 v, 2 v}. */
static tn_tensor *f32_loss(float v, tn_tensor **w) {
    float xv[6] = {v, v, v, v, v, v};
    tn_tensor *x = tt_f32(2, S23, xv, false);
    *w = tt_f32(1, S3, (const float[]){0.5f, -1, 2}, true);
    return tn_sum(tn_mul(x, *w));
}

/* The pass of a loss scaled by the gradient scaler: its norms are the true gradients' (the
 * thresholds judge those), gradients that overflow at the scale are OVERFLOW without an alarm or
 * a warning, the table shows the scale and the steps the scaler skipped, and a scale of 1 that
 * overflows explodes. */
static void test_scaled_loss(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w;
    tn_tensor *loss = f32_loss(3, &w);
    tn_grad_scaler *sc = tn_grad_scaler_new(1024, 2, 0.5, 2000, true);
    assert_non_null(sc);
    tn_set_grad_monitor(true, 100, 0); /* 100: under the scaled norms, above the true ones */
    assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, loss), NULL, false), TN_OK);
    const tn_grad_monitor_report *r = tn_last_grad_monitor();
    double scale, norm;
    int64_t skipped, steps;
    assert_true(tn_grad_monitor_loss_scale(r, &scale, &skipped, &steps));
    assert_true(scale == 1024 && skipped == 0 && steps == 0);
    assert_int_equal(tn_grad_monitor_first_alarm(r), -1);
    int n = tn_grad_monitor_count(r), input;
    tn_grad_health h;
    assert_string_equal(tn_grad_monitor_entry(r, n - 1, &input, &norm, NULL, &h), "leaf [3]");
    assert_true(input == -1 && h == TN_GRAD_OK && fabs(norm - 6 * sqrt(3)) < 1e-9);
    /* a pass of an unscaled loss is not scaled */
    assert_int_equal(tn_backward(tn_sum(tn_mul(w, w)), NULL, false), TN_OK);
    assert_false(tn_grad_monitor_loss_scale(tn_last_grad_monitor(), &scale, NULL, NULL));
    assert_true(scale == 1.0);

    /* 1e36 * 2 * 1024 overflows float32: OVERFLOW, the step skipped, the scale halved */
    assert_int_equal(tn_zero_grad(w), TN_OK);
    tn_tensor *big = f32_loss(1e36f, &w);
    tn_sgd *opt = tn_sgd_new(1, &w, 0.1, 0, 0);
    tt_capture cap;
    tt_capture_begin(&cap);
    assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, big), NULL, false), TN_OK);
    r = tn_last_grad_monitor();
    const char *err = tt_capture_end(&cap);
    if (strstr(err, "gradient monitor")) print_error("%s\n", err);
    assert_null(strstr(err, "gradient monitor")); /* no warning */
    assert_int_equal(tn_grad_monitor_first_alarm(r), -1);
    n = tn_grad_monitor_count(r);
    int overflowed = 0, first = -1;
    for (int i = 0; i < n; i++) {
        tn_grad_monitor_entry(r, i, &input, &norm, NULL, &h);
        if (h == TN_GRAD_OVERFLOW && first < 0) first = i;
        overflowed += h == TN_GRAD_OVERFLOW;
    }
    assert_int_equal(overflowed, 2); /* MulBackward0's gradient for w, and w's */
    assert_string_equal(tn_grad_monitor_entry(r, first, &input, NULL, NULL, NULL), "MulBackward0");
    assert_int_equal(input, 1);
    bool stepped = true;
    assert_int_equal(tn_grad_scaler_step(sc, tn_sgd_optimizer(opt), &stepped), TN_OK);
    assert_false(stepped);
    assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
    int64_t in_row;
    assert_int_equal(tn_grad_scaler_skipped_steps(sc, &steps, &in_row), 1);
    assert_true(steps == 1 && in_row == 1);
    /* the next scaled pass's table */
    assert_int_equal(tn_zero_grad(w), TN_OK);
    assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, f32_loss(1e36f, &w)), NULL, false),
                     TN_OK);
    r = tn_last_grad_monitor();
    assert_true(tn_grad_monitor_loss_scale(r, &scale, &skipped, &steps));
    assert_true(scale == 512 && skipped == 1 && steps == 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_int_equal(tn_grad_monitor_print(r, mem), TN_OK);
    fclose(mem);
    assert_non_null(strstr(buf, "loss scaled by 512 (gradient scaler): the norms are divided by "
                                "it; 1 of 1 steps skipped so far, the last 1 in a row"));
    assert_non_null(strstr(buf, "OVERFLOW at this scale, first in MulBackward0 (input 1)"));
    assert_non_null(strstr(buf, "no gradient crossed a threshold"));
    free(buf);

    /* at a scale of 1 nothing was scaled into overflow: it explodes */
    tn_grad_scaler *one = tn_grad_scaler_new(1, 2, 0.5, 2000, true);
    tt_capture_begin(&cap);
    assert_int_equal(tn_backward(tn_grad_scaler_scale(one, f32_loss(3e38f, &w)), NULL, false),
                     TN_OK);
    r = tn_last_grad_monitor();
    err = tt_capture_end(&cap);
    assert_non_null(strstr(err, "gradient monitor: exploding gradient in MulBackward0"));
    int a = tn_grad_monitor_first_alarm(r);
    assert_true(a >= 0);
    tn_grad_monitor_entry(r, a, NULL, NULL, NULL, &h);
    assert_int_equal(h, TN_GRAD_EXPLODING);
    tn_set_grad_monitor(false, 0, 0);

    /* errors */
    assert_int_equal(tn_grad_scaler_skipped_steps(NULL, &steps, NULL), -1);
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    assert_false(tn_grad_monitor_loss_scale(NULL, &scale, &skipped, NULL));
    assert_true(scale == 1.0 && skipped == 0);
    tn_grad_scaler_free(one);
    tn_sgd_free(opt);
    tn_grad_scaler_free(sc);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_entries_in_backward_order),
        TT_TEST(test_exploding_names_node_and_forward_call),
        TT_TEST(test_off_and_unwatched),
        TT_TEST(test_failed_and_functional_passes),
        TT_TEST(test_watch_errors),
        TT_TEST(test_threads),
        TT_TEST(test_cpu_grad_stats),
        TT_TEST(test_scaled_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
