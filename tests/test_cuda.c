/* Cross-backend tests through the public API: every op, forward and
 * backward, on CUDA tensors against the CPU reference (random inputs, odd
 * shapes, non-contiguous operands); copies between devices; the seed
 * scenarios on GPU tensors; optimisers. Without a usable GPU every test but
 * the first skips with "no CUDA device: skipped" (the first checks the
 * errors a CPU-only machine gives). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define CUDA0 TN_DEVICE_CUDA(0)

static bool need_gpu(void) {
    if (tn_cuda_is_available()) return true;
    print_message("no CUDA device: skipped\n");
    return false;
}
#define NEED_GPU()                                                                         \
    do {                                                                                   \
        if (!need_gpu()) skip();                                                           \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64: fixed sequence, no global seed needed */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random float tensor on the CPU; pos: values in [0.5, 2) (log, sqrt, pow). */
static tn_tensor *rand_t(int nd, const int64_t *shape, tn_dtype dt, bool pos) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double *v = test_malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = pos ? 0.5 + 1.5 * urand() : 4 * urand() - 2;
    tn_tensor *d = tn_tensor_from(v, TN_F64, nd, shape, false);
    tn_tensor *t = tn_to(d, dt, TN_DEVICE_KEEP);
    tn_release(d);
    test_free(v);
    return t;
}

/* Asserts a (any device) and b (any device) hold the same values within
 * rtol/atol; shapes must match. */
static void assert_same(const tn_tensor *a, const tn_tensor *b, double tol, const char *what) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(tn_ndim(a), tn_ndim(b));
    int64_t n = tn_numel(a);
    assert_int_equal(n, tn_numel(b));
    double *x = test_malloc((size_t)(n ? n : 1) * sizeof *x), *y = test_malloc((size_t)(n ? n : 1) * sizeof *y);
    assert_int_equal(tn_copy_to_f64(a, x, n), TN_OK);
    assert_int_equal(tn_copy_to_f64(b, y, n), TN_OK);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(x[i] - y[i]), lim = tol * (1 + fabs(y[i]));
        bool both_nan = x[i] != x[i] && y[i] != y[i];
        if (!both_nan && !(d <= lim)) {
            print_error("%s: element %lld: cuda %.17g vs cpu %.17g\n", what, (long long)i, x[i], y[i]);
            fail();
        }
    }
    test_free(x);
    test_free(y);
}

/* ---- the op table ---------------------------------------------------------------- */

typedef tn_tensor *(*op_fn)(tn_tensor *const *in);

typedef struct op_case {
    const char *name;
    op_fn fn;
    int nin;
    int ndim[3];
    int64_t shape[3][4];
    bool pos;        /* positive inputs */
    bool transposed; /* inputs passed as the transpose of a contiguous tensor */
    bool no_grad;    /* forward only (comparisons, argmax) */
} op_case;

#define OP2(name, expr) \
    static tn_tensor *name(tn_tensor *const *in) { tn_tensor *a = in[0], *b = in[1]; (void)b; return expr; }
OP2(f_add, tn_add(a, b))
OP2(f_sub, tn_sub(a, b))
OP2(f_mul, tn_mul(a, b))
OP2(f_div, tn_div(a, b))
OP2(f_pow, tn_pow(a, b))
OP2(f_maximum, tn_maximum(a, b))
OP2(f_minimum, tn_minimum(a, b))
OP2(f_matmul, tn_matmul(a, b))
OP2(f_mse, tn_mse_loss(a, b))
OP2(f_gt, tn_gt(a, b))
OP2(f_eq, tn_eq(a, a))
OP2(f_neg, tn_neg(a))
OP2(f_abs, tn_abs(a))
OP2(f_relu, tn_relu(a))
OP2(f_exp, tn_exp(a))
OP2(f_log, tn_log(a))
OP2(f_sqrt, tn_sqrt(a))
OP2(f_sin, tn_sin(a))
OP2(f_cos, tn_cos(a))
OP2(f_tanh, tn_tanh(a))
OP2(f_sigmoid, tn_sigmoid(a))
OP2(f_adds, tn_add_scalar(a, 0.75))
OP2(f_muls, tn_mul_scalar(a, -1.5))
OP2(f_divs, tn_div_scalar(a, 3))
OP2(f_rsubs, tn_rsub_scalar(a, 2))
OP2(f_pows, tn_pow_scalar(a, 2.5))
OP2(f_clamp, tn_clamp(a, -0.5, 0.7))
OP2(f_sum, tn_sum(a))
OP2(f_sum0, tn_sum_dim(a, 0, false))
OP2(f_sum1, tn_sum_dim(a, 1, true))
OP2(f_mean, tn_mean(a))
OP2(f_mean1, tn_mean_dim(a, -1, false))
OP2(f_max, tn_max(a))
OP2(f_min, tn_min(a))
OP2(f_max0, tn_max_dim(a, 0, false))
OP2(f_max1, tn_max_dim(a, 1, true))
OP2(f_argmax, tn_argmax(a))
OP2(f_softmax, tn_softmax(a, -1))
OP2(f_softmax0, tn_softmax(a, 0))
OP2(f_lsm, tn_log_softmax(a, -1))
OP2(f_lsm1, tn_log_softmax(a, 1))

static tn_tensor *f_linear(tn_tensor *const *in) { return tn_linear(in[0], in[1], in[2]); }
static tn_tensor *f_cat(tn_tensor *const *in) { return tn_cat(3, in, 1); }
static tn_tensor *f_stack(tn_tensor *const *in) { return tn_stack(2, in, 0); }
/* The op functions run inside the caller's scope, which owns every tensor
 * they make: they release nothing themselves. */
static tn_tensor *f_views(tn_tensor *const *in) { /* narrow, transpose, contiguous, select, expand */
    tn_tensor *c = tn_contiguous(tn_transpose(tn_narrow(in[0], 1, 1, 3), 0, 1));
    tn_tensor *u = tn_unsqueeze(tn_select(c, 1, 2), 0);
    tn_tensor *e = tn_expand(u, 2, (int64_t[]){4, tn_shape(u)[1]});
    return tn_mul(e, e);
}
static tn_tensor *f_inplace(tn_tensor *const *in) { /* in-place on a non-leaf + CopySlices */
    tn_tensor *y = tn_mul_scalar(in[0], 2), *v = tn_narrow(y, 0, 1, 2);
    tn_mul_(v, in[1]);
    tn_add_scalar_(y, 1);
    return tn_sigmoid(y);
}
static tn_tensor *f_ce(tn_tensor *const *in) {
    int64_t n = tn_shape(in[0])[0];
    int64_t tv[64];
    for (int64_t i = 0; i < n; i++) tv[i] = (i * 7 + 3) % tn_shape(in[0])[1];
    tv[1] = -100; /* ignore_index */
    tn_tensor *t = tn_tensor_from(tv, TN_I64, 1, &n, false);
    return tn_cross_entropy(in[0], tn_to(t, TN_DTYPE_SAME, tn_device_of(in[0])));
}
/* indexing and masks: constant indices and masks made on in[0]'s device */
static tn_tensor *dev_of(const tn_tensor *ref, tn_tensor *t) {
    return tn_to(t, TN_DTYPE_SAME, tn_device_of(ref));
}
static tn_tensor *ix_for(const tn_tensor *ref, int nd, const int64_t *shape, int64_t mod) {
    int64_t n = 1, v[256];
    for (int i = 0; i < nd; i++) n *= shape[i];
    for (int64_t i = 0; i < n; i++) v[i] = i % 3 == 0 ? 1 : (i * 7 + i / 4) % mod; /* repeats */
    return dev_of(ref, tn_tensor_from(v, TN_I64, nd, shape, false));
}
static tn_tensor *mask_for(const tn_tensor *ref, int nd, const int64_t *shape) {
    int64_t n = 1;
    uint8_t v[256];
    for (int i = 0; i < nd; i++) n *= shape[i];
    for (int64_t i = 0; i < n; i++) v[i] = (i * 5 + 1) % 3 != 0;
    return dev_of(ref, tn_tensor_from(v, TN_BOOL, nd, shape, false));
}
static tn_tensor *f_embedding(tn_tensor *const *in) {
    return tn_embedding(in[0], ix_for(in[0], 2, (int64_t[]){4, 6}, tn_shape(in[0])[0]));
}
static tn_tensor *f_index_select(tn_tensor *const *in) {
    return tn_index_select(in[0], 1, ix_for(in[0], 1, (int64_t[]){9}, tn_shape(in[0])[1]));
}
static tn_tensor *f_gather(tn_tensor *const *in) {
    return tn_gather(in[0], 0, ix_for(in[0], 2, (int64_t[]){4, 5}, tn_shape(in[0])[0]));
}
static tn_tensor *f_scatter_add(tn_tensor *const *in) {
    return tn_scatter_add(in[0], 0, ix_for(in[0], 2, (int64_t[]){4, 5}, tn_shape(in[0])[0]), in[1]);
}
static tn_tensor *f_where(tn_tensor *const *in) {
    return tn_where(mask_for(in[0], 3, (int64_t[]){3, 1, 5}), in[0], in[1]);
}
static tn_tensor *f_masked_fill(tn_tensor *const *in) {
    tn_tensor *y = tn_masked_fill(in[0], mask_for(in[0], 1, (int64_t[]){5}), -0.25);
    tn_tensor *z = tn_mul_scalar(in[0], 2), *v = tn_narrow(z, 0, 1, 2);
    tn_masked_fill_(v, mask_for(in[0], 2, (int64_t[]){2, 5}), 3);
    return tn_add(y, z);
}
static tn_tensor *f_tril(tn_tensor *const *in) {
    return tn_add(tn_tril(in[0], 1), tn_triu(in[0], -1));
}

