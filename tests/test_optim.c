/* tn_sgd / tn_adam against torch.optim (torch 1.13.1 on /usr/bin/python3):
 * the expected parameters below were printed by torch for the same inputs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static const int64_t SHAPE1[] = {4}, SHAPE2[] = {2, 2};
static const double P1[] = {1.0, -2.0, 3.0, 0.5}, P2[] = {0.25, -0.75, 1.5, 2.0};
static const double G1[] = {0.1, -0.2, 0.3, 0.05}, G2[] = {0.5, -0.25, 0.125, 1.0};

/* float32 or float64 tensor of v (owned by the open scope, if any). */
static tn_tensor *make(tn_dtype dt, int ndim, const int64_t *shape, const double *v, bool rg) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float f[64];
    assert_true(n <= 64);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)v[i];
    tn_tensor *t =
        tn_tensor_from(dt == TN_F32 ? (const void *)f : (const void *)v, dt, ndim, shape, rg);
    assert_non_null(t);
    return t;
}

static void set_grad(tn_tensor *p, const double *v) {
    assert_int_equal(tn_scope_begin(), TN_OK); /* p retains its grad; the scope drops ours */
    assert_int_equal(tn_set_grad(p, make(tn_dtype_of(p), tn_ndim(p), tn_shape(p), v, false)),
                     TN_OK);
    tn_scope_end();
}

/* Step s (0-based) of torch's script: p1.grad = G1 * (s + 1); p2.grad = G2 - 0.1 s. */
static void set_step_grads(tn_tensor *p1, tn_tensor *p2, int s) {
    double g1[4], g2[4];
    for (int i = 0; i < 4; i++) {
        g1[i] = G1[i] * (s + 1);
        g2[i] = G2[i] - 0.1 * s;
    }
    set_grad(p1, g1);
    set_grad(p2, g2);
}

typedef tn_status (*step_fn)(void *opt);
static tn_status sgd_step(void *o) { return tn_sgd_step(o); }
static tn_status adam_step(void *o) { return tn_adam_step(o); }

static void three_steps(tn_dtype dt, bool adam, const double *want1, const double *want2) {
    tn_tensor *p1 = make(dt, 1, SHAPE1, P1, true), *p2 = make(dt, 2, SHAPE2, P2, true);
    tn_tensor *ps[] = {p1, p2};
    void *opt = adam ? (void *)tn_adam_new(2, ps, 0.01, 0.9, 0.999, 1e-8, 0.1)
                     : (void *)tn_sgd_new(2, ps, 0.1, 0.9, 0.01);
    assert_non_null(opt);
    for (int s = 0; s < 3; s++) {
        set_step_grads(p1, p2, s);
        assert_int_equal((adam ? adam_step : sgd_step)(opt), TN_OK);
        assert_int_equal(tn_version(p1), s + 1); /* one bump per step */
        assert_int_equal(tn_version(p2), s + 1);
    }
    double tol = dt == TN_F32 ? 1e-6 : 1e-12;
    tt_assert_close(p1, want1, 4, tol);
    tt_assert_close(p2, want2, 4, tol);
    assert_true(tn_is_leaf(p1) && tn_requires_grad(p1));
    if (adam)
        tn_adam_free(opt);
    else
        tn_sgd_free(opt);
    tn_release(p1);
    tn_release(p2);
}

/* torch.optim.SGD([p1, p2], lr=0.1, momentum=0.9, weight_decay=0.01) */
static void test_sgd_matches_torch(void **state) {
    (void)state;
    three_steps(TN_F64, false,
                (const double[]){0.8993527889999999, -1.7987055779999999, 2.6980583670000002,
                                 0.44967639449999997},
                (const double[]){0.007328649749999979, -0.56667607425, 1.460517186, 1.467259498});
    three_steps(TN_F32, false,
                (const double[]){0.8993528485298157, -1.7987056970596313, 2.6980583667755127,
                                 0.44967642426490784},
                (const double[]){0.007328665349632502, -0.566676139831543, 1.460517168045044,
                                 1.467259407043457});
}

/* torch.optim.Adam([p1, p2], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1) */
static void test_adam_matches_torch(void **state) {
    (void)state;
    three_steps(TN_F64, true,
                (const double[]){0.9702142066503179, -1.970216830273058, 2.9702177057976833,
                                 0.4702089729748618},
                (const double[]){0.22045770417546307, -0.7200355211689663, 1.4716863160629936,
                                 1.9701241987807554});
    three_steps(TN_F32, true,
                (const double[]){0.9702142477035522, -1.9702168703079224, 2.970217704772949,
                                 0.470209002494812},
                (const double[]){0.22045770287513733, -0.7200354933738708, 1.4716862440109253,
                                 1.9701242446899414});
}

