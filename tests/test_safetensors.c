/* tests/test_safetensors.c — weights in and out (include/tenet/io.h).
 *
 * Round trips of every dtype, views and devices; the state dict container;
 * files written by Python (tests/data/st_*.safetensors, made by
 * scripts/gen_safetensors_ref.py): values, F16/BF16 conversion, names with
 * escapes, and tenet's output byte-identical to them; load_state_dict's
 * checks and PyTorch's messages; a table of hostile files (each a clean
 * error), every truncation and every byte corrupted of a valid file; file
 * errors; an allocation-failure walk. Every test checks that no tensor or
 * storage leaked (TT_TEST); the asan preset checks the heap.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "util.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tenet/testing.h>

/* ---- helpers ------------------------------------------------------------------- */

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return b;
}

static void write_file(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* t's bytes, row-major (malloc'd). */
static unsigned char *bytes_of(const tn_tensor *t, size_t *n) {
    *n = (size_t)tn_numel(t) * tn_dtype_size(tn_dtype_of(t));
    unsigned char *b = malloc(*n + 1);
    assert_int_equal(tn_copy_to(t, b, *n), TN_OK);
    return b;
}

/* Same dtype, shape and bytes. */
static void assert_same(const tn_tensor *a, const tn_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(tn_dtype_of(a), tn_dtype_of(b));
    assert_int_equal(tn_ndim(a), tn_ndim(b));
    for (int d = 0; d < tn_ndim(a); d++)
        assert_int_equal(tn_shape(a)[d], tn_shape(b)[d]);
    size_t na, nb;
    unsigned char *x = bytes_of(a, &na), *y = bytes_of(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x);
    free(y);
}

static tn_tensor *from(const void *v, tn_dtype dt, int ndim, const int64_t *shape) {
    tn_tensor *t = tn_tensor_from(v, dt, ndim, shape, false);
    assert_non_null(t);
    return t;
}

/* A dict of one tensor of each dtype and some layouts (the caller frees). */
static tn_state_dict *sample_dict(void) {
    static const float f32[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-45f};
    static const double f64[3] = {0.1, -1e300, 2.5e-310};
    static const int16_t i16[3] = {-32768, -1, 32767};
    static const int32_t i32[4] = {INT32_MIN, 7, 0, INT32_MAX};
    static const int64_t i64[4] = {INT64_MIN, -1, 0, INT64_MAX};
    static const uint8_t b[5] = {1, 0, 1, 1, 0};
    tn_state_dict *sd = tn_state_dict_new();
    assert_non_null(sd);
    tn_tensor *t[] = {
        from(f32, TN_F32, 2, (int64_t[]){2, 3}), from(f64, TN_F64, 1, (int64_t[]){3}),
        from(i16, TN_I16, 1, (int64_t[]){3}),    from(i32, TN_I32, 2, (int64_t[]){2, 2}),
        from(i64, TN_I64, 1, (int64_t[]){4}),    from(b, TN_BOOL, 1, (int64_t[]){5}),
        tn_scalar(3.25, TN_F32),                 tn_zeros(2, (int64_t[]){0, 3}, TN_F64),
    };
    const char *names[] = {"w.f32", "w.f64", "w.i16", "w.i32", "w.i64", "w.bool", "scalar", "empty"};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(tn_state_dict_set(sd, names[i], t[i]), TN_OK);
        tn_release(t[i]);
    }
    /* a transposed view (non-contiguous) and an expanded one (stride 0) */
    tn_tensor *base = tn_arange(0, 12, 1, TN_F32);
    tn_tensor *m = tn_reshape(base, 2, (int64_t[]){3, 4});
    tn_tensor *tr = tn_transpose(m, 0, 1);
    tn_tensor *col = tn_reshape(base, 2, (int64_t[]){12, 1});
    tn_tensor *narrow = tn_narrow(col, 0, 0, 2);
    tn_tensor *ex = tn_expand(narrow, 2, (int64_t[]){2, 3});
    assert_false(tn_is_contiguous(tr));
    assert_int_equal(tn_state_dict_set(sd, "view.transposed", tr), TN_OK);
    assert_int_equal(tn_state_dict_set(sd, "view.expanded", ex), TN_OK);
    assert_int_equal(tn_state_dict_set_metadata(sd, "format", "pt"), TN_OK);
    assert_int_equal(tn_state_dict_set_metadata(sd, "n\u00f6te", "a \"b\"\n\x01 \u20ac"), TN_OK);
    tn_release(narrow);
    tn_release(ex);
    tn_release(col);
    tn_release(tr);
    tn_release(m);
    tn_release(base);
    return sd;
}

/* Every entry and metadata of a equal (dtype, shape, bytes) in b. */
static void assert_dicts_equal(const tn_state_dict *a, const tn_state_dict *b) {
    assert_int_equal(tn_state_dict_count(a), tn_state_dict_count(b));
    for (int64_t i = 0; i < tn_state_dict_count(a); i++) {
        const char *name = tn_state_dict_name(a, i);
        assert_string_equal(name, tn_state_dict_name(b, i));
        tn_tensor *x = tn_state_dict_at(a, i), *y = tn_state_dict_get(b, name);
        assert_same(x, y);
        tn_release(x);
        tn_release(y);
    }
    assert_int_equal(tn_state_dict_metadata_count(a), tn_state_dict_metadata_count(b));
    for (int64_t i = 0; i < tn_state_dict_metadata_count(a); i++) {
        const char *k = tn_state_dict_metadata_key(a, i);
        assert_string_equal(k, tn_state_dict_metadata_key(b, i));
        assert_string_equal(tn_state_dict_metadata(a, k), tn_state_dict_metadata(b, k));
    }
}

static tn_state_dict *dict_of(int n, const char *const *names, tn_tensor *const *ts);

/* ---- round trips ----------------------------------------------------------------- */

static void round_trip_every_dtype(void **state) {
    (void)state;
    tn_state_dict *sd = sample_dict();
    size_t n;
    unsigned char *buf = tn_save_buffer(sd, &n);
    assert_non_null(buf);
    assert_int_equal((buf[0] | buf[1] << 8) % 8, 0); /* header padded: data aligned */
    tn_state_dict *back = tn_load_buffer(buf, n);
    assert_non_null(back);
    assert_dicts_equal(sd, back);
    /* loaded tensors: contiguous CPU leaves without grad */
    tn_tensor *t = tn_state_dict_get(back, "view.transposed");
    assert_true(tn_is_contiguous(t));
    assert_false(tn_requires_grad(t));
    double want[12] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    tt_assert_close(t, want, 12, 0);
    tn_release(t);
    t = tn_state_dict_get(back, "view.expanded");
    tt_assert_close(t, (double[]){0, 0, 0, 1, 1, 1}, 6, 0);
    tn_release(t);
    /* a bool tensor's memory may hold any byte (tn_empty, tn_data_ptr): saved as 0 or 1 */
    tn_tensor *raw = tn_empty(1, (int64_t[]){4}, TN_BOOL);
    memcpy(tn_data_ptr(raw), "\x00\xbe\x01\xff", 4);
    tn_state_dict *bd = dict_of(1, (const char *[]){"raw"}, &raw);
    size_t bn;
    unsigned char *bb = tn_save_buffer(bd, &bn);
    assert_memory_equal(bb + bn - 4, "\x00\x01\x01\x01", 4);
    assert_int_equal(tn_save(tt_tmp_path("bool.safetensors"), bd), TN_OK);
    tn_state_dict *bl = tn_load(tt_tmp_path("bool.safetensors"));
    assert_non_null(bl);
    tn_tensor *lb = tn_state_dict_get(bl, "raw");
    tt_assert_close(lb, (double[]){0, 1, 1, 1}, 4, 0);
    tn_release(lb);
    tn_state_dict_free(bl);
    tn_buffer_free(bb);
    tn_state_dict_free(bd);
    tn_release(raw);
    /* the file holds the same bytes as the buffer */
    assert_int_equal(tn_save(tt_tmp_path("rt.safetensors"), sd), TN_OK);
    size_t fn;
    unsigned char *file = read_file(tt_tmp_path("rt.safetensors"), &fn);
    assert_int_equal(fn, n);
    assert_memory_equal(file, buf, n);
    tn_state_dict *again = tn_load(tt_tmp_path("rt.safetensors"));
    assert_non_null(again);
    assert_dicts_equal(sd, again);
    free(file);
    tn_buffer_free(buf);
    tn_state_dict_free(again);
    tn_state_dict_free(back);
    tn_state_dict_free(sd);
}

