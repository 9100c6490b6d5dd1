/* PyTorch's gradient-scaling scenarios (test_cuda.py's test_grad_scaling_autocast, _clipping,
 * _clipping_separate_unscale, _penalty, _accumulation and _multiple), on the CPU: a model of two
 * 8 -> 8 linear layers trained with SGD (lr 1) on four random batches under an MSE loss, once
 * plainly (the control) and once through the gradient scaler (init scale 128, growth 2 at every
 * clean step), with an inf written into the second layer's weight gradient at iteration 2. The
 * control skips that iteration's step by hand; the scaler must skip it by itself, and both
 * models must end within PyTorch's allclose(atol) of each other: the scale is a power of two,
 * so scaling and unscaling are exact and float32 runs agree to the bit. The scale must end at
 * 128 * 2^(clean steps) * 0.5^(skipped steps). Each scenario also runs with the scaler
 * disabled, where it must change nothing (its scale stays 1).
 */
#include <math.h>

#include "util.h"

#define ITERS 4
#define SKIP_ITER 2
#define NP 4 /* W1, b1, W2, b2 */

typedef enum scenario {
    AUTOCAST, /* the scaled run in a float16 autocast region */
    CLIPPING, /* clip_grad_norm_(max_norm * scale) on the scaled gradients */
    CLIPPING_SEPARATE_UNSCALE,
    PENALTY, /* a gradient-norm penalty through tn_autograd_grad(create_graph) */
    ACCUMULATION,
} scenario;

typedef struct model {
    tn_tensor *p[NP];
    tn_sgd *opt;
} model;

/* torch.nn.Linear's default init: U(-1/sqrt(in), 1/sqrt(in)) */
static tn_tensor *uniform(int ndim, const int64_t *shape) {
    tn_tensor *u = tn_rand(ndim, shape, TN_F32);
    return tn_mul_scalar(tn_add_scalar(tn_mul_scalar(u, 2.0), -1.0), 1.0 / sqrt(8.0));
}

/* Two models with the same parameters (the control and the scaled one). */
static void make_models(model *ctl, model *scl) {
    const int64_t w[2] = {8, 8}, b[1] = {8};
    for (int i = 0; i < NP; i++) {
        tn_tensor *v = i % 2 ? uniform(1, b) : uniform(2, w);
        ctl->p[i] = tn_clone(v), scl->p[i] = tn_clone(v);
        assert_int_equal(tn_requires_grad_(ctl->p[i], true), TN_OK);
        assert_int_equal(tn_requires_grad_(scl->p[i], true), TN_OK);
    }
    ctl->opt = tn_sgd_new(NP, ctl->p, 1.0, 0, 0);
    scl->opt = tn_sgd_new(NP, scl->p, 1.0, 0, 0);
    assert_non_null(ctl->opt), assert_non_null(scl->opt);
}

static void free_models(model *ctl, model *scl) { tn_sgd_free(ctl->opt), tn_sgd_free(scl->opt); }

static tn_tensor *forward(const model *m, const tn_tensor *x) {
    return tn_linear(tn_linear(x, m->p[0], m->p[1]), m->p[2], m->p[3]);
}

/* The data: ITERS (input, target) pairs of 8 x 8 normals. */
static void make_data(tn_tensor **x, tn_tensor **y) {
    for (int i = 0; i < ITERS; i++) {
        x[i] = tn_randn(2, (int64_t[]){8, 8}, TN_F32);
        y[i] = tn_randn(2, (int64_t[]){8, 8}, TN_F32);
    }
}

/* model[1].weight.grad.data.fill_(inf) */
static void inject_inf(const model *m) {
    tn_tensor *g = tn_grad(m->p[2]);
    assert_non_null(g);
    assert_int_equal(tn_fill_(g, INFINITY), TN_OK);
    tn_release(g);
}

/* The loss plus the norm of its parameter gradients (made with create_graph); through the
 * scaler, the gradients of the scaled loss times 1 / scale, as PyTorch's example does. */
static tn_tensor *with_penalty(const model *m, tn_tensor *loss, tn_grad_scaler *sc) {
    tn_tensor *g[NP] = {NULL};
    tn_tensor *root = sc ? tn_grad_scaler_scale(sc, loss) : loss;
    assert_int_equal(tn_autograd_grad(1, &root, NULL, NP, m->p, g, true, true), TN_OK);
    double inv = sc ? 1.0 / tn_grad_scaler_get_scale(sc) : 1.0;
    tn_tensor *norm2 = NULL;
    for (int i = 0; i < NP; i++) {
        tn_tensor *gi = sc ? tn_mul_scalar(g[i], inv) : g[i];
        tn_tensor *s = tn_sum(tn_pow_scalar(gi, 2.0));
        norm2 = norm2 ? tn_add(norm2, s) : s;
    }
    return tn_add(loss, tn_sqrt(norm2));
}

