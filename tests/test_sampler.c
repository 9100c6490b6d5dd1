/* tn_sampler_indices (tenet/sampler.h): DistributedSampler's shares of an
 * epoch. Checked by their properties: the ranks' shares interleave into one
 * padded permutation, the same whatever the world size; the epoch and the
 * seed change it; drop_last; errors. */
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The epoch's order for a world of w: rank r's k-th index at position k*w + r. */
static int64_t *order_of(int64_t n, int w, uint64_t seed, int64_t epoch, bool shuffle,
                         bool drop_last, int64_t *total) {
    int64_t per = tn_sampler_indices(n, w, 0, seed, epoch, shuffle, drop_last, NULL);
    assert_true(per >= 0);
    int64_t *all = calloc((size_t)(per * w + 1), sizeof *all), *mine = calloc((size_t)per + 1, 8);
    for (int r = 0; r < w; r++) {
        assert_int_equal(tn_sampler_indices(n, w, r, seed, epoch, shuffle, drop_last, mine), per);
        for (int64_t k = 0; k < per; k++)
            all[k * w + r] = mine[k];
    }
    free(mine);
    *total = per * w;
    return all;
}

static void test_shares_form_a_padded_permutation(void **state) {
    (void)state;
    for (int w = 1; w <= 5; w++) {
        int64_t total, n = 23;
        int64_t *o = order_of(n, w, 7, 3, true, false, &total);
        assert_int_equal(total, (n + w - 1) / w * w);
        int seen[23] = {0};
        for (int64_t i = 0; i < n; i++) { /* the first n: a permutation */
            assert_true(o[i] >= 0 && o[i] < n);
            seen[o[i]]++;
        }
        for (int i = 0; i < n; i++)
            assert_int_equal(seen[i], 1);
        for (int64_t i = n; i < total; i++) /* the padding repeats the start */
            assert_int_equal(o[i], o[i - n]);
        /* the same permutation whatever the world size */
        int64_t t1, *one = order_of(n, 1, 7, 3, true, false, &t1);
        assert_memory_equal(o, one, (size_t)n * sizeof *o);
        free(one);
        free(o);
    }
}

static void test_epoch_seed_shuffle_drop_last(void **state) {
    (void)state;
    int64_t t, *a = order_of(100, 2, 1, 0, true, false, &t), *b = order_of(100, 2, 1, 1, true, false, &t);
    int64_t *c = order_of(100, 2, 2, 0, true, false, &t), *d = order_of(100, 2, 1, 0, true, false, &t);
    assert_true(memcmp(a, b, 100 * 8) != 0); /* set_epoch reshuffles */
    assert_true(memcmp(a, c, 100 * 8) != 0); /* so does the seed */
    assert_memory_equal(a, d, 100 * 8);      /* deterministic */
    int64_t *e = order_of(10, 3, 1, 0, false, false, &t);
    const int64_t want[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1};
    assert_int_equal(t, 12);
    assert_memory_equal(e, want, sizeof want);
    /* drop_last: 10 over 3 ranks -> 3 each, the tail dropped (torch: ceil((10-3)/3) = 3) */
    assert_int_equal(tn_sampler_indices(10, 3, 2, 0, 0, false, true, NULL), 3);
    assert_int_equal(tn_sampler_indices(2, 3, 0, 0, 0, false, true, NULL), 0);
    assert_int_equal(tn_sampler_indices(9, 3, 0, 0, 0, false, true, NULL), 3);
    assert_int_equal(tn_sampler_indices(0, 3, 0, 0, 0, true, false, NULL), 0);
    /* counts near 2^63 (n + world overflowed): math.ceil(n / world), floor with drop_last */
    assert_int_equal(tn_sampler_indices(INT64_MAX, 3, 0, 0, 0, false, false, NULL),
                     INT64_MAX / 3 + 1);
    assert_int_equal(tn_sampler_indices(INT64_MAX, 3, 0, 0, 0, false, true, NULL), INT64_MAX / 3);
    assert_int_equal(tn_sampler_indices(INT64_MAX, 1, 0, 0, 0, false, false, NULL), INT64_MAX);
    /* a huge n without shuffle, a world of 2^31 - 1 ranks: the last rank's 5 indices wrap */
    const int w = INT32_MAX;
    const int64_t big = (int64_t)w * 4 + 3; /* 5 per rank, padded */
    int64_t last[5];
    assert_int_equal(tn_sampler_indices(big, w, w - 1, 0, 0, false, false, last), 5);
    for (int64_t k = 0; k < 5; k++)
        assert_int_equal(last[k], (k * w + w - 1) % big);
    free(a), free(b), free(c), free(d), free(e);
}

static void test_sampler_errors(void **state) {
    (void)state;
    int64_t out[4];
    assert_int_equal(tn_sampler_indices(-1, 1, 0, 0, 0, true, false, out), -1);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "need n >= 0, world >= 1");
    assert_int_equal(tn_sampler_indices(4, 0, 0, 0, 0, true, false, out), -1);
    assert_int_equal(tn_sampler_indices(4, 2, 2, 0, 0, true, false, out), -1);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "rank 2");
    assert_int_equal(tn_sampler_indices(4, 2, -1, 0, 0, true, false, out), -1);
    assert_int_equal(tn_sampler_indices(4, 2, 0, 0, -1, true, false, out), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_shares_form_a_padded_permutation),
        TT_TEST(test_epoch_seed_shuffle_drop_last),
        TT_TEST(test_sampler_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
