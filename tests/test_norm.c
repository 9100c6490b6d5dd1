/* tests/test_norm.c — layer_norm, gelu, silu, dropout, logsumexp, var/std
 * beyond the golden files and gradcheck: grad_fn names, float32 accuracy
 * of layer_norm, results independent of the thread count, dropout's mask
 * (kept fraction, reproducibility, scale, backward), infinities and empty
 * inputs as PyTorch (references from /usr/bin/python3, torch 1.13). */
#include "util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A float32 tensor of n values 3 + 2 sin(0.37 i + k) (an offset mean). */
static tn_tensor *pat32(int ndim, const int64_t *shape, int k, bool rg) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(3 + 2 * sin(0.37 * (double)i + k));
    tn_tensor *t = tt_f32(ndim, shape, v, rg);
    free(v);
    return t;
}

static double *values(const tn_tensor *t) {
    int64_t n = tn_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    assert_int_equal(tn_copy_to_f64(t, v, n), TN_OK);
    return v;
}

static void assert_same_bits(const tn_tensor *a, const tn_tensor *b) {
    assert_int_equal(tn_numel(a), tn_numel(b));
    assert_int_equal(tn_dtype_of(a), tn_dtype_of(b));
    assert_true(tn_is_contiguous(a) && tn_is_contiguous(b));
    size_t bytes = (size_t)tn_numel(a) * (tn_dtype_of(a) == TN_F32 ? 4 : 8);
    assert_memory_equal(tn_data_ptr(a), tn_data_ptr(b), bytes);
}

static void grad_fn_names(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {2, 4}, n4[] = {4};
    tn_tensor *x = pat32(2, s, 0, true), *w = pat32(1, n4, 1, true);
    tt_assert_grad_fn(tn_layer_norm(x, 1, n4, w, NULL, 1e-5), "NativeLayerNormBackward0");
    tt_assert_grad_fn(tn_layer_norm(x, 1, n4, NULL, NULL, 1e-5), "NativeLayerNormBackward0");
    tt_assert_grad_fn(tn_gelu(x, false), "GeluBackward0");
    tt_assert_grad_fn(tn_gelu(x, true), "GeluBackward0");
    tt_assert_grad_fn(tn_silu(x), "SiluBackward0");
    tt_assert_grad_fn(tn_dropout(x, 0.5, true), "NativeDropoutBackward0");
    tt_assert_grad_fn(tn_logsumexp(x, 1, false), "LogsumexpBackward0");
    tt_assert_grad_fn(tn_var_dim(x, 0, 1, true), "VarBackward0");
    tt_assert_grad_fn(tn_std_dim(x, -1, 0, false), "StdBackward0");
    /* no grad: no node */
    tn_tensor *c = pat32(2, s, 0, false);
    tt_assert_grad_fn(tn_layer_norm(c, 2, s, NULL, NULL, 1e-5), NULL);
    tt_assert_grad_fn(tn_gelu(c, false), NULL);
    tn_scope_end();
}

/* float32 layer_norm against the float64 one of the same values: within 1
 * ulp of max(1, |y|) (statistics and the normalisation in double, rounded
 * once). */
static void layer_norm_f32_accuracy(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {64, 8, 128}, ns[] = {8, 128};
    for (int nn = 1; nn <= 2; nn++) {
        tn_tensor *x = pat32(3, s, 0, false), *w = pat32(nn, ns + 2 - nn, 1, false);
        tn_tensor *b = pat32(nn, ns + 2 - nn, 2, false);
        tn_tensor *y = tn_layer_norm(x, nn, ns + 2 - nn, w, b, 1e-5);
        tn_tensor *y64 =
            tn_layer_norm(tn_to(x, TN_F64, TN_DEVICE_CPU), nn, ns + 2 - nn,
                          tn_to(w, TN_F64, TN_DEVICE_CPU), tn_to(b, TN_F64, TN_DEVICE_CPU), 1e-5);
        assert_non_null(y);
        assert_non_null(y64);
        assert_int_equal(tn_dtype_of(y), TN_F32);
        double *a = values(y), *e = values(y64);
        double worst = 0;
        for (int64_t i = 0; i < tn_numel(y); i++)
            worst = fmax(worst, fabs(a[i] - e[i]) / fmax(1.0, fabs(e[i])));
        free(a);
        free(e);
        if (worst > FLT_EPSILON) fail_msg("nn %d: %g ulp", nn, worst / FLT_EPSILON);
    }
    tn_scope_end();
}

/* The transformer-step shape [16*64, 128]: forward and fused backward give
 * the same bits on 1, 2 and 5 threads. */