/* One training run. sc NULL: the control, which skips SKIP_ITER's step by hand when `skip`; else
 * the scaled run, which writes the inf at SKIP_ITER when `skip`. */
static void run(scenario k, const model *m, tn_tensor **x, tn_tensor **y, tn_grad_scaler *sc,
                bool skip) {
    const double max_norm = 0.2;
    tn_optimizer *opt = tn_sgd_optimizer(m->opt);
    for (int i = 0; i < ITERS; i++) {
        if (k != ACCUMULATION) assert_int_equal(tn_sgd_zero_grad(m->opt), TN_OK);
        if (k == AUTOCAST && sc) assert_int_equal(tn_autocast_begin(TN_CPU, TN_F16), TN_OK);
        tn_tensor *loss = tn_mse_loss(forward(m, x[i]), y[i]);
        if (k == AUTOCAST && sc) assert_int_equal(tn_autocast_end(), TN_OK);
        if (k == PENALTY) loss = with_penalty(m, loss, sc);
        if (k == ACCUMULATION) loss = tn_mul_scalar(loss, 0.5); /* 2 iterations to accumulate */
        assert_non_null(loss);
        bool inject = sc && skip && i == SKIP_ITER;
        bool stepped = true, want_step = !(skip && i == SKIP_ITER);
        if (!sc) {
            assert_int_equal(tn_backward(loss, NULL, false), TN_OK);
            if (k == CLIPPING || k == CLIPPING_SEPARATE_UNSCALE)
                assert_int_equal(tn_clip_grad_norm_(NP, m->p, max_norm, 2.0, NULL), TN_OK);
            if (k == ACCUMULATION && i % 2 == 0) continue;
            if (want_step) assert_int_equal(tn_optimizer_step(opt), TN_OK);
            if (k == ACCUMULATION) assert_int_equal(tn_sgd_zero_grad(m->opt), TN_OK);
            continue;
        }
        assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, loss), NULL, false), TN_OK);
        if (k == CLIPPING) /* on the scaled gradients, before the inf */
            assert_int_equal(
                tn_clip_grad_norm_(NP, m->p, max_norm * tn_grad_scaler_get_scale(sc), 2.0, NULL),
                TN_OK);
        if (inject) inject_inf(m);
        if (k == CLIPPING_SEPARATE_UNSCALE) {
            assert_int_equal(tn_grad_scaler_unscale_(sc, opt), TN_OK);
            assert_int_equal(tn_clip_grad_norm_(NP, m->p, max_norm, 2.0, NULL), TN_OK);
        }
        if (k == ACCUMULATION && i % 2 == 0) continue;
        assert_int_equal(tn_grad_scaler_step(sc, opt, &stepped), TN_OK);
        assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
        assert_true(stepped == !inject);
        if (k == ACCUMULATION) assert_int_equal(tn_sgd_zero_grad(m->opt), TN_OK);
    }
}

/* torch.allclose(c, s, atol=atol) (rtol 1e-5) over every parameter */
static void assert_allclose(const tn_tensor *c, const tn_tensor *s, double atol) {
    double a[64], b[64];
    int64_t n = tn_numel(c);
    assert_true(n <= 64 && tn_numel(s) == n);
    assert_int_equal(tn_copy_to_f64(c, a, n), TN_OK);
    assert_int_equal(tn_copy_to_f64(s, b, n), TN_OK);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= atol + 1e-5 * fabs(b[i])))
            fail_msg("element %lld: control %.9g, scaled %.9g (atol %g)", (long long)i, a[i], b[i],
                     atol);
}

/* PyTorch's _run_scaling_case: enabled and disabled, the control then the scaled run. */
static void run_case(scenario k, int unskipped, int skipped, double atol) {
    for (int enabled = 1; enabled >= 0; enabled--) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_manual_seed(1234 + (uint64_t)k);
        model ctl, scl;
        tn_tensor *x[ITERS], *y[ITERS];
        make_models(&ctl, &scl);
        make_data(x, y);
        tn_grad_scaler *sc = tn_grad_scaler_new(128.0, 2.0, 0.5, 1, enabled);
        assert_non_null(sc);
        run(k, &ctl, x, y, NULL, enabled && skipped);
        run(k, &scl, x, y, sc, enabled && skipped);
        double want = enabled ? 128.0 * pow(2.0, unskipped) * pow(0.5, skipped) : 1.0;
        assert_float_equal(tn_grad_scaler_get_scale(sc), want, 0);
        int64_t steps = 0, in_row = -1;
        assert_int_equal(tn_grad_scaler_skipped_steps(sc, &steps, &in_row), enabled ? skipped : 0);
        assert_int_equal(steps, enabled ? unskipped + skipped : 0);
        for (int i = 0; i < NP; i++)
            assert_allclose(ctl.p[i], scl.p[i], atol);
        tn_grad_scaler_free(sc);
        free_models(&ctl, &scl);
        tn_scope_end();
    }
}

