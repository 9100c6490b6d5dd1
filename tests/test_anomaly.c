/* tests/test_anomaly.c — anomaly mode (docs/semantics.md §6): backtraces and
 * their symbols, reports, tn_graph_dot, and end-to-end reports that name the
 * planted culprit's function and line.
 *
 * The culprits are noinline functions with a statement after the tenet call
 * (no tail call), so their frame is on the stack; their lines are recorded
 * with __LINE__ + 1 just before the call. Tests are built with -g. */
#define _GNU_SOURCE /* open_memstream, RTLD_NOLOAD */
#include "util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug/debug_internal.h"

#define NOINLINE __attribute__((noinline))

static const int64_t S3[] = {3};

static tn_tensor *vec3(double x, double y, double z, bool rg) {
    return tt_f32(1, S3, (const float[]){(float)x, (float)y, (float)z}, rg);
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static void assert_frame(const tn_frame *f, const char *function, int line) {
    assert_non_null(f);
    if (!f->function || strcmp(f->function, function) != 0)
        fail_msg("frame function %s, want %s", f->function ? f->function : "(null)", function);
    assert_non_null(f->file);
    if (!ends_with(f->file, "test_anomaly.c")) fail_msg("frame file %s", f->file);
    assert_int_equal(f->line, line);
}

static void assert_contains(const char *text, const char *needle) {
    if (!strstr(text, needle)) fail_msg("output\n%s\ndoes not contain \"%s\"", text, needle);
}


static char *graph_of(const tn_tensor *root) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    assert_int_equal(tn_graph_dot(root, f), TN_OK);
    fclose(f);
    return buf;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Anomaly mode and the test switches back to their defaults after each test. */
static int teardown(void **state) {
    tn_set_detect_anomaly(false, false);
    tn_set_anomaly_untracked_error(false);
    tn__symbolize_set_mode(TN_SYM_FULL);
    tn_anomaly_clear();
    return tt_teardown(state);
}
#define ANOMALY_TEST(f) cmocka_unit_test_setup_teardown(f, tt_setup, teardown)

static volatile int sink; /* a store after a call: the call is not a tail call */

/* ---- backtraces and symbols --------------------------------------------------- */

static int known_line;
static NOINLINE void known_function(tn_backtrace *bt) {
    known_line = __LINE__ + 1;
    tn__bt_capture(bt);
    sink++;
}

static int caller_line;
static NOINLINE void capture_known(tn_backtrace *bt) {
    caller_line = __LINE__ + 1;
    known_function(bt);
    sink++;
}

static void symbolize_known_function(void **state) {
    tn_backtrace bt;
    capture_known(&bt);
    assert_true(bt.n >= 3);
    char buf[1024];
    tn_frame f;
    /* return addresses: pc - 1 is the call's line */
    assert_true(tn__symbolize((char *)bt.pc[0] - 1, &f, buf, sizeof buf));
    assert_frame(&f, "known_function", known_line);
    assert_true(tn__symbolize((char *)bt.pc[1] - 1, &f, buf, sizeof buf));
    assert_frame(&f, "capture_known", caller_line);
    assert_false(tn__frame_is_engine(&f));
    /* a buffer too small truncates, never overflows */
    char tiny[8];
    tn__symbolize((char *)bt.pc[0] - 1, &f, tiny, sizeof tiny);
    if (f.function) assert_true(strlen(f.function) < sizeof tiny);
}

typedef struct id_job {
    uint64_t ids[2], os[2], gettid;
    char name[2][TN_THREAD_NAME];
    bool rename;
} id_job;

static void *thread_id_worker(void *arg) {
    id_job *j = arg;
    if (j->rename) pthread_setname_np(pthread_self(), "loader-2");
    j->ids[0] = tn__thread_id();
    j->os[0] = tn__os_tid();
    tn__thread_name(j->name[0]); /* the thread's first read */
    j->ids[1] = tn__thread_id();
    j->os[1] = tn__os_tid();
    tn__thread_name(j->name[1]);
    j->gettid = (uint64_t)gettid();
    return NULL;
}

static void thread_ids_are_per_thread(void **state) {
    uint64_t me = tn__thread_id();
    assert_true(me > 0);
    assert_int_equal(tn__thread_id(), me);
    assert_int_equal(tn__os_tid(), (uint64_t)getpid()); /* the main thread's is the pid */
    char mine[TN_THREAD_NAME], process[TN_THREAD_NAME];
    tn__thread_name(mine);
    assert_int_equal(pthread_getname_np(pthread_self(), process, sizeof process), 0);
    assert_string_equal(mine, process);
    for (int rename = 0; rename < 2; rename++) {
        id_job j = {.rename = rename};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, thread_id_worker, &j), 0);
        pthread_join(th, NULL);
        assert_int_equal(j.ids[0], j.ids[1]);
        assert_true(j.ids[0] != me && j.ids[0] > 0);
        assert_int_equal(j.os[0], j.os[1]);
        assert_int_equal(j.os[0], j.gettid); /* what gdb, top and TSan show */
        assert_true(j.os[0] != tn__os_tid());
        /* unnamed: the process's name, as the thread inherits it */
        assert_string_equal(j.name[0], rename ? "loader-2" : mine);
        assert_string_equal(j.name[1], j.name[0]);
    }
    char buf[64];
    tn__format_thread(buf, sizeof buf, 4127, "loader-2");
    assert_string_equal(buf, "thread 4127 \"loader-2\"");
    tn__format_thread(buf, sizeof buf, 4127, "");
    assert_string_equal(buf, "thread 4127");
}

