/* DistributedDataParallel (tenet/dist.h) under mpirun -np 2 and -np 4:
 * training on each rank's share of a global batch equals training on the
 * whole batch in one process, the ranks' parameters stay bit-identical,
 * buckets are launched while backward still runs (counted), gradient
 * accumulation (no_sync), unused parameters, parallel backward, and the
 * errors every rank sees together. */
#include <math.h>
#include <string.h>

#include "util.h"
#include <tenet/dist.h>

#include "dist_util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define NP 5
#define G 24 /* the global batch: a multiple of 2 and 4 */

static int rank, world;

typedef struct model {
    /* unused [2], w1 [4,8], b1 [8], w2 [8,3], b2 [3]. The unused parameter comes first: DDP
     * buckets the parameters in reverse order and launches buckets in order, so one that
     * gets no gradient holds back its bucket and the later ones to the end of the pass. */
    tn_tensor *p[NP];
} model;

/* Deterministic values; `skew` makes them differ between ranks (DDP's
 * broadcast from rank 0 must make them equal). Owned by the caller's scope. */
static void model_init(model *m, double skew) {
    static const int64_t shapes[NP][2] = {{2, 0}, {4, 8}, {8, 0}, {8, 3}, {3, 0}};
    for (int k = 0; k < NP; k++) {
        int nd = shapes[k][1] ? 2 : 1;
        tn_tensor *t = tn_zeros(nd, shapes[k], TN_F64);
        assert_non_null(t);
        double *d = tn_data_ptr(t);
        for (int64_t i = 0; i < tn_numel(t); i++)
            d[i] = sin(1.0 + 0.7 * (double)i + 1.3 * k) * 0.5 + skew;
        assert_int_equal(tn_requires_grad_(t, true), TN_OK);
        m->p[k] = t;
    }
}

/* rows [start, start + n) of the global batch: x [n,4], y [n,3] */
static tn_tensor *batch(int64_t start, int64_t n, int step, bool target) {
    int64_t cols = target ? 3 : 4;
    tn_tensor *t = tn_zeros(2, S(n, cols), TN_F64);
    double *d = tn_data_ptr(t);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < cols; c++)
            d[r * cols + c] = cos(0.37 * (double)(start + r) + 0.11 * c + 0.05 * step + (target ? 2 : 0));
    return t;
}

/* mean squared error of the MLP on rows [start, start + n) */
static tn_tensor *loss_of(model *m, int64_t start, int64_t n, int step) {
    tn_tensor *x = batch(start, n, step, false), *y = batch(start, n, step, true);
    tn_tensor *h = tn_tanh(tn_add(tn_matmul(x, m->p[1]), m->p[2]));
    return tn_mse_loss(tn_add(tn_matmul(h, m->p[3]), m->p[4]), y);
}

/* Every rank's copy of t equals rank 0's, byte for byte. */
static void assert_same_on_every_rank(const tn_tensor *t) {
    tn_tensor *mine = tn_clone(t), *r0 = tn_clone(t);
    assert_int_equal(tn_dist_broadcast_(r0, 0), TN_OK);
    assert_memory_equal(tn_data_ptr(mine), tn_data_ptr(r0), (size_t)tn_numel(t) * 8);
}

static void assert_close(const tn_tensor *a, const tn_tensor *b, double tol) {
    int64_t n = tn_numel(a);
    const double *x = tn_data_ptr(a), *y = tn_data_ptr(b);
    for (int64_t i = 0; i < n; i++)
        if (fabs(x[i] - y[i]) > tol * (1 + fabs(y[i])))
            fail_msg("element %lld: %.17g vs %.17g", (long long)i, x[i], y[i]);
}

/* SGD steps with DDP on the rank's share of each global batch equal SGD on
 * the whole batch in one process (the same model, kept on every rank). */
