/* tests/test_dlpack.c — zero-copy exchange: tn_to_dlpack / tn_from_dlpack round trips (every
 * dtype, views with offsets and strides, memory shared both ways, each deleter called exactly
 * once), imports of a producer's own DLManagedTensor, every refused import leaving the producer's
 * tensor to it, and tn_from_blob. */
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- a producer: a DLManagedTensor over a static buffer, counting its deleter's calls ---- */

static int deleted;
static void count_delete(DLManagedTensor *m) {
    (void)m;
    deleted++;
}

typedef struct producer {
    DLManagedTensor m;
    int64_t shape[9], strides[9];
} producer;

static DLManagedTensor *produce(producer *p, void *data, DLDataType dt, int ndim,
                                const int64_t *shape, const int64_t *strides) {
    memset(p, 0, sizeof *p);
    for (int d = 0; d < ndim; d++) {
        p->shape[d] = shape[d];
        if (strides) p->strides[d] = strides[d];
    }
    p->m.dl_tensor = (DLTensor){.data = data,
                                .device = {kDLCPU, 0},
                                .ndim = ndim,
                                .dtype = dt,
                                .shape = p->shape,
                                .strides = strides ? p->strides : NULL,
                                .byte_offset = 0};
    p->m.deleter = count_delete;
    return &p->m;
}

static void test_round_trip_every_dtype(void **state) {
    (void)state;
    for (int d = 0; d < TN_DTYPE_COUNT; d++) {
        tn_dtype dt = (tn_dtype)d;
        tn_tensor *base = tn_arange(0, 24, 1, TN_I64);
        tn_tensor *x = tn_to(base, dt, TN_DEVICE_KEEP);
        tn_tensor *v = tn_reshape(x, 3, (int64_t[]){2, 3, 4});
        tn_tensor *tr = tn_transpose(v, 0, 2);                /* strides (1, 4, 12) */
        tn_tensor *sl = tn_narrow(tr, 0, 1, 2);                /* offset 1 */
        DLManagedTensor *m = tn_to_dlpack(sl);
        assert_non_null(m);
        assert_int_equal(m->dl_tensor.ndim, 3);
        assert_int_equal(m->dl_tensor.strides[0], 1);
        assert_int_equal(m->dl_tensor.strides[2], 12);
        assert_int_equal(m->dl_tensor.dtype.lanes, 1);
        assert_int_equal(m->dl_tensor.device.device_type, kDLCPU);
        assert_ptr_equal((char *)m->dl_tensor.data + m->dl_tensor.byte_offset, tn_data_ptr(sl));
        tn_tensor *y = tn_from_dlpack(m);
        assert_non_null(y);
        assert_int_equal(tn_dtype_of(y), dt);
        assert_ptr_equal(tn_data_ptr(y), tn_data_ptr(sl)); /* no copy */
        double a[12], b[12];
        assert_int_equal(tn_numel(y), 12);
        assert_int_equal(tn_copy_to_f64(y, a, 12), TN_OK);
        assert_int_equal(tn_copy_to_f64(sl, b, 12), TN_OK);
        assert_memory_equal(a, b, sizeof a);
        /* the export holds the memory: dropping every tenet handle but y keeps it valid */
        tn_release(base), tn_release(x), tn_release(v), tn_release(tr), tn_release(sl);
        tn_tensor *c = tn_contiguous(y); /* still readable */
        assert_non_null(c);
        tn_release(c);
        tn_release(y); /* runs the export's deleter: the last reference goes */
    }
}

/* Writes through either side are seen by the other. */
static void test_shared_memory(void **state) {
    (void)state;
    float buf[6] = {1, 2, 3, 4, 5, 6};
    producer p;
    deleted = 0;
    DLManagedTensor *m =
        produce(&p, buf, (DLDataType){kDLFloat, 32, 1}, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3});
    tn_tensor *t = tn_from_dlpack(m); /* the transpose of buf viewed (2, 3) */
    assert_non_null(t);
    tt_assert_close(t, (const double[]){1, 4, 2, 5, 3, 6}, 6, 0);
    buf[1] = 20; /* the producer writes */
    tt_assert_close(t, (const double[]){1, 4, 20, 5, 3, 6}, 6, 0);
    assert_int_equal(tn_mul_scalar_(t, 2.0), TN_OK); /* tenet writes */
    assert_true(buf[0] == 2 && buf[5] == 12 && buf[1] == 40);
    assert_int_equal(deleted, 0);
    tn_tensor *s = tn_sum(t); /* an op result does not hold the memory */
    tn_release(t);
    assert_int_equal(deleted, 1); /* once, when the last reference went */
    tn_release(s);
    assert_int_equal(deleted, 1);
}

