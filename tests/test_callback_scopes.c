/* Scopes opened inside user code that the engine calls: tensor hooks, node
 * hooks, post-accumulate hooks, backward callbacks and a custom function's
 * forward and backward. Each runs in a frame of its own: tn_scope_begin
 * opens a real scope there, tn_keep hands a tensor out of it, and a scope
 * the callback forgets to end is closed (and fails the call) without a
 * leak, on the calling thread and on backward's workers. */
#include <pthread.h>
#include <string.h>

#include "util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})

/* ---- callbacks -------------------------------------------------------------------------- */

/* The pattern: a value read from the gradient inside a scope. */
static tn_status norm_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)replace;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_status st = tn_item(tn_sum(tn_mul(g, g)), (double *)ctx);
    tn_scope_end();
    return st;
}

/* Replaces the gradient by 2g, made in a nested scope and kept out of both. */
static tn_status double_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)ctx;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_tensor *t = NULL;
    if (tn_scope_begin() == TN_OK) {
        t = tn_keep(tn_mul_scalar(tn_add(g, g), 0.5)); /* into the outer scope */
        tn_scope_end();
    }
    tn_tensor *two = t ? tn_mul_scalar(t, 2) : NULL;
    *replace = two ? tn_keep(two) : NULL; /* leaves the callback's last scope: ours */
    tn_scope_end();
    return *replace ? TN_OK : tn_last_status();
}

static tn_status pre_hook(tn_node *n, int n_out, tn_tensor *const *go, tn_tensor **replace,
                          void *ctx) {
    (void)n, (void)n_out, (void)replace;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_status st = tn_item(tn_sum(tn_exp(go[0])), (double *)ctx);
    tn_scope_end();
    return st;
}

static tn_status post_hook(tn_node *n, int n_in, tn_tensor *const *gi, tn_tensor **replace,
                           int n_out, tn_tensor *const *go, void *ctx) {
    (void)n, (void)n_in, (void)replace, (void)n_out;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_status st = gi[0] ? tn_item(tn_sum(tn_add(gi[0], go[0])), (double *)ctx) : TN_OK;
    tn_scope_end();
    return st;
}

static tn_status post_acc_hook(tn_tensor *leaf, void *ctx) {
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_status st = tn_item(tn_sum(tn_grad(leaf)), (double *)ctx);
    tn_scope_end();
    return st;
}

static tn_status end_callback(tn_status pass, void *ctx) {
    (void)pass;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_tensor *t = tn_full(1, S(3), TN_F32, 2);
    tn_status st = tn_item(tn_sum(tn_mul(t, t)), (double *)ctx);
    tn_scope_end();
    return st;
}

static tn_status queue_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g, (void)replace;
    return tn_backward_queue_callback(end_callback, ctx);
}

/* exp as a custom function, both callbacks with scopes. */
static int exp_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                  tn_tensor **out) {
    (void)n_in, (void)n_out;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_tensor *e = tn_exp(tn_mul_scalar(in[0], 1.0));
    out[0] = e ? tn_keep(e) : NULL;
    tn_scope_end();
    if (!out[0]) return tn_last_status();
    return tn_function_save_for_backward(ctx, 1, out);
}
static int exp_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    (void)n_out, (void)n_in;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_tensor *y;
    tn_status st = tn_function_saved_tensors(ctx, 1, &y); /* y: the scope's */
    gi[0] = st == TN_OK ? tn_keep(tn_mul(go[0], y)) : NULL;
    tn_scope_end();
    return gi[0] ? 1 : tn_last_status();
}
static const tn_function scoped_exp = {
    .name = "ScopedExpBackward", .forward = exp_fw, .backward = exp_bw};

/* ---- one pass of everything ------------------------------------------------------------ */

typedef struct seen {
    double norm, pre, post, acc, cb;
} seen;

/* x (2 elements, requires grad); loss = sum(scoped_exp(x) * 3), hooks on x,
 * on the exp's output and on the mul's node. x.grad = 2 * 3 * exp(x). */
static void one_pass(tn_tensor *x, seen *s) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *e = tn_function_apply1(&scoped_exp, 1, &x);
    assert_non_null(e);
    tn_tensor *m = tn_mul_scalar(e, 3);
    tn_node *mn = tn_grad_fn(m);
    tn_hook *h[6] = {tn_register_hook(x, double_hook, NULL),
                     tn_register_hook(e, norm_hook, &s->norm),
                     tn_node_register_prehook(mn, pre_hook, &s->pre),
                     tn_node_register_hook(mn, post_hook, &s->post),
                     tn_register_post_accumulate_grad_hook(x, post_acc_hook, &s->acc),
                     tn_register_hook(m, queue_hook, &s->cb)};
    tn_node_release(mn);
    assert_int_equal(tn_zero_grad(x), TN_OK);
    assert_int_equal(tn_backward(tn_sum(m), NULL, false), TN_OK);
    for (int i = 0; i < 6; i++)
        tn_hook_remove(h[i]);
    tn_scope_end();
}

