/* The CUDA backend table (engine/cuda/), entry by entry, against plain host
 * computations: pointwise ops of every code and dtype on contiguous,
 * broadcast and strided iterators, the optimiser steps, copy between every
 * dtype pair, fill, reductions, products, softmax, the non-finite flag, the
 * caching allocator and the copies. The halves (bfloat16, float16) run wherever
 * the back end has kernels for them, against references computed in float32
 * and rounded once per result, as engine/cpu does.
 *
 * Without a usable CUDA device (or a build without CUDA) every test is
 * skipped. TENET_CUDA_BENCH=1 adds timings of a few large kernels.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#include "engine/core/backend.h"
#include "engine/core/half.h"

static const tn_backend *be;
static const int dev = 0;

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!be) skip();                                                                           \
    } while (0)

/* ---- helpers ------------------------------------------------------------------------ */

static const char *const dt_names[TN_DTYPE_COUNT] = {"f32", "f64",  "i16",  "i32",
                                                     "i64", "bool", "bf16", "f16"};

static size_t esz(tn_dtype dt) {
    static const size_t s[TN_DTYPE_COUNT] = {4, 8, 2, 4, 8, 1, 2, 2};
    return s[dt];
}

static bool is_half(tn_dtype dt) { return dt == TN_BF16 || dt == TN_F16; }
static bool is_fdt(tn_dtype dt) { return dt == TN_F32 || dt == TN_F64 || is_half(dt); }
/* the float dtypes, for the tests of float-only entries */
static const tn_dtype float_dts[4] = {TN_F32, TN_F64, TN_BF16, TN_F16};

static double getv(const void *p, tn_dtype dt, int64_t i) {
    switch (dt) {
    case TN_F32:
        return ((const float *)p)[i];
    case TN_F64:
        return ((const double *)p)[i];
    case TN_I16:
        return ((const int16_t *)p)[i];
    case TN_I32:
        return ((const int32_t *)p)[i];
    case TN_I64:
        return (double)((const int64_t *)p)[i];
    case TN_BF16:
        return tn_bf16_to_f32(((const tn_bf16 *)p)[i]);
    case TN_F16:
        return tn_f16_to_f32(((const tn_f16 *)p)[i]);
    default:
        return ((const uint8_t *)p)[i];
    }
}

/* v must be representable (or a float's NaN / inf for float dtypes; a half
 * rounds, through float32) */
static void putv(void *p, tn_dtype dt, int64_t i, double v) {
    switch (dt) {
    case TN_F32:
        ((float *)p)[i] = (float)v;
        break;
    case TN_F64:
        ((double *)p)[i] = v;
        break;
    case TN_I16:
        ((int16_t *)p)[i] = (int16_t)v;
        break;
    case TN_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case TN_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case TN_BF16:
        ((tn_bf16 *)p)[i] = tn_f32_to_bf16((float)v);
        break;
    case TN_F16:
        ((tn_f16 *)p)[i] = tn_f32_to_f16((float)v);
        break;
    default:
        ((uint8_t *)p)[i] = v != 0;
        break;
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static int64_t rnd_int(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static void *dalloc(size_t n) {
    void *p = be->alloc(dev, n);
    if (!p) fail_msg("device alloc of %zu bytes failed: %s", n, tn_last_error());
    return p;
}
static void dfree(void *p, size_t n) { be->free(dev, p, n); }
static void h2d(void *d, const void *h, size_t n) {
    assert_int_equal(be->memcpy(dev, d, h, n, TN_COPY_H2D), TN_OK);
}
static void d2h(void *h, const void *d, size_t n) {
    assert_int_equal(be->memcpy(dev, h, d, n, TN_COPY_D2H), TN_OK);
}
/* a device copy of n host bytes */
static void *upload(const void *h, size_t n) {
    void *d = dalloc(n);
    h2d(d, h, n);
    return d;
}

static bool same_value(double got, double want) {
    return got == want || (isnan(got) && isnan(want));
}

/* Within a few ulp of want (rel); with terms: of the terms, of order 1, that want sums (a
 * derivative whose terms cancel near its zero keeps their absolute error, not a relative one). */
static bool close_value(double got, double want, tn_dtype dt, bool terms) {
    if (isnan(want) || isinf(want)) return same_value(got, want);
    /* a half: one ulp (float32's few ulp can move its rounding by one) */
    double rel = dt == TN_F32 ? 2e-6 : dt == TN_BF16 ? 8e-3 : dt == TN_F16 ? 1e-3 : 1e-14;
    double abs = terms ? rel : dt == TN_F64 ? 1e-300 : 1e-30;
    return fabs(got - want) <= rel * fabs(want) + abs;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An iterator of nops operands over shape; strides (bytes) and bases set by the caller. */
static tn_iter mk_iter(int nops, int ndim, const int64_t *shape) {
    tn_iter it;
    memset(&it, 0, sizeof it);
    it.nops = nops;
    it.ndim = ndim;
    it.numel = 1;
    for (int d = 0; d < ndim; d++) {
        it.shape[d] = shape[d];
        it.numel *= shape[d];
    }
    return it;
}
static void set_contig(tn_iter *it, int k, void *base, size_t es) {
    it->base[k] = base;
    int64_t s = (int64_t)es;
    for (int d = it->ndim - 1; d >= 0; d--) {
        it->stride[k][d] = s;
        s *= it->shape[d];
    }
}

/* ---- host references of pw_ops.h, expanded as the CPU expands them ---------------------- */

#define CVT(T, v) _Generic((T)0, uint8_t : (uint8_t)((v) != 0), default : (T)(v))

typedef void (*ref_bin_fn)(const void *x, const void *y, void *out, int64_t n);
typedef void (*ref_un_fn)(const void *x, void *out, int64_t n, double c0, double c1);

#define RB(NAME, SFX, T, OT, EXPR)                                                                 \
    static void rb_##NAME##_##SFX(const void *xv, const void *yv, void *ov, int64_t n) {           \
        const T *xs = xv, *ys = yv;                                                                \
        OT *o = ov;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = xs[i], y = ys[i];                                                                \
            o[i] = CVT(OT, (EXPR));                                                                \
        }                                                                                          \
    }
#define RU(NAME, SFX, T, EXPR)                                                                     \
    static void ru_##NAME##_##SFX(const void *xv, void *ov, int64_t n, double c0d, double c1d) {   \
        const T *xs = xv;                                                                          \
        T *o = ov;                                                                                 \
        const T c0 = CVT(T, c0d), c1 = CVT(T, c1d);                                                \
        (void)c0;                                                                                  \
        (void)c1;                                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = xs[i];                                                                           \
            o[i] = CVT(T, (EXPR));                                                                 \
        }                                                                                          \
    }
/* the halves: loaded as float, computed in float, rounded once (OT: the half, or bool); an
 * op's scalars rounded to the half first */
static float ld_bf16(tn_bf16 v) { return tn_bf16_to_f32(v); }
static float ld_f16(tn_f16 v) { return tn_f16_to_f32(v); }
#define CVTH(SFX, OT, v) _Generic((OT *)0, uint8_t * : (uint8_t)((v) != 0), default : ST_##SFX(v))
#define ST_bf16(v) tn_f32_to_bf16((float)(v))
#define ST_f16(v) tn_f32_to_f16((float)(v))
#define RBH(NAME, SFX, OSFX, T, OT, EXPR)                                                          \
    static void rb_##NAME##_##OSFX(const void *xv, const void *yv, void *ov, int64_t n) {          \
        const T *xs = xv, *ys = yv;                                                                \
        OT *o = ov;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float x = ld_##SFX(xs[i]), y = ld_##SFX(ys[i]);                                        \
            o[i] = CVTH(SFX, OT, (EXPR));                                                          \
        }                                                                                          \
    }
#define RUH(NAME, SFX, T, EXPR)                                                                    \
    static void ru_##NAME##_##SFX(const void *xv, void *ov, int64_t n, double c0d, double c1d) {   \
        const T *xs = xv;                                                                          \
        T *o = ov;                                                                                 \
        const float c0 = ld_##SFX(ST_##SFX(c0d)), c1 = ld_##SFX(ST_##SFX(c1d));                    \
        (void)c0;                                                                                  \
        (void)c1;                                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float x = ld_##SFX(xs[i]);                                                             \
            o[i] = ST_##SFX((EXPR));                                                               \
        }                                                                                          \
    }
#define RB_HALVES(N, E) RBH(N, bf16, bf16, tn_bf16, tn_bf16, E) RBH(N, f16, f16, tn_f16, tn_f16, E)
#define RB_FLOAT(N, E) RB(N, f32, float, float, E) RB(N, f64, double, double, E) RB_HALVES(N, E)
#define RB_NOBOOL(N, E)                                                                            \
    RB_FLOAT(N, E)                                                                                 \
    RB(N, i16, int16_t, int16_t, E) RB(N, i32, int32_t, int32_t, E)                                \
        RB(N, i64, int64_t, int64_t, E)
#define RB_ALL(N, E) RB_NOBOOL(N, E) RB(N, b8, uint8_t, uint8_t, E)
#define RB_CMP(N, E)                                                                               \
    RB(N, f32, float, uint8_t, E)                                                                  \
    RB(N, f64, double, uint8_t, E) RB(N, i16, int16_t, uint8_t, E) RB(N, i32, int32_t, uint8_t, E) \
        RB(N, i64, int64_t, uint8_t, E) RB(N, b8, uint8_t, uint8_t, E)                             \
            RBH(N, bf16, bf16, tn_bf16, uint8_t, E) RBH(N, f16, f16, tn_f16, uint8_t, E)
#define RU_FLOAT(N, E)                                                                             \
    RU(N, f32, float, E) RU(N, f64, double, E) RUH(N, bf16, tn_bf16, E) RUH(N, f16, tn_f16, E)
#define RU_ALL(N, E)                                                                               \
    RU_FLOAT(N, E)                                                                                 \
    RU(N, i16, int16_t, E) RU(N, i32, int32_t, E) RU(N, i64, int64_t, E) RU(N, b8, uint8_t, E)
#define REF_BINARY(N, KIND, E) RB_##KIND(N, E)
#define REF_UNARY(N, KIND, E) RU_##KIND(N, E)
TN_PW_BINARY_OPS(REF_BINARY)
TN_PW_UNARY_OPS(REF_UNARY)

#define ROW_ALL(P, N)                                                                              \
    {                                                                                              \
        P##N##_f32, P##N##_f64, P##N##_i16, P##N##_i32, P##N##_i64, P##N##_b8, P##N##_bf16,        \
            P##N##_f16                                                                             \
    }