static void save_tensors_and_order(void **state) {
    (void)state;
    tn_tensor *a = tn_ones(1, (int64_t[]){2}, TN_F32), *b = tn_ones(1, (int64_t[]){1}, TN_I64);
    tn_tensor *c = tn_zeros(1, (int64_t[]){3}, TN_BOOL);
    const char *names[] = {"b", "a", "c"};
    tn_tensor *ts[] = {a, b, c};
    assert_int_equal(tn_save_tensors(tt_tmp_path("three.safetensors"), 3, names, ts), TN_OK);
    size_t n;
    unsigned char *f = read_file(tt_tmp_path("three.safetensors"), &n);
    /* I64 first, then F32, then BOOL; no __metadata__; padded with spaces */
    const char *hdr = "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                      "\"c\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[16,19]}}";
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    assert_int_equal(f[0], padded);
    assert_memory_equal(f + 8, hdr, hl);
    for (size_t i = hl; i < padded; i++)
        assert_int_equal(f[8 + i], ' ');
    assert_int_equal(n, 8 + padded + 19);
    free(f);
    /* an empty dict: "{}" and six spaces */
    tn_state_dict *e = tn_state_dict_new();
    size_t en;
    unsigned char *eb = tn_save_buffer(e, &en);
    assert_int_equal(en, 16);
    assert_memory_equal(eb, "\x08\0\0\0\0\0\0\0{}      ", 16);
    tn_state_dict *back = tn_load_buffer(eb, en);
    assert_int_equal(tn_state_dict_count(back), 0);
    tn_state_dict_free(back);
    tn_buffer_free(eb);
    tn_state_dict_free(e);
    tn_release(a);
    tn_release(b);
    tn_release(c);
}

/* The byte strings of the reference implementation's own serializer tests
 * (safetensors' tensor.rs): tenet writes the same bytes. */
static void reference_vectors(void **state) {
    (void)state;
    static const float v[6] = {0, 1, 2, 3, 4, 5};
    struct {
        const char *name;
        int ndim;
        int64_t shape[4];
        const char *meta;
        const char *hdr;
        size_t pad;
    } cases[] = {
        {"attn.0", 3, {1, 2, 3}, NULL,
         "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}", 0},
        {"attn0", 4, {1, 1, 2, 3}, NULL,
         "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}", 7},
        {NULL, 0, {0}, "pt", "{\"__metadata__\":{\"framework\":\"pt\"}}", 5},
    };
    for (int c = 0; c < 3; c++) {
        tn_state_dict *sd = tn_state_dict_new();
        tn_tensor *t = NULL;
        if (cases[c].name) {
            t = from(v, TN_F32, cases[c].ndim, cases[c].shape);
            assert_int_equal(tn_state_dict_set(sd, cases[c].name, t), TN_OK);
        }
        if (cases[c].meta)
            assert_int_equal(tn_state_dict_set_metadata(sd, "framework", cases[c].meta), TN_OK);
        size_t n, hl = strlen(cases[c].hdr), data = t ? 24 : 0;
        unsigned char *b = tn_save_buffer(sd, &n);
        assert_int_equal(n, 8 + hl + cases[c].pad + data);
        assert_int_equal(b[0], hl + cases[c].pad);
        assert_memory_equal(b + 8, cases[c].hdr, hl);
        for (size_t i = 0; i < cases[c].pad; i++)
            assert_int_equal(b[8 + hl + i], ' ');
        if (t) assert_memory_equal(b + 8 + hl + cases[c].pad, v, 24);
        tn_buffer_free(b);
        tn_state_dict_free(sd);
        tn_release(t);
    }
}

static void device_tensors_are_copied_to_the_host(void **state) {
    (void)state;
    if (tn_cuda_device_count() <= 0) {
        print_message("no CUDA device: the device part is skipped\n");
        return;
    }
    tn_tensor *h = tn_arange(0, 6, 1, TN_F32);
    tn_tensor *g = tn_to(h, TN_DTYPE_SAME, TN_DEVICE_CUDA(0));
    tn_tensor *g2 = tn_reshape(g, 2, (int64_t[]){2, 3}), *h2 = tn_reshape(h, 2, (int64_t[]){2, 3});
    tn_tensor *gt = tn_transpose(g2, 0, 1), *ht = tn_transpose(h2, 0, 1);
    const char *names[] = {"g", "gt"};
    tn_tensor *ts[] = {g, gt};
    assert_int_equal(tn_save_tensors(tt_tmp_path("cuda.safetensors"), 2, names, ts), TN_OK);
    tn_state_dict *sd = tn_load(tt_tmp_path("cuda.safetensors"));
    tn_tensor *lg = tn_state_dict_get(sd, "g"), *lgt = tn_state_dict_get(sd, "gt");
    assert_int_equal(tn_device_of(lg).type, TN_CPU);
    assert_same(lg, h);
    assert_same(lgt, ht);
    tn_release(lg);
    tn_release(lgt);
    tn_state_dict_free(sd);
    tn_release(g2);
    tn_release(h2);
    tn_release(gt);
    tn_release(ht);
    tn_release(g);
    tn_release(h);
}

/* ---- the container ---------------------------------------------------------------- */