/* Every refusal: NULL, an error, and the producer's tensor untouched (deleter not called). */
static void test_refused_imports(void **state) {
    (void)state;
    double buf[8] = {0};
    uint8_t bytes[4] = {0, 1, 2, 1};
    producer p;
    deleted = 0;
    struct {
        DLDataType dt;
        int ndim;
        int64_t shape[9], strides[9];
        bool strided;
        void *data;
        uint64_t byte_offset;
        int device;
        const char *needle;
    } cases[] = {
        {{kDLFloat, 64, 2}, 1, {4}, {0}, false, buf, 0, kDLCPU, "unsupported DLPack dtype"},
        {{kDLComplex, 64, 1}, 1, {4}, {0}, false, buf, 0, kDLCPU, "unsupported DLPack dtype"},
        {{kDLInt, 8, 1}, 1, {4}, {0}, false, buf, 0, kDLCPU, "unsupported DLPack dtype"},
        {{kDLFloat, 64, 1}, 1, {4}, {0}, false, buf, 0, kDLOpenCL, "device type 4"},
        {{kDLFloat, 64, 1}, 2, {2, 2}, {-1, 1}, true, buf, 0, kDLCPU, "negative"},
        {{kDLFloat, 64, 1}, 2, {3, 3}, {INT64_MAX / 2, 1}, true, buf, 0, kDLCPU, "reach"},
        {{kDLFloat, 64, 1}, 1, {4}, {0}, false, NULL, 0, kDLCPU, "data is NULL"},
        {{kDLFloat, 64, 1}, 1, {4}, {0}, false, buf, 3, kDLCPU, "byte_offset 3"},
        {{kDLFloat, 64, 1}, 9, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {0}, false, buf, 0, kDLCPU, "9 dims"},
        {{kDLUInt, 8, 1}, 1, {4}, {0}, false, bytes, 0, kDLCPU, "other than 0 and 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        DLManagedTensor *m = produce(&p, cases[i].data, cases[i].dt, cases[i].ndim,
                                     cases[i].shape, cases[i].strided ? cases[i].strides : NULL);
        m->dl_tensor.byte_offset = cases[i].byte_offset;
        m->dl_tensor.device.device_type = (DLDeviceType)cases[i].device;
        assert_null(tn_from_dlpack(m));
        if (!strstr(tn_last_error(), cases[i].needle))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, tn_last_error(), cases[i].needle);
        assert_int_equal(deleted, 0);
    }
    tn_clear_error(); /* else a NULL argument keeps the earlier failure's error */
    assert_null(tn_from_dlpack(NULL));
    assert_int_equal(tn_last_status(), TN_ERR_INVALID_ARGUMENT);
    assert_null(tn_to_dlpack(NULL));
    /* uint8 bytes of 0 and 1 import as bool */
    bytes[2] = 0;
    tn_tensor *b = tn_from_dlpack(produce(&p, bytes, (DLDataType){kDLUInt, 8, 1}, 1,
                                          (int64_t[]){4}, NULL));
    assert_non_null(b);
    assert_int_equal(tn_dtype_of(b), TN_BOOL);
    tn_release(b);
    assert_int_equal(deleted, 1);
}

static int blob_deletes;
static void blob_delete(void *ctx) {
    assert_ptr_equal(ctx, &blob_deletes);
    blob_deletes++;
}