static void layer_norm_thread_independent(void **state) {
    const int64_t s[] = {1024, 128}, n128[] = {128};
    int saved = tn_get_num_threads();
    tn_tensor *ref[4] = {0};
    const int threads[] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_set_num_threads(threads[k]);
        tn_tensor *x = pat32(2, s, 0, true), *w = pat32(1, n128, 1, true);
        tn_tensor *b = pat32(1, n128, 2, true), *g = pat32(2, s, 3, false);
        tn_tensor *y = tn_layer_norm(x, 1, n128, w, b, 1e-5);
        assert_non_null(y);
        assert_int_equal(tn_backward(y, g, false), TN_OK);
        tn_tensor *got[4] = {y, tn_grad(x), tn_grad(w), tn_grad(b)};
        for (int i = 0; i < 4; i++) {
            assert_non_null(got[i]);
            if (k == 0) {
                ref[i] = tn_detach(got[i]);
                tn_keep(ref[i]);
            } else {
                assert_same_bits(ref[i], got[i]);
            }
        }
        tn_scope_end();
    }
    tn_set_num_threads(saved);
    for (int i = 0; i < 4; i++)
        tn_release(ref[i]);
}

/* The fused backward and the create_graph one (public ops) agree. */
static void layer_norm_fused_matches_graph(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {6, 5, 7}, ns[] = {5, 7};
    double xv[210], wv[35], bv[35];
    for (int i = 0; i < 210; i++)
        xv[i] = sin(0.9 * i) * 3 + 1;
    for (int i = 0; i < 35; i++)
        wv[i] = cos(0.4 * i), bv[i] = sin(0.2 * i);
    tn_tensor *x = tt_f64(3, s, xv, true), *w = tt_f64(2, ns, wv, true);
    tn_tensor *b = tt_f64(2, ns, bv, true);
    tn_tensor *in[3] = {x, w, b}, *fused[3] = {0}, *graph[3] = {0};
    tn_tensor *g = tn_sin(tt_f64(3, s, xv, false));
    tn_tensor *y = tn_layer_norm(x, 2, ns, w, b, 1e-3);
    assert_int_equal(tn_autograd_grad(1, &y, &g, 3, in, fused, true, false), TN_OK);
    assert_int_equal(tn_autograd_grad(1, &y, &g, 3, in, graph, false, true), TN_OK);
    for (int i = 0; i < 3; i++) {
        double *a = values(fused[i]);
        tt_assert_close(graph[i], a, tn_numel(fused[i]), 1e-12);
        free(a);
        assert_false(tn_requires_grad(fused[i]));
        assert_true(tn_requires_grad(graph[i]) == (i < 2)); /* dbias = sum(g): constant */
    }
    tn_scope_end();
}

static void dropout_mask(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {200, 500};
    double *ones = malloc(100000 * sizeof *ones);
    assert_non_null(ones);
    for (int i = 0; i < 100000; i++)
        ones[i] = 1 + (i % 7);
    tn_tensor *x = tt_f64(2, s, ones, true);
    const double ps[] = {0.1, 0.3, 0.5, 0.9};
    for (int k = 0; k < 4; k++) {
        double p = ps[k], scale = 1 / (1 - p);
        tn_manual_seed(42);
        tn_tensor *y = tn_dropout(x, p, true);
        tn_manual_seed(42);
        tn_tensor *y2 = tn_dropout(x, p, true);
        tn_tensor *y3 = tn_dropout(x, p, true); /* the generator moved on */
        assert_non_null(y3);
        assert_same_bits(y, y2);
        assert_memory_not_equal(tn_data_ptr(y), tn_data_ptr(y3), 100000 * sizeof(double));
        double *v = values(y);
        int64_t kept = 0;
        for (int i = 0; i < 100000; i++) {
            if (v[i] != 0) {
                kept++;
                assert_true(v[i] == ones[i] * scale);
            }
        }
        free(v);
        double frac = (double)kept / 100000;
        if (fabs(frac - (1 - p)) > 0.01) fail_msg("p %g: kept %g", p, frac);
        /* backward: g * mask * scale, the kept positions of the forward */
        tn_tensor *gx = NULL;
        tn_tensor *l = tn_sum(y);
        assert_int_equal(tn_autograd_grad(1, &l, NULL, 1, &x, &gx, false, false), TN_OK);
        double *gv = values(gx), *yv = values(y);
        for (int i = 0; i < 100000; i++)
            assert_true(gv[i] == (yv[i] != 0 ? scale : 0));
        free(gv);
        free(yv);
    }
    free(ones);
    tn_scope_end();
}