/* layer_norm over the last 1 (in[1], in[2]: weight, bias) or 2 dims (no bias) */
static tn_tensor *f_ln1(tn_tensor *const *in) {
    return tn_layer_norm(in[0], 1, tn_shape(in[0]) + tn_ndim(in[0]) - 1, in[1], in[2], 1e-5);
}
static tn_tensor *f_ln2(tn_tensor *const *in) {
    return tn_layer_norm(in[0], 2, tn_shape(in[1]), in[1], NULL, 1e-5);
}
OP2(f_gelu, tn_gelu(a, false))
OP2(f_gelu_tanh, tn_gelu(a, true))
OP2(f_silu, tn_silu(a))
OP2(f_lse, tn_logsumexp(a, -1, false))
OP2(f_lse0, tn_logsumexp(a, 0, true))
OP2(f_var, tn_var_dim(a, 1, 1, false))
OP2(f_std, tn_std_dim(a, 0, 0, true))
/* the mask comes from the calling thread's generator on the host: the same
 * seed gives the same mask on either device */
static tn_tensor *f_dropout(tn_tensor *const *in) {
    tn_manual_seed(99);
    return tn_dropout(in[0], 0.4, true);
}

/* scaled_dot_product_attention: masks made on the inputs' device; dropout
 * with the same seed on both (the op draws its hash seed at the call). */
static tn_tensor *sdpa_mask(tn_tensor *like, bool boolean) {
    static const int64_t ms[] = {2, 1, 9, 11};
    tn_tensor *m = rand_t(4, ms, tn_dtype_of(like), false); /* the caller's scope owns them */
    if (boolean) m = tn_gt(m, tn_scalar(-1.0, TN_F64));
    return tn_to(m, TN_DTYPE_SAME, tn_device_of(like));
}
static tn_tensor *f_sdpa(tn_tensor *const *in) {
    return tn_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, false);
}
static tn_tensor *f_sdpa_causal(tn_tensor *const *in) {
    return tn_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, true);
}
static tn_tensor *f_sdpa_masks(tn_tensor *const *in) {
    rng = 5; /* the same masks on both devices */
    tn_tensor *mb = sdpa_mask(in[0], true), *mf = sdpa_mask(in[0], false);
    tn_tensor *a = tn_scaled_dot_product_attention(in[0], in[1], in[2], mb, 0, false);
    tn_tensor *b = tn_scaled_dot_product_attention(in[0], in[1], in[2], mf, 0, false);
    return tn_add(a, b);
}
static tn_tensor *f_sdpa_dropout(tn_tensor *const *in) {
    tn_manual_seed(17);
    return tn_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.25, true);
}

