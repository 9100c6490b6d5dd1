/* Autocast (tenet/autocast.h): every op's output dtype in a CPU bfloat16 region against what
 * torch 1.13 does (tests/golden_amp/autocast_policy.txt, written by
 * scripts/autocast_policy.py), regions (nesting, disabled regions, errors, threads), the
 * gradients through the recorded casts, and the weight-cast cache (its rule, its lifetime, and
 * that a cast made under no-grad is never reused: pytorch/pytorch#105211). */
#include <pthread.h>
#include <string.h>

#include "util.h"

#include "engine/ops/autocast.h"

#define GOLDEN "golden_amp/autocast_policy.txt"

static tn_tensor *rnd(tn_dtype dt, int ndim, const int64_t *shape) {
    tn_tensor *r = tn_rand(ndim, shape, TN_F32);
    return tn_to(r, dt, TN_DEVICE_KEEP);
}
#define R(dt, ...)                                                                                 \
    rnd(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static tn_tensor *idx3(void) {
    int64_t v[] = {0, 2, 1};
    return tn_tensor_from(v, TN_I64, 1, (int64_t[]){3}, false);
}

static tn_tensor *mask34(void) {
    bool m[12];
    for (int i = 0; i < 12; i++)
        m[i] = (i % 4) % 2 == 0;
    return tn_tensor_from(m, TN_BOOL, 2, (int64_t[]){3, 4}, false);
}

/* The tenet op named as in the golden file, on float inputs of dtypes d[]; the shapes are the
 * script's. */
static tn_tensor *run_op(const char *op, const tn_dtype *d) {
    if (!strcmp(op, "matmul")) return tn_matmul(R(d[0], 3, 4), R(d[1], 4, 2));
    if (!strcmp(op, "linear")) return tn_linear(R(d[0], 3, 4), R(d[1], 2, 4), R(d[2], 2));
    if (!strcmp(op, "conv1d"))
        return tn_conv1d(R(d[0], 1, 2, 5), R(d[1], 3, 2, 2), R(d[2], 3), 1, 0, 1, 1);
    if (!strcmp(op, "conv2d"))
        return tn_conv2d(R(d[0], 1, 2, 5, 5), R(d[1], 3, 2, 2, 2), R(d[2], 3), NULL, NULL, NULL, 1);
    if (!strcmp(op, "conv_transpose2d"))
        return tn_conv_transpose2d(R(d[0], 1, 2, 4, 4), R(d[1], 2, 3, 2, 2), R(d[2], 3), NULL, NULL,
                                   NULL, 1, NULL);
    if (!strcmp(op, "scaled_dot_product_attention"))
        return tn_scaled_dot_product_attention(R(d[0], 1, 3, 4), R(d[1], 1, 3, 4), R(d[2], 1, 3, 4),
                                               NULL, 0, false);
    if (!strcmp(op, "cross_entropy")) return tn_cross_entropy(R(d[0], 3, 4), idx3());
    if (!strcmp(op, "mse_loss")) return tn_mse_loss(R(d[0], 3, 4), R(d[1], 3, 4));
    if (!strcmp(op, "logsumexp")) return tn_logsumexp(R(d[0], 3, 4), 1, false);
    if (!strcmp(op, "softmax")) return tn_softmax(R(d[0], 3, 4), 1);
    if (!strcmp(op, "log_softmax")) return tn_log_softmax(R(d[0], 3, 4), 1);
    if (!strcmp(op, "layer_norm"))
        return tn_layer_norm(R(d[0], 3, 4), 1, (int64_t[]){4}, R(d[1], 4), R(d[2], 4), 1e-5);
    if (!strcmp(op, "exp")) return tn_exp(R(d[0], 3, 4));
    if (!strcmp(op, "log")) return tn_log(R(d[0], 3, 4));
    if (!strcmp(op, "pow")) return tn_pow(R(d[0], 3, 4), R(d[1], 3, 4));
    if (!strcmp(op, "pow_scalar")) return tn_pow_scalar(R(d[0], 3, 4), 2.5);
    if (!strcmp(op, "sum")) return tn_sum(R(d[0], 3, 4));
    if (!strcmp(op, "sum_dim")) return tn_sum_dim(R(d[0], 3, 4), 1, false);
    if (!strcmp(op, "mean")) return tn_mean(R(d[0], 3, 4));
    if (!strcmp(op, "add")) return tn_add(R(d[0], 3, 4), R(d[1], 3, 4));
    if (!strcmp(op, "mul")) return tn_mul(R(d[0], 3, 4), R(d[1], 3, 4));
    if (!strcmp(op, "relu")) return tn_relu(R(d[0], 3, 4));
    if (!strcmp(op, "gelu")) return tn_gelu(R(d[0], 3, 4), false);
    if (!strcmp(op, "tanh")) return tn_tanh(R(d[0], 3, 4));
    if (!strcmp(op, "var_dim")) return tn_var_dim(R(d[0], 3, 4), 1, 1, false);
    if (!strcmp(op, "embedding")) return tn_embedding(R(d[0], 3, 4), idx3());
    if (!strcmp(op, "cat") || !strcmp(op, "stack")) {
        tn_tensor *ts[2] = {R(d[0], 3, 4), R(d[1], 3, 4)};
        return op[0] == 'c' ? tn_cat(2, ts, 0) : tn_stack(2, ts, 0);
    }
    if (!strcmp(op, "scatter_add")) {
        int64_t v[12];
        for (int i = 0; i < 12; i++)
            v[i] = (i / 4 * 2) % 3; /* rows 0, 2, 1 */
        tn_tensor *ix = tn_tensor_from(v, TN_I64, 2, (int64_t[]){3, 4}, false);
        return tn_scatter_add(R(d[0], 3, 4), 0, ix, R(d[1], 3, 4));
    }
    if (!strcmp(op, "where")) return tn_where(mask34(), R(d[0], 3, 4), R(d[1], 3, 4));
    if (!strcmp(op, "masked_fill")) return tn_masked_fill(R(d[0], 3, 4), mask34(), 0.5);
    if (!strcmp(op, "batch_norm") || !strcmp(op, "batch_norm_eval")) /* statistics: d[1] */
        return tn_batch_norm(R(d[0], 2, 3, 4, 4), R(d[1], 3), R(d[1], 3), R(d[1], 3), R(d[2], 3),
                             !strcmp(op, "batch_norm"), 0.1, 1e-5);
    if (!strcmp(op, "group_norm"))
        return tn_group_norm(R(d[0], 2, 4, 3, 3), 2, R(d[1], 4), R(d[2], 4), 1e-5);
    const int64_t k2[2] = {2, 2};
    if (!strcmp(op, "max_pool2d"))
        return tn_max_pool2d(R(d[0], 1, 2, 4, 4), k2, NULL, NULL, NULL, false);
    if (!strcmp(op, "avg_pool2d"))
        return tn_avg_pool2d(R(d[0], 1, 2, 4, 4), k2, NULL, NULL, false, true, 0);
    if (!strcmp(op, "adaptive_avg_pool2d")) return tn_adaptive_avg_pool2d(R(d[0], 1, 2, 4, 4), k2);
    if (!strcmp(op, "adaptive_max_pool2d")) return tn_adaptive_max_pool2d(R(d[0], 1, 2, 4, 4), k2);
    fail_msg("no tenet call for golden op %s", op);
    return NULL;
}

/* torch 1.13 lacks scaled_dot_product_attention: tenet follows 2.x's CPU list (lower
 * precision, whatever the inputs). */
static const char *expected(const char *op, const char *golden) {
    if (!strcmp(golden, "n/a")) {
        assert_string_equal(op, "scaled_dot_product_attention");
        return "bfloat16";
    }
    return golden;
}

static void test_policy_golden(void **state) {
    (void)state;
    FILE *f = fopen(GOLDEN, "r");
    assert_non_null(f);
    char line[256], op[64], mode[16], want[16];
    int rows = 0, bad = 0;
    tn_manual_seed(1);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        assert_int_equal(sscanf(line, "%63s %15s %15s", op, mode, want), 3);
        tn_dtype d[3] = {TN_F32, TN_F32, TN_F32};
        for (int i = 0; i < 3; i++)
            if (!strcmp(mode, "bf16") || (!strcmp(mode, "mixed") && i > 0) ||
                (!strcmp(mode, "lowfirst") && i == 0))
                d[i] = TN_BF16;
        assert_int_equal(tn_scope_begin(), TN_OK);
        assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
        tn_tensor *out = run_op(op, d);
        assert_int_equal(tn_autocast_end(), TN_OK);
        const char *got = out ? tn_dtype_name(tn_dtype_of(out)) : "error";
        const char *exp = expected(op, want);
        if (strcmp(got, exp)) {
            print_error("%s %s: tenet %s, torch %s (%s)\n", op, mode, got, exp,
                        out ? "" : tn_last_error());
            bad++;
        }
        rows++;
        tn_scope_end();
    }
    fclose(f);
    assert_int_equal(rows, 112);
    assert_int_equal(bad, 0);
}