static void dropout_edges(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {3, 4};
    tn_tensor *x = pat32(2, s, 0, true);
    /* p == 0 or eval: the input itself */
    assert_ptr_equal(tn_dropout(x, 0, true), x);
    assert_ptr_equal(tn_dropout(x, 0.5, false), x);
    assert_ptr_equal(tn_dropout(x, 1, false), x);
    tn_tensor *xi = tn_zeros(2, s, TN_I64);
    assert_ptr_equal(tn_dropout(xi, 0, true), xi); /* PyTorch too: no dtype check */
    /* p == 1: zeros, gradient zeros; NaN stays NaN (x * 0) */
    tn_tensor *y = tn_dropout(x, 1, true), *l = tn_sum(y);
    const double z[12] = {0};
    tt_assert_close(y, z, 12, 0);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    tt_assert_grad(x, z, 12, 0);
    const double nanv[] = {NAN, 1};
    tn_tensor *yn = tn_dropout(tt_f64(1, (const int64_t[]){2}, nanv, false), 1, true);
    double got[2];
    assert_int_equal(tn_copy_to_f64(yn, got, 2), TN_OK);
    assert_true(isnan(got[0]) && got[1] == 0);
    /* empty */
    tn_tensor *e = tn_dropout(tn_zeros(2, (const int64_t[]){0, 3}, TN_F32), 0.5, true);
    assert_non_null(e);
    assert_int_equal(tn_numel(e), 0);
    tn_scope_end();
}

/* PyTorch: logsumexp([[-inf]*3, [inf, 1, 2]], 1) = [-inf, inf]; over an
 * empty dim -inf; integer input float32; var over an empty dim NaN; std's
 * gradient 0 on a constant row; var with correction >= N inf. */
static void stats_edges(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s23[] = {2, 3};
    const double inf[] = {-INFINITY, -INFINITY, -INFINITY, INFINITY, 1, 2};
    const double want_inf[] = {-INFINITY, INFINITY};
    tt_assert_close(tn_logsumexp(tt_f64(2, s23, inf, false), 1, false), want_inf, 2, 0);
    tn_tensor *le = tn_logsumexp(tn_zeros(2, (const int64_t[]){0, 3}, TN_F64), 0, false);
    const double minf3[] = {-INFINITY, -INFINITY, -INFINITY};
    tt_assert_close(le, minf3, 3, 0);
    const int64_t iv[] = {1, 2};
    tn_tensor *li =
        tn_logsumexp(tn_tensor_from(iv, TN_I64, 1, (const int64_t[]){2}, false), 0, true);
    assert_int_equal(tn_dtype_of(li), TN_F32);
    assert_int_equal(tn_ndim(li), 1);
    const double lw[] = {2.3132616875182228};
    tt_assert_close(li, lw, 1, 1e-6);
    tn_tensor *ve = tn_var_dim(tn_zeros(2, (const int64_t[]){0, 3}, TN_F64), 0, 1, false);
    double vv[3];
    assert_int_equal(tn_copy_to_f64(ve, vv, 3), TN_OK);
    assert_true(isnan(vv[0]) && isnan(vv[1]) && isnan(vv[2]));
    const double rows[] = {1, 1, 1, 1, 2, 4};
    tn_tensor *x = tt_f64(2, s23, rows, true);
    assert_int_equal(tn_backward(tn_sum(tn_std_dim(x, 1, 1, false)), NULL, false), TN_OK);
    const double gstd[] = {0, 0, 0, -0.43643578047198484, -0.10910894511799618, 0.5455447255899809};
    tt_assert_grad(x, gstd, 6, 1e-12);
    const double two[] = {1, 2};
    tn_tensor *x2 = tt_f64(2, (const int64_t[]){1, 2}, two, true);
    tn_tensor *v2 = tn_var_dim(x2, 1, 2, false);
    const double vinf[] = {INFINITY}, ginf[] = {-INFINITY, INFINITY};
    tt_assert_close(v2, vinf, 1, 0);
    assert_int_equal(tn_backward(tn_sum(v2), NULL, false), TN_OK);
    tt_assert_grad(x2, ginf, 2, 0);
    tn_scope_end();
}

/* layer_norm of an input with no rows: an empty output; the weight's and
 * bias's gradients are zeros (PyTorch). */
static void layer_norm_empty(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    const int64_t s[] = {0, 4}, n4[] = {4};
    tn_tensor *x = tn_zeros(2, s, TN_F32), *w = pat32(1, n4, 0, true), *b = pat32(1, n4, 1, true);
    tn_tensor *y = tn_layer_norm(x, 1, n4, w, b, 1e-5);
    assert_non_null(y);
    assert_int_equal(tn_numel(y), 0);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    const double z[4] = {0};
    tt_assert_grad(w, z, 4, 0);
    tt_assert_grad(b, z, 4, 0);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(grad_fn_names),
        TT_TEST(layer_norm_f32_accuracy),
        TT_TEST(layer_norm_thread_independent),
        TT_TEST(layer_norm_fused_matches_graph),
        TT_TEST(layer_norm_empty),
        TT_TEST(dropout_mask),
        TT_TEST(dropout_edges),
        TT_TEST(stats_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
