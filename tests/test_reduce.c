/* tests/test_reduce.c — sum, mean, max, min, argmax (whole and per dim):
 * values, dtypes, shapes, gradients and errors. Expected values come from
 * PyTorch 1.13 (/usr/bin/python3) on the same inputs. */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int64_t S234[] = {2, 3, 4};
static const int64_t S23[] = {2, 3};

/* x[i] = ((7 i) % 11) - 5 + 0.25 (i % 3), shape (2, 3, 4): exact in float32 */
static tn_tensor *x234(tn_dtype dt, bool rg) {
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = ((i * 7) % 11) - 5 + 0.25 * (i % 3);
    tn_tensor *d = tt_f64(3, S234, v, false);
    tn_tensor *t = dt == TN_F64 ? d : tn_to(d, dt, TN_DEVICE_KEEP);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

/* [[1, 3, 3], [2, 0, 3]] float32: ties for the max */
static tn_tensor *ties(bool rg) { return tt_f32(2, S23, (const float[]){1, 3, 3, 2, 0, 3}, rg); }

static void assert_shape(const tn_tensor *t, int nd, const int64_t *shape) {
    assert_non_null(t);
    assert_int_equal(tn_ndim(t), nd);
    for (int i = 0; i < nd; i++)
        assert_int_equal(tn_shape(t)[i], shape[i]);
}

static void assert_i64(const tn_tensor *t, const int64_t *want, int64_t n) {
    assert_non_null(t);
    assert_int_equal(tn_dtype_of(t), TN_I64);
    double w[64];
    for (int64_t i = 0; i < n; i++)
        w[i] = (double)want[i];
    tt_assert_close(t, w, n, 0);
}

/* ---- values ------------------------------------------------------------------- */

static void test_whole(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    for (int k = 0; k < 2; k++) {
        tn_tensor *x = x234(k ? TN_F32 : TN_F64, false);
        tn_tensor *s = tn_sum(x), *m = tn_mean(x), *mx = tn_max(x), *mn = tn_min(x);
        assert_shape(s, 0, NULL);
        assert_int_equal(tn_dtype_of(s), tn_dtype_of(x));
        tt_assert_close(s, (const double[]){3.0}, 1, 1e-6);
        tt_assert_close(m, (const double[]){0.125}, 1, 1e-6);
        tt_assert_close(mx, (const double[]){5.5}, 1, 0);
        tt_assert_close(mn, (const double[]){-5.0}, 1, 0);
        assert_i64(tn_argmax(x), (const int64_t[]){14}, 1);
        /* transposed (non-contiguous): argmax indexes the logical order */
        tn_tensor *xt = tn_transpose(x, 0, 2);
        assert_false(tn_is_contiguous(xt));
        assert_i64(tn_argmax(xt), (const int64_t[]){13}, 1);
        tt_assert_close(tn_sum(xt), (const double[]){3.0}, 1, 1e-6);
        tt_assert_close(tn_max(xt), (const double[]){5.5}, 1, 0);
        assert_shape(tn_argmax(xt), 0, NULL);
    }
    tn_scope_end();
}

static const double SUM0[] = {-3.0, 0.5, 4.0, 6.0, -1.5, 2.0, 4.0, -3.5, 0.0, 2.0, -5.5, -2.0};
static const double SUM1[] = {-7.25, 2.75, 1.75, 0.75, 2.75, 1.75, 0.75, -0.25};
static const double SUM2[] = {0.75, 3.0, -5.75, 6.75, -2.0, 0.25};
static const double MEAN1[] = {-2.4166666666666665,
                               0.9166666666666666,
                               0.5833333333333334,
                               0.25,
                               0.9166666666666666,
                               0.5833333333333334,
                               0.25,
                               -0.08333333333333333};
static const double MAX0[] = {2.0, 2.25, 5.5, 5.0, 1.25, 4.5, 4.0, 0.25, 3.5, 3.0, -0.75, 2.5};
static const int64_t AMAX0[] = {1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1};
static const double MAX1[] = {1.25, 3.0, 4.0, 5.0, 3.5, 4.5, 5.5, 2.5};
static const int64_t AMAX1[] = {1, 2, 1, 0, 2, 1, 0, 2};
static const double MAX2[] = {5.0, 4.0, 3.0, 5.5, 4.5, 3.5};
static const int64_t AMAX2[] = {3, 2, 1, 2, 1, 0};

static void test_dims(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    for (int k = 0; k < 2; k++) {
        tn_tensor *x = x234(k ? TN_F32 : TN_F64, false);
        tn_tensor *s0 = tn_sum_dim(x, 0, false);
        assert_shape(s0, 2, (const int64_t[]){3, 4});
        tt_assert_close(s0, SUM0, 12, 1e-6);
        tt_assert_close(tn_sum_dim(x, -3, false), SUM0, 12, 1e-6);
        tn_tensor *s1 = tn_sum_dim(x, 1, true);
        assert_shape(s1, 3, (const int64_t[]){2, 1, 4});
        tt_assert_close(s1, SUM1, 8, 1e-6);
        tt_assert_close(tn_sum_dim(x, -1, false), SUM2, 6, 1e-6);
        tn_tensor *m1 = tn_mean_dim(x, 1, false);
        assert_int_equal(tn_dtype_of(m1), tn_dtype_of(x));
        tt_assert_close(m1, MEAN1, 8, 1e-6);
        tt_assert_close(tn_mean_dim(x, 2, true),
                        (const double[]){0.1875, 0.75, -1.4375, 1.6875, -0.5, 0.0625}, 6, 1e-7);
        tt_assert_close(tn_max_dim(x, 0, false), MAX0, 12, 0);
        assert_i64(tn_argmax_dim(x, 0, false), AMAX0, 12);
        tn_tensor *mx1 = tn_max_dim(x, 1, true);
        assert_shape(mx1, 3, (const int64_t[]){2, 1, 4});
        tt_assert_close(mx1, MAX1, 8, 0);
        tn_tensor *am1 = tn_argmax_dim(x, 1, true);
        assert_shape(am1, 3, (const int64_t[]){2, 1, 4});
        assert_i64(am1, AMAX1, 8);
        tt_assert_close(tn_max_dim(x, -1, false), MAX2, 6, 0);
        assert_i64(tn_argmax_dim(x, -1, false), AMAX2, 6);
    }
    tn_scope_end();
}

/* x transposed to (4, 3, 2): every dim is strided */
static void test_transposed(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *xt = tn_transpose(x234(TN_F32, false), 0, 2);
    tt_assert_close(tn_sum_dim(xt, 0, false), (const double[]){0.75, 6.75, 3.0, -2.0, -5.75, 0.25},
                    6, 1e-6);
    tt_assert_close(tn_sum_dim(xt, 1, false),
                    (const double[]){-7.25, 2.75, 2.75, 1.75, 1.75, 0.75, 0.75, -0.25}, 8, 1e-6);
    tt_assert_close(
        tn_mean_dim(xt, 2, false),
        (const double[]){-1.5, -0.75, 0.0, 0.25, 1.0, 1.0, 2.0, 2.0, -2.75, 3.0, -1.75, -1.0}, 12,
        1e-6);
    tt_assert_close(tn_max_dim(xt, 0, false), (const double[]){5.0, 5.5, 4.0, 4.5, 3.0, 3.5}, 6, 0);
    assert_i64(tn_argmax_dim(xt, 0, false), (const int64_t[]){3, 2, 2, 1, 1, 0}, 6);
    assert_i64(tn_argmax_dim(xt, 1, false), (const int64_t[]){1, 2, 2, 1, 1, 0, 0, 2}, 8);
    assert_i64(tn_argmax_dim(xt, 2, false), (const int64_t[]){1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1},
               12);
    tn_scope_end();
}

static void test_int_dtypes(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a =
        tn_tensor_from((const int32_t[]){1, 2, 3}, TN_I32, 1, (const int64_t[]){3}, false);
    tn_tensor *s = tn_sum(a);
    assert_int_equal(tn_dtype_of(s), TN_I64);
    tt_assert_close(s, (const double[]){6}, 1, 0);
    assert_int_equal(tn_dtype_of(tn_max(a)), TN_I32);
    tt_assert_close(tn_max(a), (const double[]){3}, 1, 0);
    tt_assert_close(tn_min(a), (const double[]){1}, 1, 0);
    assert_i64(tn_argmax(a), (const int64_t[]){2}, 1);
    assert_int_equal(tn_dtype_of(tn_sum_dim(a, 0, true)), TN_I64);

    tn_tensor *b = tn_tensor_from((const uint8_t[]){1, 0, 1, 1, 1, 0}, TN_BOOL, 2, S23, false);
    assert_int_equal(tn_dtype_of(tn_sum(b)), TN_I64);
    tt_assert_close(tn_sum(b), (const double[]){4}, 1, 0);
    tt_assert_close(tn_sum_dim(b, 0, false), (const double[]){2, 1, 1}, 3, 0);
    tt_assert_close(tn_sum_dim(b, 1, false), (const double[]){2, 2}, 2, 0);
    assert_int_equal(tn_dtype_of(tn_max(b)), TN_BOOL);
    tt_assert_close(tn_max_dim(b, 1, false), (const double[]){1, 1}, 2, 0);

    tn_tensor *c = tn_tensor_from((const int16_t[]){3, -7, 2, 5, 5, -1}, TN_I16, 2, S23, false);
    tn_tensor *cs = tn_sum_dim(c, 0, false);
    assert_int_equal(tn_dtype_of(cs), TN_I64);
    tt_assert_close(cs, (const double[]){8, -2, 1}, 3, 0);
    tn_tensor *cm = tn_max_dim(c, 1, false);
    assert_int_equal(tn_dtype_of(cm), TN_I16);
    tt_assert_close(cm, (const double[]){3, 5}, 2, 0);
    tt_assert_close(tn_min(c), (const double[]){-7}, 1, 0);
    assert_i64(tn_argmax(c), (const int64_t[]){3}, 1);
    assert_i64(tn_argmax_dim(c, 0, false), (const int64_t[]){1, 1, 0}, 3);
    tn_scope_end();
}

/* 0-dim inputs accept dim 0 / -1; keepdim keeps 0 dims. Empty inputs. NaN. */
static void test_edge_cases(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *s = tn_scalar(5, TN_F32);
    assert_shape(tn_sum_dim(s, 0, false), 0, NULL);
    assert_shape(tn_sum_dim(s, -1, true), 0, NULL);
    tt_assert_close(tn_mean_dim(s, 0, false), (const double[]){5}, 1, 0);
    tt_assert_close(tn_max_dim(s, 0, true), (const double[]){5}, 1, 0);
    assert_i64(tn_argmax_dim(s, -1, false), (const int64_t[]){0}, 1);
    assert_i64(tn_argmax(s), (const int64_t[]){0}, 1);

    tn_tensor *e = tn_zeros(2, (const int64_t[]){2, 0}, TN_F32);
    tt_assert_close(tn_sum(e), (const double[]){0}, 1, 0);
    tt_assert_close(tn_mean(e), (const double[]){NAN}, 1, 0);
    tt_assert_close(tn_sum_dim(e, 1, false), (const double[]){0, 0}, 2, 0);
    tt_assert_close(tn_mean_dim(e, 1, false), (const double[]){NAN, NAN}, 2, 0);
    assert_shape(tn_max_dim(e, 0, false), 1, (const int64_t[]){0});

    /* NaN wins and the first NaN is the index */
    tn_tensor *n =
        tt_f32(2, (const int64_t[]){2, 3}, (const float[]){1, NAN, 3, NAN, 7, NAN}, false);
    tt_assert_close(tn_max(n), (const double[]){NAN}, 1, 0);
    tt_assert_close(tn_min(n), (const double[]){NAN}, 1, 0);
    assert_i64(tn_argmax(n), (const int64_t[]){1}, 1);
    tt_assert_close(tn_max_dim(n, 1, false), (const double[]){NAN, NAN}, 2, 0);
    assert_i64(tn_argmax_dim(n, 1, false), (const int64_t[]){1, 0}, 2);
    assert_i64(tn_argmax_dim(n, 0, false), (const int64_t[]){1, 0, 1}, 3);
    tn_scope_end();
}

/* ---- large inputs: every kernel path, accuracy, thread-count independence ---------- */

static double ref_sum(const float *v, int64_t n, int64_t stride) {
    long double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i * stride];
    return (double)s;
}

