/* tests/test_batch_norm.c — batch_norm and group_norm beyond the op table: values and
 * gradients against PyTorch 1.13 (references from /usr/bin/python3, float64), the running
 * statistics' update (in place, version counters untouched), eval mode, grad_fn names, the
 * fused backward against the create_graph one, the same bits for any thread count, and the
 * error texts. */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* References (scripts in the comments' words): x[i] = 2 sin(0.7 i) + 0.5, g[i] = cos(0.3 i);
 * batch norm: x (3, 2, 4), weight {1.5, -0.5}, bias {0.2, -0.1}, running_mean {0.1, -0.2},
 * running_var {0.9, 1.1}, momentum 0.1, eps 1e-5; group norm: x (2, 6, 3), 3 groups, weight[i]
 * = 1 + 0.1 i, bias[i] = 0.05 i - 0.1, eps 1e-5. */
static const double tr_y[] = {
    -0.30160784416752173, 1.1731209567623357,   1.9542617593417246,   1.6744318384558281,
    -0.35573231377528397, 0.14476900778353957,  0.52486267356357108,  0.60578469342110552,
    -1.7466893909475134,  -0.26311783715364989, 1.2023512649186399,   1.9604848979783869,
    -0.7349634678347905,  -0.34413535879379381, 0.15622445741118707,  0.53078894088115636,
    -2.5431197228622708,  -1.7166335728902231,  -0.22463871231296587, 1.23115636287723,
    -0.8342274645097808,  -0.72850289459884432, -0.33247255952638993, 0.16760428597832386};
static const double tr_rm[] = {0.1838242807852038, -0.13308166591596826};
static const double tr_rv[] = {0.99735681995910397, 1.1948021447148387};
static const double tr_dx[] = {
    1.0135019229143645,    0.86594372729285829,   0.6660650863018045,    0.45118187532135545,
    -0.054458522371669628, -0.034588461733067524, 0.0084085540594161373, 0.095732794077307448,
    -0.8806014853802866,   -1.1683948499930612,   -1.3625696512638239,   -1.4092701921062423,
    0.47059365609731912,   0.34067328232800792,   0.16814919499134287,   0.0013968116389299883,
    0.11564243746896025,   0.39407484367019541,   0.59034221422104494,   0.72408407155283028,
    -0.18986905040144395,  -0.22263416400388655,  -0.27300704720922164,  -0.31039704747303432};
static const double tr_dw[] = {1.028380380120284, 2.843187760895447};
static const double tr_db[] = {1.7182263351725526, 1.1032860306633334};
static const double ev_y[] = {
    0.83245201842111127,  2.8696359014014008,    3.9487003723398151,    3.562144549706558,
    -0.75310760658600573, -0.099253225093509909, 0.39730072600052102,   0.50301716462705315,
    -1.1637772780001814,  0.88562194491540469,   2.9100145205977053,    3.9572969886967795,
    -1.2485347733075249,  -0.73795735722601996,  -0.084287838173700197, 0.40504279517114861,
    -2.2639626375526434,  -1.1222583030554367,   0.93877683882349239,   2.9498057562960303,
    -1.3782131504759472,  -1.2400946874669523,   -0.72272108896261389,  -0.069421242524998483};
static const double ev_rm[] = {0.10000000000000001, -0.20000000000000001};
static const double ev_rv[] = {0.90000000000000002, 1.1000000000000001};
static const double ev_dx[] = {
    1.5811300460527782,   1.5105112270470689,    1.3049629388111377,  0.98284619775866178,
    -0.1727464961987121,  -0.033722484445365984, 0.1083138564094544,  0.24067484305709258,
    -1.1659153594127587,  -1.4294556275424695,   -1.5653068817417672, -1.5613339340721906,
    0.42751085755611207,  0.34607307413398952,   0.23372161369203012, 0.10049249758064109,
    0.13834727171518316,  0.59763196574269961,   1.0035319761685471,  1.3197894639335834,
    -0.45774114317633902, -0.47666173552352081,  -0.4530035546547781, -0.38887991540710981};
static const double ev_dw[] = {2.938791580541158, 4.4182762273290273};
static const double ev_db[] = {1.7182263351725526, 1.1032860306633334};
static const double gn_y[] = {
    -0.97233626228386605, 0.38888112818839893,  1.1098967103131154,    0.99676614860156276,
    -0.23096527226128602, -1.8248866101796903,  -1.1674196613770134,   -1.3436829834527408,
    -0.78539500862828071, 0.31527876380003039,  1.417783249573489,     1.9881437778726856,
    2.5017698796229331,   1.3664960270992754,   -0.086944508651626229, -1.2160456425335247,
    -1.4420143566364103,  -0.62192721304854559, -0.88648063362832141,  0.44204987640135529,
    1.1127165026853056,   0.95110367656978467,  -0.29583779440381724,  -1.8703802021701417,
    -1.2057400908474096,  -1.3447588268126058,  -0.75938747271455476,  0.34798673334593749,
    1.4280851634273024,   1.9596383594658782,   2.5234414584889424,    1.3398756179756475,
    -0.13442320798322918, -1.2493599053406603,  -1.4261256609594963,   -0.54832929278701581};
static const double gn_dx[] = {
    0.52429653059351522,   0.2247608686867556,      -0.046248994875050686, -0.1479271680944344,
    -0.24230218864157504,  -0.31257904766921107,    0.21442615142673155,   -0.038451699890056812,
    -0.12133923982896133,  -0.1255605347895391,     -0.013693114033978881, 0.084618437115804579,
    0.050962719156839087,  -0.087706859731869979,   -0.24725049524821191,  -0.2734162520643349,
    0.0059645162333809565, 0.55144637165419708,     -0.2348669289155022,   -0.11848194795847455,
    -0.034154639345248317, 0.13281905929270255,     0.15476186045679263,   0.099922596469730562,
    0.18191345300524989,   -0.068597267190221328,   -0.11466697421932864,  -0.038667131460048507,
    0.040557781829680721,  -0.00053986196533209116, 0.049092279890891488,  -0.092986807784911862,
    -0.15308255695667272,  -0.16822700090857956,    0.025943734726138756,  0.33926035103313423};
static const double gn_dw[] = {1.7109772223338098,  -0.2345592360755443, 0.23509259415725936,
                               -4.4043425652213015, -4.4207280841357131, 1.7060253177429681};
static const double gn_db[] = {5.2102480514674436,  3.8205212528823433,  -0.46049986190425907,
                               -4.3930238619762463, -5.0009949850063933, -1.8243128059269065};

static tn_tensor *pattern(int ndim, const int64_t *shape, double a, double f, double c, bool rg) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    double *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = a * (f > 0 ? sin(f * (double)i) : cos(-f * (double)i)) + c;
    tn_tensor *t = tt_f64(ndim, shape, v, rg);
    free(v);
    return t;
}

