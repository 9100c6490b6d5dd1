/* tests/util.h — helpers shared by the cmocka tests. Include after cmocka. */
#ifndef TN_TEST_UTIL_H
#define TN_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
/* cmocka.h needs the headers above first */
#include <cmocka.h>

#include <tenet.h>

/* Tensor from a float64 literal list: T64(ndim, shape..., values...) via arrays. */
tn_tensor *tt_f64(int ndim, const int64_t *shape, const double *v, bool requires_grad);
tn_tensor *tt_f32(int ndim, const int64_t *shape, const float *v, bool requires_grad);
/* Asserts every element of t (any dtype) is within tol of want[i]; prints
 * the first mismatch. */
void tt_assert_close(const tn_tensor *t, const double *want, int64_t n, double tol);
/* Asserts a and b (any dtypes, same number of elements) hold the same values
 * within tol * (1 + |b|); prints the first mismatch. */
void tt_assert_close_tensors(const tn_tensor *a, const tn_tensor *b, double tol);
/* Asserts t's .grad equals want (n elements) within tol. */
void tt_assert_grad(tn_tensor *t, const double *want, int64_t n, double tol);
/* Asserts t's grad_fn is named `name` (NULL: t has none). */
void tt_assert_grad_fn(const tn_tensor *t, const char *name);
/* Asserts the last error's message contains `needle` and its status is st. */
void tt_assert_error(tn_status st, const char *needle);
/* Checks a grad_stats result for h[0, n) against plain loops: got[0] the sum of squares (within
 * rounding), got[1] the largest |value| (exact). */
void tt_assert_sq_max(const float *h, int64_t n, const double got[2]);
/* Number of live tensor handles / storages (leak checks around a test). */
int64_t tt_live_tensors(void);
/* A tensor of dtype dt (CPU) with values sin(0.37 i + k), requires_grad rg. */
tn_tensor *tt_filled(int ndim, const int64_t *shape, tn_dtype dt, int k, bool rg);
/* The call failed (r NULL) with status st and exactly the message want. */
void tt_assert_refused(tn_tensor *r, tn_status st, const char *want);
/* An anomaly report as tn_anomaly_report_print writes it (the caller frees it). */
char *tt_report_text(const tn_anomaly_report *r);
int64_t tt_live_storages(void);
/* cmocka setup/teardown that check nothing leaked in between. */
/* stderr (tenet's warnings) into a temporary file, for tests that check what was printed.
 * text: what stderr received since begin (NUL-terminated, the first 8191 bytes); end restores
 * stderr and returns the text. */
typedef struct tt_capture {
    int saved;
    FILE *tmp;
    char text[8192];
} tt_capture;
void tt_capture_begin(tt_capture *c);
const char *tt_capture_text(tt_capture *c);
const char *tt_capture_end(tt_capture *c);

/* A fresh temporary folder for a test group's files: tt_tmp_path(name) is
 * a file in it (a static buffer, valid until the next call); the group's
 * teardown removes the folder and what the tests left in it. */
int tt_tmpdir_setup(void **state);
int tt_tmpdir_teardown(void **state);
const char *tt_tmp_path(const char *name);
const char *tt_tmp_dir(void);

int tt_setup(void **state);
int tt_teardown(void **state);

#define TT_TEST(f) cmocka_unit_test_setup_teardown(f, tt_setup, tt_teardown)

#endif
