/* tests/test_autograd.c — docs/semantics.md §2-§5: version counters, saved
 * tensors and their checks, autograd errors, gradients, grad mode, scopes.
 * Expected values and texts come from PyTorch 1.13 (2.11 where the spec says). */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MODIFIED_MSG                                                                               \
    "one of the variables needed for gradient computation has been modified by an "                \
    "inplace operation: "
#define SECOND_TIME_MSG                                                                            \
    "Trying to backward through the graph a second time (or directly access saved "                \
    "tensors after they have already been freed). Saved intermediate values of the graph "         \
    "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "        \
    "you need to backward through the graph a second time or if you need to access saved "         \
    "tensors after calling backward."
#define DETACHED_SAVED_MSG                                                                         \
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."          \
    "This is not supported, please use out-of-place `.detach()` instead"
#define LEAF_MSG "a leaf Variable that requires grad is being used in an in-place operation."
#define VIEW_LEAF_MSG                                                                              \
    "a view of a leaf Variable that requires grad is being used in an in-place operation."

static const int64_t S3[] = {3};

static tn_tensor *vec3(double x, double y, double z, bool rg) {
    return tt_f32(1, S3, (const float[]){(float)x, (float)y, (float)z}, rg);
}

static tn_tensor *vec3d(double x, double y, double z, bool rg) {
    return tt_f64(1, S3, (const double[]){x, y, z}, rg);
}

static void assert_prefix(const char *msg, const char *prefix) {
    if (strncmp(msg, prefix, strlen(prefix)) != 0)
        fail_msg("message \"%s\"\ndoes not start with \"%s\"", msg, prefix);
}

/* The full version-mismatch text up to "instead." for a [float32 [3]] tensor. */
static void assert_modified(const char *grad_fn, int cur, int saved) {
    char want[512];
    snprintf(want, sizeof want,
             MODIFIED_MSG "[float32 [3]], which is output 0 of %s, is at version %d; expected "
                          "version %d instead.",
             grad_fn, cur, saved);
    assert_int_equal(tn_last_status(), TN_ERR_INPLACE_MODIFIED);
    assert_prefix(tn_last_error(), want);
    assert_non_null(strstr(tn_last_error(), " Hint: "));
}

/* ---- §2 version counters ---------------------------------------------------- */

typedef tn_status (*inplace_fn)(tn_tensor *t, tn_tensor *other);
static tn_status ip_add(tn_tensor *t, tn_tensor *o) { return tn_add_(t, o); }
static tn_status ip_sub(tn_tensor *t, tn_tensor *o) { return tn_sub_(t, o); }
static tn_status ip_mul(tn_tensor *t, tn_tensor *o) { return tn_mul_(t, o); }
static tn_status ip_div(tn_tensor *t, tn_tensor *o) { return tn_div_(t, o); }
static tn_status ip_adds(tn_tensor *t, tn_tensor *o) { return tn_add_scalar_(t, 2); }
static tn_status ip_muls(tn_tensor *t, tn_tensor *o) { return tn_mul_scalar_(t, 2); }
static tn_status ip_zero(tn_tensor *t, tn_tensor *o) { return tn_zero_(t); }
static tn_status ip_fill(tn_tensor *t, tn_tensor *o) { return tn_fill_(t, 7); }
static tn_status ip_copy(tn_tensor *t, tn_tensor *o) { return tn_copy_(t, o); }
static tn_status ip_clamp(tn_tensor *t, tn_tensor *o) { return tn_clamp_(t, 1.5, 2.5); }
static tn_status ip_relu(tn_tensor *t, tn_tensor *o) { return tn_relu_(t); }
static tn_status ip_sigmoid(tn_tensor *t, tn_tensor *o) { return tn_sigmoid_(t); }
static tn_status ip_exp(tn_tensor *t, tn_tensor *o) { return tn_exp_(t); }
static tn_status ip_neg(tn_tensor *t, tn_tensor *o) { return tn_neg_(t); }
static tn_status ip_add_out(tn_tensor *t, tn_tensor *o) { return tn_add_out(t, o, o); }
static tn_status ip_mul_out(tn_tensor *t, tn_tensor *o) { return tn_mul_out(t, o, o); }

static const struct {
    const char *name;
    inplace_fn f;
} INPLACE[] = {
    {"add_", ip_add},        {"sub_", ip_sub},         {"mul_", ip_mul},
    {"div_", ip_div},        {"add_scalar_", ip_adds}, {"mul_scalar_", ip_muls},
    {"zero_", ip_zero},      {"fill_", ip_fill},       {"copy_", ip_copy},
    {"clamp_", ip_clamp},    {"relu_", ip_relu},       {"sigmoid_", ip_sigmoid},
    {"exp_", ip_exp},        {"neg_", ip_neg},         {"add_out", ip_add_out},
    {"mul_out", ip_mul_out},
};
#define N_INPLACE ((int)(sizeof INPLACE / sizeof INPLACE[0]))

