/* tests/test_fuzz_regressions.c — one test per family of bugs found by
 * fuzzing (fuzz/README.md), named after the family. Each failing call must
 * return an error, read nothing past what its arguments describe, change no
 * tensor and leak nothing (the teardown counts live tensors). The inputs
 * that found them are in fuzz/regressions/, replayed by scripts/fuzz and by
 * the fuzz_replay test. */
#include <math.h>

#include "util.h"

#include <limits.h>
#include <string.h>
#include <sys/sysinfo.h>

/* A shape argument has `ndim` entries only when ndim is in range: every
 * function that takes (ndim, shape) or (ndim, dims) checks ndim before it
 * reads (under ASan a read past `one` is a report). Found: tn_expand
 * formatted its error message from INT_MAX entries. */
static void ndim_checked_before_shape_is_read(void **state) {
    const int64_t one[1] = {2};
    const int dims[1] = {0};
    tn_tensor *a = tn_zeros(1, one, TN_F32);
    const int bad[] = {INT_MAX, TN_MAX_DIMS + 1, -1, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int nd = bad[i];
        assert_null(tn_expand(a, nd, one));
        assert_int_equal(tn_last_status(), TN_ERR_SHAPE);
        assert_null(tn_view(a, nd, one));
        assert_null(tn_reshape(a, nd, one));
        assert_null(tn_permute(a, nd, dims));
        assert_null(tn_zeros(nd, one, TN_F32));
        assert_null(tn_tensor_from(one, TN_I64, nd, one, false));
    }
    assert_int_equal(tn_version(a), 0);
    tn_release(a);
}

/* Bytes no allocation on this machine could give: 256 GiB, or more where
 * the machine has that much memory and swap. */
static int64_t unattainable_floats(void) {
    struct sysinfo si;
    uint64_t total = sysinfo(&si) == 0 ? ((uint64_t)si.totalram + si.totalswap) * si.mem_unit : 0;
    int64_t n = INT64_C(1) << 36; /* float32: 256 GiB */
    while ((uint64_t)n * 4 <= total && n < (INT64_C(1) << 60))
        n <<= 1;
    return n;
}

/* A request beyond the machine's memory is refused by the library itself,
 * before any allocator sees it: TN_ERR_OUT_OF_MEMORY, whatever the kernel's
 * overcommit policy or the sanitizer's allocator would do. */
static void huge_requests_refused_before_allocating(void **state) {
    int64_t n = unattainable_floats(), half = n / 2;
    assert_null(tn_empty(1, &n, TN_F32));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "out of memory");
    assert_null(tn_zeros(1, &half, TN_F64));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "memory and swap");
    assert_null(tn_full(1, &n, TN_F32, 1));
    tn_tensor *one = tn_ones(1, (const int64_t[]){1}, TN_F32);
    tn_tensor *wide = tn_expand(one, 1, &n); /* a view: costs nothing */
    assert_non_null(wide);
    assert_null(tn_contiguous(wide));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "out of memory");
    assert_null(tn_neg(wide));
    tn_release(wide);
    tn_release(one);
}

/* What tn_save_buffer writes, tn_load_buffer reads back: a size or offset
 * of 2^53 or more, which a JSON number read as a double does not hold
 * exactly, is refused at save. Found: an empty tensor of shape [0, 2^62]
 * was saved, and its file refused by the loader. */
static void safetensors_saves_only_what_loads(void **state) {
    (void)state;
    tn_tensor *t = tn_zeros(2, (int64_t[]){0, INT64_C(1) << 62}, TN_F32);
    tn_tensor *ok = tn_zeros(2, (int64_t[]){0, (INT64_C(1) << 53) - 1}, TN_F32);
    tn_state_dict *sd = tn_state_dict_new();
    assert_int_equal(tn_state_dict_set(sd, "", t), TN_OK);
    size_t n;
    assert_null(tn_save_buffer(sd, &n));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_state_dict_set(sd, "", ok), TN_OK);
    void *b = tn_save_buffer(sd, &n);
    assert_non_null(b);
    tn_state_dict *back = tn_load_buffer(b, n);
    assert_non_null(back);
    tn_state_dict_free(back);
    tn_buffer_free(b);
    tn_state_dict_free(sd);
    tn_release(ok);
    tn_release(t);
}

/* fuzz/regressions/safetensors-header-long-offsets: the header's data_offsets were
 * formatted into a 32-byte buffer with their key ("],\"data_offsets\":[" and 20 digits),
 * and the text was copied with the length snprintf wanted: a read past the buffer (ASan) for
 * offsets of 10^12 bytes and more. A tensor of 2^33 x 243 float64 (an expanded view, 16 TiB)
 * is planned, then refused when its bytes cannot be had, cleanly. */
static void safetensors_header_long_offsets(void **state) {
    (void)state;
    tn_tensor *one = tn_zeros(1, (int64_t[]){1}, TN_F64);
    const int64_t shape[7] = {INT64_C(1) << 33, 3, 3, 3, 3, 3, 1};
    tn_tensor *r = tn_reshape(one, 7, (int64_t[]){1, 1, 1, 1, 1, 1, 1});
    tn_tensor *big = tn_expand(r, 7, shape);
    assert_non_null(big);
    tn_state_dict *sd = tn_state_dict_new();
    assert_int_equal(tn_state_dict_set(sd, "small", one), TN_OK);
    assert_int_equal(tn_state_dict_set(sd, "big", big), TN_OK);
    size_t n;
    assert_null(tn_save_buffer(sd, &n));
    assert_int_equal(tn_last_status(), TN_ERR_OUT_OF_MEMORY);
    tn_state_dict_free(sd);
    tn_release(big);
    tn_release(r);
    tn_release(one);
}