/* The dtype matmul of two float32 matrices gets now. */
static tn_dtype matmul_dtype(void) {
    if (tn_scope_begin() != TN_OK) return TN_DTYPE_SAME;
    tn_tensor *c = tn_matmul(R(TN_F32, 2, 2), R(TN_F32, 2, 2));
    tn_dtype dt = c ? tn_dtype_of(c) : TN_DTYPE_SAME;
    tn_scope_end();
    return dt;
}

static void test_regions_nest(void **state) {
    (void)state;
    assert_false(tn_autocast_is_enabled(TN_CPU));
    assert_int_equal(tn_autocast_dtype(TN_CPU), TN_BF16);
    assert_int_equal(tn_autocast_dtype(TN_CUDA), TN_F16);
    assert_int_equal(matmul_dtype(), TN_F32);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    assert_true(tn_autocast_is_enabled(TN_CPU));
    assert_false(tn_autocast_is_enabled(TN_CUDA));
    assert_int_equal(matmul_dtype(), TN_BF16);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_F16), TN_OK);
    assert_int_equal(tn_autocast_dtype(TN_CPU), TN_F16);
    assert_int_equal(matmul_dtype(), TN_F16);
    assert_int_equal(tn_autocast_begin_disabled(TN_CPU), TN_OK);
    assert_false(tn_autocast_is_enabled(TN_CPU));
    assert_int_equal(matmul_dtype(), TN_F32);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(matmul_dtype(), TN_F16);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn_autocast_dtype(TN_CPU), TN_BF16);
    assert_int_equal(matmul_dtype(), TN_BF16);
    /* a CUDA region leaves CPU tensors alone */
    assert_int_equal(tn_autocast_begin_disabled(TN_CPU), TN_OK);
    assert_int_equal(tn_autocast_begin(TN_CUDA, TN_BF16), TN_OK);
    assert_int_equal(matmul_dtype(), TN_F32);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_false(tn_autocast_is_enabled(TN_CPU));
    assert_int_equal(matmul_dtype(), TN_F32);
}