static void every_inplace_op_bumps_once(void **state) {
    for (int mode = 0; mode < 2; mode++) { /* whatever the grad mode */
        bool prev = tn_set_grad_enabled(mode == 0);
        for (int i = 0; i < N_INPLACE; i++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_tensor *x = vec3(1, 2, 3, false), *o = vec3(4, 5, 6, false);
            if (INPLACE[i].f(x, o) != TN_OK)
                fail_msg("%s failed: %s", INPLACE[i].name, tn_last_error());
            if (tn_version(x) != 1)
                fail_msg("%s: version %lld, want 1", INPLACE[i].name, (long long)tn_version(x));
            assert_int_equal(tn_version(o), 0);
            tn_scope_end();
        }
        tn_set_grad_enabled(prev);
    }
}

static void inplace_noop_values_still_bump(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(1, 2, 3, false);
    assert_int_equal(tn_add_scalar_(x, 0), TN_OK); /* add_(0) */
    assert_int_equal(tn_version(x), 1);
    assert_int_equal(tn_mul_scalar_(x, 1), TN_OK);
    assert_int_equal(tn_version(x), 2);
    assert_int_equal(tn_add_(x, tn_zeros(1, S3, TN_F32)), TN_OK);
    assert_int_equal(tn_version(x), 3);
    tt_assert_close(x, (double[]){1, 2, 3}, 3, 0);
    tn_scope_end();
}

/* x.mul_(2).add_(1) twice: 4 bumps. */
static void chained_inplace_bumps_each(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(1, 1, 1, false);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tn_mul_scalar_(x, 2), TN_OK);
        assert_int_equal(tn_add_scalar_(x, 1), TN_OK);
    }
    assert_int_equal(tn_version(x), 4);
    tt_assert_close(x, (double[]){7, 7, 7}, 3, 0);
    tn_scope_end();
}

static void inplace_through_views_bumps_base(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t shape[] = {4, 3};
    tn_tensor *base = tn_ones(2, shape, TN_F32);
    tn_tensor *v = tn_narrow(base, 0, 1, 2);
    tn_tensor *vv = tn_select(v, 0, 0); /* a view of a view: row 1 of base */
    tn_tensor *t = tn_transpose(base, 0, 1);
    assert_non_null(vv);
    assert_non_null(t);
    assert_int_equal(tn_add_scalar_(vv, 1), TN_OK);
    assert_int_equal(tn_version(base), 1);
    assert_int_equal(tn_version(v), 1);
    assert_int_equal(tn_version(vv), 1);
    assert_int_equal(tn_version(t), 1);
    tt_assert_close(base, (double[]){1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1}, 12, 0);
    assert_int_equal(tn_mul_scalar_(t, 3), TN_OK); /* through a non-contiguous view */
    assert_int_equal(tn_version(base), 2);
    assert_int_equal(tn_version(vv), 2);
    tt_assert_close(base, (double[]){3, 3, 3, 6, 6, 6, 3, 3, 3, 3, 3, 3}, 12, 0);
    /* a view taken after the writes sees the same counter */
    assert_int_equal(tn_version(tn_select(base, 0, 2)), 2);
    tn_scope_end();
}

static void out_of_place_never_bumps_inputs(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s23[] = {2, 3};
    tn_tensor *a = tt_f32(2, s23, (const float[]){1, 2, 3, 4, 5, 6}, true);
    tn_tensor *b = vec3(1, 2, 3, false);
    tn_tensor *outs[] = {
        tn_add(a, b),
        tn_mul(a, b),
        tn_div(a, b),
        tn_exp(a),
        tn_sigmoid(a),
        tn_relu(a),
        tn_sum(a),
        tn_sum_dim(a, 1, false),
        tn_mean(a),
        tn_softmax(a, 1),
        tn_clone(a),
        tn_detach(a),
        tn_transpose(a, 0, 1),
        tn_matmul(a, b),
        tn_contiguous(tn_transpose(a, 0, 1)),
        tn_mul_scalar(b, 2),
        tn_clamp(a, 2, 4),
        tn_log_softmax(a, 0),
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        if (!outs[i]) fail_msg("op %zu failed: %s", i, tn_last_error());
        assert_int_equal(tn_version(outs[i]), 0);
    }
    assert_int_equal(tn_version(a), 0);
    assert_int_equal(tn_version(b), 0);
    assert_int_equal(tn_backward(tn_sum(tn_mul(a, b)), NULL, false), TN_OK);
    assert_int_equal(tn_version(a), 0); /* backward does not bump either */
    tn_scope_end();
}

static void zero_grad_bumps_nothing(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(1, 2, 3, true);
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(x, 2)), NULL, false), TN_OK);
    tn_tensor *g = tn_grad(x);
    assert_non_null(g);
    int64_t gv = tn_version(g);
    assert_int_equal(tn_zero_grad(x), TN_OK);
    assert_null(tn_grad(x));
    assert_int_equal(tn_version(x), 0);
    assert_int_equal(tn_version(g), gv);
    tt_assert_close(g, (double[]){2, 2, 2}, 3, 0); /* the old grad is not written */
    assert_int_equal(tn_set_grad(x, NULL), TN_OK);
    assert_int_equal(tn_version(x), 0);
    tn_scope_end();
}

