/* tests/test_blas.c — the CBLAS dispatch of float matmul (engine/cpu/blas.c).
 *
 * Every product runs on three paths — tenet's kernel (TN__BLAS_OFF), every
 * product CBLAS can express (TN__BLAS_ALL) and the default size policy
 * (TN__BLAS_AUTO) — and is compared with a float64 reference computed here:
 * plain, transposed, sliced with non-unit strides on both axes (CBLAS
 * cannot express those: they fall back), broadcast rows (stride 0: same),
 * batched and broadcast batches, vector operands, accumulation into C (a
 * linear layer's bias), and gradients. Then tn__gemm_blas directly: what it
 * takes and what it declines. Then several user threads at once. Without
 * CBLAS in the build every path is tenet's kernel and the same checks hold.
 */
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static const tn__blas_mode modes[] = {TN__BLAS_OFF, TN__BLAS_ALL, TN__BLAS_AUTO};
#define NMODES 3

/* Relative to the sum of |a||b| over the dot product: rounding grows with
 * the square root of k typically (k <= 400 here), with room for kernels that
 * sum in other orders; a wrong element or a missed accumulate is off by O(1). */
static double tol_of(tn_dtype dt) { return dt == TN_F32 ? 1e-5 : 1e-13; }

/* got vs want (n values), with scale[i] = sum |a||b| of element i. */
static void assert_near(const double *got, const double *want, const double *scale, int64_t n,
                        tn_dtype dt, const char *what, tn__blas_mode mode) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol_of(dt) * (scale[i] + 1e-30)))
            fail_msg("%s (mode %d, %s): element %lld: got %.17g, want %.17g", what, (int)mode,
                     dt == TN_F32 ? "float32" : "float64", (long long)i, got[i], want[i]);
}

static double *values(const tn_tensor *t) {
    int64_t n = tn_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    assert_int_equal(tn_copy_to_f64(t, v, n), TN_OK);
    return v;
}

/* ---- products against a float64 reference ------------------------------------------- */

/* The reference of matmul(a, b) for a of shape (ba0, ba1, m, k) and b of
 * shape (bb0, bb1, k, n), batch dims broadcast (size 1 against any), given
 * as logical row-major values. out (and scale) are (B0, B1, m, n). */
static void ref_matmul(const double *a, const int64_t *ba, const double *b, const int64_t *bb,
                       int64_t m, int64_t k, int64_t n, double *out, double *scale) {
    int64_t B0 = ba[0] > bb[0] ? ba[0] : bb[0], B1 = ba[1] > bb[1] ? ba[1] : bb[1];
    for (int64_t x = 0; x < B0; x++)
        for (int64_t y = 0; y < B1; y++) {
            const double *A = a + ((ba[0] > 1 ? x : 0) * ba[1] + (ba[1] > 1 ? y : 0)) * m * k;
            const double *B = b + ((bb[0] > 1 ? x : 0) * bb[1] + (bb[1] > 1 ? y : 0)) * k * n;
            double *C = out + (x * B1 + y) * m * n, *Sc = scale + (x * B1 + y) * m * n;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0, s_abs = 0;
                    for (int64_t p = 0; p < k; p++) {
                        s += A[i * k + p] * B[p * n + j];
                        s_abs += fabs(A[i * k + p] * B[p * n + j]);
                    }
                    C[i * n + j] = s;
                    Sc[i * n + j] = s_abs;
                }
        }
}

typedef enum { PLAIN, TRANSPOSED, STRIDED, BROADCAST_ROWS } form;

/* A (rows x cols) operand in the given form: the values are those of a
 * fresh randn tensor `base` of shape (batch..., rows, cols), exposed as a
 * transpose of a stored (cols x rows), a slice of every other element of a
 * (rows x 2cols) (strides 2cols and 2), or a single row expanded (stride 0). */