static void test_errors(void **state) {
    (void)state;
    assert_int_equal(tn_autocast_end(), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "no autocast region is open on this thread");
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_I32), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE, "autocast dtype must be bfloat16 or float16, got int32");
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_F32), TN_ERR_DTYPE);
    assert_int_equal(tn_autocast_begin(TN_CPU, (tn_dtype)99), TN_ERR_DTYPE);
    assert_int_equal(tn_autocast_begin((tn_device_type)7, TN_BF16), TN_ERR_DEVICE);
    assert_int_equal(tn_autocast_begin_disabled(TN_DEVICE_SAME), TN_ERR_DEVICE);
    assert_int_equal(tn_autocast_dtype((tn_device_type)7), TN_DTYPE_SAME);
    assert_false(tn_autocast_is_enabled(TN_CPU)); /* nothing was opened */
    for (int i = 0; i < TN_AUTOCAST_MAX_DEPTH; i++)
        assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "autocast regions are open");
    for (int i = 0; i < TN_AUTOCAST_MAX_DEPTH; i++)
        assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn_autocast_end(), TN_ERR_INVALID_ARGUMENT);
}

/* float64, integer and mixed float64 inputs are never cast */
static void test_ineligible_inputs(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    tn_tensor *c = tn_matmul(R(TN_F64, 2, 2), R(TN_F64, 2, 2));
    assert_int_equal(tn_dtype_of(c), TN_F64);
    tn_tensor *i = tn_ones(2, (int64_t[]){2, 2}, TN_I64);
    assert_int_equal(tn_dtype_of(tn_matmul(i, i)), TN_I64);
    tn_tensor *l = tn_cross_entropy(R(TN_F64, 3, 4), idx3());
    assert_int_equal(tn_dtype_of(l), TN_F64);
    /* promote starts from the region's dtype: float16 with bfloat16 is float32 */
    tn_tensor *h[2] = {R(TN_F16, 2), R(TN_F16, 2)};
    assert_int_equal(tn_dtype_of(tn_cat(2, h, 0)), TN_F32);
    tn_tensor *m[2] = {R(TN_F64, 2), R(TN_BF16, 2)};
    assert_int_equal(tn_dtype_of(tn_cat(2, m, 0)), TN_F64);
    /* more inputs than the frame holds inline: cast into an allocated list */
    tn_tensor *many[6];
    for (int k = 0; k < 6; k++)
        many[k] = R(k == 3 ? TN_F32 : TN_BF16, 2);
    tn_tensor *st = tn_stack(6, many, 0);
    assert_int_equal(tn_dtype_of(st), TN_F32);
    assert_int_equal(tn_size(st, 0), 6);
    assert_int_equal(tn_autocast_end(), TN_OK);
    tn_scope_end();
}