#define ROW_CMP(P, N) ROW_ALL(P, N)
#define ROW_NOBOOL(P, N)                                                                           \
    { P##N##_f32, P##N##_f64, P##N##_i16, P##N##_i32, P##N##_i64, NULL, P##N##_bf16, P##N##_f16 }
#define ROW_FLOAT(P, N)                                                                            \
    { P##N##_f32, P##N##_f64, NULL, NULL, NULL, NULL, P##N##_bf16, P##N##_f16 }
#define ENTRY_B(N, KIND, E) [TN_PW_##N] = ROW_##KIND(rb_, N),
#define ENTRY_U(N, KIND, E) [TN_PW_##N] = ROW_##KIND(ru_, N),
#define ENTRY_NAME(N, KIND, E) [TN_PW_##N] = #N,
static const ref_bin_fn ref_bin[TN_PW_COUNT][TN_DTYPE_COUNT] = {TN_PW_BINARY_OPS(ENTRY_B)};
static const ref_un_fn ref_un[TN_PW_COUNT][TN_DTYPE_COUNT] = {TN_PW_UNARY_OPS(ENTRY_U)};
static const char *const op_name[TN_PW_COUNT] = {TN_PW_BINARY_OPS(ENTRY_NAME)
                                                     TN_PW_UNARY_OPS(ENTRY_NAME)};

/* the activations' derivatives: sums of terms of order 1 that cancel near their zeros
 * (gelu's at x = -0.75: 0.2266 - 0.2259) */
static bool terms_op(tn_pw_code c) {
    return c == TN_PW_gelu_grad || c == TN_PW_gelu_tanh_grad || c == TN_PW_silu_grad;
}
/* the math-library ops: CUDA's functions are within a few ulp of the C library's */
static bool approx_op(tn_pw_code c) {
    return c == TN_PW_exp || c == TN_PW_log || c == TN_PW_sin || c == TN_PW_cos ||
           c == TN_PW_tanh || c == TN_PW_sigmoid || c == TN_PW_pow || c == TN_PW_pows ||
           (c >= TN_PW_gelu && c <= TN_PW_normcdf) || /* the activations: erfc, tanh, exp */
           terms_op(c);
}

/* Inputs: floats on a 0.25 grid in [-3, 3] (ties for the comparisons) with
 * NaN, +-inf and -0 mixed in; integers in [-20, 20]; pow gets small
 * non-negative integer exponents and bases in [-5, 5]. */
static void gen_values(void *p, tn_dtype dt, int64_t n, tn_pw_code code, int which) {
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (is_fdt(dt)) {
            uint64_t r = rnd() % 40;
            if (r == 0)
                v = NAN;
            else if (r == 1)
                v = INFINITY;
            else if (r == 2)
                v = -INFINITY;
            else if (r == 3)
                v = -0.0;
            else
                v = 0.25 * (double)rnd_int(-12, 12);
            if (code == TN_PW_pow && which == 0 && r > 3) v = 0.125 * (double)rnd_int(1, 24);
        } else if (dt == TN_BOOL) {
            v = (double)rnd_int(0, 1);
        } else if (code == TN_PW_pow) {
            v = which == 0 ? (double)rnd_int(-5, 5) : (double)rnd_int(0, 3);
        } else {
            v = (double)rnd_int(-20, 20);
        }
        putv(p, dt, i, v);
    }
}

/* Cases that failed in the running test: a test reports every failing case
 * (op, dtype, layout) before it fails, not only the first. */
static int g_failed_cases;

static void case_failed(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAILED: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_failed_cases++;
}

static void end_cases(void) {
    int n = g_failed_cases;
    g_failed_cases = 0;
    if (n) fail_msg("%d case(s) failed (listed above)", n);
}

/* Checks n outputs of dtype odt against want; reports the first mismatch. */
static void check_outputs(const char *what, const void *got, const void *want, tn_dtype odt,
                          int64_t n, bool approx, bool terms) {
    for (int64_t i = 0; i < n; i++) {
        double g = getv(got, odt, i), w = getv(want, odt, i);
        bool ok = approx ? close_value(g, w, odt, terms) : same_value(g, w);
        if (!ok) {
            case_failed("%s: element %lld: got %.17g, want %.17g", what, (long long)i, g, w);
            return;
        }
    }
}

/* ---- setup ------------------------------------------------------------------------------- */

static int group_setup(void **state) {
    (void)state;
    /* the table is registered whenever the back end is built; usable with a GPU */
    be = tn__backends[TN_CUDA];
    if (be && be->device_count() == 0) be = NULL;
    if (!be) printf("no CUDA device: skipped\n");
    return 0;
}

static void test_device_and_errors(void **state) {
    (void)state;
    NEED_GPU();
    assert_string_equal(be->name, "cuda");
    assert_true(be->device_count() >= 1);
    assert_int_equal(be->synchronize(dev), TN_OK);
    assert_int_equal(be->synchronize(be->device_count()), TN_ERR_DEVICE);
    tt_assert_error(TN_ERR_DEVICE, "invalid device ordinal");
    assert_null(be->alloc(-1, 16));
    assert_int_equal(tn_last_status(), TN_ERR_DEVICE);
}

/* ---- memory ---------------------------------------------------------------------------------- */

static void test_allocator(void **state) {
    (void)state;
    NEED_GPU();
    tn_device_mem_stats s0, s1, s2, s3;
    be->mem_stats(dev, &s0);
    void *a = dalloc(1000);
    assert_true((uintptr_t)a % 256 == 0);
    be->mem_stats(dev, &s1);
    assert_int_equal(s1.bytes_live, s0.bytes_live + 1024); /* rounded to 512 B */
    assert_true(s1.bytes_peak >= s1.bytes_live);
    assert_true(s1.bytes_reserved >= s1.bytes_live);
    dfree(a, 1000);
    be->mem_stats(dev, &s2);
    assert_int_equal(s2.bytes_live, s0.bytes_live);
    assert_int_equal(s2.bytes_reserved, s1.bytes_reserved); /* cached, not released */
    void *b = dalloc(1001);                                 /* same class: the same block */
    assert_ptr_equal(a, b);
    be->mem_stats(dev, &s3);
    assert_int_equal(s3.bytes_reserved, s1.bytes_reserved);
    dfree(b, 1001);

    /* above 1 MiB: 2 MiB multiples */
    be->mem_stats(dev, &s0);
    void *c = dalloc(3u << 20);
    be->mem_stats(dev, &s1);
    assert_int_equal(s1.bytes_live, s0.bytes_live + (4u << 20));
    assert_true(s1.bytes_peak >= s0.bytes_live + (4u << 20));
    dfree(c, 3u << 20);
    void *d = dalloc((3u << 20) + 5);
    assert_ptr_equal(c, d);
    dfree(d, (3u << 20) + 5);
    /* a zero-byte request still gets a block */
    void *z = dalloc(0);
    dfree(z, 0);
    be->mem_stats(-5, &s0);
    assert_int_equal(s0.bytes_live, 0);
}

static void test_memcpy(void **state) {
    (void)state;
    NEED_GPU();
    enum { N = 100003 };
    uint8_t *h = xmalloc(N), *back = xmalloc(N);
    for (int i = 0; i < N; i++)
        h[i] = (uint8_t)(i * 7 + 3);
    uint8_t *d1 = dalloc(N), *d2 = dalloc(N);
    h2d(d1, h, N);
    assert_int_equal(be->memcpy(dev, d2, d1, N, TN_COPY_D2D), TN_OK);
    memset(back, 0, N);
    d2h(back, d2, N);
    assert_memory_equal(back, h, N);
    /* offsets, odd sizes */
    memset(back, 0, N);
    assert_int_equal(be->memcpy(dev, d2 + 1, d1 + 3, 777, TN_COPY_D2D), TN_OK);
    d2h(back, d2 + 1, 777);
    assert_memory_equal(back, h + 3, 777);
    assert_int_equal(be->memcpy(dev, d2, h, 0, TN_COPY_H2D), TN_OK);
    assert_int_equal(be->memcpy(dev, d2, h, 8, (tn_copy_kind)42), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->memcpy(be->device_count(), d2, h, 8, TN_COPY_H2D), TN_ERR_DEVICE);
    dfree(d1, N);
    dfree(d2, N);
    free(h);
    free(back);
}

/* ---- pointwise ops ------------------------------------------------------------------------ */

enum { LAY_CONTIG, LAY_SCALAR, LAY_ROW, LAY_TRANSPOSED, LAY_MISALIGNED, LAY_COUNT };
static const char *const lay_names[LAY_COUNT] = {"contiguous", "scalar-broadcast", "row-broadcast",
                                                 "transposed", "misaligned"};

/* One binary op over one layout: out (A, B) contiguous; x contiguous or a
 * transposed view; y contiguous, one element, or one row. */
static void run_binary_case(tn_pw_code code, tn_dtype dt, int lay) {
    enum { A = 37, B = 129 };
    const int64_t n = A * B, shape2[2] = {A, B}, shape1[1] = {n};
    const bool cmp = tn_pw_is_cmp(code);
    const tn_dtype odt = cmp ? TN_BOOL : dt;
    const size_t es = esz(dt), oes = esz(odt);
    const int64_t ny = lay == LAY_SCALAR ? 1 : lay == LAY_ROW ? B : n;
    const int64_t off = lay == LAY_MISALIGNED ? 1 : 0;
    char *xs = xmalloc((size_t)(n + off) * es), *ys = xmalloc((size_t)(ny + off) * es);
    char *X = xmalloc((size_t)n * es), *Y = xmalloc((size_t)n * es);
    char *want = xmalloc((size_t)n * oes), *got = xmalloc((size_t)n * oes);
    gen_values(xs, dt, n + off, code, 0);
    gen_values(ys, dt, ny + off, code, 1);
    /* the logical operands */
    for (int64_t i = 0; i < n; i++) {
        int64_t a = i / B, b = i % B;
        int64_t xi = lay == LAY_TRANSPOSED ? b * A + a : i;
        int64_t yi = lay == LAY_SCALAR ? 0 : lay == LAY_ROW ? b : i;
        memcpy(X + i * (int64_t)es, xs + (xi + off) * (int64_t)es, es);
        memcpy(Y + i * (int64_t)es, ys + (yi + off) * (int64_t)es, es);
    }
    ref_bin[code][dt](X, Y, want, n);

    char *dx = upload(xs, (size_t)(n + off) * es), *dy = upload(ys, (size_t)(ny + off) * es);
    char *dout = dalloc((size_t)(n + off) * oes);
    tn_iter it;
    if (lay == LAY_CONTIG || lay == LAY_SCALAR || lay == LAY_MISALIGNED) {
        it = mk_iter(3, 1, shape1);
        set_contig(&it, 0, dout + off * (int64_t)oes, oes);
        set_contig(&it, 1, dx + off * (int64_t)es, es);
        set_contig(&it, 2, dy + off * (int64_t)es, es);
        if (lay == LAY_SCALAR) it.stride[2][0] = 0;
    } else {
        it = mk_iter(3, 2, shape2);
        set_contig(&it, 0, dout, oes);
        set_contig(&it, 1, dx, es);
        set_contig(&it, 2, dy, es);
        if (lay == LAY_ROW) it.stride[2][0] = 0;
        if (lay == LAY_TRANSPOSED) {
            it.stride[1][0] = (int64_t)es;
            it.stride[1][1] = A * (int64_t)es;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "%s %s %s", op_name[code], dt_names[dt], lay_names[lay]);
    tn_status st = be->pointwise(dev, code, dt, &it, NULL);
    if (st != TN_OK) {
        case_failed("%s: status %d: %s", what, st, tn_last_error());
    } else {
        d2h(got, dout + off * (int64_t)oes, (size_t)n * oes);
        check_outputs(what, got, want, odt, n, approx_op(code) && is_fdt(dt), terms_op(code));
    }
    dfree(dx, (size_t)(n + off) * es);
    dfree(dy, (size_t)(ny + off) * es);
    dfree(dout, (size_t)(n + off) * oes);
    free(xs), free(ys), free(X), free(Y), free(want), free(got);
}

static void run_unary_case(tn_pw_code code, tn_dtype dt, int lay, const tn_pw_ctx *ctx) {
    enum { A = 41, B = 101 };
    const int64_t n = A * B, shape2[2] = {A, B}, shape1[1] = {n};
    const size_t es = esz(dt);
    const int64_t nx = lay == LAY_SCALAR ? 1 : n, off = lay == LAY_MISALIGNED ? 1 : 0;
    char *xs = xmalloc((size_t)(nx + off) * es), *X = xmalloc((size_t)n * es);
    char *want = xmalloc((size_t)n * es), *got = xmalloc((size_t)n * es);
    gen_values(xs, dt, nx + off, code, 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t a = i / B, b = i % B;
        int64_t xi = lay == LAY_SCALAR ? 0 : lay == LAY_TRANSPOSED ? b * A + a : i;
        memcpy(X + i * (int64_t)es, xs + (xi + off) * (int64_t)es, es);
    }
    ref_un[code][dt](X, want, n, ctx->c0, ctx->c1);
    char *dx = upload(xs, (size_t)(nx + off) * es), *dout = dalloc((size_t)(n + off) * es);
    tn_iter it;
    if (lay == LAY_TRANSPOSED) {
        it = mk_iter(2, 2, shape2);
        set_contig(&it, 0, dout, es);
        it.base[1] = dx;
        it.stride[1][0] = (int64_t)es;
        it.stride[1][1] = A * (int64_t)es;
    } else {
        it = mk_iter(2, 1, shape1);
        set_contig(&it, 0, dout + off * (int64_t)es, es);
        set_contig(&it, 1, dx + off * (int64_t)es, es);
        if (lay == LAY_SCALAR) it.stride[1][0] = 0;
    }
    char what[96];
    snprintf(what, sizeof what, "%s %s %s", op_name[code], dt_names[dt], lay_names[lay]);
    tn_status st = be->pointwise(dev, code, dt, &it, ctx);
    if (st != TN_OK) {
        case_failed("%s: status %d: %s", what, st, tn_last_error());
    } else {
        d2h(got, dout + off * (int64_t)es, (size_t)n * es);
        check_outputs(what, got, want, dt, n, approx_op(code) && is_fdt(dt), terms_op(code));
    }
    dfree(dx, (size_t)(nx + off) * es);
    dfree(dout, (size_t)(n + off) * es);
    free(xs), free(X), free(want), free(got);
}

static void test_pointwise_binary(void **state) {
    (void)state;
    NEED_GPU();
    for (int c = 0; c < TN_PW_FIRST_UNARY; c++)
        for (int dt = 0; dt < TN_DTYPE_COUNT; dt++) {
            if (!ref_bin[c][dt]) { /* the kind excludes it: refused */
                enum { N = 8 };
                void *d = dalloc(N * 8);
                tn_iter it = mk_iter(3, 1, (const int64_t[]){N});
                for (int k = 0; k < 3; k++)
                    set_contig(&it, k, d, esz((tn_dtype)dt));
                if (be->pointwise(dev, (tn_pw_code)c, (tn_dtype)dt, &it, NULL) != TN_ERR_DTYPE)
                    case_failed("%s %s: not refused", op_name[c], dt_names[dt]);
                dfree(d, N * 8);
                continue;
            }
            for (int lay = 0; lay < LAY_COUNT; lay++)
                run_binary_case((tn_pw_code)c, (tn_dtype)dt, lay);
        }
    end_cases();
}

static void test_pointwise_unary(void **state) {
    (void)state;
    NEED_GPU();
    for (int c = TN_PW_FIRST_UNARY; c < TN_PW_MASKED_ZERO; c++) {
        tn_pw_ctx ctx = {1.5, 0};
        if (c == TN_PW_clamp || c == TN_PW_clampmask) ctx = (tn_pw_ctx){-1.25, 2.0};
        if (c == TN_PW_pows) ctx = (tn_pw_ctx){2.5, 0};
        for (int dt = 0; dt < TN_DTYPE_COUNT; dt++) {
            if (!ref_un[c][dt]) {
                enum { N = 8 };
                void *d = dalloc(N * 8);
                tn_iter it = mk_iter(2, 1, (const int64_t[]){N});
                set_contig(&it, 0, d, esz((tn_dtype)dt));
                set_contig(&it, 1, d, esz((tn_dtype)dt));
                if (be->pointwise(dev, (tn_pw_code)c, (tn_dtype)dt, &it, &ctx) != TN_ERR_DTYPE)
                    case_failed("%s %s: not refused", op_name[c], dt_names[dt]);
                dfree(d, N * 8);
                continue;
            }
            for (int lay = 0; lay < LAY_COUNT; lay++) {
                if (lay == LAY_ROW) continue; /* one input: no row to broadcast */
                run_unary_case((tn_pw_code)c, (tn_dtype)dt, lay, &ctx);
            }
        }
    }
    end_cases();
}

/* a large contiguous op: many blocks of the vectorised kernel, and a tail */
static void test_pointwise_large(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t n = (3 << 20) + 5;
    float *x = xmalloc((size_t)n * 4), *y = xmalloc((size_t)n * 4), *got = xmalloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) * 0.5f;
        y[i] = (float)(i % 777) * 0.25f;
    }
    float *dx = upload(x, (size_t)n * 4), *dy = upload(y, (size_t)n * 4),
          *dout = dalloc((size_t)n * 4);
    tn_iter it = mk_iter(3, 1, &n);
    set_contig(&it, 0, dout, 4);
    set_contig(&it, 1, dx, 4);
    set_contig(&it, 2, dy, 4);
    assert_int_equal(be->pointwise(dev, TN_PW_mul, TN_F32, &it, NULL), TN_OK);
    d2h(got, dout, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != x[i] * y[i])
            fail_msg("mul at %lld: %g != %g", (long long)i, got[i], x[i] * y[i]);
    /* in place: out is x */
    set_contig(&it, 0, dx, 4);
    assert_int_equal(be->pointwise(dev, TN_PW_add, TN_F32, &it, NULL), TN_OK);
    d2h(got, dx, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != x[i] + y[i]) fail_msg("add_ at %lld", (long long)i);
    dfree(dx, (size_t)n * 4), dfree(dy, (size_t)n * 4), dfree(dout, (size_t)n * 4);
    free(x), free(y), free(got);
}

