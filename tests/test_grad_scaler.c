/* The gradient scaler (tenet/autocast.h): torch's scale sequence, skipped steps and parameter
 * trajectory over 30 steps with infs and NaNs injected (tests/golden_amp/grad_scaler.txt,
 * written by scripts/grad_scaler_golden.py) with SGD, Adam and AdamW and clip_grad_norm_
 * between unscale_ and step; torch's errors; a disabled scaler; a float16 loss. */
#include <math.h>
#include <string.h>

#include "util.h"

#define GOLDEN "golden_amp/grad_scaler.txt"
#define STEPS 30

static const int INF_AT[] = {4, 5, 11, 25}, NAN_AT = 17;

/* x_t[j] = ((7 t + 3 j) % 11 - 5) / 4, x_t[1] = inf at INF_AT, x_t[2] = nan at NAN_AT */
static tn_tensor *x_at(int t) {
    float x[4];
    for (int j = 0; j < 4; j++)
        x[j] = (float)((7 * t + 3 * j) % 11 - 5) / 4.0f;
    for (size_t k = 0; k < sizeof INF_AT / sizeof *INF_AT; k++)
        if (t == INF_AT[k]) x[1] = INFINITY;
    if (t == NAN_AT) x[2] = NAN;
    return tt_f32(1, (int64_t[]){4}, x, false);
}

/* sum(w * x) + 0.5 sum(w * w) */
static tn_tensor *loss_of(tn_tensor *w, int t) {
    return tn_add(tn_sum(tn_mul(w, x_at(t))), tn_mul_scalar(tn_sum(tn_mul(w, w)), 0.5));
}

typedef struct row {
    double scale, w[4];
    long tracker;
    int stepped;
} row;

/* The golden rows of one scenario, in step order. */
static void read_rows(const char *name, row *rows) {
    FILE *f = fopen(GOLDEN, "r");
    assert_non_null(f);
    char line[512], nm[16];
    int n = 0, t;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        row r;
        assert_int_equal(sscanf(line, "%15s %d %lg %ld %d %lg %lg %lg %lg", nm, &t, &r.scale,
                                &r.tracker, &r.stepped, &r.w[0], &r.w[1], &r.w[2], &r.w[3]),
                         9);
        if (strcmp(nm, name)) continue;
        assert_int_equal(t, n);
        rows[n++] = r;
    }
    fclose(f);
    assert_int_equal(n, STEPS);
}