#define S1(a) {a}
#define S2(a, b) {a, b}
#define S3(a, b, c) {a, b, c}
static const op_case cases[] = {
    {.name = "add broadcast", .fn = f_add, .nin = 2, .ndim = {2, 1}, .shape = {S2(33, 17), S1(17)}},
    {.name = "add transposed", .fn = f_add, .nin = 2, .ndim = {2, 2}, .shape = {S2(19, 5), S2(19, 5)}, .transposed = true},
    {.name = "sub", .fn = f_sub, .nin = 2, .ndim = {3, 3}, .shape = {S3(2, 3, 4), S3(2, 1, 4)}},
    {.name = "mul", .fn = f_mul, .nin = 2, .ndim = {2, 0}, .shape = {S2(7, 9), {0}}},
    {.name = "div", .fn = f_div, .nin = 2, .ndim = {2, 2}, .shape = {S2(6, 5), S2(6, 5)}, .pos = true},
    {.name = "pow", .fn = f_pow, .nin = 2, .ndim = {1, 1}, .shape = {S1(40), S1(40)}, .pos = true},
    {.name = "maximum", .fn = f_maximum, .nin = 2, .ndim = {2, 2}, .shape = {S2(8, 3), S2(1, 3)}},
    {.name = "minimum", .fn = f_minimum, .nin = 2, .ndim = {2, 2}, .shape = {S2(8, 3), S2(8, 3)}},
    {.name = "gt", .fn = f_gt, .nin = 2, .ndim = {2, 2}, .shape = {S2(4, 4), S2(4, 4)}, .no_grad = true},
    {.name = "eq", .fn = f_eq, .nin = 1, .ndim = {2}, .shape = {S2(4, 4)}, .no_grad = true},
    {.name = "neg", .fn = f_neg, .nin = 1, .ndim = {2}, .shape = {S2(5, 3)}},
    {.name = "abs", .fn = f_abs, .nin = 1, .ndim = {2}, .shape = {S2(5, 3)}, .transposed = true},
    {.name = "relu", .fn = f_relu, .nin = 1, .ndim = {3}, .shape = {S3(3, 4, 5)}},
    {.name = "exp", .fn = f_exp, .nin = 1, .ndim = {1}, .shape = {S1(1000)}},
    {.name = "log", .fn = f_log, .nin = 1, .ndim = {1}, .shape = {S1(77)}, .pos = true},
    {.name = "sqrt", .fn = f_sqrt, .nin = 1, .ndim = {2}, .shape = {S2(9, 9)}, .pos = true},
    {.name = "sin", .fn = f_sin, .nin = 1, .ndim = {2}, .shape = {S2(4, 6)}},
    {.name = "cos", .fn = f_cos, .nin = 1, .ndim = {2}, .shape = {S2(4, 6)}},
    {.name = "tanh", .fn = f_tanh, .nin = 1, .ndim = {2}, .shape = {S2(4, 6)}, .transposed = true},
    {.name = "sigmoid", .fn = f_sigmoid, .nin = 1, .ndim = {1}, .shape = {S1(100003)}},
    {.name = "add_scalar", .fn = f_adds, .nin = 1, .ndim = {2}, .shape = {S2(3, 3)}},
    {.name = "mul_scalar", .fn = f_muls, .nin = 1, .ndim = {2}, .shape = {S2(3, 3)}},
    {.name = "div_scalar", .fn = f_divs, .nin = 1, .ndim = {2}, .shape = {S2(3, 3)}},
    {.name = "rsub_scalar", .fn = f_rsubs, .nin = 1, .ndim = {2}, .shape = {S2(3, 3)}},
    {.name = "pow_scalar", .fn = f_pows, .nin = 1, .ndim = {2}, .shape = {S2(3, 3)}, .pos = true},
    {.name = "clamp", .fn = f_clamp, .nin = 1, .ndim = {2}, .shape = {S2(6, 7)}},
    {.name = "sum", .fn = f_sum, .nin = 1, .ndim = {1}, .shape = {S1(1 << 20)}},
    {.name = "sum transposed", .fn = f_sum, .nin = 1, .ndim = {2}, .shape = {S2(37, 41)}, .transposed = true},
    {.name = "sum dim 0", .fn = f_sum0, .nin = 1, .ndim = {3}, .shape = {S3(13, 7, 5)}},
    {.name = "sum dim 1 keepdim", .fn = f_sum1, .nin = 1, .ndim = {3}, .shape = {S3(3, 300, 2)}},
    {.name = "mean", .fn = f_mean, .nin = 1, .ndim = {2}, .shape = {S2(31, 3)}},
    {.name = "mean dim -1", .fn = f_mean1, .nin = 1, .ndim = {2}, .shape = {S2(9, 1000)}, .transposed = true},
    {.name = "max", .fn = f_max, .nin = 1, .ndim = {2}, .shape = {S2(50, 50)}},
    {.name = "min", .fn = f_min, .nin = 1, .ndim = {1}, .shape = {S1(3001)}},
    {.name = "max dim 0", .fn = f_max0, .nin = 1, .ndim = {2}, .shape = {S2(17, 6)}},
    {.name = "max dim 1", .fn = f_max1, .nin = 1, .ndim = {3}, .shape = {S3(4, 9, 3)}, .transposed = true},
    {.name = "argmax", .fn = f_argmax, .nin = 1, .ndim = {2}, .shape = {S2(40, 30)}, .no_grad = true},
    {.name = "softmax", .fn = f_softmax, .nin = 1, .ndim = {2}, .shape = {S2(64, 10)}},
    {.name = "softmax dim 0", .fn = f_softmax0, .nin = 1, .ndim = {3}, .shape = {S3(5, 4, 3)}},
    {.name = "log_softmax", .fn = f_lsm, .nin = 1, .ndim = {2}, .shape = {S2(33, 1000)}},
    {.name = "log_softmax dim 1", .fn = f_lsm1, .nin = 1, .ndim = {3}, .shape = {S3(2, 7, 5)}, .transposed = true},
    {.name = "matmul 2d", .fn = f_matmul, .nin = 2, .ndim = {2, 2}, .shape = {S2(65, 33), S2(33, 17)}},
    {.name = "matmul transposed", .fn = f_matmul, .nin = 2, .ndim = {2, 2}, .shape = {S2(40, 40), S2(40, 40)}, .transposed = true},
    {.name = "matmul batched broadcast", .fn = f_matmul, .nin = 2, .ndim = {3, 2}, .shape = {S3(3, 5, 7), S2(7, 4)}},
    {.name = "matmul batch x batch", .fn = f_matmul, .nin = 2, .ndim = {3, 3}, .shape = {S3(2, 6, 8), S3(2, 8, 3)}},
    {.name = "matmul vector", .fn = f_matmul, .nin = 2, .ndim = {1, 2}, .shape = {S1(9), S2(9, 4)}},
    {.name = "matmul matrix-vector", .fn = f_matmul, .nin = 2, .ndim = {2, 1}, .shape = {S2(5, 9), S1(9)}},
    {.name = "linear", .fn = f_linear, .nin = 3, .ndim = {2, 2, 1}, .shape = {S2(16, 12), S2(10, 12), S1(10)}},
    {.name = "cross_entropy", .fn = f_ce, .nin = 1, .ndim = {2}, .shape = {S2(24, 7)}},
    {.name = "mse_loss", .fn = f_mse, .nin = 2, .ndim = {2, 2}, .shape = {S2(11, 3), S2(11, 3)}},
    {.name = "cat", .fn = f_cat, .nin = 3, .ndim = {2, 2, 2}, .shape = {S2(3, 2), S2(3, 5), S2(3, 1)}},
    {.name = "stack", .fn = f_stack, .nin = 2, .ndim = {2, 2}, .shape = {S2(4, 3), S2(4, 3)}},
    {.name = "views", .fn = f_views, .nin = 1, .ndim = {2}, .shape = {S2(6, 5)}},
    {.name = "in-place", .fn = f_inplace, .nin = 2, .ndim = {2, 1}, .shape = {S2(4, 3), S1(3)}},
    {.name = "embedding", .fn = f_embedding, .nin = 1, .ndim = {2}, .shape = {S2(7, 33)}},
    {.name = "index_select", .fn = f_index_select, .nin = 1, .ndim = {3}, .shape = {S3(3, 5, 4)}},
    {.name = "gather", .fn = f_gather, .nin = 1, .ndim = {2}, .shape = {S2(6, 5)}, .transposed = true},
    {.name = "scatter_add", .fn = f_scatter_add, .nin = 2, .ndim = {2, 2}, .shape = {S2(6, 5), S2(4, 5)}},
    {.name = "where", .fn = f_where, .nin = 2, .ndim = {2, 3}, .shape = {S2(4, 5), S3(3, 4, 1)}},
    {.name = "masked_fill", .fn = f_masked_fill, .nin = 1, .ndim = {2}, .shape = {S2(3, 5)}},
    {.name = "tril triu", .fn = f_tril, .nin = 1, .ndim = {3}, .shape = {S3(2, 4, 6)}},
    {.name = "layer_norm", .fn = f_ln1, .nin = 3, .ndim = {3, 1, 1}, .shape = {S3(16, 7, 128), S1(128), S1(128)}},
    {.name = "layer_norm transposed", .fn = f_ln1, .nin = 3, .ndim = {2, 1, 1}, .shape = {S2(9, 37), S1(37), S1(37)}, .transposed = true},
    {.name = "layer_norm 2 dims", .fn = f_ln2, .nin = 2, .ndim = {3, 2}, .shape = {S3(5, 6, 7), S2(6, 7)}},
    {.name = "gelu", .fn = f_gelu, .nin = 1, .ndim = {2}, .shape = {S2(33, 17)}},
    {.name = "gelu tanh", .fn = f_gelu_tanh, .nin = 1, .ndim = {2}, .shape = {S2(33, 17)}, .transposed = true},
    {.name = "silu", .fn = f_silu, .nin = 1, .ndim = {1}, .shape = {S1(1001)}},
    {.name = "dropout", .fn = f_dropout, .nin = 1, .ndim = {2}, .shape = {S2(40, 50)}},
    {.name = "logsumexp", .fn = f_lse, .nin = 1, .ndim = {2}, .shape = {S2(13, 300)}},
    {.name = "logsumexp dim 0", .fn = f_lse0, .nin = 1, .ndim = {3}, .shape = {S3(7, 4, 3)}},
    {.name = "var", .fn = f_var, .nin = 1, .ndim = {3}, .shape = {S3(3, 50, 4)}},
    {.name = "std", .fn = f_std, .nin = 1, .ndim = {2}, .shape = {S2(21, 5)}, .transposed = true},
    {.name = "sdpa", .fn = f_sdpa, .nin = 3, .ndim = {4, 4, 4}, .shape = {{2, 3, 9, 8}, {2, 3, 11, 8}, {2, 3, 11, 5}}},
    {.name = "sdpa causal", .fn = f_sdpa_causal, .nin = 3, .ndim = {4, 4, 4}, .shape = {{2, 3, 9, 8}, {2, 3, 11, 8}, {2, 3, 11, 5}}},
    {.name = "sdpa masks", .fn = f_sdpa_masks, .nin = 3, .ndim = {4, 2, 3}, .shape = {{2, 3, 9, 40}, S2(11, 40), S3(1, 11, 37)}},
    {.name = "sdpa transposed", .fn = f_sdpa_causal, .nin = 3, .ndim = {2, 2, 2}, .shape = {S2(9, 8), S2(11, 8), S2(11, 5)}, .transposed = true},
    {.name = "sdpa dropout", .fn = f_sdpa_dropout, .nin = 3, .ndim = {4, 4, 4}, .shape = {{2, 3, 9, 8}, {2, 3, 11, 8}, {2, 3, 11, 5}}},
};