/* An optimiser step is one in-place write per parameter; zero_grad (set to
 * None) writes nothing. Values from torch.optim on the same inputs. */
static void optimizer_step_bumps_once_zero_grad_none(void **state) {
    static const double want[4][3] = {
        {0.8, 1.8, 2.8}, {0.799, 1.798, 2.797}, {0.9, 1.9, 2.9}, {0.9, 1.9, 2.9}};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *x = vec3(1, 2, 3, true);
        tn_sgd *sgd = k == 0   ? tn_sgd_new(1, &x, 0.1, 0, 0)
                      : k == 1 ? tn_sgd_new(1, &x, 0.1, 0.9, 0.01)
                               : NULL;
        tn_adam *adam = k >= 2 ? tn_adam_new(1, &x, 0.1, 0.9, 0.999, 1e-8, k == 3 ? 0.1 : 0) : NULL;
        assert_true(sgd || adam);
        assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(x, 2)), NULL, false), TN_OK);
        assert_int_equal(sgd ? tn_sgd_step(sgd) : tn_adam_step(adam), TN_OK);
        assert_int_equal(tn_version(x), 1);
        assert_int_equal(sgd ? tn_sgd_zero_grad(sgd) : tn_adam_zero_grad(adam), TN_OK);
        assert_int_equal(tn_version(x), 1);
        assert_null(tn_grad(x));
        tt_assert_close(x, want[k], 3, 1e-6);
        assert_true(tn_is_leaf(x));
        assert_true(tn_requires_grad(x));
        if (sgd) tn_sgd_free(sgd);
        if (adam) tn_adam_free(adam);
        tn_scope_end();
    }
}

/* ---- §3 saved tensors ------------------------------------------------------- */

/* mul saves its inputs: h.add_(1) after y = h*b breaks backward, and the
 * message names h's CURRENT grad_fn (the in-place op). */
static void mul_saved_input_modified(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *b = vec3(4, 5, 6, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    tn_tensor *y = tn_mul(h, b);
    assert_int_equal(tn_add_scalar_(h, 1), TN_OK);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_modified("AddBackward0", 1, 0);
    assert_null(tn_grad(a));

    h = tn_mul_scalar(a, 2);
    y = tn_mul(h, b);
    assert_int_equal(tn_mul_scalar_(h, 3), TN_OK);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_modified("MulBackward0", 1, 0);
    tn_scope_end();
}

/* mul only saves an input when the OTHER one needs a gradient (PyTorch). */
static void mul_saves_input_only_for_other_grad(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *b = vec3(4, 5, 6, false);
    tn_tensor *h = tn_mul_scalar(a, 2);
    tn_tensor *y = tn_mul(h, b);
    assert_int_equal(tn_add_scalar_(h, 1), TN_OK);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){8, 10, 12}, 3, 0);
    tn_scope_end();
}

