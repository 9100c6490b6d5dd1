/* tests/test_idx.c — IDX files in (tn_idx_load, tn_idx_load_buffer; tenet/io.h).
 *
 * Small files made here, plain and gzipped, files and buffers: every type's
 * values, the dtype and scale rules, hostile headers (bad magic, unknown
 * type, bad and overflowing dims, sizes the input cannot hold), every
 * truncation and every corrupted byte of a valid file (each a clean error or
 * the right tensor), corrupt gzip, file errors, an allocation-failure walk,
 * and Fashion-MNIST's own files where Debian's dataset-fashion-mnist is
 * installed. Every test checks that nothing leaked (TT_TEST); the asan
 * preset checks the heap and the reads.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <tenet/testing.h>

/* An IDX file's bytes (malloc'd, *n set): header of `type` and dims, then
 * nbytes of data. */
static unsigned char *idx_bytes(int type, int ndim, const uint32_t *dims, const void *data,
                                size_t nbytes, size_t *n) {
    *n = 4 + 4 * (size_t)ndim + nbytes;
    unsigned char *b = malloc(*n + 1);
    b[0] = b[1] = 0;
    b[2] = (unsigned char)type;
    b[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++)
        for (int k = 0; k < 4; k++)
            b[4 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
    if (nbytes) memcpy(b + 4 + 4 * ndim, data, nbytes);
    return b;
}

/* b gzipped (malloc'd, *gn set). */
static unsigned char *gzipped(const unsigned char *b, size_t n, size_t *gn) {
    z_stream z = {0};
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)b;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *gn = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static void write_file(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void assert_shape(const tn_tensor *t, tn_dtype dt, int ndim, const int64_t *shape) {
    assert_non_null(t);
    assert_int_equal(tn_dtype_of(t), dt);
    assert_int_equal(tn_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(tn_shape(t)[i], shape[i]);
}

/* The four ways in (plain and gzipped, buffer and file) give the same. */
static void load_four_ways(const unsigned char *b, size_t n, tn_dtype dt, double scale,
                           tn_tensor *out[4]) {
    size_t gn;
    unsigned char *g = gzipped(b, n, &gn);
    out[0] = tn_idx_load_buffer(b, n, dt, scale);
    out[1] = tn_idx_load_buffer(g, gn, dt, scale);
    write_file(tt_tmp_path("plain.idx"), b, n);
    write_file(tt_tmp_path("packed.idx.gz"), g, gn);
    out[2] = tn_idx_load(tt_tmp_path("plain.idx"), dt, scale);
    out[3] = tn_idx_load(tt_tmp_path("packed.idx.gz"), dt, scale);
    free(g);
}

/* A file of each type, loaded as TN_DTYPE_SAME and as float64. */
static void every_type(void **state) {
    (void)state;
    const uint32_t dims[2] = {2, 3};
    const int64_t shape[2] = {2, 3};
    const unsigned char u8[6] = {0, 1, 127, 128, 254, 255};
    const double want_u8[6] = {0, 1, 127, 128, 254, 255}, want_s8[6] = {0, 1, 127, -128, -2, -1};
    const unsigned char s16[12] = {0, 1, 0x7f, 0xff, 0x80, 0, 0xff, 0xff, 1, 0, 0, 0};
    const double want_s16[6] = {1, 32767, -32768, -1, 256, 0};
    const unsigned char s32[24] = {0x80, 0,    0,    0,    0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 5,
                                   0xff, 0xff, 0xff, 0xfe, 0,    1,    0,    0,    0, 0, 0, 0};
    const double want_s32[6] = {-2147483648.0, 2147483647.0, 5, -2, 65536, 0};
    const unsigned char f32[24] = {0x3f, 0x80, 0, 0, 0xc0, 0x20, 0,    0,    0x7f, 0x80, 0, 0,
                                   0,    0,    0, 1, 0x3e, 0xaa, 0xaa, 0xab, 0,    0,    0, 0};
    const double want_f32[6] = {1, -2.5, INFINITY, 1.401298464324817e-45, 0.3333333432674408, 0};
    unsigned char f64[48] = {0};
    const double want_f64[6] = {0.1, -1e300, 3, 0, 5e-324, 1.0 / 3};
    for (int i = 0; i < 6; i++) {
        uint64_t u;
        memcpy(&u, &want_f64[i], 8);
        for (int k = 0; k < 8; k++)
            f64[8 * i + k] = (unsigned char)(u >> (56 - 8 * k));
    }
    const struct {
        int type;
        const void *data;
        size_t bytes;
        tn_dtype same;
        const double *want;
    } cases[] = {{0x08, u8, 6, TN_I16, want_u8},    {0x09, u8, 6, TN_I16, want_s8},
                 {0x0B, s16, 12, TN_I16, want_s16}, {0x0C, s32, 24, TN_I32, want_s32},
                 {0x0D, f32, 24, TN_F32, want_f32}, {0x0E, f64, 48, TN_F64, want_f64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n;
        unsigned char *b = idx_bytes(cases[c].type, 2, dims, cases[c].data, cases[c].bytes, &n);
        tn_tensor *t[4], *d[4];
        load_four_ways(b, n, TN_DTYPE_SAME, 1.0, t);
        load_four_ways(b, n, TN_F64, 1.0, d);
        for (int k = 0; k < 4; k++) {
            assert_shape(t[k], cases[c].same, 2, shape);
            assert_shape(d[k], TN_F64, 2, shape);
            double got[6];
            assert_int_equal(tn_copy_to(d[k], got, sizeof got), TN_OK);
            for (int i = 0; i < 6; i++)
                if (!(got[i] == cases[c].want[i]))
                    fail_msg("type 0x%02x way %d element %d: %.17g, want %.17g", cases[c].type, k,
                             i, got[i], cases[c].want[i]);
            if (cases[c].same != TN_F32) tt_assert_close(t[k], cases[c].want, 6, 0);
            tn_release(t[k]);
            tn_release(d[k]);
        }
        free(b);
    }
}

/* MNIST's images: bytes to float32 as v * (1/255) in double, rounded once;
 * labels to int64; halves through float32. */
static void images_and_labels(void **state) {
    (void)state;
    unsigned char px[2 * 28 * 28];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(i * 37 % 256);
    size_t n;
    unsigned char *b = idx_bytes(0x08, 3, (const uint32_t[]){2, 28, 28}, px, sizeof px, &n);
    tn_tensor *x = tn_idx_load_buffer(b, n, TN_F32, 1.0 / 255);
    assert_shape(x, TN_F32, 3, (const int64_t[]){2, 28, 28});
    float got[2 * 28 * 28];
    assert_int_equal(tn_copy_to(x, got, sizeof got), TN_OK);
    for (size_t i = 0; i < sizeof px; i++)
        assert_true(got[i] == (float)(px[i] * (1.0 / 255)));
    tn_tensor *h = tn_idx_load_buffer(b, n, TN_BF16, 1.0 / 255);
    assert_shape(h, TN_BF16, 3, (const int64_t[]){2, 28, 28});
    tn_release(x);
    tn_release(h);
    free(b);
    const unsigned char lab[5] = {9, 0, 3, 3, 7};
    b = idx_bytes(0x08, 1, (const uint32_t[]){5}, lab, 5, &n);
    tn_tensor *y = tn_idx_load_buffer(b, n, TN_I64, 1.0);
    assert_shape(y, TN_I64, 1, (const int64_t[]){5});
    tt_assert_close(y, (const double[]){9, 0, 3, 3, 7}, 5, 0);
    tn_release(y);
    free(b);
}

/* Integer dtypes take only what they hold; scale only for floats. */
static void dtype_and_scale_rules(void **state) {
    (void)state;
    size_t n;
    const unsigned char z[24] = {0};
    unsigned char *f = idx_bytes(0x0D, 1, (const uint32_t[]){6}, z, 24, &n);
    tt_assert_refused(tn_idx_load_buffer(f, n, TN_I64, 1.0), TN_ERR_DTYPE,
                      "IDX file '<buffer>' holds floats; int64 cannot hold every such value");
    free(f);
    unsigned char *i32 = idx_bytes(0x0C, 1, (const uint32_t[]){6}, z, 24, &n);
    tt_assert_refused(tn_idx_load_buffer(i32, n, TN_I16, 1.0), TN_ERR_DTYPE,
                      "IDX file '<buffer>' holds ints; int16 cannot hold every such value");
    tn_tensor *ok = tn_idx_load_buffer(i32, n, TN_I32, 1.0);
    assert_shape(ok, TN_I32, 1, (const int64_t[]){6});
    tn_release(ok);
    tt_assert_refused(tn_idx_load_buffer(i32, n, TN_I64, 2.0), TN_ERR_INVALID_ARGUMENT,
                      "tn_idx_load_buffer: scale 2 needs a floating point dtype (integers load "
                      "as they are)");
    tt_assert_refused(tn_idx_load_buffer(i32, n, TN_BOOL, 1.0), TN_ERR_DTYPE,
                      "tn_idx_load_buffer: dtype must be a number type or TN_DTYPE_SAME");
    tt_assert_refused(tn_idx_load_buffer(i32, n, TN_F32, NAN), TN_ERR_INVALID_ARGUMENT,
                      "tn_idx_load_buffer: scale must be finite, got nan");
    tt_assert_refused(tn_idx_load_buffer(NULL, 4, TN_F32, 1.0), TN_ERR_INVALID_ARGUMENT,
                      "tn_idx_load_buffer: argument 'data' is NULL");
    free(i32);
}

/* Headers that break the format: each a clean error, before any memory is
 * taken for the data. */
static void hostile_headers(void **state) {
    (void)state;
    const uint32_t big[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    const uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const unsigned char data[4] = {1, 2, 3, 4};
    const struct {
        int type, ndim;
        const uint32_t *dims;
        size_t nbytes;
        tn_status st;
        const char *msg;
    } cases[] = {
        {0x07, 1, (const uint32_t[]){4}, 4, TN_ERR_FORMAT, "unknown data type 0x07"},
        {0x08, 0, NULL, 4, TN_ERR_FORMAT, "0 dimensions"},
        {0x08, 9, nine, 1, TN_ERR_SHAPE, "has 9 dimensions; tenet has at most 8"},
        {0x08, 4, big, 4, TN_ERR_FORMAT, "the dimensions' product overflows"},
        {0x0E, 2, (const uint32_t[]){0x40000000u, 0x40000000u}, 4, TN_ERR_FORMAT, "overflows"},
        {0x08, 2, (const uint32_t[]){100000, 100000}, 4, TN_ERR_FORMAT, "truncated: 16 bytes"},
        {0x08, 1, (const uint32_t[]){3}, 4, TN_ERR_FORMAT, "trailing bytes: 12 bytes"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n, gn;
        unsigned char *b =
            idx_bytes(cases[c].type, cases[c].ndim, cases[c].dims, data, cases[c].nbytes, &n);
        assert_null(tn_idx_load_buffer(b, n, TN_F32, 1.0));
        tt_assert_error(cases[c].st, cases[c].msg);
        unsigned char *g = gzipped(b, n, &gn);
        assert_null(tn_idx_load_buffer(g, gn, TN_F32, 1.0));
        assert_int_equal(tn_last_status(), cases[c].st);
        free(g);
        free(b);
    }
    const unsigned char magic[8] = {0x12, 0x34, 8, 1, 0, 0, 0, 0};
    tt_assert_refused(tn_idx_load_buffer(magic, 8, TN_F32, 1.0), TN_ERR_FORMAT,
                      "not a valid IDX file '<buffer>': bad magic number: its first two bytes "
                      "are 0x12 0x34, not 0 0");
    tt_assert_refused(tn_idx_load_buffer(magic, 0, TN_F32, 1.0), TN_ERR_FORMAT,
                      "not a valid IDX file '<buffer>': the file ends within the magic number");
    /* gzip: 100,000 x 100,000 bytes cannot come out of a few dozen */
    size_t n, gn;
    unsigned char *b = idx_bytes(0x08, 2, (const uint32_t[]){100000, 100000}, data, 4, &n);
    unsigned char *g = gzipped(b, n, &gn);
    assert_null(tn_idx_load_buffer(g, gn, TN_F32, 1.0));
    tt_assert_error(TN_ERR_FORMAT, "truncated or bad dimensions: 10000000000 data bytes cannot "
                                   "inflate from");
    free(g);
    free(b);
}

/* Every prefix of a valid file fails cleanly; every byte changed either
 * fails cleanly or (a byte the format does not check: a value, gzip's
 * mtime) loads the right shape. */
static void truncated_and_corrupted(void **state) {
    (void)state;
    unsigned char px[300];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(i * 7);
    size_t n, gn;
    unsigned char *b = idx_bytes(0x08, 3, (const uint32_t[]){3, 10, 10}, px, sizeof px, &n);
    unsigned char *g = gzipped(b, n, &gn);
    for (int packed = 0; packed < 2; packed++) {
        unsigned char *f = packed ? g : b;
        size_t fn = packed ? gn : n;
        for (size_t k = 0; k < fn; k++) {
            unsigned char *cut = malloc(k + 1); /* exactly k bytes for ASan */
            memcpy(cut, f, k);
            assert_null(tn_idx_load_buffer(k ? cut : NULL, k, TN_F32, 1.0));
            assert_int_equal(tn_last_status(), TN_ERR_FORMAT);
            free(cut);
        }
        for (size_t k = 0; k < fn; k++) {
            unsigned char *bad = malloc(fn);
            memcpy(bad, f, fn);
            bad[k] ^= (unsigned char)(0x55 + k);
            tn_tensor *t = tn_idx_load_buffer(bad, fn, TN_F32, 1.0);
            if (t)
                assert_shape(t, TN_F32, 3, (const int64_t[]){3, 10, 10});
            else
                assert_true(tn_last_status() == TN_ERR_FORMAT || tn_last_status() == TN_ERR_SHAPE);
            tn_release(t);
            free(bad);
        }
    }
    /* the same through a file: a truncated gzip file */
    write_file(tt_tmp_path("cut.gz"), g, gn - 10);
    assert_null(tn_idx_load(tt_tmp_path("cut.gz"), TN_F32, 1.0));
    tt_assert_error(TN_ERR_FORMAT, "cut.gz': truncated or damaged gzip data");
    /* damaged deflate data: a CRC or block error */
    g[gn / 2] ^= 0xff;
    write_file(tt_tmp_path("bad.gz"), g, gn);
    assert_null(tn_idx_load(tt_tmp_path("bad.gz"), TN_F32, 1.0));
    tt_assert_error(TN_ERR_FORMAT, "bad.gz': truncated or damaged gzip data (");
    assert_null(tn_idx_load_buffer(g, gn, TN_F32, 1.0));
    assert_int_equal(tn_last_status(), TN_ERR_FORMAT);
    write_file(tt_tmp_path("cut.idx"), b, n - 1);
    assert_null(tn_idx_load(tt_tmp_path("cut.idx"), TN_F32, 1.0));
    tt_assert_error(TN_ERR_FORMAT, "cut.idx': truncated: 315 bytes, the header says 316");
    free(g);
    free(b);
}

static void file_errors(void **state) {
    (void)state;
    assert_null(tn_idx_load(tt_tmp_path("no-such.idx"), TN_F32, 1.0));
    tt_assert_error(TN_ERR_IO, "cannot open '");
    tt_assert_error(TN_ERR_IO, "no-such.idx': No such file or directory");
    assert_null(tn_idx_load(tt_tmp_dir(), TN_F32, 1.0));
    tt_assert_error(TN_ERR_IO, "not a regular file");
    assert_null(tn_idx_load(NULL, TN_F32, 1.0));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
}

/* Every allocation of a load made to fail in turn: OOM or the tensor. */
static void oom_walk(void **state) {
    (void)state;
    unsigned char px[200];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)i;
    size_t n, gn;
    unsigned char *b = idx_bytes(0x08, 2, (const uint32_t[]){10, 20}, px, sizeof px, &n);
    unsigned char *g = gzipped(b, n, &gn);
    write_file(tt_tmp_path("walk.gz"), g, gn);
    for (int64_t k = 1;; k++) {
        tn_clear_error();
        tn_test_fail_alloc_at(k);
        tn_tensor *t[3] = {tn_idx_load_buffer(b, n, TN_BF16, 0.5),
                           tn_idx_load_buffer(g, gn, TN_F32, 1.0),
                           tn_idx_load(tt_tmp_path("walk.gz"), TN_I64, 1.0)};
        bool fired = tn_test_alloc_failed();
        tn_test_fail_alloc_at(0);
        int failed = !t[0] + !t[1] + !t[2];
        if (failed) assert_int_equal(tn_last_status(), TN_ERR_OUT_OF_MEMORY);
        assert_int_equal(failed, fired ? failed : 0);
        for (int i = 0; i < 3; i++)
            tn_release(t[i]);
        if (!fired) break;
    }
    free(g);
    free(b);
}

/* Debian's dataset-fashion-mnist, where installed: 10,000 test images of
 * 28 x 28, 1,000 of each class. */
static void fashion_mnist(void **state) {
    (void)state;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    char p[256];
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
    if (access(p, R_OK) != 0) skip();
    tn_tensor *y = tn_idx_load(p, TN_I64, 1.0);
    assert_shape(y, TN_I64, 1, (const int64_t[]){10000});
    int64_t *lab = malloc(10000 * sizeof *lab);
    assert_int_equal(tn_copy_to(y, lab, 10000 * sizeof *lab), TN_OK);
    int count[10] = {0};
    for (int i = 0; i < 10000; i++) {
        assert_true(lab[i] >= 0 && lab[i] < 10);
        count[lab[i]]++;
    }
    for (int c = 0; c < 10; c++)
        assert_int_equal(count[c], 1000);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    tn_tensor *x = tn_idx_load(p, TN_F32, 1.0 / 255);
    assert_shape(x, TN_F32, 3, (const int64_t[]){10000, 28, 28});
    float *px = malloc(10000 * 28 * 28 * sizeof *px);
    assert_int_equal(tn_copy_to(x, px, 10000 * 28 * 28 * sizeof *px), TN_OK);
    float lo = 1, hi = 0;
    for (int i = 0; i < 10000 * 28 * 28; i++) {
        lo = px[i] < lo ? px[i] : lo;
        hi = px[i] > hi ? px[i] : hi;
    }
    assert_true(lo == 0.0f && hi == 1.0f);
    free(px);
    free(lab);
    tn_release(x);
    tn_release(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(every_type),      TT_TEST(images_and_labels),       TT_TEST(dtype_and_scale_rules),
        TT_TEST(hostile_headers), TT_TEST(truncated_and_corrupted), TT_TEST(file_errors),
        TT_TEST(oom_walk),        TT_TEST(fashion_mnist),
    };
    return cmocka_run_group_tests(tests, tt_tmpdir_setup, tt_tmpdir_teardown);
}