static void test_masked_zero(void **state) {
    (void)state;
    NEED_GPU();
    enum { A = 9, B = 333 };
    const int64_t shape[2] = {A, B}, n = A * B;
    for (int f = 0; f < 4; f++) {
        const tn_dtype dt = float_dts[f];
        size_t es = esz(dt);
        char *x = xmalloc((size_t)n * es), *got = xmalloc((size_t)n * es);
        uint8_t mask[B];
        gen_values(x, (tn_dtype)dt, n, TN_PW_add, 0);
        for (int b = 0; b < B; b++)
            mask[b] = (uint8_t)(rnd() % 2);
        char *dx = upload(x, (size_t)n * es), *dm = upload(mask, B), *dout = dalloc((size_t)n * es);
        tn_iter it = mk_iter(3, 2, shape);
        set_contig(&it, 0, dout, es);
        set_contig(&it, 1, dx, es);
        set_contig(&it, 2, dm, 1);
        it.stride[2][0] = 0; /* the mask is one row, broadcast */
        assert_int_equal(be->pointwise(dev, TN_PW_MASKED_ZERO, (tn_dtype)dt, &it, NULL), TN_OK);
        d2h(got, dout, (size_t)n * es);
        for (int64_t i = 0; i < n; i++) {
            double want = mask[i % B] ? 0.0 : getv(x, (tn_dtype)dt, i);
            if (!same_value(getv(got, (tn_dtype)dt, i), want))
                fail_msg("masked_zero at %lld", (long long)i);
        }
        dfree(dx, (size_t)n * es), dfree(dm, B), dfree(dout, (size_t)n * es);
        free(x), free(got);
    }
    void *d = dalloc(64);
    tn_iter it = mk_iter(3, 1, (const int64_t[]){4});
    set_contig(&it, 0, d, 4), set_contig(&it, 1, d, 4), set_contig(&it, 2, d, 1);
    assert_int_equal(be->pointwise(dev, TN_PW_MASKED_ZERO, TN_I32, &it, NULL), TN_ERR_DTYPE);
    dfree(d, 64);
}

/* ---- optimiser steps: the loops of engine/optim/sgd.c and adam.c ------------------------- */

/* T the stored type, C the compute type, LD / ST the conversions, R a value
 * rounded to T where torch's update ends one op, K(x) = R((C)x) a scalar PyTorch
 * converts to the dtype (engine/cpu/optim_impl.h) */
#define SGD_REF(T, C, SFX, LD, ST, R)                                                              \
    static void sgd_ref_##SFX(const tn_sgd_ctx *c, int64_t n, T *p, const T *g, T *b) {            \
        const C neg_lr = R((C)(-c->lr)), mom = R((C)c->momentum), wd = R((C)c->wd);                \
        const bool use_wd = c->wd != 0, use_buf = c->momentum != 0, first = c->first;              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            C pv = LD(p[i]), gv = LD(g[i]);                                                        \
            C d = use_wd ? R(gv + wd * pv) : gv;                                                   \
            if (use_buf) {                                                                         \
                d = first ? d : R(R(LD(b[i]) * mom) + d);                                          \
                b[i] = ST(d);                                                                      \
            }                                                                                      \
            p[i] = ST(pv + neg_lr * d);                                                            \
        }                                                                                          \
    }
#define ID_(v) (v)
#define R_bf16(v) tn_bf16_to_f32(tn_f32_to_bf16(v))
#define R_f16(v) tn_f16_to_f32(tn_f32_to_f16(v))
SGD_REF(float, float, f32, ID_, ID_, ID_)
SGD_REF(double, double, f64, ID_, ID_, ID_)
SGD_REF(tn_bf16, float, bf16, tn_bf16_to_f32, tn_f32_to_bf16, R_bf16)
SGD_REF(tn_f16, float, f16, tn_f16_to_f32, tn_f32_to_f16, R_f16)

#define ADAM_REF(T, C, SFX, SQRT, LD, ST, R)                                                       \
    static void adam_ref_##SFX(const tn_adam_ctx *c, int64_t n, T *p, const T *g, T *m, T *v) {    \
        const C b1 = R((C)c->beta1), b2 = R((C)c->beta2), a1 = R((C)c->one_minus_beta1);           \
        const C a2 = (C)c->one_minus_beta2, wd = R((C)c->wd), eps = R((C)c->eps);                  \
        const C bc2s = R((C)c->bc2_sqrt), neg_step = (C)c->neg_step_size;                          \
        const C decay = R((C)c->decay);                                                            \
        const bool use_wd = c->wd != 0;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            C pv = LD(p[i]), gv = LD(g[i]);                                                        \
            if (c->decay != 1) pv = R(pv * decay);                                                 \
            C d = use_wd ? R(gv + wd * pv) : gv;                                                   \
            C mi = R(R(LD(m[i]) * b1) + a1 * d);                                                   \
            C vi = R(R(LD(v[i]) * b2) + a2 * d * d);                                               \
            m[i] = ST(mi);                                                                         \
            v[i] = ST(vi);                                                                         \
            C denom = R(R(R(SQRT(vi)) / bc2s) + eps);                                              \
            p[i] = ST(pv + neg_step * mi / denom);                                                 \
        }                                                                                          \
    }
ADAM_REF(float, float, f32, sqrtf, ID_, ID_, ID_)
ADAM_REF(double, double, f64, sqrt, ID_, ID_, ID_)
ADAM_REF(tn_bf16, float, bf16, sqrtf, tn_bf16_to_f32, tn_f32_to_bf16, R_bf16)
ADAM_REF(tn_f16, float, f16, sqrtf, tn_f16_to_f32, tn_f32_to_f16, R_f16)

/* bit-for-bit equality of n floats; reports the first difference */
static void same_bits(const char *what, const void *got, const void *want, tn_dtype dt, int64_t n) {
    size_t es = esz(dt);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * (int64_t)es, (const char *)want + i * (int64_t)es, es)) {
            case_failed("%s: element %lld: got %a, want %a", what, (long long)i, getv(got, dt, i),
                        getv(want, dt, i));
            return;
        }
}

static void fill_random_float(void *p, tn_dtype dt, int64_t n, double scale) {
    for (int64_t i = 0; i < n; i++)
        putv(p, dt, i, scale * ((double)(rnd() % 2000001) / 1e6 - 1.0));
}

/* bit-exact: same scalars, same order, no contraction on either side */
static void test_optim_steps(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t n = 10007;
    for (int f = 0; f < 4; f++) {
        const tn_dtype dt = float_dts[f];
        size_t bytes = (size_t)n * esz((tn_dtype)dt);
        char *h[4], *w[4], *d[4], *got = xmalloc(bytes);
        for (int k = 0; k < 4; k++) {
            h[k] = xmalloc(bytes);
            w[k] = xmalloc(bytes);
            fill_random_float(h[k], (tn_dtype)dt, n, k == 3 ? 0.01 : 1.0);
            if (k == 3) /* v >= 0 */
                for (int64_t i = 0; i < n; i++)
                    putv(h[k], (tn_dtype)dt, i, fabs(getv(h[k], (tn_dtype)dt, i)));
            d[k] = upload(h[k], bytes);
        }
        /* SGD: no momentum (2 operands), then momentum first / later (3) */
        const tn_sgd_ctx sgds[3] = {
            {0.1, 0.0, 0.01, false}, {0.05, 0.9, 0.001, true}, {0.05, 0.9, 0.0, false}};
        for (int s = 0; s < 3; s++) {
            const tn_sgd_ctx *c = &sgds[s];
            int nops = c->momentum != 0 ? 3 : 2;
            tn_iter it = mk_iter(nops, 1, &n);
            for (int k = 0; k < nops; k++)
                set_contig(&it, k, d[k], esz((tn_dtype)dt));
            for (int k = 0; k < 3; k++)
                d2h(w[k], d[k], bytes);
            if (dt == TN_F32)
                sgd_ref_f32(c, n, (float *)w[0], (float *)w[1], (float *)w[2]);
            else if (dt == TN_F64)
                sgd_ref_f64(c, n, (double *)w[0], (double *)w[1], (double *)w[2]);
            else if (dt == TN_BF16)
                sgd_ref_bf16(c, n, (tn_bf16 *)w[0], (tn_bf16 *)w[1], (tn_bf16 *)w[2]);
            else
                sgd_ref_f16(c, n, (tn_f16 *)w[0], (tn_f16 *)w[1], (tn_f16 *)w[2]);
            assert_int_equal(be->pointwise(dev, TN_PW_SGD, (tn_dtype)dt, &it, c), TN_OK);
            for (int k = 0; k < nops; k++) {
                if (k == 1) continue;
                d2h(got, d[k], bytes);
                char what[64];
                snprintf(what, sizeof what, "SGD %s step %d operand %d", dt_names[dt], s, k);
                same_bits(what, got, w[k], (tn_dtype)dt, n);
            }
        }
        /* Adam, two steps (L2 decay, none), then AdamW's decoupled decay */
        for (int step = 1; step <= 3; step++) {
            double b1 = 0.9, b2 = 0.999, lr = 1e-3;
            double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
            tn_adam_ctx c = {.beta1 = b1,
                             .beta2 = b2,
                             .one_minus_beta1 = 1 - b1,
                             .one_minus_beta2 = 1 - b2,
                             .wd = step == 1 ? 0.01 : 0.0,
                             .eps = 1e-8,
                             .bc2_sqrt = sqrt(bc2),
                             .neg_step_size = -(lr / bc1),
                             .decay = step == 3 ? 1 - lr * 0.1 : 1};
            for (int k = 0; k < 4; k++)
                d2h(w[k], d[k], bytes);
            if (dt == TN_F32)
                adam_ref_f32(&c, n, (float *)w[0], (float *)w[1], (float *)w[2], (float *)w[3]);
            else if (dt == TN_F64)
                adam_ref_f64(&c, n, (double *)w[0], (double *)w[1], (double *)w[2], (double *)w[3]);
            else if (dt == TN_BF16)
                adam_ref_bf16(&c, n, (tn_bf16 *)w[0], (tn_bf16 *)w[1], (tn_bf16 *)w[2],
                              (tn_bf16 *)w[3]);
            else
                adam_ref_f16(&c, n, (tn_f16 *)w[0], (tn_f16 *)w[1], (tn_f16 *)w[2], (tn_f16 *)w[3]);
            tn_iter it = mk_iter(4, 1, &n);
            for (int k = 0; k < 4; k++)
                set_contig(&it, k, d[k], esz((tn_dtype)dt));
            assert_int_equal(be->pointwise(dev, TN_PW_ADAM, (tn_dtype)dt, &it, &c), TN_OK);
            for (int k = 0; k < 4; k++) {
                if (k == 1) continue;
                d2h(got, d[k], bytes);
                char what[64];
                snprintf(what, sizeof what, "Adam %s step %d operand %d", dt_names[dt], step, k);
                same_bits(what, got, w[k], (tn_dtype)dt, n);
            }
        }
        /* a wrong operand count is refused */
        tn_iter bad = mk_iter(3, 1, &n);
        for (int k = 0; k < 3; k++)
            set_contig(&bad, k, d[k], esz((tn_dtype)dt));
        tn_adam_ctx c0 = {0};
        assert_true(be->pointwise(dev, TN_PW_ADAM, (tn_dtype)dt, &bad, &c0) < 0);
        for (int k = 0; k < 4; k++) {
            dfree(d[k], bytes);
            free(h[k]);
            free(w[k]);
        }
        free(got);
    }
    end_cases();
}

