/* tests/test_integer_ub.c — the family "undefined behaviour in integer
 * paths" (engine/core/convert.h): float -> integer conversions of NaN, ±Inf
 * and out-of-range values, scalars that do not fit a dtype, and integer
 * arithmetic that overflows. Every case has a defined result; the expected
 * values are PyTorch 1.13.1's on x86-64 (the asan preset runs this under
 * UBSan with float-cast-overflow and no recovery, so a plain C cast left
 * anywhere on these paths fails the run). */
#include "util.h"

#include <math.h>
#include <string.h>

static const int64_t S1[] = {1};

static tn_tensor *i64s(int n, const int64_t *v) {
    int64_t s[] = {n};
    return tn_tensor_from(v, TN_I64, 1, s, false);
}

/* t has integer dtype dt and its first n elements are want's. */
static void want_ints(const tn_tensor *t, tn_dtype dt, const int64_t *want, int n) {
    assert_non_null(t);
    assert_int_equal(tn_dtype_of(t), dt);
    union {
        int16_t i16[16];
        int32_t i32[16];
        int64_t i64[16];
    } got;
    assert_int_equal(tn_copy_to(t, &got, sizeof got), TN_OK);
    for (int i = 0; i < n; i++) {
        int64_t g = dt == TN_I16 ? got.i16[i] : dt == TN_I32 ? got.i32[i] : got.i64[i];
        if (g != want[i])
            print_error("element %d: got %lld, want %lld\n", i, (long long)g, (long long)want[i]);
        assert_true(g == want[i]);
    }
}

/* ---- scalars that do not fit: PyTorch's error, nothing made or changed ---------------- */

static void scalar_overflow_is_an_error(void **state) {
    (void)state;
    int64_t s[] = {2};
    assert_null(tn_full(1, s, TN_I64, NAN));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "value cannot be converted to type int64_t without overflow");
    assert_null(tn_full(1, s, TN_I64, 9223372036854775808.0)); /* 2^63 */
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "int64_t without overflow");
    assert_null(tn_full(1, s, TN_I32, 1e20));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "value cannot be converted to type int without overflow");
    assert_null(tn_full(1, s, TN_I32, 3e9));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "type int without overflow");
    assert_null(tn_full(1, s, TN_I16, 40000.0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "value cannot be converted to type int16_t without overflow");
    assert_null(tn_full(1, s, TN_F32, 1e300));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "value cannot be converted to type float without overflow");
    assert_null(tn_scalar(INFINITY, TN_I32));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "type int without overflow");

    /* what fits: truncated toward zero; float32 and float64 keep ±Inf and NaN; bool is v != 0 */
    tn_tensor *t = tn_full(1, s, TN_I64, 2.7);
    want_ints(t, TN_I64, (const int64_t[]){2, 2}, 2);
    tn_release(t);
    t = tn_full(1, s, TN_I64, -9223372036854775808.0);
    want_ints(t, TN_I64, (const int64_t[]){INT64_MIN, INT64_MIN}, 2);
    tn_release(t);
    t = tn_full(1, s, TN_F32, INFINITY);
    assert_non_null(t);
    tn_release(t);
    t = tn_full(1, s, TN_BOOL, NAN);
    uint8_t b[2];
    assert_int_equal(tn_copy_to(t, b, sizeof b), TN_OK);
    assert_true(b[0] == 1 && b[1] == 1);
    tn_release(t);

    /* fill_: the error leaves the tensor and its version as they were */
    tn_tensor *z = tn_zeros(1, s, TN_I32);
    assert_int_equal(tn_fill_(z, NAN), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "type int without overflow");
    assert_int_equal(tn_fill_(z, -2147483649.0), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_version(z), 0);
    want_ints(z, TN_I32, (const int64_t[]){0, 0}, 2);
    assert_int_equal(tn_fill_(z, -2147483648.0), TN_OK);
    want_ints(z, TN_I32, (const int64_t[]){INT32_MIN, INT32_MIN}, 2);
    tn_release(z);
}

/* ---- tensor conversions: what PyTorch gives on x86-64 --------------------------------- */

static const float NASTY[] = {NAN, INFINITY, -INFINITY, 1e20f, -1e20f, 2.5f, -2.5f};

