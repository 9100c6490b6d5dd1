/* Collectives on tensors (tenet/dist.h), run under mpirun -np 2 and -np 4:
 * every dtype and shape, the in-place rules (one version bump), integer
 * sums that wrap, and the errors every rank must see together (a bad
 * argument on one rank, ranks that disagree) without anyone hanging. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include <tenet/dist.h>

#include "dist_util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int rank, world;

/* t[i] = f(rank, i) in t's dtype */
static tn_tensor *filled(int ndim, const int64_t *shape, tn_dtype dt, int r) {
    tn_tensor *t = tn_zeros(ndim, shape, dt);
    assert_non_null(t);
    int64_t n = tn_numel(t);
    void *p = tn_data_ptr(t);
    for (int64_t i = 0; i < n; i++) {
        double v = (double)((r + 1) * (i % 7 + 1)) * (i % 2 ? -1 : 1);
        switch (dt) {
        case TN_F32: ((float *)p)[i] = (float)v / 4; break;
        case TN_F64: ((double *)p)[i] = v / 4; break;
        case TN_I16: ((int16_t *)p)[i] = (int16_t)v; break;
        case TN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case TN_I64: ((int64_t *)p)[i] = (int64_t)v; break;
        case TN_BOOL: ((bool *)p)[i] = (i + r) % 3 == 0; break;
        default: fail();
        }
    }
    return t;
}

/* What element i of the reduction over every rank must be. */
static double expect(tn_dtype dt, tn_reduce_op op, int64_t i) {
    double acc = 0;
    for (int r = 0; r < world; r++) {
        double v;
        if (dt == TN_BOOL) v = (i + r) % 3 == 0;
        else v = (double)((r + 1) * (i % 7 + 1)) * (i % 2 ? -1 : 1) / (dt <= TN_F64 ? 4 : 1);
        if (r == 0) acc = v;
        else if (op == TN_REDUCE_SUM || op == TN_REDUCE_MEAN) acc = dt == TN_BOOL ? (acc || v) : acc + v;
        else if (op == TN_REDUCE_MAX) acc = acc > v ? acc : v;
        else acc = acc < v ? acc : v;
    }
    return op == TN_REDUCE_MEAN ? acc / world : acc;
}

static void test_world(void **state) {
    (void)state;
    assert_true(tn_dist_is_initialized());
    assert_int_equal(tn_dist_rank(), rank);
    assert_int_equal(tn_dist_world_size(), world);
    assert_true(world >= 2);
    assert_int_equal(tn_dist_init(NULL, NULL), TN_OK); /* again: nothing done */
    assert_true(tn_dist_thread_multiple()); /* Open MPI grants it */
    assert_int_equal(tn_dist_barrier(), TN_OK);
}

static void test_allreduce_every_dtype_and_shape(void **state) {
    (void)state;
    static const tn_dtype dts[] = {TN_F32, TN_F64, TN_I16, TN_I32, TN_I64, TN_BOOL};
    static const tn_reduce_op ops[] = {TN_REDUCE_SUM, TN_REDUCE_MEAN, TN_REDUCE_MAX, TN_REDUCE_MIN};
    struct { int nd; int64_t shape[3]; } shapes[] = {{0, {0}}, {1, {7}}, {2, {3, 5}}, {1, {0}},
                                                     {3, {2, 3, 300}}};
    for (size_t d = 0; d < 6; d++)
        for (size_t o = 0; o < 4; o++)
            for (size_t s = 0; s < 5; s++) {
                tn_dtype dt = dts[d];
                tn_reduce_op op = ops[o];
                if (op == TN_REDUCE_MEAN && dt != TN_F32 && dt != TN_F64) continue;
                assert_int_equal(tn_scope_begin(), TN_OK);
                tn_tensor *t = filled(shapes[s].nd, shapes[s].shape, dt, rank);
                assert_int_equal(tn_dist_allreduce_(t, op), TN_OK);
                assert_int_equal(tn_version(t), 1); /* one bump */
                int64_t n = tn_numel(t);
                double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
                assert_int_equal(tn_copy_to_f64(t, got, n), TN_OK);
                for (int64_t i = 0; i < n; i++) {
                    double want = expect(dt, op, i);
                    if (dt == TN_F32) want = (double)(float)want;
                    if (got[i] != want)
                        fail_msg("%s op %d shape %zu: element %lld is %g, expected %g",
                                 tn_dtype_name(dt), (int)op, s, (long long)i, got[i], want);
                }
                free(got);
                tn_scope_end();
            }
}