static void batch_norm_values(void **state) {
    (void)state;
    for (int train = 1; train >= 0; train--) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        const int64_t s[] = {3, 2, 4}, c2[] = {2};
        tn_tensor *x = pattern(3, s, 2, 0.7, 0.5, true), *g = pattern(3, s, 1, -0.3, 0, false);
        tn_tensor *w = tt_f64(1, c2, (double[]){1.5, -0.5}, true);
        tn_tensor *b = tt_f64(1, c2, (double[]){0.2, -0.1}, true);
        tn_tensor *rm = tt_f64(1, c2, (double[]){0.1, -0.2}, false);
        tn_tensor *rv = tt_f64(1, c2, (double[]){0.9, 1.1}, false);
        int64_t v0 = tn_version(rm), v1 = tn_version(rv);
        tn_tensor *y = tn_batch_norm(x, rm, rv, w, b, train, 0.1, 1e-5);
        assert_non_null(y);
        tt_assert_grad_fn(y, "NativeBatchNormBackward0");
        assert_int_equal(tn_backward(y, g, false), TN_OK);
        tt_assert_close(y, train ? tr_y : ev_y, 24, 1e-12);
        tt_assert_close(rm, train ? tr_rm : ev_rm, 2, 1e-12);
        tt_assert_close(rv, train ? tr_rv : ev_rv, 2, 1e-12);
        tt_assert_grad(x, train ? tr_dx : ev_dx, 24, 1e-12);
        tt_assert_grad(w, train ? tr_dw : ev_dw, 2, 1e-12);
        tt_assert_grad(b, train ? tr_db : ev_db, 2, 1e-12);
        assert_true(tn_version(rm) == v0 && tn_version(rv) == v1); /* as PyTorch 1.13 */
        tn_scope_end();
    }
}

