/* tests/test_nn.c — softmax, log_softmax, cross_entropy and mse_loss: values,
 * grad_fn names and gradients against PyTorch (references computed with
 * /usr/bin/python3 on the fixed inputs of pat()), the fused and the
 * create_graph backward, second order, thread-count independence, and the
 * error texts. */
#include "util.h"

#include <math.h>

/* ---- PyTorch references ---------------------------------------------------------- */
static const double sm1_y[] = {0.2631974377620882,  0.0854476975718576,  0.49171754910554016,
                               0.1596373155605141,  0.49101869079747323, 0.1594104294864663,
                               0.05175298925543551, 0.297817890460625,   0.10834964825230788,
                               0.6235091757770106,  0.20242379233657748, 0.06571738363410408};
static const double sm1_gx[] = {-0.03457786623211678, -0.10735444935658348, 0.2427235093861783,
                                -0.10079119379747803, 0.2183510545845509,   -0.10844852455110243,
                                -0.09343019398925292, -0.01647233604419561, -0.12837236377124003,
                                0.3524091095266094,   -0.113316279451277,   -0.11072046630409242};
static const double lsm1_y[] = {-1.3348508145248335, -2.4598508145248337, -0.7098508145248335,
                                -1.8348508145248335, -0.7112730851148408, -1.8362730851148408,
                                -2.9612730851148408, -1.2112730851148408, -2.2223917974073655,
                                -0.4723917974073653, -1.5973917974073653, -2.7223917974073655};
static const double lsm1_gx[] = {0.2697961566431322,  -1.1218284536422136, 1.2375763236583102,
                                 -0.3855440266592288, 0.8181133182515792,  -0.09963151842904144,
                                 -1.157345618284647,  0.43886381846210937, -0.4864562939684615,
                                 1.3279386469721264,  0.15030297404207218, -0.991785327045737};
static const double sm0_y[] = {0.19313847611620363, 0.05997779531511428, 0.5307289532359325,
                               0.19313847611620363, 0.6741195199271034,  0.20934307548219694,
                               0.10450672726105584, 0.6741195199271034,  0.132742003956693,
                               0.7306791292026887,  0.3647643195030117,  0.132742003956693};
static const double sm0_gx[] = {-0.15313392536333187, -0.12525622829574667,  0.16272683174410052,
                                -0.15313392536333187, 0.3081594819684866,    -0.17550834995754583,
                                -0.13778061875981387, 0.30815948196848664,   -0.1550255566051548,
                                0.30076457825329256,  -0.024946212984286648, -0.1550255566051548};
static const double lsm0_y[] = {-1.6443478545221069,  -2.813780863337258,  -0.6335038339454145,
                                -1.6443478545221069,  -0.3943478545221069, -1.563780863337258,
                                -2.2585038339454147,  -0.3943478545221069, -2.019347854522107,
                                -0.31378086333725796, -1.0085038339454147, -2.019347854522107};
static const double lsm0_gx[] = {
    -0.2215692380581018, -1.25, 0.7653644766179662, -0.4318615238837964,
    0.7879402400364484,  0.0,   -1.072746636369472, 1.2991195199271033,
    -0.5663710019783464, 1.25,  0.3073821597515058, -0.867257996043307};
static const double sm3_y[] = {
    0.19313847611620363, 0.05997779531511428, 0.5307289532359325,  0.19313847611620363,
    0.6741195199271034,  0.20934307548219694, 0.10450672726105584, 0.6741195199271034,
    0.132742003956693,   0.7306791292026887,  0.3647643195030117,  0.132742003956693,
    0.5307289532359325,  0.19313847611620363, 0.05997779531511428, 0.5307289532359325,
    0.10450672726105584, 0.6741195199271034,  0.20934307548219694, 0.10450672726105584,
    0.3647643195030117,  0.132742003956693,   0.7306791292026887,  0.3647643195030117};
static const double sm3_gx[] = {
    -0.15313392536333187,  -0.12525622829574667, 0.16272683174410052,   -0.15313392536333187,
    0.3081594819684866,    -0.17550834995754583, -0.13778061875981387,  0.30815948196848664,
    -0.1550255566051548,   0.30076457825329256,  -0.024946212984286648, -0.1550255566051548,
    0.16272683174410052,   -0.15313392536333187, 0.03683759243397936,   0.16272683174410052,
    -0.13778061875981387,  0.3081594819684866,   -0.21160666633678057,  -0.13778061875981387,
    -0.024946212984286648, -0.1550255566051548,  0.1747690739028012,    -0.024946212984286644};
