/* Gradient hooks: tensor hooks on leaves and non-leaves, their order with
 * retain_grad, node pre- and post-hooks, post-accumulate hooks, removal,
 * errors, and hooks under several backward threads. Expected values from
 * PyTorch 1.13 (/usr/bin/python3), scenario in each comment. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})

static tn_tensor *vec2(double a, double b, bool rg) { return tt_f64(1, S(2), D(a, b), rg); }

/* g * k, k = *(double *)ctx */
static tn_status scale_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    *replace = tn_mul_scalar((tn_tensor *)g, *(double *)ctx);
    return *replace ? TN_OK : tn_last_status();
}
static tn_status add_one_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)ctx;
    *replace = tn_add_scalar((tn_tensor *)g, 1);
    return *replace ? TN_OK : tn_last_status();
}
/* counts its calls (atomically: backward threads) and keeps the gradient */
static tn_status count_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g;
    (void)replace;
    atomic_fetch_add_explicit((_Atomic int *)ctx, 1, memory_order_relaxed);
    return TN_OK;
}

/* x = [1,2] rg; x.register_hook(g * 10); y = (x*x).sum()
 * autograd.grad(y, x) -> [2,4] (1.13: hooks do not touch captured grads);
 * y.backward() -> x.grad [20,40] */
static void test_leaf_hook(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double ten = 10;
    tn_tensor *x = vec2(1, 2, true);
    tn_hook *h = tn_register_hook(x, scale_hook, &ten);
    assert_non_null(h);
    tn_tensor *y = tn_sum(tn_mul(x, x)), *g = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &g, true, false), TN_OK);
    tt_assert_close(g, D(2, 4), 2, 0);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(x, D(20, 40), 2, 0);
    tn_hook_release(h);
    tn_scope_end();
}

/* a = [1,2] rg; b = a*3; b.register_hook(g * 10); c = (b*b).sum()
 * autograd.grad(c, b) -> [6,12]; c.backward() -> a.grad [180,360] */
static void test_non_leaf_hook(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double ten = 10;
    tn_tensor *a = vec2(1, 2, true), *b = tn_mul_scalar(a, 3);
    tn_hook *h = tn_register_hook(b, scale_hook, &ten);
    tn_tensor *c = tn_sum(tn_mul(b, b)), *g = NULL;
    assert_int_equal(tn_autograd_grad(1, &c, NULL, 1, &b, &g, true, false), TN_OK);
    tt_assert_close(g, D(6, 12), 2, 0);
    assert_int_equal(tn_backward(c, NULL, false), TN_OK);
    tt_assert_grad(a, D(180, 360), 2, 0);
    tn_hook_remove(h);
    tn_scope_end();
}

/* b = a*3; b.register_hook(g*10); b.retain_grad(); (b*1).sum().backward()
 * -> b.grad [10,10], a.grad [30,30]; retain_grad first, then the hook:
 * b.grad [1,1], a.grad [30,30] (PyTorch 1.13: registration order). */
static void test_retain_grad_order(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double ten = 10;
    for (int retain_first = 0; retain_first < 2; retain_first++) {
        tn_tensor *a = vec2(1, 2, true), *b = tn_mul_scalar(a, 3);
        if (retain_first) assert_int_equal(tn_retain_grad(b), TN_OK);
        tn_hook_release(tn_register_hook(b, scale_hook, &ten));
        if (!retain_first) assert_int_equal(tn_retain_grad(b), TN_OK);
        assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(b, 1)), NULL, false), TN_OK);
        if (retain_first) tt_assert_grad(b, D(1, 1), 2, 0);
        else tt_assert_grad(b, D(10, 10), 2, 0);
        tt_assert_grad(a, D(30, 30), 2, 0);
    }
    tn_scope_end();
}

/* x.register_hook(g + 1); x.register_hook(g * 2); (x*2).sum().backward()
 * -> x.grad [6,6]; a removed hook is not called: [2,2]; a hook that keeps
 * the gradient: [2,2] */
static void test_hook_order_and_removal(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double two = 2;
    tn_tensor *x = vec2(1, 2, true);
    tn_hook *h1 = tn_register_hook(x, add_one_hook, NULL), *h2 = tn_register_hook(x, scale_hook, &two);
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(x, 2)), NULL, false), TN_OK);
    tt_assert_grad(x, D(6, 6), 2, 0);
    tn_hook_remove(h1);
    tn_hook_remove(h2);
    _Atomic int calls = 0;
    tn_hook *h3 = tn_register_hook(x, count_hook, (void *)&calls);
    assert_int_equal(tn_zero_grad(x), TN_OK);
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(x, 2)), NULL, false), TN_OK);
    tt_assert_grad(x, D(2, 2), 2, 0);
    assert_int_equal(calls, 1);
    tn_hook_remove(h3);
    tn_hook_remove(NULL);
    tn_scope_end();
}

/* y = x*2 (MulBackward0): prehook go*5 -> x.grad [10,10]; hook gi+100 ->
 * [102,102]; a hook that replaces nothing -> [2,2] */
