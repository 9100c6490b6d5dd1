/* tn_print / tn_format against torch 1.13's repr. Every expected string was
 * printed by /usr/bin/python3 (torch 1.13.1) for the same values, with
 * "torch." dropped from dtype names; values are given explicitly or as
 * start + step * i (computed in double, then converted to the dtype). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct print_case {
    const char *name;
    tn_dtype dt;
    int ndim;
    int64_t shape[4];
    const double *vals;   /* explicit values, or NULL */
    const int64_t *ivals; /* explicit int64 values, or NULL */
    double start, step;   /* otherwise start + step * i */
    bool requires_grad;
    const char *want;
} print_case;

/* clang-format off */
static const print_case cases[] = {
    {"f32 requires_grad", TN_F32, 1, {2}, (const double[]){1.0, 2.0}, NULL, 0.0, 0.0, true,
     "tensor([1., 2.], requires_grad=True)"},
    {"sigmoid grad", TN_F32, 1, {3}, (const double[]){0.19661193, 0.10499359, 0.04517666}, NULL, 0.0, 0.0, false,
     "tensor([0.1966, 0.1050, 0.0452])"},
    {"int64", TN_I64, 1, {2}, NULL, (const int64_t[]){1LL, 2LL}, 0.0, 0.0, false,
     "tensor([1, 2])"},
    {"int32", TN_I32, 1, {2}, (const double[]){1.0, 2.0}, NULL, 0.0, 0.0, false,
     "tensor([1, 2], dtype=int32)"},
    {"int16", TN_I16, 1, {3}, (const double[]){-7.0, 0.0, 12.0}, NULL, 0.0, 0.0, false,
     "tensor([-7,  0, 12], dtype=int16)"},
    {"float64", TN_F64, 1, {2}, (const double[]){1.0, 2.0}, NULL, 0.0, 0.0, false,
     "tensor([1., 2.], dtype=float64)"},
    {"bool", TN_BOOL, 1, {2}, (const double[]){1.0, 0.0}, NULL, 0.0, 0.0, false,
     "tensor([ True, False])"},
    {"bool 2d", TN_BOOL, 2, {2, 2}, (const double[]){1.0, 1.0, 0.0, 1.0}, NULL, 0.0, 0.0, false,
     "tensor([[ True,  True],\n"
        "        [False,  True]])"},
    {"2d f32", TN_F32, 2, {2, 3}, (const double[]){1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, NULL, 0.0, 0.0, false,
     "tensor([[1., 2., 3.],\n"
        "        [4., 5., 6.]])"},
    {"2d fractions sci", TN_F32, 2, {2, 2}, (const double[]){1.5, -2.25, 3.125, 0.001}, NULL, 0.0, 0.0, false,
     "tensor([[ 1.5000e+00, -2.2500e+00],\n"
        "        [ 3.1250e+00,  1.0000e-03]])"},
    {"tiny", TN_F32, 1, {2}, (const double[]){1e-05, 1.0}, NULL, 0.0, 0.0, false,
     "tensor([1.0000e-05, 1.0000e+00])"},
    {"huge", TN_F32, 1, {2}, (const double[]){1000000000.0, 1.0}, NULL, 0.0, 0.0, false,
     "tensor([1.0000e+09, 1.0000e+00])"},
    {"int ratio sci", TN_F32, 1, {2}, (const double[]){1.0, 1001.0}, NULL, 0.0, 0.0, false,
     "tensor([1.0000e+00, 1.0010e+03])"},
    {"int ratio ok", TN_F32, 1, {2}, (const double[]){1.0, 1000.0}, NULL, 0.0, 0.0, false,
     "tensor([   1., 1000.])"},
    {"negative", TN_F32, 1, {3}, (const double[]){-1.5, 2.25, 0.0}, NULL, 0.0, 0.0, false,
     "tensor([-1.5000,  2.2500,  0.0000])"},
    {"nan inf", TN_F32, 1, {4}, (const double[]){NAN, INFINITY, -INFINITY, 1.5}, NULL, 0.0, 0.0, false,
     "tensor([   nan,    inf,   -inf, 1.5000])"},
    {"zero nan", TN_F32, 1, {2}, (const double[]){0.0, NAN}, NULL, 0.0, 0.0, false,
     "tensor([0., nan])"},
    {"int inf", TN_F32, 1, {2}, (const double[]){1.0, INFINITY}, NULL, 0.0, 0.0, false,
     "tensor([1., inf])"},
    {"all nonfinite", TN_F64, 1, {3}, (const double[]){NAN, -INFINITY, INFINITY}, NULL, 0.0, 0.0, false,
     "tensor([nan, -inf, inf], dtype=float64)"},
    {"zeros", TN_F32, 1, {3}, (const double[]){0.0, 0.0, 0.0}, NULL, 0.0, 0.0, false,
     "tensor([0., 0., 0.])"},
    {"negative zero", TN_F32, 1, {2}, (const double[]){-0.0, 1.0}, NULL, 0.0, 0.0, false,
     "tensor([-0., 1.])"},
    {"large f64", TN_F64, 1, {2}, (const double[]){123456.789, 1.5}, NULL, 0.0, 0.0, false,
     "tensor([1.2346e+05, 1.5000e+00], dtype=float64)"},
    {"large fixed", TN_F64, 1, {2}, (const double[]){123456.789, 500.25}, NULL, 0.0, 0.0, false,
     "tensor([123456.7890,    500.2500], dtype=float64)"},
    {"1e8 int", TN_F32, 1, {2}, (const double[]){100000000.0, 20000000.0}, NULL, 0.0, 0.0, false,
     "tensor([100000000.,  20000000.])"},
    {"above 1e8", TN_F32, 1, {2}, (const double[]){150000000.0, 200000000.0}, NULL, 0.0, 0.0, false,
     "tensor([1.5000e+08, 2.0000e+08])"},
    {"tenth", TN_F32, 1, {1}, (const double[]){0.1}, NULL, 0.0, 0.0, false,
     "tensor([0.1000])"},
    {"rounding", TN_F64, 1, {4}, (const double[]){0.00015, 0.5, 2.5, 1.23456789}, NULL, 0.0, 0.0, false,
     "tensor([1.5000e-04, 5.0000e-01, 2.5000e+00, 1.2346e+00], dtype=float64)"},
    {"neg sci", TN_F64, 1, {3}, (const double[]){-1e-10, 5.0, 10000000000.0}, NULL, 0.0, 0.0, false,
     "tensor([-1.0000e-10,  5.0000e+00,  1.0000e+10], dtype=float64)"},
    {"sci nan", TN_F32, 1, {3}, (const double[]){1e-07, NAN, -2.0}, NULL, 0.0, 0.0, false,
     "tensor([ 1.0000e-07,         nan, -2.0000e+00])"},
    {"int sci nan", TN_F32, 1, {3}, (const double[]){1.0, 100000.0, NAN}, NULL, 0.0, 0.0, false,
     "tensor([1.0000e+00, 1.0000e+05,        nan])"},
    {"1e-4 boundary", TN_F64, 1, {2}, (const double[]){0.0001, 0.5}, NULL, 0.0, 0.0, false,
     "tensor([1.0000e-04, 5.0000e-01], dtype=float64)"},
    {"0-dim int64", TN_I64, 0, {0}, NULL, (const int64_t[]){5LL}, 0.0, 0.0, false,
     "tensor(5)"},
    {"0-dim float64", TN_F64, 0, {0}, (const double[]){2.5}, NULL, 0.0, 0.0, false,
     "tensor(2.5000, dtype=float64)"},
    {"0-dim bool", TN_BOOL, 0, {0}, (const double[]){1.0}, NULL, 0.0, 0.0, false,
     "tensor(True)"},
    {"0-dim nan", TN_F32, 0, {0}, (const double[]){NAN}, NULL, 0.0, 0.0, false,
     "tensor(nan)"},
    {"0-dim requires_grad", TN_F32, 0, {0}, (const double[]){-3.25}, NULL, 0.0, 0.0, true,
     "tensor(-3.2500, requires_grad=True)"},
    {"0-dim tiny", TN_F32, 0, {0}, (const double[]){1e-06}, NULL, 0.0, 0.0, false,
     "tensor(1.0000e-06)"},
    {"int64 big", TN_I64, 1, {3}, NULL, (const int64_t[]){-9007199254740993LL, 1LL, 12345678901LL}, 0.0, 0.0, false,
     "tensor([-9007199254740993,                 1,       12345678901])"},
    {"wrap 30", TN_F32, 1, {30}, NULL, NULL, 0.0, 1.0, false,
     "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.])"},
    {"wrap decimals", TN_F32, 1, {30}, NULL, NULL, 0.0, 0.37, false,
     "tensor([ 0.0000,  0.3700,  0.7400,  1.1100,  1.4800,  1.8500,  2.2200,  2.5900,\n"
        "         2.9600,  3.3300,  3.7000,  4.0700,  4.4400,  4.8100,  5.1800,  5.5500,\n"
        "         5.9200,  6.2900,  6.6600,  7.0300,  7.4000,  7.7700,  8.1400,  8.5100,\n"
        "         8.8800,  9.2500,  9.6200,  9.9900, 10.3600, 10.7300])"},
    {"suffix wrap", TN_F32, 1, {12}, NULL, NULL, 0.0, 1.0, true,
     "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11.],\n"
        "       requires_grad=True)"},
    {"suffix wrap 2", TN_F32, 1, {14}, NULL, NULL, 100.0, 1.25, true,
     "tensor([100.0000, 101.2500, 102.5000, 103.7500, 105.0000, 106.2500, 107.5000,\n"
        "        108.7500, 110.0000, 111.2500, 112.5000, 113.7500, 115.0000, 116.2500],\n"
        "       requires_grad=True)"},
    {"3d int64", TN_I64, 3, {2, 3, 4}, NULL, NULL, 0.0, 1.0, false,
     "tensor([[[ 0,  1,  2,  3],\n"
        "         [ 4,  5,  6,  7],\n"
        "         [ 8,  9, 10, 11]],\n"
        "\n"
        "        [[12, 13, 14, 15],\n"
        "         [16, 17, 18, 19],\n"
        "         [20, 21, 22, 23]]])"},
    {"summarize 1d", TN_F32, 1, {2000}, NULL, NULL, 0.0, 1.0, false,
     "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03])"},
    {"summarize int64", TN_I64, 1, {1001}, NULL, NULL, 0.0, 1.0, false,
     "tensor([   0,    1,    2,  ...,  998,  999, 1000])"},
    {"summarize bool", TN_BOOL, 1, {1500}, NULL, NULL, 0.0, 1.0, false,
     "tensor([False,  True,  True,  ...,  True,  True,  True])"},
    {"summarize 2d", TN_F32, 2, {50, 50}, NULL, NULL, 0.0, 0.5, false,
     "tensor([[0.0000e+00, 5.0000e-01, 1.0000e+00,  ..., 2.3500e+01, 2.4000e+01,\n"
        "         2.4500e+01],\n"
        "        [2.5000e+01, 2.5500e+01, 2.6000e+01,  ..., 4.8500e+01, 4.9000e+01,\n"
        "         4.9500e+01],\n"
        "        [5.0000e+01, 5.0500e+01, 5.1000e+01,  ..., 7.3500e+01, 7.4000e+01,\n"
        "         7.4500e+01],\n"
        "        ...,\n"
        "        [1.1750e+03, 1.1755e+03, 1.1760e+03,  ..., 1.1985e+03, 1.1990e+03,\n"
        "         1.1995e+03],\n"
        "        [1.2000e+03, 1.2005e+03, 1.2010e+03,  ..., 1.2235e+03, 1.2240e+03,\n"
        "         1.2245e+03],\n"
        "        [1.2250e+03, 1.2255e+03, 1.2260e+03,  ..., 1.2485e+03, 1.2490e+03,\n"
        "         1.2495e+03]])"},
    {"summarize 3d int32", TN_I32, 3, {11, 4, 25}, NULL, NULL, 0.0, 1.0, false,
     "tensor([[[   0,    1,    2,  ...,   22,   23,   24],\n"
        "         [  25,   26,   27,  ...,   47,   48,   49],\n"
        "         [  50,   51,   52,  ...,   72,   73,   74],\n"
        "         [  75,   76,   77,  ...,   97,   98,   99]],\n"
        "\n"
        "        [[ 100,  101,  102,  ...,  122,  123,  124],\n"
        "         [ 125,  126,  127,  ...,  147,  148,  149],\n"
        "         [ 150,  151,  152,  ...,  172,  173,  174],\n"
        "         [ 175,  176,  177,  ...,  197,  198,  199]],\n"
        "\n"
        "        [[ 200,  201,  202,  ...,  222,  223,  224],\n"
        "         [ 225,  226,  227,  ...,  247,  248,  249],\n"
        "         [ 250,  251,  252,  ...,  272,  273,  274],\n"
        "         [ 275,  276,  277,  ...,  297,  298,  299]],\n"
        "\n"
        "        ...,\n"
        "\n"
        "        [[ 800,  801,  802,  ...,  822,  823,  824],\n"
        "         [ 825,  826,  827,  ...,  847,  848,  849],\n"
        "         [ 850,  851,  852,  ...,  872,  873,  874],\n"
        "         [ 875,  876,  877,  ...,  897,  898,  899]],\n"
        "\n"
        "        [[ 900,  901,  902,  ...,  922,  923,  924],\n"
        "         [ 925,  926,  927,  ...,  947,  948,  949],\n"
        "         [ 950,  951,  952,  ...,  972,  973,  974],\n"
        "         [ 975,  976,  977,  ...,  997,  998,  999]],\n"
        "\n"
        "        [[1000, 1001, 1002,  ..., 1022, 1023, 1024],\n"
        "         [1025, 1026, 1027,  ..., 1047, 1048, 1049],\n"
        "         [1050, 1051, 1052,  ..., 1072, 1073, 1074],\n"
        "         [1075, 1076, 1077,  ..., 1097, 1098, 1099]]], dtype=int32)"},
    {"int16 lines", TN_I16, 1, {100}, NULL, NULL, -50.0, 1.0, false,
     "tensor([-50, -49, -48, -47, -46, -45, -44, -43, -42, -41, -40, -39, -38, -37,\n"
        "        -36, -35, -34, -33, -32, -31, -30, -29, -28, -27, -26, -25, -24, -23,\n"
        "        -22, -21, -20, -19, -18, -17, -16, -15, -14, -13, -12, -11, -10,  -9,\n"
        "         -8,  -7,  -6,  -5,  -4,  -3,  -2,  -1,   0,   1,   2,   3,   4,   5,\n"
        "          6,   7,   8,   9,  10,  11,  12,  13,  14,  15,  16,  17,  18,  19,\n"
        "         20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32,  33,\n"
        "         34,  35,  36,  37,  38,  39,  40,  41,  42,  43,  44,  45,  46,  47,\n"
        "         48,  49], dtype=int16)"},
    {"summarize 4d f64", TN_F64, 4, {2, 2, 2, 130}, NULL, NULL, 0.0, 0.001, false,
     "tensor([[[[0.0000e+00, 1.0000e-03, 2.0000e-03,  ..., 1.2700e-01,\n"
        "           1.2800e-01, 1.2900e-01],\n"
        "          [1.3000e-01, 1.3100e-01, 1.3200e-01,  ..., 2.5700e-01,\n"
        "           2.5800e-01, 2.5900e-01]],\n"
        "\n"
        "         [[2.6000e-01, 2.6100e-01, 2.6200e-01,  ..., 3.8700e-01,\n"
        "           3.8800e-01, 3.8900e-01],\n"
        "          [3.9000e-01, 3.9100e-01, 3.9200e-01,  ..., 5.1700e-01,\n"
        "           5.1800e-01, 5.1900e-01]]],\n"
        "\n"
        "\n"
        "        [[[5.2000e-01, 5.2100e-01, 5.2200e-01,  ..., 6.4700e-01,\n"
        "           6.4800e-01, 6.4900e-01],\n"
        "          [6.5000e-01, 6.5100e-01, 6.5200e-01,  ..., 7.7700e-01,\n"
        "           7.7800e-01, 7.7900e-01]],\n"
        "\n"
        "         [[7.8000e-01, 7.8100e-01, 7.8200e-01,  ..., 9.0700e-01,\n"
        "           9.0800e-01, 9.0900e-01],\n"
        "          [9.1000e-01, 9.1100e-01, 9.1200e-01,  ..., 1.0370e+00,\n"
        "           1.0380e+00, 1.0390e+00]]]], dtype=float64)"},
    {"summarize few rows", TN_F32, 2, {2, 600}, NULL, NULL, -1.0, 0.01, false,
     "tensor([[-1.0000, -0.9900, -0.9800,  ...,  4.9700,  4.9800,  4.9900],\n"
        "        [ 5.0000,  5.0100,  5.0200,  ..., 10.9700, 10.9800, 10.9900]])"},
    {"4x10 requires_grad", TN_F32, 2, {4, 10}, NULL, NULL, -20.0, 1.5, true,
     "tensor([[-20.0000, -18.5000, -17.0000, -15.5000, -14.0000, -12.5000, -11.0000,\n"
        "          -9.5000,  -8.0000,  -6.5000],\n"
        "        [ -5.0000,  -3.5000,  -2.0000,  -0.5000,   1.0000,   2.5000,   4.0000,\n"
        "           5.5000,   7.0000,   8.5000],\n"
        "        [ 10.0000,  11.5000,  13.0000,  14.5000,  16.0000,  17.5000,  19.0000,\n"
        "          20.5000,  22.0000,  23.5000],\n"
        "        [ 25.0000,  26.5000,  28.0000,  29.5000,  31.0000,  32.5000,  34.0000,\n"
        "          35.5000,  37.0000,  38.5000]], requires_grad=True)"},
    {"4d small", TN_F32, 4, {2, 1, 2, 2}, NULL, NULL, 0.0, 0.25, false,
     "tensor([[[[0.0000, 0.2500],\n"
        "          [0.5000, 0.7500]]],\n"
        "\n"
        "\n"
        "        [[[1.0000, 1.2500],\n"
        "          [1.5000, 1.7500]]]])"},
    {"empty", TN_F32, 1, {0}, NULL, NULL, 0.0, 0.0, false,
     "tensor([])"},
    {"empty 0x3", TN_F32, 2, {0, 3}, NULL, NULL, 0.0, 0.0, false,
     "tensor([], size=(0, 3))"},
    {"empty int64", TN_I64, 1, {0}, NULL, NULL, 0.0, 0.0, false,
     "tensor([], dtype=int64)"},
    {"empty int32", TN_I32, 1, {0}, NULL, NULL, 0.0, 0.0, false,
     "tensor([], dtype=int32)"},
    {"empty 2x0x1 f64", TN_F64, 3, {2, 0, 1}, NULL, NULL, 0.0, 0.0, false,
     "tensor([], size=(2, 0, 1), dtype=float64)"},
    {"empty bool", TN_BOOL, 1, {0}, NULL, NULL, 0.0, 0.0, false,
     "tensor([], dtype=bool)"},
    {"empty requires_grad", TN_F32, 2, {0, 2}, NULL, NULL, 0.0, 0.0, true,
     "tensor([], size=(0, 2), requires_grad=True)"},

};
/* clang-format on */

static tn_tensor *make_case(const print_case *c) {
    int64_t n = 1;
    for (int d = 0; d < c->ndim; d++)
        n *= c->shape[d];
    char *buf = malloc((size_t)(n ? n : 1) * 8);
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++) {
        double v = c->vals ? c->vals[i] : c->start + c->step * (double)i;
        switch (c->dt) {
        case TN_F32:
            ((float *)buf)[i] = (float)v;
            break;
        case TN_F64:
            ((double *)buf)[i] = v;
            break;
        case TN_I16:
            ((int16_t *)buf)[i] = (int16_t)v;
            break;
        case TN_I32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        case TN_I64:
            ((int64_t *)buf)[i] = c->ivals ? c->ivals[i] : (int64_t)v;
            break;
        default:
            ((uint8_t *)buf)[i] = v != 0;
            break;
        }
    }
    tn_tensor *t = tn_tensor_from(buf, c->dt, c->ndim, c->shape, c->requires_grad);
    free(buf);
    assert_non_null(t);
    return t;
}

