/* tests/util.c — helpers shared by the cmocka tests. */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno, open_memstream */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

tn_tensor *tt_f64(int ndim, const int64_t *shape, const double *v, bool requires_grad) {
    tn_tensor *t = tn_tensor_from(v, TN_F64, ndim, shape, requires_grad);
    assert_non_null(t);
    return t;
}

tn_tensor *tt_f32(int ndim, const int64_t *shape, const float *v, bool requires_grad) {
    tn_tensor *t = tn_tensor_from(v, TN_F32, ndim, shape, requires_grad);
    assert_non_null(t);
    return t;
}

void tt_assert_close(const tn_tensor *t, const double *want, int64_t n, double tol) {
    assert_non_null(t);
    assert_int_equal(tn_numel(t), n);
    double got[4096];
    assert_true(n <= 4096);
    assert_int_equal(tn_copy_to_f64(t, got, n), TN_OK);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        bool ok = d <= tol * (1 + fabs(want[i])) || (isnan(got[i]) && isnan(want[i])) ||
                  (isinf(got[i]) && got[i] == want[i]);
        if (!ok) fail_msg("element %lld: got %.9g, want %.9g", (long long)i, got[i], want[i]);
    }
}

void tt_assert_grad(tn_tensor *t, const double *want, int64_t n, double tol) {
    /* owns g whether or not the caller has a scope open */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *g = tn_grad(t);
    if (!g) {
        tn_scope_end();
        fail_msg("tensor has no .grad");
    }
    tt_assert_close(g, want, n, tol);
    tn_scope_end();
}

void tt_assert_error(tn_status st, const char *needle) {
    assert_int_equal(tn_last_status(), st);
    if (!strstr(tn_last_error(), needle))
        fail_msg("error message \"%s\" does not contain \"%s\"", tn_last_error(), needle);
}

int64_t tt_live_tensors(void) {
    tn_memory_stats_t s;
    tn_memory_stats(&s);
    return s.tensors_live;
}

int64_t tt_live_storages(void) {
    tn_memory_stats_t s;
    tn_memory_stats(&s);
    return s.storages_live;
}

static int64_t base_tensors, base_storages;

int tt_setup(void **state) {
    (void)state;
    tn_clear_error();
    tn_set_grad_enabled(true);
    base_tensors = tt_live_tensors();
    base_storages = tt_live_storages();
    return 0;
}

int tt_teardown(void **state) {
    (void)state;
    int64_t t = tt_live_tensors(), s = tt_live_storages();
    if (t != base_tensors || s != base_storages) {
        fprintf(stderr, "leak: %lld tensors and %lld storages more than before the test\n",
                (long long)(t - base_tensors), (long long)(s - base_storages));
        return -1;
    }
    return 0;
}

void tt_assert_grad_fn(const tn_tensor *t, const char *name) {
    assert_non_null(t);
    const char *got = tn_grad_fn_name(t);
    if (!name) {
        assert_null(got);
        return;
    }
    assert_non_null(got);
    assert_string_equal(got, name);
}

void tt_assert_sq_max(const float *h, int64_t n, const double got[2]) {
    double sq = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        sq += (double)h[i] * h[i];
        mx = fabs(h[i]) > mx ? fabs(h[i]) : mx;
    }
    if (!(fabs(got[0] - sq) <= 1e-12 * sq) || got[1] != mx)
        fail_msg("grad_stats of %lld elements: %.17g %.17g, want %.17g %.17g", (long long)n, got[0],
                 got[1], sq, mx);
}

void tt_capture_begin(tt_capture *c) {
    fflush(stderr);
    c->tmp = tmpfile();
    assert_non_null(c->tmp);
    c->saved = dup(2);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->tmp), 2) >= 0);
}

const char *tt_capture_text(tt_capture *c) {
    fflush(stderr);
    rewind(c->tmp);
    size_t k = fread(c->text, 1, sizeof c->text - 1, c->tmp);
    c->text[k] = 0;
    fseek(c->tmp, 0, SEEK_END);
    return c->text;
}

const char *tt_capture_end(tt_capture *c) {
    tt_capture_text(c);
    dup2(c->saved, 2);
    close(c->saved);
    fclose(c->tmp);
    return c->text;
}

char *tt_report_text(const tn_anomaly_report *r) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    assert_int_equal(tn_anomaly_report_print(r, f), TN_OK);
    fclose(f);
    return buf;
}

tn_tensor *tt_filled(int ndim, const int64_t *shape, tn_dtype dt, int k, bool rg) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = sin(0.37 * (double)i + k);
    tn_tensor *t = tt_f64(ndim, shape, v, false);
    free(v);
    tn_tensor *r = tn_to(t, dt, TN_DEVICE_CPU);
    assert_non_null(r);
    if (rg) assert_int_equal(tn_requires_grad_(r, true), TN_OK);
    return r;
}

void tt_assert_refused(tn_tensor *r, tn_status st, const char *want) {
    assert_null(r);
    assert_int_equal(tn_last_status(), st);
    if (strcmp(tn_last_error(), want)) {
        print_error("got:  %s\nwant: %s\n", tn_last_error(), want);
        fail();
    }
}

void tt_assert_close_tensors(const tn_tensor *a, const tn_tensor *b, double tol) {
    assert_non_null(a);
    assert_non_null(b);
    int64_t n = tn_numel(b);
    assert_int_equal(tn_numel(a), n);
    double *x = malloc(sizeof(double) * (size_t)(n + 1)),
           *y = malloc(sizeof(double) * (size_t)(n + 1));
    assert_int_equal(tn_copy_to_f64(a, x, n), TN_OK);
    assert_int_equal(tn_copy_to_f64(b, y, n), TN_OK);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i])))) {
            print_error("element %lld: %.9g vs %.9g\n", (long long)i, x[i], y[i]);
            free(x), free(y);
            fail();
        }
    free(x), free(y);
}

static char tmp_dir[64];

const char *tt_tmp_path(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp_dir, name);
    return p;
}

const char *tt_tmp_dir(void) { return tmp_dir; }

int tt_tmpdir_setup(void **state) {
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/tenet-test-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

int tt_tmpdir_teardown(void **state) {
    (void)state;
    DIR *d = opendir(tmp_dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') unlink(tt_tmp_path(e->d_name));
    closedir(d);
    rmdir(tmp_dir);
    return 0;
}
