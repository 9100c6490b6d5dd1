/* tests/test_golden.c — forward values and gradients against PyTorch.
 *
 * Each tests/golden/<case>.txt (written by scripts/gen_golden.py, format in
 * its docstring) holds float64 inputs, PyTorch's output of one op and the
 * gradient of sum(out * w) w.r.t. each input. Every file becomes one cmocka
 * test: tenet recomputes the op, runs backward, and must agree within 1e-10
 * (float32 cases: GOLDEN_TOL_F32).
 * The directory comes from TENET_GOLDEN_DIR (set by tests/CMakeLists.txt).
 */
#define _POSIX_C_SOURCE 200809L /* strdup, dirent */
#include "util.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_TOL 1e-10
#define GOLDEN_TOL_F32 1e-6
/* bfloat16 (<case>_bf16): two units in the last place of max(1, |value|) for outputs, four for
 * gradients. Both sides compute in float32 and round once per op, but their float32 algorithms
 * differ (exp, the order of a sum), so a result near a rounding boundary may round either way;
 * a backward starts from a gradient rounded to bfloat16 and is often several rounded ops */
#define GOLDEN_TOL_BF16 1.6e-2
#define GOLDEN_TOL_BF16_GRAD 3.2e-2
#define MAX_TENSORS 24
#define MAX_PARAMS 16

typedef struct {
    char kind[16], name[16], dtype[8], layout[4];
    int ndim;
    int64_t shape[TN_MAX_DIMS];
    int64_t n;
    double *v;
} gtensor;

typedef struct {
    char op[64];
    int np, nt;
    double p[MAX_PARAMS];
    gtensor t[MAX_TENSORS];
} gcase;

/* ---- parsing ------------------------------------------------------------------ */

static void free_case(gcase *c) {
    for (int i = 0; i < c->nt; i++)
        free(c->t[i].v);
    c->nt = 0;
}

/* Returns NULL on success, else what went wrong. */
static const char *parse_case(FILE *f, gcase *c) {
    char tok[64];
    memset(c, 0, sizeof *c);
    if (fscanf(f, "%63s %63s", tok, c->op) != 2 || strcmp(tok, "op") != 0) return "no op line";
    if (fscanf(f, "%63s %d", tok, &c->np) != 2 || strcmp(tok, "params") != 0 || c->np < 0 ||
        c->np > MAX_PARAMS)
        return "bad params line";
    for (int i = 0; i < c->np; i++)
        if (fscanf(f, "%lf", &c->p[i]) != 1) return "bad param value";
    for (;;) {
        if (fscanf(f, "%63s", tok) != 1) return "missing end";
        if (strcmp(tok, "end") == 0) return NULL;
        if (strcmp(tok, "tensor") != 0 || c->nt == MAX_TENSORS) return "bad tensor line";
        gtensor *t = &c->t[c->nt++];
        if (fscanf(f, "%15s %15s %7s %3s %d", t->kind, t->name, t->dtype, t->layout, &t->ndim) !=
                5 ||
            t->ndim < 0 || t->ndim > TN_MAX_DIMS)
            return "bad tensor header";
        t->n = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (fscanf(f, "%" SCNd64, &t->shape[d]) != 1 || t->shape[d] < 0) return "bad dim";
            t->n *= t->shape[d];
        }
        t->v = malloc((size_t)(t->n ? t->n : 1) * sizeof(double));
        if (!t->v) return "out of memory";
        for (int64_t i = 0; i < t->n; i++)
            if (fscanf(f, "%lf", &t->v[i]) != 1) return "bad value";
    }
}

static const gtensor *find(const gcase *c, const char *kind, const char *name) {
    for (int i = 0; i < c->nt; i++)
        if (strcmp(c->t[i].kind, kind) == 0 && (!name || strcmp(c->t[i].name, name) == 0))
            return &c->t[i];
    return NULL;
}

/* ---- tensors from records ----------------------------------------------------- */

/* A leaf holding t's values. layout "t": a transposed view of a contiguous
 * tensor (non-contiguous leaf), to exercise the strided paths. */