/* div likewise saves self only when other requires grad. */
static void div_saves_self_only_for_other_grad(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3d(1, 2, 3, true), *b = vec3d(4, 5, 6, false);
    tn_tensor *h = tn_mul_scalar(a, 2);
    tn_tensor *y = tn_div(h, b);
    assert_int_equal(tn_add_scalar_(h, 1), TN_OK);
    if (tn_backward(tn_sum(y), NULL, false) != TN_OK)
        fail_msg("h / b then h.add_(1): PyTorch backward succeeds; got: %s", tn_last_error());
    tt_assert_grad(a, (double[]){0.5, 0.4, 1.0 / 3}, 3, 1e-12);

    tn_tensor *c = vec3(1, 2, 3, true), *d = vec3(4, 5, 6, true); /* d needs grad: saved */
    tn_tensor *hc = tn_mul_scalar(c, 2);
    tn_tensor *yc = tn_div(d, hc);
    assert_int_equal(tn_add_scalar_(hc, 1), TN_OK);
    assert_int_equal(tn_backward(tn_sum(yc), NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_modified("AddBackward0", 1, 0);
    tn_scope_end();
}

static void add_saves_nothing(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *b = vec3(4, 5, 6, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    tn_tensor *y = tn_add(tn_sub(h, b), b);
    assert_int_equal(tn_add_scalar_(h, 1), TN_OK);
    assert_int_equal(tn_add_scalar_(b, 0), TN_ERR_AUTOGRAD); /* b is a leaf: refused */
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){2, 2, 2}, 3, 0);
    tt_assert_grad(b, (double[]){0, 0, 0}, 3, 0);
    tn_scope_end();
}

typedef tn_tensor *(*unary_fn)(const tn_tensor *);
static tn_tensor *pow2(const tn_tensor *t) { return tn_pow_scalar(t, 2); }

/* Which unary ops save their output vs their input (PyTorch derivatives),
 * with the gradient of sum(f(2a)) at a = [1, 2, 3] when the other one is
 * modified (float64 PyTorch values). */
static const struct {
    const char *grad_fn;
    unary_fn f;
    bool saves_output;
    double grad[3];
} UNARY_SAVES[] = {
    {"ExpBackward0", tn_exp, true, {14.7781121978613, 109.19630006628847, 806.8575869854702}},
    {"SigmoidBackward0",
     tn_sigmoid,
     true,
     {0.20998717080701323, 0.035325412426582214, 0.004933018582719862}},
    {"TanhBackward0",
     tn_tanh,
     true,
     {0.14130164970632886, 0.002681901366051833, 4.915309481060595e-05}},
    {"ReluBackward0", tn_relu, true, {2, 2, 2}},
    {"SqrtBackward0", tn_sqrt, true, {0.7071067811865475, 0.5, 0.4082482904638631}},
    {"LogBackward0", tn_log, false, {1.0, 0.5, 0.3333333333333333}},
    {"SinBackward0", tn_sin, false, {-0.8322936730942848, -1.3072872417272239, 1.920340573300732}},
    {"CosBackward0", tn_cos, false, {-1.8185948536513634, 1.5136049906158564, 0.5588309963978517}},
    {"AbsBackward0", tn_abs, false, {2, 2, 2}},
    {"PowBackward0", pow2, false, {8, 16, 24}},
};

static void unary_saved_tensors(void **state) {
    for (size_t i = 0; i < sizeof UNARY_SAVES / sizeof UNARY_SAVES[0]; i++) {
        const char *name = UNARY_SAVES[i].grad_fn;
        bool out_saved = UNARY_SAVES[i].saves_output;
        for (int modify_output = 0; modify_output < 2; modify_output++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_tensor *a = vec3(1, 2, 3, true);
            tn_tensor *h = tn_mul_scalar(a, 2);
            tn_tensor *y = UNARY_SAVES[i].f(h);
            assert_non_null(y);
            assert_string_equal(tn_grad_fn_name(y), name);
            assert_int_equal(tn_add_scalar_(modify_output ? y : h, 1), TN_OK);
            tn_status st = tn_backward(tn_sum(y), NULL, false);
            bool should_fail = modify_output == (int)out_saved;
            if (should_fail) {
                if (st != TN_ERR_INPLACE_MODIFIED)
                    fail_msg("%s: modifying its %s must break backward", name,
                             modify_output ? "output" : "input");
                /* saved output: the saving node; saved input: its current grad_fn */
                assert_modified(out_saved ? name : "AddBackward0", 1, 0);
            } else {
                if (st != TN_OK)
                    fail_msg("%s: modifying its %s must not break backward: %s", name,
                             modify_output ? "output" : "input", tn_last_error());
                tt_assert_grad(a, UNARY_SAVES[i].grad, 3, 1e-5);
            }
            tn_scope_end();
        }
    }
}

/* Modifying the output of an in-place op that saves its result (exp_). */
static void inplace_op_saving_output(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *h = tn_mul_scalar(a, 1);
    assert_int_equal(tn_exp_(h), TN_OK);
    assert_string_equal(tn_grad_fn_name(h), "ExpBackward0");
    tn_tensor *y = tn_sum(h);
    assert_int_equal(tn_backward(y, NULL, true), TN_OK);
    tt_assert_grad(a, (double[]){2.718281828459045, 7.38905609893065, 20.085536923187668}, 3, 1e-6);
    assert_int_equal(tn_mul_scalar_(h, 2), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_ERR_INPLACE_MODIFIED);
    assert_modified("ExpBackward0", 2, 1);
    tn_scope_end();
}

static void second_backward_without_retain_graph(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *y = tn_sum(tn_mul(a, a));
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){2, 4, 6}, 3, 0);
    assert_int_equal(tn_backward(y, NULL, false), TN_ERR_AUTOGRAD);
    assert_int_equal(tn_last_status(), TN_ERR_AUTOGRAD);
    assert_string_equal(tn_last_error(), SECOND_TIME_MSG);
    tt_assert_grad(a, (double[]){2, 4, 6}, 3, 0); /* nothing accumulated */
    tn_scope_end();
}

static void second_backward_with_retain_graph(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *y = tn_sum(tn_mul(a, a));
    assert_int_equal(tn_backward(y, NULL, true), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){4, 8, 12}, 3, 0);
    assert_int_equal(tn_backward(y, NULL, false), TN_ERR_AUTOGRAD);
    assert_string_equal(tn_last_error(), SECOND_TIME_MSG);
    tn_scope_end();
}

/* Only a freed SAVED tensor is an error: (a+1).sum() saves nothing. */
static void second_backward_without_saved_tensors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *y = tn_sum(tn_add_scalar(a, 1));
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){2, 2, 2}, 3, 0);
    tn_scope_end();
}

static void detach_inplace_of_saved_input(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *b = vec3(4, 5, 6, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    tn_tensor *y = tn_mul(h, b); /* saves h for b's gradient */
    assert_ptr_equal(tn_detach_(h), h);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_AUTOGRAD);
    assert_string_equal(tn_last_error(), DETACHED_SAVED_MSG);
    tn_scope_end();
}

