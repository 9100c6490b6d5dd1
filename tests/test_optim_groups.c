/* AdamW, parameter groups, learning-rate setters and clip_grad_norm_ against
 * torch 1.13 (tests/optim_expected.h, written by scripts/gen_optim_expected.py
 * for the inputs of tests/test_optim.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#include "optim_expected.h"

static const int64_t SHAPE1[] = {4}, SHAPE2[] = {2, 2};
static const double P1[] = {1.0, -2.0, 3.0, 0.5}, P2[] = {0.25, -0.75, 1.5, 2.0};
static const double G1[] = {0.1, -0.2, 0.3, 0.05}, G2[] = {0.5, -0.25, 0.125, 1.0};

static tn_tensor *make(tn_dtype dt, int ndim, const int64_t *shape, const double *v, bool rg) {
    tn_tensor *t64 = tt_f64(ndim, shape, v, false);
    tn_tensor *t = tn_to(t64, dt, tn_device_of(t64));
    assert_non_null(t);
    tn_release(t64);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

/* Step s (0-based): p1.grad = G1 * (s + 1); p2.grad = G2 - 0.1 s. */
static void set_step_grads(tn_tensor *p1, tn_tensor *p2, int s) {
    double g1[4], g2[4];
    for (int i = 0; i < 4; i++) {
        g1[i] = G1[i] * (s + 1);
        g2[i] = G2[i] - 0.1 * s;
    }
    tn_tensor *a = make(tn_dtype_of(p1), 1, SHAPE1, g1, false);
    tn_tensor *b = make(tn_dtype_of(p2), 2, SHAPE2, g2, false);
    assert_int_equal(tn_set_grad(p1, a), TN_OK);
    assert_int_equal(tn_set_grad(p2, b), TN_OK);
    tn_release(a);
    tn_release(b);
}

typedef enum { ADAMW, ADAMW_GROUPS, ADAM_GROUPS, SGD_GROUPS, ADAMW_GROUPS_LR } opt_case;

typedef struct fixture {
    tn_tensor *p1, *p2;
    tn_adam *adam;
    tn_sgd *sgd;
} fixture;

/* The optimiser of each case, as scripts/gen_optim_expected.py makes it. */
static void make_opt(fixture *f, opt_case c) {
    tn_tensor *both[] = {f->p1, f->p2}, *one[] = {f->p1}, *two[] = {f->p2};
    const double D = TN_OPTIM_DEFAULT;
    f->adam = NULL;
    f->sgd = NULL;
    switch (c) {
    case ADAMW:
        f->adam = tn_adamw_new(2, both, 0.01, 0.9, 0.95, 1e-8, 0.1);
        break;
    case ADAMW_GROUPS:
    case ADAMW_GROUPS_LR: {
        tn_param_group g[] = {{1, two, D, 0.1}, {1, one, 0.02, 0.0}};
        f->adam = tn_adamw_new_groups(2, g, 0.01, 0.9, 0.95, 1e-8, 0.01);
        break;
    }
    case ADAM_GROUPS: {
        tn_param_group g[] = {{1, one, D, D}, {1, two, D, 0.0}};
        f->adam = tn_adam_new_groups(2, g, 0.01, 0.9, 0.999, 1e-8, 0.1);
        break;
    }
    case SGD_GROUPS: {
        tn_param_group g[] = {{1, one, 0.05, D}, {1, two, D, D}};
        f->sgd = tn_sgd_new_groups(2, g, 0.1, 0.9, 0.01);
        break;
    }
    }
    assert_true(f->adam || f->sgd);
}

static void three_steps(opt_case c, tn_dtype dt, const double *want) {
    fixture f = {make(dt, 1, SHAPE1, P1, true), make(dt, 2, SHAPE2, P2, true), NULL, NULL};
    make_opt(&f, c);
    for (int s = 0; s < 3; s++) {
        if (c == ADAMW_GROUPS_LR && s == 1) assert_int_equal(tn_adam_set_lr(f.adam, -1, 0.005), 0);
        if (c == ADAMW_GROUPS_LR && s == 2) assert_int_equal(tn_adam_set_lr(f.adam, 1, 0.001), 0);
        set_step_grads(f.p1, f.p2, s);
        assert_int_equal(f.adam ? tn_adam_step(f.adam) : tn_sgd_step(f.sgd), TN_OK);
        assert_int_equal(tn_version(f.p1), s + 1);
    }
    double tol = dt == TN_F32 ? 2e-7 : 1e-14;
    tt_assert_close(f.p1, want, 4, tol);
    tt_assert_close(f.p2, want + 4, 4, tol);
    tn_adam_free(f.adam);
    tn_sgd_free(f.sgd);
    tn_release(f.p1);
    tn_release(f.p2);
}