static void run_training(int steps, size_t bucket_bytes, bool parallel, tn_ddp_stats *stats) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    model dm, ref;
    model_init(&dm, 0.01 * rank);
    model_init(&ref, 0);
    tn_ddp *d = tn_ddp_new(dm.p, NP, bucket_bytes);
    assert_non_null(d);
    for (int k = 0; k < NP; k++) /* the broadcast made them rank 0's */
        assert_memory_equal(tn_data_ptr(dm.p[k]), tn_data_ptr(ref.p[k]),
                            (size_t)tn_numel(ref.p[k]) * 8);
    tn_sgd *od = tn_sgd_new(NP, dm.p, 0.1, 0.9, 0), *orf = tn_sgd_new(NP, ref.p, 0.1, 0.9, 0);
    bool prev = tn_is_parallel_backward();
    tn_set_parallel_backward(parallel);
    int64_t local = G / world;
    for (int s = 0; s < steps; s++) {
        assert_int_equal(tn_backward(loss_of(&dm, rank * local, local, s), NULL, false), TN_OK);
        assert_int_equal(tn_backward(loss_of(&ref, 0, G, s), NULL, false), TN_OK);
        for (int k = 1; k < NP; k++) {
            tn_tensor *gd = tn_grad(dm.p[k]), *gr = tn_grad(ref.p[k]);
            assert_close(gd, gr, 1e-12);
            assert_same_on_every_rank(gd);
        }
        /* the unused parameter: zeros, on every rank */
        tn_tensor *gu = tn_grad(dm.p[0]);
        assert_non_null(gu);
        assert_true(((double *)tn_data_ptr(gu))[0] == 0 && ((double *)tn_data_ptr(gu))[1] == 0);
        assert_int_equal(tn_sgd_step(od), TN_OK);
        assert_int_equal(tn_sgd_step(orf), TN_OK);
        assert_int_equal(tn_sgd_zero_grad(od), TN_OK);
        assert_int_equal(tn_sgd_zero_grad(orf), TN_OK);
    }
    tn_set_parallel_backward(prev);
    for (int k = 0; k < NP; k++) {
        assert_same_on_every_rank(dm.p[k]);
        assert_close(dm.p[k], ref.p[k], 1e-12);
    }
    assert_int_equal(tn_ddp_get_stats(d, stats), TN_OK);
    assert_int_equal(stats->passes, steps);
    tn_sgd_free(od);
    tn_sgd_free(orf);
    tn_ddp_free(d);
    tn_scope_end();
}

static void test_equals_one_process(void **state) {
    (void)state;
    tn_ddp_stats st;
    run_training(5, 0, false, &st); /* one 25 MiB bucket: launched by the last hook */
    assert_int_equal(st.buckets_in_backward + st.buckets_at_end, 5);
}

/* One bucket per parameter (tiny buckets): the buckets of the used
 * parameters are launched from hooks, while backward runs; the unused
 * parameter's at the end. */
static void test_overlap_counted(void **state) {
    (void)state;
    tn_ddp_stats st;
    run_training(4, 8, false, &st);
    assert_int_equal(st.buckets_in_backward, 4 * 4);
    assert_int_equal(st.buckets_at_end, 4 * 1);
    assert_true(st.bytes == 4 * (32 + 8 + 24 + 3 + 2) * 8);
}

static void test_parallel_backward(void **state) {
    (void)state;
    tn_ddp_stats st;
    run_training(3, 8, true, &st);
    assert_int_equal(st.buckets_in_backward + st.buckets_at_end, 3 * NP);
}

/* no_sync: two local micro-batches, reduced once: the mean over ranks of
 * each rank's accumulated gradient. */
static void test_no_sync_accumulation(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    model dm, ref;
    model_init(&dm, 0);
    model_init(&ref, 0);
    tn_ddp *d = tn_ddp_new(dm.p, NP, 64);
    assert_non_null(d);
    int64_t local = G / world, half = local / 2;
    assert_int_equal(tn_ddp_set_sync(d, false), TN_OK);
    assert_int_equal(tn_backward(loss_of(&dm, rank * local, half, 0), NULL, false), TN_OK);
    assert_int_equal(tn_ddp_set_sync(d, true), TN_OK);
    assert_int_equal(tn_backward(loss_of(&dm, rank * local + half, local - half, 0), NULL, false),
                     TN_OK);
    /* reference: the sum over ranks of both micro-batch losses, / world */
    for (int r = 0; r < world; r++) {
        tn_tensor *l1 = tn_div_scalar(loss_of(&ref, r * local, half, 0), world);
        tn_tensor *l2 = tn_div_scalar(loss_of(&ref, r * local + half, local - half, 0), world);
        assert_int_equal(tn_backward(tn_add(l1, l2), NULL, false), TN_OK);
    }
    for (int k = 1; k < NP; k++)
        assert_close(tn_grad(dm.p[k]), tn_grad(ref.p[k]), 1e-12);
    tn_ddp_stats st;
    assert_int_equal(tn_ddp_get_stats(d, &st), TN_OK);
    assert_int_equal(st.passes, 1);
    for (int k = 0; k < NP; k++) assert_int_equal(tn_zero_grad(dm.p[k]), TN_OK);
    tn_ddp_free(d);
    tn_scope_end();
}