static void float_to_integer_conversions(void **state) {
    (void)state;
    int64_t s[] = {7};
    tn_tensor *f = tn_tensor_from(NASTY, TN_F32, 1, s, false);
    tn_tensor *t = tn_to(f, TN_I64, TN_DEVICE_KEEP);
    want_ints(t, TN_I64,
              (const int64_t[]){INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, 2, -2}, 7);
    tn_release(t);
    t = tn_new_tensor(f, TN_I32, TN_DEVICE_KEEP, false);
    want_ints(t, TN_I32,
              (const int64_t[]){INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, 2, -2}, 7);
    tn_release(t);

    /* int16 converts through int32 and keeps the low 16 bits */
    int64_t s8[] = {8};
    const float v16[] = {NAN, INFINITY, -INFINITY, 1e20f, -1e20f, 40000.f, -40000.f, 2.5f};
    tn_tensor *f16 = tn_tensor_from(v16, TN_F32, 1, s8, false);
    tn_tensor *d16 = tn_zeros(1, s8, TN_I16);
    assert_int_equal(tn_copy_(d16, f16), TN_OK);
    want_ints(d16, TN_I16, (const int64_t[]){0, 0, 0, 0, 0, -25536, 25536, 2}, 8);

    /* from float64, 3e9 is out of int32's range */
    int64_t s5[] = {5};
    const double v64[] = {NAN, INFINITY, -INFINITY, 1e20, 3e9};
    tn_tensor *f64 = tn_tensor_from(v64, TN_F64, 1, s5, false);
    t = tn_to(f64, TN_I32, TN_DEVICE_KEEP);
    want_ints(t, TN_I32,
              (const int64_t[]){INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN}, 5);
    tn_release(t);

    /* bool: v != 0, NaN is true */
    const float vb[] = {NAN, INFINITY, 0.0f, -0.0f, 0.5f};
    tn_tensor *fb = tn_tensor_from(vb, TN_F32, 1, s5, false);
    t = tn_to(fb, TN_BOOL, TN_DEVICE_KEEP);
    uint8_t b[5];
    assert_int_equal(tn_copy_to(t, b, sizeof b), TN_OK);
    assert_memory_equal(b, ((const uint8_t[]){1, 1, 0, 0, 1}), 5);
    tn_release(t);

    tn_release(f);
    tn_release(f16);
    tn_release(d16);
    tn_release(f64);
    tn_release(fb);
}

/* ---- integer arithmetic wraps, two's complement --------------------------------------- */

static void integer_arithmetic_wraps(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *big = i64s(1, (const int64_t[]){INT64_C(1) << 62});
    want_ints(tn_mul_scalar(big, 4), TN_I64, (const int64_t[]){0}, 1);
    tn_tensor *max = i64s(1, (const int64_t[]){INT64_MAX});
    want_ints(tn_add_scalar(max, 1), TN_I64, (const int64_t[]){INT64_MIN}, 1);
    tn_tensor *min = i64s(1, (const int64_t[]){INT64_MIN});
    want_ints(tn_abs(min), TN_I64, (const int64_t[]){INT64_MIN}, 1);
    want_ints(tn_neg(min), TN_I64, (const int64_t[]){INT64_MIN}, 1);
    want_ints(tn_sub(min, i64s(1, (const int64_t[]){1})), TN_I64, (const int64_t[]){INT64_MAX}, 1);
    want_ints(tn_sum(i64s(2, (const int64_t[]){INT64_C(1) << 62, INT64_C(1) << 62})), TN_I64,
              (const int64_t[]){INT64_MIN}, 1);
    int16_t h = 32767;
    tn_tensor *i16 = tn_tensor_from(&h, TN_I16, 1, S1, false);
    want_ints(tn_add_scalar(i16, 1), TN_I16, (const int64_t[]){-32768}, 1);
    /* a scalar becomes an int64, then wraps to the element width */
    int32_t five = 5;
    tn_tensor *i32 = tn_tensor_from(&five, TN_I32, 1, S1, false);
    want_ints(tn_add_scalar(i32, 1e10), TN_I32, (const int64_t[]){1410065413}, 1);
    want_ints(tn_mul_scalar(i32, 1e10), TN_I32, (const int64_t[]){-1539607552}, 1);
    want_ints(tn_sub_scalar(i32, 1e10), TN_I32, (const int64_t[]){-1410065403}, 1);
    int16_t five16 = 5;
    tn_tensor *f16 = tn_tensor_from(&five16, TN_I16, 1, S1, false);
    want_ints(tn_add_scalar(f16, 100000), TN_I16, (const int64_t[]){-31067}, 1);
    /* in place, and a product */
    assert_int_equal(tn_add_scalar_(i32, 1e10), TN_OK);
    want_ints(i32, TN_I32, (const int64_t[]){1410065413}, 1);
    int64_t s11[] = {1, 1};
    tn_tensor *ma = tn_tensor_from((const int64_t[]){INT64_C(1) << 62}, TN_I64, 2, s11, false);
    tn_tensor *mb = tn_tensor_from((const int64_t[]){4}, TN_I64, 2, s11, false);
    want_ints(tn_reshape(tn_matmul(ma, mb), 1, S1), TN_I64, (const int64_t[]){0}, 1);
    tn_scope_end();
}

