/* tests/test_threads.c — the concurrency contract (include/tenet/threads.h,
 * docs/threads.md) at small scale: exact concurrent accumulation, one of N
 * backward calls through a graph without retain_graph, thread-local grad
 * mode, and the race detector (API, a planted overlap caught
 * deterministically, silence where nothing overlaps). Workers never call
 * cmocka: they record results and the main thread asserts. The long runs
 * are the stress/ programs. */
#define _GNU_SOURCE /* pthread barriers, pthread_setname_np, gettid */
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug/race.h"
#include "engine/core/device.h"

#define NT 4
#define SECOND_TIME "Trying to backward through the graph a second time"

typedef struct job {
    pthread_barrier_t *bar;
    tn_tensor *w, *loss;
    int passes;
    bool retain;
    tn_status st[64];
    char err[128];
    bool flag;
} job;

static void run_threads(void *(*fn)(void *), job *jobs, int n) {
    pthread_t th[NT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        jobs[i].bar = &bar;
        assert_int_equal(pthread_create(&th[i], NULL, fn, &jobs[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
}

static void assert_all(const tn_tensor *t, double want) {
    int64_t n = tn_numel(t), bad = -1;
    double *v = malloc((size_t)n * sizeof *v), got = 0;
    assert_non_null(v);
    assert_int_equal(tn_copy_to_f64(t, v, n), TN_OK);
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (v[i] != want) got = v[bad = i];
    free(v);
    if (bad >= 0) fail_msg("element %lld: %.17g, want exactly %.17g", (long long)bad, got, want);
}

/* ---- exact concurrent accumulation ------------------------------------------ */

static void *accumulate_thread(void *p) {
    job *j = p;
    pthread_barrier_wait(j->bar);
    for (int i = 0; i < j->passes; i++) {
        if ((j->st[i] = tn_scope_begin()) != TN_OK) continue; /* no cmocka in workers */
        tn_tensor *loss = tn_sum(tn_mul_scalar(j->w, 2.0));
        j->st[i] = loss ? tn_backward(loss, NULL, false) : tn_last_status();
        tn_scope_end();
    }
    return NULL;
}

static void accumulation_is_exact(int64_t n, tn_dtype dt) {
    int64_t shape[] = {n};
    tn_tensor *w = tn_full(1, shape, dt, 0.25);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    job jobs[NT];
    for (int i = 0; i < NT; i++)
        jobs[i] = (job){.w = w, .passes = 50};
    run_threads(accumulate_thread, jobs, NT);
    for (int i = 0; i < NT; i++)
        for (int k = 0; k < 50; k++)
            assert_int_equal(jobs[i].st[k], TN_OK);
    tn_tensor *g = tn_grad(w);
    assert_non_null(g);
    assert_all(g, 2.0 * NT * 50); /* N threads x M passes x 2 */
    tn_release(g);
    tn_release(w);
}

static void concurrent_accumulation_small(void **state) { accumulation_is_exact(37, TN_F32); }
/* above the OpenMP grain: the adds fork inside each user thread */
static void concurrent_accumulation_large(void **state) { accumulation_is_exact(40000, TN_F64); }

/* ---- one shared graph -------------------------------------------------------- */

static void *shared_graph_thread(void *p) {
    job *j = p;
    pthread_barrier_wait(j->bar);
    j->st[0] = tn_backward(j->loss, NULL, j->retain);
    snprintf(j->err, sizeof j->err, "%s", tn_last_error());
    return NULL;
}

static void shared_graph_round(bool retain) {
    int64_t shape[] = {5};
    tn_tensor *w = tn_full(1, shape, TN_F64, 0.5);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *loss = tn_keep(tn_sum(tn_mul(w, w))); /* mul saves w twice */
    tn_scope_end();
    job jobs[NT];
    for (int i = 0; i < NT; i++)
        jobs[i] = (job){.loss = loss, .retain = retain};
    run_threads(shared_graph_thread, jobs, NT);
    int ok = 0;
    for (int i = 0; i < NT; i++) {
        if (jobs[i].st[0] == TN_OK)
            ok++;
        else if (!strstr(jobs[i].err, SECOND_TIME))
            fail_msg("unexpected error: %s", jobs[i].err);
    }
    assert_int_equal(ok, retain ? NT : 1);
    tn_tensor *g = tn_grad(w);
    assert_all(g, retain ? NT : 1.0); /* d(w*w)/dw = 2w = 1 per successful pass */
    tn_release(g);
    tn_release(loss);
    tn_release(w);
}

static void one_of_n_without_retain_graph(void **state) {
    for (int r = 0; r < 20; r++)
        shared_graph_round(false);
}

static void all_of_n_with_retain_graph(void **state) {
    for (int r = 0; r < 5; r++)
        shared_graph_round(true);
}

/* ---- grad mode --------------------------------------------------------------- */

static void *grad_mode_thread(void *p) {
    job *j = p;
    j->flag = tn_is_grad_enabled(); /* a new thread starts enabled */
    if ((j->st[0] = tn_scope_begin()) != TN_OK) return NULL; /* no cmocka in workers */
    tn_tensor *y = tn_mul_scalar(j->w, 3.0);
    j->st[0] = y && tn_requires_grad(y) ? TN_OK : TN_ERR_INTERNAL;
    tn_set_grad_enabled(false); /* does not leak to the main thread */
    tn_scope_end();
    return NULL;
}

static void grad_mode_is_per_thread(void **state) {
    int64_t shape[] = {2};
    tn_tensor *w = tn_ones(1, shape, TN_F32);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    job j = {.w = w};
    run_threads(grad_mode_thread, &j, 1);
    assert_true(j.flag);
    assert_int_equal(j.st[0], TN_OK);
    assert_false(tn_is_grad_enabled());
    tn_set_grad_enabled(true);
    run_threads(grad_mode_thread, &j, 1);
    assert_true(tn_is_grad_enabled());
    tn_set_grad_enabled(prev);
    tn_release(w);
}

/* ---- race detector ------------------------------------------------------------ */

static void race_api(void **state) {
    bool was = tn_is_detect_races_enabled();
    tn_set_detect_races(true);
    assert_true(tn_is_detect_races_enabled());
    tn_race_reports_reset();
    assert_int_equal(tn_race_reports(), 0);
    char buf[16] = "x";
    assert_int_equal(tn_race_last_report(buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    tn_set_detect_races(false);
    assert_false(tn_is_detect_races_enabled());
    tn_set_detect_races(was);
}

/* A thread that holds an access to t open (as a kernel in flight) until
 * the main thread has made its own access. */
typedef struct holder {
    pthread_barrier_t *bar;
    tn_tensor *t;
    bool write;
    pid_t tid; /* out: the holding thread's OS id */
} holder;

static void *hold_access(void *p) {
    holder *h = p;
    pthread_setname_np(pthread_self(), "holder-1");
    h->tid = gettid();
    tn_race_access ra;
    const tn_tensor *ops[2] = {h->t, h->t};
    /* operand 0 is the write; a read-only access passes t as operand 1 of a
     * scratch output */
    tn_tensor *scratch = h->write ? NULL : tn_empty(0, NULL, TN_F32);
    if (!h->write) ops[0] = scratch;
    tn__race_note(h, 2, ops);
    /* the out-of-line half, so that this frame (not an inlined helper) is
     * the one the report shows */
    ra.n = 0;
    tn__race_begin_slow(&ra, h, "test");
    pthread_barrier_wait(h->bar); /* in flight */
    pthread_barrier_wait(h->bar); /* the main thread's access is done */
    tn__race_end(&ra);
    tn_release(scratch);
    return NULL;
}

/* Runs `access` on the main thread while another thread holds a (write or
 * read) access to held; returns the number of reports it caused. */
static pid_t g_holder_tid; /* the last overlap's holding thread */

static uint64_t overlap(tn_tensor *held, bool held_write, void (*access)(void *), void *arg,
                        char *report, size_t n) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    holder h = {&bar, held, held_write, 0};
    tn_race_reports_reset();
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hold_access, &h), 0);
    pthread_barrier_wait(&bar);
    access(arg);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    g_holder_tid = h.tid;
    tn_race_last_report(report, n);
    return tn_race_reports();
}

static void add_one_(void *t) { assert_int_equal(tn_add_scalar_(t, 1.0), TN_OK); }
static void read_sum(void *t) {
    tn_tensor *y = tn_mul_scalar(t, 2.0);
    assert_non_null(y);
    tn_release(y);
}

static void race_detector_catches_planted_overlap(void **state) {
    int64_t shape[] = {64};
    tn_tensor *x = tn_zeros(1, shape, TN_F32);
    tn_set_race_report_stream(NULL);
    tn_set_detect_races(true);
    char rep[8192], want[256], me[16];
    assert_int_equal(pthread_getname_np(pthread_self(), me, sizeof me), 0);
    /* write while another thread writes */
    assert_int_equal(overlap(x, true, add_one_, x, rep, sizeof rep), 1);
    assert_non_null(strstr(rep, "race detected"));
    /* threads as gdb, top and TSan name them; the op as the user called it
     * (tn_add_scalar_, whose frame the library keeps: no sibling calls) */
    snprintf(want, sizeof want,
             "  write by thread %d \"%s\" in add_scalar_ [elementwise kernel], "
             "called from:\n",
             (int)getpid(), me);
    if (!strstr(rep, want)) fail_msg("report\n%s\nlacks\n%s", rep, want);
    snprintf(want, sizeof want, "  write by thread %d \"holder-1\" in ", (int)g_holder_tid);
    if (!strstr(rep, want)) fail_msg("report\n%s\nlacks\n%s", rep, want);
    assert_non_null(strstr(rep, "[test kernel] (in flight), called from:"));
    assert_null(strstr(rep, "unary_"));
    assert_non_null(strstr(rep, "hold_access")); /* the other thread's stack */
    assert_non_null(strstr(rep, "add_one_"));    /* ours */
    assert_non_null(strstr(rep, "test_threads.c:"));
    /* read while another thread writes, write while another reads */
    assert_int_equal(overlap(x, true, read_sum, x, rep, sizeof rep), 1);
    snprintf(want, sizeof want, "  read by thread %d \"%s\" in mul_scalar [elementwise kernel]",
             (int)getpid(), me);
    if (!strstr(rep, want)) fail_msg("report\n%s\nlacks\n%s", rep, want);
    assert_int_equal(overlap(x, false, add_one_, x, rep, sizeof rep), 1);
    /* through views: an overlapping narrow of the held tensor */
    tn_tensor *v = tn_narrow(x, 0, 10, 20);
    assert_int_equal(overlap(x, true, add_one_, v, rep, sizeof rep), 1);
    tn_set_detect_races(false);
    tn_set_race_report_stream(stderr);
    tn_race_reports_reset();
    tn_release(v);
    tn_release(x);
}

static void race_detector_silent_without_overlap(void **state) {
    int64_t shape[] = {64};
    tn_tensor *x = tn_zeros(1, shape, TN_F32);
    tn_tensor *lo = tn_narrow(x, 0, 0, 32), *hi = tn_narrow(x, 0, 32, 32);
    tn_set_race_report_stream(NULL);
    tn_set_detect_races(true);
    char rep[256];
    assert_int_equal(overlap(x, false, read_sum, x, rep, sizeof rep), 0);  /* read / read */
    assert_int_equal(overlap(lo, true, add_one_, hi, rep, sizeof rep), 0); /* disjoint */
    add_one_(x);                                                           /* alone */
    assert_int_equal(tn_race_reports(), 0);
    tn_set_detect_races(false); /* off: nothing is tracked */
    assert_int_equal(overlap(x, true, add_one_, x, rep, sizeof rep), 0);
    tn_set_race_report_stream(stderr);
    tn_release(lo);
    tn_release(hi);
    tn_release(x);
}

/* The matmul hook: C written, A and B read (the driver notes its tensors). */
typedef struct mm_args {
    tn_tensor *a, *b, *c;
} mm_args;

static void gemm_into(void *p) {
    mm_args *m = p;
    tn_gemm g = {.m = 2,
                 .n = 2,
                 .k = 3,
                 .a = tn_data_ptr(m->a),
                 .rsa = 3,
                 .csa = 1,
                 .b = tn_data_ptr(m->b),
                 .rsb = 2,
                 .csb = 1,
                 .c = tn_data_ptr(m->c),
                 .rsc = 2};
    /* the dispatcher brackets the kernel for the race detector */
    assert_int_equal(tn__dev_gemm(TN_F32, &g, NULL, TN_DEVICE_CPU, 3,
                                  (const tn_tensor *const[]){m->c, m->a, m->b}),
                     TN_OK);
}

static void race_detector_matmul_hook(void **state) {
    int64_t sa[] = {2, 3}, sb[] = {3, 2}, sc[] = {2, 2};
    mm_args m = {tn_ones(2, sa, TN_F32), tn_ones(2, sb, TN_F32), tn_zeros(2, sc, TN_F32)};
    tn_set_race_report_stream(NULL);
    tn_set_detect_races(true);
    char rep[8192];
    assert_int_equal(overlap(m.b, true, gemm_into, &m, rep, sizeof rep), 1); /* B read */
    assert_non_null(strstr(rep, "[matmul kernel]"));
    assert_int_equal(overlap(m.c, false, gemm_into, &m, rep, sizeof rep), 1); /* C written */
    assert_int_equal(overlap(m.a, false, gemm_into, &m, rep, sizeof rep), 0); /* both read */
    tn_set_detect_races(false);
    tn_set_race_report_stream(stderr);
    tn_race_reports_reset();
    assert_all(m.c, 3.0);
    tn_release(m.a);
    tn_release(m.b);
    tn_release(m.c);
}

/* The gradients' measure (clip_grad_norm_, the gradient monitor: core's tn__dev_grad_stats):
 * every tensor is registered as read, past the TN_RACE_MAX_OPS operands of one bracket, and the
 * results are the same with the detector on. */
typedef struct stats_args {
    tn_tensor *t[6];
    double out[12];
} stats_args;

static void measure_all(void *p) {
    stats_args *s = p;
    tn_dev_results r;
    assert_int_equal(tn__dev_results_init(&r, TN_DEVICE_CPU, 12, s->out), TN_OK);
    assert_int_equal(tn__dev_grad_stats(&r, 0, 6, (const tn_tensor *const *)s->t), TN_OK);
    assert_int_equal(tn__dev_results_read(&r, s->out), TN_OK);
}

static void race_detector_grad_stats_hook(void **state) {
    int64_t shape[] = {8};
    stats_args s;
    for (int i = 0; i < 6; i++)
        s.t[i] = tn_full(1, shape, TN_F32, -(i + 1.0));
    tn_set_race_report_stream(NULL);
    tn_set_detect_races(true);
    char rep[8192];
    assert_int_equal(overlap(s.t[5], true, measure_all, &s, rep, sizeof rep), 1); /* the 6th */
    assert_non_null(strstr(rep, "[grad_stats kernel]"));
    assert_int_equal(overlap(s.t[0], false, measure_all, &s, rep, sizeof rep), 0); /* both read */
    tn_set_detect_races(false);
    tn_set_race_report_stream(stderr);
    tn_race_reports_reset();
    for (int i = 0; i < 6; i++) {
        assert_true(s.out[2 * i] == 8 * (i + 1.0) * (i + 1.0));
        assert_true(s.out[2 * i + 1] == i + 1.0);
    }
    measure_all(&s); /* off: one launch, the same bits */
    for (int i = 0; i < 6; i++) {
        assert_true(s.out[2 * i] == 8 * (i + 1.0) * (i + 1.0));
        assert_true(s.out[2 * i + 1] == i + 1.0);
        tn_release(s.t[i]);
    }
}

/* ---- parallel backward: identical to serial, errors reach the caller ---------- */

/* loss = sum_i sum(sin(x * (i+1)) * w_i): 12 independent branches meeting at
 * x (a fan-in of 12 gradients summed in a fixed order) and w_i. */
static tn_tensor *branchy_loss(tn_tensor *x, tn_tensor **w, int nb) {
    tn_tensor *loss = NULL;
    for (int i = 0; i < nb; i++) {
        tn_tensor *b = tn_sum(tn_mul(tn_sin(tn_mul_scalar(x, i + 1)), w[i]));
        loss = loss ? tn_add(loss, b) : b;
    }
    return loss;
}

static void grads_of(bool parallel, double *gx, double *gw, int nb, int64_t n) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t shape[] = {n};
    tn_manual_seed(7);
    tn_tensor *x = tn_randn(1, shape, TN_F64), *w[16];
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    for (int i = 0; i < nb; i++) {
        w[i] = tn_randn(1, shape, TN_F64);
        assert_int_equal(tn_requires_grad_(w[i], true), TN_OK);
    }
    tn_set_parallel_backward(parallel);
    assert_int_equal(tn_backward(branchy_loss(x, w, nb), NULL, false), TN_OK);
    tn_set_parallel_backward(false);
    assert_int_equal(tn_copy_to_f64(tn_grad(x), gx, n), TN_OK);
    for (int i = 0; i < nb; i++)
        assert_int_equal(tn_copy_to_f64(tn_grad(w[i]), gw + i * n, n), TN_OK);
    tn_scope_end();
}

static void parallel_backward_matches_serial(void **state) {
    enum { NB = 12, N = 4096 };
    static double sx[N], sw[NB * N], px[N], pw[NB * N];
    grads_of(false, sx, sw, NB, N);
    for (int rep = 0; rep < 5; rep++) {
        grads_of(true, px, pw, NB, N);
        assert_memory_equal(sx, px, sizeof sx); /* bit-identical */
        assert_memory_equal(sw, pw, sizeof sw);
    }
}

static void parallel_backward_reports_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t shape[] = {64};
    tn_tensor *x = tn_ones(1, shape, TN_F64), *w[4];
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    for (int i = 0; i < 4; i++) {
        w[i] = tn_ones(1, shape, TN_F64);
        assert_int_equal(tn_requires_grad_(w[i], true), TN_OK);
    }
    tn_tensor *h = tn_mul_scalar(x, 2);
    tn_tensor *loss = tn_add(branchy_loss(h, w, 4), tn_sum(tn_mul(h, h)));
    assert_int_equal(tn_mul_scalar_(h, 3), TN_OK); /* h was saved by mul */
    tn_set_parallel_backward(true);
    assert_int_equal(tn_backward(loss, NULL, false), TN_ERR_INPLACE_MODIFIED);
    tn_set_parallel_backward(false);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "one of the variables needed for gradient computation has been modified");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(concurrent_accumulation_small),
        TT_TEST(concurrent_accumulation_large),
        TT_TEST(one_of_n_without_retain_graph),
        TT_TEST(all_of_n_with_retain_graph),
        TT_TEST(grad_mode_is_per_thread),
        TT_TEST(race_api),
        TT_TEST(race_detector_catches_planted_overlap),
        TT_TEST(race_detector_silent_without_overlap),
        TT_TEST(race_detector_matmul_hook),
        TT_TEST(race_detector_grad_stats_hook),
        TT_TEST(parallel_backward_matches_serial),
        TT_TEST(parallel_backward_reports_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