static void state_dict_api(void **state) {
    (void)state;
    tn_state_dict *sd = tn_state_dict_new();
    tn_tensor *a = tn_ones(1, (int64_t[]){2}, TN_F32), *b = tn_zeros(1, (int64_t[]){2}, TN_F32);
    assert_int_equal(tn_state_dict_set(sd, "z", a), TN_OK);
    assert_int_equal(tn_state_dict_set(sd, "a", a), TN_OK);
    assert_int_equal(tn_state_dict_set(sd, "m", b), TN_OK);
    assert_int_equal(tn_state_dict_set(sd, "z", b), TN_OK); /* replaces */
    assert_int_equal(tn_state_dict_set(sd, "z", b), TN_OK); /* the same tensor again */
    assert_int_equal(tn_state_dict_count(sd), 3);
    assert_string_equal(tn_state_dict_name(sd, 0), "a");
    assert_string_equal(tn_state_dict_name(sd, 1), "m");
    assert_string_equal(tn_state_dict_name(sd, 2), "z");
    tn_tensor *z = tn_state_dict_get(sd, "z");
    assert_ptr_equal(z, b); /* the dict holds references, not copies */
    tn_release(z);
    assert_true(tn_state_dict_contains(sd, "m"));
    assert_false(tn_state_dict_contains(sd, "q"));
    tn_clear_error();
    assert_null(tn_state_dict_get(sd, "q"));
    tt_assert_error(TN_ERR_INDEX, "key 'q' not in the state dict");
    assert_null(tn_state_dict_name(sd, 3));
    tt_assert_error(TN_ERR_INDEX, "out of range");
    assert_null(tn_state_dict_at(sd, -1));
    tt_assert_error(TN_ERR_INDEX, "out of range");
    assert_int_equal(tn_state_dict_set(sd, "__metadata__", a), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "reserved");
    assert_int_equal(tn_state_dict_set(sd, "bad\xff", a), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "not valid UTF-8");
    assert_int_equal(tn_state_dict_set(sd, NULL, a), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_state_dict_set(sd, "x", NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_state_dict_set(NULL, "x", a), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_state_dict_count(NULL), -1);
    assert_int_equal(tn_state_dict_set_metadata(sd, "k", "v1"), TN_OK);
    assert_int_equal(tn_state_dict_set_metadata(sd, "k", "v2"), TN_OK);
    assert_int_equal(tn_state_dict_set_metadata(sd, "a", "\xc3"), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_state_dict_metadata_count(sd), 1);
    assert_string_equal(tn_state_dict_metadata(sd, "k"), "v2");
    tn_clear_error();
    assert_null(tn_state_dict_metadata(sd, "absent"));
    assert_int_equal(tn_last_status(), TN_OK); /* absent is not an error */
    tn_state_dict_free(sd);
    tn_state_dict_free(NULL);
    /* the tensors outlive the dict */
    tt_assert_close(a, (double[]){1, 1}, 2, 0);
    tn_release(a);
    tn_release(b);
}

/* ---- files written by Python (scripts/gen_safetensors_ref.py) ---------------------------- */

static tn_tensor *get(const tn_state_dict *sd, const char *name, tn_dtype dt, int ndim,
                      const int64_t *shape) {
    tn_tensor *t = tn_state_dict_get(sd, name);
    if (!t) fail_msg("%s: %s", name, tn_last_error());
    assert_int_equal(tn_dtype_of(t), dt);
    assert_int_equal(tn_ndim(t), ndim);
    for (int d = 0; d < ndim; d++)
        assert_int_equal(tn_shape(t)[d], shape[d]);
    return t;
}

/* Bitwise equal floats, NaN equal to NaN of either sign. */
static void assert_floats(const tn_tensor *t, const float *want, int n) {
    float got[16];
    assert_int_equal(tn_copy_to(t, got, sizeof got), TN_OK);
    for (int i = 0; i < n; i++)
        if (isnan(want[i])) assert_true(isnan(got[i]));
        else assert_memory_equal(&got[i], &want[i], sizeof(float));
}

static void python_dtypes_file(void **state) {
    (void)state;
    tn_state_dict *sd = tn_load("data/st_dtypes.safetensors");
    if (!sd) fail_msg("%s", tn_last_error());
    static const char *const names[] = {
        "bf16", "bf16_as_f32", "bool", "empty", "f16", "f16_as_f32", "f32", "f64", "i16", "i32",
        "i64", "quote\"back\\slash\ttab\nnl\x01" "ctl/\u20ac\U0001F600", "scalar",
        "\u00e9mbed.\u0175eight"};
    assert_int_equal(tn_state_dict_count(sd), 14);
    for (int i = 0; i < 14; i++)
        assert_string_equal(tn_state_dict_name(sd, i), names[i]);
    assert_int_equal(tn_state_dict_metadata_count(sd), 2);
    assert_string_equal(tn_state_dict_metadata(sd, "format"), "pt");
    assert_string_equal(tn_state_dict_metadata(sd, "note"), "\u00fcn\u00efcode \"quoted\"\n");

    tn_tensor *t = get(sd, "f32", TN_F32, 2, (int64_t[]){3, 3});
    assert_floats(t, (float[]){1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-45f, INFINITY, -INFINITY, NAN},
                  9);
    tn_release(t);
    /* F16 and BF16 load as TN_F16 and TN_BF16, bit for bit; widened, they equal PyTorch's
     * .float() bit for bit */
    tn_tensor *h16 = get(sd, "f16", TN_F16, 1, (int64_t[]){11});
    tn_tensor *h = tn_to(h16, TN_F32, TN_DEVICE_KEEP);
    tn_tensor *hf = get(sd, "f16_as_f32", TN_F32, 1, (int64_t[]){11});
    assert_same(h, hf);
    tn_tensor *back = tn_to(hf, TN_F16, TN_DEVICE_KEEP); /* exact both ways */
    assert_same(back, h16);
    tn_release(back);
    tn_release(h16);
    assert_floats(h, (float[]){0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f,
                               5.960464477539063e-08f, 3.0517578125e-05f, INFINITY, -INFINITY, NAN},
                  11);
    tn_release(h);
    tn_release(hf);
    tn_tensor *b16 = get(sd, "bf16", TN_BF16, 2, (int64_t[]){11, 1});
    tn_tensor *b = tn_to(b16, TN_F32, TN_DEVICE_KEEP);
    tn_tensor *bf = get(sd, "bf16_as_f32", TN_F32, 2, (int64_t[]){11, 1});
    assert_same(b, bf);
    tn_release(b16);
    tn_release(b);
    tn_release(bf);
    t = get(sd, "f64", TN_F64, 1, (int64_t[]){3});
    double d[3];
    assert_int_equal(tn_copy_to(t, d, sizeof d), TN_OK);
    assert_memory_equal(d, ((double[]){0.1, -1e300, 2.5e-310}), sizeof d);
    tn_release(t);
    t = get(sd, "i64", TN_I64, 1, (int64_t[]){4});
    int64_t i64[4];
    assert_int_equal(tn_copy_to(t, i64, sizeof i64), TN_OK);
    assert_memory_equal(i64, ((int64_t[]){INT64_MIN, -1, 0, INT64_MAX}), sizeof i64);
    tn_release(t);
    t = get(sd, "i32", TN_I32, 2, (int64_t[]){2, 2});
    int32_t i32[4];
    assert_int_equal(tn_copy_to(t, i32, sizeof i32), TN_OK);
    assert_memory_equal(i32, ((int32_t[]){INT32_MIN, 7, 0, INT32_MAX}), sizeof i32);
    tn_release(t);
    t = get(sd, "i16", TN_I16, 1, (int64_t[]){3});
    tt_assert_close(t, (double[]){-32768, -1, 32767}, 3, 0);
    tn_release(t);
    t = get(sd, "bool", TN_BOOL, 1, (int64_t[]){4});
    tt_assert_close(t, (double[]){1, 0, 1, 1}, 4, 0);
    tn_release(t);
    t = get(sd, "scalar", TN_F32, 0, NULL);
    tt_assert_close(t, (double[]){3.25}, 1, 0);
    tn_release(t);
    t = get(sd, "empty", TN_F32, 2, (int64_t[]){0, 3});
    tn_release(t);
    t = get(sd, "\u00e9mbed.\u0175eight", TN_F32, 2, (int64_t[]){2, 3});
    tt_assert_close(t, (double[]){0, 1, 2, 3, 4, 5}, 6, 0);
    tn_release(t);
    t = get(sd, names[11], TN_I32, 1, (int64_t[]){1});
    tt_assert_close(t, (double[]){42}, 1, 0);
    tn_release(t);
    tn_state_dict_free(sd);
}

/* tenet writes what Python wrote: load, save, compare the bytes. */
static void python_files_byte_identical(void **state) {
    (void)state;
    const char *files[] = {"data/st_mlp.safetensors", "data/st_mlp_io.safetensors",
                           "data/st_dtypes.safetensors"}; /* F16 and BF16 among them */
    for (int f = 0; f < 3; f++) {
        size_t n, m;
        unsigned char *want = read_file(files[f], &n);
        tn_state_dict *sd = tn_load(files[f]);
        if (!sd) fail_msg("%s: %s", files[f], tn_last_error());
        unsigned char *got = tn_save_buffer(sd, &m);
        assert_non_null(got);
        assert_int_equal(m, n);
        assert_memory_equal(got, want, n);
        tn_buffer_free(got);
        tn_state_dict_free(sd);
        free(want);
    }
}

enum { MLP_IN = 4, MLP_HID = 8, MLP_OUT = 3, MLP_B = 5 };
static const char *const mlp_names[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
static const int64_t mlp_shapes[4][2] = {{MLP_HID, MLP_IN}, {MLP_HID, 0}, {MLP_OUT, MLP_HID},
                                         {MLP_OUT, 0}};

static void mlp_params(tn_tensor *p[4]) {
    for (int i = 0; i < 4; i++) {
        int nd = mlp_shapes[i][1] ? 2 : 1;
        tn_tensor *z = tn_zeros(nd, mlp_shapes[i], TN_F32);
        assert_int_equal(tn_requires_grad_(z, true), TN_OK);
        p[i] = z;
    }
}

/* A model's parameters loaded from PyTorch's state_dict compute PyTorch's output. */
static void python_mlp_forward(void **state) {
    (void)state;
    tn_tensor *p[4];
    mlp_params(p);
    tn_state_dict *sd = tn_load("data/st_mlp.safetensors");
    assert_non_null(sd);
    assert_string_equal(tn_state_dict_metadata(sd, "format"), "pt");
    assert_int_equal(tn_load_state_dict(sd, 4, mlp_names, p, true), TN_OK);
    assert_true(tn_is_grad_enabled()); /* restored */
    for (int i = 0; i < 4; i++) {
        assert_true(tn_requires_grad(p[i]));
        assert_int_equal(tn_version(p[i]), 1); /* one copy_ each */
    }
    tn_state_dict *io = tn_load("data/st_mlp_io.safetensors");
    assert_non_null(io);
    tn_tensor *x = tn_state_dict_get(io, "x"), *y = tn_state_dict_get(io, "y");
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *out = tn_linear(tn_relu(tn_linear(x, p[0], p[1])), p[2], p[3]);
    assert_non_null(out);
    double want[MLP_B * MLP_OUT];
    assert_int_equal(tn_copy_to_f64(y, want, MLP_B * MLP_OUT), TN_OK);
    tt_assert_close(out, want, MLP_B * MLP_OUT, 1e-5);
    tn_scope_end();
    tn_release(x);
    tn_release(y);
    tn_state_dict_free(io);
    tn_state_dict_free(sd);
    for (int i = 0; i < 4; i++)
        tn_release(p[i]);
}

/* The example of docs/api.md §14, as written there (the file in the test's folder). */
static void docs_example(void **state) {
    (void)state;
    tn_tensor *w1 = tn_randn(2, (int64_t[]){3, 4}, TN_F32), *b1 = tn_zeros(1, (int64_t[]){3}, TN_F32);
    tn_tensor *w2 = tn_randn(2, (int64_t[]){2, 3}, TN_F32), *b2 = tn_ones(1, (int64_t[]){2}, TN_F32);
    char path[512];
    snprintf(path, sizeof path, "%s", tt_tmp_path("mlp.safetensors"));
#define tn_save(p, sd) tn_save(path, sd)
#define tn_load(p) tn_load(path)
    const char *names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    tn_tensor *params[] = {w1, b1, w2, b2};

    /* save: any layout or device, written contiguous; the dict retains, it does not copy */
    tn_state_dict *sd = tn_state_dict_new();
    for (int i = 0; i < 4; i++) tn_state_dict_set(sd, names[i], params[i]);
    tn_state_dict_set_metadata(sd, "format", "pt");
    if (tn_save("mlp.safetensors", sd) < 0) fprintf(stderr, "%s\n", tn_last_error());
    tn_state_dict_free(sd);        /* (or, with no metadata: tn_save_tensors(path, 4, names, params)) */

    /* load into the model: names, shapes and dtypes checked first, then copy_ under no-grad */
    tn_state_dict *ck = tn_load("mlp.safetensors");
    if (!ck || tn_load_state_dict(ck, 4, names, params, /*strict*/ true) < 0)
        fprintf(stderr, "%s\n", tn_last_error());
    tn_state_dict_free(ck);
#undef tn_save
#undef tn_load
    assert_int_equal(tn_save_tensors(path, 4, names, params), TN_OK);
    assert_int_equal(tn_version(w1), 1);
    for (int i = 0; i < 4; i++)
        tn_release(params[i]);
}

/* ---- load_state_dict ------------------------------------------------------------------ */

static tn_state_dict *dict_of(int n, const char *const *names, tn_tensor *const *ts) {
    tn_state_dict *sd = tn_state_dict_new();
    for (int i = 0; i < n; i++)
        assert_int_equal(tn_state_dict_set(sd, names[i], ts[i]), TN_OK);
    return sd;
}

static void load_state_dict_errors(void **state) {
    (void)state;
    tn_tensor *w = tn_ones(2, (int64_t[]){4, 4}, TN_F32), *b = tn_ones(1, (int64_t[]){4}, TN_F32);
    tn_tensor *w3 = tn_zeros(2, (int64_t[]){3, 4}, TN_F32), *b0 = tn_zeros(1, (int64_t[]){4}, TN_F32);
    tn_tensor *bi = tn_zeros(1, (int64_t[]){4}, TN_I64), *b64 = tn_full(1, (int64_t[]){4}, TN_F64, 2);
    const char *model[] = {"fc.weight", "fc.bias"};
    tn_tensor *params[] = {w, b};

    tn_state_dict *sd = dict_of(2, (const char *[]){"fc.weight", "fc.b"}, (tn_tensor *[]){w3, b0});
    tn_clear_error();
    assert_int_equal(tn_load_state_dict(sd, 2, model, params, true), TN_ERR_INVALID_ARGUMENT);
    assert_string_equal(tn_last_error(),
                        "Error(s) in loading state_dict:\n\tMissing key(s) in state_dict: "
                        "\"fc.bias\". \n\tUnexpected key(s) in state_dict: \"fc.b\". \n\tsize "
                        "mismatch for fc.weight: copying a param with shape torch.Size([3, 4]) "
                        "from checkpoint, the shape in current model is torch.Size([4, 4]).");
    /* not strict: the size mismatch alone, as PyTorch */
    assert_int_equal(tn_load_state_dict(sd, 2, model, params, false), TN_ERR_SHAPE);
    assert_string_equal(tn_last_error(),
                        "Error(s) in loading state_dict:\n\tsize mismatch for fc.weight: copying a "
                        "param with shape torch.Size([3, 4]) from checkpoint, the shape in current "
                        "model is torch.Size([4, 4]).");
    tn_state_dict_free(sd);
    /* nothing was written */
    tt_assert_close(b, (double[]){1, 1, 1, 1}, 4, 0);
    assert_int_equal(tn_version(w), 0);
    assert_int_equal(tn_version(b), 0);

    /* float <- integer is refused; float64 -> float32 converts */
    sd = dict_of(2, model, (tn_tensor *[]){w, bi});
    assert_int_equal(tn_load_state_dict(sd, 2, model, params, true), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE, "dtype mismatch for fc.bias: copying a param with dtype int64 "
                                  "from checkpoint, the dtype in current model is float32.");
    tn_state_dict_free(sd);
    sd = dict_of(1, (const char *[]){"fc.bias"}, (tn_tensor *[]){b64});
    assert_int_equal(tn_load_state_dict(sd, 2, model, params, false), TN_OK);
    tt_assert_close(b, (double[]){2, 2, 2, 2}, 4, 0);
    assert_int_equal(tn_version(w), 0); /* missing, not strict: untouched */
    assert_int_equal(tn_version(b), 1);
    /* argument errors */
    assert_int_equal(tn_load_state_dict(sd, 2, (const char *[]){"a", "a"}, params, false),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "the parameter name 'a' is given twice");
    assert_int_equal(tn_load_state_dict(NULL, 2, model, params, true), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_load_state_dict(sd, -1, model, params, true), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_load_state_dict(sd, 2, NULL, params, true), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_load_state_dict(sd, 2, model, (tn_tensor *[]){w, NULL}, true),
                     TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_load_state_dict(sd, 0, NULL, NULL, false), TN_OK);
    tn_state_dict_free(sd);
    /* a long list of missing keys is cut with "..." and stays in the message buffer */
    enum { MANY = 200 };
    static char many_names[MANY][24];
    const char *mn[MANY];
    tn_tensor *mp[MANY];
    for (int i = 0; i < MANY; i++) {
        snprintf(many_names[i], sizeof many_names[i], "layer.%03d.weight", i);
        mn[i] = many_names[i];
        mp[i] = b;
    }
    sd = tn_state_dict_new();
    assert_int_equal(tn_load_state_dict(sd, MANY, mn, mp, true), TN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tn_last_error(), "Missing key(s) in state_dict: \"layer.000.weight\""));
    assert_non_null(strstr(tn_last_error(), "..."));
    tn_state_dict_free(sd);
    tn_release(w);
    tn_release(b);
    tn_release(w3);
    tn_release(b0);
    tn_release(bi);
    tn_release(b64);
}

/* Tied weights (one tensor under two names) save twice and load into both. */
static void shared_tensors(void **state) {
    (void)state;
    tn_tensor *w = tn_arange(0, 4, 1, TN_F32);
    tn_state_dict *sd = dict_of(2, (const char *[]){"wte", "lm_head"}, (tn_tensor *[]){w, w});
    size_t n;
    void *buf = tn_save_buffer(sd, &n);
    tn_state_dict *back = tn_load_buffer(buf, n);
    assert_non_null(back);
    tn_tensor *a = tn_zeros(1, (int64_t[]){4}, TN_F32), *b = tn_zeros(1, (int64_t[]){4}, TN_F32);
    assert_int_equal(
        tn_load_state_dict(back, 2, (const char *[]){"wte", "lm_head"}, (tn_tensor *[]){a, b}, true),
        TN_OK);
    tt_assert_close(a, (double[]){0, 1, 2, 3}, 4, 0);
    tt_assert_close(b, (double[]){0, 1, 2, 3}, 4, 0);
    tn_buffer_free(buf);
    tn_state_dict_free(back);
    tn_state_dict_free(sd);
    tn_release(a);
    tn_release(b);
    tn_release(w);
}

/* ---- hostile files ------------------------------------------------------------------------- */

/* A file: the 8-byte size field (size < 0: the header's real length), the
 * header (hlen bytes; 0: strlen), then dlen bytes of data (zeros, or data). */
static unsigned char *make(int64_t size, const char *hdr, size_t hlen, const char *data,
                           size_t dlen, size_t *n) {
    if (!hlen) hlen = strlen(hdr);
    uint64_t field = size < 0 ? hlen : (uint64_t)size;
    *n = 8 + hlen + dlen;
    unsigned char *b = calloc(1, *n);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(field >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    if (data) memcpy(b + 8 + hlen, data, dlen);
    return b;
}

#define F32_1(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" #b "," #e "]}"

typedef struct hostile {
    const char *what;
    int64_t size; /* the size field; -1: the header's length */
    const char *hdr;
    size_t hlen; /* 0: strlen(hdr) */
    size_t dlen;
    const char *data; /* NULL: zeros */
    tn_status st;
    const char *needle;
} hostile;

static const hostile hostiles[] = {
    {"size beyond the file", 1000, "{}", 0, 0, NULL, TN_ERR_FORMAT, "InvalidHeaderLength"},
    {"size beyond the file by one", 3, "{}", 0, 0, NULL, TN_ERR_FORMAT, "InvalidHeaderLength"},
    {"giant size", INT64_C(1) << 62, "{}", 0, 0, NULL, TN_ERR_FORMAT, "HeaderTooLarge"},
    {"size 2^64-1", -2, "{}", 0, 0, NULL, TN_ERR_FORMAT, "HeaderTooLarge"},
    {"size one above the limit", 100000001, "{}", 0, 0, NULL, TN_ERR_FORMAT, "HeaderTooLarge"},
    {"empty header", 0, "{}", 0, 2, NULL, TN_ERR_FORMAT, "InvalidHeaderStart"},
    {"not an object", -1, "[1]", 0, 0, NULL, TN_ERR_FORMAT, "InvalidHeaderStart"},
    {"leading space", -1, " {}", 0, 0, NULL, TN_ERR_FORMAT, "InvalidHeaderStart"},
    {"invalid JSON", -1, "{\"a\":", 0, 0, NULL, TN_ERR_FORMAT, "InvalidHeaderDeserialization: invalid JSON"},
    {"invalid JSON: comma", -1, "{\"a\":1,}", 0, 0, NULL, TN_ERR_FORMAT, "invalid JSON"},
    {"invalid JSON: bare word", -1, "{\"a\":nope}", 0, 0, NULL, TN_ERR_FORMAT, "invalid JSON"},
    {"trailing characters", -1, "{} x", 0, 0, NULL, TN_ERR_FORMAT, "unexpected characters"},
    {"two objects", -1, "{}{}", 0, 0, NULL, TN_ERR_FORMAT, "unexpected characters"},
    {"NUL padding", -1, "{}\0\0\0\0\0\0", 8, 0, NULL, TN_ERR_FORMAT, "control character 0x00"},
    {"control character in a name", -1, "{\"a\x01\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "control character 0x01"},
    {"raw newline in a name", -1, "{\"a\nb\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "control character 0x0a"},
    {"escaped NUL in a name", -1, "{\"a\\u0000b\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "NUL character"},
    {"invalid UTF-8", -1, "{\"\xff\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "InvalidHeader: the header is not valid UTF-8"},
    {"overlong UTF-8", -1, "{\"\xc0\xaf\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "not valid UTF-8"},
    {"UTF-8 surrogate", -1, "{\"\xed\xa0\x80\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "not valid UTF-8"},
    {"lone escaped surrogate", -1, "{\"\\ud800\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "invalid JSON"},
    {"deep nesting", -1, NULL, 0, 0, NULL, TN_ERR_FORMAT, "invalid JSON"}, /* made below */
    {"entry not an object", -1, "{\"a\":1}", 0, 0, NULL, TN_ERR_FORMAT, "tensor 'a': its entry is not an object"},
    {"entry an array", -1, "{\"a\":[0,4]}", 0, 0, NULL, TN_ERR_FORMAT, "its entry is not an object"},
    {"dtype not a string", -1, "{\"a\":{\"dtype\":11,\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "dtype is not a string"},
    {"shape not an array", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "shape is not an array"},
    {"negative size", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "shape[0] is not an integer"},
    {"fractional size", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "shape[0] is not an integer"},
    {"size as a string", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,8]}}", 0, 8, NULL, TN_ERR_FORMAT, "shape[1] is not an integer"},
    {"size 2^53", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,0],\"data_offsets\":[0,0]}}", 0, 0, NULL, TN_ERR_FORMAT, "shape[0] is not an integer"},
    {"size 1e400", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "shape[0] is not an integer"},
    {"size null", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "shape[0] is not an integer"},
    {"three offsets", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 0, 4, NULL, TN_ERR_FORMAT, "data_offsets is not an array of two integers"},
    {"one offset", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 0, 4, NULL, TN_ERR_FORMAT, "data_offsets is not an array"},
    {"offsets as strings", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", 0, 4, NULL, TN_ERR_FORMAT, "data_offsets is not an array"},
    {"offsets an object", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 0, 4, NULL, TN_ERR_FORMAT, "data_offsets is not an array"},
    {"negative offset", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 0, 4, NULL, TN_ERR_FORMAT, "data_offsets is not an array"},
    {"missing dtype", -1, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "missing field 'dtype'"},
    {"missing shape", -1, "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "missing field 'shape'"},
    {"missing offsets", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, 4, NULL, TN_ERR_FORMAT, "missing field 'data_offsets'"},
    {"duplicate field", -1, "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "duplicate field 'dtype'"},
    {"unknown dtype", -1, "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 0, 16, NULL, TN_ERR_FORMAT, "unknown dtype 'F128'"},
    {"lower-case dtype", -1, "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "unknown dtype 'f32'"},
    {"dtype tenet lacks", -1, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, NULL, TN_ERR_DTYPE, "tensor 'a' has dtype U8, which tenet does not have"},
    {"nine dims", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_SHAPE, "tensor 'a' has 9 dimensions; tenet supports at most 8"},
    {"offsets out of bounds", -1, "{" F32_1("a", 0, 4) "," F32_1("b", 4, 8) "}", 0, 4, NULL, TN_ERR_FORMAT, "InvalidOffset: tensor 'b': data_offsets [4, 8] end beyond the data"},
    {"offsets far out of bounds", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9007199254740980,9007199254740984]}}", 0, 4, NULL, TN_ERR_FORMAT, "end beyond the data"},
    {"overlap", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}," F32_1("b", 4, 8) "}", 0, 8, NULL, TN_ERR_FORMAT, "InvalidOffset: tensor 'b': data_offsets [4, 8] overlap 'a'"},
    {"same offsets twice", -1, "{" F32_1("a", 0, 4) "," F32_1("b", 0, 4) "}", 0, 4, NULL, TN_ERR_FORMAT, "overlap"},
    {"gap", -1, "{" F32_1("a", 0, 4) "," F32_1("b", 8, 12) "}", 0, 12, NULL, TN_ERR_FORMAT, "tensor 'b': data_offsets [8, 12] leave a gap after 'a', which ends at byte 4"},
    {"gap at the start", -1, "{" F32_1("a", 4, 8) "}", 0, 8, NULL, TN_ERR_FORMAT, "leave a gap after the start of the data"},
    {"offsets reversed", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 0, 4, NULL, TN_ERR_FORMAT, "data_offsets [4, 0] run backwards"},
    {"bytes beyond the tensors", -1, "{" F32_1("a", 0, 4) "}", 0, 8, NULL, TN_ERR_FORMAT, "MetadataIncompleteBuffer: the tensors cover 4 bytes of the data, which has 8"},
    {"data but no tensor", -1, "{}", 0, 8, NULL, TN_ERR_FORMAT, "MetadataIncompleteBuffer"},
    {"shape and bytes differ", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8, NULL, TN_ERR_FORMAT, "TensorInvalidInfo: tensor 'a': its shape holds 12 bytes of F32, its data_offsets [0, 8] hold 8"},
    {"empty shape with bytes", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "TensorInvalidInfo"},
    {"0-dim with no bytes", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}}", 0, 0, NULL, TN_ERR_FORMAT, "TensorInvalidInfo"},
    {"numel overflows", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,4503599627370496],\"data_offsets\":[0,4]}}", 0, 4, NULL, TN_ERR_FORMAT, "ValidationOverflow"},
    {"bytes overflow", -1, "{\"a\":{\"dtype\":\"I64\",\"shape\":[4503599627370495,1024],\"data_offsets\":[0,8]}}", 0, 8, NULL, TN_ERR_FORMAT, "ValidationOverflow"},
    {"bytes beyond int64", -1, "{\"a\":{\"dtype\":\"I64\",\"shape\":[4503599627370495,512],\"data_offsets\":[0,8]}}", 0, 8, NULL, TN_ERR_FORMAT, "ValidationOverflow"},
    {"duplicate name", -1, "{" F32_1("a", 0, 4) "," F32_1("a", 4, 8) "}", 0, 8, NULL, TN_ERR_FORMAT, "duplicate tensor name 'a'"},
    {"duplicate __metadata__", -1, "{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, NULL, TN_ERR_FORMAT, "duplicate key '__metadata__'"},
    {"duplicate metadata key", -1, "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0, NULL, TN_ERR_FORMAT, "__metadata__: duplicate key 'k'"},
    {"metadata an array", -1, "{\"__metadata__\":[\"a\"]}", 0, 0, NULL, TN_ERR_FORMAT, "__metadata__ is not an object of strings"},
    {"metadata value a number", -1, "{\"__metadata__\":{\"k\":1}}", 0, 0, NULL, TN_ERR_FORMAT, "the value of 'k' is not a string"},
    {"BOOL byte 2", -1, "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", 0, 2, "\x01\x02", TN_ERR_FORMAT, "tensor 'a': BOOL element 1 is the byte 2, neither 0 nor 1"},
};

static unsigned char *make_hostile(const hostile *h, size_t *n) {
    if (h->hdr) return make(h->size == -2 ? -1 : h->size, h->hdr, h->hlen, h->data, h->dlen, n);
    enum { DEPTH = 5000 }; /* beyond cJSON's nesting limit (1000) */
    char *deep = malloc(2 * DEPTH + 16);
    size_t k = (size_t)sprintf(deep, "{\"a\":");
    memset(deep + k, '[', DEPTH);
    memset(deep + k + DEPTH, ']', DEPTH);
    strcpy(deep + k + 2 * DEPTH, "}");
    unsigned char *b = make(-1, deep, 0, NULL, 0, n);
    free(deep);
    return b;
}

static void expect_load_error(const char *what, tn_state_dict *sd, tn_status st, const char *needle) {
    if (sd) fail_msg("%s: loaded", what);
    if (tn_last_status() != st)
        fail_msg("%s: status %s, want %s (%s)", what, tn_status_string(tn_last_status()),
                 tn_status_string(st), tn_last_error());
    if (needle && !strstr(tn_last_error(), needle))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", what, tn_last_error(), needle);
}

static void hostile_files(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof hostiles / sizeof *hostiles; i++) {
        const hostile *h = &hostiles[i];
        size_t n;
        unsigned char *b = make_hostile(h, &n);
        if (h->size == -2) memset(b, 0xff, 8); /* 2^64 - 1 */
        tn_clear_error();
        expect_load_error(h->what, tn_load_buffer(b, n), h->st, h->needle);
        /* the same bytes as a file: the same error, naming the file */
        write_file(tt_tmp_path("hostile.safetensors"), b, n);
        tn_clear_error();
        expect_load_error(h->what, tn_load(tt_tmp_path("hostile.safetensors")), h->st, h->needle);
        assert_non_null(strstr(tn_last_error(), "hostile.safetensors"));
        free(b);
    }
    /* an empty file, 7 bytes */
    tn_clear_error();
    expect_load_error("empty", tn_load_buffer("", 0), TN_ERR_FORMAT,
                      "Error while deserializing header: HeaderTooSmall");
    expect_load_error("NULL", tn_load_buffer(NULL, 0), TN_ERR_FORMAT, "HeaderTooSmall");
    expect_load_error("7 bytes", tn_load_buffer("\x02\0\0\0\0\0\0", 7), TN_ERR_FORMAT,
                      "HeaderTooSmall");
    write_file(tt_tmp_path("empty.safetensors"), "", 0);
    expect_load_error("empty file", tn_load(tt_tmp_path("empty.safetensors")), TN_ERR_FORMAT,
                      "HeaderTooSmall");
    expect_load_error("NULL data", tn_load_buffer(NULL, 8), TN_ERR_INVALID_ARGUMENT, "NULL");
    expect_load_error("NULL path", tn_load(NULL), TN_ERR_INVALID_ARGUMENT, "NULL");
}

/* What the format allows at its edges loads. */
static void edge_cases_load(void **state) {
    (void)state;
    struct {
        const char *hdr;
        size_t dlen;
        int count;
    } ok[] = {
        {"{}", 0, 0},
        {"{}       \n\t\r", 0, 0}, /* any JSON whitespace as padding */
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, 1}, /* empty name */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}," F32_1("b", 0, 4)
         ",\"c\":{\"dtype\":\"I16\",\"shape\":[0,7],\"data_offsets\":[4,4]}}", 4, 3},
        {"{\"a\":{\"data_offsets\":[0,2],\"extra\":[1],\"shape\":[1],\"dtype\":\"BF16\"}}", 2, 1},
        {"{\"__metadata__\":{},\"a\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,0],"
         "\"data_offsets\":[0,0]}}", 0, 1}, /* huge sizes with no element */
        {"{ \"a\" : { \"dtype\" : \"BOOL\" , \"shape\" : [ 2 ] , \"data_offsets\" : [ 0 , 2 ] } }",
         2, 1},
        {"{\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\":{\"dtype\":\"I64\",\"shape\":[1],"
         "\"data_offsets\":[0,8]}}", 8, 1}, /* escapes, a surrogate pair */
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        size_t n;
        unsigned char *b = make(-1, ok[i].hdr, 0, NULL, ok[i].dlen, &n);
        tn_state_dict *sd = tn_load_buffer(b, n);
        if (!sd) fail_msg("case %zu: %s", i, tn_last_error());
        assert_int_equal(tn_state_dict_count(sd), ok[i].count);
        tn_state_dict_free(sd);
        free(b);
    }
    size_t n;
    unsigned char *b = make(-1, ok[7].hdr, 0, NULL, 8, &n);
    tn_state_dict *sd = tn_load_buffer(b, n);
    assert_string_equal(tn_state_dict_name(sd, 0), "\u00e9\U0001F600\"\\/");
    tn_state_dict_free(sd);
    free(b);
}

/* A valid file cut at every byte, and every byte of it changed: each a
 * clean error or a load, never a crash, a leak or a read out of bounds. */
static void truncated_and_corrupted(void **state) {
    (void)state;
    tn_state_dict *sd = sample_dict();
    size_t n;
    unsigned char *buf = tn_save_buffer(sd, &n);
    assert_non_null(buf);
    for (size_t len = 0; len < n; len++) {
        unsigned char *cut = malloc(len ? len : 1); /* exactly len bytes: ASan sees over-reads */
        memcpy(cut, buf, len);
        tn_clear_error();
        expect_load_error("truncated", tn_load_buffer(cut, len), TN_ERR_FORMAT, NULL);
        if (len % 7 == 0) {
            write_file(tt_tmp_path("cut.safetensors"), cut, len);
            expect_load_error("truncated file", tn_load(tt_tmp_path("cut.safetensors")),
                              TN_ERR_FORMAT, NULL);
        }
        free(cut);
    }
    static const int deltas[] = {1, -1, 0x20, 0x80};
    int loaded = 0, refused = 0;
    unsigned char *bad = malloc(n);
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 6; d++) {
            memcpy(bad, buf, n);
            bad[i] = d < 4 ? (unsigned char)(buf[i] + deltas[d]) : d == 4 ? 0 : 0xff;
            tn_clear_error();
            tn_state_dict *r = tn_load_buffer(bad, n);
            if (r) {
                loaded++;
                tn_state_dict_free(r);
            } else {
                refused++;
                assert_true(tn_last_status() < 0);
                assert_true(tn_last_error()[0] != '\0');
            }
        }
    print_message("%zu bytes changed 6 ways: %d loaded, %d refused\n", n, loaded, refused);
    assert_true(loaded > 0 && refused > 0);
    free(bad);
    tn_buffer_free(buf);
    tn_state_dict_free(sd);
}

/* ---- files and saving errors --------------------------------------------------------------- */

static int count_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int k = 0;
    for (struct dirent *e; (e = readdir(d));)
        k += e->d_name[0] != '.';
    closedir(d);
    return k;
}

static void file_errors(void **state) {
    (void)state;
    tn_clear_error();
    expect_load_error("missing file", tn_load(tt_tmp_path("absent.safetensors")), TN_ERR_IO,
                      "No such file or directory");
    expect_load_error("a folder", tn_load(tt_tmp_dir()), TN_ERR_IO, "not a regular file");
    assert_int_equal(mkfifo(tt_tmp_path("fifo"), 0600), 0); /* refused without blocking */
    expect_load_error("a FIFO", tn_load(tt_tmp_path("fifo")), TN_ERR_IO, "not a regular file");
    unlink(tt_tmp_path("fifo"));
    tn_tensor *t = tn_ones(1, (int64_t[]){3}, TN_F32);
    tn_state_dict *sd = dict_of(1, (const char *[]){"t"}, &t);
    assert_int_equal(tn_save("/nonexistent-tenet-dir/x.safetensors", sd), TN_ERR_IO);
    tt_assert_error(TN_ERR_IO, "No such file or directory");
    /* saving over a folder fails at the rename and leaves no temporary file */
    char sub[128];
    snprintf(sub, sizeof sub, "%s/folder", tt_tmp_dir());
    assert_int_equal(mkdir(sub, 0777), 0);
    int before = count_dir_entries(tt_tmp_dir());
    assert_int_equal(tn_save(sub, sd), TN_ERR_IO);
    tt_assert_error(TN_ERR_IO, "cannot save to");
    assert_int_equal(count_dir_entries(tt_tmp_dir()), before);
    rmdir(sub);
    /* tn_save_tensors' checks */
    tn_tensor *ts[] = {t, t};
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), 2, (const char *[]){"a", "a"}, ts),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "the name 'a' is given twice");
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), 1, (const char *[]){"__metadata__"}, ts),
                     TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), 1, (const char *[]){"\xe2\x82"}, ts),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "not valid UTF-8");
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), 1, (const char *[]){"a"},
                                     (tn_tensor *[]){NULL}),
                     TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), -1, NULL, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_save_tensors(NULL, 0, NULL, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_save(tt_tmp_path("x"), NULL), TN_ERR_INVALID_ARGUMENT);
    size_t n;
    assert_null(tn_save_buffer(sd, NULL));
    assert_null(tn_save_buffer(NULL, &n));
    /* an expanded view standing for 2^56 bytes: refused before anything is written */
    tn_tensor *one = tn_scalar(1, TN_F32);
    tn_tensor *huge = tn_expand(one, 2, (int64_t[]){INT64_C(1) << 27, INT64_C(1) << 27});
    assert_non_null(huge);
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), 1, (const char *[]){"huge"}, &huge),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "cannot save tensor 'huge': the data would reach 2^53");
    tn_release(huge);
    tn_release(one);
    /* an empty tensor with a size of 2^60: no byte, but a size JSON numbers do not hold */
    tn_tensor *wide = tn_zeros(2, (int64_t[]){0, INT64_C(1) << 60}, TN_F32);
    assert_non_null(wide);
    assert_int_equal(tn_save_tensors(tt_tmp_path("x"), 1, (const char *[]){"wide"}, &wide),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "cannot save tensor 'wide': its size "
                                             "1152921504606846976 in dim 1 reaches 2^53");
    tn_release(wide);
    assert_int_equal(access(tt_tmp_path("x"), F_OK), -1); /* no failed save left a file */
    tn_state_dict_free(sd);
    tn_release(t);
}