/* One case in one dtype: forward values and every input's gradient. */
static void run_case(const op_case *c, tn_dtype dt) {
    double tol = dt == TN_F64 ? 1e-9 : 2e-4;
    tn_tensor *cpu[3] = {0}, *gpu[3] = {0};
    for (int i = 0; i < c->nin; i++) {
        int64_t sh[4];
        int nd = c->ndim[i];
        memcpy(sh, c->shape[i], sizeof sh);
        if (c->transposed && nd == 2) { /* made (cols, rows), used transposed */
            int64_t t = sh[0];
            sh[0] = sh[1], sh[1] = t;
        }
        tn_tensor *base = rand_t(nd, sh, dt, c->pos);
        tn_tensor *x = c->transposed && nd == 2 ? tn_transpose(base, 0, 1) : tn_retain(base);
        tn_tensor *xd = tn_to(x, TN_DTYPE_SAME, CUDA0); /* contiguous on the GPU */
        tn_tensor *bd = tn_to(base, TN_DTYPE_SAME, CUDA0);
        tn_tensor *xdv = c->transposed && nd == 2 ? tn_transpose(bd, 0, 1) : tn_retain(xd);
        cpu[i] = tn_detach(x);
        gpu[i] = tn_detach(xdv);
        tn_release(bd);
        if (!c->no_grad) {
            tn_requires_grad_(cpu[i], true);
            tn_requires_grad_(gpu[i], true);
        }
        tn_release(base), tn_release(x), tn_release(xd), tn_release(xdv);
    }
    char what[128];
    snprintf(what, sizeof what, "%s (%s) forward", c->name, tn_dtype_name(dt));
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *yc = c->fn(cpu), *yg = c->fn(gpu);
    assert_non_null(yc);
    if (!yg) print_error("%s: %s\n", what, tn_last_error());
    assert_non_null(yg);
    assert_int_equal(tn_device_of(yg).type, TN_CUDA);
    assert_int_equal(tn_dtype_of(yg), tn_dtype_of(yc));
    assert_same(yg, yc, tol, what);
    if (!c->no_grad) {
        /* loss = sum(y * w) with the same random w on both devices */
        tn_tensor *w = rand_t(tn_ndim(yc), tn_shape(yc), tn_dtype_of(yc), false);
        tn_tensor *wd = tn_to(w, TN_DTYPE_SAME, CUDA0);
        tn_tensor *lc = tn_sum(tn_mul(yc, w)), *lg = tn_sum(tn_mul(yg, wd));
        assert_int_equal(tn_backward(lc, NULL, false), TN_OK);
        if (tn_backward(lg, NULL, false) != TN_OK) print_error("%s\n", tn_last_error());
        for (int i = 0; i < c->nin; i++) {
            tn_tensor *gc = tn_grad(cpu[i]), *gg = tn_grad(gpu[i]);
            snprintf(what, sizeof what, "%s (%s) grad of input %d", c->name, tn_dtype_name(dt), i);
            assert_non_null(gg);
            assert_int_equal(tn_device_of(gg).type, TN_CUDA);
            assert_same(gg, gc, tol * 10, what); /* gc, gg: the scope's */
        }
    }
    tn_scope_end();
    for (int i = 0; i < c->nin; i++) tn_release(cpu[i]), tn_release(gpu[i]);
}

static void ops_match_cpu(void **state) {
    NEED_GPU();
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        run_case(&cases[k], TN_F64);
        run_case(&cases[k], TN_F32);
    }
}

/* ---- devices and copies --------------------------------------------------------------- */

static void unavailable_device_errors(void **state) {
    tn_tensor *x = tn_ones(1, (int64_t[]){3}, TN_F32);
    if (!tn_cuda_is_available()) {
        assert_false(tn_cuda_is_available());
        assert_int_equal(tn_cuda_device_count(), 0);
        assert_null(tn_to(x, TN_DTYPE_SAME, CUDA0));
        assert_int_equal(tn_last_status(), TN_ERR_DEVICE);
        assert_int_not_equal(tn_synchronize(CUDA0), TN_OK);
    } else {
        assert_null(tn_to(x, TN_DTYPE_SAME, TN_DEVICE_CUDA(tn_cuda_device_count())));
        tt_assert_error(TN_ERR_DEVICE, "invalid device ordinal");
        assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    }
    assert_int_equal(tn_synchronize(TN_DEVICE_CPU), TN_OK);
    /* names of devices no build has */
    assert_int_equal(tn_synchronize((tn_device){TN_CPU, 3}), TN_ERR_DEVICE);
    tt_assert_error(TN_ERR_DEVICE, "CPU device index must be 0 or -1");
    assert_int_equal(tn_synchronize((tn_device){(tn_device_type)7, 0}), TN_ERR_DEVICE);
    tt_assert_error(TN_ERR_DEVICE, "unknown device type 7");
    assert_null(tn_to(x, TN_DTYPE_SAME, (tn_device){(tn_device_type)7, 0}));
    assert_int_equal(tn_last_status(), TN_ERR_DEVICE);
    tn_cuda_set_allow_tf32(true); /* a setting: accepted in every build */
    tn_cuda_set_allow_tf32(false);
    tn_release(x);
}

static void copies(void **state) {
    NEED_GPU();
    int64_t sh[2] = {5, 7};
    tn_tensor *a = rand_t(2, sh, TN_F64, false);
    tn_tensor *g = tn_to(a, TN_F32, CUDA0); /* H2D with conversion */
    assert_int_equal(tn_device_of(g).type, TN_CUDA);
    assert_int_equal(tn_dtype_of(g), TN_F32);
    tn_tensor *gt = tn_transpose(g, 0, 1);
    tn_tensor *back = tn_to(gt, TN_F64, TN_DEVICE_CPU); /* strided D2H */
    tn_tensor *at = tn_transpose(a, 0, 1);
    assert_same(back, at, 1e-6, "round trip");
    tn_tensor *gg = tn_clone(gt); /* D2D */
    assert_same(gg, at, 1e-6, "clone on device");
    /* copy_ across devices keeps the destination's device and dtype (docs/semantics.md §1) */
    tn_tensor *dst = tn_zeros(2, (int64_t[]){7, 5}, TN_F64);
    assert_int_equal(tn_copy_(dst, gt), TN_OK);
    assert_int_equal(tn_device_of(dst).type, TN_CPU);
    assert_int_equal(tn_dtype_of(dst), TN_F64);
    assert_int_equal(tn_version(dst), 1);
    assert_same(dst, at, 1e-6, "copy_ D2H");
    tn_tensor *gd = tn_zeros(2, (int64_t[]){5, 7}, TN_F64), *gdd = tn_to(gd, TN_I32, CUDA0);
    assert_int_equal(tn_copy_(gdd, a), TN_OK); /* H2D into an int32 device tensor */
    assert_int_equal(tn_dtype_of(gdd), TN_I32);
    double v[35], w[35];
    assert_int_equal(tn_copy_to_f64(gdd, v, 35), TN_OK);
    assert_int_equal(tn_copy_to_f64(a, w, 35), TN_OK);
    for (int i = 0; i < 35; i++) assert_true(v[i] == (double)(int32_t)w[i]);
    /* broadcast copy_ onto a strided device view */
    tn_tensor *row = tn_full(1, (int64_t[]){5}, TN_F32, 3.5);
    assert_int_equal(tn_copy_(gt, row), TN_OK);
    double item;
    tn_tensor *s = tn_sum(g);
    assert_int_equal(tn_item(s, &item), TN_OK);
    assert_true(item == 3.5 * 35);
    /* new_tensor onto the device is a leaf there */
    tn_tensor *nt = tn_new_tensor(a, TN_DTYPE_SAME, CUDA0, true);
    assert_true(tn_is_leaf(nt));
    assert_int_equal(tn_device_of(nt).type, TN_CUDA);
    /* mixing devices is refused with PyTorch's message */
    assert_null(tn_add(a, g));
    tt_assert_error(TN_ERR_DEVICE, "Expected all tensors to be on the same device");
    /* an input reading the written tensor through another view: GPU threads
     * must not see half-written values (the kernel gets a copy) */
    tn_tensor *h4 = tn_tensor_from((float[]){1, 2, 3, 4}, TN_F32, 1, (int64_t[]){4}, false);
    tn_tensor *g4 = tn_to(h4, TN_DTYPE_SAME, CUDA0), *first = tn_select(g4, 0, 0);
    assert_int_equal(tn_add_(g4, first), TN_OK);
    tt_assert_close(g4, (double[]){2, 3, 4, 5}, 4, 0);
    tn_release(h4), tn_release(g4), tn_release(first);
    /* a 0-dim CPU tensor joins a device op, as PyTorch's scalars */
    tn_tensor *two = tn_scalar(2, TN_F32), *p = tn_mul(g, two);
    assert_non_null(p);
    assert_int_equal(tn_device_of(p).type, TN_CUDA);
    tn_release(a), tn_release(g), tn_release(gt), tn_release(back), tn_release(at);
    tn_release(gg), tn_release(dst), tn_release(gd), tn_release(gdd), tn_release(row);
    tn_release(s), tn_release(nt), tn_release(two), tn_release(p);
}