/* Integer sums wrap as tenet's own (two's complement): INT32_MAX on every rank. */
static void test_integer_sum_wraps(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *t = tn_full(1, S(3), TN_I32, INT32_MAX);
    tn_tensor *l = tn_full(1, S(2), TN_I64, (double)INT64_MIN);
    assert_int_equal(tn_dist_allreduce_(t, TN_REDUCE_SUM), TN_OK);
    assert_int_equal(tn_dist_allreduce_(l, TN_REDUCE_SUM), TN_OK);
    int32_t want = (int32_t)((uint32_t)INT32_MAX * (uint32_t)world);
    int64_t wl = (int64_t)((uint64_t)INT64_MIN * (uint64_t)world);
    for (int i = 0; i < 3; i++)
        assert_int_equal(((int32_t *)tn_data_ptr(t))[i], want);
    assert_true(((int64_t *)tn_data_ptr(l))[1] == wl);
    tn_scope_end();
}

/* A leaf that requires grad may be reduced (a write under no-grad), and a
 * saved tensor that was reduced is caught by backward's version check. */
static void test_inplace_rules(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = filled(1, S(4), TN_F64, rank);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    assert_int_equal(tn_dist_allreduce_(w, TN_REDUCE_MEAN), TN_OK);
    assert_int_equal(tn_version(w), 1);
    tn_tensor *e = tn_exp(w);
    assert_int_equal(tn_dist_allreduce_(e, TN_REDUCE_MAX), TN_OK);
    tt_assert_error(tn_backward(tn_sum(e), NULL, false), "modified by an inplace operation");
    tn_scope_end();
}

static void test_broadcast(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    int root = world - 1;
    tn_tensor *t = filled(2, S(4, 33), TN_F32, rank);
    tn_tensor *want = filled(2, S(4, 33), TN_F32, root);
    assert_int_equal(tn_dist_broadcast_(t, root), TN_OK);
    assert_int_equal(tn_version(t), rank == root ? 0 : 1); /* root's own is only read */
    assert_memory_equal(tn_data_ptr(t), tn_data_ptr(want), 4 * 33 * sizeof(float));
    tn_scope_end();
}

/* The ranks disagree: every rank fails with TN_ERR_DIST, no tensor changes. */
static void test_ranks_disagree(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *t = filled(1, S(rank == 0 ? 4 : 5), TN_F32, rank);
    tn_tensor *before = tn_clone(t);
    tt_assert_error(tn_dist_allreduce_(t, TN_REDUCE_SUM),
                    "ranks disagree on the element count (4 on one rank, 5 on another)");
    assert_int_equal(tn_last_status(), TN_ERR_DIST);
    assert_int_equal(tn_version(t), 0);
    assert_memory_equal(tn_data_ptr(t), tn_data_ptr(before), (size_t)tn_numel(t) * 4);
    tn_tensor *u = filled(1, S(4), rank == 0 ? TN_F32 : TN_F64, rank);
    tt_assert_error(tn_dist_allreduce_(u, TN_REDUCE_SUM), "ranks disagree on the dtype");
    tn_tensor *v = filled(1, S(4), TN_F32, rank);
    tt_assert_error(tn_dist_allreduce_(v, rank == 0 ? TN_REDUCE_SUM : TN_REDUCE_MAX),
                    "ranks disagree on the operation");
    tt_assert_error(tn_dist_broadcast_(v, rank == 0 ? 0 : 1), "ranks disagree on the root");
    assert_int_equal(tn_version(v), 0);
    tn_scope_end();
}