/* x.mul_(x) on a non-leaf saves x as its own output: backward reports the
 * write as PyTorch does (the saved output moved), not as a detach_(). */
static void inplace_with_itself_reports_the_version(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *x = tn_mul_scalar(a, 1);
    assert_int_equal(tn_mul_(x, x), TN_OK);
    assert_int_equal(tn_backward(tn_sum(x), NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED, "which is output 0 of MulBackward0, is at version 1; "
                                             "expected version 0 instead");
    tn_scope_end();
}

/* ---- §4 in-place on leaves -------------------------------------------------- */

static void inplace_on_leaf_refused(void **state) {
    for (int i = 0; i < N_INPLACE; i++) {
        if (INPLACE[i].f == ip_add_out || INPLACE[i].f == ip_mul_out) continue;
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *a = vec3(1, 2, 3, true), *o = vec3(4, 5, 6, false);
        if (INPLACE[i].f(a, o) != TN_ERR_AUTOGRAD)
            fail_msg("%s on a leaf requiring grad must fail", INPLACE[i].name);
        tt_assert_error(TN_ERR_AUTOGRAD, LEAF_MSG);
        assert_string_equal(tn_last_error(), LEAF_MSG);
        assert_int_equal(tn_version(a), 0);
        tt_assert_close(a, (double[]){1, 2, 3}, 3, 0);
        assert_true(tn_is_leaf(a));
        assert_null(tn_grad_fn_name(a));
        tn_scope_end();
    }
}

static void inplace_on_view_of_leaf_refused(void **state) {
    const int64_t s23[] = {2, 3};
    for (int i = 0; i < N_INPLACE; i++) {
        if (INPLACE[i].f == ip_add_out || INPLACE[i].f == ip_mul_out) continue;
        for (int deep = 0; deep < 2; deep++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_tensor *a = tt_f32(2, s23, (const float[]){1, 2, 3, 4, 5, 6}, true);
            tn_tensor *v = deep ? tn_narrow(tn_select(a, 0, 1), 0, 0, 2) : tn_select(a, 0, 1);
            tn_tensor *o = deep ? tt_f32(1, (const int64_t[]){2}, (const float[]){7, 8}, false)
                                : vec3(7, 8, 9, false);
            assert_non_null(v);
            if (INPLACE[i].f(v, o) != TN_ERR_AUTOGRAD)
                fail_msg("%s on a view of a leaf requiring grad must fail", INPLACE[i].name);
            assert_string_equal(tn_last_error(), VIEW_LEAF_MSG);
            assert_int_equal(tn_version(a), 0);
            tt_assert_close(a, (double[]){1, 2, 3, 4, 5, 6}, 6, 0);
            tn_scope_end();
        }
    }
}

/* No-grad mode: how optimisers step. */
static void inplace_on_leaf_allowed_without_grad(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    bool prev = tn_set_grad_enabled(false);
    assert_true(prev);
    assert_false(tn_is_grad_enabled());
    assert_int_equal(tn_add_scalar_(a, 1), TN_OK);
    tn_tensor *v = tn_narrow(a, 0, 0, 1);
    assert_int_equal(tn_mul_scalar_(v, 10), TN_OK);
    assert_true(tn_requires_grad(v)); /* as PyTorch: a view requires grad when its base does */
    tn_set_grad_enabled(prev);
    assert_int_equal(tn_version(a), 2);
    tt_assert_close(a, (double[]){20, 3, 4}, 3, 0);
    assert_true(tn_is_leaf(a));
    assert_true(tn_requires_grad(a));
    assert_null(tn_grad_fn_name(a));
    assert_int_equal(tn_backward(tn_sum(tn_mul(a, a)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){40, 6, 8}, 3, 0);
    tn_scope_end();
}

static void backward_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    assert_true(tn_backward(tn_mul_scalar(a, 2), NULL, false) < 0);
    assert_string_equal(tn_last_error(), "grad can be implicitly created only for scalar outputs");
    tn_tensor *c = vec3(1, 2, 3, false);
    assert_int_equal(tn_backward(tn_sum(c), NULL, false), TN_ERR_AUTOGRAD);
    assert_string_equal(tn_last_error(),
                        "element 0 of tensors does not require grad and does not have a grad_fn");
    assert_null(tn_grad(a));
    /* explicit gradient of the output's shape: fine */
    assert_int_equal(tn_backward(tn_mul_scalar(a, 2), vec3(1, 0, -1, false), false), TN_OK);
    tt_assert_grad(a, (double[]){2, 0, -2}, 3, 0);
    tn_scope_end();
}

/* ---- §5 gradients ------------------------------------------------------------- */

static void leaves_accumulate_until_cleared(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(a, 3)), NULL, false), TN_OK);
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(a, 3)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){6, 6, 6}, 3, 0);
    assert_int_equal(tn_backward(tn_sum(tn_mul(a, a)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){8, 10, 12}, 3, 0);
    assert_int_equal(tn_set_grad(a, NULL), TN_OK);
    assert_null(tn_grad(a));
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(a, 3)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){3, 3, 3}, 3, 0);
    assert_int_equal(tn_set_grad(a, vec3(1, 1, 1, false)), TN_OK); /* a user-set grad */
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(a, 3)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){4, 4, 4}, 3, 0);
    tn_scope_end();
}