static void read_all(tn_tensor *t, double *buf, int64_t n) {
    assert_non_null(t);
    assert_int_equal(tn_copy_to_f64(t, buf, n), TN_OK);
}

/* (R, C) float32 with values that make float32 accumulation visibly wrong */
static float *big_values(int64_t n) {
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    uint64_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (float)((s >> 40) % 100000) * 0.001f + 0.1f;
    }
    return v;
}

static void test_large(void **state) {
    enum { R = 3000, C = 97 }; /* C odd: tails of lanes and column blocks */
    const int64_t shape[] = {R, C};
    float *v = big_values((int64_t)R * C);
    enum { M = 2 * C, X = 2 * C + R, TOTAL = 4 * C + R + 2 }; /* layout of the results */
    double *a = malloc(sizeof(double) * TOTAL), *b = malloc(sizeof(double) * TOTAL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f32(2, shape, v, false);
    tn_tensor *xt = tn_transpose(x, 0, 1); /* (C, R) strided */
    int saved_threads = tn_get_num_threads();
    for (int threads = 1; threads <= 3; threads++) {
        tn_set_num_threads(threads);
        double *o = threads == 1 ? a : b;
        double whole;
        /* whole sum, accurate to float32 rounding of the exact sum */
        read_all(tn_sum(x), &whole, 1);
        assert_true(fabs(whole - ref_sum(v, (int64_t)R * C, 1)) <= 1e-6 * fabs(whole));
        /* dim 0: column mode; dim 1: slice mode; transposed: the other way round */
        read_all(tn_sum_dim(x, 0, false), o, C);
        for (int j = 0; j < C; j++)
            assert_true(fabs(o[j] - ref_sum(v + j, R, C)) <= 1e-6 * fabs(o[j]));
        read_all(tn_sum_dim(xt, 1, false), o + C, C);
        read_all(tn_mean_dim(x, 1, false), o + M, R);
        for (int i = 0; i < R; i++)
            assert_true(fabs(o[M + i] - ref_sum(v + i * C, C, 1) / C) <= 1e-6 * o[M + i]);
        read_all(tn_max_dim(xt, 1, false), o + X, C);
        read_all(tn_argmax_dim(x, 0, false), o + X + C, C);
        read_all(tn_argmax(xt), o + X + 2 * C, 1);
        o[X + 2 * C + 1] = whole;
        if (threads > 1) /* bit-identical whatever the thread count */
            assert_memory_equal(a, b, sizeof(double) * TOTAL);
    }
    /* few columns (strided slice mode) agree with column mode */
    tn_tensor *x5 = tn_narrow(x, 1, 0, 5);
    double s5[5], a5[5];
    read_all(tn_sum_dim(x5, 0, false), s5, 5);
    read_all(tn_argmax_dim(x5, 0, true), a5, 5);
    for (int j = 0; j < 5; j++) {
        assert_true(fabs(s5[j] - ref_sum(v + j, R, C)) <= 1e-6 * s5[j]);
        assert_true(a5[j] == a[X + C + j]);
    }
    /* strided slices: (10, 500, 3) seen as (3, 500, 10), reduced over 500 */
    tn_tensor *flat = tn_narrow(tn_flatten(x, 0, 1), 0, 0, 15000);
    tn_tensor *yp =
        tn_permute(tn_view(flat, 3, (const int64_t[]){10, 500, 3}), 3, (const int[]){2, 1, 0});
    assert_non_null(yp);
    double ys[30], ym[30], ya[30];
    read_all(tn_sum_dim(yp, 1, false), ys, 30);
    read_all(tn_max_dim(yp, 1, false), ym, 30);
    read_all(tn_argmax_dim(yp, 1, false), ya, 30);
    for (int c3 = 0; c3 < 3; c3++)
        for (int a10 = 0; a10 < 10; a10++) {
            const float *s = v + a10 * 1500 + c3;
            int64_t bi = 0;
            for (int64_t r = 1; r < 500; r++)
                if (s[r * 3] > s[bi * 3]) bi = r;
            int o = c3 * 10 + a10;
            assert_true(fabs(ys[o] - ref_sum(s, 500, 3)) <= 1e-6 * ys[o]);
            assert_true(ym[o] == s[bi * 3] && ya[o] == (double)bi);
        }
    /* the column-mode sum equals the strided slice-mode sum of the transpose */
    for (int j = 0; j < C; j++)
        assert_true(fabs(a[j] - a[C + j]) <= 1e-6 * fabs(a[j]));
    /* max/argmax against a scan */
    for (int j = 0; j < C; j++) {
        int64_t bi = 0;
        for (int64_t r = 1; r < R; r++)
            if (v[r * C + j] > v[bi * C + j]) bi = r;
        assert_true(a[X + j] == v[bi * C + j]);
        assert_true(a[X + C + j] == (double)bi);
    }
    tn_set_num_threads(saved_threads);
    tn_scope_end();
    free(v);
    free(a);
    free(b);
}

/* One long reduction split into blocks on several threads. */
static void test_long_slice(void **state) {
    enum { N = 1 << 20 };
    float *v = big_values(N);
    v[777777] = 1e6f; /* the max */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f32(1, (const int64_t[]){N}, v, false);
    /* (N / 5, 5) summed over rows: few columns, blocks of rows in parallel */
    tn_tensor *x5 = tn_view(tn_narrow(x, 0, 0, N / 5 * 5), 2, (const int64_t[]){N / 5, 5});
    double r1[9], r2[9];
    int saved_threads = tn_get_num_threads();
    for (int threads = 1; threads <= 2; threads++) {
        tn_set_num_threads(threads);
        double *o = threads == 1 ? r1 : r2;
        read_all(tn_sum(x), o, 1);
        read_all(tn_max(x), o + 1, 1);
        read_all(tn_argmax(x), o + 2, 1);
        read_all(tn_sum_dim(x, 0, false), o + 3, 1);
        read_all(tn_sum_dim(x5, 0, false), o + 4, 5);
    }
    tn_set_num_threads(saved_threads);
    assert_memory_equal(r1, r2, sizeof r1);
    assert_true(fabs(r1[0] - ref_sum(v, N, 1)) <= 1e-7 * r1[0]);
    assert_true(r1[1] == 1e6 && r1[2] == 777777 && r1[3] == r1[0]);
    for (int j = 0; j < 5; j++)
        assert_true(fabs(r1[4 + j] - ref_sum(v + j, N / 5, 5)) <= 1e-6 * r1[4 + j]);
    tn_scope_end();
    free(v);
}

/* Long slices take the vectorised path: ties and NaN still give the first. */
static void test_long_ties_nan(void **state) {
    enum { N = 10000 };
    float *v = big_values(N);
    v[300] = v[9000] = 1e5f;  /* tied maxima */
    v[400] = v[8000] = -1.0f; /* tied minima */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f32(1, (const int64_t[]){N}, v, false);
    assert_i64(tn_argmax(x), (const int64_t[]){300}, 1);
    assert_i64(tn_argmax_dim(x, 0, false), (const int64_t[]){300}, 1);
    tt_assert_close(tn_max(x), (const double[]){1e5}, 1, 0);
    tt_assert_close(tn_min(x), (const double[]){-1}, 1, 0);
    v[5000] = v[7000] = NAN;
    x = tt_f32(1, (const int64_t[]){N}, v, false);
    tt_assert_close(tn_max(x), (const double[]){NAN}, 1, 0);
    tt_assert_close(tn_min(x), (const double[]){NAN}, 1, 0);
    assert_i64(tn_argmax(x), (const int64_t[]){5000}, 1);
    tt_assert_close(tn_max_dim(x, 0, false), (const double[]){NAN}, 1, 0);
    tn_scope_end();
    free(v);
}

/* ---- gradients ------------------------------------------------------------------ */

static void check_grad(tn_tensor *x, tn_tensor *y, const char *grad_fn, const double *want) {
    assert_non_null(y);
    assert_string_equal(tn_grad_fn_name(y), grad_fn);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(x, want, 6, 1e-6);
    assert_int_equal(tn_set_grad(x, NULL), TN_OK);
}

static tn_tensor *weights(int nd, const int64_t *shape, const float *w) {
    return tt_f32(nd, shape, w, false);
}

static void test_grads(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = ties(true);
    const int64_t s2[] = {2}, s13[] = {1, 3};
    tn_tensor *w2 = weights(1, s2, (const float[]){1, 2});
    tn_tensor *w13 = weights(2, s13, (const float[]){1, 2, 3});

    tn_tensor *y = tn_sum(x);
    check_grad(x, y, "SumBackward0", (const double[]){1, 1, 1, 1, 1, 1});
    y = tn_sum_dim(x, 1, false);
    assert_string_equal(tn_grad_fn_name(y), "SumBackward1");
    check_grad(x, tn_sum(tn_mul(y, w2)), "SumBackward0", (const double[]){1, 1, 1, 2, 2, 2});
    y = tn_sum_dim(x, 0, true);
    check_grad(x, tn_sum(tn_mul(y, w13)), "SumBackward0", (const double[]){1, 2, 3, 1, 2, 3});
    check_grad(x, tn_mean(x), "MeanBackward0",
               (const double[]){1 / 6., 1 / 6., 1 / 6., 1 / 6., 1 / 6., 1 / 6.});
    y = tn_mean_dim(x, -1, false);
    assert_string_equal(tn_grad_fn_name(y), "MeanBackward1");
    check_grad(x, tn_sum(tn_mul(y, w2)), "SumBackward0",
               (const double[]){1 / 3., 1 / 3., 1 / 3., 2 / 3., 2 / 3., 2 / 3.});
    /* whole max/min: shared evenly by the ties */
    check_grad(x, tn_mul_scalar(tn_max(x), 6), "MulBackward0", (const double[]){0, 2, 2, 0, 0, 2});
    assert_string_equal(tn_grad_fn_name(tn_max(x)), "MaxBackward1");
    check_grad(x, tn_mul_scalar(tn_min(x), 6), "MulBackward0", (const double[]){0, 0, 0, 0, 6, 0});
    assert_string_equal(tn_grad_fn_name(tn_min(x)), "MinBackward1");
    /* max along a dim: the first maximum only */
    y = tn_max_dim(x, 1, false);
    assert_string_equal(tn_grad_fn_name(y), "MaxBackward0");
    check_grad(x, tn_sum(tn_mul(y, w2)), "SumBackward0", (const double[]){0, 1, 0, 0, 0, 2});
    y = tn_max_dim(x, 0, true);
    check_grad(x, tn_sum(tn_mul(y, w13)), "SumBackward0", (const double[]){0, 2, 3, 1, 0, 0});
    /* through a transposed view */
    y = tn_sum_dim(tn_transpose(x, 0, 1), 1, false);
    check_grad(x, tn_sum(tn_mul(y, weights(1, (const int64_t[]){3}, (const float[]){1, 2, 3}))),
               "SumBackward0", (const double[]){1, 2, 3, 1, 2, 3});
    /* argmax never requires grad */
    assert_false(tn_requires_grad(tn_argmax(x)));
    assert_false(tn_requires_grad(tn_argmax_dim(x, 1, false)));
    tn_scope_end();
}

/* NaN max: the gradient is shared by the NaNs (2.11 and 1.13 agree). */
static void test_grad_nan(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tt_f32(1, (const int64_t[]){3}, (const float[]){1, NAN, NAN}, true);
    assert_int_equal(tn_backward(tn_max(x), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){0, 0.5, 0.5}, 3, 1e-7);
    tn_scope_end();
}

/* create_graph: double backward through sum_dim and max_dim. */
static void test_double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = ties(true);
    tn_tensor *w2 = weights(1, (const int64_t[]){2}, (const float[]){1, 2});
    tn_tensor *y = tn_sum(tn_mul(tn_sum_dim(tn_mul(x, x), 1, false), w2));
    tn_tensor *gx = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &gx, true, true), TN_OK);
    tt_assert_close(gx, (const double[]){2, 6, 6, 8, 0, 12}, 6, 1e-6);
    assert_int_equal(tn_backward(tn_sum(gx), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){2, 2, 2, 4, 4, 4}, 6, 1e-6);
    tn_release(gx);
    assert_int_equal(tn_set_grad(x, NULL), TN_OK);

    y = tn_sum(tn_max_dim(tn_mul(x, x), 1, false));
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &x, &gx, true, true), TN_OK);
    tt_assert_close(gx, (const double[]){0, 6, 0, 0, 0, 6}, 6, 1e-6);
    assert_int_equal(tn_backward(tn_sum(gx), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){0, 2, 0, 0, 0, 2}, 6, 1e-6);
    tn_release(gx);
    tn_scope_end();
}

