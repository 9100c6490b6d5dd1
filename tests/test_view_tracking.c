/* Views that follow their base after in-place writes (PyTorch's view +
 * in-place tracking, engine/autograd/view_track.c): a view taken before a
 * write through its base or another view regenerates its history from the
 * base's (AsStridedBackward0). Expected values from PyTorch 1.13
 * (/usr/bin/python3; each scenario is written out in its comment). */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <string.h>

#include <tenet/testing.h>

#include "util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})

static tn_tensor *filled(int nd, const int64_t *shape, double v, bool rg) {
    tn_tensor *t = tn_full(nd, shape, TN_F64, v);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

/* root = ones(2,2, rg); x = root.clone(); v1 = x[0:1]; v2 = x[0:1]
 * v1.mul_(2); v2.sum().backward()  ->  root.grad [[2,2],[0,0]] */
static void test_view_follows_write_through_sibling(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *root = filled(2, S(2, 2), 1, true);
    tn_tensor *x = tn_clone(root);
    tn_tensor *v1 = tn_narrow(x, 0, 0, 1), *v2 = tn_narrow(x, 0, 0, 1);
    tt_assert_grad_fn(v2, "SliceBackward0");
    assert_int_equal(tn_mul_scalar_(v1, 2), TN_OK);
    tt_assert_grad_fn(v1, "AsStridedBackward0");
    tt_assert_grad_fn(x, "CopySlices");
    tt_assert_grad_fn(v2, "AsStridedBackward0"); /* regenerated */
    assert_int_equal(tn_backward(tn_sum(v2), NULL, false), TN_OK);
    tt_assert_grad(root, D(2, 2, 0, 0), 4, 0);
    tn_scope_end();
}

/* x = zeros(2,2); v = x.select(0,1); r = ones(2,2, rg); x.add_(r)
 * -> v.requires_grad True, grad_fn AsStridedBackward0 (next: AddBackward0);
 * v.sum().backward() -> r.grad [[0,0],[1,1]] */
static void test_view_follows_base_that_starts_requiring_grad(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tn_zeros(2, S(2, 2), TN_F64), *v = tn_select(x, 0, 1);
    tn_tensor *r = filled(2, S(2, 2), 1, true);
    assert_false(tn_requires_grad(v));
    tt_assert_grad_fn(v, NULL);
    assert_int_equal(tn_add_(x, r), TN_OK);
    assert_true(tn_requires_grad(v));
    assert_false(tn_is_leaf(v));
    tt_assert_grad_fn(v, "AsStridedBackward0");
    assert_int_equal(tn_backward(tn_sum(v), NULL, false), TN_OK);
    tt_assert_grad(r, D(0, 0, 1, 1), 4, 0);
    tn_scope_end();
}

/* root = ones(3,4, rg); x = root.clone(); a = x[1]; b = a[1:3]; x.mul_(3)
 * b.sum().backward() -> root.grad 3 at [1][1], [1][2], else 0 */
static void test_view_of_view_follows_base(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *root = filled(2, S(3, 4), 1, true);
    tn_tensor *x = tn_clone(root), *a = tn_select(x, 0, 1), *b = tn_narrow(a, 0, 1, 2);
    assert_int_equal(tn_mul_scalar_(x, 3), TN_OK);
    tt_assert_grad_fn(b, "AsStridedBackward0");
    assert_int_equal(tn_backward(tn_sum(b), NULL, false), TN_OK);
    tt_assert_grad(root, D(0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0), 12, 0);
    tn_scope_end();
}

/* r = ones(3, rg); x = zeros(3); e = x.expand(2,3); x.add_(r)
 * e.sum().backward() -> r.grad [2,2,2] */
static void test_expanded_view_follows_base(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *r = filled(1, S(3), 1, true), *x = tn_zeros(1, S(3), TN_F64);
    tn_tensor *e = tn_expand(x, 2, S(2, 3));
    assert_int_equal(tn_add_(x, r), TN_OK);
    tt_assert_grad_fn(e, "AsStridedBackward0");
    assert_int_equal(tn_backward(tn_sum(e), NULL, false), TN_OK);
    tt_assert_grad(r, D(2, 2, 2), 3, 0);
    tn_scope_end();
}

/* root = arange(6.).reshape(2,3) rg; x = root.clone(); t = x.t(); x[1].mul_(5)
 * (t * arange(6.).reshape(3,2)).sum().backward()
 * -> root.grad [[0,2,4],[5,15,25]] */
static void test_transposed_view_follows_write_through_row(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *root = tn_reshape(tn_arange(0, 6, 1, TN_F64), 2, S(2, 3));
    assert_int_equal(tn_requires_grad_(root, true), TN_OK);
    tn_tensor *x = tn_clone(root), *t = tn_transpose(x, 0, 1);
    assert_int_equal(tn_mul_scalar_(tn_select(x, 0, 1), 5), TN_OK);
    tn_tensor *w = tn_reshape(tn_arange(0, 6, 1, TN_F64), 2, S(3, 2));
    assert_int_equal(tn_backward(tn_sum(tn_mul(t, w)), NULL, false), TN_OK);
    tt_assert_grad(root, D(0, 2, 4, 5, 15, 25), 6, 0);
    tt_assert_grad_fn(t, "AsStridedBackward0");
    tn_scope_end();
}

/* x = ones(2,2, rg); v = x[0]; with no_grad: x.add_(1)
 * -> v.grad_fn AsStridedBackward0 (next: AccumulateGrad); v.sum().backward()
 * -> x.grad [[1,1],[0,0]]. Values follow the write: v = [2,2]. */
static void test_view_of_leaf_after_no_grad_write(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = filled(2, S(2, 2), 1, true), *v = tn_select(x, 0, 0);
    tt_assert_grad_fn(v, "SelectBackward0");
    bool prev = tn_set_grad_enabled(false);
    assert_int_equal(tn_add_scalar_(x, 1), TN_OK);
    tn_set_grad_enabled(prev);
    tt_assert_grad_fn(v, "AsStridedBackward0");
    tt_assert_close(v, D(2, 2), 2, 0);
    assert_int_equal(tn_backward(tn_sum(v), NULL, false), TN_OK);
    tt_assert_grad(x, D(1, 1, 0, 0), 4, 0);
    tn_scope_end();
}

/* y = ones(2,2, rg) * 2; d = y.detach(); d0 = d[0]; y.mul_(2)
 * -> d0.requires_grad False, grad_fn None (its base is the detached alias) */
static void test_view_of_detached_alias_stays_untracked(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = tn_mul_scalar(filled(2, S(2, 2), 1, true), 2);
    tn_tensor *d0 = tn_select(tn_detach(y), 0, 0);
    assert_int_equal(tn_mul_scalar_(y, 2), TN_OK);
    assert_false(tn_requires_grad(d0));
    tt_assert_grad_fn(d0, NULL);
    assert_int_equal(tn_last_status(), TN_OK);
    tn_scope_end();
}

/* y = ones(2,2, rg) * 2; with no_grad: w = y[0]
 * -> w.requires_grad True, grad_fn None, is_leaf True (PyTorch 1.13);
 * y.add_(1) (grad mode) -> reading w.grad_fn, or using w in an op, fails:
 * "A view was created in no_grad mode and its base or another view of its
 * base has been modified inplace with grad mode enabled. ..." */
static void test_no_grad_view_of_written_base_is_refused(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = tn_mul_scalar(filled(2, S(2, 2), 1, true), 2);
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *w = tn_select(y, 0, 0);
    tn_set_grad_enabled(prev);
    assert_true(tn_requires_grad(w));
    assert_true(tn_is_leaf(w));
    tt_assert_grad_fn(w, NULL);
    /* before the write, w is usable: its gradient leads nowhere (w.grad None) */
    tn_tensor *z = tn_sum(tn_mul_scalar(w, 2));
    assert_non_null(z);
    assert_true(tn_requires_grad(z));
    assert_int_equal(tn_backward(z, NULL, false), TN_OK);
    assert_null(tn_grad(w));
    assert_int_equal(tn_add_scalar_(y, 1), TN_OK);
    assert_null(tn_grad_fn_name(w));
    tt_assert_error(TN_ERR_AUTOGRAD, "A view was created in no_grad mode and its base or another "
                                     "view of its base has been modified inplace with grad mode "
                                     "enabled.");
    assert_null(tn_mul_scalar(w, 2));
    tt_assert_error(TN_ERR_AUTOGRAD, "A view was created in no_grad mode and its base");
    /* back in no-grad mode nothing is recorded, so nothing is refused */
    prev = tn_set_grad_enabled(false);
    tn_tensor *u = tn_mul_scalar(w, 2);
    tn_set_grad_enabled(prev);
    tt_assert_close(u, D(6, 6), 2, 0);
    tn_scope_end();
}

/* x = ones(2, rg); with no_grad: w = x[0:1]; w.mul_(2) (grad mode)
 * -> "A view was created in no_grad mode and is being modified inplace with
 * grad mode enabled. ..."; nothing written, version unchanged. The same for
 * a view of a plain tensor written with an operand that requires grad. */
static void test_no_grad_view_written_in_place_is_refused(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = filled(1, S(2), 1, true), *p = tn_zeros(1, S(2), TN_F64);
    tn_tensor *r = filled(1, S(1), 3, true);
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *w = tn_narrow(x, 0, 0, 1), *q = tn_narrow(p, 0, 0, 1);
    tn_set_grad_enabled(prev);
    assert_int_equal(tn_mul_scalar_(w, 2), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "A view was created in no_grad mode and is being modified "
                                     "inplace with grad mode enabled.");
    tt_assert_close(x, D(1, 1), 2, 0);
    assert_int_equal(tn_version(x), 0);
    assert_int_equal(tn_mul_(q, r), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "A view was created in no_grad mode and is being modified");
    assert_int_equal(tn_version(p), 0);
    /* nothing requires grad: allowed, as in PyTorch */
    assert_int_equal(tn_add_scalar_(q, 1), TN_OK);
    tt_assert_close(p, D(1, 0), 2, 0);
    tn_scope_end();
}

/* The view written in place keeps the history its write gave it; a view
 * not written, of a base no one tracks, stays untracked and cheap. */
static void test_written_view_keeps_its_own_history(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = tn_mul_scalar(filled(2, S(2, 3), 1, true), 2);
    tn_tensor *a = tn_select(y, 0, 0), *b = tn_narrow(a, 0, 1, 2);
    assert_int_equal(tn_mul_scalar_(b, 3), TN_OK);
    /* PyTorch: a AsStridedBackward0, b AsStridedBackward0, y CopySlices */
    tt_assert_grad_fn(a, "AsStridedBackward0");
    tt_assert_grad_fn(b, "AsStridedBackward0");
    tt_assert_grad_fn(y, "CopySlices");
    tn_tensor *root = tn_ones(2, S(2, 3), TN_F64), *plain = tn_narrow(root, 1, 0, 2);
    assert_int_equal(tn_add_scalar_(root, 1), TN_OK);
    assert_false(tn_requires_grad(plain));
    tt_assert_grad_fn(plain, NULL);
    tn_scope_end();
}

/* Threads racing to the same stale view regenerate it once, and every
 * backward through it lands: root.grad = 6 * threads * rounds in the two
 * columns the view covers (x = root.clone(); v = x[:, 1:3]; x.mul_(2);
 * each round (v * 3).sum().backward()). TSan checks the once-guard. */
#define NT 4
#define ROUNDS 50
typedef struct {
    tn_tensor *v;
    pthread_barrier_t *bar;
    int failures;
} race_arg;

static void *race_worker(void *p) {
    race_arg *a = p;
    pthread_barrier_wait(a->bar);
    for (int i = 0; i < ROUNDS; i++) {
        if (tn_scope_begin() != TN_OK) {
            a->failures++;
            continue;
        }
        const char *fn = tn_grad_fn_name(a->v);
        if (!fn || strcmp(fn, "AsStridedBackward0") != 0) a->failures++;
        tn_tensor *s = tn_sum(tn_mul_scalar(a->v, 3));
        if (!s || tn_backward(s, NULL, false) != TN_OK) a->failures++;
        tn_scope_end();
    }
    return NULL;
}

static void test_threads_share_a_stale_view(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *root = filled(2, S(2, 3), 1, true);
    tn_tensor *x = tn_clone(root), *v = tn_narrow(x, 1, 1, 2);
    assert_int_equal(tn_mul_scalar_(x, 2), TN_OK);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    pthread_t th[NT];
    race_arg args[NT];
    for (int i = 0; i < NT; i++) {
        args[i] = (race_arg){.v = v, .bar = &bar};
        assert_int_equal(pthread_create(&th[i], NULL, race_worker, &args[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    pthread_barrier_destroy(&bar);
    const double k = 6.0 * NT * ROUNDS;
    tt_assert_grad(root, D(0, k, k, 0, k, k), 6, 0);
    tn_scope_end();
}

/* A regeneration that runs out of memory fails cleanly and is retried. */
static void test_regeneration_out_of_memory(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *root = filled(1, S(4), 1, true);
    tn_tensor *x = tn_clone(root), *v = tn_narrow(x, 0, 1, 2);
    assert_int_equal(tn_mul_scalar_(x, 2), TN_OK);
    tn_test_fail_alloc_at(1);
    assert_null(tn_grad_fn_name(v));
    tn_test_fail_alloc_at(0);
    assert_int_equal(tn_last_status(), TN_ERR_OUT_OF_MEMORY);
    tt_assert_grad_fn(v, "AsStridedBackward0");
    assert_int_equal(tn_backward(tn_sum(v), NULL, false), TN_OK);
    tt_assert_grad(root, D(0, 2, 2, 0), 4, 0);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_view_follows_write_through_sibling),
        TT_TEST(test_view_follows_base_that_starts_requiring_grad),
        TT_TEST(test_view_of_view_follows_base),
        TT_TEST(test_expanded_view_follows_base),
        TT_TEST(test_transposed_view_follows_write_through_row),
        TT_TEST(test_view_of_leaf_after_no_grad_write),
        TT_TEST(test_view_of_detached_alias_stays_untracked),
        TT_TEST(test_no_grad_view_of_written_base_is_refused),
        TT_TEST(test_no_grad_view_written_in_place_is_refused),
        TT_TEST(test_written_view_keeps_its_own_history),
        TT_TEST(test_threads_share_a_stale_view),
        TT_TEST(test_regeneration_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