static tn_tensor *make_tensor(const gtensor *t, bool requires_grad) {
    if (strcmp(t->dtype, "i64") == 0) {
        int64_t *iv = malloc((size_t)(t->n ? t->n : 1) * sizeof *iv);
        assert_non_null(iv);
        for (int64_t i = 0; i < t->n; i++)
            iv[i] = (int64_t)t->v[i];
        tn_tensor *r = tn_tensor_from(iv, TN_I64, t->ndim, t->shape, false);
        free(iv);
        assert_non_null(r);
        return r;
    }
    if (strcmp(t->dtype, "bool") == 0) { /* masks and conditions */
        uint8_t *bv = malloc((size_t)(t->n ? t->n : 1));
        assert_non_null(bv);
        for (int64_t i = 0; i < t->n; i++)
            bv[i] = t->v[i] != 0;
        tn_tensor *r = tn_tensor_from(bv, TN_BOOL, t->ndim, t->shape, false);
        free(bv);
        assert_non_null(r);
        return r;
    }
    if (strcmp(t->dtype, "f32") == 0 || strcmp(t->dtype, "bf16") == 0) { /* exact in it */
        tn_tensor *d = tt_f64(t->ndim, t->shape, t->v, false);
        tn_tensor *r = tn_to(d, t->dtype[0] == 'f' ? TN_F32 : TN_BF16, TN_DEVICE_CPU);
        assert_non_null(r);
        if (requires_grad) assert_int_equal(tn_requires_grad_(r, true), TN_OK);
        return r;
    }
    assert_string_equal(t->dtype, "f64");
    if (strcmp(t->layout, "t") != 0) return tt_f64(t->ndim, t->shape, t->v, requires_grad);
    assert_true(t->ndim >= 2);
    int nd = t->ndim;
    int64_t bshape[TN_MAX_DIMS];
    memcpy(bshape, t->shape, sizeof bshape);
    bshape[nd - 1] = t->shape[nd - 2];
    bshape[nd - 2] = t->shape[nd - 1];
    int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1], mats = t->n / (rows * cols);
    double *bv = malloc((size_t)t->n * sizeof *bv);
    assert_non_null(bv);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                bv[m * rows * cols + j * rows + i] = t->v[m * rows * cols + i * cols + j];
    tn_tensor *base = tt_f64(nd, bshape, bv, false);
    free(bv);
    tn_tensor *leaf = tn_detach(tn_transpose(base, -1, -2));
    assert_non_null(leaf);
    assert_false(tn_is_contiguous(leaf));
    if (requires_grad) assert_int_equal(tn_requires_grad_(leaf, true), TN_OK);
    return leaf;
}

static void assert_matches(const char *what, const tn_tensor *got, const gtensor *want) {
    if (!got) fail_msg("%s: no tensor (%s)", what, tn_last_error());
    if (tn_ndim(got) != want->ndim)
        fail_msg("%s: ndim %d, want %d", what, tn_ndim(got), want->ndim);
    for (int d = 0; d < want->ndim; d++)
        if (tn_shape(got)[d] != want->shape[d])
            fail_msg("%s: size %lld at dim %d, want %lld", what, (long long)tn_shape(got)[d], d,
                     (long long)want->shape[d]);
    tn_dtype dt = tn_dtype_of(got);
    tn_dtype want_dt = strcmp(want->dtype, "f64") == 0   ? TN_F64
                       : strcmp(want->dtype, "f32") == 0 ? TN_F32
                       : strcmp(want->dtype, "bf16") == 0 ? TN_BF16
                       : strcmp(want->dtype, "i64") == 0 ? TN_I64
                                                         : TN_BOOL;
    /* float32: a few ulp of max(1, |value|). PyTorch's own float32 layer_norm is up to
     * 4 ulp from the exact value (float32 statistics and normalisation), tenet's within 1 */
    double tol = want_dt == TN_F32    ? GOLDEN_TOL_F32
                 : want_dt == TN_BF16 ? (strcmp(want->kind, "grad") ? GOLDEN_TOL_BF16
                                                                     : GOLDEN_TOL_BF16_GRAD)
                                      : GOLDEN_TOL;
    if (dt != want_dt)
        fail_msg("%s: dtype %s, want %s", what, tn_dtype_name(dt), tn_dtype_name(want_dt));
    double *v = malloc((size_t)(want->n ? want->n : 1) * sizeof *v);
    assert_non_null(v);
    assert_int_equal(tn_copy_to_f64(got, v, want->n), TN_OK);
    for (int64_t i = 0; i < want->n; i++) {
        double w = want->v[i], g = v[i];
        bool ok = (isnan(w) && isnan(g)) || (isinf(w) && g == w) ||
                  fabs(g - w) <= tol * fmax(1.0, fabs(w));
        if (!ok) {
            free(v);
            fail_msg("%s: element %lld is %.17g, PyTorch %.17g", what, (long long)i, g, w);
        }
    }
    free(v);
}