/* sum/mean save nothing: a second backward without retain_graph succeeds
 * and accumulates; max saves tensors, so it fails (PyTorch's behaviour). */
static void test_second_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = ties(true);
    tn_tensor *y = tn_sum(tn_mean_dim(tn_sum_dim(x, 0, true), 1, false));
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){2 / 3., 2 / 3., 2 / 3., 2 / 3., 2 / 3., 2 / 3.}, 6, 1e-6);
    y = tn_max(x);
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "Trying to backward through the graph a second time");
    y = tn_sum(tn_max_dim(x, 0, false));
    assert_int_equal(tn_backward(y, NULL, false), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_ERR_AUTOGRAD);
    tn_scope_end();
}

/* ---- errors ---------------------------------------------------------------------- */

static void test_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = ties(true);
    assert_null(tn_sum(NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "is NULL");
    assert_null(tn_mean(NULL));
    assert_null(tn_max(NULL));
    assert_null(tn_min(NULL));
    assert_null(tn_argmax(NULL));
    assert_null(tn_sum_dim(NULL, 0, false));
    assert_null(tn_mean_dim(NULL, 0, false));
    assert_null(tn_max_dim(NULL, 0, false));
    assert_null(tn_argmax_dim(NULL, 0, false));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "is NULL");

    assert_null(tn_sum_dim(x, 2, false));
    tt_assert_error(TN_ERR_INDEX,
                    "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    assert_null(tn_max_dim(x, -3, true));
    tt_assert_error(TN_ERR_INDEX, "but got -3)");
    assert_null(tn_argmax_dim(tn_scalar(1, TN_F32), 1, false));
    tt_assert_error(TN_ERR_INDEX,
                    "Dimension out of range (expected to be in range of [-1, 0], but got 1)");

    tn_tensor *i = tn_tensor_from((const int64_t[]){1, 2}, TN_I64, 1, (const int64_t[]){2}, false);
    assert_null(tn_mean(i));
    tt_assert_error(TN_ERR_DTYPE, "mean(): could not infer output dtype. Input dtype must be "
                                  "either a floating point or complex dtype. Got: int64");
    assert_null(tn_mean_dim(tn_ones(1, (const int64_t[]){2}, TN_BOOL), 0, false));
    tt_assert_error(TN_ERR_DTYPE, "Got: bool");
    assert_null(tn_argmax(tn_ones(1, (const int64_t[]){2}, TN_BOOL)));
    tt_assert_error(TN_ERR_DTYPE, "\"argmax_cpu\" not implemented for 'bool'");

    tn_tensor *e = tn_zeros(1, (const int64_t[]){0}, TN_F32);
    assert_null(tn_max(e));
    tt_assert_error(TN_ERR_SHAPE, "max(): Expected reduction dim to be specified for "
                                  "input.numel() == 0. Specify the reduction dim with the 'dim' "
                                  "argument.");
    assert_null(tn_min(e));
    tt_assert_error(TN_ERR_SHAPE, "min(): Expected reduction dim to be specified");
    assert_null(tn_argmax(e));
    tt_assert_error(TN_ERR_INDEX,
                    "argmax(): Expected reduction dim to be specified for input.numel() == 0.");
    tn_tensor *e2 = tn_zeros(2, (const int64_t[]){2, 0}, TN_F32);
    assert_null(tn_max_dim(e2, -1, false));
    tt_assert_error(TN_ERR_INDEX, "max(): Expected reduction dim 1 to have non-zero size.");
    assert_null(tn_argmax_dim(e2, 1, true));
    tt_assert_error(TN_ERR_INDEX, "argmax(): Expected reduction dim 1 to have non-zero size.");
    tn_scope_end();
}

/* Errors leave no tensor behind, outside any scope too. */
static void test_error_no_leak(void **state) {
    tn_tensor *x = ties(true);
    assert_null(tn_sum_dim(x, 5, true));
    assert_null(tn_max_dim(x, 7, false));
    tn_tensor *y = tn_sum_dim(x, 0, false);
    assert_non_null(y);
    tn_release(y);
    tn_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_whole),           TT_TEST(test_dims),
        TT_TEST(test_transposed),      TT_TEST(test_int_dtypes),
        TT_TEST(test_edge_cases),      TT_TEST(test_large),
        TT_TEST(test_long_slice),      TT_TEST(test_long_ties_nan),
        TT_TEST(test_grads),           TT_TEST(test_grad_nan),
        TT_TEST(test_double_backward), TT_TEST(test_second_backward),
        TT_TEST(test_errors),          TT_TEST(test_error_no_leak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