/* float32: the same values within float32's rounding */
static void batch_norm_f32(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {3, 2, 4}, c2[] = {2};
    tn_tensor *x = tn_to(pattern(3, s, 2, 0.7, 0.5, false), TN_F32, TN_DEVICE_CPU);
    tn_tensor *g = tn_to(pattern(3, s, 1, -0.3, 0, false), TN_F32, TN_DEVICE_CPU);
    tn_tensor *w = tt_f32(1, c2, (float[]){1.5f, -0.5f}, true);
    tn_tensor *b = tt_f32(1, c2, (float[]){0.2f, -0.1f}, true);
    tn_tensor *rm = tt_f32(1, c2, (float[]){0.1f, -0.2f}, false);
    tn_tensor *rv = tt_f32(1, c2, (float[]){0.9f, 1.1f}, false);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    tn_tensor *y = tn_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    assert_non_null(y);
    assert_int_equal(tn_dtype_of(y), TN_F32);
    assert_int_equal(tn_backward(y, g, false), TN_OK);
    tt_assert_close(y, tr_y, 24, 1e-5);
    tt_assert_close(rm, tr_rm, 2, 1e-6);
    tt_assert_close(rv, tr_rv, 2, 1e-6);
    tt_assert_grad(x, tr_dx, 24, 1e-5);
    tt_assert_grad(w, tr_dw, 2, 1e-5);
    tt_assert_grad(b, tr_db, 2, 1e-5);
    tn_scope_end();
}

static void group_norm_values(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {2, 6, 3}, c6[] = {6};
    tn_tensor *x = pattern(3, s, 2, 0.7, 0.5, true), *g = pattern(3, s, 1, -0.3, 0, false);
    double wv[6], bv[6];
    for (int i = 0; i < 6; i++)
        wv[i] = 1 + 0.1 * i, bv[i] = 0.05 * i - 0.1;
    tn_tensor *w = tt_f64(1, c6, wv, true), *b = tt_f64(1, c6, bv, true);
    tn_tensor *y = tn_group_norm(x, 3, w, b, 1e-5);
    assert_non_null(y);
    tt_assert_grad_fn(y, "NativeGroupNormBackward0");
    assert_int_equal(tn_backward(y, g, false), TN_OK);
    tt_assert_close(y, gn_y, 36, 1e-12);
    tt_assert_grad(x, gn_dx, 36, 1e-12);
    tt_assert_grad(w, gn_dw, 6, 1e-12);
    tt_assert_grad(b, gn_db, 6, 1e-12);
    tn_scope_end();
}

/* The fused backward and the create_graph one (public ops) agree: batch norm training and
 * eval, group norm; the create_graph gradients carry history (double backward). */