/* ---- the ops ----------------------------------------------------------------------- */

typedef tn_tensor *(*golden_fn)(tn_tensor **x, int n, const double *p, int np);

static int64_t shape_p[MAX_PARAMS];
static const int64_t *pshape(const double *p, int np) {
    for (int i = 0; i < np; i++)
        shape_p[i] = (int64_t)p[i];
    return shape_p;
}

#define BIN(name, call)                                                                            \
    static tn_tensor *g_##name(tn_tensor **x, int n, const double *p, int np) { return call; }
BIN(add, tn_add(x[0], x[1]))
BIN(sub, tn_sub(x[0], x[1]))
BIN(mul, tn_mul(x[0], x[1]))
BIN(div, tn_div(x[0], x[1]))
BIN(pow, tn_pow(x[0], x[1]))
BIN(maximum, tn_maximum(x[0], x[1]))
BIN(minimum, tn_minimum(x[0], x[1]))
BIN(add_alpha, tn_add_alpha(x[0], x[1], p[0]))
BIN(add_scalar, tn_add_scalar(x[0], p[0]))
BIN(sub_scalar, tn_sub_scalar(x[0], p[0]))
BIN(mul_scalar, tn_mul_scalar(x[0], p[0]))
BIN(div_scalar, tn_div_scalar(x[0], p[0]))
BIN(pow_scalar, tn_pow_scalar(x[0], p[0]))
BIN(rsub_scalar, tn_rsub_scalar(x[0], p[0]))
BIN(eq, tn_eq(x[0], x[1]))
BIN(ne, tn_ne(x[0], x[1]))
BIN(lt, tn_lt(x[0], x[1]))
BIN(le, tn_le(x[0], x[1]))
BIN(gt, tn_gt(x[0], x[1]))
BIN(ge, tn_ge(x[0], x[1]))
BIN(neg, tn_neg(x[0]))
BIN(exp, tn_exp(x[0]))
BIN(log, tn_log(x[0]))
BIN(sqrt, tn_sqrt(x[0]))
BIN(abs, tn_abs(x[0]))
BIN(sigmoid, tn_sigmoid(x[0]))
BIN(tanh, tn_tanh(x[0]))
BIN(relu, tn_relu(x[0]))
BIN(sin, tn_sin(x[0]))
BIN(cos, tn_cos(x[0]))
BIN(clamp, tn_clamp(x[0], p[0], p[1]))
BIN(clamp_min, tn_clamp(x[0], p[0], INFINITY))
BIN(clamp_max, tn_clamp(x[0], -INFINITY, p[0]))
BIN(sum, tn_sum(x[0]))
BIN(mean, tn_mean(x[0]))
BIN(max, tn_max(x[0]))
BIN(min, tn_min(x[0]))
BIN(sum_dim, tn_sum_dim(x[0], (int)p[0], p[1] != 0))
BIN(mean_dim, tn_mean_dim(x[0], (int)p[0], p[1] != 0))
BIN(max_dim, tn_max_dim(x[0], (int)p[0], p[1] != 0))
BIN(argmax, tn_argmax(x[0]))
BIN(argmax_dim, tn_argmax_dim(x[0], (int)p[0], p[1] != 0))
BIN(min_dim, tn_min_dim(x[0], (int)p[0], p[1] != 0))
BIN(argmin, tn_argmin(x[0]))
BIN(vector_norm, tn_vector_norm(x[0], p[0], (int)p[2], (int[]){np > 3 ? (int)p[3] : 0,
                                                          np > 4 ? (int)p[4] : 0},
                                p[1] != 0))