/* ((a*b + c) * a).sum() with a (2,3), b (3), c (2,1). */
static void broadcast_grads_summed_back(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s23[] = {2, 3}, s21[] = {2, 1};
    tn_tensor *a = tt_f64(2, s23, (const double[]){1, 2, 3, 4, 5, 6}, true);
    tn_tensor *b = vec3d(0.5, -1, 2, true);
    tn_tensor *c = tt_f64(2, s21, (const double[]){2, 3}, true);
    assert_int_equal(tn_backward(tn_sum(tn_mul(tn_add(tn_mul(a, b), c), a)), NULL, false), TN_OK);
    tt_assert_grad(a, (double[]){3, -2, 14, 7, -7, 27}, 6, 1e-12);
    tt_assert_grad(b, (double[]){17, 29, 45}, 3, 1e-12);
    tt_assert_grad(c, (double[]){6, 15}, 2, 1e-12);
    tn_tensor *g = tn_grad(c);
    assert_int_equal(tn_ndim(g), 2);
    assert_int_equal(tn_shape(g)[0], 2);
    assert_int_equal(tn_shape(g)[1], 1);
    tn_scope_end();
}

static void retain_grad_keeps_nonleaf_grad(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    assert_int_equal(tn_retain_grad(h), TN_OK);
    assert_int_equal(tn_backward(tn_sum(tn_mul(h, h)), NULL, false), TN_OK);
    tt_assert_grad(h, (double[]){4, 8, 12}, 3, 0);
    tt_assert_grad(a, (double[]){8, 16, 24}, 3, 0);
    assert_false(tn_is_leaf(h));
    tn_scope_end();
}

static void nonleaf_grad_is_null(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true);
    tn_tensor *h = tn_mul_scalar(a, 2);
    assert_int_equal(tn_backward(tn_sum(tn_mul(h, h)), NULL, false), TN_OK);
    tn_clear_error();
    assert_null(tn_grad(h));
    assert_int_equal(tn_last_status(), TN_OK); /* a warning, not an error */
    assert_null(tn_grad(h));                   /* (warns once) */
    assert_int_equal(tn_last_status(), TN_OK);
    assert_null(tn_grad(vec3(1, 2, 3, false)));
    assert_int_equal(tn_last_status(), TN_OK);
    tn_scope_end();
}

static void autograd_grad_accumulates_nothing(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3d(1, 2, 3, true), *b = vec3d(4, 5, 6, true);
    tn_tensor *y = tn_sum(tn_mul(tn_mul(a, a), b));
    tn_tensor *ins[] = {a, b}, *g[2] = {NULL, NULL};
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 2, ins, g, false, false), TN_OK);
    tt_assert_close(g[0], (double[]){8, 20, 36}, 3, 0);
    tt_assert_close(g[1], (double[]){1, 4, 9}, 3, 0);
    assert_false(tn_requires_grad(g[0]));
    assert_null(tn_grad(a));
    assert_null(tn_grad(b));
    /* unreachable input: NULL */
    tn_tensor *c = vec3d(1, 1, 1, true), *y2 = tn_sum(tn_mul(a, a));
    tn_tensor *ins2[] = {c, a}, *g2[2] = {NULL, NULL};
    assert_int_equal(tn_autograd_grad(1, &y2, NULL, 2, ins2, g2, false, false), TN_OK);
    assert_null(g2[0]);
    tt_assert_close(g2[1], (double[]){2, 4, 6}, 3, 0);
    assert_null(tn_grad(a));
    assert_null(tn_grad(c));
    tn_scope_end();
}

/* d/dx x^3 = 3x^2 (with graph), d2/dx2 = 6x. */
static void create_graph_second_derivative(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tn_scalar(1.5, TN_F64);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    tn_tensor *y = tn_pow_scalar(x, 3), *g = NULL, *g2 = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &g, false, true), TN_OK);
    tt_assert_close(g, (double[]){6.75}, 1, 1e-14);
    assert_true(tn_requires_grad(g));
    assert_non_null(tn_grad_fn_name(g));
    assert_int_equal(tn_autograd_grad(1, &g, NULL, 1, &x, &g2, false, false), TN_OK);
    tt_assert_close(g2, (double[]){9}, 1, 1e-14);
    assert_null(tn_grad(x));

    /* x*x*x through mul, then .backward() of the first derivative */
    tn_tensor *y3 = tn_mul(tn_mul(x, x), x), *h = NULL;
    assert_int_equal(tn_autograd_grad(1, &y3, NULL, 1, &x, &h, false, true), TN_OK);
    tt_assert_close(h, (double[]){6.75}, 1, 1e-14);
    assert_int_equal(tn_backward(h, NULL, false), TN_OK);
    tt_assert_grad(x, (double[]){9}, 1, 1e-14);

    /* elementwise: sum(x^3) at [1, 2, -3] */
    tn_tensor *v = vec3d(1, 2, -3, true), *gv = NULL, *gv2 = NULL;
    tn_tensor *yv = tn_sum(tn_pow_scalar(v, 3));
    assert_int_equal(tn_autograd_grad(1, &yv, NULL, 1, &v, &gv, false, true), TN_OK);
    tt_assert_close(gv, (double[]){3, 12, 27}, 3, 1e-14);
    tn_tensor *sg = tn_sum(gv);
    assert_int_equal(tn_autograd_grad(1, &sg, NULL, 1, &v, &gv2, false, false), TN_OK);
    tt_assert_close(gv2, (double[]){6, 12, -18}, 3, 1e-14);
    tn_scope_end();
}