/* A hook that fails on rank 1 only: every rank's backward fails, none
 * hangs, and the next step works again. */
static tn_status fail_on_rank1(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g, (void)replace, (void)ctx;
    return rank == 1 ? tn_set_error(TN_ERR_INVALID_ARGUMENT, "planted failure") : TN_OK;
}

static void test_failure_on_one_rank(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    model dm;
    model_init(&dm, 0);
    tn_ddp *d = tn_ddp_new(dm.p, NP, 64);
    assert_non_null(d);
    tn_hook *h = tn_register_hook(dm.p[4], fail_on_rank1, NULL);
    int64_t local = G / world;
    tn_status st = tn_backward(loss_of(&dm, rank * local, local, 0), NULL, false);
    if (rank == 1) tt_assert_error(st, "planted failure");
    else tt_assert_error(st, "backward failed on another rank");
    /* the failed pass updated no .grad; elsewhere .grad is the local, unsynchronised one */
    if (rank == 1) assert_null(tn_grad(dm.p[1]));
    else assert_non_null(tn_grad(dm.p[1]));
    tn_hook_remove(h);
    for (int k = 0; k < NP; k++)
        assert_int_equal(tn_zero_grad(dm.p[k]), TN_OK);
    assert_int_equal(tn_backward(loss_of(&dm, rank * local, local, 1), NULL, false), TN_OK);
    assert_same_on_every_rank(tn_grad(dm.p[1]));
    tn_ddp_free(d);
    tn_scope_end();
}

/* Parameters that differ between ranks, and bad parameters: every rank fails. */
static void test_new_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    model m;
    model_init(&m, 0);
    assert_null(tn_ddp_new(m.p, rank == 0 ? NP : NP - 1, 0));
    assert_int_equal(tn_last_status(), TN_ERR_DIST);
    assert_non_null(strstr(tn_last_error(), "ranks disagree on the number of elements"));
    tn_tensor *other[NP];
    memcpy(other, m.p, sizeof other);
    tn_tensor *t = tn_transpose(m.p[1], 0, 1);
    tn_tensor *tc = tn_detach(tn_contiguous(t));
    assert_int_equal(tn_requires_grad_(tc, true), TN_OK);
    if (rank == 1) other[1] = tc; /* [8,4] instead of [4,8] */
    assert_null(tn_ddp_new(other, NP, 0));
    assert_non_null(strstr(tn_last_error(), "ranks disagree on the shapes and dtypes"));
    tn_tensor *nograd = tn_zeros(1, S(3), TN_F64);
    other[1] = rank == 0 ? nograd : m.p[1];
    assert_null(tn_ddp_new(other, NP, 0));
    if (rank == 0) tt_assert_error(TN_ERR_INVALID_ARGUMENT, "must be a leaf that requires grad");
    else tt_assert_error(TN_ERR_DIST, "failed on another rank");
    assert_null(tn_ddp_new(NULL, 0, 0));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "need at least one parameter");
    tt_assert_error(tn_ddp_set_sync(NULL, true), "argument 'd' is NULL");
    tn_scope_end();
}

int main(int argc, char **argv) {
    if (!tt_dist_begin(&argc, &argv, &rank, &world)) return 1;
    const struct CMUnitTest tests[] = {
        TT_TEST(test_equals_one_process),
        TT_TEST(test_overlap_counted),
        TT_TEST(test_parallel_backward),
        TT_TEST(test_no_sync_accumulation),
        TT_TEST(test_failure_on_one_rank),
        TT_TEST(test_new_errors),
    };
    return tt_dist_end(cmocka_run_group_tests(tests, NULL, NULL));
}