static const double lsm3_y[] = {
    -1.6443478545221069, -2.813780863337258,   -0.6335038339454145,  -1.6443478545221069,
    -0.3943478545221069, -1.563780863337258,   -2.2585038339454147,  -0.3943478545221069,
    -2.019347854522107,  -0.31378086333725796, -1.0085038339454147,  -2.019347854522107,
    -0.6335038339454145, -1.6443478545221069,  -2.813780863337258,   -0.6335038339454145,
    -2.2585038339454147, -0.3943478545221069,  -1.563780863337258,   -2.2585038339454147,
    -1.0085038339454147, -2.019347854522107,   -0.31378086333725796, -1.0085038339454147};
static const double lsm3_gx[] = {-0.2215692380581018, -1.25,
                                 0.7653644766179662,  -0.4318615238837964,
                                 0.7879402400364484,  0.0,
                                 -1.072746636369472,  1.2991195199271033,
                                 -0.5663710019783464, 1.25,
                                 0.3073821597515058,  -0.867257996043307,
                                 0.6173177616910168,  -0.3267153809709491,
                                 1.247547184955382,   0.9134111915449157,
                                 -0.901126681815264,  1.0435298799817758,
                                 -0.6948540353996684, -1.2443665909236803,
                                 0.2838089201242471,  -0.7168144990108267,
                                 -0.5526931495557136, 0.3309553993787645};
static const double smt_y[] = {0.1686486587651021,  0.10229058226044818,  0.06204237434081903,
                               0.6670183846336307,  0.044990511216857064, 0.48369357934074647,
                               0.29337498577630794, 0.17794092366608852,  0.45505423392341127,
                               0.27600434470659363, 0.16740509727844333,  0.1015363240915518};
static const double smt_gx[] = {0.06911384164841664,  0.05818260446748367,  -0.24430388671811865,
                                -0.07315724107271558, 0.08136667107184224,  0.3348298056550379,
                                0.06420204540584296,  -0.28069547831452113, 0.014753808477154256,
                                -0.060158645981544,   0.1411462027751952,   -0.10527972741407357};
static const double smdd_gx[] = {-0.07871026523721598, -0.13994297286318774, 0.21865323810040377,
                                 -0.15114561657313547, 0.2981088850676979,   -0.14696326849456254};
static const double smdd_x[] = {-0.019684901601933882, 0.049129403155106416, -0.029444501553172554,
                                0.05998546841552657,   -0.08937942909154527, 0.029393960676018713};
static const double lsmdd_gx[] = {0.1490456737383974,  -1.161030395851948, 1.0119847221135507,
                                  -0.6829854780311329, 0.7913166129525716, -0.10833113492143881};
static const double lsmdd_x[] = {-0.2037363024408332, -0.2992573919084612, 0.5029936943492943,
                                 0.12854292032404452, -0.2441867972227588, 0.11564387689871432};
static const double ce_l[] = {2.217175703960322};
static const double ce_g[] = {
    0.034294625203754585, -0.23886616531047122, 0.0640707948985677,   0.02080074164943077,
    0.11970000355871815,  -0.2157053747962454,  0.011133834689528773, 0.0640707948985677,
    0.02080074164943077,  0.11970000355871815,  0.06255722798230655,  0.020309358415554618,
    0.11687228828611013,  0.037942876757902005, -0.23768175144187334, 0.06255722798230655,
    0.020309358415554618, -0.13312771171388987, 0.037942876757902005, 0.012318248558126667};
static const double ceign_l[] = {2.29407684675776};
static const double ceign_g[] = {0.13717850081501834,
                                 -0.9554646612418849,
                                 0.2562831795942708,
                                 0.08320296659772308,
                                 0.4788000142348726,
                                 0.0,
                                 0.0,
                                 0.0,
                                 0.0,
                                 0.0,
                                 0.2502289119292262,
                                 0.08123743366221847,
                                 0.4674891531444405,
                                 0.15177150703160802,
                                 -0.9507270057674934,
                                 0.2502289119292262,
                                 0.08123743366221847,
                                 -0.5325108468555595,
                                 0.15177150703160802,
                                 0.04927299423250667};
static const double ce1_l[] = {2.486472275568009};
static const double ce1_g[] = {0.13717850081501834, 0.04453533875811509, 0.2562831795942708,
                               -0.9167970334022769, 0.4788000142348726};