static void symbolize_fallbacks(void **state) {
    /* libc's own qsort (RTLD_DEFAULT could give a sanitizer's interceptor) */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    assert_non_null(libc);
    void *qsort_addr = dlsym(libc, "qsort");
    dlclose(libc);
    assert_non_null(qsort_addr);
    char buf[1024];
    tn_frame f;
    /* libdw without libc's debug info: the ELF symbol, the object as file */
    assert_true(tn__symbolize(qsort_addr, &f, buf, sizeof buf));
    assert_non_null(strstr(f.function, "qsort"));

    tn__symbolize_set_mode(TN_SYM_DLADDR);
    assert_true(tn__symbolize(qsort_addr, &f, buf, sizeof buf));
    assert_string_equal(f.function, "qsort");
    assert_non_null(f.file);
    assert_non_null(strstr(f.file, "libc.so"));
    assert_int_equal(f.line, 0);
    /* a static function of the executable: no exported name, no crash */
    tn_backtrace bt;
    capture_known(&bt);
    tn__symbolize((char *)bt.pc[0] - 1, &f, buf, sizeof buf);
    assert_int_equal(f.line, 0);
    if (f.file) assert_non_null(strstr(f.file, "test_anomaly"));

    tn__symbolize_set_mode(TN_SYM_NONE); /* as a stripped binary */
    assert_false(tn__symbolize((char *)bt.pc[0] - 1, &f, buf, sizeof buf));
    assert_null(f.function);
    assert_null(f.file);
    assert_int_equal(f.line, 0);
    assert_false(tn__frame_is_engine(&f));
    assert_false(tn__symbolize(NULL, &f, buf, sizeof buf));
}

static void engine_frames(void **state) {
    assert_true(tn__frame_is_engine(&(tn_frame){NULL, "tn_add_", NULL, 0}));
    assert_true(tn__frame_is_engine(&(tn_frame){NULL, "tn__node_new", NULL, 0}));
    assert_true(tn__frame_is_engine(&(tn_frame){NULL, "GOMP_parallel", NULL, 0}));
    assert_true(tn__frame_is_engine(&(tn_frame){NULL, "gomp_thread_start", NULL, 0}));
    assert_false(tn__frame_is_engine(&(tn_frame){NULL, "main", NULL, 0}));
    assert_false(tn__frame_is_engine(&(tn_frame){NULL, "tt_f32", NULL, 0}));
    assert_false(tn__frame_is_engine(NULL));
    /* static helpers of the engine are known by their source file */
    char path[4096];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *tests = strstr(path, "tests/test_anomaly.c");
    if (tests && path[0] == '/') {
        strcpy(tests, "engine/ops/binary.c");
        assert_true(tn__frame_is_engine(&(tn_frame){NULL, "binary", path, 200}));
        strcpy(tests, "tests/util.c");
        assert_false(tn__frame_is_engine(&(tn_frame){NULL, "tt_f32", path, 10}));
    }
    assert_true(tn__frame_is_engine(&(tn_frame){NULL, "x", "/usr/lib/libtenet.so.0", 0}));
    assert_false(tn__frame_is_engine(&(tn_frame){NULL, "x", "/usr/lib/libc.so.6", 0}));
}

/* ---- reports built by hand ------------------------------------------------------ */

static int forward_line;
static NOINLINE void make_forward(tn_backtrace *bt) {
    forward_line = __LINE__ + 1;
    tn__bt_capture(bt);
    sink++;
}

static int write_line;
static NOINLINE void corrupt_site(tn_backtrace *bt) {
    write_line = __LINE__ + 1;
    tn__bt_capture(bt);
    sink++;
}

