/* What a data-parallel layer needs from the engine, tested on its own: a
 * leaf's hooks run as soon as its gradient for the pass is complete (as
 * PyTorch runs them from AccumulateGrad), callbacks queued for the end of
 * the pass (Variable._execution_engine.queue_callback), and writes by the
 * caller's own code tracked like in-place ops (tn_write_inplace). */
#include <stdatomic.h>
#include <string.h>

#include "util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})

/* The order in which hooks ran: 'a', 'b' for leaf hooks, 'n' for a node hook. */
typedef struct trace {
    char seq[16];
    int n;
} trace;

static tn_status mark_leaf(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g;
    (void)replace;
    trace *t = ((trace **)ctx)[0];
    t->seq[t->n++] = *(const char *)((void **)ctx)[1];
    return TN_OK;
}
static tn_status mark_node(tn_node *n, int n_in, tn_tensor *const *gi, tn_tensor **replace,
                           int n_out, tn_tensor *const *go, void *ctx) {
    (void)n, (void)n_in, (void)gi, (void)replace, (void)n_out, (void)go;
    trace *t = ctx;
    t->seq[t->n++] = 'n';
    return TN_OK;
}

/* a, b leaves; u = a*2 (made first: runs last), v = b*3; (u + v).sum().backward():
 * b's gradient is complete once MulBackward0 of v ran, before u's node runs,
 * so b's hook runs before u's node (torch 1.13: same order with
 * register_hook on b and on u.grad_fn). */
static void test_leaf_hook_runs_when_ready(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    trace tr = {{0}, 0};
    char ca = 'a', cb = 'b';
    void *ctx_a[2] = {&tr, &ca}, *ctx_b[2] = {&tr, &cb};
    tn_tensor *a = tt_f64(1, S(2), D(1, 2), true), *b = tt_f64(1, S(2), D(3, 4), true);
    tn_tensor *u = tn_mul_scalar(a, 2), *v = tn_mul_scalar(b, 3);
    tn_node *un = tn_grad_fn(u);
    tn_hook *h[3] = {tn_register_hook(a, mark_leaf, ctx_a), tn_register_hook(b, mark_leaf, ctx_b),
                     tn_node_register_hook(un, mark_node, &tr)};
    tn_node_release(un);
    assert_int_equal(tn_backward(tn_sum(tn_add(u, v)), NULL, false), TN_OK);
    assert_string_equal(tr.seq, "bna");
    tt_assert_grad(a, D(2, 2), 2, 0);
    tt_assert_grad(b, D(3, 3), 2, 0);
    for (int i = 0; i < 3; i++)
        tn_hook_release(h[i]);
    tn_scope_end();
}

/* A callback queued from a leaf hook runs once, at the end of the pass,
 * after .grad was updated. */
typedef struct cb_state {
    tn_tensor *leaf;
    int queued, ran;
    tn_status seen;
    double grad0;
    tn_status ret;
} cb_state;

static tn_status at_end(tn_status pass, void *ctx) {
    cb_state *s = ctx;
    s->ran++;
    s->seen = pass;
    tn_tensor *g = tn_grad(s->leaf), *g0 = g ? tn_select(g, 0, 0) : NULL;
    double v = -1;
    if (g) assert_int_equal(tn_item(g0, &v), TN_OK);
    s->grad0 = v;
    tn_release(g0); /* inside backward, as in a hook: no scope owns them */
    tn_release(g);
    if (s->ret < 0) return tn_set_error(s->ret, "callback failed on purpose");
    return s->ret;
}
static tn_status queue_once(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g;
    (void)replace;
    cb_state *s = ctx;
    if (s->queued++) return TN_OK;
    return tn_backward_queue_callback(at_end, s);
}

static void test_queue_callback(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f64(1, S(2), D(1, 2), true);
    cb_state s = {.leaf = x};
    tn_hook *h = tn_register_hook(x, queue_once, &s);
    assert_int_equal(tn_backward(tn_sum(tn_mul(x, x)), NULL, false), TN_OK);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.seen, TN_OK);
    assert_true(s.grad0 == 2.0); /* .grad in place when the callback ran */
    /* outside a pass: PyTorch's error */
    tt_assert_error(tn_backward_queue_callback(at_end, &s),
                    "Final callbacks can only be installed during backward pass.");
    tt_assert_error(tn_backward_queue_callback(NULL, &s), "fn is NULL");
    /* a callback's failure is backward's */
    s.queued = 0;
    s.ret = TN_ERR_INVALID_ARGUMENT;
    tt_assert_error(tn_backward(tn_sum(tn_mul(x, x)), NULL, false), "callback failed on purpose");
    assert_int_equal(s.ran, 2);
    tn_hook_release(h);
    tn_scope_end();
}