static void run_scenario(const char *name, tn_optimizer *(*make)(tn_tensor *w, void **h),
                         void (*free_opt)(void *h), tn_grad_scaler *sc, bool clip_even) {
    row want[STEPS];
    read_rows(name, want);
    float w0[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    tn_tensor *w = tt_f32(1, (int64_t[]){4}, w0, true);
    void *h;
    tn_optimizer *opt = make(w, &h);
    assert_non_null(opt);
    for (int t = 0; t < STEPS; t++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        assert_int_equal(tn_set_grad(w, NULL), TN_OK);
        tn_tensor *scaled = tn_grad_scaler_scale(sc, loss_of(w, t));
        assert_int_equal(tn_backward(scaled, NULL, false), TN_OK);
        if (clip_even && t % 2 == 0) {
            assert_int_equal(tn_grad_scaler_unscale_(sc, opt), TN_OK);
            assert_int_equal(tn_clip_grad_norm_(1, &w, 1.0, 2.0, NULL), TN_OK);
        }
        bool stepped;
        assert_int_equal(tn_grad_scaler_step(sc, opt, &stepped), TN_OK);
        assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
        double wv[4];
        assert_int_equal(tn_copy_to_f64(w, wv, 4), TN_OK);
        if (stepped != (want[t].stepped != 0) || tn_grad_scaler_get_scale(sc) != want[t].scale ||
            tn_grad_scaler_growth_tracker(sc) != want[t].tracker)
            fail_msg("%s step %d: stepped %d scale %g tracker %ld, torch %d %g %ld", name, t,
                     stepped, tn_grad_scaler_get_scale(sc), (long)tn_grad_scaler_growth_tracker(sc),
                     want[t].stepped, want[t].scale, want[t].tracker);
        for (int j = 0; j < 4; j++)
            if (fabs(wv[j] - want[t].w[j]) > 1e-6 * (1 + fabs(want[t].w[j])))
                fail_msg("%s step %d: w[%d] = %.9g, torch %.9g", name, t, j, wv[j], want[t].w[j]);
        tn_scope_end();
    }
    free_opt(h);
    tn_release(w);
}

static tn_optimizer *make_sgd(tn_tensor *w, void **h) {
    tn_sgd *o = tn_sgd_new(1, &w, 0.1, 0.9, 0);
    *h = o;
    return tn_sgd_optimizer(o);
}
static tn_optimizer *make_adam(tn_tensor *w, void **h) {
    tn_adam *o = tn_adam_new(1, &w, 0.01, 0.9, 0.999, 1e-8, 0);
    *h = o;
    return tn_adam_optimizer(o);
}
static tn_optimizer *make_adamw(tn_tensor *w, void **h) {
    tn_adam *o = tn_adamw_new(1, &w, 0.01, 0.9, 0.999, 1e-8, 0.1);
    *h = o;
    return tn_adam_optimizer(o);
}
static void free_sgd(void *h) { tn_sgd_free(h); }
static void free_adam(void *h) { tn_adam_free(h); }

static void test_golden_sgd_clip(void **state) {
    (void)state;
    tn_grad_scaler *sc = tn_grad_scaler_new(1024, 2, 0.5, 3, true);
    run_scenario("sgd", make_sgd, free_sgd, sc, true);
    tn_grad_scaler_free(sc);
}

static void test_golden_adam_defaults(void **state) {
    (void)state;
    tn_grad_scaler *sc = tn_grad_scaler_new(65536.0, 2.0, 0.5, 2000, true);
    assert_float_equal(tn_grad_scaler_get_scale(sc), 65536.0, 0);
    run_scenario("adam", make_adam, free_adam, sc, false);
    tn_grad_scaler_free(sc);
}

static void test_golden_adamw(void **state) {
    (void)state;
    tn_grad_scaler *sc = tn_grad_scaler_new(8, 4, 0.25, 2, true);
    run_scenario("adamw", make_adamw, free_adam, sc, false);
    tn_grad_scaler_free(sc);
}

/* One backward of w's loss, scaled. */
static void scaled_backward(tn_grad_scaler *sc, tn_tensor *w) {
    tn_tensor *l = tn_sum(tn_mul(w, w));
    assert_int_equal(tn_backward(tn_grad_scaler_scale(sc, l), NULL, false), TN_OK);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tn_grad_scaler_new(65536, 1.0, 0.5, 2000, true));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "The growth factor must be > 1.0.");
    assert_null(tn_grad_scaler_new(65536, 2.0, 1.0, 2000, true));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "The backoff factor must be < 1.0.");
    assert_null(tn_grad_scaler_new(65536, 2.0, 0.5, 0, true));
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = tt_f32(1, (int64_t[]){2}, (const float[]){1, 2}, true);
    tn_sgd *o = tn_sgd_new(1, &w, 0.1, 0, 0);
    tn_optimizer *opt = tn_sgd_optimizer(o);
    tn_grad_scaler *sc = tn_grad_scaler_new(65536, 2, 0.5, 2000, true);
    assert_int_equal(tn_grad_scaler_update(sc), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "Attempted update but _scale is None.");
    assert_int_equal(tn_grad_scaler_unscale_(sc, opt), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "Attempted unscale_ but _scale is None.");
    scaled_backward(sc, w);
    assert_int_equal(tn_grad_scaler_unscale_(sc, opt), TN_OK);
    assert_int_equal(tn_grad_scaler_unscale_(sc, opt), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "unscale_() has already been called on this optimizer since the last "
                    "update().");
    tt_assert_grad(w, (const double[]){2, 4}, 2, 0); /* unscaled once only */
    assert_int_equal(tn_grad_scaler_step(sc, opt, NULL), TN_OK);
    assert_int_equal(tn_grad_scaler_step(sc, opt, NULL), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "step() has already been called since the last update().");
    assert_int_equal(tn_grad_scaler_unscale_(sc, opt), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "unscale_() is being called after step().");
    assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
    assert_int_equal(tn_grad_scaler_update(sc), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "No inf checks were recorded prior to update.");
    /* no .grad at all */
    assert_int_equal(tn_sgd_zero_grad(o), TN_OK);
    assert_int_equal(tn_grad_scaler_step(sc, opt, NULL), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "No inf checks were recorded for this optimizer.");
    assert_int_equal(tn_grad_scaler_update_to(sc, 1024), TN_OK);
    assert_float_equal(tn_grad_scaler_get_scale(sc), 1024, 0);
    /* float16 gradients are refused before anything is unscaled */
    tn_tensor *h = tn_to(tn_ones(1, (int64_t[]){2}, TN_F32), TN_F16, TN_DEVICE_KEEP);
    assert_int_equal(tn_requires_grad_(h, true), TN_OK);
    tn_sgd *oh = tn_sgd_new(1, &h, 0.1, 0, 0);
    scaled_backward(sc, h);
    assert_int_equal(tn_grad_scaler_unscale_(sc, tn_sgd_optimizer(oh)), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE, "Attempting to unscale FP16 gradients.");
    tt_assert_grad(h, (const double[]){2048, 2048}, 2, 0);
    assert_null(tn_grad_scaler_scale(sc, NULL));
    assert_int_equal(tn_grad_scaler_step(NULL, opt, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_grad_scaler_unscale_(sc, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_null(tn_sgd_optimizer(NULL));
    assert_int_equal(tn_optimizer_step(NULL), TN_ERR_INVALID_ARGUMENT);
    tn_sgd_free(oh);
    tn_sgd_free(o);
    tn_grad_scaler_free(sc);
    tn_scope_end();
}

/* A disabled scaler: scale returns the loss, step always steps, the rest does nothing. */
static void test_disabled(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = tt_f32(1, (int64_t[]){2}, (const float[]){1, 2}, true);
    tn_sgd *o = tn_sgd_new(1, &w, 0.5, 0, 0);
    tn_grad_scaler *sc = tn_grad_scaler_new(65536, 2, 0.5, 2000, false);
    tn_tensor *l = tn_sum(tn_mul(w, w));
    assert_ptr_equal(tn_grad_scaler_scale(sc, l), l);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    assert_int_equal(tn_grad_scaler_unscale_(sc, tn_sgd_optimizer(o)), TN_OK);
    bool stepped = false;
    assert_int_equal(tn_grad_scaler_step(sc, tn_sgd_optimizer(o), &stepped), TN_OK);
    assert_true(stepped);
    assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
    assert_float_equal(tn_grad_scaler_get_scale(sc), 1.0, 0);
    tt_assert_close(w, (const double[]){0, 0}, 2, 0);
    tn_grad_scaler_free(sc);
    tn_sgd_free(o);
    tn_scope_end();
}

/* A float16 loss is scaled in float32 (torch's scale is a float32 tensor): 65536 * 2 would
 * overflow float16. Gradients reach a float32 master weight through the float16 copy. */
static void test_half_loss(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = tt_f32(1, (int64_t[]){2}, (const float[]){1, 2}, true);
    tn_grad_scaler *sc = tn_grad_scaler_new(65536, 2, 0.5, 2000, true);
    tn_tensor *wh = tn_to(w, TN_F16, TN_DEVICE_KEEP);
    tn_tensor *l = tn_sum(tn_mul(wh, wh)); /* float16: 5 */
    tn_tensor *s = tn_grad_scaler_scale(sc, l);
    assert_int_equal(tn_dtype_of(s), TN_F32);
    double v;
    assert_int_equal(tn_item(s, &v), TN_OK);
    assert_float_equal(v, 5.0 * 65536, 0);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tn_adam *o = tn_adam_new(1, &w, 0.01, 0.9, 0.999, 1e-8, 0);
    bool stepped = false;
    assert_int_equal(tn_grad_scaler_step(sc, tn_adam_optimizer(o), &stepped), TN_OK);
    /* the gradient 65536 that reaches the float16 loss rounds to inf in float16 (its largest
     * value is 65504): the step is skipped and the scale backs off, as torch's first step */
    assert_false(stepped);
    assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
    assert_float_equal(tn_grad_scaler_get_scale(sc), 32768, 0);
    tn_adam_free(o);
    tn_grad_scaler_free(sc);
    tn_scope_end();
}

/* docs/api.md's example (section 9b), as it is printed there. */
static tn_status train_step(tn_adam *opt, tn_grad_scaler *sc, tn_tensor *w, tn_tensor *b,
                            tn_tensor *x, tn_tensor *y) {
    tn_tensor *params[] = {w, b};
    tn_status st = tn_scope_begin(); /* frees this step's tensors at the end */
    if (st < 0) return st;
    st = tn_autocast_begin(TN_CPU, TN_F16);             /* TN_CUDA for GPU tensors */
    tn_tensor *logits = tn_linear(x, w, b);             /* float16: w and b cast once, recorded */
    tn_tensor *loss = tn_cross_entropy(logits, y);      /* float32 (the float32 list) */
    if (st == TN_OK) st = tn_autocast_end();            /* leave before backward, as in torch */
    tn_tensor *scaled = tn_grad_scaler_scale(sc, loss); /* loss * 65536 */
    if (st == TN_OK) st = tn_adam_zero_grad(opt);
    if (st == TN_OK) st = tn_backward(scaled, NULL, false); /* float32 .grad on w and b */
    if (st == TN_OK) st = tn_grad_scaler_unscale_(sc, tn_adam_optimizer(opt));
    if (st == TN_OK) st = tn_clip_grad_norm_(2, params, 1.0, 2.0, NULL); /* true gradients */
    bool stepped = false;
    if (st == TN_OK) st = tn_grad_scaler_step(sc, tn_adam_optimizer(opt), &stepped);
    if (st == TN_OK) st = tn_grad_scaler_update(sc); /* halves or grows the scale */
    tn_scope_end();
    return st; /* stepped == false: an inf/NaN step, skipped */
}

static void test_api_example(void **state) {
    (void)state;
    tn_manual_seed(3);
    int64_t xs[2] = {8, 5}, ws[2] = {3, 5};
    tn_tensor *x = tn_randn(2, xs, TN_F32), *w = tn_randn(2, ws, TN_F32);
    tn_tensor *b = tn_zeros(1, (int64_t[]){3}, TN_F32);
    int64_t yv[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    tn_tensor *y = tn_tensor_from(yv, TN_I64, 1, (int64_t[]){8}, false);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    assert_int_equal(tn_requires_grad_(b, true), TN_OK);
    tn_adam *opt = tn_adam_new(2, (tn_tensor *[]){w, b}, 1e-3, 0.9, 0.999, 1e-8, 0);
    tn_grad_scaler *sc = tn_grad_scaler_new(65536.0, 2.0, 0.5, 2000, true);
    double w0[15], w1[15];
    assert_int_equal(tn_copy_to_f64(w, w0, 15), TN_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(train_step(opt, sc, w, b, x, y), TN_OK);
    tn_tensor *g = tn_grad(w);
    assert_int_equal(tn_dtype_of(g), TN_F32);
    tn_release(g);
    assert_int_equal(tn_copy_to_f64(w, w1, 15), TN_OK);
    assert_memory_not_equal(w0, w1, sizeof w0); /* some steps were taken */
    assert_true(tn_grad_scaler_get_scale(sc) <= 65536.0);
    tn_grad_scaler_free(sc);
    tn_adam_free(opt);
    tn_release(y), tn_release(b), tn_release(w), tn_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_golden_sgd_clip), TT_TEST(test_golden_adam_defaults),
        TT_TEST(test_golden_adamw),    TT_TEST(test_errors),
        TT_TEST(test_disabled),        TT_TEST(test_half_loss),
        TT_TEST(test_api_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