BIN(argmin_dim, tn_argmin_dim(x[0], (int)p[0], p[1] != 0))
BIN(matmul, tn_matmul(x[0], x[1]))
BIN(linear, tn_linear(x[0], x[1], n > 2 ? x[2] : NULL))
BIN(softmax, tn_softmax(x[0], (int)p[0]))
BIN(log_softmax, tn_log_softmax(x[0], (int)p[0]))
BIN(cross_entropy, tn_cross_entropy(x[0], x[1]))
BIN(mse_loss, tn_mse_loss(x[0], x[1]))
BIN(nll_loss, tn_nll_loss(x[0], x[1], p[3] != 0 ? x[2] : NULL, (tn_reduction)p[0], (int64_t)p[1]))
BIN(cross_entropy_ex, tn_cross_entropy_ex(x[0], x[1], p[3] != 0 ? x[2] : NULL, (tn_reduction)p[0],
                                          (int64_t)p[1], p[2]))
BIN(view, tn_view(x[0], np, pshape(p, np)))
BIN(reshape, tn_reshape(x[0], np, pshape(p, np)))
BIN(transpose, tn_transpose(x[0], (int)p[0], (int)p[1]))
BIN(narrow, tn_narrow(x[0], (int)p[0], (int64_t)p[1], (int64_t)p[2]))
BIN(select, tn_select(x[0], (int)p[0], (int64_t)p[1]))
BIN(expand, tn_expand(x[0], np, pshape(p, np)))
BIN(squeeze, tn_squeeze(x[0]))
BIN(squeeze_dim, tn_squeeze_dim(x[0], (int)p[0]))
BIN(unsqueeze, tn_unsqueeze(x[0], (int)p[0]))
BIN(flatten, tn_flatten(x[0], (int)p[0], (int)p[1]))
BIN(contiguous, tn_contiguous(x[0]))
BIN(clone, tn_clone(x[0]))
BIN(cat, tn_cat(n, x, (int)p[0]))
BIN(stack, tn_stack(n, x, (int)p[0]))
BIN(embedding, tn_embedding(x[0], x[1]))
BIN(index_select, tn_index_select(x[0], (int)p[0], x[1]))
BIN(gather, tn_gather(x[0], (int)p[0], x[1]))
BIN(scatter_add, tn_scatter_add(x[0], (int)p[0], x[1], x[2]))
BIN(where, tn_where(x[0], x[1], x[2]))
BIN(masked_fill, tn_masked_fill(x[0], x[1], p[0]))
BIN(tril, tn_tril(x[0], (int64_t)p[0]))
BIN(triu, tn_triu(x[0], (int64_t)p[0]))
BIN(layer_norm, tn_layer_norm(x[0], (int)p[0], tn_shape(x[0]) + tn_ndim(x[0]) - (int)p[0],
                              p[1] != 0 ? x[1] : NULL, p[2] != 0 ? x[1 + (p[1] != 0)] : NULL, p[3]))
/* batch_norm: p = training, has weight, has bias, has running statistics, momentum, eps;
 * x = input[, weight][, bias][, running_mean, running_var] */
static tn_tensor *g_batch_norm(tn_tensor **x, int n, const double *p, int np) {
    (void)n, (void)np;
    int k = 1;
    tn_tensor *w = p[1] != 0 ? x[k++] : NULL, *b = p[2] != 0 ? x[k++] : NULL;
    tn_tensor *rm = p[3] != 0 ? x[k] : NULL, *rv = p[3] != 0 ? x[k + 1] : NULL;
    return tn_batch_norm(x[0], rm, rv, w, b, p[0] != 0, p[4], p[5]);
}
/* group_norm: p = num_groups, has weight, has bias, eps; x = input[, weight][, bias] */
BIN(group_norm, tn_group_norm(x[0], (int64_t)p[0], p[1] != 0 ? x[1] : NULL,
                              p[2] != 0 ? x[1 + (p[1] != 0)] : NULL, p[3]))
BIN(gelu, tn_gelu(x[0], p[0] != 0))
BIN(silu, tn_silu(x[0]))
BIN(logsumexp, tn_logsumexp(x[0], (int)p[0], p[1] != 0))
BIN(var_dim, tn_var_dim(x[0], (int)p[0], p[1], p[2] != 0))
BIN(std_dim, tn_std_dim(x[0], (int)p[0], p[1], p[2] != 0))

