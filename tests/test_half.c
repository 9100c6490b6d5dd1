/* tests/test_half.c — bfloat16 and float16 as storage types: conversions (rounding at ties,
 * overflow, subnormals, NaN, -0.0), type promotion and repr against PyTorch 1.13
 * (tests/golden_half/conversions.txt, written by scripts/gen_half_golden.py), and the rules
 * around them: scalars, tn_item, fill overflow errors, widening, matmul's dtype rule, a half
 * leaf's gradient dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#include "engine/core/half.h"

#define GOLDEN "golden_half/conversions.txt"

static tn_dtype dtype_named(const char *s) {
    for (int d = 0; d < TN_DTYPE_COUNT; d++)
        if (!strcmp(tn_dtype_name((tn_dtype)d), s)) return (tn_dtype)d;
    fail_msg("unknown dtype %s", s);
    return TN_F32;
}

static float f32_of(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The 16 bits of the one element of a half tensor. */
static uint16_t bits16(const tn_tensor *t) {
    uint16_t b = 0;
    assert_int_equal(tn_copy_to(t, &b, sizeof b), TN_OK);
    return b;
}

static bool is_nan16(uint16_t b, tn_dtype dt) {
    uint16_t exp = dt == TN_BF16 ? 0x7f80 : 0x7c00, quiet = dt == TN_BF16 ? 0x0040 : 0x0200;
    return (b & exp) == exp && (b & quiet); /* a quiet NaN */
}

/* One cvt record: float32 -> each half, and back (widening is exact). */
static int check_cvt(uint32_t fb, const char *want_bf, const char *want_hf) {
    int bad = 0;
    float v = f32_of(fb);
    tn_tensor *x = tn_tensor_from(&v, TN_F32, 1, (int64_t[]){1}, false);
    const tn_dtype dts[2] = {TN_BF16, TN_F16};
    const char *want[2] = {want_bf, want_hf};
    for (int k = 0; k < 2; k++) {
        tn_tensor *h = tn_to(x, dts[k], TN_DEVICE_KEEP);
        assert_non_null(h);
        uint16_t got = bits16(h);
        bool ok = !strcmp(want[k], "nan") ? is_nan16(got, dts[k])
                                          : got == (uint16_t)strtoul(want[k], NULL, 16);
        if (!ok) {
            print_error("%s of float32 %08x (%g): got %04x, PyTorch %s\n",
                        tn_dtype_name(dts[k]), fb, (double)v, got, want[k]);
            bad++;
        }
        /* widening back is exact: the half's value as float32 and float64 */
        double d;
        tn_tensor *w = tn_to(h, TN_F64, TN_DEVICE_KEEP);
        assert_int_equal(tn_item(w, &d), TN_OK);
        double via_item;
        assert_int_equal(tn_item(h, &via_item), TN_OK);
        if (!(isnan(d) && isnan(via_item)) && d != via_item) bad++;
        tn_release(w);
        tn_release(h);
    }
    tn_release(x);
    return bad;
}