static void test_from_blob(void **state) {
    (void)state;
    int32_t data[6] = {1, 2, 3, 4, 5, 6};
    blob_deletes = 0;
    tn_tensor *t = tn_from_blob(data, TN_I32, 2, (int64_t[]){2, 3}, NULL, TN_DEVICE_CPU,
                                blob_delete, &blob_deletes);
    assert_non_null(t);
    assert_ptr_equal(tn_data_ptr(t), data);
    tn_tensor *col = tn_select(t, 1, 2); /* a view keeps the memory too */
    tn_release(t);
    assert_int_equal(blob_deletes, 0);
    tt_assert_close(col, (const double[]){3, 6}, 2, 0);
    tn_release(col);
    assert_int_equal(blob_deletes, 1);
    /* failures leave the memory to the caller: the deleter is not called */
    assert_null(tn_from_blob(NULL, TN_F32, 1, (int64_t[]){3}, NULL, TN_DEVICE_CPU, blob_delete,
                             &blob_deletes));
    tt_assert_error(tn_last_status(), "data is NULL");
    assert_null(tn_from_blob((char *)data + 1, TN_I32, 1, (int64_t[]){2}, NULL, TN_DEVICE_CPU,
                             blob_delete, &blob_deletes));
    tt_assert_error(tn_last_status(), "not aligned");
    assert_null(tn_from_blob(data, TN_I32, 1, (int64_t[]){-2}, NULL, TN_DEVICE_CPU, blob_delete,
                             &blob_deletes));
    assert_null(tn_from_blob(data, (tn_dtype)42, 1, (int64_t[]){2}, NULL, TN_DEVICE_CPU,
                             blob_delete, &blob_deletes));
    assert_null(tn_from_blob(data, TN_I32, 1, (int64_t[]){2}, (int64_t[]){-1}, TN_DEVICE_CPU,
                             blob_delete, &blob_deletes));
    assert_null(tn_from_blob(data, TN_I32, 1, (int64_t[]){2}, NULL, TN_DEVICE_CUDA(7),
                             blob_delete, &blob_deletes));
    assert_int_equal(blob_deletes, 1);
    /* an empty tensor may have NULL data; no deleter at all is fine */
    tn_tensor *e = tn_from_blob(NULL, TN_F64, 1, (int64_t[]){0}, NULL, TN_DEVICE_CPU, NULL, NULL);
    assert_non_null(e);
    tn_release(e);
}

/* Anomaly mode sees a saved tensor over shared memory written from outside tenet (no counter
 * of tenet's moves) and says so; with no such write, nothing is reported. */
static void test_anomaly_written_outside(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_set_anomaly_untracked_error(true);
    float w_buf[3] = {1, 2, 3};
    for (int write = 0; write < 2; write++) {
        tn_anomaly_clear();
        tn_tensor *w = tn_from_blob(w_buf, TN_F32, 1, (int64_t[]){3}, NULL, TN_DEVICE_CPU, NULL,
                                    NULL);
        tn_tensor *x = tn_ones(1, (int64_t[]){3}, TN_F32);
        assert_int_equal(tn_requires_grad_(x, true), TN_OK);
        tn_tensor *loss = tn_sum(tn_mul(x, w)); /* MulBackward0 saves w */
        if (write) w_buf[1] = 20; /* the other framework writes */
        tn_status st = tn_backward(loss, NULL, false);
        if (!write) {
            assert_int_equal(st, TN_OK);
            tt_assert_grad(x, (const double[]){1, 2, 3}, 3, 0);
            continue;
        }
        assert_int_equal(st, TN_ERR_INPLACE_MODIFIED);
        assert_non_null(strstr(tn_last_error(), "written outside tenet"));
        const tn_anomaly_report *r = tn_last_anomaly();
        assert_non_null(r);
        assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_UNTRACKED);
        char *text = tt_report_text(r);
        assert_non_null(strstr(text, "written outside tenet"));
        free(text);
    }
    tn_set_anomaly_untracked_error(false);
    tn_set_detect_anomaly(false, false);
    tn_anomaly_clear();
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dtype),
        cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_refused_imports),
        cmocka_unit_test(test_from_blob),
        cmocka_unit_test(test_anomaly_written_outside),
    };
    return cmocka_run_group_tests(tests, tt_setup, tt_teardown);
}