static void synthetic_inplace_report(void **state) {
    tn_tensor *t = vec3(1, 2, 3, false);
    tn_backtrace fwd, parent;
    make_forward(&fwd);
    make_forward(&parent);
    tn_write_snap w = {.op = "add_", .version = 1, .tid = tn__os_tid()};
    tn__thread_name(w.thread_name);
    corrupt_site(&w.bt);

    tn_anomaly_report *r = tn__report_begin(TN_ANOMALY_INPLACE, "MulBackward0");
    tn__report_set_forward(r, &fwd);
    tn__report_add_parent(r, "CosBackward0", &parent);
    tn__report_add_parent(r, "ExpBackward0", NULL);
    tn__report_set_saved(r, t, -1, 0, 1);
    tn__report_add_write(r, &w, true);
    tn__report_set_dropped(r, 2);
    assert_ptr_equal(tn_last_anomaly(), r);

    char want[256];
    snprintf(want, sizeof want, "test_anomaly.c:%d)", write_line);
    const char *culprit = tn__report_first_culprit(r); /* "corrupt_site (tests/test_anomaly.c:N)" */
    assert_non_null(culprit);
    assert_true(ends_with(culprit, want));
    assert_non_null(strstr(culprit, "corrupt_site ("));

    /* accessors */
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_INPLACE);
    assert_string_equal(tn_anomaly_report_node(r), "MulBackward0");
    int n = 0;
    const tn_frame *fr = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n >= 2);
    assert_frame(&fr[0], "make_forward", forward_line);
    assert_string_equal(fr[n - 1].function, "main"); /* the C runtime below main is cut */
    tn_dtype dt;
    int nd, onr;
    const int64_t *shape;
    uint64_t sv, cv;
    assert_int_equal(tn_anomaly_report_saved(r, &dt, &nd, &shape, &onr, &sv, &cv), TN_OK);
    assert_int_equal(dt, TN_F32);
    assert_int_equal(nd, 1);
    assert_int_equal(shape[0], 3);
    assert_int_equal(onr, -1);
    assert_int_equal(sv, 0);
    assert_int_equal(cv, 1);
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    const tn_write_event *e = tn_anomaly_report_write(r, 0);
    assert_string_equal(e->op, "add_");
    assert_int_equal(e->version, 1);
    assert_int_equal(e->thread_id, tn__os_tid());
    assert_string_equal(e->thread_name, w.thread_name);
    assert_true(e->tracked);
    assert_frame(&e->frames[0], "corrupt_site", write_line);
    assert_int_equal(tn_anomaly_report_dropped(r), 2);
    assert_int_equal(tn_anomaly_report_output_index(r), -1);
    assert_null(tn_anomaly_report_write(r, 1));
    tt_assert_error(TN_ERR_INDEX, "out of range");

    char *out = tt_report_text(r);
    assert_contains(out, "tenet anomaly: one of the variables needed for gradient computation has "
                         "been modified by an inplace operation\n");
    assert_contains(out, "\n  failing node: MulBackward0\n");
    assert_contains(out, "\n  saved tensor: [float32 [3]], input of MulBackward0, saved at version "
                         "0, now at version 1\n");
    assert_contains(out, "\n  forward call that saved it (MulBackward0 created at):\n    #0 "
                         "make_forward (");
    snprintf(want, sizeof want, "test_anomaly.c:%d)\n    #1 synthetic_inplace_report (",
             forward_line);
    assert_contains(out, want);
    assert_contains(out, "\n  Previous calculation was induced by CosBackward0, created at:\n    "
                         "#0 make_forward (");
    assert_contains(out, "\n  Previous calculation was induced by ExpBackward0. No forward pass "
                         "information available.");
    snprintf(want, sizeof want,
             "\n  in-place writes since the save (1):\n    add_ -> version 1, "
             "thread %llu \"%s\"\n      #0 corrupt_site (",
             (unsigned long long)tn__os_tid(), w.thread_name);
    assert_contains(out, want);
    snprintf(want, sizeof want, "test_anomaly.c:%d)\n", write_line);
    assert_contains(out, want);
    assert_contains(out, "\n  at least 2 more write(s) between the save and the check are not "
                         "listed");
    free(out);

    /* the next report replaces this one; clearing forgets it */
    r = tn__report_begin(TN_ANOMALY_NAN_BACKWARD, "SqrtBackward0");
    tn__report_set_output_index(r, 0);
    assert_int_equal(tn_anomaly_report_n_writes(r), 0);
    assert_int_equal(tn_anomaly_report_saved(r, NULL, NULL, NULL, NULL, NULL, NULL),
                     TN_ERR_INVALID_ARGUMENT);
    out = tt_report_text(r);
    assert_contains(out, "tenet anomaly: Function 'SqrtBackward0' returned nan/inf values in its "
                         "0th output.\n");
    assert_contains(out, "No forward pass information available. Enable detect anomaly during "
                         "forward pass for more information.");
    free(out);
    tn_anomaly_clear();
    assert_null(tn_last_anomaly());
    tn_release(t);
}

static void synthetic_untracked_and_forward_nan(void **state) {
    tn_tensor *t = vec3(1, 2, 3, false);
    tn_write_snap w = {.op = "zero_", .version = 1, .tid = 7};
    corrupt_site(&w.bt);
    tn_anomaly_report *r = tn__report_begin(TN_ANOMALY_UNTRACKED, "SigmoidBackward0");
    tn__report_set_saved(r, t, 0, 0, 0);
    tn__report_add_write(r, &w, false);
    char *out = tt_report_text(r);
    assert_contains(out, "written through an alias with its own version counter (.data?)");
    assert_contains(out, "saved tensor: [float32 [3]], output 0 of SigmoidBackward0, still at "
                         "version 0");
    assert_contains(out, "zero_ (untracked");
    assert_contains(out, "thread 7\n      #0 corrupt_site (");
    free(out);
    assert_false(tn_anomaly_report_write(r, 0)->tracked);

    tn_backtrace bt;
    make_forward(&bt);
    r = tn__report_begin(TN_ANOMALY_NAN_FORWARD, "log");
    tn__report_set_forward(r, &bt);
    tn__report_set_output_index(r, 0);
    const char *culprit = tn__report_first_culprit(r); /* no writes: the forward call */
    assert_non_null(culprit);
    assert_non_null(strstr(culprit, "make_forward ("));
    out = tt_report_text(r);
    assert_contains(out, "Function 'log' returned nan/inf values in its 0th output");
    assert_contains(out, "\n  forward op: log\n  forward call that produced it:\n    #0 "
                         "make_forward (");
    free(out);
    tn_release(t);
}

static void report_trims_engine_frames(void **state) {
    tn_backtrace user;
    make_forward(&user);
    /* two engine frames inside tenet, then the user's */
    tn_backtrace bt = {.n = 2};
    bt.pc[0] = (char *)(uintptr_t)tn_zero_ + 2;
    bt.pc[1] = (char *)(uintptr_t)tn__thread_id + 2;
    for (int i = 0; i < user.n && bt.n < TN_BT_MAX; i++)
        bt.pc[bt.n++] = user.pc[i];
    tn_anomaly_report *r = tn__report_begin(TN_ANOMALY_SECOND_BACKWARD, "MulBackward0");
    tn__report_set_forward(r, &bt);
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_frame(&f[0], "make_forward", forward_line);

    /* nothing but tenet: nothing trimmed */
    bt.n = 2;
    r = tn__report_begin(TN_ANOMALY_SECOND_BACKWARD, "MulBackward0");
    tn__report_set_forward(r, &bt);
    f = tn_anomaly_report_forward_trace(r, &n);
    assert_int_equal(n, 2);
    assert_true(tn__frame_is_engine(&f[0])); /* tn_zero_ or what is inlined into it */

    /* no symbols at all: raw addresses, nothing trimmed, no crash */
    tn__symbolize_set_mode(TN_SYM_NONE);
    r = tn__report_begin(TN_ANOMALY_SECOND_BACKWARD, "MulBackward0");
    tn__report_set_forward(r, &user);
    f = tn_anomaly_report_forward_trace(r, &n);
    assert_int_equal(n, user.n);
    assert_null(f[0].function);
    assert_ptr_equal(f[0].pc, user.pc[0]);
    char *out = tt_report_text(r);
    assert_contains(out, "#0 0x");
    free(out);
    assert_null(tn__report_first_culprit(r));
}