static tn_tensor *operand(int nb, const int64_t *batch, int64_t rows, int64_t cols, form f,
                          tn_dtype dt) {
    int64_t sh[4];
    memcpy(sh, batch, (size_t)nb * sizeof *sh);
    switch (f) {
    case PLAIN:
        sh[nb] = rows, sh[nb + 1] = cols;
        return tn_randn(nb + 2, sh, dt);
    case TRANSPOSED:
        sh[nb] = cols, sh[nb + 1] = rows;
        return tn_transpose(tn_randn(nb + 2, sh, dt), nb, nb + 1);
    case STRIDED: {
        sh[nb] = rows, sh[nb + 1] = cols, sh[nb + 2] = 2;
        return tn_select(tn_randn(nb + 3, sh, dt), nb + 2, 1);
    }
    case BROADCAST_ROWS: {
        sh[nb] = 1, sh[nb + 1] = cols;
        tn_tensor *one = tn_randn(nb + 2, sh, dt);
        sh[nb] = rows;
        return tn_expand(one, nb + 2, sh);
    }
    }
    return NULL;
}

typedef struct mm_case {
    int64_t m, k, n;
    form fa, fb;
    int64_t ba[2], bb[2]; /* batch dims, {1, 1} for none */
    int nba, nbb;         /* how many batch dims each operand has (0-2) */
} mm_case;

static void run_case(const mm_case *c, tn_dtype dt) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(11);
    tn_tensor *a = operand(c->nba, c->ba + 2 - c->nba, c->m, c->k, c->fa, dt);
    tn_tensor *b = operand(c->nbb, c->bb + 2 - c->nbb, c->k, c->n, c->fb, dt);
    assert_non_null(a);
    assert_non_null(b);
    double *av = values(a), *bv = values(b);
    int64_t B0 = c->ba[0] > c->bb[0] ? c->ba[0] : c->bb[0];
    int64_t B1 = c->ba[1] > c->bb[1] ? c->ba[1] : c->bb[1];
    int64_t nout = B0 * B1 * c->m * c->n;
    double *want = malloc(sizeof(double) * (size_t)nout),
           *scale = malloc(sizeof(double) * (size_t)nout);
    ref_matmul(av, c->ba, bv, c->bb, c->m, c->k, c->n, want, scale);
    tn__blas_mode old = tn__blas_get_mode();
    for (int md = 0; md < NMODES; md++) {
        tn__blas_set_mode(modes[md]);
        tn_tensor *y = tn_matmul(a, b);
        if (!y) fail_msg("matmul: %s", tn_last_error());
        assert_int_equal(tn_numel(y), nout);
        double *got = values(y);
        char what[96];
        snprintf(what, sizeof what, "%lldx%lldx%lld forms %d,%d batch %lldx%lld", (long long)c->m,
                 (long long)c->k, (long long)c->n, c->fa, c->fb, (long long)B0, (long long)B1);
        assert_near(got, want, scale, nout, dt, what, modes[md]);
        free(got);
    }
    tn__blas_set_mode(old);
    free(av);
    free(bv);
    free(want);
    free(scale);
    tn_scope_end();
}

static const mm_case cases[] = {
    {37, 53, 29, PLAIN, PLAIN, {1, 1}, {1, 1}, 0, 0},
    {64, 64, 64, PLAIN, PLAIN, {1, 1}, {1, 1}, 0, 0},
    {130, 70, 90, TRANSPOSED, PLAIN, {1, 1}, {1, 1}, 0, 0},
    {70, 130, 90, PLAIN, TRANSPOSED, {1, 1}, {1, 1}, 0, 0},
    {90, 70, 130, TRANSPOSED, TRANSPOSED, {1, 1}, {1, 1}, 0, 0},
    {300, 257, 200, PLAIN, TRANSPOSED, {1, 1}, {1, 1}, 0, 0},       /* big enough for 2 threads */
    {9, 300, 400, TRANSPOSED, PLAIN, {1, 1}, {1, 1}, 0, 0},         /* short and wide: by columns */
    {40, 33, 20, STRIDED, PLAIN, {1, 1}, {1, 1}, 0, 0},             /* fallback: A strided */
    {40, 33, 20, PLAIN, STRIDED, {1, 1}, {1, 1}, 0, 0},             /* fallback: B strided */
    {40, 33, 20, BROADCAST_ROWS, TRANSPOSED, {1, 1}, {1, 1}, 0, 0}, /* fallback: stride 0 */
    {1, 200, 150, PLAIN, PLAIN, {1, 1}, {1, 1}, 0, 0},              /* one row */
    {150, 200, 1, PLAIN, TRANSPOSED, {1, 1}, {1, 1}, 0, 0},         /* one column */
    {1, 200, 1, TRANSPOSED, PLAIN, {1, 1}, {1, 1}, 0, 0},           /* a dot product */
    {20, 30, 10, PLAIN, PLAIN, {1, 5}, {1, 5}, 1, 1},               /* bmm */
    {20, 30, 10, TRANSPOSED, PLAIN, {3, 4}, {1, 4}, 2, 1},          /* broadcast batch of b */
    {20, 30, 10, PLAIN, TRANSPOSED, {3, 1}, {3, 4}, 2, 2},          /* broadcast inside a */
    {96, 80, 64, PLAIN, PLAIN, {1, 6}, {1, 1}, 1, 0},               /* batch folds into rows */
    {50, 40, 30, TRANSPOSED, TRANSPOSED, {2, 3}, {1, 3}, 2, 1},
    {16, 24, 8, STRIDED, PLAIN, {1, 3}, {1, 3}, 1, 1}, /* batched fallback */
};