static void test_golden_conversions_promotion_repr(void **state) {
    (void)state;
    FILE *f = fopen(GOLDEN, "r");
    assert_non_null(f);
    char line[1024];
    int ncvt = 0, nprom = 0, nrepr = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char kind[16], a[32], b[32], c[32];
        unsigned fb;
        if (sscanf(line, "cvt %x %31s %31s", &fb, a, b) == 3) {
            bad += check_cvt(fb, a, b);
            ncvt++;
        } else if (sscanf(line, "%15s %31s %31s %31s", kind, a, b, c) == 4 &&
                   (!strcmp(kind, "promote") || !strcmp(kind, "promote0"))) {
            tn_dtype da = dtype_named(a), db = dtype_named(b), want = dtype_named(c);
            tn_tensor *x = tn_ones(1, (int64_t[]){2}, da);
            tn_tensor *y = !strcmp(kind, "promote") ? tn_ones(1, (int64_t[]){2}, db)
                                                    : tn_scalar(1.0, db);
            tn_tensor *z = tn_add(x, y);
            assert_non_null(z);
            if (tn_dtype_of(z) != want) {
                print_error("%s %s + %s: got %s, PyTorch %s\n", kind, a, b,
                            tn_dtype_name(tn_dtype_of(z)), c);
                bad++;
            }
            tn_release(x), tn_release(y), tn_release(z);
            nprom++;
        } else if (sscanf(line, "promotes %31s %31s %31s", a, b, c) == 3) {
            tn_tensor *x = tn_ones(1, (int64_t[]){2}, dtype_named(a));
            tn_tensor *z = tn_add_scalar(x, strtod(b, NULL));
            assert_non_null(z);
            if (tn_dtype_of(z) != dtype_named(c)) {
                print_error("promotes %s + %s: got %s, PyTorch %s\n", a, b,
                            tn_dtype_name(tn_dtype_of(z)), c);
                bad++;
            }
            tn_release(x), tn_release(z);
            nprom++;
        } else if (!strncmp(line, "repr ", 5)) {
            char *bar = strstr(line, " | ");
            assert_non_null(bar);
            char want[512];
            snprintf(want, sizeof want, "%s", bar + 3);
            want[strcspn(want, "\n")] = 0;
            for (char *p; (p = strstr(want, "\\n"));) { /* the file's escaped newlines */
                *p = '\n';
                memmove(p + 1, p + 2, strlen(p + 2) + 1);
            }
            int n, off;
            assert_int_equal(sscanf(line, "repr %31s %d%n", a, &n, &off), 2);
            float v[8];
            const char *p = line + off;
            for (int i = 0; i < n; i++) {
                unsigned vb;
                int used;
                assert_int_equal(sscanf(p, " %x%n", &vb, &used), 1);
                v[i] = f32_of(vb);
                p += used;
            }
            tn_tensor *x = tn_tensor_from(v, TN_F32, 1, (int64_t[]){n}, false);
            tn_tensor *h = tn_to(x, dtype_named(a), TN_DEVICE_KEEP);
            char got[512];
            assert_true(tn_format(h, got, sizeof got) > 0);
            if (strcmp(got, want)) {
                print_error("repr: got\n%s\nPyTorch\n%s\n", got, want);
                bad++;
            }
            tn_release(x), tn_release(h);
            nrepr++;
        }
    }
    fclose(f);
    assert_true(ncvt > 100 && nprom > 100 && nrepr >= 16); /* the file was read */
    assert_int_equal(bad, 0);
}

/* Scalars and fills: PyTorch's overflow errors, infinities allowed, values rounded. */
/* The CPU copies whole rows between float32 and the half dtypes in vectors (F16C, integer
 * lanes; engine/cpu/half_rows.h): their bits must be half.h's element by element. Every half
 * value widened; float32 values narrowed at every sign and exponent, with mantissas at and
 * around each rounding tie, plus random ones; lengths that leave a tail after the vectors. */
static void f32_bits_of(const tn_tensor *t, uint32_t *out, int64_t n) {
    assert_int_equal(tn_copy_to(t, out, (size_t)n * sizeof *out), TN_OK);
}