/* float16 products against float32 ones: PyTorch's atol 1e-3 */
static void test_autocast(void **state) {
    (void)state;
    run_case(AUTOCAST, 3, 1, 1e-3);
}

static void test_clipping(void **state) {
    (void)state;
    run_case(CLIPPING, 3, 1, 1e-7);
}

static void test_clipping_separate_unscale(void **state) {
    (void)state;
    run_case(CLIPPING_SEPARATE_UNSCALE, 3, 1, 1e-7);
}

static void test_penalty(void **state) {
    (void)state;
    run_case(PENALTY, 3, 1, 1e-7);
}

static void test_accumulation(void **state) {
    (void)state;
    run_case(ACCUMULATION, 2, 0, 1e-7);
}

/* test_grad_scaling_multiple: two models, two optimisers, both fed by two losses; the inf is in
 * model 1's gradients only, so at SKIP_ITER optimiser 0 steps and optimiser 1 does not (the
 * inf checks are per optimiser, whichever steps first: even iterations step optimiser 1 first),
 * and the scale backs off once (update sees both). */
static void test_multiple(void **state) {
    (void)state;
    for (int enabled = 1; enabled >= 0; enabled--) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_manual_seed(99);
        model c0, s0, c1, s1;
        tn_tensor *x[ITERS], *y[ITERS];
        make_models(&c0, &s0);
        make_data(x, y);
        make_models(&c1, &s1);
        tn_grad_scaler *sc = tn_grad_scaler_new(128.0, 2.0, 0.5, 1, enabled);
        for (int scaled = 0; scaled < 2; scaled++) {
            const model *m0 = scaled ? &s0 : &c0, *m1 = scaled ? &s1 : &c1;
            tn_optimizer *o0 = tn_sgd_optimizer(m0->opt), *o1 = tn_sgd_optimizer(m1->opt);
            for (int i = 0; i < ITERS; i++) {
                assert_int_equal(tn_sgd_zero_grad(m0->opt), TN_OK);
                assert_int_equal(tn_sgd_zero_grad(m1->opt), TN_OK);
                tn_tensor *out0 = forward(m0, x[i]), *out1 = forward(m1, x[i]);
                tn_tensor *l0 =
                    tn_mse_loss(tn_add(tn_mul_scalar(out0, 0.3), tn_mul_scalar(out1, 0.7)), y[i]);
                tn_tensor *l1 =
                    tn_mse_loss(tn_sub(tn_mul_scalar(out0, 0.6), tn_mul_scalar(out1, 0.4)), y[i]);
                if (!scaled) {
                    assert_int_equal(tn_backward(l0, NULL, true), TN_OK);
                    assert_int_equal(tn_backward(l1, NULL, false), TN_OK);
                    assert_int_equal(tn_optimizer_step(o0), TN_OK);
                    if (!enabled || i != SKIP_ITER) assert_int_equal(tn_optimizer_step(o1), TN_OK);
                    continue;
                }
                assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, l0), NULL, true), TN_OK);
                assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, l1), NULL, false), TN_OK);
                bool inject = enabled && i == SKIP_ITER, st0 = false, st1 = false;
                if (inject) inject_inf(m1);
                assert_int_equal(tn_grad_scaler_unscale_(sc, o0), TN_OK); /* separately */
                if (i % 2) /* PyTorch's order; the other one on even iterations */
                    assert_int_equal(tn_grad_scaler_step(sc, o0, &st0), TN_OK);
                assert_int_equal(tn_grad_scaler_step(sc, o1, &st1), TN_OK);
                if (i % 2 == 0) assert_int_equal(tn_grad_scaler_step(sc, o0, &st0), TN_OK);
                assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
                assert_true(st0);
                assert_true(st1 == !inject);
            }
        }
        assert_float_equal(tn_grad_scaler_get_scale(sc), enabled ? 128.0 * 8 * 0.5 : 1.0, 0);
        for (int i = 0; i < NP; i++) {
            assert_allclose(c0.p[i], s0.p[i], 1e-7);
            assert_allclose(c1.p[i], s1.p[i], 1e-7);
        }
        tn_grad_scaler_free(sc);
        free_models(&c0, &s0);
        free_models(&c1, &s1);
        tn_scope_end();
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_autocast),
        cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_clipping_separate_unscale),
        cmocka_unit_test(test_penalty),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_multiple),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