/* fuzz/regressions/seed-gradient-of-another-dtype: backward's seed gradient was handed to
 * the root's node in its own dtype, and the node read it in the output's: a bool seed of
 * [3, 3, 3] (27 bytes) read as float32 past its end (ASan). The seed is now converted to the
 * output's dtype, as PyTorch's engine does: bool or float64 seeds give float32 gradients. */
static void seed_gradient_of_another_dtype(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const float v[6] = {0.5f, -1, 2, 0, 1, 3};
    tn_tensor *x = tn_tensor_from(v, TN_F32, 2, (int64_t[]){2, 3}, true);
    tn_tensor *y = tn_log_softmax(x, 1);
    tn_tensor *seed_b = tn_ones(2, (int64_t[]){2, 3}, TN_BOOL);
    assert_int_equal(tn_backward(y, seed_b, true), TN_OK);
    tn_tensor *gb = tn_clone(tn_grad(x));
    assert_int_equal(tn_zero_grad(x), TN_OK);
    tn_tensor *seed_f = tn_ones(2, (int64_t[]){2, 3}, TN_F32);
    assert_int_equal(tn_backward(y, seed_f, true), TN_OK);
    double want[6];
    assert_int_equal(tn_copy_to_f64(tn_grad(x), want, 6), TN_OK);
    tt_assert_close(gb, want, 6, 0);
    assert_int_equal(tn_zero_grad(x), TN_OK);
    tn_tensor *seed_d = tn_ones(2, (int64_t[]){2, 3}, TN_F64);
    assert_int_equal(tn_backward(y, seed_d, false), TN_OK);
    assert_int_equal(tn_dtype_of(tn_grad(x)), TN_F32);
    tt_assert_close(tn_grad(x), want, 6, 0);
    tn_scope_end();
}

/* A bool tensor's memory may hold any byte (tn_empty's); its file holds 0
 * or 1, which the loader requires. Found: an uninitialised bool tensor was
 * saved with the byte 190, and its file refused. */
static void safetensors_bools_saved_as_0_or_1(void **state) {
    (void)state;
    tn_tensor *t = tn_empty(2, (int64_t[]){5, 5}, TN_BOOL);
    memset(tn_data_ptr(t), 190, 25);
    tn_state_dict *sd = tn_state_dict_new();
    assert_int_equal(tn_state_dict_set(sd, "", t), TN_OK);
    size_t n;
    void *b = tn_save_buffer(sd, &n);
    tn_state_dict *back = tn_load_buffer(b, n);
    assert_non_null(back);
    tn_tensor *l = tn_state_dict_get(back, "");
    double ones[25];
    for (int i = 0; i < 25; i++)
        ones[i] = 1;
    tt_assert_close(l, ones, 25, 0);
    tn_release(l);
    tn_state_dict_free(back);
    tn_buffer_free(b);
    tn_state_dict_free(sd);
    tn_release(t);
}

/* fuzz/regressions/fast-exp-nan: the vectorised float32 exp (engine/core/fast_exp.h)
 * converted NaN to int (undefined; UBSan's float-cast-overflow). GELU (tanh), SiLU and
 * attention on NaN, infinities and values past exp's range give PyTorch's results. */
static void fast_exp_nan_and_range(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    const float v[7] = {NAN, INFINITY, -INFINITY, 100, -100, 88.8f, -105};
    tn_tensor *x = tn_tensor_from(v, TN_F32, 1, (int64_t[]){7}, false);
    /* torch 1.13: F.gelu(x, approximate='tanh') and F.silu(x) both give these */
    const double want[7] = {NAN, INFINITY, NAN, 100, -0.0, 88.80000305175781, -0.0};
    tt_assert_close(tn_gelu(x, true), want, 7, 0);
    tt_assert_close(tn_silu(x), want, 7, 0);
    /* a NaN score: its row is NaN, the other row is finite */
    const float qv[4] = {NAN, 1, 0.5f, 0.25f};
    tn_tensor *q = tn_tensor_from(qv, TN_F32, 2, (int64_t[]){2, 2}, false);
    tn_tensor *o = tn_scaled_dot_product_attention(q, q, q, NULL, 0, true);
    float ov[4];
    assert_int_equal(tn_copy_to(o, ov, sizeof ov), TN_OK);
    assert_true(isnan(ov[0]) && isnan(ov[1]));
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(ndim_checked_before_shape_is_read),
        TT_TEST(huge_requests_refused_before_allocating),
        TT_TEST(safetensors_saves_only_what_loads),
        TT_TEST(safetensors_bools_saved_as_0_or_1),
        TT_TEST(safetensors_header_long_offsets),
        TT_TEST(seed_gradient_of_another_dtype),
        TT_TEST(fast_exp_nan_and_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
