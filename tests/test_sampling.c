/* tests/test_sampling.c — randint, randperm and multinomial: ranges, seeding, permutations,
 * frequencies with and without replacement, and PyTorch 1.13's error texts. */
#include "util.h"

#include <math.h>
#include <string.h>

static void randint_randperm(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(5);
    tn_tensor *a = tn_randint(-3, 4, 2, (const int64_t[]){50, 40}, TN_I64);
    tn_manual_seed(5);
    tn_tensor *b = tn_randint(-3, 4, 2, (const int64_t[]){50, 40}, TN_I64);
    double v[2000], w[2000];
    int seen[7] = {0};
    assert_int_equal(tn_copy_to_f64(a, v, 2000), TN_OK);
    assert_int_equal(tn_copy_to_f64(b, w, 2000), TN_OK);
    assert_memory_equal(v, w, sizeof v);
    for (int i = 0; i < 2000; i++) {
        assert_true(v[i] >= -3 && v[i] < 4);
        seen[(int)v[i] + 3]++;
    }
    for (int k = 0; k < 7; k++)
        assert_true(seen[k] > 200);
    assert_int_equal(tn_dtype_of(tn_randint(0, 2, 1, (const int64_t[]){3}, TN_F32)), TN_F32);
    tn_tensor *p = tn_randperm(1000, TN_I64);
    assert_int_equal(tn_copy_to_f64(p, v, 1000), TN_OK);
    memset(seen, 0, sizeof seen);
    static int hit[1000];
    memset(hit, 0, sizeof hit);
    int moved = 0;
    for (int i = 0; i < 1000; i++) {
        hit[(int)v[i]]++;
        moved += v[i] != i;
    }
    for (int i = 0; i < 1000; i++)
        assert_int_equal(hit[i], 1);
    assert_true(moved > 900);
    assert_int_equal(tn_numel(tn_randperm(0, TN_I64)), 0);
    assert_null(tn_randint(5, 5, 1, (const int64_t[]){3}, TN_I64));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
    assert_null(tn_randperm(-1, TN_I64));
    tt_assert_error(TN_ERR_SHAPE, "Trying to create tensor with negative dimension -1: [-1]");
    tn_scope_end();
}

static void multinomial(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *pr = tt_f64(2, (const int64_t[]){2, 4}, (const double[]){1, 0, 3, 0, 0, 0, 0, 2}, false);
    tn_tensor *s = tn_multinomial(pr, 4000, true);
    assert_int_equal(tn_ndim(s), 2);
    assert_int_equal(tn_size(s, 1), 4000);
    assert_int_equal(tn_dtype_of(s), TN_I64);
    static double v[8000];
    assert_int_equal(tn_copy_to_f64(s, v, 8000), TN_OK);
    int c0 = 0;
    for (int i = 0; i < 4000; i++) {
        assert_true(v[i] == 0 || v[i] == 2);
        c0 += v[i] == 0;
        assert_true(v[4000 + i] == 3);
    }
    assert_true(c0 > 850 && c0 < 1150); /* 1000 expected */
    /* without replacement: each class once, zero weights last */
    tn_tensor *q = tt_f64(1, (const int64_t[]){5}, (const double[]){0, 5, 1, 0, 2}, false);
    for (int rep = 0; rep < 20; rep++) {
        double o[5];
        assert_int_equal(tn_copy_to_f64(tn_multinomial(q, 5, false), o, 5), TN_OK);
        int hit[5] = {0};
        for (int k = 0; k < 5; k++)
            hit[(int)o[k]]++;
        for (int k = 0; k < 5; k++)
            assert_int_equal(hit[k], 1);
        assert_true((o[3] == 0 || o[3] == 3) && (o[4] == 0 || o[4] == 3));
    }
    tn_scope_end();
}

static void multinomial_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *ok = tn_ones(1, (const int64_t[]){3}, TN_F32);
    assert_null(tn_multinomial(tn_ones(3, (const int64_t[]){2, 2, 2}, TN_F32), 1, true));
    tt_assert_error(TN_ERR_SHAPE, "prob_dist must be 1 or 2 dim");
    assert_null(tn_multinomial(ok, 0, true));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "cannot sample n_sample <= 0 samples");
    assert_null(tn_multinomial(ok, 4, false));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    assert_null(tn_multinomial(tt_f64(1, (const int64_t[]){3}, (const double[]){1, -1, 1}, false),
                               1, true));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "probability tensor contains either `inf`, `nan` or element < 0");
    assert_null(tn_multinomial(tt_f64(1, (const int64_t[]){3}, (const double[]){1, NAN, 1}, false),
                               1, true));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "probability tensor contains either `inf`, `nan` or element < 0");
    assert_null(tn_multinomial(tn_zeros(1, (const int64_t[]){3}, TN_F64), 1, true));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT,
                    "invalid multinomial distribution (sum of probabilities <= 0)");
    assert_null(tn_multinomial(tn_ones(1, (const int64_t[]){3}, TN_I64), 1, true));
    tt_assert_error(TN_ERR_DTYPE, "multinomial only supports floating-point dtypes for input, got: Long");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(randint_randperm), TT_TEST(multinomial),
                                       TT_TEST(multinomial_errors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