/* conv: p = stride (conv2d: 10 sh + sw when at least 10), pad h, pad w (conv1d: padding; the
 * _mode ops: the tn_conv_padding), dilation, groups, has bias (tests/ops/rows_conv.c) */
static void conv_stride(const double *p, int64_t st[2]) {
    int64_t s = (int64_t)p[0];
    st[0] = s >= 10 ? s / 10 : s;
    st[1] = s >= 10 ? s % 10 : s;
}
static tn_tensor *g_conv2d(tn_tensor **x, int n, const double *p, int np) {
    int64_t st[2], pad[2] = {(int64_t)p[1], (int64_t)p[2]}, dil[2] = {(int64_t)p[3], (int64_t)p[3]};
    (void)np;
    conv_stride(p, st);
    return tn_conv2d(x[0], x[1], n > 2 ? x[2] : NULL, st, pad, dil, (int64_t)p[4]);
}
static tn_tensor *g_conv2d_mode(tn_tensor **x, int n, const double *p, int np) {
    int64_t st[2], dil[2] = {(int64_t)p[3], (int64_t)p[3]};
    (void)np;
    conv_stride(p, st);
    return tn_conv2d_mode(x[0], x[1], n > 2 ? x[2] : NULL, st, (tn_conv_padding)p[1], dil,
                          (int64_t)p[4]);
}
BIN(conv1d, tn_conv1d(x[0], x[1], n > 2 ? x[2] : NULL, (int64_t)p[0], (int64_t)p[1], (int64_t)p[3],
                      (int64_t)p[4]))
BIN(conv1d_mode, tn_conv1d_mode(x[0], x[1], n > 2 ? x[2] : NULL, (int64_t)p[0],
                                (tn_conv_padding)p[1], (int64_t)p[3], (int64_t)p[4]))
/* conv_transpose: p = stride, padding, output_padding, dilation (conv_transpose2d: 10 h + w),
 * groups, has bias (tests/ops/rows_conv.c) */
static tn_tensor *g_conv_transpose2d(tn_tensor **x, int n, const double *p, int np) {
    int64_t v[4][2];
    (void)np;
    for (int i = 0; i < 4; i++)
        v[i][0] = (int64_t)p[i] / 10, v[i][1] = (int64_t)p[i] % 10;
    return tn_conv_transpose2d(x[0], x[1], n > 2 ? x[2] : NULL, v[0], v[1], v[2], (int64_t)p[4],
                               v[3]);
}
BIN(conv_transpose1d,
    tn_conv_transpose1d(x[0], x[1], n > 2 ? x[2] : NULL, (int64_t)p[0], (int64_t)p[1],
                        (int64_t)p[2], (int64_t)p[4], (int64_t)p[3]))

/* pooling: p as tests/ops/rows_pool.c (a pair written 10 h + w when at least 10; stride 0:
 * the kernel) */
static void pool_pair(double v, int64_t out[2]) {
    int64_t i = (int64_t)v;
    out[0] = i >= 10 ? i / 10 : i;
    out[1] = i >= 10 ? i % 10 : i;
}
static tn_tensor *max_pool(tn_tensor *x, const double *p, tn_tensor **idx) {
    int64_t k[2], s[2], pad[2], d[2];
    pool_pair(p[0], k), pool_pair(p[1], s), pool_pair(p[2], pad), pool_pair(p[3], d);
    if (!idx) return tn_max_pool2d(x, k, p[1] ? s : NULL, pad, d, p[4] != 0);
    return tn_max_pool2d_with_indices(x, k, p[1] ? s : NULL, pad, d, p[4] != 0, idx);
}
/* The indices of a _with_indices call, its values released. */
static tn_tensor *indices_of(tn_tensor *y, tn_tensor *idx) {
    tn_release(y);
    return idx;
}
static tn_tensor *g_avg_pool2d(tn_tensor **x, int n, const double *p, int np) {
    int64_t k[2], s[2], pad[2];
    (void)n, (void)np;
    pool_pair(p[0], k), pool_pair(p[1], s), pool_pair(p[2], pad);
    return tn_avg_pool2d(x[0], k, p[1] ? s : NULL, pad, p[3] != 0, p[4] != 0, (int64_t)p[5]);
}
BIN(max_pool2d, max_pool(x[0], p, NULL))
static tn_tensor *g_max_pool2d_indices(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *idx = NULL, *y = max_pool(x[0], p, &idx);
    (void)n, (void)np;
    return indices_of(y, idx);
}
BIN(adaptive_avg_pool2d, tn_adaptive_avg_pool2d(x[0], (int64_t[]){(int64_t)p[0], (int64_t)p[1]}))
BIN(adaptive_max_pool2d, tn_adaptive_max_pool2d(x[0], (int64_t[]){(int64_t)p[0], (int64_t)p[1]}))
static tn_tensor *g_adaptive_max_pool2d_indices(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *idx = NULL;
    tn_tensor *y =
        tn_adaptive_max_pool2d_with_indices(x[0], (int64_t[]){(int64_t)p[0], (int64_t)p[1]}, &idx);
    (void)n, (void)np;
    return indices_of(y, idx);
}