static void fused_matches_graph(void **state) {
    (void)state;
    const int64_t s[] = {3, 4, 5}, c4[] = {4};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *x = pattern(3, s, 3, 0.9, 1, true), *g = pattern(3, s, 1, 0.4, 0, false);
        tn_tensor *w = pattern(1, c4, 1, -0.4, 0, true), *b = pattern(1, c4, 1, 0.2, 0, true);
        tn_tensor *rm = pattern(1, c4, 0.5, 0.3, 0, false),
                  *rv = pattern(1, c4, 0.5, 0.7, 1, false);
        tn_tensor *y = k == 2 ? tn_group_norm(x, 2, w, b, 1e-3)
                              : tn_batch_norm(x, rm, rv, w, b, k == 0, 0.1, 1e-3);
        assert_non_null(y);
        tn_tensor *in[3] = {x, w, b}, *fused[3] = {0}, *graph[3] = {0};
        assert_int_equal(tn_autograd_grad(1, &y, &g, 3, in, fused, true, false), TN_OK);
        assert_int_equal(tn_autograd_grad(1, &y, &g, 3, in, graph, false, true), TN_OK);
        for (int i = 0; i < 3; i++) {
            double *v = malloc((size_t)tn_numel(fused[i]) * sizeof *v);
            assert_non_null(v);
            assert_int_equal(tn_copy_to_f64(fused[i], v, tn_numel(fused[i])), TN_OK);
            tt_assert_close(graph[i], v, tn_numel(fused[i]), 1e-12);
            free(v);
        }
        /* double backward: d/dx of sum(dx^2) exists (eval: dx does not depend on x) */
        tn_tensor *gx2 = tn_sum(tn_mul(graph[0], graph[0])), *gg = NULL;
        assert_int_equal(tn_autograd_grad(1, &gx2, NULL, 1, &x, &gg, false, false), TN_OK);
        assert_true((gg != NULL) == (k != 1));
        tn_scope_end();
    }
}

/* Planes longer than a work item (4096 elements) and a few channels: forward and fused
 * backward give the same bits on 1, 2 and 5 threads. */
static void thread_independent(void **state) {
    (void)state;
    const int64_t s[] = {2, 3, 70, 70}, c3[] = {3};
    int saved = tn_get_num_threads();
    tn_tensor *ref[5] = {0};
    const int threads[] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_set_num_threads(threads[k]);
        tn_tensor *x = tn_to(pattern(4, s, 2, 0.37, 3, false), TN_F32, TN_DEVICE_CPU);
        tn_tensor *g = tn_to(pattern(4, s, 1, 0.11, 0, false), TN_F32, TN_DEVICE_CPU);
        tn_tensor *w = tn_to(pattern(1, c3, 1, 0.5, 1, false), TN_F32, TN_DEVICE_CPU);
        tn_tensor *b = tn_to(pattern(1, c3, 1, 0.3, 0, false), TN_F32, TN_DEVICE_CPU);
        tn_tensor *rm = tn_zeros(1, c3, TN_F32);
        assert_int_equal(tn_requires_grad_(x, true), TN_OK);
        assert_int_equal(tn_requires_grad_(w, true), TN_OK);
        assert_int_equal(tn_requires_grad_(b, true), TN_OK);
        tn_tensor *y = tn_batch_norm(x, rm, NULL, w, b, true, 0.1, 1e-5);
        assert_non_null(y);
        assert_int_equal(tn_backward(y, g, false), TN_OK);
        tn_tensor *got[5] = {y, tn_grad(x), tn_grad(w), tn_grad(b), rm};
        for (int i = 0; i < 5; i++) {
            assert_non_null(got[i]);
            int64_t n = tn_numel(got[i]);
            if (k == 0) {
                ref[i] = tn_detach(got[i]);
                tn_keep(ref[i]);
            } else {
                assert_memory_equal(tn_data_ptr(ref[i]), tn_data_ptr(got[i]), (size_t)n * 4);
            }
        }
        tn_scope_end();
    }
    tn_set_num_threads(saved);
    for (int i = 0; i < 5; i++)
        tn_release(ref[i]);
}

/* An empty batch: a copy (CloneBackward0), running statistics untouched; group norm of an
 * empty input: zero gradients for weight and bias (PyTorch). */