/* ---- out of memory ------------------------------------------------------------------------ */

/* Fails each allocation of save, load and load_state_dict in turn: every
 * call succeeds or fails with TN_ERR_OUT_OF_MEMORY, changing nothing (a
 * failed tn_save leaves the old file as it was, and no temporary file). */
static void oom_walk(void **state) {
    (void)state;
    tn_state_dict *sd = sample_dict();
    size_t n0;
    unsigned char *ref = tn_save_buffer(sd, &n0);
    const char *path = tt_tmp_path("walk.safetensors");
    write_file(path, "old", 3);
    int files = count_dir_entries(tt_tmp_dir());
    tn_tensor *p[4];
    mlp_params(p);
    tn_state_dict *mlp = tn_load("data/st_mlp.safetensors");
    int64_t n;
    int failures = 0;
    for (n = 1;; n++) {
        tn_clear_error();
        tn_test_fail_alloc_at(n);
        size_t sz = 0;
        unsigned char *buf = tn_save_buffer(sd, &sz);
        tn_state_dict *back = tn_load_buffer(ref, n0);
        tn_status saved = tn_save(path, sd);
        tn_state_dict *file = saved == TN_OK ? tn_load(path) : NULL;
        int64_t v0 = tn_version(p[0]);
        tn_status loaded = tn_load_state_dict(mlp, 4, mlp_names, p, true);
        bool fired = tn_test_alloc_failed();
        tn_test_fail_alloc_at(0);
        int failed = !buf + !back + (saved < 0) + (saved == TN_OK && !file) + (loaded < 0);
        if (failed) assert_int_equal(tn_last_status(), TN_ERR_OUT_OF_MEMORY);
        assert_true(failed <= 1);
        assert_int_equal(failed, fired ? failed : 0);
        if (buf) {
            assert_int_equal(sz, n0);
            assert_memory_equal(buf, ref, n0);
        }
        if (back) assert_dicts_equal(sd, back);
        if (file) assert_dicts_equal(sd, file);
        if (saved < 0) {
            size_t k;
            unsigned char *old = read_file(path, &k);
            assert_true(k == 3 || k == n0); /* the old file: from before, or an earlier save */
            free(old);
        }
        if (loaded < 0) assert_int_equal(tn_version(p[0]), v0);
        assert_int_equal(count_dir_entries(tt_tmp_dir()), files);
        failures += failed;
        tn_buffer_free(buf);
        tn_state_dict_free(back);
        tn_state_dict_free(file);
        if (!fired) break;
    }
    print_message("%lld allocations failed in turn, %d calls failed cleanly\n", (long long)n - 1,
                  failures);
    assert_true(n > 10);
    tn_state_dict_free(mlp);
    for (int i = 0; i < 4; i++)
        tn_release(p[i]);
    tn_buffer_free(ref);
    tn_state_dict_free(sd);
}