/* Adam's step count is per parameter: p2 has no grad at step 0 (skipped,
 * version unchanged), so its bias correction starts one step later. */
static void test_adam_skips_params_without_grad(void **state) {
    (void)state;
    const int64_t sh[] = {2};
    tn_tensor *p1 = make(TN_F64, 1, sh, (const double[]){1.0, -2.0}, true);
    tn_tensor *p2 = make(TN_F64, 1, sh, (const double[]){0.5, 0.25}, true);
    tn_adam *opt = tn_adam_new(2, (tn_tensor *[]){p1, p2}, 0.1, 0.8, 0.9, 1e-6, 0);
    assert_non_null(opt);
    for (int s = 0; s < 3; s++) {
        set_grad(p1, (const double[]){0.3, -0.1});
        if (s == 0)
            assert_int_equal(tn_set_grad(p2, NULL), TN_OK);
        else
            set_grad(p2, (const double[]){1.0 * s, -2.0 * s});
        assert_int_equal(tn_adam_step(opt), TN_OK);
        if (s == 0) assert_int_equal(tn_version(p2), 0);
    }
    tt_assert_close(p1, (const double[]){0.7000009999966665, -1.7000029999700002}, 2, 1e-12);
    tt_assert_close(p2, (const double[]){0.30313573934975224, 0.4468643408088747}, 2, 1e-12);
    assert_int_equal(tn_version(p1), 3);
    assert_int_equal(tn_version(p2), 2);
    tn_adam_free(opt);
    tn_release(p1);
    tn_release(p2);
}

/* torch.optim.SGD([p], lr=0.1, momentum=0.5); step; lr = 0.01; step */
static void test_sgd_set_lr_and_plain(void **state) {
    (void)state;
    const int64_t sh[] = {1};
    tn_tensor *p = make(TN_F64, 1, sh, (const double[]){1.0}, true);
    tn_sgd *opt = tn_sgd_new(1, &p, 0.1, 0.5, 0);
    set_grad(p, (const double[]){1.0});
    assert_int_equal(tn_sgd_step(opt), TN_OK);
    tn_sgd_set_lr(opt, 0.01);
    assert_int_equal(tn_sgd_step(opt), TN_OK);
    tt_assert_close(p, (const double[]){0.885}, 1, 1e-14);
    tn_sgd_free(opt);
    /* torch.optim.SGD([p1, p2], lr=0.5), three steps of the common script */
    tn_tensor *p1 = make(TN_F64, 1, SHAPE1, P1, true), *p2 = make(TN_F64, 2, SHAPE2, P2, true);
    opt = tn_sgd_new(2, (tn_tensor *[]){p1, p2}, 0.5, 0, 0);
    for (int s = 0; s < 3; s++) {
        set_step_grads(p1, p2, s);
        assert_int_equal(tn_sgd_step(opt), TN_OK);
    }
    tt_assert_close(p1, (const double[]){0.7, -1.4, 2.1000000000000005, 0.35}, 4, 1e-14);
    tt_assert_close(p2, (const double[]){-0.35, -0.225, 1.4625000000000001, 0.65}, 4, 1e-14);
    tn_sgd_free(opt);
    tn_release(p);
    tn_release(p1);
    tn_release(p2);
}

/* torch keys state by tensor: [p, p] shares one state and steps p twice
 * (torch warns about the duplicate). Two steps, grad [0.5, 0.25]. */
static void test_duplicate_params(void **state) {
    (void)state;
    const int64_t sh[] = {2};
    for (int adam = 0; adam < 2; adam++) {
        tn_tensor *p = make(TN_F64, 1, sh, (const double[]){1.0, -1.0}, true);
        tn_tensor *ps[] = {p, p};
        void *opt = adam ? (void *)tn_adam_new(2, ps, 0.1, 0.9, 0.999, 1e-8, 0)
                         : (void *)tn_sgd_new(2, ps, 0.1, 0.9, 0.1);
        assert_non_null(opt);
        for (int s = 0; s < 2; s++) {
            set_grad(p, (const double[]){0.5, 0.25});
            assert_int_equal((adam ? adam_step : sgd_step)(opt), TN_OK);
        }
        const double sgd_want[] = {0.60961126, -1.097597185};
        const double adam_want[] = {0.6000000080000012, -1.3999999839999995};
        tt_assert_close(p, adam ? adam_want : sgd_want, 2, 1e-12);
        assert_int_equal(tn_version(p), 4);
        if (adam)
            tn_adam_free(opt);
        else
            tn_sgd_free(opt);
        tn_release(p);
    }
}

/* A non-contiguous leaf (transposed storage) takes the strided path and
 * must end where a contiguous copy of it ends. */