BIN(sdpa, tn_scaled_dot_product_attention(x[0], x[1], x[2], n > 3 ? x[3] : NULL, p[1], p[0] != 0))

/* max/min along a dim: the indices */
static tn_tensor *g_max_dim_indices(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *idx = NULL, *y = tn_max_dim_with_indices(x[0], (int)p[0], p[1] != 0, &idx);
    (void)n, (void)np;
    return y ? idx : NULL;
}
static tn_tensor *g_min_dim_indices(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *idx = NULL, *y = tn_min_dim_with_indices(x[0], (int)p[0], p[1] != 0, &idx);
    (void)n, (void)np;
    return y ? idx : NULL;
}

/* The ops returning several views: one piece (the others stay in the case's scope). */
#define PIECES 16
static tn_tensor *piece_of(tn_status st, tn_tensor **out, int count, double k) {
    return st == TN_OK && k >= 0 && k < count ? out[(int)k] : NULL;
}
static tn_tensor *g_split(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *out[PIECES];
    int count = 0;
    (void)n, (void)np;
    tn_status st = tn_split(x[0], (int64_t)p[0], (int)p[1], out, PIECES, &count);
    return piece_of(st, out, count, p[2]);
}
static tn_tensor *g_split_with_sizes(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *out[PIECES];
    int64_t sizes[PIECES];
    int count = (int)p[2];
    (void)n;
    for (int i = 0; i < count && 3 + i < np; i++)
        sizes[i] = (int64_t)p[3 + i];
    tn_status st = tn_split_with_sizes(x[0], count, sizes, (int)p[0], out);
    return piece_of(st, out, count, p[1]);
}
static tn_tensor *g_chunk(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *out[PIECES];
    int count = 0;
    (void)n, (void)np;
    tn_status st = tn_chunk(x[0], (int)p[0], (int)p[1], out, &count);
    return piece_of(st, out, count, p[2]);
}
static tn_tensor *g_unbind(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *out[PIECES];
    int count = 0;
    (void)n, (void)np;
    tn_status st = tn_unbind(x[0], (int)p[0], out, PIECES, &count);
    return piece_of(st, out, count, p[1]);
}

static tn_tensor *g_permute(tn_tensor **x, int n, const double *p, int np) {
    int dims[TN_MAX_DIMS];
    for (int i = 0; i < np && i < TN_MAX_DIMS; i++)
        dims[i] = (int)p[i];
    return tn_permute(x[0], np, dims);
}

/* cross_entropy(linear(tanh(linear(x, w1, b1)), w2, b2), targets) */
static tn_tensor *g_mlp(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *h = tn_tanh(tn_linear(x[0], x[1], x[2]));
    return tn_cross_entropy(tn_linear(h, x[3], x[4]), x[5]);
}