/* ---- copy and fill ------------------------------------------------------------------------ */

static void test_copy_all_pairs(void **state) {
    (void)state;
    NEED_GPU();
    enum { A = 23, B = 71 };
    const int64_t n = A * B, shape2[2] = {A, B}, shape1[1] = {n};
    for (int dd = 0; dd < TN_DTYPE_COUNT; dd++)
        for (int sd = 0; sd < TN_DTYPE_COUNT; sd++) {
            tn_dtype dt = (tn_dtype)dd, st = (tn_dtype)sd;
            size_t des = esz(dt), ses = esz(st);
            char *src = xmalloc((size_t)n * ses), *want = xmalloc((size_t)n * des);
            char *got = xmalloc((size_t)n * des);
            bool nan_ok = is_fdt(dt) || dt == TN_BOOL; /* NaN -> int is undefined */
            for (int64_t i = 0; i < n; i++) {
                double v = st == TN_BOOL ? (double)(rnd() % 2)
                           : is_fdt(st)  ? 0.75 * (double)rnd_int(-133, 133)
                                         : (double)rnd_int(-1000, 1000);
                if (is_fdt(st) && i % 97 == 5) v = nan_ok ? NAN : -0.0;
                putv(src, st, i, v);
            }
            char *dsrc = upload(src, (size_t)n * ses), *ddst = dalloc((size_t)n * des);
            for (int lay = 0; lay < 4; lay++) {
                /* 0 contiguous, 1 one element broadcast, 2 one row broadcast, 3 transposed */
                tn_iter it;
                if (lay == 0 || lay == 1) {
                    it = mk_iter(2, 1, shape1);
                    set_contig(&it, 0, ddst, des);
                    set_contig(&it, 1, dsrc, ses);
                    if (lay == 1) it.stride[1][0] = 0;
                } else {
                    it = mk_iter(2, 2, shape2);
                    set_contig(&it, 0, ddst, des);
                    it.base[1] = dsrc;
                    if (lay == 2) {
                        it.stride[1][0] = 0;
                        it.stride[1][1] = (int64_t)ses;
                    } else {
                        it.stride[1][0] = (int64_t)ses;
                        it.stride[1][1] = A * (int64_t)ses;
                    }
                }
                for (int64_t i = 0; i < n; i++) {
                    int64_t a = i / B, b = i % B;
                    int64_t si = lay == 0 ? i : lay == 1 ? 0 : lay == 2 ? b : b * A + a;
                    putv(want, dt, i, getv(src, st, si));
                }
                char what[64];
                snprintf(what, sizeof what, "copy %s <- %s layout %d", dt_names[dd], dt_names[sd],
                         lay);
                tn_status s = be->copy(dev, dt, st, &it);
                if (s != TN_OK) {
                    case_failed("%s: %s", what, tn_last_error());
                    continue;
                }
                d2h(got, ddst, (size_t)n * des);
                check_outputs(what, got, want, dt, n, false, false);
            }
            dfree(dsrc, (size_t)n * ses);
            dfree(ddst, (size_t)n * des);
            free(src), free(want), free(got);
        }
    end_cases();
}

static void test_fill(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t n = 5001;
    const double values[3] = {2.75, -3.0, 0.0};
    for (int d = 0; d < TN_DTYPE_COUNT; d++) {
        tn_dtype dt = (tn_dtype)d;
        size_t es = esz(dt);
        char *h = xmalloc((size_t)(2 * n) * es), *got = xmalloc((size_t)(2 * n) * es);
        for (int64_t i = 0; i < 2 * n; i++)
            putv(h, dt, i, 1);
        char *dbuf = upload(h, (size_t)(2 * n) * es);
        for (int k = 0; k < 3; k++) {
            /* every other element: the gaps keep their 1 */
            tn_iter it = mk_iter(1, 1, &n);
            it.base[0] = dbuf;
            it.stride[0][0] = 2 * (int64_t)es;
            assert_int_equal(be->fill(dev, dt, &it, values[k]), TN_OK);
            d2h(got, dbuf, (size_t)(2 * n) * es);
            char want[8];
            putv(want, dt, 0,
                 dt == TN_I16   ? (double)(int16_t)values[k]
                 : dt == TN_I32 ? (double)(int32_t)values[k]
                 : dt == TN_I64 ? (double)(int64_t)values[k]
                                : values[k]);
            for (int64_t i = 0; i < 2 * n; i++) {
                double g = getv(got, dt, i), w = i % 2 ? 1.0 : getv(want, dt, 0);
                if (g != w)
                    fail_msg("fill %s %g at %lld: got %g want %g", dt_names[d], values[k],
                             (long long)i, g, w);
            }
            /* contiguous */
            it = mk_iter(1, 1, (const int64_t[]){2 * n});
            set_contig(&it, 0, dbuf, es);
            assert_int_equal(be->fill(dev, dt, &it, values[k]), TN_OK);
            d2h(got, dbuf, (size_t)(2 * n) * es);
            for (int64_t i = 0; i < 2 * n; i++)
                if (getv(got, dt, i) != getv(want, dt, 0))
                    fail_msg("fill contiguous %s", dt_names[d]);
            /* back to ones for the next round */
            assert_int_equal(be->fill(dev, dt, &it, 1.0), TN_OK);
        }
        dfree(dbuf, (size_t)(2 * n) * es);
        free(h), free(got);
    }
}

/* ---- reductions ------------------------------------------------------------------------------ */

/* does (x, xi) replace (m, mi): the first extremum wins, NaN beats numbers, first NaN wins */
static bool beats(bool is_max, double x, int64_t xi, double m, int64_t mi) {
    if (mi < 0) return true;
    bool xn = isnan(x), mn = isnan(m);
    if (xn || mn) return xn && (!mn || xi < mi);
    if (is_max ? x > m : x < m) return true;
    return x == m && xi < mi;
}

static tn_dtype sum_dtype(tn_dtype dt) { return is_fdt(dt) ? dt : TN_I64; }

/* Reduces `in` (device; host copy h) as a, checks against a host loop. */
static void check_reduce(const tn_red_args *a0, const void *h, const void *dbase,
                         const char *what) {
    tn_red_args a = *a0;
    const tn_dtype dt = a.dtype;
    int64_t M = 1, R = 1, n = 1;
    for (int d = 0; d < a.ndim; d++) {
        n *= a.shape[d];
        if (d == a.dim)
            R = a.shape[d];
        else
            M *= a.shape[d];
    }
    if (a.dim < 0) {
        M = 1;
        R = n;
    }
    const tn_dtype vdt = a.op == TN_RED_SUM ? sum_dtype(dt) : dt;
    void *dv = dalloc((size_t)M * 8), *di = dalloc((size_t)M * 8);
    a.vals = dv;
    a.idx = a.op == TN_RED_SUM ? NULL : di;
    a.in = (const char *)dbase + ((const char *)a0->in - (const char *)h);
    tn_status st = be->reduce(dev, &a);
    if (st != TN_OK) {
        case_failed("%s: status %d: %s", what, st, tn_last_error());
        dfree(dv, (size_t)M * 8), dfree(di, (size_t)M * 8);
        return;
    }
    char *gv = xmalloc((size_t)M * 8);
    int64_t *gi = xmalloc((size_t)M * 8);
    d2h(gv, dv, (size_t)M * esz(vdt));
    if (a.idx) d2h(gi, di, (size_t)M * 8);
    /* the same again: the same bits */
    char *gv2 = xmalloc((size_t)M * 8);
    assert_int_equal(be->reduce(dev, &a), TN_OK);
    d2h(gv2, dv, (size_t)M * esz(vdt));
    if (memcmp(gv, gv2, (size_t)M * esz(vdt)) != 0) case_failed("%s: not deterministic", what);

    for (int64_t o = 0; o < M; o++) {
        /* the slice's first element: o row-major over the kept dims */
        int64_t off = 0, rem = o, sr = 1;
        if (a.dim >= 0) {
            for (int d = a.ndim - 1; d >= 0; d--) {
                if (d == a.dim) continue;
                off += (rem % a.shape[d]) * a.stride[d];
                rem /= a.shape[d];
            }
            sr = a.stride[a.dim];
        }
        double sum = 0, sumabs = 0, m = 0;
        int64_t isum = 0, mi = -1;
        for (int64_t r = 0; r < R; r++) {
            int64_t e = (const char *)a0->in - (const char *)h;
            e = e / (int64_t)esz(dt) + off + r * sr;
            double x = getv(h, dt, e);
            sum += x;
            sumabs += fabs(x);
            if (!is_fdt(dt)) isum += (int64_t)x;
            if (beats(a.op == TN_RED_MAX, x, r, m, mi)) {
                m = x;
                mi = r;
            }
        }
        if (a.op == TN_RED_SUM) {
            double g = getv(gv, vdt, o);
            if (vdt == TN_I64) {
                if ((int64_t)g != isum) {
                    case_failed("%s: output %lld: %g != %lld", what, (long long)o, g,
                                (long long)isum);
                    break;
                }
            } else {
                /* a half's result rounds once more: half an ulp of it */
                double half_ulp = dt == TN_BF16 ? 0x1p-8 : dt == TN_F16 ? 0x1p-11 : 0;
                double want = sum / a.div,
                       tol = (dt == TN_F64 ? 1e-12 : 1e-6) * (sumabs / fabs(a.div)) + 1e-30 +
                             half_ulp * fabs(want);
                bool ok = isnan(want) ? isnan(g) : isinf(want) ? g == want : fabs(g - want) <= tol;
                if (!ok) {
                    case_failed("%s: output %lld: %.17g != %.17g", what, (long long)o, g, want);
                    break;
                }
            }
        } else {
            double g = getv(gv, vdt, o);
            if (!same_value(g, m) || gi[o] != mi) {
                case_failed("%s: output %lld: (%g, %lld) != (%g, %lld)", what, (long long)o, g,
                            (long long)gi[o], m, (long long)mi);
                break;
            }
        }
    }
    dfree(dv, (size_t)M * 8), dfree(di, (size_t)M * 8);
    free(gv), free(gi), free(gv2);
}

static void gen_reduce_values(void *p, tn_dtype dt, int64_t n, bool specials) {
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (dt == TN_BOOL)
            v = (double)(rnd() % 2);
        else if (is_fdt(dt)) {
            v = 0.5 * (double)rnd_int(-16, 16);
            uint64_t r = rnd() % 1000;
            if (specials && r == 0)
                v = NAN;
            else if (specials && r == 1)
                v = INFINITY;
            else if (specials && r == 2)
                v = -INFINITY;
        } else
            v = (double)rnd_int(-9, 9);
        putv(p, dt, i, v);
    }
}

static void test_reduce_dims(void **state) {
    (void)state;
    NEED_GPU();
    /* logical (A, B, C); stored in the order (b, c, a) */
    enum { A = 5, B = 6, C = 2001 };
    const int64_t n = A * B * C;
    for (int d = 0; d < TN_DTYPE_COUNT; d++) {
        tn_dtype dt = (tn_dtype)d;
        size_t es = esz(dt);
        for (int layout = 0; layout < 2; layout++) {
            char *h = xmalloc((size_t)n * es);
            gen_reduce_values(h, dt, n, layout == 1);
            char *dh = upload(h, (size_t)n * es);
            tn_red_args a;
            memset(&a, 0, sizeof a);
            a.dtype = dt;
            a.in = h;
            a.ndim = 3;
            a.shape[0] = A, a.shape[1] = B, a.shape[2] = C;
            if (layout == 0) { /* contiguous */
                a.stride[0] = B * C, a.stride[1] = C, a.stride[2] = 1;
            } else { /* permuted */
                a.stride[0] = 1, a.stride[1] = A * C, a.stride[2] = A;
            }
            a.div = 1;
            for (int op = 0; op < 3; op++)
                for (int dim = -1; dim < 3; dim++) {
                    if (dim < 0 && layout == 1) continue; /* all-reduce needs contiguous input */
                    a.op = (tn_red_op)op;
                    a.dim = dim;
                    a.div = op == TN_RED_SUM && dim >= 0 ? (double)a.shape[dim] : 1;
                    char what[96];
                    snprintf(what, sizeof what, "reduce %s op %d dim %d layout %d", dt_names[d], op,
                             dim, layout);
                    check_reduce(&a, h, dh, what);
                }
            dfree(dh, (size_t)n * es);
            free(h);
        }
    }
    end_cases();
}