/* ---- threads ---------------------------------------------------------------------------- */

/* Threads load files, hostile ones included, and read one shared dict (get,
 * save) at once; each records what it saw, the main thread asserts. */
enum { THREADS = 4, ROUNDS = 20 };

typedef struct job {
    const tn_state_dict *shared;
    const unsigned char *ref; /* the shared dict's bytes */
    size_t ref_n;
    int ok, bad;
} job;

static void *thread_main(void *arg) {
    job *j = arg;
    for (int r = 0; r < ROUNDS; r++) {
        tn_state_dict *sd = tn_load("data/st_dtypes.safetensors");
        j->ok += sd && tn_state_dict_count(sd) == 14;
        tn_state_dict_free(sd);
        tn_state_dict *bad = tn_load_buffer("\x02\0\0\0\0\0\0\0{x", 10);
        j->ok += !bad && tn_last_status() == TN_ERR_FORMAT;
        size_t n;
        unsigned char *b = tn_save_buffer(j->shared, &n);
        j->ok += b && n == j->ref_n && memcmp(b, j->ref, n) == 0;
        tn_buffer_free(b);
        tn_tensor *t = tn_state_dict_get(j->shared, "w.i64");
        j->ok += t && tn_numel(t) == 4;
        tn_release(t);
    }
    j->bad = ROUNDS * 4 - j->ok;
    return NULL;
}

static void threads_load_and_read(void **state) {
    (void)state;
    tn_state_dict *sd = sample_dict();
    size_t n;
    unsigned char *ref = tn_save_buffer(sd, &n);
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){sd, ref, n, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].bad, 0);
    }
    tn_buffer_free(ref);
    tn_state_dict_free(sd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(round_trip_every_dtype),
        TT_TEST(save_tensors_and_order),
        TT_TEST(reference_vectors),
        TT_TEST(device_tensors_are_copied_to_the_host),
        TT_TEST(state_dict_api),
        TT_TEST(python_dtypes_file),
        TT_TEST(python_files_byte_identical),
        TT_TEST(python_mlp_forward),
        TT_TEST(docs_example),
        TT_TEST(load_state_dict_errors),
        TT_TEST(shared_tensors),
        TT_TEST(hostile_files),
        TT_TEST(edge_cases_load),
        TT_TEST(truncated_and_corrupted),
        TT_TEST(file_errors),
        TT_TEST(oom_walk),
        TT_TEST(threads_load_and_read),
    };
    return cmocka_run_group_tests(tests, tt_tmpdir_setup, tt_tmpdir_teardown);
}