typedef struct {
    int pre_calls, post_calls;
    double pre_scale, post_add;
} node_ctx;

static tn_status pre_hook(tn_node *n, int n_out, tn_tensor *const *go, tn_tensor **rep, void *ctx) {
    node_ctx *c = ctx;
    c->pre_calls++;
    if (n_out != 1 || strcmp(tn_node_name(n), "MulBackward0") != 0) return TN_ERR_INTERNAL;
    if (c->pre_scale != 1 && !(rep[0] = tn_mul_scalar(go[0], c->pre_scale))) return tn_last_status();
    return TN_OK;
}

static tn_status post_hook(tn_node *n, int n_in, tn_tensor *const *gi, tn_tensor **rep, int n_out,
                           tn_tensor *const *go, void *ctx) {
    node_ctx *c = ctx;
    (void)n;
    c->post_calls++;
    if (n_in != 1 || n_out != 1 || !gi[0] || !go[0]) return TN_ERR_INTERNAL;
    if (c->post_add != 0 && !(rep[0] = tn_add_scalar(gi[0], c->post_add))) return tn_last_status();
    return TN_OK;
}

static void test_node_hooks(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec2(1, 2, true);
    const node_ctx cases[3] = {{0, 0, 5, 0}, {0, 0, 1, 100}, {0, 0, 1, 0}};
    const double want[3][2] = {{10, 10}, {102, 102}, {2, 2}};
    for (int i = 0; i < 3; i++) {
        node_ctx c = cases[i];
        tn_tensor *y = tn_mul_scalar(x, 2);
        tn_node *n = tn_grad_fn(y);
        tn_hook *hp = tn_node_register_prehook(n, pre_hook, &c);
        tn_hook *hq = tn_node_register_hook(n, post_hook, &c);
        assert_int_equal(tn_zero_grad(x), TN_OK);
        assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
        tt_assert_grad(x, want[i], 2, 0);
        assert_int_equal(c.pre_calls, 1);
        assert_int_equal(c.post_calls, 1);
        tn_hook_release(hp);
        tn_hook_release(hq);
        tn_node_release(n);
    }
    tn_scope_end();
}

/* Post-accumulate hooks see .grad after each backward; autograd.grad does
 * not call them; non-leaves and tensors not requiring grad are refused. */
typedef struct {
    int calls;
    double seen[4];
} post_acc_ctx;

static tn_status post_acc(tn_tensor *leaf, void *ctx) {
    post_acc_ctx *c = ctx;
    tn_tensor *g = tn_grad(leaf);
    if (!g) return TN_ERR_INTERNAL;
    double v[2];
    tn_status st = tn_copy_to_f64(g, v, 2);
    tn_release(g);
    if (st < 0 || c->calls >= 2) return TN_ERR_INTERNAL;
    c->seen[2 * c->calls] = v[0];
    c->seen[2 * c->calls + 1] = v[1];
    c->calls++;
    return TN_OK;
}

static void test_post_accumulate_hook(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    post_acc_ctx c = {0};
    tn_tensor *p = vec2(1, 2, true);
    tn_hook *h = tn_register_post_accumulate_grad_hook(p, post_acc, &c);
    assert_non_null(h);
    tn_tensor *y = tn_sum(tn_mul(p, p)), *g = NULL;
    assert_int_equal(tn_backward(y, NULL, true), TN_OK);
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &p, &g, true, false), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    assert_int_equal(c.calls, 2);
    tt_assert_close(tt_f64(1, S(4), c.seen, false), D(2, 4, 4, 8), 4, 0);
    tn_hook_release(h);
    assert_null(tn_register_post_accumulate_grad_hook(y, post_acc, &c));
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "post accumulate grad hooks cannot be registered on non-leaf tensors");
    tn_tensor *plain = vec2(1, 1, false);
    assert_null(tn_register_post_accumulate_grad_hook(plain, post_acc, &c));
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "cannot register a hook on a tensor that doesn't require gradient");
    assert_null(tn_register_hook(plain, count_hook, NULL));
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "cannot register a hook on a tensor that doesn't require gradient");
    tn_clear_error();
    assert_null(tn_register_hook(NULL, count_hook, NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "argument 't' is NULL");
    tn_clear_error();
    assert_null(tn_register_hook(p, NULL, NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "argument 'fn' is NULL");
    tn_scope_end();
}

/* A hook that changes the size (PyTorch: "hook '<lambda>' has changed the
 * size of value"), or fails, stops backward: no .grad is written. */
static tn_status wrong_size_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g;
    (void)ctx;
    *replace = tn_ones(1, S(3), TN_F64);
    return *replace ? TN_OK : tn_last_status();
}
static tn_status failing_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g;
    (void)replace;
    (void)ctx;
    return TN_ERR_INVALID_ARGUMENT;
}