static void report_null_arguments(void **state) {
    assert_int_equal(tn_anomaly_report_print(NULL, stderr), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    assert_null(tn_anomaly_report_node(NULL));
    assert_null(tn_anomaly_report_relayed_by(NULL));
    assert_int_equal(tn_anomaly_report_n_writes(NULL), 0);
    int n = 5;
    assert_null(tn_anomaly_report_forward_trace(NULL, &n));
    assert_int_equal(n, 0);
    tn_anomaly_report *r = tn__report_begin(TN_ANOMALY_INPLACE, "MulBackward0");
    assert_int_equal(tn_anomaly_report_print(r, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_null(tn_anomaly_report_forward_trace(r, &n));
    assert_int_equal(n, 0);
}

/* ---- graph_dot ------------------------------------------------------------------ */

static void graph_dot_small_graph(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *s = tn_sum(tn_mul(tn_sigmoid(a), a)); /* a used twice: one leaf box */
    char *g = graph_of(s);
    assert_contains(g, "digraph tenet {");
    assert_contains(g, "SumBackward0");
    assert_contains(g, "MulBackward0");
    assert_contains(g, "SigmoidBackward0");
    assert_int_equal(count(g, "AccumulateGrad"), 1);
    assert_contains(g, "float32 [3] input, saved v0, now v0");
    assert_contains(g, "float32 [3] output, saved v0, now v0");
    assert_null(strstr(g, "COLOR=\"red\""));
    assert_int_equal(count(g, "->"), 5); /* leaf->sig, sig->mul, leaf->mul, mul->sum, sum->root */
    free(g);

    /* a stale saved tensor is red */
    tn_tensor *e = tn_exp(tn_mul_scalar(a, 2)), *z = tn_sum(e);
    assert_int_equal(tn_zero_(tn_detach(e)), TN_OK);
    g = graph_of(z);
    assert_contains(g, "<FONT COLOR=\"red\">saved[");
    assert_contains(g, "float32 [3] output, saved v0, now v1</FONT>");
    free(g);
    tn_tensor *d = tn_detach(e);

    /* errors */
    assert_int_equal(tn_graph_dot(NULL, stdout), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_graph_dot(s, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_graph_dot(a, stdout), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "no grad_fn");
    assert_int_equal(tn_graph_dot(d, stdout), TN_ERR_INVALID_ARGUMENT);
    tn_scope_end();
}

static void graph_dot_deep_chain(void **state) {
    tn_tensor *a = vec3(1, 2, 3, true), *x = tn_retain(a);
    for (int i = 0; i < 50000; i++) { /* deep: the walk must not recurse */
        tn_tensor *next = tn_add_scalar(x, 1);
        tn_release(x);
        assert_non_null(next);
        x = next;
    }
    char *g = graph_of(x);
    assert_int_equal(count(g, "AddBackward0"), 50000);
    free(g);
    tn_release(x);
    tn_release(a);
}

/* ---- end to end: planted corruptions ------------------------------------------ */

static int make_line;
static NOINLINE tn_tensor *make_sigmoid(tn_tensor *a) {
    make_line = __LINE__ + 1;
    tn_tensor *out = tn_sigmoid(a);
    sink++;
    return out;
}

static int corrupt_line;
static NOINLINE void corrupt_output(tn_tensor *out) {
    tn_tensor *d = tn_detach(out);
    corrupt_line = __LINE__ + 1;
    tn_status st = tn_zero_(d);
    tn_release(d);
    assert_int_equal(st, TN_OK);
}

/* The report names the culprit and the op that saved the tensor. */
static void assert_inplace_report(const char *node, int output_nr, const char *op,
                                  const char *culprit_fn, int culprit_line) {
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_INPLACE);
    assert_string_equal(tn_anomaly_report_node(r), node);
    int onr;
    uint64_t sv, cv;
    assert_int_equal(tn_anomaly_report_saved(r, NULL, NULL, NULL, &onr, &sv, &cv), TN_OK);
    assert_int_equal(onr, output_nr);
    assert_int_equal(sv, 0);
    assert_int_equal(cv, 1);
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    const tn_write_event *w = tn_anomaly_report_write(r, 0);
    assert_string_equal(w->op, op);
    assert_int_equal(w->version, 1);
    assert_int_equal(w->thread_id, tn__os_tid());
    assert_true(w->tracked);
    assert_true(w->n_frames > 0);
    assert_frame(&w->frames[0], culprit_fn, culprit_line);
    char want[128];
    snprintf(want, sizeof want, "%s (", culprit_fn);
    assert_contains(tn_last_error(), want);
    snprintf(want, sizeof want, "test_anomaly.c:%d)", culprit_line);
    assert_contains(tn_last_error(), want);
}

static void e2e_inplace_on_saved_output(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = make_sigmoid(a);
    corrupt_output(out);
    tn_tensor *s = tn_sum(out);
    assert_int_equal(tn_backward(s, NULL, true), TN_ERR_INPLACE_MODIFIED);
    assert_contains(tn_last_error(), "[float32 [3]], which is output 0 of SigmoidBackward0, is at "
                                     "version 1; expected version 0 instead. Hint: ");
    assert_inplace_report("SigmoidBackward0", 0, "zero_", "corrupt_output", corrupt_line);
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(tn_last_anomaly(), &n);
    assert_true(n > 0);
    assert_frame(&f[0], "make_sigmoid", make_line);

    char *out_text = tt_report_text(tn_last_anomaly());
    assert_contains(out_text, "output 0 of SigmoidBackward0, saved at version 0, now at version 1");
    assert_contains(out_text, "zero_ -> version 1");
    free(out_text);
    /* the graph highlights the failing node and hangs the culprit off it */
    char *g = graph_of(s);
    assert_contains(g, "SigmoidBackward0</B><BR/><FONT COLOR=\"red\">");
    assert_int_equal(count(g, "fillcolor=\"#ff8080\""), 1);
    assert_contains(g, "<B>zero_</B> -&gt; v1");
    assert_contains(g, "corrupt_output (");
    free(g);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static int add_line;
static NOINLINE void corrupt_input(tn_tensor *h) {
    add_line = __LINE__ + 1;
    tn_status st = tn_add_scalar_(h, 1);
    assert_int_equal(st, TN_OK);
}

static void e2e_inplace_on_saved_input(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    /* b requires grad: mul saves h for b's gradient */
    tn_tensor *a = vec3(1, 2, 3, true), *b = vec3(4, 5, 6, true);
    tn_tensor *h = tn_mul_scalar(a, 2), *y = tn_mul(h, b), *s = tn_sum(y);
    corrupt_input(h);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_inplace_report("MulBackward0", -1, "add_scalar_", "corrupt_input", add_line);
    char *text = tt_report_text(tn_last_anomaly());
    assert_contains(text, "input of MulBackward0, saved at version 0, now at version 1");
    free(text);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static int view_line;
static NOINLINE void corrupt_through_view(tn_tensor *out) {
    tn_tensor *v = tn_narrow(out, 0, 1, 2);
    view_line = __LINE__ + 1;
    tn_status st = tn_zero_(v);
    tn_release(v);
    assert_int_equal(st, TN_OK);
}

static void e2e_inplace_through_view(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = make_sigmoid(a), *s = tn_sum(out);
    corrupt_through_view(out);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_inplace_report("SigmoidBackward0", 0, "zero_", "corrupt_through_view", view_line);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

typedef struct bump_job {
    tn_tensor *t;
    tn_status st;
    uint64_t tid;
    const char *name; /* NULL: keep the process's */
} bump_job;

static int thread_line;
static NOINLINE void *bump_worker(void *arg) {
    bump_job *j = arg;
    if (j->name) pthread_setname_np(pthread_self(), j->name);
    j->tid = tn__os_tid();
    thread_line = __LINE__ + 1;
    j->st = tn_add_scalar_(j->t, 1);
    sink++;
    return NULL;
}

static void e2e_bumps_from_two_threads(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = make_sigmoid(a), *s = tn_sum(out), *d = tn_detach(out);
    bump_job jobs[2] = {{d, TN_OK, 0, NULL}, {d, TN_OK, 0, NULL}};
    for (int i = 0; i < 2; i++) { /* one after the other: versions 1 then 2 */
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, bump_worker, &jobs[i]), 0);
        pthread_join(th, NULL);
    }
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_n_writes(r), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jobs[i].st, TN_OK);
        const tn_write_event *w = tn_anomaly_report_write(r, i);
        assert_int_equal(w->version, (uint64_t)i + 1);
        assert_int_equal(w->thread_id, jobs[i].tid);
        assert_true(w->thread_id != tn__os_tid());
        assert_true(w->n_frames > 0);
        assert_frame(&w->frames[0], "bump_worker", thread_line);
    }
    assert_true(jobs[0].tid != jobs[1].tid);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

/* The scenario: a write on a named second thread is reported with
 * the thread's OS id and name, as gdb, top and TSan show it. */
static void e2e_write_on_named_thread(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = make_sigmoid(a), *s = tn_sum(out), *d = tn_detach(out);
    bump_job job = {d, TN_OK, 0, "loader-2"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bump_worker, &job), 0);
    pthread_join(th, NULL);
    assert_int_equal(job.st, TN_OK);
    assert_true(job.tid != tn__os_tid());
    assert_int_equal(tn_backward(s, NULL, true), TN_ERR_INPLACE_MODIFIED);
    /* the hint names the write's thread: another than the one backward ran on */
    char want[160];
    snprintf(want, sizeof want, "test_anomaly.c:%d) on thread %llu \"loader-2\".", thread_line,
             (unsigned long long)job.tid);
    assert_contains(tn_last_error(), want);
    assert_contains(tn_last_error(), "modified in place by bump_worker (");
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    const tn_write_event *w = tn_anomaly_report_write(r, 0);
    assert_int_equal(w->thread_id, job.tid);
    assert_string_equal(w->thread_name, "loader-2");
    assert_string_equal(w->op, "add_scalar_");
    char *text = tt_report_text(r);
    snprintf(want, sizeof want, "    add_scalar_ -> version 1, thread %llu \"loader-2\"\n",
             (unsigned long long)job.tid);
    assert_contains(text, want);
    free(text);
    char *g = graph_of(s);
    snprintf(want, sizeof want, "thread %llu &quot;loader-2&quot;", (unsigned long long)job.tid);
    assert_contains(g, want);
    free(g);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static int data_line;
static NOINLINE void corrupt_data(tn_tensor *out) {
    tn_tensor *d = tn_data(out);
    data_line = __LINE__ + 1;
    tn_status st = tn_zero_(d);
    tn_release(d);
    assert_int_equal(st, TN_OK);
}

static void assert_untracked_report(void) {
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_UNTRACKED);
    assert_string_equal(tn_anomaly_report_node(r), "SigmoidBackward0");
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    const tn_write_event *w = tn_anomaly_report_write(r, 0);
    assert_false(w->tracked);
    assert_string_equal(w->op, "zero_");
    assert_frame(&w->frames[0], "corrupt_data", data_line);
    char *text = tt_report_text(r);
    assert_contains(text, "written through an alias with its own version counter (.data?)");
    free(text);
}

static void e2e_untracked_data_write(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = make_sigmoid(a), *s = tn_sum(out);
    corrupt_data(out);
    /* a warning by default: PyTorch's (silently wrong) gradient */
    assert_int_equal(tn_backward(s, NULL, true), TN_OK);
    tt_assert_grad(a, (const double[]){0, 0, 0}, 3, 1e-6);
    assert_untracked_report();

    tn_anomaly_clear();
    tn_set_anomaly_untracked_error(true);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_contains(tn_last_error(), "corrupt_data (");
    assert_untracked_report();
    tn_set_anomaly_untracked_error(false);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static int sqrt_line;
static NOINLINE tn_tensor *make_sqrt(tn_tensor *a) {
    sqrt_line = __LINE__ + 1;
    tn_tensor *y = tn_sqrt(a);
    sink++;
    return y;
}

static void e2e_nan_in_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, true);
    tn_tensor *a = vec3(0, 1, 4, true);
    tn_tensor *y = make_sqrt(a), *s = tn_sum(y);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
    assert_contains(tn_last_error(), "Function 'SqrtBackward0' returned");
    assert_contains(tn_last_error(), "values in its 0th output.");
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_BACKWARD);
    assert_string_equal(tn_anomaly_report_node(r), "SqrtBackward0");
    assert_int_equal(tn_anomaly_report_output_index(r), 0);
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n > 0);
    assert_frame(&f[0], "make_sqrt", sqrt_line);
    char *text = tt_report_text(r);
    assert_contains(text, "Function 'SqrtBackward0' returned nan/inf values in its 0th output.");
    free(text);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static int log_line;