static void products_f32(void **state) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], TN_F32);
}

static void products_f64(void **state) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], TN_F64);
}

/* ---- accumulation (C starts as the bias) and gradients ---------------------------------- */

/* y = x·w^T + bias (the product accumulates onto the bias: beta = 1 on
 * CBLAS), then the gradients of sum(y * g) (products with transposed
 * operands), on every path against the OFF path and a float64 reference. */
static void linear_mode(tn_dtype dt, tn__blas_mode mode, double **out) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(5);
    tn_tensor *x = tn_randn(3, S(3, 40, 70), dt), *w = tn_randn(2, S(50, 70), dt);
    tn_tensor *bias = tn_randn(1, S(50), dt), *g = tn_randn(3, S(3, 40, 50), dt);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    assert_int_equal(tn_requires_grad_(bias, true), TN_OK);
    tn__blas_mode old = tn__blas_get_mode();
    tn__blas_set_mode(mode);
    tn_tensor *y = tn_linear(x, w, bias);
    assert_non_null(y);
    assert_int_equal(tn_backward(y, g, false), TN_OK);
    tn__blas_set_mode(old);
    /* reference: y = x·w^T + bias, dx = g·w, dw = sum over batch of g^T·x */
    double *xv = values(x), *wv = values(w), *bv = values(bias), *gv = values(g);
    double *yv = values(y), *dxv = values(tn_grad(x)), *dwv = values(tn_grad(w));
    double want[120 * 70], scale[120 * 70]; /* the largest of y, dx, dw */
    for (int i = 0; i < 120; i++)
        for (int o = 0; o < 50; o++) {
            double s = bv[o], sa = fabs(bv[o]);
            for (int p = 0; p < 70; p++)
                s += xv[i * 70 + p] * wv[o * 70 + p], sa += fabs(xv[i * 70 + p] * wv[o * 70 + p]);
            want[i * 50 + o] = s, scale[i * 50 + o] = sa;
        }
    assert_near(yv, want, scale, 6000, dt, "linear forward (accumulate onto bias)", mode);
    for (int i = 0; i < 120; i++)
        for (int p = 0; p < 70; p++) {
            double s = 0, sa = 0;
            for (int o = 0; o < 50; o++)
                s += gv[i * 50 + o] * wv[o * 70 + p], sa += fabs(gv[i * 50 + o] * wv[o * 70 + p]);
            want[i * 70 + p] = s, scale[i * 70 + p] = sa;
        }
    assert_near(dxv, want, scale, 120 * 70, dt, "linear grad x", mode);
    for (int o = 0; o < 50; o++)
        for (int p = 0; p < 70; p++) {
            double s = 0, sa = 0;
            for (int i = 0; i < 120; i++)
                s += gv[i * 50 + o] * xv[i * 70 + p], sa += fabs(gv[i * 50 + o] * xv[i * 70 + p]);
            want[o * 70 + p] = s, scale[o * 70 + p] = sa;
        }
    assert_near(dwv, want, scale, 50 * 70, dt, "linear grad w", mode);
    free(xv), free(wv), free(bv), free(gv), free(dxv), free(dwv);
    *out = yv;
    tn_scope_end();
}