static const double cedd_x[] = {
    -0.002416755155795579, -0.006867259694822827, -0.0006995273271559338, -0.002027201670330585,
    0.012010743848104926,  -0.017975486497456773, -0.0007846055243300475, 0.002268333190295376,
    -0.001063678430564589, 0.017555437262056037,  -0.0004291628977469793, -0.0018553830443017504,
    0.011894068923411483,  -0.002128179045461253, -0.007481343935901496,  0.012652058901722215,
    0.002391467888957755,  -0.022103135474510992, 0.005805983042418079,   0.0012536256414129386};
static const double mse_l[] = {2.0703125};
static const double mse_ga[] = {-0.22916666666666666,
                                -0.22916666666666666,
                                0.25,
                                -0.22916666666666666,
                                0.25,
                                0.25,
                                -0.22916666666666666,
                                0.25,
                                -0.22916666666666666,
                                0.25,
                                0.25,
                                -0.22916666666666666};
static const double mse_gb[] = {0.22916666666666666,
                                0.22916666666666666,
                                -0.25,
                                0.22916666666666666,
                                -0.25,
                                -0.25,
                                0.22916666666666666,
                                -0.25,
                                0.22916666666666666,
                                -0.25,
                                -0.25,
                                0.22916666666666666};
static const double mseb_l[] = {1.38671875};
static const double mseb_ga[] = {-0.22916666666666666,
                                 -0.22916666666666666,
                                 0.25,
                                 -0.22916666666666666,
                                 -0.020833333333333332,
                                 -0.020833333333333332,
                                 -0.020833333333333332,
                                 -0.020833333333333332,
                                 -0.29166666666666663,
                                 0.1875,
                                 0.1875,
                                 -0.29166666666666663};
static const double mseb_gb[] = {0.5416666666666666, 0.0625, -0.41666666666666663,
                                 0.5416666666666666};