/* relu's gradient under create_graph is ThresholdBackwardBackward0 (torch):
 * it requires grad, its derivative in x is zeros (x still gets a gradient),
 * and in the incoming gradient v it is the mask x > 0. */
static void relu_double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3d(-1, 2, 0, true), *v = vec3d(3, 4, 5, true), *g = NULL, *gv = NULL;
    tn_tensor *y = tn_relu(x);
    assert_int_equal(tn_autograd_grad(1, &y, &v, 1, &x, &g, false, true), TN_OK);
    tt_assert_close(g, (double[]){0, 4, 0}, 3, 0);
    assert_true(tn_requires_grad(g));
    assert_string_equal(tn_grad_fn_name(g), "ThresholdBackwardBackward0");
    tn_tensor *s = tn_sum(g);
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &v, &gv, true, false), TN_OK);
    tt_assert_close(gv, (double[]){0, 1, 0}, 3, 0);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tt_assert_grad(x, (double[]){0, 0, 0}, 3, 0);
    tt_assert_grad(v, (double[]){0, 1, 0}, 3, 0);
    /* in place (relu_) records the same gradient */
    tn_tensor *h = tn_clone(x), *gh = NULL;
    assert_int_equal(tn_relu_(h), TN_OK);
    tn_tensor *sh = tn_sum(h);
    assert_int_equal(tn_autograd_grad(1, &sh, NULL, 1, &x, &gh, false, true), TN_OK);
    assert_string_equal(tn_grad_fn_name(gh), "ThresholdBackwardBackward0");
    tt_assert_close(gh, (double[]){0, 1, 0}, 3, 0);
    tn_scope_end();
}

/* torch.autograd.grad checks the outputs first: grad(f(x), x) with x not
 * requiring grad names the output; an unused input that does not require
 * grad is the "differentiated Tensors" error. */
static void autograd_grad_error_order(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3d(1, 2, 3, false), *w = vec3d(1, 1, 1, true), *g = NULL;
    tn_tensor *y = tn_sum(tn_mul_scalar(x, 2));
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &g, false, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "element 0 of tensors does not require grad and does not have a grad_fn");
    tn_tensor *yw = tn_sum(tn_mul(x, w));
    assert_int_equal(tn_autograd_grad(1, &yw, NULL, 1, &x, &g, false, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "One of the differentiated Tensors does not require grad");
    assert_null(g);
    tn_scope_end();
}

/* ---- grad mode is thread-local ---------------------------------------------- */

typedef struct {
    pthread_barrier_t *bar;
    tn_tensor *leaf;
    bool initial, after_disable, out_requires_grad;
} nograd_job;

static void *nograd_thread(void *p) {
    nograd_job *j = p;
    j->initial = tn_is_grad_enabled();
    tn_set_grad_enabled(false);
    j->after_disable = tn_is_grad_enabled();
    tn_tensor *y = tn_mul_scalar(j->leaf, 2);
    j->out_requires_grad = y && tn_requires_grad(y);
    tn_release(y);
    pthread_barrier_wait(j->bar); /* main checks its own mode now */
    pthread_barrier_wait(j->bar);
    return NULL;
}

static void grad_mode_is_thread_local(void **state) {
    tn_tensor *leaf = vec3(1, 2, 3, true);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    nograd_job j = {&bar, leaf, false, true, true};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, nograd_thread, &j), 0);
    pthread_barrier_wait(&bar);
    bool main_enabled = tn_is_grad_enabled();
    tn_tensor *y = tn_mul_scalar(leaf, 2);
    bool main_rg = tn_requires_grad(y);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    tn_release(y);
    assert_true(j.initial);
    assert_false(j.after_disable);
    assert_false(j.out_requires_grad);
    assert_true(main_enabled);
    assert_true(main_rg);

    /* and the other way: main disabled, a new thread starts enabled */
    bool prev = tn_set_grad_enabled(false);
    pthread_barrier_init(&bar, NULL, 2);
    nograd_job k = {&bar, leaf, false, true, true};
    assert_int_equal(pthread_create(&th, NULL, nograd_thread, &k), 0);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    bool still_disabled = !tn_is_grad_enabled();
    tn_set_grad_enabled(prev);
    assert_true(k.initial);
    assert_true(still_disabled);
    tn_release(leaf);
}

/* ---- scopes ------------------------------------------------------------------- */