static void test_no_leak_over_passes(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S(2), D(0, 1), true);
    seen s = {0};
    one_pass(x, &s); /* warms the thread's scope stack and allocator caches */
    int64_t live = tt_live_tensors();
    for (int i = 0; i < 1000; i++)
        one_pass(x, &s);
    assert_int_equal(tt_live_tensors(), live);
    double e1 = 2.718281828459045;
    assert_true(s.norm > 18 - 1e-9 && s.norm < 18 + 1e-9);       /* e's gradient: 3, 3 */
    assert_true(s.pre > 2 * e1 - 1e-9 && s.pre < 2 * e1 + 1e-9); /* exp(1) per element */
    assert_true(s.post > 8 - 1e-9 && s.post < 8 + 1e-9);         /* (3 + 1) per element */
    assert_true(s.cb > 12 - 1e-9 && s.cb < 12 + 1e-9);
    tt_assert_grad(x, D(6, 6 * e1), 2, 1e-9); /* doubled by the leaf's hook */
    assert_true(s.acc > 6 + 6 * e1 - 1e-9 && s.acc < 6 + 6 * e1 + 1e-9);
    tn_release(x);
}

/* ---- a scope left open ---------------------------------------------------------------- */

/* Opens a scope, makes tensors and hands out one made in it without tn_keep. */
static tn_status forgetful_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)ctx;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    tn_tensor *t = tn_mul_scalar(g, 1.0);
    *replace = tn_add(t, t);
    return TN_OK;
}

static tn_status forgetful_callback(tn_status pass, void *ctx) {
    (void)pass, (void)ctx;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    return tn_full(1, S(4), TN_F32, 1) ? TN_OK : tn_last_status();
}
static tn_status queue_forgetful(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g, (void)replace;
    return tn_backward_queue_callback(forgetful_callback, ctx);
}

static int forgetful_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                        tn_tensor **out) {
    (void)ctx, (void)n_in, (void)n_out;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    out[0] = tn_exp(in[0]); /* the scope's, handed out: taken as kept */
    return out[0] ? TN_OK : tn_last_status();
}
static const tn_function forgetful_fn = {
    .name = "ForgetfulBackward", .forward = forgetful_fw, .backward = exp_bw};

/* A callback that ends more scopes than it opened ends none of its caller's. */
static tn_status overeager_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g, (void)replace, (void)ctx;
    tn_scope_end();
    tn_scope_end();
    return TN_OK;
}

static void test_scope_left_open(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f64(1, S(2), D(1, 2), true);
    int64_t live = tt_live_tensors();
    for (int i = 0; i < 100; i++) { /* a tensor hook: backward fails, the scopes are closed */
        tn_tensor *y = tn_mul_scalar(x, 2);
        tn_hook *h = tn_register_hook(y, forgetful_hook, NULL);
        tt_assert_error(tn_backward(tn_sum(y), NULL, false),
                        "a tensor hook returned with 2 scopes");
        tn_hook_remove(h);
        tn_clear_error();
    }
    assert_null(tn_grad(x)); /* the pass failed before any .grad changed */
    /* a backward callback: the pass's status becomes the error */
    tn_tensor *y = tn_mul_scalar(x, 2);
    tn_hook *h = tn_register_hook(y, queue_forgetful, NULL);
    tt_assert_error(tn_backward(tn_sum(y), NULL, false),
                    "a backward callback returned with 1 scope");
    tn_hook_remove(h);
    /* forward of a custom function: apply fails and hands out nothing */
    tn_tensor *out = x;
    tt_assert_error(tn_function_apply(&forgetful_fn, 1, &x, 1, &out),
                    "a custom function's forward returned with 1 scope");
    assert_null(out);
    /* tn_scope_end with no scope of its own: the caller's scope stays open */
    assert_int_equal(tn_zero_grad(x), TN_OK);
    y = tn_mul_scalar(x, 2);
    h = tn_register_hook(y, overeager_hook, NULL);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tn_hook_remove(h);
    tt_assert_grad(x, D(2, 2), 2, 0);
    assert_non_null(tn_keep(x)); /* x is still this scope's */
    tn_scope_end();
    tn_release(x); /* ours now: it goes with its .grad, the rest went with the scope */
    assert_int_equal(tt_live_tensors(), live - 1);
}