/* ---- helpers --------------------------------------------------------------------- */

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* Inputs ((i*37 + seed*11) % 23 - 11) / 8, as in the PyTorch script. */
static tn_tensor *pat(int nd, const int64_t *shape, int seed, tn_dtype dt, bool rg) {
    double v[512];
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    assert_true(n <= 512);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((i * 37 + seed * 11) % 23 - 11) / 8;
    tn_tensor *t = tn_to(tt_f64(nd, shape, v, false), dt, TN_DEVICE_KEEP);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

static void assert_fn(const tn_tensor *t, const char *name) {
    assert_non_null(t);
    const char *got = tn_grad_fn_name(t);
    assert_non_null(got);
    assert_string_equal(got, name);
}

/* ---- softmax / log_softmax ------------------------------------------------------------ */

typedef struct sm_case {
    int nd;
    int64_t shape[3];
    int dim;
    bool log, trans;
    const double *y, *gx;
    int64_t n;
} sm_case;

#define SM(ND, SH, DIM, LOG, TR, P)                                                                \
    { ND, SH, DIM, LOG, TR, P##_y, P##_gx, sizeof P##_y / sizeof(double) }
#define SH(...)                                                                                    \
    { __VA_ARGS__ }
static const sm_case sm_cases[] = {
    SM(2, SH(3, 4), 1, false, false, sm1),    SM(2, SH(3, 4), -1, true, false, lsm1),
    SM(2, SH(3, 4), 0, false, false, sm0),    SM(2, SH(3, 4), 0, true, false, lsm0),
    SM(3, SH(2, 3, 4), 1, false, false, sm3), SM(3, SH(2, 3, 4), 1, true, false, lsm3),
    SM(2, SH(4, 3), 1, false, true, smt), /* non-contiguous input */
};

/* create_graph: the backward is built from public ops instead of the fused
 * kernel; both must agree with PyTorch. */
static void run_sm(const sm_case *c, tn_dtype dt, double tol, bool create_graph) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = pat(c->nd, c->shape, 1, dt, true);
    tn_tensor *X = c->trans ? tn_transpose(x, 0, 1) : x;
    tn_tensor *y = c->log ? tn_log_softmax(X, c->dim) : tn_softmax(X, c->dim);
    assert_fn(y, c->log ? "LogSoftmaxBackward0" : "SoftmaxBackward0");
    tt_assert_close(y, c->y, c->n, tol);
    tn_tensor *g = pat(tn_ndim(y), tn_shape(y), 3, dt, false);
    assert_int_equal(tn_backward_ex(y, g, false, create_graph), TN_OK);
    tt_assert_grad(x, c->gx, c->n, tol);
    assert_int_equal(tn_set_grad(x, NULL), TN_OK);
    tn_scope_end();
}

static void softmax_cases(void **state) {
    for (size_t i = 0; i < sizeof sm_cases / sizeof sm_cases[0]; i++) {
        run_sm(&sm_cases[i], TN_F64, 1e-12, false);
        run_sm(&sm_cases[i], TN_F64, 1e-12, true);
        run_sm(&sm_cases[i], TN_F32, 1e-6, false);
    }
}

/* Large inputs do not overflow (the max is subtracted first). */
static void softmax_stable(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f32(1, S(3), (const float[]){1000, 1001, 1002}, false);
    tt_assert_close(tn_softmax(x, 0),
                    (const double[]){0.09003057330846786, 0.2447284758090973, 0.6652409434318542},
                    3, 1e-6);
    tt_assert_close(
        tn_log_softmax(x, 0),
        (const double[]){-2.4076058864593506, -1.4076058864593506, -0.40760594606399536}, 3, 1e-6);
    tn_tensor *s = tn_softmax(tn_scalar(5, TN_F32), 0); /* 0-dim: one element */
    assert_int_equal(tn_ndim(s), 0);
    tt_assert_close(s, (const double[]){1}, 1, 0);
    tn_tensor *e = tn_softmax(tn_zeros(2, S(0, 4), TN_F32), 1);
    assert_int_equal(tn_numel(e), 0);
    tn_scope_end();
}

/* Large rows run in parallel; the result must not depend on the thread count. */
static void softmax_threads(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(11);
    tn_tensor *x = tn_randn(3, S(64, 300, 40), TN_F32);
    int old = tn_get_num_threads();
    tn_set_num_threads(1);
    tn_tensor *a = tn_log_softmax(x, 1), *a2 = tn_softmax(x, 2);
    tn_set_num_threads(2);
    tn_tensor *b = tn_log_softmax(x, 1), *b2 = tn_softmax(x, 2);
    tn_set_num_threads(old);
    assert_memory_equal(tn_data_ptr(a), tn_data_ptr(b), 64 * 300 * 40 * sizeof(float));
    assert_memory_equal(tn_data_ptr(a2), tn_data_ptr(b2), 64 * 300 * 40 * sizeof(float));
    double v[40], s = 0;
    assert_int_equal(tn_copy_to_f64(tn_select(tn_select(b2, 0, 5), 0, 7), v, 40), TN_OK);
    for (int i = 0; i < 40; i++)
        s += v[i];
    assert_true(fabs(s - 1) < 1e-5);
    tn_scope_end();
}

/* d/dx of sum(grad(sum(softmax(x) * w), x)^2): second order through the
 * composed backward. */
static void softmax_double_backward(void **state) {
    for (int log = 0; log < 2; log++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *x = pat(2, S(2, 3), 1, TN_F64, true);
        tn_tensor *y = log ? tn_log_softmax(x, 1) : tn_softmax(x, 1);
        tn_tensor *l = tn_sum(tn_mul(y, pat(2, S(2, 3), 3, TN_F64, false)));
        tn_tensor *gx = NULL;
        assert_int_equal(tn_autograd_grad(1, &l, NULL, 1, &x, &gx, true, true), TN_OK);
        tn_keep(gx);
        tt_assert_close(gx, log ? lsmdd_gx : smdd_gx, 6, 1e-12);
        assert_int_equal(tn_backward(tn_sum(tn_mul(gx, gx)), NULL, false), TN_OK);
        tt_assert_grad(x, log ? lsmdd_x : smdd_x, 6, 1e-12);
        tn_release(gx);
        tn_scope_end();
    }
}

static void softmax_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(3, 4), 1, TN_F32, true);
    assert_null(tn_softmax(a, 2));
    tt_assert_error(TN_ERR_INDEX,
                    "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    assert_null(tn_log_softmax(a, -3));
    tt_assert_error(TN_ERR_INDEX,
                    "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    tn_tensor *i = tn_ones(1, S(3), TN_I64);
    assert_null(tn_softmax(i, 0));
    tt_assert_error(TN_ERR_DTYPE, "\"softmax_lastdim_kernel_impl\" not implemented for 'int64'");
    tn_clear_error();
    assert_null(tn_log_softmax(NULL, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    tn_scope_end();
}

/* ---- cross_entropy --------------------------------------------------------------------- */

static tn_tensor *targets(int nd, const int64_t *shape, const int64_t *v) {
    tn_tensor *t = tn_tensor_from(v, TN_I64, nd, shape, false);
    assert_non_null(t);
    return t;
}

static void cross_entropy_values(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *lg = pat(2, S(4, 5), 1, TN_F64, true);
    tn_tensor *l = tn_cross_entropy(lg, targets(1, S(4), (const int64_t[]){1, 0, 4, 2}));
    assert_fn(l, "NllLossBackward0");
    assert_int_equal(tn_ndim(l), 0);
    tt_assert_close(l, ce_l, 1, 1e-12);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    tt_assert_grad(lg, ce_g, 20, 1e-12);
    /* float32 */
    tn_tensor *lf = tn_cross_entropy(pat(2, S(4, 5), 1, TN_F32, false),
                                     targets(1, S(4), (const int64_t[]){1, 0, 4, 2}));
    assert_int_equal(tn_dtype_of(lf), TN_F32);
    tt_assert_close(lf, (const double[]){2.2171757221221924}, 1, 1e-6);
    tn_scope_end();
}

/* Targets equal to -100 are ignored (PyTorch's default ignore_index): they
 * count neither in the sum nor in the mean's divisor. */
static void cross_entropy_ignore_and_1d(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *lg = pat(2, S(4, 5), 1, TN_F64, true);
    tn_tensor *l = tn_cross_entropy(lg, targets(1, S(4), (const int64_t[]){1, -100, 4, 2}));
    tt_assert_close(l, ceign_l, 1, 1e-12);
    assert_int_equal(tn_backward(tn_mul_scalar(l, 3), NULL, false), TN_OK);
    tt_assert_grad(lg, ceign_g, 20, 1e-12);
    tn_tensor *none = tn_cross_entropy(pat(2, S(2, 5), 1, TN_F64, false),
                                       targets(1, S(2), (const int64_t[]){-100, -100}));
    assert_true(none != NULL);
    double v;
    assert_int_equal(tn_item(none, &v), TN_OK);
    assert_true(isnan(v));
    /* (C) logits with a 0-dim target */
    tn_tensor *l1 = pat(1, S(5), 1, TN_F64, true);
    tn_tensor *c1 = tn_cross_entropy(l1, targets(0, NULL, (const int64_t[]){3}));
    assert_fn(c1, "NllLossBackward0");
    tt_assert_close(c1, ce1_l, 1, 1e-12);
    assert_int_equal(tn_backward(c1, NULL, false), TN_OK);
    tt_assert_grad(l1, ce1_g, 5, 1e-12);
    tn_scope_end();
}

/* Second order: d/dx sum(grad(ce, x)^2) — NllLoss's gradient is built as
 * g * scatter so the graph continues through LogSoftmaxBackward0. */
static void cross_entropy_double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *lg = pat(2, S(4, 5), 1, TN_F64, true);
    tn_tensor *l = tn_cross_entropy(lg, targets(1, S(4), (const int64_t[]){1, 0, 4, 2}));
    tn_tensor *g = NULL;
    assert_int_equal(tn_autograd_grad(1, &l, NULL, 1, &lg, &g, true, true), TN_OK);
    tn_keep(g);
    tt_assert_close(g, ce_g, 20, 1e-12);
    assert_int_equal(tn_backward(tn_sum(tn_mul(g, g)), NULL, false), TN_OK);
    tt_assert_grad(lg, cedd_x, 20, 1e-12);
    tn_release(g);
    tn_scope_end();
}

static void cross_entropy_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *lg = pat(2, S(4, 5), 1, TN_F32, true);
    assert_null(tn_cross_entropy(lg, targets(1, S(4), (const int64_t[]){1, 0, 10, 2})));
    tt_assert_error(TN_ERR_INDEX, "Target 10 is out of bounds.");
    assert_null(tn_cross_entropy(lg, targets(1, S(4), (const int64_t[]){1, -1, 0, 2})));
    tt_assert_error(TN_ERR_INDEX, "Target -1 is out of bounds.");
    int32_t t32[] = {1, 0, 4, 2};
    assert_null(tn_cross_entropy(lg, tn_tensor_from(t32, TN_I32, 1, S(4), false)));
    tt_assert_error(TN_ERR_DTYPE, "expected scalar type Long but found Int");
    assert_null(tn_cross_entropy(lg, targets(1, S(3), (const int64_t[]){1, 0, 4})));
    tt_assert_error(TN_ERR_SHAPE, "Expected input batch_size (4) to match target batch_size (3).");
    assert_null(tn_cross_entropy(lg, targets(2, S(4, 1), (const int64_t[]){1, 0, 4, 2})));
    tt_assert_error(TN_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported");
    assert_null(tn_cross_entropy(tn_ones(2, S(4, 5), TN_I64),
                                 targets(1, S(4), (const int64_t[]){1, 0, 4, 2})));
    tt_assert_error(TN_ERR_DTYPE, "not implemented for 'int64'");
    assert_null(tn_cross_entropy(pat(1, S(5), 1, TN_F32, false),
                                 targets(1, S(2), (const int64_t[]){1, 2})));
    tt_assert_error(TN_ERR_SHAPE, "size mismatch (got input: [5], target: [2])");
    assert_null(tn_cross_entropy(lg, targets(0, NULL, (const int64_t[]){1})));
    tt_assert_error(TN_ERR_SHAPE, "Expected input batch_size (4) to match target batch_size (0).");
    /* an empty batch with a 0-D target: one target for no row (the fused kernel once read
     * a row past the logits here) */
    tn_tensor *empty = tn_zeros(2, S(0, 5), TN_F32);
    assert_null(tn_cross_entropy(empty, targets(0, NULL, (const int64_t[]){1})));
    tt_assert_error(TN_ERR_INDEX, "Dimension specified as 0 but tensor has no dimensions");
    tn_tensor *none = tn_cross_entropy(empty, targets(1, S(0), (const int64_t[]){0}));
    assert_non_null(none); /* mean over no target: NaN, as PyTorch */
    double v = 0;
    assert_int_equal(tn_item(none, &v), TN_OK);
    assert_true(isnan(v));
    assert_null(tn_cross_entropy(lg, NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    assert_null(tn_grad(lg));
    tn_scope_end();
}

/* ---- mse_loss ---------------------------------------------------------------------- */

static void mse_values(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(3, 4), 1, TN_F64, true), *b = pat(2, S(3, 4), 2, TN_F64, true);
    tn_tensor *l = tn_mse_loss(a, b);
    assert_fn(l, "MseLossBackward0");
    tt_assert_close(l, mse_l, 1, 1e-12);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    tt_assert_grad(a, mse_ga, 12, 1e-12);
    tt_assert_grad(b, mse_gb, 12, 1e-12);
    /* broadcasting target (PyTorch warns; we do not) */
    tn_tensor *a2 = pat(2, S(3, 4), 1, TN_F32, true), *b2 = pat(1, S(4), 2, TN_F32, true);
    tn_tensor *l2 = tn_mse_loss(a2, b2);
    tt_assert_close(l2, mseb_l, 1, 1e-6);
    assert_int_equal(tn_backward(l2, NULL, false), TN_OK);
    tt_assert_grad(a2, mseb_ga, 12, 1e-6);
    tt_assert_grad(b2, mseb_gb, 4, 1e-6);
    /* mixed dtypes promote; empty gives NaN */
    tn_tensor *l3 =
        tn_mse_loss(pat(2, S(3, 4), 1, TN_F32, false), pat(2, S(3, 4), 2, TN_F64, false));
    assert_int_equal(tn_dtype_of(l3), TN_F64);
    tt_assert_close(l3, mse_l, 1, 1e-12);
    double v;
    assert_int_equal(tn_item(tn_mse_loss(tn_zeros(1, S(0), TN_F32), tn_zeros(1, S(0), TN_F32)), &v),
                     TN_OK);
    assert_true(isnan(v));
    tn_scope_end();
}

static void mse_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(3, 4), 1, TN_F32, true);
    assert_null(tn_mse_loss(a, pat(1, S(5), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "The size of tensor a (4) must match the size of tensor b (5) at "
                                  "non-singleton dimension 1");
    assert_null(tn_mse_loss(tn_ones(1, S(3), TN_I64), tn_ones(1, S(3), TN_I64)));
    tt_assert_error(TN_ERR_DTYPE, "\"mse_cpu\" not implemented for 'int64'");
    tn_clear_error();
    assert_null(tn_mse_loss(a, NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(softmax_cases),
        TT_TEST(softmax_stable),
        TT_TEST(softmax_threads),
        TT_TEST(softmax_double_backward),
        TT_TEST(softmax_errors),
        TT_TEST(cross_entropy_values),
        TT_TEST(cross_entropy_ignore_and_1d),
        TT_TEST(cross_entropy_double_backward),
        TT_TEST(cross_entropy_errors),
        TT_TEST(mse_values),
        TT_TEST(mse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