/* Long reduced dims with few outputs (chunked), both orientations, and all-reduces of
 * several sizes, aligned and not. */
static void test_reduce_long(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t L = 200003;
    for (int d = 0; d < TN_DTYPE_COUNT; d++) {
        tn_dtype dt = (tn_dtype)d;
        size_t es = esz(dt);
        char *h = xmalloc((size_t)(3 * L) * es);
        gen_reduce_values(h, dt, 3 * L, true);
        char *dh = upload(h, (size_t)(3 * L) * es);
        tn_red_args a;
        memset(&a, 0, sizeof a);
        a.dtype = dt;
        a.in = h;
        a.ndim = 2;
        for (int op = 0; op < 3; op++) {
            a.op = (tn_red_op)op;
            char what[96];
            /* (3, L) over dim 1: rows */
            a.shape[0] = 3, a.shape[1] = L, a.stride[0] = L, a.stride[1] = 1, a.dim = 1, a.div = 2;
            snprintf(what, sizeof what, "reduce rows %s op %d", dt_names[d], op);
            check_reduce(&a, h, dh, what);
            /* (L, 3) over dim 0: columns */
            a.shape[0] = L, a.shape[1] = 3, a.stride[0] = 3, a.stride[1] = 1, a.dim = 0, a.div = 1;
            snprintf(what, sizeof what, "reduce columns %s op %d", dt_names[d], op);
            check_reduce(&a, h, dh, what);
        }
        dfree(dh, (size_t)(3 * L) * es);
        free(h);
    }
    /* all-reduces */
    const int64_t sizes[4] = {1, 1000, 65537, (3 << 20) + 7};
    for (int d = 0; d < TN_DTYPE_COUNT; d++) {
        tn_dtype dt = (tn_dtype)d;
        size_t es = esz(dt);
        for (int s = 0; s < 4; s++) {
            int64_t n = sizes[s];
            char *h = xmalloc((size_t)(n + 1) * es);
            gen_reduce_values(h, dt, n + 1, s != 3);
            char *dh = upload(h, (size_t)(n + 1) * es);
            for (int off = 0; off < 2; off++)
                for (int op = 0; op < 3; op++) {
                    tn_red_args a;
                    memset(&a, 0, sizeof a);
                    a.op = (tn_red_op)op;
                    a.dtype = dt;
                    a.in = h + (size_t)off * es;
                    a.ndim = 1;
                    a.shape[0] = n;
                    a.stride[0] = 1;
                    a.dim = -1;
                    a.div = op == TN_RED_SUM ? (double)n : 1;
                    char what[96];
                    snprintf(what, sizeof what, "reduce all %s n %lld offset %d op %d", dt_names[d],
                             (long long)n, off, op);
                    check_reduce(&a, h, dh, what);
                }
            dfree(dh, (size_t)(n + 1) * es);
            free(h);
        }
    }
    end_cases();
}

static void test_reduce_edges(void **state) {
    (void)state;
    NEED_GPU();
    /* an empty sum is 0 / div; an empty max is refused */
    float *dv = dalloc(64);
    tn_red_args a;
    memset(&a, 0, sizeof a);
    a.op = TN_RED_SUM;
    a.dtype = TN_F32;
    a.ndim = 2;
    a.shape[0] = 4, a.shape[1] = 0, a.stride[0] = 0, a.stride[1] = 1;
    a.dim = 1;
    a.vals = dv;
    a.div = 1;
    float *dummy = dalloc(16);
    a.in = (const char *)dummy;
    assert_int_equal(be->reduce(dev, &a), TN_OK);
    float got[4] = {1, 1, 1, 1};
    d2h(got, dv, sizeof got);
    for (int i = 0; i < 4; i++)
        assert_true(got[i] == 0.0f);
    a.op = TN_RED_MAX;
    assert_int_equal(be->reduce(dev, &a), TN_ERR_INDEX);
    /* a 0-d input */
    float one = 4.5f;
    h2d(dummy, &one, 4);
    memset(&a, 0, sizeof a);
    a.op = TN_RED_MAX;
    a.dtype = TN_F32;
    a.in = (const char *)dummy;
    a.ndim = 0;
    a.dim = 0;
    a.vals = dv;
    int64_t *di = dalloc(8);
    a.idx = di;
    assert_int_equal(be->reduce(dev, &a), TN_OK);
    int64_t idx = -1;
    d2h(got, dv, 4);
    d2h(&idx, di, 8);
    assert_true(got[0] == 4.5f);
    assert_int_equal(idx, 0);
    a.dim = 3;
    assert_int_equal(be->reduce(dev, &a), TN_ERR_INDEX);
    dfree(dv, 64), dfree(dummy, 16), dfree(di, 8);
}

/* ---- matrix products ---------------------------------------------------------------------- */

static void ref_gemm(const double *A, const double *Bm, double *Cm, int64_t m, int64_t n, int64_t k,
                     int64_t rsa, int64_t csa, int64_t rsb, int64_t csb, int64_t rsc, bool acc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += A[i * rsa + p * csa] * Bm[p * rsb + j * csb];
            Cm[i * rsc + j] = acc ? Cm[i * rsc + j] + s : s;
        }
}

/* One batched product with the given layouts, checked against doubles. */
static void gemm_case(tn_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc,
                      const tn_gemm_batch *batch, int64_t na, int64_t nb_, int64_t nc) {
    const size_t es = esz(dt);
    int64_t rsa = ta ? 1 : k, csa = ta ? m : 1, rsb = tb ? 1 : n, csb = tb ? k : 1, rsc = n + 3;
    int64_t asz = na * m * k, bsz = nb_ * k * n, csz = nc * m * rsc;
    double *A = xmalloc((size_t)(asz + 1) * 8), *Bm = xmalloc((size_t)(bsz + 1) * 8);
    double *Cw = xmalloc((size_t)(csz + 1) * 8);
    char *hbuf = xmalloc((size_t)(asz + bsz + csz + 3) * es);
    for (int64_t i = 0; i < asz; i++)
        A[i] = (double)rnd_int(-64, 64) / 16;
    for (int64_t i = 0; i < bsz; i++)
        Bm[i] = (double)rnd_int(-64, 64) / 16;
    for (int64_t i = 0; i < csz; i++)
        Cw[i] = acc ? (double)rnd_int(-8, 8) : NAN; /* beta = 0 must not read C */
    char *dA = dalloc((size_t)(asz + 1) * es), *dB = dalloc((size_t)(bsz + 1) * es);
    char *dC = dalloc((size_t)(csz + 1) * es);
    for (int64_t i = 0; i < asz; i++)
        putv(hbuf, dt, i, A[i]);
    h2d(dA, hbuf, (size_t)asz * es);
    for (int64_t i = 0; i < bsz; i++)
        putv(hbuf, dt, i, Bm[i]);
    h2d(dB, hbuf, (size_t)bsz * es);
    for (int64_t i = 0; i < csz; i++)
        putv(hbuf, dt, i, Cw[i]);
    h2d(dC, hbuf, (size_t)csz * es);
    tn_gemm g = {m, n, k, dA, rsa, csa, dB, rsb, csb, dC, rsc, acc};
    tn_status st = be->gemm(dev, dt, &g, batch);
    if (st != TN_OK) {
        case_failed("gemm %s m%lld n%lld k%lld: %s", dt_names[dt], (long long)m, (long long)n,
                    (long long)k, tn_last_error());
        goto done;
    }
    d2h(hbuf, dC, (size_t)csz * es);
    /* reference, batch by batch */
    int64_t total = 1;
    if (batch)
        for (int d = 0; d < batch->ndim; d++)
            total *= batch->shape[d];
    for (int64_t t = 0; t < total; t++) {
        int64_t oa = 0, ob = 0, oc = 0, rem = t;
        if (batch)
            for (int d = batch->ndim - 1; d >= 0; d--) {
                int64_t i = rem % batch->shape[d];
                rem /= batch->shape[d];
                oa += i * batch->bsa[d], ob += i * batch->bsb[d], oc += i * batch->bsc[d];
            }
        ref_gemm(A + oa, Bm + ob, Cw + oc, m, n, k, rsa, csa, rsb, csb, rsc, acc);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double w = Cw[oc + i * rsc + j], gv = getv(hbuf, dt, oc + i * rsc + j);
                /* halves: the sums are exact in float32 (multiples of 1/256 below 2^11), so
                 * the one rounding of the output is all the error there is */
                double tol = dt == TN_BF16  ? fabs(w) / 256
                             : dt == TN_F16 ? fabs(w) / 2048
                                            : (dt == TN_F32 ? 1e-5 : 1e-12) * (1 + fabs(w) + (double)k);
                if (!(fabs(gv - w) <= tol)) {
                    case_failed("gemm %s m%lld n%lld k%lld ta%d tb%d acc%d batch %lld (%lld,%lld): "
                                "%g != %g",
                                dt_names[dt], (long long)m, (long long)n, (long long)k, ta, tb, acc,
                                (long long)t, (long long)i, (long long)j, gv, w);
                    goto done;
                }
            }
    }
done:
    dfree(dA, (size_t)(asz + 1) * es), dfree(dB, (size_t)(bsz + 1) * es),
        dfree(dC, (size_t)(csz + 1) * es);
    free(A), free(Bm), free(Cw), free(hbuf);
}

static void test_gemm(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t m = 33, n = 47, k = 65;
    /* bfloat16 and float16 on tensor cores, not widened */
    assert_int_equal(be->gemm_halves, (1u << TN_BF16) | (1u << TN_F16));
    for (int d = 0; d < 4; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++)
                    gemm_case(float_dts[d], m, n, k, ta, tb, acc, NULL, 1, 1, 1);
    for (int d = 0; d < 4; d++) {
        const tn_dtype dt = float_dts[d];
        /* batch (2, 3): A broadcast over dim 0 (a loop over dim 0, strided calls over dim 1) */
        tn_gemm_batch b1 = {
            2, {2, 3}, {0, m * k}, {3 * k * n, k * n}, {3 * m * (n + 3), m * (n + 3)}};
        gemm_case((tn_dtype)dt, m, n, k, false, true, false, &b1, 3, 6, 6);
        /* batch (2, 3) contiguous: merged into one strided call of 6 */
        tn_gemm_batch b2 = {
            2, {2, 3}, {3 * m * k, m * k}, {3 * k * n, k * n}, {3 * m * (n + 3), m * (n + 3)}};
        gemm_case((tn_dtype)dt, m, n, k, true, false, true, &b2, 6, 6, 6);
        /* B broadcast to every batch, vector shapes */
        tn_gemm_batch b3 = {1, {4}, {1 * 9}, {0}, {1 * (5 + 3)}};
        gemm_case((tn_dtype)dt, 1, 5, 9, false, false, false, &b3, 4, 1, 4);
        gemm_case((tn_dtype)dt, 7, 1, 3, true, true, false, NULL, 1, 1, 1);
        gemm_case((tn_dtype)dt, 4, 6, 0, false, false, false, NULL, 1, 1, 1); /* k = 0: zeros */
    }
    end_cases();
    /* refusals */
    void *d = dalloc(4096);
    tn_gemm g = {4, 4, 4, d, 4, 1, d, 4, 1, d, 4, false};
    assert_int_equal(be->gemm(dev, TN_I32, &g, NULL), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE,
                    "CUDA matmul supports float32, float64, bfloat16 and float16 only");
    g.csa = 2;
    g.rsa = 8;
    assert_int_equal(be->gemm(dev, TN_F32, &g, NULL), TN_ERR_INVALID_ARGUMENT);
    dfree(d, 4096);
}

/* ---- softmax --------------------------------------------------------------------------------- */

/* out: the result; scale: the size of the sum's terms behind each element
 * (the sums are taken in the element type on the GPU, in double here). */
static void ref_softmax(int mode, const double *x, const double *y, double *out, double *scale,
                        int64_t outer, int64_t dn, int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t b = o * dn * inner + i;
            if (mode == TN_SM_FWD || mode == TN_LSM_FWD) {
                double m = x[b];
                for (int64_t d = 1; d < dn; d++) {
                    double v = x[b + d * inner];
                    m = v > m || v != v ? v : m;
                }
                double s = 0;
                for (int64_t d = 0; d < dn; d++)
                    s += exp(x[b + d * inner] - m);
                for (int64_t d = 0; d < dn; d++) {
                    int64_t e = b + d * inner;
                    out[e] = mode == TN_SM_FWD ? exp(x[e] - m) / s : (x[e] - m) - log(s);
                    scale[e] = 1 + fabs(x[e] - m);
                }
            } else {
                double s = 0, sabs = 0;
                for (int64_t d = 0; d < dn; d++) {
                    int64_t e = b + d * inner;
                    s += mode == TN_SM_BWD ? x[e] * y[e] : x[e];
                    sabs += fabs(mode == TN_SM_BWD ? x[e] * y[e] : x[e]);
                }
                for (int64_t d = 0; d < dn; d++) {
                    int64_t e = b + d * inner;
                    out[e] = mode == TN_SM_BWD ? y[e] * (x[e] - s) : x[e] - exp(y[e]) * s;
                    scale[e] = 1 + fabs(x[e]) + (mode == TN_SM_BWD ? fabs(y[e]) : exp(y[e])) * sabs;
                }
            }
        }
}