/* A custom function's backward that leaves a scope open, with its result in it. */
static int forgetful_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                        tn_tensor **gi) {
    (void)ctx, (void)n_out, (void)n_in;
    if (tn_scope_begin() != TN_OK) return tn_last_status();
    gi[0] = tn_mul_scalar(go[0], 2);
    return gi[0] ? 1 : tn_last_status();
}
static const tn_function forgetful_bw_fn = {
    .name = "ForgetfulBwBackward", .forward = exp_fw, .backward = forgetful_bw};

static void test_backward_left_open(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S(2), D(1, 2), true);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *e = tn_function_apply1(&forgetful_bw_fn, 1, &x);
        assert_non_null(e);
        tt_assert_error(tn_backward(tn_sum(e), NULL, false),
                        "a custom function's backward returned with 1 scope");
        tn_scope_end();
        tn_clear_error();
    }
    assert_null(tn_grad(x));
    tn_release(x);
}

/* ---- several threads ---------------------------------------------------------------------- */

/* A graph with independent branches (one per leaf), so that a parallel
 * backward runs hooks on several workers at once. */
static void branches_pass(tn_tensor *const *x, int n, seen *s) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *total = NULL;
    tn_hook *h[16];
    for (int i = 0; i < n; i++) {
        tn_tensor *e = tn_function_apply1(&scoped_exp, 1, &x[i]);
        tn_tensor *m = tn_mul_scalar(tn_mul_scalar(e, 1.0), 3);
        h[i] = tn_register_hook(m, norm_hook, &s[i].norm);
        total = total ? tn_add(total, tn_sum(m)) : tn_sum(m);
    }
    assert_int_equal(tn_backward(total, NULL, false), TN_OK);
    for (int i = 0; i < n; i++)
        tn_hook_remove(h[i]);
    tn_scope_end();
}

static void test_parallel_backward(void **state) {
    (void)state;
    enum { N = 8 };
    tn_tensor *x[N];
    seen s[N] = {0};
    for (int i = 0; i < N; i++) {
        x[i] = tn_zeros(1, S(64), TN_F64);
        assert_int_equal(tn_requires_grad_(x[i], true), TN_OK);
    }
    bool prev = tn_is_parallel_backward();
    tn_set_parallel_backward(true);
    branches_pass(x, N, s);
    int64_t live = tt_live_tensors();
    for (int i = 0; i < 300; i++)
        branches_pass(x, N, s);
    assert_int_equal(tt_live_tensors(), live);
    tn_set_parallel_backward(prev);
    for (int i = 0; i < N; i++) {
        assert_true(s[i].norm > 64 - 1e-9 && s[i].norm < 64 + 1e-9); /* m's gradient: ones */
        tn_release(x[i]);
    }
}

typedef struct worker {
    pthread_t th;
    tn_tensor *x;
    seen s;
    int failures;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 200; i++) {
        if (tn_scope_begin() != TN_OK) {
            w->failures++;
            continue;
        }
        tn_tensor *e = tn_function_apply1(&scoped_exp, 1, &w->x);
        tn_tensor *m = e ? tn_mul_scalar(e, 3) : NULL;
        tn_hook *h = m ? tn_register_hook(m, norm_hook, &w->s.norm) : NULL;
        if (!h || tn_backward(tn_sum(m), NULL, false) != TN_OK) w->failures++;
        tn_hook_remove(h);
        tn_scope_end();
    }
    return NULL;
}

/* Threads running backward through graphs of their own: each thread's scope
 * stack is its own, callbacks included. */
static void test_threads(void **state) {
    (void)state;
    enum { T = 3 };
    worker w[T] = {0};
    int64_t live = tt_live_tensors();
    for (int i = 0; i < T; i++) {
        w[i].x = tt_f64(1, S(2), D(0, 0), true);
        assert_int_equal(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(w[i].th, NULL);
        assert_int_equal(w[i].failures, 0);
        assert_true(w[i].s.norm > 2 - 1e-9 && w[i].s.norm < 2 + 1e-9);
        tn_release(w[i].x);
    }
    assert_int_equal(tt_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_no_leak_over_passes),
        TT_TEST(test_scope_left_open),
        TT_TEST(test_backward_left_open),
        TT_TEST(test_parallel_backward),
        TT_TEST(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