static void test_row_conversions(void **state) {
    (void)state;
    enum { NH = 65536 + 5 };
    uint16_t *h = malloc(NH * sizeof *h);
    uint32_t *w = malloc(NH * sizeof *w);
    for (int64_t i = 0; i < NH; i++)
        h[i] = (uint16_t)i;
    const tn_dtype dts[2] = {TN_BF16, TN_F16};
    for (int k = 0; k < 2; k++) {
        tn_tensor *t = tn_tensor_from(h, dts[k], 1, (int64_t[]){NH}, false);
        tn_tensor *f = tn_to(t, TN_F32, TN_DEVICE_KEEP);
        assert_non_null(f);
        f32_bits_of(f, w, NH);
        int64_t bad = 0;
        for (int64_t i = 0; i < NH; i++) {
            const float want =
                dts[k] == TN_BF16 ? tn_bf16_to_f32((tn_bf16){h[i]}) : tn_f16_to_f32((tn_f16){h[i]});
            uint32_t wb;
            memcpy(&wb, &want, sizeof wb);
            if (w[i] != wb && bad++ < 5)
                print_error("%s %04x widened: %08x, half.h %08x\n", tn_dtype_name(dts[k]), h[i],
                            w[i], wb);
        }
        assert_int_equal(bad, 0);
        tn_release(f);
        tn_release(t);
    }
    /* narrowing */
    static const uint32_t mans[] = {0,        1,        0xfff,    0x1000,   0x1001,   0x1fff,
                                    0x2000,   0x2001,   0x3000,   0x7fff,   0x8000,   0x8001,
                                    0x18000,  0x7fe000, 0x7fefff, 0x7ff000, 0x7ff001, 0x7fffff,
                                    0x400000, 0x400001, 0x00ffff, 0x010000, 0x017fff, 0x018000};
    const int nm = (int)(sizeof mans / sizeof *mans);
    const int64_t nf = 512 * nm + 100003;
    uint32_t *fb = malloc((size_t)nf * sizeof *fb);
    uint16_t *got = malloc((size_t)nf * sizeof *got);
    int64_t n = 0;
    for (uint32_t se = 0; se < 512; se++)
        for (int m = 0; m < nm; m++)
            fb[n++] = se << 23 | mans[m];
    for (uint64_t r = 0x9e3779b97f4a7c15u; n < nf;) { /* xorshift64 */
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        fb[n++] = (uint32_t)(r >> 32);
    }
    tn_tensor *x = tn_tensor_from(fb, TN_F32, 1, (int64_t[]){nf}, false);
    for (int k = 0; k < 2; k++) {
        tn_tensor *t = tn_to(x, dts[k], TN_DEVICE_KEEP);
        assert_non_null(t);
        assert_int_equal(tn_copy_to(t, got, (size_t)nf * sizeof *got), TN_OK);
        int64_t bad = 0;
        for (int64_t i = 0; i < nf; i++) {
            const float v = f32_of(fb[i]);
            const uint16_t want =
                dts[k] == TN_BF16 ? tn_f32_to_bf16(v).bits : tn_f32_to_f16(v).bits;
            if (got[i] != want && bad++ < 5)
                print_error("float32 %08x to %s: %04x, half.h %04x\n", fb[i], tn_dtype_name(dts[k]),
                            got[i], want);
        }
        assert_int_equal(bad, 0);
        tn_release(t);
    }
    tn_release(x);
    free(got);
    free(fb);
    free(w);
    free(h);
}

static void test_scalars_and_fill(void **state) {
    (void)state;
    tn_tensor *t = tn_full(1, (int64_t[]){2}, TN_F16, 1e6);
    assert_null(t);
    tt_assert_error(tn_last_status(), "value cannot be converted to type at::Half without overflow");
    t = tn_full(1, (int64_t[]){2}, TN_BF16, 1e39);
    assert_null(t);
    tt_assert_error(tn_last_status(),
                    "value cannot be converted to type at::BFloat16 without overflow");
    t = tn_full(1, (int64_t[]){2}, TN_BF16, 1e6); /* in bfloat16's range: rounded */
    assert_non_null(t);
    double v;
    tn_tensor *s = tn_sum(t);
    assert_int_equal(tn_item(s, &v), TN_OK);
    assert_true(v == 1998848.0); /* 999424 twice, summed in float32, exact in bfloat16 */
    tn_release(s), tn_release(t);
    t = tn_scalar(INFINITY, TN_F16);
    assert_non_null(t);
    assert_int_equal(tn_item(t, &v), TN_OK);
    assert_true(isinf(v) && v > 0);
    tn_release(t);
    t = tn_scalar(0.1, TN_BF16);
    assert_int_equal(tn_item(t, &v), TN_OK);
    assert_true(v == 0.10009765625); /* PyTorch's item() of the same */
    tn_release(t);
}

/* Ops compute in float32 and round once: x + y where the float32 sum is not a half. */
static void test_compute_in_float32(void **state) {
    (void)state;
    float a[3] = {1.0f, 256.0f, 1.0f}, b[3] = {0.0078125f, 1.0f, 0.00390625f};
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = tn_to(tn_tensor_from(a, TN_F32, 1, (int64_t[]){3}, false), TN_BF16,
                         TN_DEVICE_KEEP);
    tn_tensor *y = tn_to(tn_tensor_from(b, TN_F32, 1, (int64_t[]){3}, false), TN_BF16,
                         TN_DEVICE_KEEP);
    tn_tensor *z = tn_add(x, y);
    assert_int_equal(tn_dtype_of(z), TN_BF16);
    /* 1 + 2^-7 is a bfloat16; 256 + 1 = 257 ties to 256 (even); 1 + 2^-8 ties to 1 */
    tt_assert_close(z, (const double[]){1.0078125, 256.0, 1.0}, 3, 0);
    /* a sum accumulates in float32 or wider: 4096 ones in bfloat16 give 4096, not 256 */
    tn_tensor *ones = tn_ones(1, (int64_t[]){4096}, TN_BF16);
    tn_tensor *s = tn_sum(ones);
    tt_assert_close(s, (const double[]){4096.0}, 1, 0);
    tn_release(ones), tn_release(s);
    tn_release(z);
    tn_scope_end(); /* x, y and their float32 sources */
}