/* A pass that fails after the hook queued the callback: the callback still
 * runs, with the failure, and backward keeps its own error and message.
 * x leaf used twice: w = x*1 feeds a sigmoid whose output is changed in
 * place; x's gradient arrives first through x*5 (made last, runs first). */
static void test_callback_on_failed_pass(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f64(1, S(2), D(1, 2), true), *y = tt_f64(1, S(2), D(1, 2), true);
    cb_state s = {.leaf = x};
    tn_hook *h = tn_register_hook(x, queue_once, &s);
    tn_tensor *sg = tn_sigmoid(y);
    tn_tensor *p = tn_mul_scalar(x, 5);
    assert_int_equal(tn_mul_scalar_(sg, 2), TN_OK); /* sigmoid's saved output moved */
    tn_tensor *loss = tn_add(tn_sum(sg), tn_sum(p));
    tt_assert_error(tn_backward(loss, NULL, false), "modified by an inplace operation");
    assert_int_equal(tn_last_status(), TN_ERR_INPLACE_MODIFIED);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.seen, TN_ERR_INPLACE_MODIFIED);
    assert_true(s.grad0 == -1); /* no .grad: the failed pass changed none */
    tn_hook_release(h);
    tn_scope_end();
}

/* tn_write_inplace: one version bump, the data written, allowed on a leaf
 * that requires grad, refused on a non-contiguous tensor, fn's failure
 * returned (and the version still moved: fn may have written part). */
static tn_status write_iota(void *data, int64_t numel, void *ctx) {
    double *d = data;
    for (int64_t i = 0; i < numel; i++)
        d[i] = (double)i * *(double *)ctx;
    return TN_OK;
}
static tn_status write_fails(void *data, int64_t numel, void *ctx) {
    (void)data, (void)numel, (void)ctx;
    return tn_set_error(TN_ERR_IO, "the collective failed");
}

static void test_write_inplace(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double k = 3;
    tn_tensor *p = tt_f64(2, S(2, 2), D(9, 9, 9, 9), true);
    tn_tensor *e = tn_exp(p); /* saves its output */
    assert_int_equal(tn_write_inplace(e, "allreduce", write_iota, &k), TN_OK);
    assert_int_equal(tn_version(e), 1);
    tt_assert_close(e, D(0, 3, 6, 9), 4, 0);
    tt_assert_error(tn_backward(tn_sum(e), NULL, false), "modified by an inplace operation");
    assert_int_equal(tn_write_inplace(p, "broadcast", write_iota, &k), TN_OK); /* a leaf */
    assert_int_equal(tn_version(p), 1);
    tn_tensor *t = tn_transpose(p, 0, 1);
    tt_assert_error(tn_write_inplace(t, "allreduce", write_iota, &k), "must be contiguous");
    assert_int_equal(tn_version(p), 1);
    tn_clear_error();
    tt_assert_error(tn_write_inplace(p, "allreduce", write_fails, NULL), "the collective failed");
    assert_int_equal(tn_version(p), 2);
    tn_clear_error();
    tt_assert_error(tn_write_inplace(NULL, "x", write_iota, &k), "argument 't' is NULL");
    tn_clear_error();
    tt_assert_error(tn_write_inplace(p, "x", NULL, &k), "argument 'fn' is NULL");
    /* tn_set_error: an extension's failure, with its status; a non-error status is refused */
    assert_int_equal(tn_set_error(TN_ERR_DIST, "rank %d failed", 3), TN_ERR_DIST);
    assert_string_equal(tn_last_error(), "rank 3 failed");
    tt_assert_error(tn_set_error(TN_OK, "fine"), "the status must be negative");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_leaf_hook_runs_when_ready),
        TT_TEST(test_queue_callback),
        TT_TEST(test_callback_on_failed_pass),
        TT_TEST(test_write_inplace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