static void test_softmax(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t shapes[5][3] = {{3, 37, 1}, {2, 5000, 1}, {4, 7, 5}, {6, 10, 1}, {64, 300, 1}};
    for (int dt = TN_F32; dt <= TN_F64; dt++)
        for (int s = 0; s < 5; s++) {
            const int64_t outer = shapes[s][0], dn = shapes[s][1], inner = shapes[s][2];
            const int64_t n = outer * dn * inner;
            const size_t es = esz((tn_dtype)dt);
            double *x = xmalloc((size_t)n * 8), *y = xmalloc((size_t)n * 8);
            double *want = xmalloc((size_t)n * 8), *scale = xmalloc((size_t)n * 8);
            char *hb = xmalloc((size_t)n * es);
            for (int64_t i = 0; i < n; i++) {
                x[i] = (double)rnd_int(-400, 400) / 100;
                y[i] = (double)rnd_int(-400, 0) / 100; /* a log-probability-like y */
            }
            if (s == 0) x[40] = NAN;          /* row 1 becomes NaN */
            if (s == 0) x[80] = INFINITY;     /* row 2: inf - inf */
            for (int64_t i = 0; i < n; i++) { /* the values the GPU sees */
                putv(hb, (tn_dtype)dt, i, x[i]);
                x[i] = getv(hb, (tn_dtype)dt, i);
            }
            char *dx = upload(hb, (size_t)n * es);
            for (int64_t i = 0; i < n; i++) {
                putv(hb, (tn_dtype)dt, i, y[i]);
                y[i] = getv(hb, (tn_dtype)dt, i);
            }
            char *dy = upload(hb, (size_t)n * es), *dout = dalloc((size_t)n * es);
            for (int mode = 0; mode < 4; mode++) {
                tn_sm_args a = {mode, (tn_dtype)dt, outer, dn, inner, dx, dy, dout};
                assert_int_equal(be->softmax(dev, &a), TN_OK);
                d2h(hb, dout, (size_t)n * es);
                ref_softmax(mode, x, y, want, scale, outer, dn, inner);
                for (int64_t i = 0; i < n; i++) {
                    double g = getv(hb, (tn_dtype)dt, i), w = want[i];
                    /* a few roundings of each term and of the tree of the sum */
                    double tol = (dt == TN_F32 ? 1e-6 : 2e-15) * scale[i] * 16;
                    bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= tol;
                    if (!ok) {
                        case_failed("softmax %s shape %d mode %d at %lld: %.10g != %.10g",
                                    dt_names[dt], s, mode, (long long)i, g, w);
                        break;
                    }
                }
            }
            dfree(dx, (size_t)n * es), dfree(dy, (size_t)n * es), dfree(dout, (size_t)n * es);
            free(x), free(y), free(want), free(scale), free(hb);
        }
    end_cases();
    tn_sm_args bad = {TN_SM_FWD, TN_I32, 1, 1, 1, NULL, NULL, NULL};
    assert_int_equal(be->softmax(dev, &bad), TN_ERR_DTYPE);
}

/* ---- layer norm ------------------------------------------------------------------------------ */

/* The kernel's formulas in double on the host (x, w, b, dy as the device sees them). */
static void ref_layer_norm(int64_t rows, int64_t n, const double *x, const double *w,
                           const double *b, const double *dy, double eps, double *y, double *mean,
                           double *rstd, double *dx, double *dw, double *db) {
    for (int64_t j = 0; j < n; j++)
        dw[j] = db[j] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n, *gr = dy + r * n;
        double m = 0, v = 0, s1 = 0, s2 = 0;
        for (int64_t j = 0; j < n; j++)
            m += xr[j];
        m /= (double)n;
        for (int64_t j = 0; j < n; j++)
            v += (xr[j] - m) * (xr[j] - m);
        double rs = 1 / sqrt(v / (double)n + eps);
        mean[r] = m, rstd[r] = rs;
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - m) * rs, g = gr[j] * (w ? w[j] : 1);
            y[r * n + j] = xh * (w ? w[j] : 1) + (b ? b[j] : 0);
            s1 += g, s2 += g * xh;
            dw[j] += gr[j] * xh, db[j] += gr[j];
        }
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - m) * rs, g = gr[j] * (w ? w[j] : 1);
            dx[r * n + j] = rs * (g - s1 / (double)n - xh * s2 / (double)n);
        }
    }
}

static void ln_check(const char *what, tn_dtype dt, const void *dptr, const double *want,
                     int64_t n, double scale) {
    size_t es = esz(dt);
    char *h = xmalloc((size_t)n * es);
    d2h(h, dptr, (size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        double g = getv(h, dt, i), w = want[i];
        double tol = (dt == TN_F32 ? 4e-6 : 1e-12) * (scale + fabs(w));
        if (!(fabs(g - w) <= tol)) {
            case_failed("layer_norm %s %s at %lld: %.10g != %.10g", dt_names[dt], what,
                        (long long)i, g, w);
            break;
        }
    }
    free(h);
}

static void test_layer_norm(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t shapes[4][2] = {{1024, 128}, {7, 5}, {3, 1000}, {33, 32}};
    for (int dt = TN_F32; dt <= TN_F64; dt++)
        for (int s = 0; s < 4; s++)
            for (int wb = 0; wb < 2; wb++) {
                const int64_t rows = shapes[s][0], n = shapes[s][1], nx = rows * n;
                const size_t es = esz((tn_dtype)dt);
                double *x = xmalloc((size_t)nx * 8), *dy = xmalloc((size_t)nx * 8);
                double *w = xmalloc((size_t)n * 8), *b = xmalloc((size_t)n * 8);
                double *y = xmalloc((size_t)nx * 8), *dx = xmalloc((size_t)nx * 8);
                double *mean = xmalloc((size_t)rows * 8), *rstd = xmalloc((size_t)rows * 8);
                double *dw = xmalloc((size_t)n * 8), *db = xmalloc((size_t)n * 8);
                char *hb = xmalloc((size_t)nx * es);
                for (int64_t i = 0; i < nx; i++) { /* the values the GPU sees */
                    putv(hb, (tn_dtype)dt, i, 3 + (double)rnd_int(-400, 400) / 100);
                    x[i] = getv(hb, (tn_dtype)dt, i);
                }
                char *dxp = upload(hb, (size_t)nx * es);
                for (int64_t i = 0; i < nx; i++) {
                    putv(hb, (tn_dtype)dt, i, (double)rnd_int(-400, 400) / 100);
                    dy[i] = getv(hb, (tn_dtype)dt, i);
                }
                char *dgp = upload(hb, (size_t)nx * es);
                for (int64_t i = 0; i < n; i++) {
                    putv(hb, (tn_dtype)dt, i, (double)rnd_int(-200, 200) / 100);
                    w[i] = getv(hb, (tn_dtype)dt, i);
                    putv(hb, (tn_dtype)dt, n + i, (double)rnd_int(-200, 200) / 100);
                    b[i] = getv(hb, (tn_dtype)dt, n + i);
                }
                char *dwp = upload(hb, (size_t)n * es), *dbp = upload(hb + n * es, (size_t)n * es);
                char *dyo = dalloc((size_t)nx * es), *dmean = dalloc((size_t)rows * es);
                char *drstd = dalloc((size_t)rows * es), *ddx = dalloc((size_t)nx * es);
                char *ddw = dalloc((size_t)n * es), *ddb = dalloc((size_t)n * es);
                ref_layer_norm(rows, n, x, wb ? w : NULL, wb ? b : NULL, dy, 1e-5, y, mean, rstd,
                               dx, dw, db);
                tn_ln_args a = {.mode = TN_LN_FWD, .dtype = (tn_dtype)dt, .rows = rows, .cols = n,
                                .eps = 1e-5, .x = dxp, .weight = wb ? dwp : NULL,
                                .bias = wb ? dbp : NULL, .mean = dmean, .rstd = drstd, .y = dyo};
                assert_int_equal(be->layer_norm(dev, &a), TN_OK);
                ln_check("y", (tn_dtype)dt, dyo, y, nx, 1);
                ln_check("mean", (tn_dtype)dt, dmean, mean, rows, 1);
                ln_check("rstd", (tn_dtype)dt, drstd, rstd, rows, 1);
                a.mode = TN_LN_BWD, a.dy = dgp, a.dx = ddx, a.dweight = ddw, a.dbias = ddb;
                a.y = NULL;
                assert_int_equal(be->layer_norm(dev, &a), TN_OK);
                ln_check("dx", (tn_dtype)dt, ddx, dx, nx, 16);
                ln_check("dweight", (tn_dtype)dt, ddw, dw, n, (double)rows);
                ln_check("dbias", (tn_dtype)dt, ddb, db, n, (double)rows);
                /* dx only */
                a.dweight = a.dbias = NULL;
                assert_int_equal(be->layer_norm(dev, &a), TN_OK);
                ln_check("dx alone", (tn_dtype)dt, ddx, dx, nx, 16);
                dfree(dxp, (size_t)nx * es), dfree(dgp, (size_t)nx * es);
                dfree(dwp, (size_t)n * es), dfree(dbp, (size_t)n * es);
                dfree(dyo, (size_t)nx * es), dfree(dmean, (size_t)rows * es);
                dfree(drstd, (size_t)rows * es), dfree(ddx, (size_t)nx * es);
                dfree(ddw, (size_t)n * es), dfree(ddb, (size_t)n * es);
                free(x), free(dy), free(w), free(b), free(y), free(dx), free(mean), free(rstd);
                free(dw), free(db), free(hb);
            }
    end_cases();
    tn_ln_args bad = {.mode = TN_LN_FWD, .dtype = TN_I32, .rows = 1, .cols = 1};
    assert_int_equal(be->layer_norm(dev, &bad), TN_ERR_DTYPE);
    tn_ln_args empty = {.mode = TN_LN_FWD, .dtype = TN_F32, .rows = 0, .cols = 4};
    assert_int_equal(be->layer_norm(dev, &empty), TN_OK);
}

/* ---- non-finite check ------------------------------------------------------------------------- */

static tn_nf_item nf(const void *p, int64_t n, tn_dtype dt, uint64_t key, int word) {
    return (tn_nf_item){.p = p, .n = n, .key = key, .dt = dt, .word = word};
}

/* The batched check against known contents: the smallest key wins per word whatever the order
 * in the batch or across calls, NaN over Inf in one tensor, a NaN in the last element of a tensor
 * spread over many blocks, float64, integers and empty tensors skipped, the poll clears, bad
 * arguments refused with nothing recorded. */
static void test_nonfinite(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t n = 300001;
    float *h = xmalloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)i;
    float *d = upload(h, (size_t)n * 4);
    uint64_t w[TN_NONFINITE_WORDS];
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK); /* whatever came before: cleared */
    tn_nf_item one = nf(d, n, TN_F32, 14, 0);
    assert_int_equal(be->nonfinite_check(dev, 1, &one), TN_OK);
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK);
    assert_true(w[0] == 0 && w[1] == 0);
    h[n - 1] = NAN;
    float *bad = upload(h, (size_t)n * 4); /* NaN in its last element only */
    double mix[3] = {1, INFINITY, NAN}, inf = -INFINITY;
    double *dmix = upload(mix, sizeof mix), *dinf = upload(&inf, 8);
    /* keys out of order in the batch: the smallest bad one of each word wins */
    tn_nf_item items[7] = {
        nf(bad, n, TN_F32, 40, 0),    nf(d, n, TN_F32, 2, 0),     /* finite: no record */
        nf(dinf, 1, TN_F64, 24, 0),   nf(bad, n, TN_I32, 4, 0),   /* integers: finite */
        nf(bad, 0, TN_F32, 6, 0),     nf(dmix, 3, TN_F64, 30, 1), /* NaN beats its Inf */
        nf(bad, n, TN_F32, 32, 1),
    };
    assert_int_equal(be->nonfinite_check(dev, 7, items), TN_OK);
    tn_nf_item later = nf(dinf, 1, TN_F64, 8, 1); /* a second call with a smaller key wins */
    assert_int_equal(be->nonfinite_check(dev, 1, &later), TN_OK);
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK);
    assert_true(w[0] == (24u | TN_NONFINITE_INF));
    assert_true(w[1] == (8u | TN_NONFINITE_INF));
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK); /* the poll cleared them */
    assert_true(w[0] == 0 && w[1] == 0);
    tn_nf_item nan_mix = nf(dmix, 3, TN_F64, 10, 1);
    assert_int_equal(be->nonfinite_check(dev, 1, &nan_mix), TN_OK);
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK);
    assert_true(w[0] == 0 && w[1] == 10u);
    /* the halves: an Inf in a bfloat16 tensor, a NaN in a float16 one, a finite one of each */
    tn_bf16 hb[3] = {tn_f32_to_bf16(1), tn_f32_to_bf16(INFINITY), tn_f32_to_bf16(-2)};
    tn_f16 hf[3] = {tn_f32_to_f16(1), tn_f32_to_f16(65504), tn_f32_to_f16(NAN)};
    tn_bf16 *dhb = upload(hb, sizeof hb);
    tn_f16 *dhf = upload(hf, sizeof hf);
    tn_nf_item halves[4] = {nf(dhb, 3, TN_BF16, 12, 0), nf(dhb, 1, TN_BF16, 2, 0),
                            nf(dhf, 3, TN_F16, 16, 1), nf(dhf, 2, TN_F16, 4, 1)};
    assert_int_equal(be->nonfinite_check(dev, 4, halves), TN_OK);
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK);
    assert_true(w[0] == (12u | TN_NONFINITE_INF) && w[1] == 16u);
    dfree(dhb, sizeof hb), dfree(dhf, sizeof hf);
    /* a full batch: the last tensor alone is bad */
    tn_nf_item full[TN_NONFINITE_MAX];
    for (int i = 0; i < TN_NONFINITE_MAX; i++)
        full[i] = nf(i == TN_NONFINITE_MAX - 1 ? (const void *)bad : d, n, TN_F32,
                     (uint64_t)(100 + 2 * i), 0);
    assert_int_equal(be->nonfinite_check(dev, TN_NONFINITE_MAX, full), TN_OK);
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK);
    assert_true(w[0] == 100u + 2 * (TN_NONFINITE_MAX - 1) && w[1] == 0);
    /* refused, nothing recorded */
    tn_nf_item odd = nf(bad, n, TN_F32, 3, 0), zero = nf(bad, n, TN_F32, 0, 0),
               badword = nf(bad, n, TN_F32, 2, 2), null = nf(NULL, 4, TN_F32, 2, 0);
    assert_int_equal(be->nonfinite_check(dev, 1, &odd), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->nonfinite_check(dev, 1, &zero), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->nonfinite_check(dev, 1, &badword), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->nonfinite_check(dev, 1, &null), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->nonfinite_check(dev, TN_NONFINITE_MAX + 1, full), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->nonfinite_check(dev, 0, NULL), TN_OK);
    tn_clear_error();
    assert_int_equal(be->nonfinite_poll(dev, w), TN_OK);
    assert_true(w[0] == 0 && w[1] == 0);
    dfree(d, (size_t)n * 4), dfree(bad, (size_t)n * 4), dfree(dmix, sizeof mix), dfree(dinf, 8);
    free(h);
}