static void to_device_is_differentiable(void **state) {
    NEED_GPU();
    tn_tensor *x = rand_t(1, (int64_t[]){6}, TN_F32, false);
    tn_requires_grad_(x, true);
    tn_tensor *g = tn_to(x, TN_F64, CUDA0);
    assert_string_equal(tn_grad_fn_name(g), "ToCopyBackward0");
    tn_tensor *y = tn_mul(g, g), *l = tn_sum(y);
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    tn_tensor *gx = tn_grad(x), *want = tn_mul_scalar(x, 2);
    assert_int_equal(tn_device_of(gx).type, TN_CPU); /* back on the leaf's device and dtype */
    assert_int_equal(tn_dtype_of(gx), TN_F32);
    assert_same(gx, want, 1e-6, "grad through to()");
    tn_release(x), tn_release(g), tn_release(y), tn_release(l), tn_release(gx), tn_release(want);
}

/* ---- the seed scenarios on GPU tensors (docs/semantics.md §1, §3) ---------------------------- */

static void seeds_on_gpu(void **state) {
    NEED_GPU();
    tn_tensor *h = tn_tensor_from((double[]){1, 2, 3}, TN_F64, 1, (int64_t[]){3}, false);
    tn_tensor *a = tn_new_tensor(h, TN_F32, CUDA0, true);
    /* out = a.sigmoid(); out.detach().zero_(); out.sum().backward() -> version error */
    tn_tensor *out = tn_sigmoid(a), *d = tn_detach(out);
    assert_int_equal(tn_version(out), 0);
    assert_int_equal(tn_zero_(d), TN_OK);
    assert_int_equal(tn_version(out), 1);
    tn_tensor *s = tn_sum(out);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "one of the variables needed for gradient computation has been modified by "
                    "an inplace operation: [float32 [3] on cuda:0], which is output 0 of "
                    "SigmoidBackward0, is at version 1; expected version 0 instead.");
    /* the same through .data: no error, and the gradient silently uses the zeros */
    tn_tensor *out2 = tn_sigmoid(a), *dd = tn_data(out2);
    assert_int_equal(tn_zero_(dd), TN_OK);
    assert_int_equal(tn_version(out2), 0);
    tn_tensor *s2 = tn_sum(out2);
    assert_int_equal(tn_backward(s2, NULL, false), TN_OK);
    tn_tensor *g = tn_grad(a);
    tt_assert_close(g, (double[]){0, 0, 0}, 3, 0);
    /* a leaf that requires grad refuses in-place ops */
    assert_int_equal(tn_mul_scalar_(a, 2), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "a leaf Variable that requires grad is being used in an "
                                     "in-place operation.");
    tn_release(h), tn_release(a), tn_release(out), tn_release(d), tn_release(s);
    tn_release(out2), tn_release(dd), tn_release(s2), tn_release(g);
}

/* ---- optimisers, determinism, memory ---------------------------------------------------- */

/* One optimiser (which: SGD, Adam) on the CPU and the GPU from the same weights, three steps;
 * the halves with and without master weights (their products, widened to float32, may round an
 * ulp apart on the two, hence a few units of the dtype). */
static void optimizer_case(int which, tn_dtype dt, bool master) {
    tn_tensor *w0 = rand_t(2, (int64_t[]){8, 5}, dt, false);
    tn_tensor *x = rand_t(2, (int64_t[]){16, 8}, dt, false);
    tn_tensor *wc = tn_new_tensor(w0, TN_DTYPE_SAME, TN_DEVICE_KEEP, true);
    tn_tensor *wg = tn_new_tensor(w0, TN_DTYPE_SAME, CUDA0, true);
    tn_tensor *xg = tn_to(x, TN_DTYPE_SAME, CUDA0);
    tn_sgd *sc = NULL, *sg = NULL;
    tn_adam *ac = NULL, *ag = NULL;
    if (which == 0) {
        sc = tn_sgd_new(1, &wc, 0.1, 0.9, 0.01);
        sg = tn_sgd_new(1, &wg, 0.1, 0.9, 0.01);
        assert_int_equal(tn_sgd_set_master_weights(sc, master), TN_OK);
        assert_int_equal(tn_sgd_set_master_weights(sg, master), TN_OK);
    } else {
        ac = tn_adam_new(1, &wc, 0.01, 0.9, 0.999, 1e-8, 0.01);
        ag = tn_adam_new(1, &wg, 0.01, 0.9, 0.999, 1e-8, 0.01);
        assert_int_equal(tn_adam_set_master_weights(ac, master), TN_OK);
        assert_int_equal(tn_adam_set_master_weights(ag, master), TN_OK);
    }
    for (int step = 0; step < 3; step++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *lc = tn_sum(tn_tanh(tn_matmul(x, wc)));
        tn_tensor *lg = tn_sum(tn_tanh(tn_matmul(xg, wg)));
        assert_int_equal(tn_backward(lc, NULL, false), TN_OK);
        assert_int_equal(tn_backward(lg, NULL, false), TN_OK);
        assert_int_equal(which ? tn_adam_step(ac) : tn_sgd_step(sc), TN_OK);
        assert_int_equal(which ? tn_adam_step(ag) : tn_sgd_step(sg), TN_OK);
        assert_int_equal(which ? tn_adam_zero_grad(ac) : tn_sgd_zero_grad(sc), TN_OK);
        assert_int_equal(which ? tn_adam_zero_grad(ag) : tn_sgd_zero_grad(sg), TN_OK);
        tn_scope_end();
    }
    assert_int_equal(tn_dtype_of(wg), dt);
    double tol = dt == TN_F32 ? 1e-5 : dt == TN_BF16 ? 4 * 0x1p-8 : 4 * 0x1p-11;
    assert_same(wg, wc, tol, which ? "Adam" : "SGD");
    tn_sgd_free(sc), tn_sgd_free(sg), tn_adam_free(ac), tn_adam_free(ag);
    tn_release(w0), tn_release(x), tn_release(wc), tn_release(wg), tn_release(xg);
}

static void optimizers_match_cpu(void **state) {
    NEED_GPU();
    for (int which = 0; which < 2; which++) {
        optimizer_case(which, TN_F32, false);
        for (int half = 0; half < 2; half++)
            for (int master = 0; master < 2; master++)
                optimizer_case(which, half ? TN_F16 : TN_BF16, master);
    }
}

static void reductions_are_deterministic(void **state) {
    NEED_GPU();
    int64_t n = 3 << 20;
    tn_tensor *x = rand_t(1, &n, TN_F32, false), *g = tn_to(x, TN_DTYPE_SAME, CUDA0);
    double first = 0;
    for (int i = 0; i < 5; i++) {
        tn_tensor *s = tn_sum(g);
        double v;
        assert_int_equal(tn_item(s, &v), TN_OK);
        if (i == 0) first = v;
        assert_true(v == first); /* bit for bit */
        tn_release(s);
    }
    tn_tensor *sc = tn_sum(x);
    double vc;
    assert_int_equal(tn_item(sc, &vc), TN_OK);
    assert_true(fabs(first - vc) <= 1e-6 * (1 + fabs(vc)));
    tn_release(x), tn_release(g), tn_release(sc);
}

static void memory_is_counted(void **state) {
    NEED_GPU();
    tn_memory_stats_t before, during, after;
    assert_int_equal(tn_memory_stats(&before), TN_OK);
    tn_tensor *g = tn_zeros(1, (int64_t[]){1 << 20}, TN_F32), *d = tn_to(g, TN_DTYPE_SAME, CUDA0);
    assert_int_equal(tn_memory_stats(&during), TN_OK);
    assert_true(during.cuda_bytes_live >= before.cuda_bytes_live + (4u << 20));
    assert_true(during.cuda_bytes_reserved >= during.cuda_bytes_live);
    tn_release(d);
    assert_int_equal(tn_memory_stats(&after), TN_OK);
    assert_true(after.cuda_bytes_live == before.cuda_bytes_live);
    assert_true(after.cuda_bytes_peak >= during.cuda_bytes_live);
    tn_release(g);
}

static void anomaly_nan_on_gpu(void **state) {
    NEED_GPU();
    tn_set_detect_anomaly(true, true);
    tn_tensor *h = tn_tensor_from((double[]){0, 1, 4}, TN_F64, 1, (int64_t[]){3}, false);
    tn_tensor *x = tn_new_tensor(h, TN_DTYPE_SAME, CUDA0, true);
    tn_tensor *y = tn_sqrt(x), *s = tn_sum(y);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
    tt_assert_error(TN_ERR_NAN, "Function 'SqrtBackward0' returned inf values in its 0th output.");
    tn_set_detect_anomaly(false, false);
    tn_release(h), tn_release(x), tn_release(y), tn_release(s);
}

