/* tests/test_init.c — the nn.init initialisers (include/tenet/init.h) and clip_grad_value_:
 * bounds and moments of the draws, the fans and gains (PyTorch's), seeding, no-grad writes to
 * leaves with one version bump, and the error texts. */
#include "util.h"

#include <math.h>

static tn_tensor *leaf(int nd, const int64_t *shape, tn_dtype dt) {
    tn_tensor *t = tn_zeros(nd, shape, dt);
    assert_non_null(t);
    assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

/* min, max, mean and standard deviation of t */
static void moments(tn_tensor *t, double m[4]) {
    static double v[1 << 16];
    int64_t n = tn_numel(t);
    assert_true(n <= (int64_t)(sizeof v / sizeof v[0]));
    assert_int_equal(tn_copy_to_f64(t, v, n), TN_OK);
    m[0] = INFINITY, m[1] = -INFINITY, m[2] = 0, m[3] = 0;
    for (int64_t i = 0; i < n; i++) {
        m[0] = fmin(m[0], v[i]), m[1] = fmax(m[1], v[i]), m[2] += v[i] / (double)n;
    }
    for (int64_t i = 0; i < n; i++)
        m[3] += (v[i] - m[2]) * (v[i] - m[2]) / (double)n;
    m[3] = sqrt(m[3]);
}

static void fills(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = leaf(2, (const int64_t[]){256, 128}, TN_F32); /* fan_in 128, fan_out 256 */
    double m[4];
    int64_t v0 = tn_version(w);
    assert_int_equal(tn_init_uniform_(w, -2, 3), TN_OK);
    assert_int_equal(tn_version(w), v0 + 1);
    assert_true(tn_is_leaf(w) && tn_requires_grad(w));
    moments(w, m);
    assert_true(m[0] >= -2 && m[1] < 3 && fabs(m[2] - 0.5) < 0.05);
    assert_int_equal(tn_init_normal_(w, 1, 2), TN_OK);
    moments(w, m);
    assert_true(fabs(m[2] - 1) < 0.05 && fabs(m[3] - 2) < 0.05);
    assert_int_equal(tn_init_constant_(w, 0.25), TN_OK);
    moments(w, m);
    assert_true(m[0] == 0.25 && m[1] == 0.25);
    double a = sqrt(6.0 / 384);
    assert_int_equal(tn_init_xavier_uniform_(w, 1), TN_OK);
    moments(w, m);
    assert_true(m[0] >= -a && m[1] <= a && fabs(m[3] - a / sqrt(3.0)) < 0.01 * a);
    assert_int_equal(tn_init_xavier_normal_(w, 2), TN_OK);
    moments(w, m);
    assert_true(fabs(m[3] - 2 * sqrt(2.0 / 384)) < 0.02 * 2 * sqrt(2.0 / 384));
    double b = sqrt(3.0) * sqrt(2.0) / sqrt(128.0); /* relu, fan_in */
    assert_int_equal(tn_init_kaiming_uniform_(w, 0, "fan_in", "relu"), TN_OK);
    moments(w, m);
    assert_true(m[0] >= -b && m[1] <= b && m[1] > 0.95 * b);
    assert_int_equal(tn_init_kaiming_normal_(w, 0, "fan_out", NULL), TN_OK); /* leaky_relu(0) */
    moments(w, m);
    assert_true(fabs(m[3] - sqrt(2.0) / 16) < 0.02 * sqrt(2.0) / 16);
    /* a conv weight: the receptive field counts; the same seed, the same values */
    tn_tensor *c = leaf(4, (const int64_t[]){8, 4, 3, 3}, TN_F64), *d = leaf(4, (const int64_t[]){8, 4, 3, 3}, TN_F64);
    tn_manual_seed(11);
    assert_int_equal(tn_init_kaiming_uniform_(c, sqrt(5.0), NULL, NULL), TN_OK);
    tn_manual_seed(11);
    assert_int_equal(tn_init_kaiming_uniform_(d, sqrt(5.0), NULL, NULL), TN_OK);
    moments(c, m);
    double bound = 1 / sqrt(36.0); /* PyTorch's Conv2d default: 1 / sqrt(fan_in) */
    assert_true(m[0] >= -bound && m[1] <= bound && m[1] > 0.8 * bound);
    double vc[288];
    assert_int_equal(tn_copy_to_f64(c, vc, 288), TN_OK);
    tt_assert_close(d, vc, 288, 0);
    /* a strided view and a half dtype */
    tn_tensor *h = tn_zeros(2, (const int64_t[]){4, 6}, TN_BF16);
    assert_int_equal(tn_init_uniform_(tn_transpose(h, 0, 1), 1, 2), TN_OK);
    moments(h, m);
    assert_true(m[0] >= 1 && m[1] <= 2);
    tn_scope_end();
}

static void gains_and_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    double g;
    assert_int_equal(tn_init_calculate_gain("leaky_relu", NAN, &g), TN_OK);
    assert_true(fabs(g - 1.4141428569978354) < 1e-15);
    assert_int_equal(tn_init_calculate_gain("leaky_relu", 0.2, &g), TN_OK);
    assert_true(fabs(g - 1.3867504905630728) < 1e-15);
    assert_int_equal(tn_init_calculate_gain("tanh", 0, &g), TN_OK);
    assert_true(g == 5.0 / 3);
    assert_int_equal(tn_init_calculate_gain("selu", 0, &g), TN_OK);
    assert_true(g == 0.75);
    assert_int_equal(tn_init_calculate_gain("foo", 0, &g), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "Unsupported nonlinearity foo");
    tn_tensor *v = tn_zeros(1, (const int64_t[]){3}, TN_F32);
    assert_int_equal(tn_init_xavier_uniform_(v, 1), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "Fan in and fan out can not be computed for tensor with fewer "
                                  "than 2 dimensions");
    tn_tensor *w = tn_zeros(2, (const int64_t[]){3, 4}, TN_F32);
    assert_int_equal(tn_init_kaiming_uniform_(w, 0, "fan_xx", NULL), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "Mode fan_xx not supported, please use one of ['fan_in', 'fan_out']");
    assert_int_equal(tn_init_uniform_(w, 2, 1), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
    assert_int_equal(tn_init_normal_(w, 0, -1), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "normal expects std >= 0.0, but found std -1");
    tn_tensor *i = tn_zeros(2, (const int64_t[]){3, 4}, TN_I64);
    assert_int_equal(tn_init_normal_(i, 0, 1), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE, "\"normal_kernel_cpu\" not implemented for 'Long'");
    assert_int_equal(tn_init_constant_(i, 3), TN_OK);
    assert_int_equal(tn_version(w), 0); /* nothing written by the failures */
    tn_tensor *e = tn_zeros(2, (const int64_t[]){0, 4}, TN_F32);
    assert_int_equal(tn_init_kaiming_normal_(e, 0, NULL, NULL), TN_OK); /* warns: a no-op */
    tn_scope_end();
}

static void clip_value(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *p = tt_f64(1, (const int64_t[]){4}, (const double[]){1, 2, 3, 4}, true);
    tn_tensor *q = tt_f64(1, (const int64_t[]){2}, (const double[]){1, 1}, true);
    tn_tensor *s = tn_mul(p, tt_f64(1, (const int64_t[]){4}, (const double[]){-3, 0.5, 2, -0.1}, false));
    assert_int_equal(tn_backward(tn_sum(s), NULL, false), TN_OK); /* q has no .grad */
    assert_int_equal(tn_clip_grad_value_(2, (tn_tensor *[]){p, q}, 1), TN_OK);
    tt_assert_grad(p, (const double[]){-1, 0.5, 1, -0.1}, 4, 0);
    assert_int_equal(tn_clip_grad_value_(1, (tn_tensor *[]){NULL}, 1), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "tn_clip_grad_value_: params[0] is NULL");
    assert_int_equal(tn_clip_grad_value_(1, &p, NAN), TN_ERR_INVALID_ARGUMENT);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(fills), TT_TEST(gains_and_errors),
                                       TT_TEST(clip_value)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