static NOINLINE tn_tensor *produce_nan(tn_tensor *x) {
    log_line = __LINE__ + 1;
    tn_tensor *y = tn_log(x);
    sink++;
    return y;
}

static void e2e_nan_in_forward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, true);
    tn_tensor *x = vec3(-1, 1, 2, false);
    tn_tensor *y = produce_nan(x); /* finite inputs: reported (a warning) */
    assert_non_null(y);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_FORWARD);
    assert_string_equal(tn_anomaly_report_node(r), "log");
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n > 0);
    assert_frame(&f[0], "produce_nan", log_line);

    tn_anomaly_clear(); /* NaN in, NaN out: propagation, not reported */
    tn_tensor *z = tn_mul_scalar(y, 2);
    assert_non_null(z);
    assert_null(tn_last_anomaly());
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

/* The relays: ops that pass a NaN on, each in its own frame so that the
 * report can be seen not to name them. */
static NOINLINE tn_tensor *relay_exp(tn_tensor *x) {
    tn_tensor *y = tn_exp(x);
    sink++;
    return y;
}
static NOINLINE tn_tensor *relay_mul(tn_tensor *x, tn_tensor *w) {
    tn_tensor *y = tn_mul(x, w);
    sink++;
    return y;
}
static NOINLINE tn_tensor *relay_sum(tn_tensor *x) {
    tn_tensor *y = tn_sum(x);
    sink++;
    return y;
}