static void test_non_contiguous_param(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t sh[] = {3, 4};
    double v[12], g[12];
    for (int i = 0; i < 12; i++)
        v[i] = 0.5 * i - 2, g[i] = 0.1 * (i % 5) - 0.2;
    tn_tensor *src = make(TN_F32, 2, sh, v, false);
    tn_tensor *pt = tn_detach(tn_transpose(src, 0, 1)); /* (4, 3), strides (1, 4) */
    assert_int_equal(tn_requires_grad_(pt, true), TN_OK);
    assert_false(tn_is_contiguous(pt));
    tn_tensor *pc = tn_detach(tn_contiguous(pt));
    assert_int_equal(tn_requires_grad_(pc, true), TN_OK);
    tn_tensor *gt = tn_contiguous(tn_transpose(make(TN_F32, 2, sh, g, false), 0, 1));
    for (int adam = 0; adam < 2; adam++) {
        tn_tensor *ps[] = {pt, pc};
        void *opt = adam ? (void *)tn_adam_new(2, ps, 0.05, 0.9, 0.99, 1e-8, 0.01)
                         : (void *)tn_sgd_new(2, ps, 0.1, 0.9, 0.01);
        for (int s = 0; s < 3; s++) {
            assert_int_equal(tn_set_grad(pt, gt), TN_OK);
            assert_int_equal(tn_set_grad(pc, gt), TN_OK);
            assert_int_equal((adam ? adam_step : sgd_step)(opt), TN_OK);
        }
        double b[12];
        assert_int_equal(tn_copy_to_f64(pc, b, 12), TN_OK);
        tt_assert_close(pt, b, 12, 1e-6);
        if (adam)
            tn_adam_free(opt);
        else
            tn_sgd_free(opt);
    }
    assert_int_equal(tn_version(src), 6); /* pt shares src's counter */
    tn_scope_end();
}

/* Above TN_GRAIN elements the kernel runs on OpenMP threads; the result is
 * the same element-wise formula: two momentum steps give p - lr g (2 + m). */
static void test_large_param(void **state) {
    (void)state;
    enum { N = 200003 };
    const int64_t sh[] = {N};
    tn_tensor *p = tn_zeros(1, sh, TN_F64), *g = tn_arange(0, N, 1, TN_F64);
    assert_int_equal(tn_requires_grad_(p, true), TN_OK);
    tn_sgd *opt = tn_sgd_new(1, &p, 0.5, 0.25, 0);
    for (int s = 0; s < 2; s++) {
        assert_int_equal(tn_set_grad(p, g), TN_OK);
        assert_int_equal(tn_sgd_step(opt), TN_OK);
    }
    const double *d = tn_data_ptr(p);
    for (int64_t i = 0; i < N; i++)
        if (d[i] != -0.5 * (double)i * 2.25) fail_msg("element %lld: %g", (long long)i, d[i]);
    tn_sgd_free(opt);
    tn_release(g);
    tn_release(p);
}

/* Integration: grads from backward, zero_grad clears them without bumping. */
static void test_backward_step_zero_grad(void **state) {
    (void)state;
    const int64_t sh[] = {3};
    tn_tensor *w = make(TN_F32, 1, sh, (const double[]){1, 2, 3}, true);
    tn_sgd *opt = tn_sgd_new(1, &w, 0.1, 0, 0);
    assert_int_equal(tn_scope_begin(), TN_OK);
    assert_int_equal(tn_backward(tn_sum(tn_mul(w, w)), NULL, false), TN_OK); /* grad 2w */
    tn_scope_end();
    assert_true(tn_is_grad_enabled());
    assert_int_equal(tn_sgd_step(opt), TN_OK);
    assert_true(tn_is_grad_enabled()); /* restored */
    tt_assert_close(w, (const double[]){0.8, 1.6, 2.4}, 3, 1e-6);
    assert_int_equal(tn_sgd_zero_grad(opt), TN_OK);
    tn_tensor *g = tn_grad(w);
    assert_null(g);
    assert_int_equal(tn_version(w), 1);
    assert_int_equal(tn_sgd_step(opt), TN_OK); /* nothing to do */
    assert_int_equal(tn_version(w), 1);
    /* a step taken under no-grad leaves no-grad on */
    tn_set_grad_enabled(false);
    assert_int_equal(tn_sgd_step(opt), TN_OK);
    assert_false(tn_is_grad_enabled());
    tn_set_grad_enabled(true);
    tn_sgd_free(opt);
    tn_release(w);
}

#define ASSERT_NEW_FAILS(expr, needle)                                                             \
    do {                                                                                           \
        assert_null(expr);                                                                         \
        tt_assert_error(TN_ERR_INVALID_ARGUMENT, needle);                                          \
    } while (0)