/* Integer powers are exact and wrap; negative exponents as PyTorch. */
static void integer_pow_is_exact_and_wraps(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = i64s(8, (const int64_t[]){2, 3, -1, 1, 0, 2, -2, 5});
    tn_tensor *e = i64s(8, (const int64_t[]){70, 40, -3, -5, -1, -1, 3, 0});
    want_ints(tn_pow(a, e), TN_I64,
              (const int64_t[]){0, INT64_C(-6289078614652622815), -1, 1, 0, 0, -8, 1}, 8);
    int64_t s5[] = {5}, s2[] = {2};
    tn_tensor *a32 = tn_tensor_from((const int32_t[]){2, 3, -1, 1, 2}, TN_I32, 1, s5, false);
    tn_tensor *e32 = tn_tensor_from((const int32_t[]){31, 21, -3, -5, 33}, TN_I32, 1, s5, false);
    want_ints(tn_pow(a32, e32), TN_I32, (const int64_t[]){INT32_MIN, 1870418611, -1, 1, 0}, 5);
    tn_tensor *a16 = tn_tensor_from((const int16_t[]){2, 3}, TN_I16, 1, s2, false);
    tn_tensor *e16 = tn_tensor_from((const int16_t[]){15, 11}, TN_I16, 1, s2, false);
    want_ints(tn_pow(a16, e16), TN_I16, (const int64_t[]){-32768, -19461}, 2);
    tn_scope_end();
}

/* arange's values wrap to the dtype; clamp's bounds are cut to it. */
static void arange_and_clamp_bounds(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    want_ints(tn_arange(0, 5e9, 1e9, TN_I32), TN_I32,
              (const int64_t[]){0, 1000000000, 2000000000, -1294967296, -294967296}, 5);
    tn_tensor *v = tn_tensor_from((const int32_t[]){-7, 5, 9}, TN_I32, 1,
                                  (const int64_t[]){3}, false);
    want_ints(tn_clamp(v, -INFINITY, 6), TN_I32, (const int64_t[]){-7, 5, 6}, 3);
    want_ints(tn_clamp(v, 0, INFINITY), TN_I32, (const int64_t[]){0, 5, 9}, 3);
    want_ints(tn_clamp(v, -1e20, 1e20), TN_I32, (const int64_t[]){-7, 5, 9}, 3);
    /* min above max: max everywhere (torch.clamp(torch.tensor([-7, 5, 9]), 6, 2)) */
    want_ints(tn_clamp(v, 6, 2), TN_I32, (const int64_t[]){2, 2, 2}, 3);
    /* a NaN bound has no int32 value (PyTorch answers in float) */
    tt_assert_refused(tn_clamp(v, NAN, 2), TN_ERR_INVALID_ARGUMENT,
                      "clamp: a NaN bound for an int32 tensor (tenet clamps integers in their "
                      "dtype; PyTorch's result would be float)");
    assert_int_equal(tn_clamp_(v, 0, NAN), TN_ERR_INVALID_ARGUMENT);
    want_ints(v, TN_I32, (const int64_t[]){-7, 5, 9}, 3);
    tn_tensor *w = tn_tensor_from((const int64_t[]){INT64_MIN, 0, INT64_MAX}, TN_I64, 1,
                                  (const int64_t[]){3}, false);
    want_ints(tn_clamp(w, -INFINITY, INFINITY), TN_I64,
              (const int64_t[]){INT64_MIN, 0, INT64_MAX}, 3);
    assert_int_equal(tn_clamp_(v, -2.5, 2.5), TN_OK); /* fractional bounds truncate */
    want_ints(v, TN_I32, (const int64_t[]){-2, 2, 2}, 3);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(scalar_overflow_is_an_error),
        TT_TEST(float_to_integer_conversions),
        TT_TEST(integer_arithmetic_wraps),
        TT_TEST(integer_pow_is_exact_and_wraps),
        TT_TEST(arange_and_clamp_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