/* In-place op `name` applied to y with the extra inputs / params. */
static tn_status apply_inplace(const char *name, tn_tensor *y, tn_tensor **x, int n,
                               const double *p) {
    if (!strcmp(name, "add_")) return tn_add_(y, x[1]);
    if (!strcmp(name, "sub_")) return tn_sub_(y, x[1]);
    if (!strcmp(name, "mul_")) return tn_mul_(y, x[1]);
    if (!strcmp(name, "div_")) return tn_div_(y, x[1]);
    if (!strcmp(name, "add_scalar_")) return tn_add_scalar_(y, p[0]);
    if (!strcmp(name, "mul_scalar_")) return tn_mul_scalar_(y, p[0]);
    if (!strcmp(name, "zero_")) return tn_zero_(y);
    if (!strcmp(name, "fill_")) return tn_fill_(y, p[0]);
    if (!strcmp(name, "copy_")) return tn_copy_(y, x[1]);
    if (!strcmp(name, "clamp_")) return tn_clamp_(y, p[0], p[1]);
    if (!strcmp(name, "relu_")) return tn_relu_(y);
    if (!strcmp(name, "sigmoid_")) return tn_sigmoid_(y);
    if (!strcmp(name, "exp_")) return tn_exp_(y);
    if (!strcmp(name, "neg_")) return tn_neg_(y);
    if (!strcmp(name, "masked_fill_")) return tn_masked_fill_(y, x[1], p[0]);
    fail_msg("unknown in-place op %s", name);
    return TN_ERR_INTERNAL;
}

static const char *cur_op; /* the in-place composites read their op name here */

/* y = x0 * 1 (a non-leaf); y.<op>(...); result y. */
static tn_tensor *g_ip(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *y = tn_mul_scalar(x[0], 1);
    if (!y || apply_inplace(cur_op + 3, y, x, n, p) < 0) return NULL;
    return y;
}

/* y = x0 * 1; the op writes through a view of y (CopySlices); result y. */
static tn_tensor *g_ipv(tn_tensor **x, int n, const double *p, int np) {
    tn_tensor *y = tn_mul_scalar(x[0], 1);
    if (!y) return NULL;
    const char *name = cur_op + 4;
    if (!strcmp(name, "select_mul_scalar_")) {
        tn_tensor *v = tn_select(y, 1, 2);
        return v && tn_mul_scalar_(v, p[0]) == TN_OK ? y : NULL;
    }
    tn_tensor *v = tn_narrow(y, 0, 1, 2);
    if (!v || apply_inplace(name, v, x, n, p) < 0) return NULL;
    return y;
}