static void test_errors(void **state) {
    (void)state;
    const int64_t sh[] = {2};
    tn_tensor *p = make(TN_F64, 1, sh, (const double[]){1, 2}, true);
    tn_tensor *ps[] = {p};
    ASSERT_NEW_FAILS(tn_sgd_new(1, ps, -0.1, 0, 0), "Invalid learning rate: -0.1");
    ASSERT_NEW_FAILS(tn_sgd_new(1, ps, 0.1, -1, 0), "Invalid momentum value: -1.0");
    ASSERT_NEW_FAILS(tn_sgd_new(1, ps, 0.1, 0, -0.5), "Invalid weight_decay value: -0.5");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, NAN, 0.9, 0.999, 1e-8, 0), "Invalid learning rate: nan");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, -123456789.0, 0.9, 0.999, 1e-8, 0),
                     "Invalid learning rate: -123456789.0");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, -0.00012, 0.9, 0.999, 1e-8, 0),
                     "Invalid learning rate: -0.00012");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, 0.1, 1.0, 0.999, 1e-8, 0),
                     "Invalid beta parameter at index 0: 1.0");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, 0.1, 0.9, -0.1, 1e-8, 0),
                     "Invalid beta parameter at index 1: -0.1");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, 0.1, 0.9, 0.999, -1e-8, 0),
                     "Invalid epsilon value: -1e-08");
    ASSERT_NEW_FAILS(tn_adam_new(1, ps, 0.1, 0.9, 0.999, 1e-8, -1e20),
                     "Invalid weight_decay value: -1e+20");
    ASSERT_NEW_FAILS(tn_sgd_new(0, ps, 0.1, 0, 0), "optimizer got an empty parameter list");
    ASSERT_NEW_FAILS(tn_adam_new(1, NULL, 0.1, 0.9, 0.999, 1e-8, 0), "'params' is NULL");
    tn_clear_error(); /* a NULL right after a failure would keep that failure */
    ASSERT_NEW_FAILS(tn_sgd_new(2, (tn_tensor *[]){p, NULL}, 0.1, 0, 0), "params[1] is NULL");
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *nonleaf = tn_mul_scalar(p, 2);
    ASSERT_NEW_FAILS(tn_sgd_new(1, &nonleaf, 0.1, 0, 0), "can't optimize a non-leaf Tensor");
    /* torch accepts a non-leaf that retains its grad */
    assert_int_equal(tn_retain_grad(nonleaf), TN_OK);
    tn_sgd *ok = tn_sgd_new(1, &nonleaf, 0.1, 0, 0);
    assert_non_null(ok);
    tn_sgd_free(ok);
    tn_scope_end();
    /* NULL optimisers: errors, no crash */
    tn_clear_error();
    assert_int_equal(tn_sgd_step(NULL), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_adam_step(NULL), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_sgd_zero_grad(NULL), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_adam_zero_grad(NULL), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    tn_sgd_set_lr(NULL, 0.1);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "'opt' is NULL");
    tn_sgd_free(NULL);
    tn_adam_free(NULL);
    tn_release(p);
}

/* A failing step changes nothing: a parameter whose elements overlap
 * (expanded) is refused before any parameter is written. */
static void test_failed_step_changes_nothing(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t sh[] = {2}, sh3[] = {3};
    tn_tensor *a = make(TN_F64, 1, sh, (const double[]){1, 2}, true);
    tn_tensor *one = make(TN_F64, 1, (const int64_t[]){1}, (const double[]){5}, false);
    tn_tensor *e = tn_detach(tn_expand(one, 1, sh3)); /* 3 elements, 1 memory location */
    assert_int_equal(tn_requires_grad_(e, true), TN_OK);
    tn_sgd *opt = tn_sgd_new(2, (tn_tensor *[]){a, e}, 0.1, 0.9, 0);
    assert_non_null(opt);
    set_grad(a, (const double[]){1, 1});
    set_grad(e, (const double[]){1, 1, 1});
    assert_int_equal(tn_sgd_step(opt), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "more than one element of the written-to tensor");
    tt_assert_close(a, (const double[]){1, 2}, 2, 0);
    assert_int_equal(tn_version(a), 0);
    assert_true(tn_is_grad_enabled());
    tn_sgd_free(opt);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_sgd_matches_torch),
        TT_TEST(test_adam_matches_torch),
        TT_TEST(test_adam_skips_params_without_grad),
        TT_TEST(test_sgd_set_lr_and_plain),
        TT_TEST(test_duplicate_params),
        TT_TEST(test_non_contiguous_param),
        TT_TEST(test_large_param),
        TT_TEST(test_backward_step_zero_grad),
        TT_TEST(test_errors),
        TT_TEST(test_failed_step_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