static void empty_inputs(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {0, 3}, c3[] = {3}, g[] = {0, 6, 5}, c6[] = {6};
    tn_tensor *x = tn_zeros(2, s, TN_F64), *rm = tn_zeros(1, c3, TN_F64);
    tn_tensor *rv = tn_ones(1, c3, TN_F64);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    tn_tensor *y = tn_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 1e-5);
    assert_non_null(y);
    assert_int_equal(tn_numel(y), 0);
    tt_assert_grad_fn(y, "CloneBackward0");
    tt_assert_close(rm, (double[]){0, 0, 0}, 3, 0);
    tt_assert_close(rv, (double[]){1, 1, 1}, 3, 0);
    tn_tensor *xg = tn_zeros(3, g, TN_F64), *w = pattern(1, c6, 1, 0.5, 1, true);
    tn_tensor *b = pattern(1, c6, 1, 0.3, 0, true);
    tn_tensor *z = tn_group_norm(xg, 3, w, b, 1e-5);
    assert_non_null(z);
    tt_assert_grad_fn(z, "NativeGroupNormBackward0");
    assert_int_equal(tn_backward(tn_sum(z), NULL, false), TN_OK);
    const double zero[6] = {0};
    tt_assert_grad(w, zero, 6, 0);
    tt_assert_grad(b, zero, 6, 0);
    /* no channels and huge other dims (an expanded empty tensor): the "more than 1 value per
     * channel" check forms no product that could overflow (a fuzzer's finding) */
    const int64_t e1[] = {1, 0, 1}, huge[] = {((int64_t)1 << 62) + 1, 0, 3};
    tn_tensor *xe = tn_expand(tn_zeros(3, e1, TN_F64), 3, huge);
    assert_non_null(xe);
    tn_tensor *ye = tn_batch_norm(xe, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    assert_non_null(ye);
    assert_int_equal(tn_numel(ye), 0);
    /* group norm's check on [n * c / groups, groups, *], where n * c overflows beside a zero
     * dim (a fuzzer's finding), then its (n, groups) statistics: an error when they overflow
     * (docs/semantics.md §6c), an empty result when they fit */
    const int64_t e2[] = {1, 1, 0}, big[] = {(int64_t)1 << 33, (int64_t)1 << 33, 0};
    tn_tensor *xb = tn_expand(tn_zeros(3, e2, TN_F64), 3, big);
    assert_non_null(xb);
    tt_assert_refused(tn_group_norm(xb, (int64_t)1 << 33, NULL, NULL, 1e-5), TN_ERR_SHAPE,
                      "the number of elements of shape [8589934592, 8589934592] overflows int64");
    const int64_t wide[] = {2, (int64_t)1 << 62, 0};
    tn_tensor *base = tn_zeros(3, e2, TN_F64);
    assert_int_equal(tn_requires_grad_(base, true), TN_OK);
    tn_tensor *zb = tn_group_norm(tn_expand(base, 3, wide), 2, NULL, NULL, 1e-5);
    assert_non_null(zb);
    assert_int_equal(tn_numel(zb), 0);
    assert_int_equal(tn_backward(tn_sum(zb), NULL, false), TN_OK);
    tn_scope_end();
}

/* Running statistics that are strided views are updated through the view; one of them alone
 * is updated; a bfloat16 input takes float32 parameters (PyTorch's mixed CPU path). */
static void running_statistics(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {3, 2, 4}, c22[] = {2, 2}, c2[] = {2};
    tn_tensor *x = pattern(3, s, 2, 0.7, 0.5, false);
    tn_tensor *base = tt_f64(2, c22, (double[]){0.1, 7, -0.2, 7}, false);
    tn_tensor *rm = tn_select(base, 1, 0); /* stride 2 */
    tn_tensor *rv = tt_f64(1, c2, (double[]){0.9, 1.1}, false);
    assert_non_null(tn_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 1e-5));
    tt_assert_close(base, (double[]){tr_rm[0], 7, tr_rm[1], 7}, 4, 1e-12);
    tt_assert_close(rv, tr_rv, 2, 1e-12);
    tn_tensor *rv2 = tt_f64(1, c2, (double[]){0.9, 1.1}, false);
    assert_non_null(tn_batch_norm(x, NULL, rv2, NULL, NULL, true, 0.1, 1e-5));
    tt_assert_close(rv2, tr_rv, 2, 1e-12);
    /* bfloat16 x, float32 running statistics and weight */
    tn_tensor *xb = tn_to(x, TN_BF16, TN_DEVICE_CPU);
    tn_tensor *rm32 = tt_f32(1, c2, (float[]){0.1f, -0.2f}, false);
    tn_tensor *rv32 = tt_f32(1, c2, (float[]){0.9f, 1.1f}, false);
    tn_tensor *w32 = tt_f32(1, c2, (float[]){1.5f, -0.5f}, true);
    tn_tensor *y = tn_batch_norm(xb, rm32, rv32, w32, NULL, true, 0.1, 1e-5);
    assert_non_null(y);
    assert_int_equal(tn_dtype_of(y), TN_BF16);
    assert_int_equal(tn_backward(tn_sum(tn_mul(y, y)), NULL, false), TN_OK);
    assert_int_equal(tn_dtype_of(tn_grad(w32)), TN_F32);
    tt_assert_close(rm32, tr_rm, 2, 2e-2);
    tt_assert_close(rv32, tr_rv, 2, 2e-2);
    tn_scope_end();
}