static const struct {
    const char *name;
    golden_fn f;
} OPS[] = {
#define E(n)                                                                                       \
    { #n, g_##n }
    E(add),
    E(sub),
    E(mul),
    E(div),
    E(pow),
    E(maximum),
    E(minimum),
    E(add_alpha),
    E(add_scalar),
    E(sub_scalar),
    E(mul_scalar),
    E(div_scalar),
    E(pow_scalar),
    E(rsub_scalar),
    E(eq),
    E(ne),
    E(lt),
    E(le),
    E(gt),
    E(ge),
    E(neg),
    E(exp),
    E(log),
    E(sqrt),
    E(abs),
    E(sigmoid),
    E(tanh),
    E(relu),
    E(sin),
    E(cos),
    E(clamp),
    E(clamp_min),
    E(clamp_max),
    E(sum),
    E(mean),
    E(max),
    E(min),
    E(sum_dim),
    E(mean_dim),
    E(max_dim),
    E(argmax),
    E(argmax_dim),
    E(matmul),
    E(linear),
    E(softmax),
    E(log_softmax),
    E(cross_entropy),
    E(mse_loss),
    E(view),
    E(reshape),
    E(transpose),
    E(permute),
    E(narrow),
    E(select),
    E(expand),
    E(squeeze),
    E(squeeze_dim),
    E(unsqueeze),
    E(flatten),
    E(contiguous),
    E(clone),
    E(cat),
    E(stack),
    E(mlp),
    E(embedding),
    E(index_select),
    E(gather),
    E(scatter_add),
    E(where),
    E(masked_fill),
    E(tril),
    E(triu),
    E(layer_norm),
    E(batch_norm),
    E(group_norm),
    E(gelu),
    E(silu),
    E(logsumexp),
    E(var_dim),
    E(std_dim),
    E(sdpa),
    E(conv2d),
    E(conv2d_mode),
    E(conv1d),
    E(conv1d_mode),
    E(conv_transpose2d),
    E(conv_transpose1d),
    E(max_pool2d),
    E(max_pool2d_indices),
    E(avg_pool2d),
    E(adaptive_avg_pool2d),
    E(adaptive_max_pool2d),
    E(adaptive_max_pool2d_indices),
    E(nll_loss),
    E(cross_entropy_ex),
    E(min_dim),
    E(max_dim_indices),
    E(min_dim_indices),
    E(argmin),
    E(vector_norm),
    E(argmin_dim),
    E(split),
    E(split_with_sizes),
    E(chunk),
    E(unbind),
#undef E
};

static golden_fn lookup(const char *op) {
    if (!strncmp(op, "ip_", 3)) return g_ip;
    if (!strncmp(op, "ipv_", 4)) return g_ipv;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (!strcmp(OPS[i].name, op)) return OPS[i].f;
    return NULL;
}

static gcase the_case;

/* ---- one case ---------------------------------------------------------------- */

static void run_golden(void **state) {
    const char *path = *state;
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    gcase *c = &the_case; /* large: not on the stack */
    free_case(c);         /* values left by a case that failed midway */
    const char *perr = parse_case(f, c);
    fclose(f);
    if (perr) {
        free_case(c);
        fail_msg("%s: %s", path, perr);
    }
    golden_fn fn = lookup(c->op);
    if (!fn) fail_msg("%s: unknown op %s", path, c->op);

    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x[MAX_TENSORS] = {0};
    int n = 0;
    for (int i = 0; i < c->nt; i++) {
        bool in = !strcmp(c->t[i].kind, "input"), cst = !strcmp(c->t[i].kind, "const");
        if (in || cst) x[n++] = make_tensor(&c->t[i], in);
    }
    tn_tensor *x_in[MAX_TENSORS]; /* snapshot: ops must not swap handles */
    memcpy(x_in, x, sizeof x);
    cur_op = c->op;
    tn_tensor *out = fn(x, n, c->p, c->np);
    if (!out) fail_msg("%s failed: %s", c->op, tn_last_error());
    assert_matches("forward", out, find(c, "output", NULL));

    const gtensor *w = find(c, "weight", NULL);
    if (w) {
        tn_tensor *wt = make_tensor(w, false);
        tn_tensor *loss = tn_sum(tn_mul(out, wt));
        if (!loss) fail_msg("sum(out * w) failed: %s", tn_last_error());
        if (tn_backward(loss, NULL, false) != TN_OK)
            fail_msg("backward failed: %s", tn_last_error());
        for (int i = 0, k = 0; i < c->nt; i++) {
            const gtensor *t = &c->t[i];
            if (strcmp(t->kind, "input") && strcmp(t->kind, "const")) continue;
            int idx = k++;
            if (strcmp(t->kind, "input")) continue;
            const gtensor *g = find(c, "grad", t->name);
            assert_non_null(g);
            tn_tensor *got = tn_grad(x_in[idx]);
            char what[64];
            snprintf(what, sizeof what, "grad of %s", t->name);
            if (!got) fail_msg("%s: no .grad (PyTorch has one)", what);
            assert_matches(what, got, g);
        }
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(tn_version(x_in[i]), 0); /* inputs intact */
    tn_scope_end();
    free_case(c);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void) {
    const char *dir = getenv("TENET_GOLDEN_DIR");
    if (!dir || !*dir) dir = "golden";
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_golden: cannot open %s (set TENET_GOLDEN_DIR)\n", dir);
        return 1;
    }
    size_t cap = 256, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0) continue;
        if (n == cap) {
            char **bigger = realloc(names, (cap *= 2) * sizeof *names);
            if (!bigger) break;
            names = bigger;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!names || n == 0) {
        fprintf(stderr, "test_golden: no golden files in %s\n", dir);
        return 1;
    }
    qsort(names, n, sizeof *names, by_name);
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    char **paths = calloc(n, sizeof *paths);
    if (!tests || !paths) return 1;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        paths[i] = malloc(len);
        if (!paths[i]) return 1;
        snprintf(paths[i], len, "%s/%s", dir, names[i]);
        names[i][strlen(names[i]) - 4] = '\0'; /* test name: the case */
        tests[i].name = names[i];
        tests[i].test_func = run_golden;
        tests[i].setup_func = tt_setup;
        tests[i].teardown_func = tt_teardown;
        tests[i].initial_state = paths[i];
    }
    int failed = _cmocka_run_group_tests("golden", tests, n, NULL, NULL);
    free_case(&the_case);
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        free(paths[i]);
    }
    free(names);
    free(paths);
    free(tests);
    return failed;
}