/* The report of a NaN relayed to backward: the forward op that made it. */
static void assert_relay_names_log(const char *node, int index) {
    char want[160];
    snprintf(want, sizeof want, "Function '%s' returned nan values in its %dth output.", node,
             index);
    assert_string_equal(tn_last_error(), want); /* PyTorch's text */
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_FORWARD);
    assert_string_equal(tn_anomaly_report_node(r), "log");
    assert_string_equal(tn_anomaly_report_relayed_by(r), node);
    assert_int_equal(tn_anomaly_report_output_index(r), 0);
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n > 0);
    assert_frame(&f[0], "produce_nan", log_line); /* the log's caller */
    char *text = tt_report_text(r);
    assert_contains(text, "tenet anomaly: Function 'log' returned nan/inf values in its 0th "
                          "output (forward, from finite inputs).\n  forward op: log\n"
                          "  forward call that produced it:\n    #0 produce_nan (");
    snprintf(want, sizeof want,
             "\n  relayed to backward by %s: its %dth output is nan/inf only "
             "because a tensor it saved in forward already was",
             node, index);
    assert_contains(text, want);
    assert_null(strstr(text, "relay_exp")); /* one origin, no relay named as one */
    assert_null(strstr(text, "relay_mul"));
    assert_null(strstr(text, "relay_sum"));
    assert_null(strstr(text, "failing node"));
    free(text);
}

/* The scenario: log makes a NaN in forward (a warning there); exp,
 * mul and sum pass it on. In backward, MulBackward0 multiplies by its saved
 * exp result (w requiring grad), or ExpBackward0 by its own (w not): that
 * node raises PyTorch's error, and the report names log and its caller. */
static void e2e_nan_relayed_through_saved(void **state) {
    tn_set_detect_anomaly(true, true);
    for (int w_grad = 1; w_grad >= 0; w_grad--) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *x = vec3(-1, 1, 2, true), *w = vec3(1, 2, 3, w_grad);
        tn_tensor *s = relay_sum(relay_mul(relay_exp(produce_nan(x)), w));
        tn_anomaly_clear();
        assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
        if (w_grad)
            assert_relay_names_log("MulBackward0", 1);
        else
            assert_relay_names_log("ExpBackward0", 0);
        tn_scope_end();
    }
    /* two origins meet: the first one made is named */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(-1, 1, 2, false), *w = vec3(1, 2, 3, true);
    tn_tensor *first = produce_nan(x), *second = tn_sqrt(x);
    tn_tensor *s = relay_sum(relay_mul(tn_add(second, first), w));
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
    assert_relay_names_log("MulBackward0", 1);
    /* through copies: cat, clone, softmax keep the origin too */
    tn_tensor *parts[2] = {produce_nan(x), vec3(1, 1, 1, false)};
    tn_tensor *c = tn_softmax(tn_clone(tn_cat(2, parts, 0)), 0);
    w = tt_f32(1, (const int64_t[]){6}, (const float[]){1, 2, 3, 4, 5, 6}, true);
    assert_int_equal(tn_backward(relay_sum(relay_mul(c, w)), NULL, false), TN_ERR_NAN);
    assert_relay_names_log("MulBackward0", 1);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