static void test_adamw_matches_torch(void **state) {
    (void)state;
    three_steps(ADAMW, TN_F64, ADAMW_F64);
    three_steps(ADAMW, TN_F32, ADAMW_F32);
}

static void test_groups_match_torch(void **state) {
    (void)state;
    three_steps(ADAMW_GROUPS, TN_F64, ADAMW_GROUPS_F64);
    three_steps(ADAMW_GROUPS, TN_F32, ADAMW_GROUPS_F32);
    three_steps(ADAM_GROUPS, TN_F64, ADAM_GROUPS_F64);
    three_steps(ADAM_GROUPS, TN_F32, ADAM_GROUPS_F32);
    three_steps(SGD_GROUPS, TN_F64, SGD_GROUPS_F64);
    three_steps(SGD_GROUPS, TN_F32, SGD_GROUPS_F32);
}

static void test_set_lr_matches_torch(void **state) {
    (void)state;
    three_steps(ADAMW_GROUPS_LR, TN_F64, ADAMW_GROUPS_LR_F64);
    three_steps(ADAMW_GROUPS_LR, TN_F32, ADAMW_GROUPS_LR_F32);
}

static void test_lr_getters(void **state) {
    (void)state;
    fixture f = {make(TN_F32, 1, SHAPE1, P1, true), make(TN_F32, 2, SHAPE2, P2, true), 0, 0};
    make_opt(&f, ADAMW_GROUPS);
    assert_int_equal(tn_adam_num_groups(f.adam), 2);
    assert_true(tn_adam_get_lr(f.adam, 0) == 0.01 && tn_adam_get_lr(f.adam, 1) == 0.02);
    assert_int_equal(tn_adam_set_lr(f.adam, 0, 0.5), TN_OK);
    assert_true(tn_adam_get_lr(f.adam, 0) == 0.5 && tn_adam_get_lr(f.adam, 1) == 0.02);
    assert_int_equal(tn_adam_set_lr(f.adam, 2, 0.5), TN_ERR_INDEX);
    tt_assert_error(TN_ERR_INDEX, "group 2 out of range (the optimizer has 2)");
    assert_true(isnan(tn_adam_get_lr(f.adam, -1)));
    tt_assert_error(TN_ERR_INDEX, "group -1 out of range");
    tn_adam *adam = f.adam;
    make_opt(&f, SGD_GROUPS);
    tn_sgd_set_lr(f.sgd, 0.25);
    assert_true(tn_sgd_get_lr(f.sgd, 0) == 0.25 && tn_sgd_get_lr(f.sgd, 1) == 0.25);
    assert_int_equal(tn_sgd_set_group_lr(f.sgd, 1, 0.125), TN_OK);
    assert_true(tn_sgd_get_lr(f.sgd, 0) == 0.25 && tn_sgd_get_lr(f.sgd, 1) == 0.125);
    tn_sgd_free(f.sgd);
    tn_clear_error();
    assert_int_equal(tn_adam_set_lr(NULL, 0, 1), TN_ERR_INVALID_ARGUMENT);
    tn_adam_free(adam);
    tn_release(f.p1);
    tn_release(f.p2);
}