static void assert_repr(const tn_tensor *t, const char *want, const char *name) {
    char got[8192];
    int len = tn_format(t, got, sizeof got);
    if (len < 0 || strcmp(got, want) != 0)
        fail_msg("case \"%s\":\n got: %s\nwant: %s", name, got, want);
    assert_int_equal(len, (int)strlen(want));
}

static void test_torch_cases(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tn_tensor *t = make_case(&cases[k]);
        assert_repr(t, cases[k].want, cases[k].name);
        tn_release(t);
    }
}

/* a = tensor(1., requires_grad=True); a * 2 */
static void test_grad_fn(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = tn_tensor_from((const float[]){1}, TN_F32, 0, NULL, true);
    assert_repr(tn_mul_scalar(a, 2), "tensor(2., grad_fn=<MulBackward0>)", "mul");
    int64_t shape[] = {3, 4};
    tn_tensor *m = tn_reshape(tn_arange(0, 12, 1, TN_F32), 2, shape);
    assert_non_null(tn_requires_grad_(m, true) == TN_OK ? m : NULL);
    /* torch.arange(12.).reshape(3, 4).requires_grad_() * 2 */
    assert_repr(tn_mul_scalar(m, 2),
                "tensor([[ 0.,  2.,  4.,  6.],\n"
                "        [ 8., 10., 12., 14.],\n"
                "        [16., 18., 20., 22.]], grad_fn=<MulBackward0>)",
                "2d mul");
    tn_scope_end();
}