static void scope_frees_all_but_kept(void **state) {
    int64_t base = tt_live_tensors();
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, false); /* no graph: nothing else holds references */
    tn_tensor *y = tn_sum(tn_mul(tn_sigmoid(a), a));
    assert_non_null(y);
    assert_int_equal(tt_live_tensors() - base, 4);
    assert_ptr_equal(tn_keep(y), y);
    tn_scope_end();
    assert_int_equal(tt_live_tensors() - base, 1);
    tn_release(y);
    assert_int_equal(tt_live_tensors(), base);
}

static void scopes_nest(void **state) {
    int64_t base = tt_live_tensors();
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(1, 2, 3, false);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *y = tn_mul(x, x);
    tn_tensor *z = tn_add(y, x);
    assert_ptr_equal(tn_keep(z), z); /* to the outer scope */
    tn_scope_end();
    assert_int_equal(tt_live_tensors() - base, 2); /* x and z */
    tt_assert_close(z, (double[]){2, 6, 12}, 3, 0);
    assert_ptr_equal(tn_keep(x), x); /* x belongs to this (innermost) scope */
    tn_scope_end();
    assert_int_equal(tt_live_tensors() - base, 1); /* x was kept to the caller */
    tn_release(x);
    assert_int_equal(tt_live_tensors(), base);
}

static void keep_of_foreign_tensor_fails(void **state) {
    tn_tensor *outside = vec3(1, 2, 3, false); /* not in any scope */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *inner = tn_mul_scalar(outside, 2);
    assert_int_equal(tn_scope_begin(), TN_OK);
    assert_null(tn_keep(outside));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    assert_null(tn_keep(inner)); /* owned by the enclosing scope, not the innermost */
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    tn_scope_end();
    tn_scope_end();
    tn_release(outside);
}

static void backward_after_scope_end(void **state) {
    int64_t base = tt_live_tensors();
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = tn_keep(vec3d(1, 2, 3, true));
    tn_tensor *y = tn_keep(tn_sum(tn_mul(tn_sigmoid(a), a)));
    tn_scope_end();
    assert_non_null(y);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    /* a, y and a's .grad: backward freed the saved tensors */
    assert_int_equal(tt_live_tensors() - base, 3);
    tn_tensor *g = tn_grad(a);
    tt_assert_close(g, (double[]){0.9276705118714867, 1.0907842487848955, 1.0881041060151695}, 3,
                    1e-14);
    tn_release(g);
    tn_release(y);
    tn_release(a); /* frees the leaf and its .grad */
    assert_int_equal(tt_live_tensors(), base);
}

/* Nothing is freed twice when a scope owns a tensor the user also retained. */
static void scope_and_retain(void **state) {
    int64_t base = tt_live_tensors();
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = tn_retain(vec3(1, 2, 3, false));
    tn_scope_end();
    assert_int_equal(tt_live_tensors() - base, 1);
    tt_assert_close(a, (double[]){1, 2, 3}, 3, 0);
    tn_release(a);
    assert_int_equal(tt_live_tensors(), base);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(every_inplace_op_bumps_once),
        TT_TEST(inplace_noop_values_still_bump),
        TT_TEST(chained_inplace_bumps_each),
        TT_TEST(inplace_through_views_bumps_base),
        TT_TEST(out_of_place_never_bumps_inputs),
        TT_TEST(zero_grad_bumps_nothing),
        TT_TEST(optimizer_step_bumps_once_zero_grad_none),
        TT_TEST(mul_saved_input_modified),
        TT_TEST(mul_saves_input_only_for_other_grad),
        TT_TEST(div_saves_self_only_for_other_grad),
        TT_TEST(add_saves_nothing),
        TT_TEST(unary_saved_tensors),
        TT_TEST(inplace_op_saving_output),
        TT_TEST(second_backward_without_retain_graph),
        TT_TEST(second_backward_with_retain_graph),
        TT_TEST(second_backward_without_saved_tensors),
        TT_TEST(detach_inplace_of_saved_input),
        TT_TEST(inplace_with_itself_reports_the_version),
        TT_TEST(inplace_on_leaf_refused),
        TT_TEST(inplace_on_view_of_leaf_refused),
        TT_TEST(inplace_on_leaf_allowed_without_grad),
        TT_TEST(backward_errors),
        TT_TEST(leaves_accumulate_until_cleared),
        TT_TEST(broadcast_grads_summed_back),
        TT_TEST(retain_grad_keeps_nonleaf_grad),
        TT_TEST(nonleaf_grad_is_null),
        TT_TEST(autograd_grad_accumulates_nothing),
        TT_TEST(create_graph_second_derivative),
        TT_TEST(relu_double_backward),
        TT_TEST(autograd_grad_error_order),
        TT_TEST(grad_mode_is_thread_local),
        TT_TEST(scope_frees_all_but_kept),
        TT_TEST(scopes_nest),
        TT_TEST(keep_of_foreign_tensor_fails),
        TT_TEST(backward_after_scope_end),
        TT_TEST(scope_and_retain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