/* ---- the gradient monitor's measure ------------------------------------------------------------ */

/* grad_stats against the host (float64 sums, exact maxima): tensors of 0, 1, a few and many
 * elements in one call (the last one past the cap of blocks per tensor, so its blocks stride
 * and its fold spans several threads), a NaN, float64, the same bits twice, bad arguments. */
static void test_grad_stats(void **state) {
    (void)state;
    NEED_GPU();
    enum { K = 6 };
    const int64_t n[K] = {0, 1, 37, 4096, 300001, 5000011};
    float *h[K], *d[K];
    const void *dp[K];
    for (int k = 0; k < K; k++) {
        h[k] = xmalloc((size_t)(n[k] ? n[k] : 1) * 4);
        for (int64_t i = 0; i < n[k]; i++)
            h[k][i] = (float)(rnd_int(-1000, 1000) / 64.0);
        d[k] = n[k] ? upload(h[k], (size_t)n[k] * 4) : NULL;
        dp[k] = d[k];
    }
    double *out = dalloc(2 * K * sizeof(double)), got[2 * K], again[2 * K];
    assert_int_equal(be->grad_stats(dev, TN_F32, K, dp, n, out), TN_OK);
    d2h(got, out, sizeof got);
    for (int k = 0; k < K; k++)
        tt_assert_sq_max(h[k], n[k], &got[2 * k]);
    assert_int_equal(be->grad_stats(dev, TN_F32, K, dp, n, out), TN_OK);
    d2h(again, out, sizeof again);
    assert_memory_equal(got, again, sizeof got); /* deterministic */
    /* a NaN wins the maximum, and makes the sum NaN */
    h[4][12345] = NAN;
    h2d(d[4], h[4], (size_t)n[4] * 4);
    assert_int_equal(be->grad_stats(dev, TN_F32, 1, &dp[4], &n[4], out), TN_OK);
    d2h(got, out, 2 * sizeof(double));
    assert_true(isnan(got[0]) && isnan(got[1]));
    /* float64 */
    double hv[3] = {3, -4, 0.5}, *dv = upload(hv, sizeof hv);
    const void *dvp = dv;
    const int64_t n3 = 3;
    assert_int_equal(be->grad_stats(dev, TN_F64, 1, &dvp, &n3, out), TN_OK);
    d2h(got, out, 2 * sizeof(double));
    assert_true(got[0] == 25.25 && got[1] == 4);
    /* the halves, read as float32 */
    tn_bf16 hb[3] = {tn_f32_to_bf16(3), tn_f32_to_bf16(-4), tn_f32_to_bf16(0.5f)};
    tn_f16 hf[3] = {tn_f32_to_f16(3), tn_f32_to_f16(-4), tn_f32_to_f16(0.5f)};
    const void *dh[2] = {upload(hb, sizeof hb), upload(hf, sizeof hf)};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(be->grad_stats(dev, k ? TN_F16 : TN_BF16, 1, &dh[k], &n3, out), TN_OK);
        d2h(got, out, 2 * sizeof(double));
        assert_true(got[0] == 25.25 && got[1] == 4);
        dfree((void *)dh[k], sizeof hb);
    }
    /* bad arguments: refused, nothing enqueued */
    assert_int_equal(be->grad_stats(dev, TN_I32, 1, &dvp, &n3, out), TN_ERR_DTYPE);
    assert_int_equal(be->grad_stats(dev, TN_F32, TN_GRAD_STATS_MAX + 1, dp, n, out),
                     TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->grad_stats(dev, TN_F32, 1, dp, &n[1], NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->grad_stats(dev, TN_F32, 0, dp, n, out), TN_OK);
    dfree(out, 2 * K * sizeof(double)), dfree(dv, sizeof hv);
    for (int k = 0; k < K; k++) {
        if (d[k]) dfree(d[k], (size_t)n[k] * 4);
        free(h[k]);
    }
}

/* ---- fused cross-entropy ------------------------------------------------------------------------ */

/* The device's cross_entropy against the CPU backend's from the same inputs, in each row layout
 * (c = 7: a thread per row; 100: a warp; 3000: a block), float32 and float64, an ignored row, a
 * row with a NaN: stats, loss and gradient (its scale from g, read by the kernel). The
 * transcendentals differ between the two (CUDA's exp and log), hence a tolerance; NaN where the
 * CPU has NaN. Bad arguments refused. */
static void test_cross_entropy(void **state) {
    (void)state;
    NEED_GPU();
    const tn_backend *cpu = tn__backends[TN_CPU];
    const int64_t cs[3] = {7, 100, 3000};
    for (int dt = TN_F32; dt <= TN_F64; dt++)
        for (int k = 0; k < 3; k++) {
            const int64_t n = 37, c = cs[k];
            const size_t es = esz((tn_dtype)dt), xb = (size_t)(n * c) * es;
            char *x = xmalloc(xb), *gx_cpu = xmalloc(xb), *gx_dev = xmalloc(xb);
            int64_t t[37];
            for (int64_t i = 0; i < n * c; i++) {
                double v = (double)rnd_int(-4000, 4000) / 500.0;
                if (dt == TN_F32) ((float *)x)[i] = (float)v;
                else ((double *)x)[i] = v;
            }
            for (int64_t i = 0; i < n; i++) t[i] = (i * 13 + 5) % c;
            t[3] = -100; /* ignored */
            if (dt == TN_F32) ((float *)x)[9 * c + 1] = NAN; /* row 9: NaN everywhere */
            else ((double *)x)[9 * c + 1] = NAN;
            char st_cpu[37 * 2 * 8], st_dev[37 * 2 * 8], l_cpu[8], l_dev[8];
            const double count = (double)(n - 1);
            tn_ce_args a = {.mode = TN_CE_FWD, .dtype = (tn_dtype)dt, .n = n, .c = c, .x = x,
                            .target = t, .ignore_index = -100, .stats = st_cpu, .loss = l_cpu,
                            .count = count};
            assert_int_equal(cpu->cross_entropy(0, &a), TN_OK);
            char *dx = upload(x, xb), *dst = dalloc(sizeof st_dev), *dl = dalloc(8);
            int64_t *dtg = upload(t, sizeof t);
            a.x = dx, a.target = dtg, a.stats = dst, a.loss = dl;
            assert_int_equal(be->cross_entropy(dev, &a), TN_OK);
            d2h(st_dev, dst, (size_t)(2 * n) * es);
            d2h(l_dev, dl, es);
            const double tol = dt == TN_F32 ? 2e-5 : 1e-12;
            for (int64_t i = 0; i < 2 * n; i++) {
                double w = getv(st_cpu, (tn_dtype)dt, i), g = getv(st_dev, (tn_dtype)dt, i);
                if (isnan(w) ? !isnan(g) : fabs(w - g) > tol * (1 + fabs(w)))
                    fail_msg("cross_entropy stats %s c=%lld at %lld: %g vs %g", dt_names[dt],
                             (long long)c, (long long)i, g, w);
            }
            assert_true(isnan(getv(l_cpu, (tn_dtype)dt, 0)) && isnan(getv(l_dev, (tn_dtype)dt, 0)));
            /* backward: S = -g / count, g = 0.75 read by each kernel from its own memory */
            char gval[8];
            if (dt == TN_F32) *(float *)gval = 0.75f;
            else *(double *)gval = 0.75;
            char *dg = upload(gval, es), *dgx = dalloc(xb);
            tn_ce_args b = {.mode = TN_CE_BWD, .dtype = (tn_dtype)dt, .n = n, .c = c, .x = x,
                            .target = t, .ignore_index = -100, .stats = st_cpu, .g = gval,
                            .count = count, .gx = gx_cpu};
            assert_int_equal(cpu->cross_entropy(0, &b), TN_OK);
            b.x = dx, b.target = dtg, b.stats = dst, b.g = dg, b.gx = dgx;
            assert_int_equal(be->cross_entropy(dev, &b), TN_OK);
            d2h(gx_dev, dgx, xb);
            for (int64_t i = 0; i < n * c; i++) {
                double w = getv(gx_cpu, (tn_dtype)dt, i), g = getv(gx_dev, (tn_dtype)dt, i);
                if (isnan(w) ? !isnan(g) : fabs(w - g) > tol * (1 + fabs(w)))
                    fail_msg("cross_entropy grad %s c=%lld at %lld: %g vs %g", dt_names[dt],
                             (long long)c, (long long)i, g, w);
            }
            for (int64_t j = 0; j < c; j++) /* the ignored row */
                assert_true(getv(gx_dev, (tn_dtype)dt, 3 * c + j) == 0);
            tn_ce_args nog = b; /* a backward without the loss's gradient: refused */
            nog.g = NULL;
            assert_int_equal(be->cross_entropy(dev, &nog), TN_ERR_INVALID_ARGUMENT);
            /* without the NaN row, a finite loss that matches */
            a.x = x, a.target = t, a.stats = st_cpu, a.loss = l_cpu, a.n = 9;
            a.count = 8;
            assert_int_equal(cpu->cross_entropy(0, &a), TN_OK);
            a.x = dx, a.target = dtg, a.stats = dst, a.loss = dl;
            assert_int_equal(be->cross_entropy(dev, &a), TN_OK);
            d2h(l_dev, dl, es);
            double lw = getv(l_cpu, (tn_dtype)dt, 0), lg_ = getv(l_dev, (tn_dtype)dt, 0);
            assert_true(isfinite(lw) && fabs(lw - lg_) <= tol * (1 + fabs(lw)));
            /* bad arguments: refused */
            tn_ce_args bad = a;
            bad.dtype = TN_I32;
            assert_int_equal(be->cross_entropy(dev, &bad), TN_ERR_DTYPE);
            bad = a, bad.mode = 7;
            assert_int_equal(be->cross_entropy(dev, &bad), TN_ERR_INVALID_ARGUMENT);
            bad = a, bad.c = 0;
            assert_int_equal(be->cross_entropy(dev, &bad), TN_ERR_INVALID_ARGUMENT);
            bad = a, bad.loss = NULL;
            assert_int_equal(be->cross_entropy(dev, &bad), TN_ERR_INVALID_ARGUMENT);
            assert_int_equal(be->cross_entropy(dev, NULL), TN_ERR_INVALID_ARGUMENT);
            tn_clear_error();
            dfree(dx, xb), dfree(dst, sizeof st_dev), dfree(dl, 8), dfree(dtg, sizeof t);
            dfree(dg, es), dfree(dgx, xb);
            free(x), free(gx_cpu), free(gx_dev);
        }
}

/* ---- read-back without waiting ------------------------------------------------------------------ */

/* readback_begin takes the bytes as they are at that point of the stream: a write enqueued after
 * it does not show; tickets outstanding together end in any order, on another thread too; a
 * ticket ended with dst NULL is reused; bad arguments refused. */