/* A tensor of the given values on the device (no grad unless asked). */
static tn_tensor *on_dev(tn_device d, int n, const double *v, bool requires_grad) {
    tn_tensor *h = tn_tensor_from(v, TN_F64, 1, (int64_t[]){n}, false);
    tn_tensor *t = tn_new_tensor(h, TN_F32, d, requires_grad);
    tn_release(h);
    return t;
}

/* The last report: a forward NaN made by `op`. */
static void assert_forward_nan_by(const char *op) {
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_NAN_FORWARD);
    assert_string_equal(tn_anomaly_report_node(r), op);
}

/* The emulator's count of the work enqueued on its stream (tests/cuda_emu); absent on a GPU. */
extern unsigned long emu_stream_ops(void) __attribute__((weak));

/* A backward on the CPU with check_nan on does not poll a device no check ran on (no wait, no
 * context), while a check still pending on the device is polled and reported by it. */
static void anomaly_cpu_backward_leaves_gpu_alone(void **state) {
    NEED_GPU();
    tn_set_detect_anomaly(true, true);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *g = tn_log(on_dev(CUDA0, 2, (double[]){-1, 2}, false)); /* NaN, check batched */
    assert_non_null(g);
    assert_int_equal(tn_synchronize(CUDA0), TN_OK); /* polled: a warning */
    assert_forward_nan_by("log");
    tn_anomaly_clear();
    const unsigned long before = emu_stream_ops ? emu_stream_ops() : 0;
    for (int i = 0; i < 3; i++) {
        tn_tensor *x = tn_tensor_from((double[]){1, 2, 3}, TN_F64, 1, (int64_t[]){3}, true);
        assert_int_equal(tn_backward(tn_sum(tn_exp(x)), NULL, false), TN_OK);
    }
    if (emu_stream_ops) assert_true(emu_stream_ops() == before); /* the device untouched */
    assert_null(tn_last_anomaly());
    /* a NaN made on the device, then a CPU backward: its end polls the pending check */
    g = tn_log(on_dev(CUDA0, 2, (double[]){-3, 2}, false));
    assert_non_null(g);
    tn_tensor *x = tn_tensor_from((double[]){1, 2, 3}, TN_F64, 1, (int64_t[]){3}, true);
    assert_int_equal(tn_backward(tn_sum(tn_exp(x)), NULL, false), TN_OK); /* forward: a warning */
    assert_forward_nan_by("log");
    tn_anomaly_clear();
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

/* The emulator's count of host waits for the device (stream and event synchronisations). */
extern unsigned long emu_waits(void) __attribute__((weak));

/* P parameters on d with float32 gradients of 1 to 300 elements (two grad_stats batches). */
enum { CLIP_P = 40 };
static void clip_params(tn_device d, tn_tensor **ps) {
    for (int i = 0; i < CLIP_P; i++) {
        const int64_t n = 1 + (i * 37) % 300;
        double *v = malloc((size_t)n * sizeof *v);
        assert_non_null(v);
        for (int64_t j = 0; j < n; j++)
            v[j] = (double)((i * 13 + j * 7) % 23 - 11) / 16;
        ps[i] = on_dev(d, (int)n, v, true);
        tn_tensor *g = on_dev(d, (int)n, v, false);
        assert_int_equal(tn_set_grad(ps[i], g), TN_OK);
        tn_release(g);
        free(v);
    }
}

/* clip_grad_norm_ on the device (2-norm and inf-norm): the total and the clipped gradients as on
 * the CPU, with one wait for the lot (the parts measured by grad_stats and read once) where it
 * used to wait once per gradient. */
static void clip_on_gpu(void **state) {
    NEED_GPU();
    const double norms[2] = {2.0, INFINITY};
    for (int q = 0; q < 2; q++) {
        tn_tensor *cpu[CLIP_P], *gpu[CLIP_P];
        clip_params(TN_DEVICE_CPU, cpu);
        clip_params(CUDA0, gpu);
        double want = -1, got = -1;
        assert_int_equal(tn_clip_grad_norm_(CLIP_P, cpu, 0.1, norms[q], &want), TN_OK);
        const unsigned long waits = emu_waits ? emu_waits() : 0;
        assert_int_equal(tn_clip_grad_norm_(CLIP_P, gpu, 0.1, norms[q], &got), TN_OK);
        if (emu_waits) assert_int_equal(emu_waits() - waits, 1);
        assert_true(want > 0.1 && fabs(got - want) <= 1e-12 * want);
        for (int i = 0; i < CLIP_P; i++) {
            tn_tensor *gc = tn_grad(cpu[i]), *gg = tn_grad(gpu[i]);
            tn_tensor *back = tn_to(gg, TN_F64, TN_DEVICE_CPU), *w = tn_to(gc, TN_F64, TN_DEVICE_CPU);
            assert_non_null(back);
            assert_non_null(w);
            tt_assert_close(back, tn_data_ptr(w), tn_numel(w), 1e-7);
            tn_release(back), tn_release(w), tn_release(gc), tn_release(gg);
            tn_release(cpu[i]), tn_release(gpu[i]);
        }
    }
}

/* check_nan's device checks are batched (debug/anomaly_device.c): the first producer is still
 * the one named across batches (a chain of 70 ops, the NaN made by the 47th), and a write into a
 * checked tensor before its batch ran (a fill, a copy from the host) does not hide the value
 * the op made. */
static void anomaly_nan_batched_on_gpu(void **state) {
    NEED_GPU();
    tn_set_detect_anomaly(true, true);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *h = on_dev(CUDA0, 3, (double[]){1, 2, 3}, false);
    for (int i = 0; i < 70; i++)
        h = i == 46 ? tn_log(tn_mul_scalar(h, -1)) : tn_add_scalar(h, 0.5);
    tn_anomaly_clear();
    assert_int_equal(tn_synchronize(CUDA0), TN_OK); /* a warning, not an error */
    assert_forward_nan_by("log");
    tn_anomaly_clear();
    assert_int_equal(tn_synchronize(CUDA0), TN_OK); /* the poll cleared it */
    assert_null(tn_last_anomaly());

    tn_tensor *neg = on_dev(CUDA0, 3, (double[]){-1, -2, -3}, false);
    tn_tensor *y = tn_log(neg);
    assert_int_equal(tn_fill_(y, 1.0), TN_OK); /* overwrites the NaN before any sync */
    assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    assert_forward_nan_by("log");
    tn_anomaly_clear();
    tn_tensor *z = tn_sqrt(neg);
    tn_tensor *ones = tn_ones(1, (int64_t[]){3}, TN_F32);
    assert_int_equal(tn_copy_(z, ones), TN_OK); /* a transfer from the host into it */
    assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    assert_forward_nan_by("sqrt");
    tn_anomaly_clear();
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
}

/* A NaN made by log in forward and relayed by a saved exp result: on both devices backward fails
 * with PyTorch's text naming the relaying node, and the report names log as the origin. */
static void anomaly_nan_relay_on_gpu(void **state) {
    NEED_GPU();
    tn_set_detect_anomaly(true, true);
    for (int side = 0; side < 2; side++) {
        for (int w_grad = 1; w_grad >= 0; w_grad--) {
            tn_device d = side ? CUDA0 : TN_DEVICE_CPU;
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_tensor *x = on_dev(d, 3, (double[]){-1, 1, 2}, true);
            tn_tensor *w = on_dev(d, 3, (double[]){1, 2, 3}, w_grad);
            tn_tensor *s = tn_sum(tn_mul(tn_exp(tn_log(x)), w));
            tn_anomaly_clear();
            assert_int_equal(tn_backward(s, NULL, false), TN_ERR_NAN);
            const char *node = w_grad ? "MulBackward0" : "ExpBackward0";
            char want[128];
            snprintf(want, sizeof want, "Function '%s' returned nan values in its %dth output.",
                     node, w_grad);
            assert_string_equal(tn_last_error(), want);
            assert_forward_nan_by("log");
            assert_string_equal(tn_anomaly_report_relayed_by(tn_last_anomaly()), node);
            tn_scope_end();
        }
    }
    tn_set_detect_anomaly(false, false);
}

static void *nan_thread(void *arg) {
    (void)arg;
    tn_tensor *neg = on_dev(CUDA0, 3, (double[]){-1, -2, -3}, false);
    tn_tensor *y = tn_log(neg); /* checked, batched: the thread exits before any sync */
    tn_release(y), tn_release(neg);
    return NULL;
}

/* A thread that exits with checks still batched runs them (another thread's sync reports them)
 * and releases what they held (the teardown's leak check). */
static void anomaly_nan_thread_exit_on_gpu(void **state) {
    NEED_GPU();
    tn_set_detect_anomaly(true, true);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, nan_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    tn_anomaly_clear();
    assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    assert_forward_nan_by("log");
    tn_anomaly_clear();
    tn_set_detect_anomaly(false, false);
}

/* The gradient monitor on the GPU (measured there, read back at the pass's end) gives the CPU's
 * report: entries in the same order, norms and maxima to rounding, the same first alarm; more
 * gradients than one device measure takes (TN_GRAD_STATS_MAX), float32 and float64, and a
 * non-contiguous gradient. */
static void monitor_on_gpu(void **state) {
    NEED_GPU();
    const tn_grad_monitor_report *rep[2];
    int count[2];
    double norm[2][200], mx[2][200];
    char name[2][200][64];
    int alarm[2];
    for (int side = 0; side < 2; side++) {
        rng = 4242;
        tn_device d = side ? CUDA0 : TN_DEVICE_CPU;
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *w[20], *xs = rand_t(2, (int64_t[]){6, 16}, TN_F32, false);
        tn_tensor *x = tn_to(xs, TN_DTYPE_SAME, d), *h = x;
        for (int l = 0; l < 20; l++) {
            tn_tensor *ws = rand_t(2, (int64_t[]){16, 16}, l % 2 ? TN_F64 : TN_F32, false);
            /* small weights: no tanh saturates, where 1 - y^2 would magnify rounding */
            w[l] = tn_new_tensor(tn_mul_scalar(ws, 0.15), TN_F32, d, true);
            /* every third layer through a transposed weight: a non-contiguous gradient */
            tn_tensor *wl = l % 3 ? w[l] : tn_transpose(w[l], 0, 1);
            h = tn_tanh(tn_matmul(h, wl));
        }
        char wn[20][8];
        const char *wnames[20];
        for (int l = 0; l < 20; l++)
            snprintf(wn[l], sizeof wn[l], "w%d", l), wnames[l] = wn[l];
        /* named: leaves are reported as they complete, in no order fixed across devices */
        assert_int_equal(tn_grad_monitor_watch(20, wnames, w), TN_OK);
        tn_set_grad_monitor(true, 5.0, 1e-30); /* some of the gradients explode */
        assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(h, 40)), NULL, false), TN_OK);
        tn_set_grad_monitor(false, 0, 0);
        assert_int_equal(tn_grad_monitor_watch(0, NULL, NULL), TN_OK);
        rep[side] = tn_last_grad_monitor();
        assert_non_null(rep[side]);
        count[side] = tn_grad_monitor_count(rep[side]);
        assert_true(count[side] > 32 /* TN_GRAD_STATS_MAX */ && count[side] <= 200);
        for (int i = 0; i < count[side]; i++) {
            const char *nm = tn_grad_monitor_entry(rep[side], i, NULL, &norm[side][i],
                                                   &mx[side][i], NULL);
            assert_non_null(nm);
            snprintf(name[side][i], 64, "%s", nm);
        }
        alarm[side] = tn_grad_monitor_first_alarm(rep[side]);
        tn_scope_end(); /* the weights too: made inside the scope */
    }
    assert_int_equal(count[0], count[1]);
    for (int i = 0; i < count[0]; i++) {
        int k = i; /* the nodes in the same order; a leaf by its name */
        if (name[0][i][0] == 'w')
            for (k = 0; k < count[1] && strcmp(name[0][i], name[1][k]); k++)
                ;
        assert_true(k < count[1]);
        assert_string_equal(name[0][i], name[1][k]);
        assert_true(fabs(norm[0][i] - norm[1][k]) <= 1e-5 * (1 + norm[0][i]));
        assert_true(fabs(mx[0][i] - mx[1][k]) <= 1e-5 * (1 + mx[0][i]));
    }
    assert_true(alarm[0] >= 0);
    assert_int_equal(alarm[0], alarm[1]);
}