/* linear in a region: bfloat16 result, float32 .grad of float32 leaves through the recorded
 * casts, the same values as the bfloat16 computation outside autocast */
static void test_gradients_through_casts(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    float xv[6] = {1, 2, 3, 0.5f, -1, 4}, wv[6] = {0.25f, -2, 1, 3, 0.5f, 2};
    tn_tensor *x = tt_f32(2, (int64_t[]){2, 3}, xv, true);
    tn_tensor *w = tt_f32(2, (int64_t[]){2, 3}, wv, true);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    tn_tensor *y = tn_linear(x, w, NULL);
    assert_int_equal(tn_dtype_of(y), TN_BF16);
    tn_tensor *loss = tn_mse_loss(y, tn_zeros(2, (int64_t[]){2, 2}, TN_BF16));
    assert_int_equal(tn_dtype_of(loss), TN_F32);             /* float32 list */
    assert_int_equal(tn_backward(loss, NULL, false), TN_OK); /* inside the region */
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn_dtype_of(tn_grad(x)), TN_F32);
    assert_int_equal(tn_dtype_of(tn_grad(w)), TN_F32);
    /* reference: the same graph with explicit casts */
    tn_tensor *x2 = tt_f32(2, (int64_t[]){2, 3}, xv, true);
    tn_tensor *w2 = tt_f32(2, (int64_t[]){2, 3}, wv, true);
    tn_tensor *y2 =
        tn_linear(tn_to(x2, TN_BF16, TN_DEVICE_KEEP), tn_to(w2, TN_BF16, TN_DEVICE_KEEP), NULL);
    tn_tensor *l2 =
        tn_mse_loss(tn_to(y2, TN_F32, TN_DEVICE_KEEP), tn_zeros(2, (int64_t[]){2, 2}, TN_F32));
    assert_int_equal(tn_backward(l2, NULL, false), TN_OK);
    double g1[6], g2[6];
    assert_int_equal(tn_copy_to_f64(tn_grad(w), g1, 6), TN_OK);
    assert_int_equal(tn_copy_to_f64(tn_grad(w2), g2, 6), TN_OK);
    assert_memory_equal(g1, g2, sizeof g1);
    assert_int_equal(tn_copy_to_f64(tn_grad(x), g1, 6), TN_OK);
    assert_int_equal(tn_copy_to_f64(tn_grad(x2), g2, 6), TN_OK);
    assert_memory_equal(g1, g2, sizeof g1);
    tn_scope_end();
}

/* torch's rule: float32 leaves that require grad, not views, cached until the outermost region
 * ends */