static void linear_accumulate(void **state) {
    for (int d = 0; d < 2; d++) {
        tn_dtype dt = d ? TN_F64 : TN_F32;
        for (int md = 0; md < NMODES; md++) {
            double *y;
            linear_mode(dt, modes[md], &y);
            free(y);
        }
    }
}

/* ---- tn__gemm_blas directly ---------------------------------------------------------- */

/* C (3x4, float) = A (3x5) · B (5x4), through the given strides of A. */
static tn_status direct(const float *a, int64_t rsa, int64_t csa, float *c, bool acc, tn_dtype dt) {
    static const float b[20] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    tn_gemm g = {.m = 3,
                 .n = 4,
                 .k = 5,
                 .a = a,
                 .rsa = rsa,
                 .csa = csa,
                 .b = b,
                 .rsb = 4,
                 .csb = 1,
                 .c = c,
                 .rsc = 4,
                 .accumulate = acc};
    return tn__gemm_blas(dt, &g, NULL);
}

static void what_it_takes(void **state) {
    float a[30], c[12];
    for (int i = 0; i < 30; i++)
        a[i] = (float)(i % 7) - 3;
    tn__blas_mode old = tn__blas_get_mode();
    tn__blas_set_mode(TN__BLAS_ALL);
    if (!tn__blas_available()) { /* built without CBLAS: nothing is taken */
        assert_int_equal(direct(a, 5, 1, c, false, TN_F32), TN__BLAS_DECLINED);
        assert_false(tn_blas_enabled());
        tn__blas_set_mode(old);
        skip();
    }
    /* plain, then A read transposed (a stored 5x3): taken */
    assert_int_equal(direct(a, 5, 1, c, false, TN_F32), TN_OK);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            float s = 0;
            for (int p = 0; p < 5; p++)
                s += a[i * 5 + p] * (float)(p * 4 + j + 1);
            assert_true(c[i * 4 + j] == s); /* small integers: exact */
        }
    float c0[12];
    memcpy(c0, c, sizeof c);
    for (int i = 0; i < 12; i++)
        c[i] = 100;
    assert_int_equal(direct(a, 5, 1, c, true, TN_F32), TN_OK); /* accumulate: beta = 1 */
    for (int i = 0; i < 12; i++)
        assert_true(c[i] == c0[i] + 100);
    assert_int_equal(direct(a, 1, 3, c, false, TN_F32), TN_OK);
    /* C is not read unless accumulating: NaN left in a fresh output must go */
    for (int i = 0; i < 12; i++)
        c[i] = NAN;
    assert_int_equal(direct(a, 5, 1, c, false, TN_F32), TN_OK);
    assert_memory_equal(c, c0, sizeof c);
    /* matrix-vector products (gemv), strided vectors, NaN-filled or accumulated C */
    for (int acc = 0; acc < 2; acc++) {
        double x[8], y[16], m[16 * 8];
        for (int i = 0; i < 16 * 8; i++)
            m[i] = (double)(i % 5) - 2;
        for (int i = 0; i < 8; i++)
            x[i] = (double)i - 3;
        /* one column: C (4x1, rows 2 apart) = M (4x8, rows 16 apart) · x */
        for (int i = 0; i < 16; i++)
            y[i] = acc ? 1 : NAN;
        tn_gemm mv = {.m = 4,
                      .n = 1,
                      .k = 8,
                      .a = m,
                      .rsa = 16,
                      .csa = 1,
                      .b = x,
                      .rsb = 1,
                      .csb = 1,
                      .c = y,
                      .rsc = 2,
                      .accumulate = acc};
        assert_int_equal(tn__gemm_blas(TN_F64, &mv, NULL), TN_OK);
        for (int i = 0; i < 4; i++) {
            double s = acc ? 1 : 0;
            for (int p = 0; p < 8; p++)
                s += m[i * 16 + p] * x[p];
            assert_true(y[2 * i] == s);
            assert_true(acc ? y[2 * i + 1] == 1 : isnan(y[2 * i + 1])); /* untouched */
        }
        /* one row: C (1x6) = a (1x4, stride 2) · M (4x6 read transposed: stored 6x4) */
        for (int i = 0; i < 16; i++)
            y[i] = acc ? 1 : NAN;
        tn_gemm vm = {.m = 1,
                      .n = 6,
                      .k = 4,
                      .a = x,
                      .rsa = 0,
                      .csa = 2,
                      .b = m,
                      .rsb = 1,
                      .csb = 4,
                      .c = y,
                      .rsc = 6,
                      .accumulate = acc};
        assert_int_equal(tn__gemm_blas(TN_F64, &vm, NULL), TN_OK);
        for (int j = 0; j < 6; j++) {
            double s = acc ? 1 : 0;
            for (int p = 0; p < 4; p++)
                s += x[2 * p] * m[j * 4 + p];
            assert_true(y[j] == s);
        }
    }
    /* declined: both strides non-unit, broadcast rows, an integer dtype, mode off */
    assert_int_equal(direct(a, 10, 2, c, false, TN_F32), TN__BLAS_DECLINED);
    assert_int_equal(direct(a, 0, 1, c, false, TN_F32), TN__BLAS_DECLINED);
    assert_int_equal(direct(a, 5, 1, c, false, TN_I32), TN__BLAS_DECLINED);
    tn__blas_set_mode(TN__BLAS_OFF);
    assert_int_equal(direct(a, 5, 1, c, false, TN_F32), TN__BLAS_DECLINED);
    assert_false(tn_blas_enabled());
    tn_set_blas(true);
    assert_true(tn_blas_enabled());
    assert_int_equal(tn__blas_get_mode(), TN__BLAS_AUTO);
    tn__blas_set_mode(old);
}