/* sigmoid(a).sum().backward() at a = [1, 2, 3]: the seeds' a.grad */
static void test_grad_of_sigmoid(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t shape[] = {3};
    tn_tensor *a = tn_tensor_from((const float[]){1, 2, 3}, TN_F32, 1, shape, true);
    assert_int_equal(tn_backward(tn_sum(tn_sigmoid(a)), NULL, false), TN_OK);
    assert_repr(tn_grad(a), "tensor([0.1966, 0.1050, 0.0452])", "sigmoid grad");
    assert_repr(a, "tensor([1., 2., 3.], requires_grad=True)", "leaf");
    tn_scope_end();
}

/* torch.arange(6.).reshape(2, 3).t() */
static void test_non_contiguous(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t shape[] = {2, 3};
    tn_tensor *t = tn_transpose(tn_reshape(tn_arange(0, 6, 1, TN_F32), 2, shape), 0, 1);
    assert_false(tn_is_contiguous(t));
    assert_repr(t, "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])", "transposed");
    tn_scope_end();
}

static void test_format_truncates(void **state) {
    (void)state;
    int64_t shape[] = {2};
    tn_tensor *t = tn_tensor_from((const float[]){1, 2}, TN_F32, 1, shape, true);
    const char *want = "tensor([1., 2.], requires_grad=True)";
    char small[8];
    memset(small, 'x', sizeof small);
    assert_int_equal(tn_format(t, small, sizeof small), (int)strlen(want));
    assert_string_equal(small, "tensor(");
    assert_int_equal(tn_format(t, NULL, 0), (int)strlen(want)); /* snprintf's size query */
    char one[1] = {'x'};
    assert_int_equal(tn_format(t, one, 1), (int)strlen(want));
    assert_int_equal(one[0], '\0');
    tn_release(t);
}

static void test_print_to_stream(void **state) {
    (void)state;
    int64_t shape[] = {2};
    tn_tensor *t = tn_tensor_from((const int64_t[]){1, 2}, TN_I64, 1, shape, false);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(tn_print(t, f), TN_OK);
    rewind(f);
    char got[64] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    assert_int_equal(n, strlen("tensor([1, 2])\n"));
    assert_string_equal(got, "tensor([1, 2])\n");
    tn_release(t);
}

static void test_errors(void **state) {
    (void)state;
    assert_int_equal(tn_print(NULL, stdout), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "argument 't' is NULL");
    char buf[16] = "junk";
    assert_true(tn_format(NULL, buf, sizeof buf) < 0);
    assert_string_equal(buf, "");
    tn_tensor *t = tn_scalar(1, TN_F32);
    assert_int_equal(tn_print(t, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_true(tn_format(t, NULL, 4) < 0);
    tn_release(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_torch_cases),    TT_TEST(test_grad_fn),          TT_TEST(test_grad_of_sigmoid),
        TT_TEST(test_non_contiguous), TT_TEST(test_format_truncates), TT_TEST(test_print_to_stream),
        TT_TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