#define REFUSED(call, st, msg)                                                                     \
    do {                                                                                           \
        tn_tensor *r_ = (call);                                                                    \
        if (tn_last_status() != (st))                                                              \
            fail_msg("status %d: %s", (int)tn_last_status(), tn_last_error());                     \
        tt_assert_refused(r_, st, msg);                                                            \
    } while (0)

/* PyTorch 1.13's texts, in its order; inputs untouched, nothing leaked (the teardown). */
static void batch_norm_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s13[] = {1, 3}, s43[] = {4, 3}, s131[] = {1, 3, 1}, c3[] = {3}, c4[] = {4};
    const int64_t s1[] = {4};
    tn_tensor *x = tt_filled(2, s43, TN_F32, 0, false), *rm = tn_zeros(1, c3, TN_F32);
    tn_tensor *rv = tn_ones(1, c3, TN_F32), *r4 = tn_zeros(1, c4, TN_F32);
    REFUSED(tn_batch_norm(tt_filled(2, s13, TN_F32, 0, false), rm, rv, NULL, NULL, true, 0.1, 1e-5),
            TN_ERR_SHAPE,
            "Expected more than 1 value per channel when training, got input size [1, 3]");
    REFUSED(tn_batch_norm(tt_filled(3, s131, TN_F32, 0, false), NULL, NULL, NULL, NULL, true, 0.1,
                          1e-5),
            TN_ERR_SHAPE,
            "Expected more than 1 value per channel when training, got input size [1, 3, 1]");
    REFUSED(tn_batch_norm(x, r4, rv, r4, NULL, true, 0.1, 1e-5), TN_ERR_SHAPE,
            "running_mean should contain 3 elements not 4");
    REFUSED(tn_batch_norm(x, rm, r4, NULL, NULL, true, 0.1, 1e-5), TN_ERR_SHAPE,
            "running_var should contain 3 elements not 4");
    REFUSED(tn_batch_norm(x, NULL, NULL, r4, NULL, true, 0.1, 1e-5), TN_ERR_SHAPE,
            "weight should contain 3 elements not 4");
    REFUSED(tn_batch_norm(x, NULL, NULL, NULL, r4, true, 0.1, 1e-5), TN_ERR_SHAPE,
            "bias should contain 3 elements not 4");
    REFUSED(tn_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5), TN_ERR_INVALID_ARGUMENT,
            "running_mean must be defined in evaluation mode");
    REFUSED(tn_batch_norm(x, rm, NULL, NULL, NULL, false, 0.1, 1e-5), TN_ERR_INVALID_ARGUMENT,
            "running_var must be defined in evaluation mode");
    REFUSED(
        tn_batch_norm(tt_filled(1, s1, TN_F32, 0, false), NULL, NULL, NULL, NULL, true, 0.1, 1e-5),
        TN_ERR_SHAPE, "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    tn_tensor *rg = tn_zeros(1, c3, TN_F32);
    assert_int_equal(tn_requires_grad_(rg, true), TN_OK);
    REFUSED(tn_batch_norm(x, rg, rv, NULL, NULL, true, 0.1, 1e-5), TN_ERR_AUTOGRAD,
            "The function 'native_batch_norm' is not differentiable with respect to argument "
            "'running_mean'. This input cannot have requires_grad True.");
    REFUSED(tn_batch_norm(tn_zeros(2, s43, TN_I64), NULL, NULL, NULL, NULL, true, 0.1, 1e-5),
            TN_ERR_DTYPE, "\"batch_norm\" not implemented for 'Long'");
    tn_tensor *rm64 = tn_zeros(1, c3, TN_F64), *rv64 = tn_ones(1, c3, TN_F64);
    REFUSED(tn_batch_norm(x, rm64, rv64, NULL, NULL, true, 0.1, 1e-5), TN_ERR_DTYPE,
            "mixed dtype (CPU): expect parameter to have scalar type of Float");
    REFUSED(tn_batch_norm(x, rm, rv64, NULL, NULL, true, 0.1, 1e-5), TN_ERR_DTYPE,
            "expected scalar type Float but found Double");
    REFUSED(tn_batch_norm(tn_to(x, TN_F64, TN_DEVICE_CPU), rm, rv, NULL, NULL, true, 0.1, 1e-5),
            TN_ERR_DTYPE, "mixed dtype (CPU): expect input to have scalar type of BFloat16");
    assert_non_null(tn_zeros(1, c3, TN_F32)); /* a success: the NULL below is not a chain's */
    REFUSED(tn_batch_norm(NULL, rm, rv, NULL, NULL, true, 0.1, 1e-5), TN_ERR_INVALID_ARGUMENT,
            "tn_batch_norm: argument 'input' is NULL");
    /* the refused calls left the running statistics alone */
    tt_assert_close(rm, (double[]){0, 0, 0}, 3, 0);
    tt_assert_close(rv, (double[]){1, 1, 1}, 3, 0);
    tn_scope_end();
}