/* ---- several user threads at once -------------------------------------------------- */

#define USERS 4
#define ROUNDS 12

typedef struct user {
    tn_tensor *a, *b, *bt; /* shared inputs, read only */
    const double *want, *scale;
    int bad;
} user;

static void *user_main(void *p) {
    user *u = p;
    for (int r = 0; r < ROUNDS && !u->bad; r++) {
        tn_tensor *y = tn_matmul(u->a, r % 2 ? u->bt : u->b);
        if (!y) {
            u->bad = 1;
            break;
        }
        double got[96 * 72];
        if (tn_copy_to_f64(y, got, 96 * 72) != TN_OK) u->bad = 1;
        for (int i = 0; i < 96 * 72 && !u->bad; i++)
            if (!(fabs(got[i] - u->want[i]) <= tol_of(TN_F32) * u->scale[i])) u->bad = 2;
        tn_release(y);
    }
    return NULL;
}

/* USERS threads multiply at once, each on 2 op threads (OpenMP teams of
 * their own), half of the rounds with B transposed: no wrong element. */
static void concurrent_users(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(9);
    tn_tensor *a = tn_randn(2, S(96, 400), TN_F32), *b = tn_randn(2, S(400, 72), TN_F32);
    tn_tensor *bt = tn_contiguous(tn_transpose(b, 0, 1));
    bt = tn_transpose(bt, 0, 1); /* same values as b, read transposed */
    double *av = values(a), *bv = values(b);
    double want[96 * 72], scale[96 * 72];
    ref_matmul(av, S(1, 1), bv, S(1, 1), 96, 400, 72, want, scale);
    int old = tn_get_num_threads();
    tn__blas_mode old_mode = tn__blas_get_mode();
    tn_set_num_threads(2);
    for (int md = 0; md < NMODES; md++) {
        tn__blas_set_mode(modes[md]);
        pthread_t th[USERS];
        user us[USERS];
        for (int t = 0; t < USERS; t++) {
            us[t] = (user){a, b, bt, want, scale, 0};
            assert_int_equal(pthread_create(&th[t], NULL, user_main, &us[t]), 0);
        }
        for (int t = 0; t < USERS; t++) {
            pthread_join(th[t], NULL);
            if (us[t].bad)
                fail_msg("user thread %d, mode %d: %s", t, (int)modes[md],
                         us[t].bad == 1 ? "matmul failed" : "wrong result");
        }
    }
    tn_set_num_threads(old);
    tn__blas_set_mode(old_mode);
    free(av);
    free(bv);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(products_f32),  TT_TEST(products_f64),     TT_TEST(linear_accumulate),
        TT_TEST(what_it_takes), TT_TEST(concurrent_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