/* check_nan's scan (debug/nonfinite.c) at every size and place: a single
 * NaN or Inf is found in the first, middle or last element of outputs from
 * 1 element to several OpenMP chunks (the last chunk shorter), float32 and
 * float64, and NaN wins over Inf; an all-finite output gives nothing. The
 * outputs are a / b with b holding one zero (a = 0 there: NaN; a = 1: Inf). */
static void e2e_nan_scan_sizes(void **state) {
    tn_set_detect_anomaly(true, true);
    const int64_t sizes[] = {1, 7, 33, 32768 + 5, 3 * 32768 + 17};
    for (int dt = 0; dt < 2; dt++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            const int64_t where[3] = {0, n / 2, n - 1};
            for (int wi = 0; wi < 3; wi++)
                for (int kind = 0; kind < 3; kind++) { /* finite, NaN, Inf */
                    double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
                    for (int64_t i = 0; i < n; i++)
                        a[i] = 1, b[i] = 2;
                    if (kind) b[where[wi]] = 0, a[where[wi]] = kind == 1 ? 0 : 1;
                    assert_int_equal(tn_scope_begin(), TN_OK);
                    tn_tensor *ta = tt_f64(1, &n, a, false), *tb = tt_f64(1, &n, b, false);
                    tn_dtype d = dt ? TN_F64 : TN_F32;
                    ta = tn_to(ta, d, TN_DEVICE_CPU), tb = tn_to(tb, d, TN_DEVICE_CPU);
                    tn_anomaly_clear();
                    tn_tensor *q = tn_div(ta, tb);
                    assert_non_null(q);
                    const tn_anomaly_report *r = tn_last_anomaly();
                    if (!kind) {
                        assert_null(r);
                    } else {
                        assert_non_null(r);
                        assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_FORWARD);
                        char *text = tt_report_text(r);
                        assert_non_null(strstr(text, "'div' returned nan/inf"));
                        free(text);
                    }
                    tn_scope_end();
                    free(a);
                    free(b);
                }
        }
    /* both: NaN is named (PyTorch checks NaN first) */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f64(2, (const int64_t[]){2, 3}, (const double[]){1, 0, 1, 1, 1, 1}, true);
    tn_tensor *y = tt_f64(2, (const int64_t[]){2, 3}, (const double[]){0, 0, 1, 1, 1, 1}, false);
    tn_tensor *s = tn_sum(tn_div(y, tn_transpose(tn_transpose(x, 0, 1), 0, 1)));
    tn_anomaly_clear();
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
    assert_string_equal(tn_last_error(), "Function 'DivBackward0' returned nan values in its 1th "
                                         "output.");
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

/* Forward without check_nan: the producer is unknown. The relaying node is
 * not blamed: the report says it only relays and how to find the origin. */
static void e2e_nan_relayed_origin_unknown(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *x = vec3(-1, 1, 2, true), *w = vec3(1, 2, 3, true);
    tn_tensor *s = relay_sum(relay_mul(relay_exp(produce_nan(x)), w));
    assert_null(tn_last_anomaly()); /* nothing checked in forward */
    tn_set_detect_anomaly(true, true);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
    assert_string_equal(tn_last_error(), "Function 'MulBackward0' returned nan values in its 1th "
                                         "output.");
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_BACKWARD);
    assert_string_equal(tn_anomaly_report_node(r), "MulBackward0");
    assert_string_equal(tn_anomaly_report_relayed_by(r), "MulBackward0");
    assert_int_equal(tn_anomaly_report_output_index(r), 1);
    char *text = tt_report_text(r);
    assert_contains(text, "\n  MulBackward0 only relays it: a tensor it saved in forward was "
                          "already nan/inf. The op that produced that value was not recorded");
    assert_contains(text, "tn_set_detect_anomaly(true, true)");
    free(text);
    /* a node that makes the NaN itself names no relay */
    tn_tensor *y = make_sqrt(vec3(0, 1, 4, true));
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_NAN);
    assert_string_equal(tn_anomaly_report_node(tn_last_anomaly()), "SqrtBackward0");
    assert_null(tn_anomaly_report_relayed_by(tn_last_anomaly()));
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static int sin_line, first_bw_line, leaf_line;
static NOINLINE tn_tensor *make_sin(tn_tensor *x) {
    sin_line = __LINE__ + 1;
    tn_tensor *y = tn_sin(x);
    sink++;
    return y;
}
static NOINLINE tn_status first_backward(tn_tensor *s) {
    first_bw_line = __LINE__ + 1;
    tn_status st = tn_backward_ex(s, NULL, true, true);
    sink++;
    return st;
}
static NOINLINE void corrupt_leaf(tn_tensor *x) { /* as an optimiser step */
    bool prev = tn_set_grad_enabled(false);
    leaf_line = __LINE__ + 1;
    tn_status st = tn_mul_scalar_(x, 3);
    tn_set_grad_enabled(prev);
    assert_int_equal(st, TN_OK);
}

/* x.grad = cos(x) is made by SinBackward0's backward (create_graph): its
 * CosBackward0 saved x, which the step then changed. */