static void *end_ticket(void *t) {
    double v[4];
    tn_status st = be->readback_end(t, v);
    return st == TN_OK && v[0] == 30 && v[3] == 33 ? t : NULL;
}

static void test_readback(void **state) {
    (void)state;
    NEED_GPU();
    enum { N = 4, T = 3 };
    double h[N], got[N];
    double *d = dalloc(N * sizeof(double));
    void *tk[T];
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < N; i++)
            h[i] = 10 * t + i;
        h2d(d, h, sizeof h);
        assert_int_equal(be->readback_begin(dev, d, sizeof h, &tk[t]), TN_OK);
        assert_non_null(tk[t]);
    }
    for (int i = 0; i < N; i++)
        h[i] = -1;
    h2d(d, h, sizeof h); /* after every copy above, in stream order */
    for (int t = T - 1; t >= 0; t--) { /* the reverse order */
        memset(got, 0, sizeof got);
        assert_int_equal(be->readback_end(tk[t], got), TN_OK);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == 10 * t + i);
    }
    /* ended on another thread; a ticket dropped without reading */
    for (int i = 0; i < N; i++)
        h[i] = 30 + i;
    h2d(d, h, sizeof h);
    void *t1, *t2;
    assert_int_equal(be->readback_begin(dev, d, sizeof h, &t1), TN_OK);
    assert_int_equal(be->readback_begin(dev, d, TN_READBACK_MAX < 8 ? 1 : 8, &t2), TN_OK);
    pthread_t th;
    void *res = NULL;
    assert_int_equal(pthread_create(&th, NULL, end_ticket, t1), 0);
    assert_int_equal(pthread_join(th, &res), 0);
    assert_ptr_equal(res, t1);
    assert_int_equal(be->readback_end(t2, NULL), TN_OK);
    /* bad arguments: refused, no ticket */
    void *bad = (void *)1;
    assert_int_equal(be->readback_begin(dev, d, 0, &bad), TN_ERR_INVALID_ARGUMENT);
    assert_null(bad);
    assert_int_equal(be->readback_begin(dev, d, TN_READBACK_MAX + 1, &bad), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->readback_begin(dev, NULL, 8, &bad), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->readback_begin(dev, d, 8, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(be->readback_begin(dev + 99, d, 8, &bad), TN_ERR_DEVICE);
    assert_null(bad);
    assert_int_equal(be->readback_end(NULL, got), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    dfree(d, N * sizeof(double));
}

/* ---- timings (TENET_CUDA_BENCH=1) --------------------------------------------------------------
 */

static void test_bench(void **state) {
    (void)state;
    NEED_GPU();
    const char *env = getenv("TENET_CUDA_BENCH");
    if (!env || !*env || *env == '0') skip();
    const int64_t n = (int64_t)64 << 20;
    const size_t bytes = (size_t)n * 4;
    float *x = dalloc(bytes), *y = dalloc(bytes), *out = dalloc(bytes);
    double *sum = dalloc(8);
    tn_iter it = mk_iter(1, 1, &n);
    set_contig(&it, 0, x, 4);
    assert_int_equal(be->fill(dev, TN_F32, &it, 1.0), TN_OK);
    set_contig(&it, 0, y, 4);
    assert_int_equal(be->fill(dev, TN_F32, &it, 2.0), TN_OK);
    tn_iter add = mk_iter(3, 1, &n);
    set_contig(&add, 0, out, 4), set_contig(&add, 1, x, 4), set_contig(&add, 2, y, 4);
    tn_iter cp = mk_iter(2, 1, &n);
    set_contig(&cp, 0, out, 4), set_contig(&cp, 1, x, 4);
    tn_red_args r;
    memset(&r, 0, sizeof r);
    r.op = TN_RED_SUM, r.dtype = TN_F32, r.in = (const char *)x, r.ndim = 1, r.shape[0] = n;
    r.stride[0] = 1, r.dim = -1, r.vals = sum, r.div = 1;
    tn_red_args rmax = r;
    rmax.op = TN_RED_MAX;
    rmax.idx = (int64_t *)sum;
    rmax.vals = NULL;
    enum { ITERS = 50 };
    for (int which = 0; which < 4; which++) {
        const char *names[4] = {"add f32 64Mi", "copy f32 64Mi", "sum all f32 64Mi",
                                "argmax all f32 64Mi"};
        const double moved[4] = {3.0 * (double)bytes, 2.0 * (double)bytes, (double)bytes,
                                 (double)bytes};
        for (int rep = 0; rep < 2; rep++) { /* rep 0 warms up */
            assert_int_equal(be->synchronize(dev), TN_OK);
            double t0 = now_s();
            for (int i = 0; i < ITERS; i++) {
                tn_status st = which == 0   ? be->pointwise(dev, TN_PW_add, TN_F32, &add, NULL)
                               : which == 1 ? be->copy(dev, TN_F32, TN_F32, &cp)
                               : which == 2 ? be->reduce(dev, &r)
                                            : be->reduce(dev, &rmax);
                assert_int_equal(st, TN_OK);
            }
            assert_int_equal(be->synchronize(dev), TN_OK);
            double dt = (now_s() - t0) / ITERS;
            if (rep == 1)
                printf("bench %-22s %8.3f ms  %7.1f GB/s\n", names[which], dt * 1e3,
                       moved[which] / dt / 1e9);
        }
    }
    float got = 0;
    d2h(&got, sum, 4); /* argmax wrote an index there: just touch it */
    r.vals = sum;
    assert_int_equal(be->reduce(dev, &r), TN_OK);
    float total = 0;
    d2h(&total, sum, 4); /* float32 input: a float32 sum */
    assert_true(total == (float)n);
    dfree(x, bytes), dfree(y, bytes), dfree(out, bytes), dfree(sum, 8);
}

/* ---- where and the indexing kernels ---------------------------------------------------------- */

/* TN_PW_WHERE, every dtype: out = cond ? x : y with cond a broadcast row. */
static void test_where(void **state) {
    (void)state;
    NEED_GPU();
    enum { A = 7, B = 129 };
    const int64_t shape[2] = {A, B}, n = A * B;
    for (int dt = 0; dt < TN_DTYPE_COUNT; dt++) {
        size_t es = esz((tn_dtype)dt);
        char *x = xmalloc((size_t)n * es), *y = xmalloc((size_t)n * es);
        char *got = xmalloc((size_t)n * es);
        uint8_t cond[B];
        for (int64_t i = 0; i < n; i++) {
            putv(x, (tn_dtype)dt, i, (double)rnd_int(-50, 50));
            putv(y, (tn_dtype)dt, i, (double)rnd_int(-50, 50));
        }
        for (int b = 0; b < B; b++)
            cond[b] = (uint8_t)(rnd() % 2);
        char *dx = upload(x, (size_t)n * es), *dy = upload(y, (size_t)n * es);
        char *dc = upload(cond, B), *dout = dalloc((size_t)n * es);
        tn_iter it = mk_iter(4, 2, shape);
        set_contig(&it, 0, dout, es);
        set_contig(&it, 1, dc, 1);
        it.stride[1][0] = 0; /* one row of conditions, broadcast */
        set_contig(&it, 2, dx, es);
        set_contig(&it, 3, dy, es);
        assert_int_equal(be->pointwise(dev, TN_PW_WHERE, (tn_dtype)dt, &it, NULL), TN_OK);
        d2h(got, dout, (size_t)n * es);
        for (int64_t i = 0; i < n; i++) {
            double want = getv(cond[i % B] ? x : y, (tn_dtype)dt, i);
            if (!same_value(getv(got, (tn_dtype)dt, i), want))
                fail_msg("where %s at %lld", dt_names[dt], (long long)i);
        }
        dfree(dx, (size_t)n * es), dfree(dy, (size_t)n * es), dfree(dc, B);
        dfree(dout, (size_t)n * es);
        free(x), free(y), free(got);
    }
}

/* One index launch on the device and on the CPU backend from the same
 * inputs: the results must be the same bits (the adds run in index order
 * on both). in/out sizes in elements; out starts as `init`. */
static void index_case(tn_index_args a, const char *src, size_t nsrc, const int64_t *idx,
                       size_t nidx, const char *init, size_t nout, const char *what) {
    const tn_backend *cpu = tn__backends[TN_CPU];
    size_t es = esz(a.dtype);
    char *want = xmalloc(nout * es), *got = xmalloc(nout * es);
    memcpy(want, init, nout * es);
    char *ds = upload(src, nsrc * es), *dout = upload(init, nout * es);
    int64_t *di = upload(idx, nidx * 8);
    tn_index_args h = a;
    h.src = src, h.idx = idx, h.out = want;
    assert_int_equal(cpu->index(0, &h), TN_OK);
    a.src = ds, a.idx = di, a.out = dout;
    assert_int_equal(be->index(dev, &a), TN_OK);
    d2h(got, dout, nout * es);
    if (memcmp(got, want, nout * es) != 0) case_failed("index %s %s", what, dt_names[a.dtype]);
    dfree(ds, nsrc * es), dfree(dout, nout * es), dfree(di, nidx * 8);
    free(want), free(got);
}

static void test_index(void **state) {
    (void)state;
    NEED_GPU();
    /* (outer, size, n, inner) for rows / rows_add: the next two span several chunks of the
     * device's rows_add (256 positions), with rows that occur in many of them; the last is
     * longer than the device folds alone (sorted on the host) */
    static const int64_t cfg[][4] = {
        {3, 50, 200, 7}, {1, 5, 1000, 3}, {4, 300, 700, 1}, {2, 40, 40000, 2}};
    enum { CAP = 2 * 40000 * 2 };
    int64_t *idx = xmalloc(40000 * sizeof *idx);
    for (int dt = 0; dt < TN_DTYPE_COUNT; dt++) {
        size_t es = esz((tn_dtype)dt);
        char *src = xmalloc((size_t)CAP * es), *init = xmalloc((size_t)CAP * es);
        for (int64_t i = 0; i < CAP; i++) {
            double x = is_fdt((tn_dtype)dt) ? (double)rnd_int(-999, 999) / 64
                                            : (double)rnd_int(-9, 9);
            putv(src, (tn_dtype)dt, i, x);
            putv(init, (tn_dtype)dt, i, (double)rnd_int(-3, 3));
        }
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            const int64_t O = cfg[c][0], S = cfg[c][1], N = cfg[c][2], I = cfg[c][3];
            for (int j = 0; j < N; j++)
                idx[j] = j % 4 == 0 ? 2 : rnd_int(0, (int)S - 1); /* repeats */
            tn_index_args r = {.mode = TN_IX_ROWS, .dtype = (tn_dtype)dt, .outer = O, .size = S,
                               .n = N, .inner = I};
            index_case(r, src, O * S * I, idx, N, init, O * N * I, "rows");
            r.mode = TN_IX_ROWS_ADD;
            index_case(r, src, O * N * I, idx, N, init, O * S * I, "rows_add");
        }
        /* gather / scatter_add over an index (4, 6, 5) along dim 1 of a (4, 9, 5)
         * tensor read through the strides of a (5, 9, 7) one */
        const int64_t ish[3] = {4, 6, 5};
        for (int i = 0; i < 4 * 6 * 5; i++)
            idx[i] = i % 5 == 0 ? 2 : rnd_int(0, 8);
        tn_index_args g = {.mode = TN_IX_GATHER, .dtype = (tn_dtype)dt, .ndim = 3, .dim = 1};
        for (int d = 0; d < 3; d++) {
            g.shape[d] = ish[d];
            g.istride[d] = (const int64_t[]){30, 5, 1}[d];
            g.sstride[d] = (const int64_t[]){63, 7, 1}[d];
            g.ostride[d] = (const int64_t[]){30, 5, 1}[d];
        }
        index_case(g, src, 5 * 9 * 7, idx, 120, init, 120, "gather");
        g.mode = TN_IX_SCATTER_ADD; /* into (4, 9, 5) through strides (63, 7, 1) */
        for (int d = 0; d < 3; d++) {
            g.sstride[d] = (const int64_t[]){30, 5, 1}[d];
            g.ostride[d] = (const int64_t[]){63, 7, 1}[d];
        }
        index_case(g, src, 120, idx, 120, init, 5 * 9 * 7, "scatter_add");
        free(src), free(init);
    }
    free(idx);
    end_cases();
    tn_index_args bad = {.mode = 42};
    assert_int_equal(be->index(dev, &bad), TN_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_and_errors),
        cmocka_unit_test(test_allocator),
        cmocka_unit_test(test_memcpy),
        cmocka_unit_test(test_pointwise_binary),
        cmocka_unit_test(test_pointwise_unary),
        cmocka_unit_test(test_pointwise_large),
        cmocka_unit_test(test_masked_zero),
        cmocka_unit_test(test_optim_steps),
        cmocka_unit_test(test_copy_all_pairs),
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_reduce_dims),
        cmocka_unit_test(test_reduce_long),
        cmocka_unit_test(test_reduce_edges),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_grad_stats),
        cmocka_unit_test(test_readback),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_layer_norm),
    };
    const char *filter = getenv("TENET_TEST_FILTER"); /* e.g. "test_reduce*" */
    if (filter && *filter) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