static void test_cache_rule_and_lifetime(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = R(TN_F32, 4, 4), *x = R(TN_F32, 4, 4);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    tn_tensor *v = tn_transpose(w, 0, 1); /* a view of a leaf */
    tn_tensor *nl = tn_mul_scalar(w, 2);  /* not a leaf */
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    assert_non_null(tn_matmul(x, w));
    assert_int_equal(tn__autocast_cache_size(), 1); /* x does not require grad */
    assert_non_null(tn_matmul(w, w));
    assert_non_null(tn_linear(x, w, NULL));
    assert_int_equal(tn__autocast_cache_size(), 1); /* one cast of w, reused */
    assert_non_null(tn_matmul(v, nl));
    assert_int_equal(tn__autocast_cache_size(), 1);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn__autocast_cache_size(), 1); /* an inner region's end keeps it */
    /* a float16 region does not take the bfloat16 cast */
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_F16), TN_OK);
    assert_int_equal(tn_dtype_of(tn_matmul(x, w)), TN_F16);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn_autocast_end(), TN_OK);
    assert_int_equal(tn__autocast_cache_size(), 0);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    assert_non_null(tn_matmul(x, w));
    tn_autocast_clear_cache();
    assert_int_equal(tn__autocast_cache_size(), 0);
    assert_int_equal(tn_autocast_end(), TN_OK);
    tn_scope_end();
}

/* pytorch/pytorch#105211: in torch, a first use of a weight under no_grad inside the region
 * caches a cast without history, and a later grad-mode use in the same region gets that cast:
 * the weight silently gets no gradient. tenet does not cache casts made with grad mode off. */
static void test_no_grad_cast_not_reused(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *w = R(TN_F32, 3, 3), *x = R(TN_F32, 2, 3);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *eval = tn_linear(x, w, NULL);
    assert_false(tn_requires_grad(eval));
    assert_int_equal(tn__autocast_cache_size(), 0);
    tn_set_grad_enabled(prev);
    tn_tensor *y = tn_linear(x, w, NULL);
    assert_true(tn_requires_grad(y));
    assert_int_equal(tn__autocast_cache_size(), 1);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    assert_non_null(tn_grad(w));
    /* grad of sum(x w^T) w.r.t. w: column sums of bfloat16(x), in every row */
    double xs[6], g[9], want[3] = {0, 0, 0};
    assert_int_equal(tn_copy_to_f64(tn_to(x, TN_BF16, TN_DEVICE_KEEP), xs, 6), TN_OK);
    for (int j = 0; j < 3; j++)
        want[j] = xs[j] + xs[3 + j];
    assert_int_equal(tn_copy_to_f64(tn_grad(w), g, 9), TN_OK);
    for (int i = 0; i < 9; i++)
        assert_float_equal(g[i], want[i % 3],
                           1e-2 * (1 + (want[i % 3] < 0 ? -want[i % 3] : want[i % 3])));
    /* a cast cached with grad mode on serves a later no-grad use (its values are the same) */
    prev = tn_set_grad_enabled(false);
    assert_non_null(tn_linear(x, w, NULL));
    assert_int_equal(tn__autocast_cache_size(), 1);
    tn_set_grad_enabled(prev);
    assert_int_equal(tn_autocast_end(), TN_OK);
    tn_scope_end();
}

/* Regions are per thread: another thread sees none of this thread's, and its own do not leak
 * back. Results are collected and asserted on the main thread. */
typedef struct thread_result {
    bool enabled_at_start;
    tn_dtype plain, in_region;
    tn_status st;
} thread_result;

static void *thread_body(void *arg) {
    thread_result *r = arg;
    r->enabled_at_start = tn_autocast_is_enabled(TN_CPU);
    r->plain = matmul_dtype();
    r->st = tn_autocast_begin(TN_CPU, TN_F16);
    r->in_region = matmul_dtype();
    if (r->st == TN_OK) r->st = tn_autocast_end();
    return NULL;
}

static void test_per_thread(void **state) {
    (void)state;
    assert_int_equal(tn_autocast_begin(TN_CPU, TN_BF16), TN_OK);
    thread_result r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_body, &r[i]), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 4; i++) {
        assert_false(r[i].enabled_at_start);
        assert_int_equal(r[i].plain, TN_F32);
        assert_int_equal(r[i].in_region, TN_F16);
        assert_int_equal(r[i].st, TN_OK);
    }
    assert_int_equal(matmul_dtype(), TN_BF16);
    assert_int_equal(tn_autocast_end(), TN_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_policy_golden),
        TT_TEST(test_regions_nest),
        TT_TEST(test_errors),
        TT_TEST(test_ineligible_inputs),
        TT_TEST(test_gradients_through_casts),
        TT_TEST(test_cache_rule_and_lifetime),
        TT_TEST(test_no_grad_cast_not_reused),
        TT_TEST(test_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