/* The gradient monitor's warnings that stderr received since the capture began. */
static int monitor_warnings(tt_capture *c) {
    const char *needle = "tenet: warning: gradient monitor: exploding";
    int n = 0;
    for (const char *p = strstr(tt_capture_text(c), needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* One monitored pass on the GPU whose gradients explode (thresholds 1: every node's). */
static void exploding_pass(void) {
    rng = 99;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *ws = rand_t(2, (int64_t[]){8, 8}, TN_F32, false);
    tn_tensor *w = tn_new_tensor(ws, TN_DTYPE_SAME, CUDA0, true);
    tn_tensor *x = tn_to(rand_t(2, (int64_t[]){4, 8}, TN_F32, false), TN_DTYPE_SAME, CUDA0);
    assert_int_equal(tn_backward(tn_sum(tn_mul_scalar(tn_matmul(x, w), 100)), NULL, false), TN_OK);
    tn_scope_end();
}

static void *pass_then_exit(void *arg) {
    (void)arg;
    exploding_pass(); /* no synchronisation on this thread */
    return NULL;
}

/* A pass with device measures returns without waiting for them: its report, and its warning,
 * complete at the thread's next synchronisation point, its next monitored pass, its read of the
 * report, or its exit; each warning once. */
static void monitor_pending_on_gpu(void **state) {
    NEED_GPU();
    tt_capture c;
    tn_set_grad_monitor(true, 1.0, 0);
    tt_capture_begin(&c);
    exploding_pass();
    assert_int_equal(monitor_warnings(&c), 0); /* pending */
    assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    assert_int_equal(monitor_warnings(&c), 1); /* at the synchronisation point */
    assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    assert_int_equal(monitor_warnings(&c), 1); /* once */
    exploding_pass();
    exploding_pass(); /* the one before completes as this one starts */
    assert_int_equal(monitor_warnings(&c), 2);
    const tn_grad_monitor_report *r = tn_last_grad_monitor(); /* reading it completes it */
    assert_int_equal(monitor_warnings(&c), 3);
    assert_non_null(r);
    int alarm = tn_grad_monitor_first_alarm(r);
    assert_true(alarm >= 0);
    double norm;
    tn_grad_health h;
    assert_non_null(tn_grad_monitor_entry(r, alarm, NULL, &norm, NULL, &h));
    assert_true(norm > 1 && isfinite(norm) && h == TN_GRAD_EXPLODING);
    /* a read of device data is a synchronisation point too */
    exploding_pass();
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *t = tn_to(tn_full(1, (int64_t[]){1}, TN_F32, 2.0), TN_DTYPE_SAME, CUDA0);
    double v = 0;
    assert_int_equal(tn_item(t, &v), TN_OK);
    tn_scope_end();
    assert_true(v == 2.0);
    assert_int_equal(monitor_warnings(&c), 4);
    /* a thread that exits with a pending report: completed at its exit */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, pass_then_exit, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(monitor_warnings(&c), 5);
    assert_int_equal(tn_synchronize(CUDA0), TN_OK);
    assert_int_equal(monitor_warnings(&c), 5); /* not this thread's */
    tn_set_grad_monitor(false, 0, 0);
    tt_capture_end(&c);
}

/* Autocast in a CUDA region: PyTorch 2.x's CUDA lists (matmul to float16; softmax, sum, exp,
 * layer_norm and group_norm of a float16 input in float32; batch_norm follows it; cat promotes),
 * CPU tensors untouched; the gradient scaler on CUDA gradients (the inf check through the device's
 * grad_stats). */
static tn_dtype dt_of_released(tn_tensor *t) {
    tn_dtype d = t ? tn_dtype_of(t) : TN_DTYPE_SAME;
    tn_release(t);
    return d;
}

static void autocast_on_gpu(void **state) {
    (void)state;
    NEED_GPU();
    int64_t sh[2] = {3, 4}, shw[2] = {4, 4};
    tn_tensor *c = rand_t(2, sh, TN_F32, false), *a = tn_to(c, TN_F32, CUDA0);
    tn_tensor *wc = rand_t(2, shw, TN_F32, false), *w = tn_to(wc, TN_F32, CUDA0);
    tn_tensor *ones = tn_ones(2, shw, TN_F32);
    tn_tensor *h = tn_to(a, TN_F16, TN_DEVICE_KEEP);
    assert_non_null(h);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    assert_int_equal(tn_autocast_begin(TN_CUDA, TN_F16), TN_OK);
    tn_tensor *y = tn_matmul(a, w);
    assert_int_equal(tn_dtype_of(y), TN_F16);
    assert_int_equal(dt_of_released(tn_matmul(c, ones)), TN_F32); /* CPU */
    assert_int_equal(dt_of_released(tn_softmax(h, 1)), TN_F32);
    assert_int_equal(dt_of_released(tn_sum(h)), TN_F32);
    assert_int_equal(dt_of_released(tn_exp(h)), TN_F32);
    assert_int_equal(dt_of_released(tn_layer_norm(h, 1, (int64_t[]){4}, NULL, NULL, 1e-5)), TN_F32);
    assert_int_equal(dt_of_released(tn_group_norm(h, 2, NULL, NULL, 1e-5)), TN_F32);
    /* batch_norm is on no list: it follows its input */
    assert_int_equal(dt_of_released(tn_batch_norm(h, NULL, NULL, NULL, NULL, true, 0.1, 1e-5)),
                     TN_F16);
    assert_int_equal(dt_of_released(tn_cat(2, (tn_tensor *[]){a, h}, 0)), TN_F32);
    assert_int_equal(dt_of_released(tn_relu(h)), TN_F16);
    tn_tensor *loss = tn_sum(y); /* float32 (sum is on CUDA's float32 list) */
    assert_int_equal(tn_dtype_of(loss), TN_F32);
    assert_int_equal(tn_autocast_end(), TN_OK);
    tn_grad_scaler *sc = tn_grad_scaler_new(65536, 2, 0.5, 2000, true);
    tn_sgd *o = tn_sgd_new(1, &w, 0.1, 0, 0);
    tn_tensor *s = tn_grad_scaler_scale(sc, loss);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tn_tensor *g = tn_grad(w);
    assert_int_equal(tn_dtype_of(g), TN_F32);
    assert_true(tn_device_of(g).type == TN_CUDA);
    bool stepped = true;
    assert_int_equal(tn_grad_scaler_step(sc, tn_sgd_optimizer(o), &stepped), TN_OK);
    assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
    /* the float16 product's gradient, 65536 per element before unscaling, overflows float16 */
    assert_false(stepped);
    assert_float_equal(tn_grad_scaler_get_scale(sc), 32768, 0);
    tn_sgd_free(o);
    tn_grad_scaler_free(sc);
    tn_release(g), tn_release(s), tn_release(loss), tn_release(y), tn_release(h);
    tn_release(w), tn_release(wc), tn_release(ones), tn_release(a), tn_release(c);
}

/* A KV cache on the GPU (tenet/kv_cache.h): a left-padded prompt then one-token steps through
 * the device's attention kernel with its causal offset and key mask, against the CPU cache fed
 * the same; positions made on the device. */
static void kv_cache_on_gpu(void **state) {
    (void)state;
    NEED_GPU();
    assert_int_equal(tn_scope_begin(), TN_OK);
    bool prev = tn_set_grad_enabled(false);
    const int64_t B = 2, H = 3, T = 9, D = 8, pad[2] = {0, 3}, sh[4] = {B, H, T, D};
    tn_tensor *q = rand_t(4, sh, TN_F32, false), *k = rand_t(4, sh, TN_F32, false);
    tn_tensor *v = rand_t(4, sh, TN_F32, false);
    tn_kv_cache *cg = tn_kv_cache_new(1, B, H, 12, D, TN_F32, CUDA0);
    tn_kv_cache *cc = tn_kv_cache_new(1, B, H, 12, D, TN_F32, TN_DEVICE_CPU);
    assert_non_null(cg);
    assert_non_null(cc);
    assert_int_equal(tn_kv_cache_set_padding(cg, pad), TN_OK);
    assert_int_equal(tn_kv_cache_set_padding(cc, pad), TN_OK);
    for (int64_t t0 = 0, n = 5; t0 < T; t0 += n, n = 1) {
        tn_tensor *qn = tn_narrow(q, 2, t0, n), *kn = tn_narrow(k, 2, t0, n);
        tn_tensor *vn = tn_narrow(v, 2, t0, n);
        assert_same(tn_kv_cache_positions(cg, n), tn_kv_cache_positions(cc, n), 0, "positions");
        assert_int_equal(tn_kv_cache_append(cc, 0, kn, vn), TN_OK);
        assert_int_equal(tn_kv_cache_append(cg, 0, tn_to(kn, TN_F32, CUDA0),
                                            tn_to(vn, TN_F32, CUDA0)),
                         TN_OK);
        tn_tensor *yg = tn_kv_cache_attention(cg, 0, tn_to(qn, TN_F32, CUDA0));
        assert_true(tn_device_of(yg).type == TN_CUDA);
        assert_same(yg, tn_kv_cache_attention(cc, 0, qn), 1e-5, "kv attention");
    }
    assert_int_equal(tn_kv_cache_append(cg, 0, k, v), TN_ERR_DEVICE);
    tn_kv_cache_free(cg);
    tn_kv_cache_free(cc);
    tn_set_grad_enabled(prev);
    tn_scope_end();
}

/* The gradient scaler on CUDA float32 gradients: the inf/NaN check through the device's
 * grad_stats, the unscale in place on the device. */
static void grad_scaler_on_gpu(void **state) {
    (void)state;
    NEED_GPU();
    assert_int_equal(tn_scope_begin(), TN_OK);
    float wv[3] = {1, 2, 3}, xv[3] = {0.5f, -1, 2};
    tn_tensor *w = tn_to(tn_tensor_from(wv, TN_F32, 1, (int64_t[]){3}, false), TN_F32, CUDA0);
    assert_int_equal(tn_requires_grad_(w, true), TN_OK);
    tn_sgd *o = tn_sgd_new(1, &w, 1.0, 0, 0);
    tn_grad_scaler *sc = tn_grad_scaler_new(1024, 2, 0.5, 1, true);
    for (int step = 0; step < 2; step++) {
        if (step == 1) xv[1] = INFINITY;
        tn_tensor *x = tn_to(tn_tensor_from(xv, TN_F32, 1, (int64_t[]){3}, false), TN_F32, CUDA0);
        assert_int_equal(tn_sgd_zero_grad(o), TN_OK);
        tn_tensor *s = tn_grad_scaler_scale(sc, tn_sum(tn_mul(w, x)));
        assert_int_equal(tn_backward(s, NULL, false), TN_OK);
        assert_int_equal(tn_grad_scaler_unscale_(sc, tn_sgd_optimizer(o)), TN_OK);
        if (step == 0) tt_assert_grad(w, (const double[]){0.5, -1, 2}, 3, 0);
        bool stepped;
        assert_int_equal(tn_grad_scaler_step(sc, tn_sgd_optimizer(o), &stepped), TN_OK);
        assert_int_equal(tn_grad_scaler_update(sc), TN_OK);
        assert_true(stepped == (step == 0));
        assert_float_equal(tn_grad_scaler_get_scale(sc), step == 0 ? 2048 : 1024, 0);
    }
    tt_assert_close(w, (const double[]){0.5, 3, 1}, 3, 0); /* one step of lr 1 */
    tn_grad_scaler_free(sc);
    tn_sgd_free(o);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(unavailable_device_errors),
        TT_TEST(copies),
        TT_TEST(to_device_is_differentiable),
        TT_TEST(ops_match_cpu),
        TT_TEST(seeds_on_gpu),
        TT_TEST(optimizers_match_cpu),
        TT_TEST(reductions_are_deterministic),
        TT_TEST(memory_is_counted),
        TT_TEST(anomaly_nan_on_gpu),
        TT_TEST(anomaly_nan_batched_on_gpu),
        TT_TEST(anomaly_nan_relay_on_gpu),
        TT_TEST(anomaly_nan_thread_exit_on_gpu),
        TT_TEST(anomaly_cpu_backward_leaves_gpu_alone),
        TT_TEST(monitor_on_gpu),
        TT_TEST(monitor_pending_on_gpu),
        TT_TEST(clip_on_gpu),
        TT_TEST(autocast_on_gpu),
        TT_TEST(grad_scaler_on_gpu),
        TT_TEST(kv_cache_on_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