/* One rank's argument is bad: it gets its own error, the others TN_ERR_DIST. */
static void test_bad_argument_on_one_rank(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *m = filled(2, S(3, 3), TN_F64, rank);
    tn_tensor *arg = rank == 1 ? tn_transpose(m, 0, 1) : m;
    tn_status st = tn_dist_allreduce_(arg, TN_REDUCE_SUM);
    if (rank == 1) tt_assert_error(st, "Tensors must be contiguous");
    else tt_assert_error(st, "the call failed on another rank");
    assert_int_equal(tn_version(m), 0);
    tt_assert_error(tn_dist_broadcast_(m, world), "root"); /* every rank: bad root */
    tn_status s2 = tn_dist_allreduce_(rank == 0 ? NULL : m, TN_REDUCE_SUM);
    if (rank == 0) tt_assert_error(s2, "argument 't' is NULL");
    else tt_assert_error(s2, "failed on another rank");
    tt_assert_error(tn_dist_allreduce_(m, TN_REDUCE_MEAN + 7), "unknown reduce op");
    tn_tensor *i = filled(1, S(2), TN_I64, rank);
    tt_assert_error(tn_dist_allreduce_(i, TN_REDUCE_MEAN), "float32 or float64");
    assert_int_equal(tn_last_status(), TN_ERR_DTYPE);
    /* and the communicator still works */
    assert_int_equal(tn_dist_allreduce_(m, TN_REDUCE_SUM), TN_OK);
    tn_scope_end();
}

/* MPI_THREAD_MULTIPLE: collectives from a thread other than the one that
 * called tn_dist_init, one thread at a time (the order must match on every
 * rank), and a tensor made on one thread reduced on another. */
typedef struct thread_arg {
    tn_tensor *t;
    tn_status st;
} thread_arg;

static void *reduce_on_thread(void *p) {
    thread_arg *a = p;
    a->st = tn_dist_allreduce_(a->t, TN_REDUCE_SUM);
    if (a->st == TN_OK) a->st = tn_dist_barrier();
    return NULL;
}

static void test_collectives_from_other_threads(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    for (int round = 0; round < 3; round++) {
        tn_tensor *t = filled(1, S(1000), TN_F64, rank);
        thread_arg a = {t, TN_ERR_INTERNAL};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, reduce_on_thread, &a), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(a.st, TN_OK);
        double got[1000];
        assert_int_equal(tn_copy_to_f64(t, got, 1000), TN_OK);
        for (int i = 0; i < 1000; i++)
            assert_true(got[i] == expect(TN_F64, TN_REDUCE_SUM, i));
    }
    tn_scope_end();
}

int main(int argc, char **argv) {
    /* before tn_dist_init: a clear error, no crash */
    if (tn_dist_rank() != -1 || tn_last_status() != TN_ERR_DIST ||
        !strstr(tn_last_error(), "call tn_dist_init first")) {
        fprintf(stderr, "tn_dist_rank before init: %s\n", tn_last_error());
        return 1;
    }
    if (!tt_dist_begin(&argc, &argv, &rank, &world)) return 1;
    const struct CMUnitTest tests[] = {
        TT_TEST(test_world),
        TT_TEST(test_allreduce_every_dtype_and_shape),
        TT_TEST(test_integer_sum_wraps),
        TT_TEST(test_inplace_rules),
        TT_TEST(test_broadcast),
        TT_TEST(test_ranks_disagree),
        TT_TEST(test_bad_argument_on_one_rank),
        TT_TEST(test_collectives_from_other_threads),
    };
    return tt_dist_end(cmocka_run_group_tests(tests, NULL, NULL));
}