static void test_hook_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec2(1, 2, true), *w = vec2(1, 1, true);
    tn_hook *h = tn_register_hook(x, wrong_size_hook, NULL);
    tn_tensor *y = tn_sum(tn_add(tn_mul_scalar(x, 2), w));
    assert_int_equal(tn_backward(y, NULL, true), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "hook has changed the size of value (was [2] got [3])");
    assert_null(tn_grad(x));
    assert_null(tn_grad(w)); /* a failed pass updates no .grad */
    tn_hook_remove(h);
    tn_tensor *b = tn_mul_scalar(x, 3);
    h = tn_register_hook(b, failing_hook, NULL);
    assert_int_equal(tn_backward(tn_sum(b), NULL, false), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "a tensor hook failed with TN_ERR_INVALID_ARGUMENT");
    assert_null(tn_grad(x));
    tn_hook_remove(h);
    /* without the hooks, the same graph runs */
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(x, D(2, 2), 2, 0);
    tn_scope_end();
}

/* Several threads run backward into a shared leaf with a hook (g * 2):
 * every call is counted and every gradient lands: w.grad = 2 * 3 * NT * R.
 * One more thread registers and removes counting hooks meanwhile. */
#define NT 4
#define ROUNDS 40
typedef struct {
    tn_tensor *w;
    pthread_barrier_t *bar;
    int failures;
    bool registrar;
} th_arg;

static _Atomic int g_calls, g_extra;

static void *worker(void *p) {
    th_arg *a = p;
    pthread_barrier_wait(a->bar);
    for (int i = 0; i < ROUNDS; i++) {
        if (a->registrar) {
            tn_hook *h = tn_register_hook(a->w, count_hook, (void *)&g_extra);
            if (!h) a->failures++;
            tn_hook_remove(h);
            continue;
        }
        if (tn_scope_begin() != TN_OK) {
            a->failures++;
            continue;
        }
        tn_tensor *s = tn_sum(tn_mul_scalar(a->w, 3));
        if (!s || tn_backward(s, NULL, false) != TN_OK) a->failures++;
        tn_scope_end();
    }
    return NULL;
}

static tn_status scale_count_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
    return scale_hook(g, replace, ctx);
}

static void test_hooks_under_threads(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double two = 2;
    tn_tensor *w = tt_f64(1, S(3), D(1, 2, 3), true);
    tn_hook *h = tn_register_hook(w, scale_count_hook, &two);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT + 1);
    pthread_t th[NT + 1];
    th_arg args[NT + 1];
    for (int i = 0; i <= NT; i++) {
        args[i] = (th_arg){.w = w, .bar = &bar, .registrar = i == NT};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i <= NT; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    pthread_barrier_destroy(&bar);
    assert_int_equal(atomic_load(&g_calls), NT * ROUNDS);
    const double k = 2.0 * 3 * NT * ROUNDS;
    tt_assert_grad(w, D(k, k, k), 3, 0);
    tn_hook_remove(h);
    tn_scope_end();
}

/* Node hooks run on the thread that runs the node: with parallel backward,
 * each branch's hook is called once per pass, and the result is exact. */
static tn_status branch_post(tn_node *n, int n_in, tn_tensor *const *gi, tn_tensor **rep,
                             int n_out, tn_tensor *const *go, void *ctx) {
    (void)n, (void)n_in, (void)gi, (void)rep, (void)n_out, (void)go;
    atomic_fetch_add_explicit((_Atomic int *)ctx, 1, memory_order_relaxed);
    return TN_OK;
}

static void test_node_hooks_parallel_backward(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    bool prev = tn_is_parallel_backward();
    tn_set_parallel_backward(true);
    tn_tensor *x = tt_f64(1, S(3), D(1, 2, 3), true);
    enum { B = 8 };
    _Atomic int calls = 0;
    tn_tensor *acc = NULL;
    tn_hook *hs[B];
    for (int i = 0; i < B; i++) {
        tn_tensor *br = tn_mul_scalar(tn_exp(tn_mul_scalar(x, 0.1 * (i + 1))), 1);
        tn_node *n = tn_grad_fn(br);
        hs[i] = tn_node_register_hook(n, branch_post, (void *)&calls);
        tn_node_release(n);
        acc = acc ? tn_add(acc, br) : br;
    }
    assert_int_equal(tn_backward(tn_sum(acc), NULL, false), TN_OK);
    assert_int_equal(atomic_load(&calls), B);
    double want[3];
    for (int j = 0; j < 3; j++) {
        want[j] = 0;
        for (int i = 0; i < B; i++)
            want[j] += 0.1 * (i + 1) * exp(0.1 * (i + 1) * (j + 1));
    }
    tt_assert_grad(x, want, 3, 1e-12);
    for (int i = 0; i < B; i++)
        tn_hook_release(hs[i]);
    tn_set_parallel_backward(prev);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_leaf_hook),
        TT_TEST(test_non_leaf_hook),
        TT_TEST(test_retain_grad_order),
        TT_TEST(test_hook_order_and_removal),
        TT_TEST(test_node_hooks),
        TT_TEST(test_post_accumulate_hook),
        TT_TEST(test_hook_errors),
        TT_TEST(test_hooks_under_threads),
        TT_TEST(test_node_hooks_parallel_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