static void test_group_errors(void **state) {
    (void)state;
    tn_tensor *p1 = make(TN_F32, 1, SHAPE1, P1, true), *p2 = make(TN_F32, 2, SHAPE2, P2, true);
    tn_tensor *one[] = {p1}, *both[] = {p1, p2}, *none[] = {NULL};
    const double D = TN_OPTIM_DEFAULT;
    tn_param_group two_groups[] = {{2, both, D, D}, {1, one, D, D}};
    assert_null(tn_adamw_new_groups(2, two_groups, 1e-3, 0.9, 0.95, 1e-8, 0.1));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "some parameters appear in more than one parameter group");
    tn_param_group empty[] = {{0, NULL, D, D}, {0, NULL, D, D}};
    assert_null(tn_sgd_new_groups(2, empty, 0.1, 0, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "optimizer got an empty parameter list");
    assert_null(tn_adam_new_groups(0, empty, 0.1, 0.9, 0.9, 1e-8, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "optimizer got an empty parameter list");
    tn_clear_error();
    assert_null(tn_adamw_new_groups(1, NULL, 0.1, 0.9, 0.9, 1e-8, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "'groups' is NULL");
    tn_param_group with_null[] = {{1, one, D, D}, {1, none, D, D}};
    tn_clear_error();
    assert_null(tn_adamw_new_groups(2, with_null, 0.1, 0.9, 0.9, 1e-8, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "groups[1].params[0] is NULL");
    tn_param_group bad_lr[] = {{1, one, -1.0, D}};
    assert_null(tn_adamw_new_groups(1, bad_lr, 0.1, 0.9, 0.9, 1e-8, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "Invalid learning rate: -1.0");
    tn_param_group bad_wd[] = {{1, one, D, -0.5}};
    assert_null(tn_sgd_new_groups(1, bad_wd, 0.1, 0, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "Invalid weight_decay value: -0.5");
    assert_null(tn_adamw_new(2, both, 0.1, 1.0, 0.9, 1e-8, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "Invalid beta parameter at index 0: 1.0");
    /* a group may be empty when another is not */
    tn_param_group some[] = {{0, NULL, D, D}, {2, both, D, D}};
    tn_adam *ok = tn_adamw_new_groups(2, some, 0.1, 0.9, 0.9, 1e-8, 0);
    assert_non_null(ok);
    tn_adam_free(ok);
    tn_release(p1);
    tn_release(p2);
}

/* clip_grad_norm_ of the step-1 grads; want = {total, grads of p1, grads of p2} */
static void clip_case(tn_dtype dt, double max_norm, double p, const double *want) {
    tn_tensor *p1 = make(dt, 1, SHAPE1, P1, true), *p2 = make(dt, 2, SHAPE2, P2, true);
    set_step_grads(p1, p2, 1);
    double total = -1;
    assert_int_equal(tn_clip_grad_norm_(2, (tn_tensor *[]){p1, p2}, max_norm, p, &total), TN_OK);
    double tol = dt == TN_F32 ? 1e-7 : 1e-15;
    assert_true(fabs(total - want[0]) <= tol * fabs(want[0]));
    tt_assert_grad(p1, want + 1, 4, tol);
    tt_assert_grad(p2, want + 5, 4, tol);
    tn_release(p1);
    tn_release(p2);
}

static void test_clip_grad_norm_matches_torch(void **state) {
    (void)state;
    clip_case(TN_F64, 1.0, 2.0, CLIP_L2_F64);
    clip_case(TN_F32, 1.0, 2.0, CLIP_L2_F32);
    clip_case(TN_F64, 10.0, 2.0, CLIP_L2_NOOP_F64);
    clip_case(TN_F32, 10.0, 2.0, CLIP_L2_NOOP_F32);
    clip_case(TN_F64, 0.5, INFINITY, CLIP_INF_F64);
    clip_case(TN_F32, 0.5, INFINITY, CLIP_INF_F32);
    clip_case(TN_F64, 0.25, 3.0, CLIP_L3_F64);
    clip_case(TN_F32, 0.25, 3.0, CLIP_L3_F32);
    clip_case(TN_F64, 1.0, 1.0, CLIP_L1_F64);
    clip_case(TN_F32, 1.0, 1.0, CLIP_L1_F32);
}

/* Parameters without a .grad are skipped; none at all: total 0. The grads'
 * versions move once per call, as torch's g.mul_ does even when not clipping. */
static void test_clip_grad_norm_edges(void **state) {
    (void)state;
    tn_tensor *p1 = make(TN_F32, 1, SHAPE1, P1, true), *p2 = make(TN_F32, 2, SHAPE2, P2, true);
    tn_tensor *ps[] = {p1, p2};
    double total = -1;
    assert_int_equal(tn_clip_grad_norm_(2, ps, 1.0, 2.0, &total), TN_OK);
    assert_true(total == 0);
    assert_int_equal(tn_clip_grad_norm_(0, NULL, 1.0, 2.0, &total), TN_OK);
    set_step_grads(p1, p2, 1);
    assert_int_equal(tn_set_grad(p2, NULL), TN_OK);
    assert_int_equal(tn_clip_grad_norm_(2, ps, 100.0, 2.0, NULL), TN_OK);
    tn_tensor *g = tn_grad(p1);
    assert_int_equal(tn_version(g), 1);
    tt_assert_grad(p1, (const double[]){0.2, -0.4, 0.6, 0.1}, 4, 1e-7);
    tn_release(g);
    tn_release(p1);
    tn_release(p2);
}

/* A (6, 4) gradient with values v(i, j) = ((7 i + 3 j) % 11 - 5) / 8 given as layout `how`: 0
 * contiguous, 1 a transpose of a (4, 6) tensor (one dense block, measured in place), 2 every
 * other column of a (6, 8) tensor (strided: every gradient then goes the float64-op way). */
static tn_tensor *grad_as(int how, tn_dtype dt) {
    double v[6 * 8];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 8; j++) {
            double x = (double)((7 * i + 3 * j) % 11 - 5) / 8;
            if (how == 0 && j < 4) v[i * 4 + j] = x;
            if (how == 1 && j < 4) v[j * 6 + i] = x;
            if (how == 2) v[i * 8 + j] = j % 2 ? 99 : (double)((7 * i + 3 * (j / 2)) % 11 - 5) / 8;
        }
    const int64_t shape[2] = {how == 1 ? 4 : 6, how == 0 ? 4 : how == 1 ? 6 : 8};
    tn_tensor *t = make(dt, 2, shape, v, false), *g = NULL;
    if (how == 0) return t;
    if (how == 1) g = tn_transpose(t, 0, 1);
    if (how == 2) {
        tn_tensor *e = tn_reshape(t, 3, (const int64_t[]){6, 4, 2});
        g = tn_select(e, 2, 0);
        tn_release(e);
    }
    tn_release(t);
    assert_non_null(g);
    return g;
}

/* The same gradients in every layout, and of two dtypes together, give one total: the sums of
 * squares and maxima as plain loops make them (float64; rounding apart), and the gradients
 * scaled by it. */
static void test_clip_grad_norm_layouts(void **state) {
    (void)state;
    double sq = 0, mx = 0;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) {
            double x = (double)((7 * i + 3 * j) % 11 - 5) / 8;
            sq += x * x;
            mx = fabs(x) > mx ? fabs(x) : mx;
        }
    const double p_of[2] = {2.0, INFINITY}, want[2] = {sqrt(2 * sq), mx};
    for (int q = 0; q < 2; q++)
        for (int how = 0; how < 3; how++)
            for (int mixed = 0; mixed < 2; mixed++) {
                tn_tensor *a = tn_zeros(2, (const int64_t[]){6, 4}, TN_F64);
                tn_tensor *b = tn_zeros(2, (const int64_t[]){6, 4}, mixed ? TN_F32 : TN_F64);
                assert_int_equal(tn_requires_grad_(a, true), TN_OK);
                assert_int_equal(tn_requires_grad_(b, true), TN_OK);
                tn_tensor *ga = grad_as(how, TN_F64), *gb = grad_as(0, tn_dtype_of(b));
                assert_int_equal(tn_set_grad(a, ga), TN_OK);
                assert_int_equal(tn_set_grad(b, gb), TN_OK);
                double total = -1;
                assert_int_equal(tn_clip_grad_norm_(2, (tn_tensor *[]){a, b}, 0.5, p_of[q], &total),
                                 TN_OK);
                if (fabs(total - want[q]) > 1e-12 * want[q])
                    fail_msg("p %g layout %d mixed %d: total %.17g, want %.17g", p_of[q], how,
                             mixed, total, want[q]);
                /* a's gradient (float64) scaled by 0.5 / (total + 1e-6) */
                double c = 0.5 / (want[q] + 1e-6), g[24];
                for (int i = 0; i < 24; i++)
                    g[i] = c * (double)((7 * (i / 4) + 3 * (i % 4)) % 11 - 5) / 8;
                tt_assert_grad(a, g, 24, 1e-12);
                tn_release(ga), tn_release(gb), tn_release(a), tn_release(b);
            }
}

static void test_clip_grad_norm_errors(void **state) {
    (void)state;
    tn_tensor *p1 = make(TN_F64, 1, SHAPE1, P1, true);
    tn_tensor *g0 = make(TN_F64, 1, SHAPE1, G1, false);
    assert_int_equal(tn_set_grad(p1, g0), TN_OK);
    tn_release(g0);
    tn_tensor *ps[] = {p1}, *nul[] = {NULL};
    double total = 7;
    tn_clear_error();
    assert_int_equal(tn_clip_grad_norm_(1, NULL, 1, 2, &total), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_clip_grad_norm_(1, nul, 1, 2, &total), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "params[0] is NULL");
    assert_int_equal(tn_clip_grad_norm_(-1, ps, 1, 2, &total), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_clip_grad_norm_(1, ps, NAN, 2, &total), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "max_norm is NaN");
    assert_int_equal(tn_clip_grad_norm_(1, ps, 0.01, 0, &total), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "norm_type must be positive");
    assert_int_equal(tn_clip_grad_norm_(1, ps, 0.01, NAN, &total), TN_ERR_INVALID_ARGUMENT);
    assert_true(total == 7); /* nothing written, nothing scaled */
    tt_assert_grad(p1, G1, 4, 0);
    tn_tensor *g = tn_grad(p1);
    assert_int_equal(tn_version(g), 0);
    tn_release(g);
    tn_release(p1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_adamw_matches_torch),  TT_TEST(test_groups_match_torch),
        TT_TEST(test_set_lr_matches_torch), TT_TEST(test_lr_getters),
        TT_TEST(test_group_errors),         TT_TEST(test_clip_grad_norm_matches_torch),
        TT_TEST(test_clip_grad_norm_edges), TT_TEST(test_clip_grad_norm_errors),
        TT_TEST(test_clip_grad_norm_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