/* matmul does not promote: PyTorch 1.13's error text; the same dtype works in both halves. */
static void test_matmul_dtypes(void **state) {
    (void)state;
    tn_tensor *a = tn_ones(2, (int64_t[]){2, 3}, TN_BF16);
    tn_tensor *b = tn_ones(2, (int64_t[]){3, 2}, TN_F32);
    tn_tensor *c = tn_matmul(a, b);
    assert_null(c);
    tt_assert_error(tn_last_status(), "expected");
    tn_tensor *h = tn_ones(2, (int64_t[]){3, 2}, TN_BF16);
    c = tn_matmul(a, h);
    assert_non_null(c);
    assert_int_equal(tn_dtype_of(c), TN_BF16);
    tt_assert_close(c, (const double[]){3, 3, 3, 3}, 4, 0);
    tn_release(a), tn_release(b), tn_release(c), tn_release(h);
}

/* A half leaf gets a half .grad; a float32 leaf cast to half gets a float32 .grad through
 * ToCopyBackward0 (autocast's master weights). */
static void test_half_leaf_grad(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = tn_ones(1, (int64_t[]){4}, TN_F32);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    tn_tensor *wh = tn_to(w, TN_BF16, TN_DEVICE_KEEP);
    tt_assert_grad_fn(wh, "ToCopyBackward0");
    tn_tensor *x = tn_ones(1, (int64_t[]){4}, TN_BF16);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    tn_tensor *l = tn_sum(tn_mul(tn_mul(x, wh), tn_scalar(3.0, TN_F32)));
    assert_non_null(l);
    assert_int_equal(tn_dtype_of(l), TN_BF16);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    assert_int_equal(tn_dtype_of(tn_grad(x)), TN_BF16);
    assert_int_equal(tn_dtype_of(tn_grad(w)), TN_F32);
    tt_assert_grad(x, (const double[]){3, 3, 3, 3}, 4, 0);
    tt_assert_grad(w, (const double[]){3, 3, 3, 3}, 4, 0);
    tn_scope_end();
}

/* check_nan names the first op whose float16 output overflowed to inf from finite inputs: exp(12)
 * is 162755, beyond float16's 65504 — with its forward call site. */
static int overflow_line;
static tn_tensor *overflow_exp(tn_tensor *x) {
    overflow_line = __LINE__ + 1;
    return tn_exp(x);
}

static void test_anomaly_names_half_overflow(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, true);
    tn_anomaly_clear();
    float v[2] = {1.0f, 12.0f};
    tn_tensor *x = tn_to(tn_tensor_from(v, TN_F32, 1, (int64_t[]){2}, false), TN_F16,
                         TN_DEVICE_KEEP);
    assert_int_equal(tn_requires_grad_(x, true), TN_OK);
    tn_tensor *y = tn_mul(x, x); /* finite: 144 */
    tn_tensor *e = overflow_exp(x);
    assert_non_null(e);
    tn_tensor *l = tn_sum(tn_add(y, e));
    assert_non_null(l);
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_FORWARD);
    assert_string_equal(tn_anomaly_report_node(r), "exp");
    int n;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n > 0);
    assert_string_equal(f[0].function, "overflow_exp");
    assert_int_equal(f[0].line, overflow_line);
    tn_set_detect_anomaly(false, false);
    tn_anomaly_clear();
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_conversions_promotion_repr),
        cmocka_unit_test(test_row_conversions),
        cmocka_unit_test(test_scalars_and_fill),
        cmocka_unit_test(test_compute_in_float32),
        cmocka_unit_test(test_matmul_dtypes),
        cmocka_unit_test(test_half_leaf_grad),
        cmocka_unit_test(test_anomaly_names_half_overflow),
    };
    return cmocka_run_group_tests(tests, tt_setup, tt_teardown);
}