static void group_norm_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {4, 6, 5}, s16[] = {1, 6}, c5[] = {5}, c6[] = {6}, s1[] = {6};
    tn_tensor *x = tt_filled(3, s, TN_F32, 0, false), *w5 = tn_ones(1, c5, TN_F32);
    tn_tensor *w6 = tn_ones(1, c6, TN_F32);
    REFUSED(tn_group_norm(x, 4, NULL, NULL, 1e-5), TN_ERR_SHAPE,
            "Expected number of channels in input to be divisible by num_groups, but got input of "
            "shape [4, 6, 5] and num_groups=4");
    REFUSED(tn_group_norm(x, -2, NULL, NULL, 1e-5), TN_ERR_INVALID_ARGUMENT,
            "Expected num groups to be greater than 0, got -2");
    REFUSED(tn_group_norm(x, 3, w5, NULL, 1e-5), TN_ERR_SHAPE,
            "Expected weight to be a vector of size equal to the number of channels in input, but "
            "got weight of shape [5] and input of shape [4, 6, 5]");
    REFUSED(tn_group_norm(x, 3, NULL, w5, 1e-5), TN_ERR_SHAPE,
            "Expected bias to be a vector of size equal to the number of channels in input, but "
            "got bias of shape [0] and input of shape [4, 6, 5]");
    REFUSED(tn_group_norm(x, 3, w6, w5, 1e-5), TN_ERR_SHAPE,
            "Expected bias to be a vector of size equal to the number of channels in input, but "
            "got bias of shape [6] and input of shape [4, 6, 5]");
    REFUSED(tn_group_norm(tt_filled(2, s16, TN_F32, 0, false), 6, NULL, NULL, 1e-5), TN_ERR_SHAPE,
            "Expected more than 1 value per channel when training, got input size [1, 6]");
    REFUSED(tn_group_norm(tt_filled(1, s1, TN_F32, 0, false), 3, NULL, NULL, 1e-5), TN_ERR_SHAPE,
            "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    REFUSED(tn_group_norm(x, 3, tn_ones(1, c6, TN_F64), NULL, 1e-5), TN_ERR_DTYPE,
            "expected scalar type Float but found Double");
    REFUSED(tn_group_norm(tn_zeros(3, s, TN_I64), 3, NULL, NULL, 1e-5), TN_ERR_DTYPE,
            "\"GroupNormKernelImpl\" not implemented for 'Long'");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(batch_norm_values),   TT_TEST(batch_norm_f32),     TT_TEST(group_norm_values),
        TT_TEST(fused_matches_graph), TT_TEST(thread_independent), TT_TEST(empty_inputs),
        TT_TEST(running_statistics),  TT_TEST(batch_norm_errors),  TT_TEST(group_norm_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