static void e2e_create_graph_chain(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *x = vec3(0, 1, 2, true);
    tn_tensor *y = make_sin(x), *s = tn_sum(y);
    assert_int_equal(first_backward(s), TN_OK);
    corrupt_leaf(x);
    tn_tensor *g = tn_grad(x), *gs = tn_sum(g);
    assert_int_equal(tn_backward(gs, NULL, false), TN_ERR_INPLACE_MODIFIED);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_string_equal(tn_anomaly_report_node(r), "CosBackward0");
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n > 0);
    assert_frame(&f[0], "first_backward", first_bw_line); /* made during that backward */
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    assert_frame(&tn_anomaly_report_write(r, 0)->frames[0], "corrupt_leaf", leaf_line);
    char *text = tt_report_text(r);
    assert_contains(text, "Previous calculation was induced by SinBackward0, created at:\n"
                          "    #0 make_sin (");
    char want[64];
    snprintf(want, sizeof want, "test_anomaly.c:%d)", sin_line);
    assert_contains(text, want);
    free(text);
    assert_int_equal(tn_set_grad(x, NULL), TN_OK);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static void e2e_forward_recorded_without_anomaly(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *out = make_sigmoid(a), *s = tn_sum(out); /* anomaly mode off */
    tn_set_detect_anomaly(true, false);
    corrupt_output(out);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    int n = -1;
    assert_null(tn_anomaly_report_forward_trace(r, &n));
    assert_int_equal(n, 0);
    char *text = tt_report_text(r);
    assert_contains(text, "No forward pass information available. Enable detect anomaly during "
                          "forward pass for more information.");
    assert_contains(text, "#0 corrupt_output (");
    free(text);
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

static void e2e_symbols_unavailable(void **state) {
    static const tn_sym_mode modes[] = {TN_SYM_DLADDR, TN_SYM_NONE};
    for (int m = 0; m < 2; m++) {
        tn__symbolize_set_mode(modes[m]);
        tn_set_detect_anomaly(true, false);
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *a = vec3(1, 2, 3, true);
        tn_tensor *out = make_sigmoid(a), *s = tn_sum(out);
        corrupt_output(out);
        assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
        const tn_anomaly_report *r = tn_last_anomaly();
        assert_non_null(r);
        assert_int_equal(tn_anomaly_report_n_writes(r), 1);
        const tn_write_event *w = tn_anomaly_report_write(r, 0);
        assert_true(w->n_frames > 0);
        assert_int_equal(w->frames[0].line, 0); /* no file:line without libdw */
        char *text = tt_report_text(r);
        assert_contains(text, "zero_ -> version 1");
        free(text);
        tn_scope_end();
        tn_set_detect_anomaly(false, false);
    }
    tn__symbolize_set_mode(TN_SYM_FULL);
}

/* ---- thread-local override ------------------------------------------------------- */

static void *read_mode(void *arg) {
    *(bool *)arg = tn_is_anomaly_enabled();
    return NULL;
}

static void local_override_is_per_thread(void **state) {
    tn_set_detect_anomaly(false, false);
    tn_set_detect_anomaly_local(1);
    assert_true(tn_is_anomaly_enabled());
    bool other = true;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_mode, &other), 0);
    pthread_join(th, NULL);
    assert_false(other); /* a new thread follows the process-wide switch */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = tn_tensor_from((float[]){1, 2, 3}, TN_F32, 1, (int64_t[]){3}, true);
    tn_tensor *out = tn_sigmoid(a);
    assert_int_equal(tn_zero_(tn_detach(out)), TN_OK);
    assert_int_equal(tn_backward(tn_sum(out), NULL, false), TN_ERR_INPLACE_MODIFIED);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_INPLACE);
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    tn_scope_end();
    tn_set_detect_anomaly_local(-1);
    assert_false(tn_is_anomaly_enabled());
    tn_set_detect_anomaly(true, false);
    tn_set_detect_anomaly_local(0); /* off here although on process-wide */
    assert_false(tn_is_anomaly_enabled());
    tn_set_detect_anomaly_local(-1);
    tn_set_detect_anomaly(false, false);
    tn_anomaly_clear();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ANOMALY_TEST(symbolize_known_function),
        ANOMALY_TEST(local_override_is_per_thread),
        ANOMALY_TEST(thread_ids_are_per_thread),
        ANOMALY_TEST(symbolize_fallbacks),
        ANOMALY_TEST(engine_frames),
        ANOMALY_TEST(synthetic_inplace_report),
        ANOMALY_TEST(synthetic_untracked_and_forward_nan),
        ANOMALY_TEST(report_trims_engine_frames),
        ANOMALY_TEST(report_null_arguments),
        ANOMALY_TEST(graph_dot_small_graph),
        ANOMALY_TEST(graph_dot_deep_chain),
        ANOMALY_TEST(e2e_inplace_on_saved_output),
        ANOMALY_TEST(e2e_inplace_on_saved_input),
        ANOMALY_TEST(e2e_inplace_through_view),
        ANOMALY_TEST(e2e_bumps_from_two_threads),
        ANOMALY_TEST(e2e_write_on_named_thread),
        ANOMALY_TEST(e2e_untracked_data_write),
        ANOMALY_TEST(e2e_nan_in_backward),
        ANOMALY_TEST(e2e_nan_in_forward),
        ANOMALY_TEST(e2e_nan_relayed_through_saved),
        ANOMALY_TEST(e2e_nan_relayed_origin_unknown),
        ANOMALY_TEST(e2e_nan_scan_sizes),
        ANOMALY_TEST(e2e_create_graph_chain),
        ANOMALY_TEST(e2e_forward_recorded_without_anomaly),
        ANOMALY_TEST(e2e_symbols_unavailable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
