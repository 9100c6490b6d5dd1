/* tests/test_gradcheck.c — finite-difference gradient checks (float64).
 *
 * For each differentiable op f and inputs x (broadcasting shapes, and leaves
 * that are contiguous, transposed or narrowed views), the analytic gradient
 * of L(x) = sum(f(x) * w) from tn_autograd_grad must match central
 * differences (L(x + eps) - L(x - eps)) / 2 eps, eps = 1e-6, for every
 * element of every input. A second pass checks second derivatives
 * (create_graph) the same way: L2(x) = sum_i sum(dL/dx_i * v_i).
 */
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EPS 1e-6
#define TOL 1e-5
#define MAX_IN 6
#define MAX_EL 256

typedef tn_tensor *(*gc_fn)(tn_tensor *const *x, int n, const double *p);

/* ---- inputs ----------------------------------------------------------------- */

typedef enum { V_ANY, V_POS, V_AWAY, V_SMALL, V_TARGET } vkind;

/* Same smooth, RNG-free formulas as scripts/gen_golden.py. */
static double value(int64_t i, int k, vkind kind) {
    double s = sin(1.3 * (double)i + 0.7 * k + 0.1);
    switch (kind) {
    case V_POS:
        return 1.25 + s;
    case V_AWAY:
        return (0.5 + fabs(s)) * ((i + k) % 3 ? 1 : -1);
    case V_SMALL:
        return 1.5 * s;
    default:
        return 2.0 * s;
    }
}

typedef struct {
    int ndim;
    int64_t shape[4];
    vkind kind;
    char layout; /* 'c' contiguous, 't' transposed view, 'n' narrowed view */
    bool rg;     /* differentiate w.r.t. it */
} gc_in;

static int64_t numel_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* Logical element j of t: a pointer into its storage (strided). */
static double *elem(tn_tensor *t, int64_t j) {
    int nd = tn_ndim(t);
    const int64_t *sh = tn_shape(t), *st = tn_stride(t);
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (j % sh[d]) * st[d];
        j /= sh[d];
    }
    return (double *)tn_data_ptr(t) + off;
}

/* A leaf with the spec's values, laid out as asked. Not in any scope. */
static tn_tensor *make_input(const gc_in *in, int k) {
    int64_t n = numel_of(in->ndim, in->shape);
    assert_true(n <= MAX_EL);
    tn_tensor *leaf;
    if (in->kind == V_TARGET) { /* int64 class indices for cross_entropy */
        int64_t iv[MAX_EL];
        for (int64_t i = 0; i < n; i++)
            iv[i] = (i * 3 + k) % 5;
        leaf = tn_tensor_from(iv, TN_I64, in->ndim, in->shape, false);
        assert_non_null(leaf);
        return leaf;
    }
    if (in->layout == 'c') {
        double v[MAX_EL];
        for (int64_t i = 0; i < n; i++)
            v[i] = value(i, k, in->kind);
        leaf = tn_tensor_from(v, TN_F64, in->ndim, in->shape, false);
    } else {
        int nd = in->ndim;
        int64_t bshape[4];
        memcpy(bshape, in->shape, sizeof bshape);
        tn_tensor *base, *view;
        if (in->layout == 't') {
            assert_true(nd >= 2);
            bshape[nd - 1] = in->shape[nd - 2];
            bshape[nd - 2] = in->shape[nd - 1];
            base = tn_zeros(nd, bshape, TN_F64);
            view = tn_transpose(base, -1, -2);
        } else {
            assert_true(nd >= 1);
            bshape[nd - 1] += 3;
            base = tn_zeros(nd, bshape, TN_F64);
            view = tn_narrow(base, -1, 2, in->shape[nd - 1]);
        }
        assert_non_null(view);
        leaf = tn_detach(view);
        tn_release(view);
        tn_release(base);
        for (int64_t i = 0; i < n; i++)
            *elem(leaf, i) = value(i, k, in->kind);
    }
    assert_non_null(leaf);
    if (in->rg) assert_int_equal(tn_requires_grad_(leaf, true), TN_OK);
    return leaf;
}

/* w for sum(out * w): fixed, distinct, nonzero. */
static tn_tensor *weights_like(const tn_tensor *t, int salt) {
    int64_t n = tn_numel(t);
    double v[MAX_EL * 4];
    assert_true(n <= MAX_EL * 4);
    for (int64_t i = 0; i < n; i++)
        v[i] = cos(0.9 * (double)i + 0.3 + salt) + 0.25;
    tn_tensor *w = tn_tensor_from(v, TN_F64, tn_ndim(t), tn_shape(t), false);
    assert_non_null(w);
    return w;
}

/* ---- the checker --------------------------------------------------------------- */

typedef struct {
    const char *label;
    gc_fn f;
    const double *p;
    int n;
    tn_tensor *x[MAX_IN];
    bool rg[MAX_IN];
    int order; /* 1: L = sum(f*w); 2: L2 = sum_i sum(dL/dx_i * v_i) */
} gc_ctx;

/* L (order 1) or L2 (order 2) as a 0-dim tensor with its graph; NULL on failure. */
static tn_tensor *loss(gc_ctx *c) {
    tn_tensor *out = c->f(c->x, c->n, c->p);
    if (!out) return NULL;
    tn_tensor *l = tn_sum(tn_mul(out, weights_like(out, 0)));
    if (!l || c->order == 1) return l;
    tn_tensor *ins[MAX_IN], *g[MAX_IN] = {0};
    int m = 0;
    for (int i = 0; i < c->n; i++)
        if (c->rg[i]) ins[m++] = c->x[i];
    if (tn_autograd_grad(1, &l, NULL, m, ins, g, false, true) != TN_OK) return NULL;
    tn_tensor *acc = tn_scalar(0, TN_F64);
    for (int i = 0; i < m; i++)
        if (g[i]) acc = tn_add(acc, tn_sum(tn_mul(g[i], weights_like(g[i], i + 1))));
    return acc;
}

/* Failures are counted and printed, so that one run lists every broken op;
 * each test asserts at its end that there were none. */
static int failures, checked;

#define REPORT(...)                                                                                \
    do {                                                                                           \
        fprintf(stderr, "gradcheck FAILED: " __VA_ARGS__);                                         \
        fprintf(stderr, "\n");                                                                     \
        failures++;                                                                                \
    } while (0)

static bool eval(gc_ctx *c, double *v) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *l = loss(c);
    bool ok = l && tn_item(l, v) == TN_OK;
    tn_scope_end();
    return ok;
}

/* The analytic gradient of input i (zeros when there is no path) into ana. */
static bool analytic(gc_ctx *c, tn_tensor *in, tn_tensor *g, int i, double *ana) {
    int64_t n = tn_numel(in);
    memset(ana, 0, (size_t)n * sizeof *ana);
    if (tn_grad(in)) {
        REPORT("%s: autograd_grad accumulated into .grad", c->label);
        return false;
    }
    if (!g) return true;
    bool same = tn_ndim(g) == tn_ndim(in);
    for (int d = 0; same && d < tn_ndim(g); d++)
        same = tn_shape(g)[d] == tn_shape(in)[d];
    if (!same) {
        REPORT("%s: gradient of x%d has the wrong shape", c->label, i);
        return false;
    }
    if (tn_dtype_of(g) != TN_F64) {
        REPORT("%s: gradient of x%d is %s, not float64", c->label, i,
               tn_dtype_name(tn_dtype_of(g)));
        return false;
    }
    return tn_copy_to_f64(g, ana, n) == TN_OK;
}

static void check(gc_ctx *c) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *l = loss(c);
    tn_tensor *ins[MAX_IN], *g[MAX_IN] = {0};
    int m = 0;
    for (int i = 0; i < c->n; i++)
        if (c->rg[i]) ins[m++] = c->x[i];
    if (!l) {
        REPORT("%s: forward failed (order %d): %s", c->label, c->order, tn_last_error());
        m = 0;
    } else if (!tn_requires_grad(l)) {
        /* order 2 of an op linear in x: the first derivative has no graph (as in
         * PyTorch); the finite differences must then be zero */
        if (c->order == 1) REPORT("%s: loss does not require grad", c->label);
    } else if (tn_autograd_grad(1, &l, NULL, m, ins, g, false, false) != TN_OK) {
        REPORT("%s: backward failed (order %d): %s", c->label, c->order, tn_last_error());
        m = 0;
    }
    for (int i = 0; i < m; i++) {
        double ana[MAX_EL];
        if (!analytic(c, ins[i], g[i], i, ana)) continue;
        for (int64_t j = 0, n = tn_numel(ins[i]); j < n; j++) {
            double *p = elem(ins[i], j), old = *p, fp = NAN, fm = NAN;
            *p = old + EPS;
            bool ok = eval(c, &fp);
            *p = old - EPS;
            ok = ok && eval(c, &fm);
            *p = old;
            double num = (fp - fm) / (2 * EPS);
            checked++;
            if (!ok) {
                REPORT("%s: forward failed while differencing: %s", c->label, tn_last_error());
                break;
            }
            if (!(fabs(num - ana[j]) <= TOL * (1 + fabs(num)))) {
                REPORT("%s: d/dx%d[%lld] (order %d): analytic %.10g, numeric %.10g", c->label, i,
                       (long long)j, c->order, ana[j], num);
                break; /* one line per input */
            }
        }
    }
    tn_scope_end();
}

/* Runs the checks for f on inputs built from specs (order 1, and 2 if asked). */
static void gradcheck(const char *label, gc_fn f, const double *p, int n, const gc_in *in,
                      bool second_order) {
    gc_ctx c = {label, f, p, n, {0}, {0}, 1};
    for (int i = 0; i < n; i++) {
        c.x[i] = make_input(&in[i], i);
        c.rg[i] = in[i].rg;
    }
    check(&c);
    if (second_order) {
        c.order = 2;
        check(&c);
    }
    for (int i = 0; i < n; i++) {
        assert_int_equal(tn_version(c.x[i]), 0);
        tn_release(c.x[i]);
    }
}

/* ---- helpers to enumerate layouts ------------------------------------------------ */

static gc_in IN(int ndim, const int64_t *shape, vkind kind, char layout) {
    gc_in r = {ndim, {0}, kind, layout, true};
    for (int i = 0; i < ndim; i++)
        r.shape[i] = shape[i];
    return r;
}

static bool layout_ok(const gc_in *in, char layout) {
    if (layout == 't')
        return in->ndim >= 2 && in->shape[in->ndim - 1] > 1 && in->shape[in->ndim - 2] > 1;
    if (layout == 'n') return in->ndim >= 1;
    return true;
}

static const char LAYOUTS[] = "ctn";

/* Every combination of layouts of n inputs (those that make sense). */
static void gradcheck_layouts(const char *name, gc_fn f, const double *p, int n, gc_in *in,
                              bool second_order) {
    int combos = 1;
    for (int i = 0; i < n; i++)
        combos *= 3;
    for (int code = 0; code < combos; code++) {
        gc_in v[MAX_IN];
        char label[160];
        int len = snprintf(label, sizeof label, "%s[", name);
        bool ok = true;
        for (int i = 0, k = code; i < n; i++, k /= 3) {
            v[i] = in[i];
            char l = in[i].kind == V_TARGET ? 'c' : LAYOUTS[k % 3];
            if (in[i].kind == V_TARGET && k % 3) ok = false;
            if (!layout_ok(&in[i], l)) ok = false;
            v[i].layout = l;
            len += snprintf(label + len, sizeof label - (size_t)len, "%c", l);
        }
        if (!ok) continue;
        snprintf(label + len, sizeof label - (size_t)len, "]");
        gradcheck(label, f, p, n, v, second_order && code == 0);
    }
}

/* ---- ops -------------------------------------------------------------------------- */

#define F(name, expr)                                                                              \
    static tn_tensor *f_##name(tn_tensor *const *x, int n, const double *p) {                      \
        (void)n;                                                                                   \
        (void)p;                                                                                   \
        return expr;                                                                               \
    }
F(add, tn_add(x[0], x[1]))
F(sub, tn_sub(x[0], x[1]))
F(mul, tn_mul(x[0], x[1]))
F(div, tn_div(x[0], x[1]))
F(pow, tn_pow(x[0], x[1]))
F(maximum, tn_maximum(x[0], x[1]))
F(minimum, tn_minimum(x[0], x[1]))
F(add_alpha, tn_add_alpha(x[0], x[1], p[0]))
F(add_scalar, tn_add_scalar(x[0], p[0]))
F(sub_scalar, tn_sub_scalar(x[0], p[0]))
F(mul_scalar, tn_mul_scalar(x[0], p[0]))
F(div_scalar, tn_div_scalar(x[0], p[0]))
F(pow_scalar, tn_pow_scalar(x[0], p[0]))
F(rsub_scalar, tn_rsub_scalar(x[0], p[0]))
F(neg, tn_neg(x[0]))
F(exp, tn_exp(x[0]))
F(log, tn_log(x[0]))
F(sqrt, tn_sqrt(x[0]))
F(abs, tn_abs(x[0]))
F(sigmoid, tn_sigmoid(x[0]))
F(tanh, tn_tanh(x[0]))
F(relu, tn_relu(x[0]))
F(sin, tn_sin(x[0]))
F(cos, tn_cos(x[0]))
F(clamp, tn_clamp(x[0], p[0], p[1]))
F(sum, tn_sum(x[0]))
F(mean, tn_mean(x[0]))
F(max, tn_max(x[0]))
F(min, tn_min(x[0]))
F(sum_dim, tn_sum_dim(x[0], (int)p[0], p[1] != 0))
F(mean_dim, tn_mean_dim(x[0], (int)p[0], p[1] != 0))
F(max_dim, tn_max_dim(x[0], (int)p[0], p[1] != 0))
F(matmul, tn_matmul(x[0], x[1]))
F(linear, tn_linear(x[0], x[1], n > 2 ? x[2] : NULL))
F(softmax, tn_softmax(x[0], (int)p[0]))
F(log_softmax, tn_log_softmax(x[0], (int)p[0]))
F(cross_entropy, tn_cross_entropy(x[0], x[1]))
F(mse_loss, tn_mse_loss(x[0], x[1]))
F(transpose, tn_transpose(x[0], (int)p[0], (int)p[1]))
F(narrow, tn_narrow(x[0], (int)p[0], (int64_t)p[1], (int64_t)p[2]))
F(select, tn_select(x[0], (int)p[0], (int64_t)p[1]))
F(squeeze, tn_squeeze(x[0]))
F(squeeze_dim, tn_squeeze_dim(x[0], (int)p[0]))
F(unsqueeze, tn_unsqueeze(x[0], (int)p[0]))
F(flatten, tn_flatten(x[0], (int)p[0], (int)p[1]))
F(contiguous, tn_contiguous(x[0]))
F(clone, tn_clone(x[0]))
F(cat, tn_cat(n, x, (int)p[0]))
F(stack, tn_stack(n, x, (int)p[0]))
/* a composite chain: several backward formulas feeding each other */
F(chain, tn_mean(tn_mul(tn_sigmoid(tn_matmul(x[0], x[1])), tn_tanh(tn_add(x[2], x[0])))))

static int64_t pshape_buf[8];
static const int64_t *pshape(const double *p, int n) {
    for (int i = 0; i < n; i++)
        pshape_buf[i] = (int64_t)p[i + 1];
    return pshape_buf;
}
/* p[0] = ndim, p[1..] = shape */
F(view, tn_view(x[0], (int)p[0], pshape(p, (int)p[0])))
F(reshape, tn_reshape(x[0], (int)p[0], pshape(p, (int)p[0])))
F(expand, tn_expand(x[0], (int)p[0], pshape(p, (int)p[0])))
static tn_tensor *f_permute(tn_tensor *const *x, int n, const double *p) {
    int dims[8];
    for (int i = 0; i < (int)p[0]; i++)
        dims[i] = (int)p[i + 1];
    return tn_permute(x[0], (int)p[0], dims);
}

/* In-place ops on y = x0 * 1, directly (p[0] selects the op) or through a
 * narrow view of y (CopySlices) when p[1] != 0. p[2], p[3]: op scalars. */
static tn_tensor *f_inplace(tn_tensor *const *x, int n, const double *p) {
    tn_tensor *y = tn_mul_scalar(x[0], 1);
    tn_tensor *t = y && p[1] != 0 ? tn_narrow(y, 0, 1, 2) : y;
    if (!t) return NULL;
    tn_status st;
    switch ((int)p[0]) {
    case 0:
        st = tn_add_(t, x[1]);
        break;
    case 1:
        st = tn_sub_(t, x[1]);
        break;
    case 2:
        st = tn_mul_(t, x[1]);
        break;
    case 3:
        st = tn_div_(t, x[1]);
        break;
    case 4:
        st = tn_add_scalar_(t, p[2]);
        break;
    case 5:
        st = tn_mul_scalar_(t, p[2]);
        break;
    case 6:
        st = tn_zero_(t);
        break;
    case 7:
        st = tn_fill_(t, p[2]);
        break;
    case 8:
        st = tn_copy_(t, x[1]);
        break;
    case 9:
        st = tn_clamp_(t, p[2], p[3]);
        break;
    case 10:
        st = tn_relu_(t);
        break;
    case 11:
        st = tn_sigmoid_(t);
        break;
    case 12:
        st = tn_exp_(t);
        break;
    default:
        st = tn_neg_(t);
        break;
    }
    return st == TN_OK ? y : NULL;
}

/* layer_norm over the last p[0] dims; p[1], p[2]: whether x[1] is the
 * weight and the next input the bias. */
static tn_tensor *f_layer_norm(tn_tensor *const *x, int n, const double *p) {
    int nn = (int)p[0];
    const tn_tensor *w = p[1] != 0 ? x[1] : NULL, *b = p[2] != 0 ? x[1 + (p[1] != 0)] : NULL;
    return tn_layer_norm(x[0], nn, tn_shape(x[0]) + tn_ndim(x[0]) - nn, w, b, 1e-5);
}
/* batch_norm in training (no running statistics) and group_norm (p[3] groups, 0: batch norm);
 * p[1], p[2]: whether x[1] is the weight and the next input the bias */
static tn_tensor *f_channel_norm(tn_tensor *const *x, int n, const double *p) {
    const tn_tensor *w = p[1] != 0 ? x[1] : NULL, *b = p[2] != 0 ? x[1 + (p[1] != 0)] : NULL;
    (void)n;
    if (p[3] != 0) return tn_group_norm(x[0], (int64_t)p[3], w, b, 1e-5);
    return tn_batch_norm(x[0], NULL, NULL, w, b, true, 0.1, 1e-5);
}
F(gelu, tn_gelu(x[0], p[0] != 0))
F(silu, tn_silu(x[0]))
F(logsumexp, tn_logsumexp(x[0], (int)p[0], p[1] != 0))
F(var_dim, tn_var_dim(x[0], (int)p[0], p[1], p[2] != 0))
F(std_dim, tn_std_dim(x[0], (int)p[0], p[1], p[2] != 0))
/* a fixed mask: the generator is reseeded before every evaluation */
static tn_tensor *f_dropout(tn_tensor *const *x, int n, const double *p) {
    tn_manual_seed(1234);
    return tn_dropout(x[0], p[0], true);
}

/* ---- tests ----------------------------------------------------------------------- */

static const int64_t S23[] = {2, 3}, S3[] = {3}, S413[] = {4, 1, 3}, S21[] = {2, 1}, S13[] = {1, 3},
                     S34[] = {3, 4}, S234[] = {2, 3, 4}, S4[] = {4}, S221[] = {2, 2, 1};

static void binary_ops(void **state) {
    static const struct {
        const char *name;
        gc_fn f;
        vkind ka, kb;
    } ops[] = {
        {"add", f_add, V_ANY, V_ANY},           {"sub", f_sub, V_ANY, V_ANY},
        {"mul", f_mul, V_ANY, V_ANY},           {"div", f_div, V_ANY, V_AWAY},
        {"pow", f_pow, V_POS, V_SMALL},         {"maximum", f_maximum, V_ANY, V_SMALL},
        {"minimum", f_minimum, V_ANY, V_SMALL}, {"add_alpha", f_add_alpha, V_ANY, V_ANY},
    };
    static const struct {
        int na;
        const int64_t *sa;
        int nb;
        const int64_t *sb;
    } shapes[] = {
        {2, S23, 2, S23},  {2, S23, 1, S3},   {1, S3, 2, S23},
        {3, S413, 2, S21}, {2, S23, 0, NULL}, {2, S13, 3, S221},
    };
    const double alpha[] = {-2.5};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            gc_in in[2] = {IN(shapes[s].na, shapes[s].sa, ops[o].ka, 'c'),
                           IN(shapes[s].nb, shapes[s].sb, ops[o].kb, 'c')};
            char name[64];
            snprintf(name, sizeof name, "%s/shape%zu", ops[o].name, s);
            gradcheck_layouts(name, ops[o].f, alpha, 2, in, o != 0 && o != 1 && s < 2);
        }
}

static void scalar_ops(void **state) {
    static const struct {
        const char *name;
        gc_fn f;
        double s;
        vkind k;
    } ops[] = {
        {"add_scalar", f_add_scalar, 1.75, V_ANY},     {"sub_scalar", f_sub_scalar, -0.5, V_ANY},
        {"mul_scalar", f_mul_scalar, -3.25, V_ANY},    {"div_scalar", f_div_scalar, 0.4, V_ANY},
        {"rsub_scalar", f_rsub_scalar, 2.5, V_ANY},    {"pow_scalar2", f_pow_scalar, 2, V_ANY},
        {"pow_scalar3", f_pow_scalar, 3, V_ANY},       {"pow_scalar0.5", f_pow_scalar, 0.5, V_POS},
        {"pow_scalar-1.5", f_pow_scalar, -1.5, V_POS},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        gc_in in[1] = {IN(2, S34, ops[o].k, 'c')};
        gradcheck_layouts(ops[o].name, ops[o].f, &ops[o].s, 1, in, o >= 5);
    }
}

static void unary_ops(void **state) {
    static const struct {
        const char *name;
        gc_fn f;
        vkind k;
        double p[2];
    } ops[] = {
        {"neg", f_neg, V_ANY, {0}},
        {"exp", f_exp, V_SMALL, {0}},
        {"log", f_log, V_POS, {0}},
        {"sqrt", f_sqrt, V_POS, {0}},
        {"abs", f_abs, V_ANY, {0}},
        {"sigmoid", f_sigmoid, V_ANY, {0}},
        {"tanh", f_tanh, V_ANY, {0}},
        {"relu", f_relu, V_ANY, {0}},
        {"sin", f_sin, V_ANY, {0}},
        {"cos", f_cos, V_ANY, {0}},
        {"clamp", f_clamp, V_ANY, {-0.5, 1.0}},
        {"clamp_max", f_clamp, V_ANY, {-INFINITY, 0.3}},
        {"clamp_min", f_clamp, V_ANY, {0.3, INFINITY}},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        gc_in in[1] = {IN(2, S34, ops[o].k, 'c')};
        bool smooth = strcmp(ops[o].name, "abs") && strcmp(ops[o].name, "relu") &&
                      strncmp(ops[o].name, "clamp", 5);
        gradcheck_layouts(ops[o].name, ops[o].f, ops[o].p, 1, in, smooth);
    }
}

static void reductions(void **state) {
    gc_in in3[1] = {IN(3, S234, V_ANY, 'c')}, in2[1] = {IN(2, S34, V_ANY, 'c')};
    const double none[1] = {0};
    gradcheck_layouts("sum", f_sum, none, 1, in3, false);
    gradcheck_layouts("mean", f_mean, none, 1, in3, false);
    gradcheck_layouts("max", f_max, none, 1, in3, false);
    gradcheck_layouts("min", f_min, none, 1, in2, false);
    static const struct {
        const char *name;
        gc_fn f;
    } ops[] = {{"sum_dim", f_sum_dim}, {"mean_dim", f_mean_dim}, {"max_dim", f_max_dim}};
    for (size_t o = 0; o < 3; o++)
        for (int d = -1; d < 3; d++)
            for (int keep = 0; keep < 2; keep++) {
                char name[64];
                const double p[2] = {d, keep};
                snprintf(name, sizeof name, "%s(%d,%d)", ops[o].name, d, keep);
                gradcheck_layouts(name, ops[o].f, p, 1, in3, false);
                if (d < 2) gradcheck_layouts(name, ops[o].f, p, 1, in2, false);
            }
}

static void matmul_and_linear(void **state) {
    static const int64_t s243[] = {2, 4, 3}, s2_1_34[] = {2, 1, 3, 4}, s542[] = {5, 4, 2},
                         s245[] = {2, 4, 5}, s42[] = {4, 2}, s134[] = {1, 3, 4}, s342[] = {3, 4, 2};
    static const struct {
        int na;
        const int64_t *sa;
        int nb;
        const int64_t *sb;
    } mm[] = {
        {1, S4, 1, S4},     {2, S34, 1, S4},       {1, S4, 2, s42},    {2, S34, 2, s42},
        {3, S234, 3, s245}, {3, S234, 2, s42},     {2, S34, 3, s245},  {3, S234, 1, S4},
        {1, S4, 3, s245},   {4, s2_1_34, 3, s542}, {3, s134, 3, s342},
    };
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
        gc_in in[2] = {IN(mm[i].na, mm[i].sa, V_ANY, 'c'), IN(mm[i].nb, mm[i].sb, V_ANY, 'c')};
        char name[32];
        snprintf(name, sizeof name, "matmul%zu", i);
        gradcheck_layouts(name, f_matmul, NULL, 2, in, i == 3 || i == 4);
    }
    static const int64_t x43[] = {4, 3}, w23[] = {2, 3}, b2[] = {2}, w53[] = {5, 3}, b5[] = {5};
    gc_in lin[3] = {IN(2, x43, V_ANY, 'c'), IN(2, w23, V_ANY, 'c'), IN(1, b2, V_ANY, 'c')};
    gradcheck_layouts("linear", f_linear, NULL, 3, lin, true);
    gradcheck_layouts("linear_nobias", f_linear, NULL, 2, lin, false);
    gc_in lin3[3] = {IN(3, s243, V_ANY, 'c'), IN(2, w53, V_ANY, 'c'), IN(1, b5, V_ANY, 'c')};
    gradcheck_layouts("linear_3d", f_linear, NULL, 3, lin3, false);
    gc_in lin1[3] = {IN(1, S3, V_ANY, 'c'), IN(2, w23, V_ANY, 'c'), IN(1, b2, V_ANY, 'c')};
    gradcheck_layouts("linear_1d", f_linear, NULL, 3, lin1, false);
}

static void nn_ops(void **state) {
    gc_in in2[1] = {IN(2, S34, V_SMALL, 'c')}, in3[1] = {IN(3, S234, V_SMALL, 'c')};
    for (int d = -1; d < 2; d++) {
        const double p[1] = {d};
        char name[32];
        snprintf(name, sizeof name, "softmax(%d)", d);
        gradcheck_layouts(name, f_softmax, p, 1, in2, d == 1);
        snprintf(name, sizeof name, "log_softmax(%d)", d);
        gradcheck_layouts(name, f_log_softmax, p, 1, in2, d == 1);
    }
    const double p1[1] = {1};
    gradcheck_layouts("softmax_3d", f_softmax, p1, 1, in3, false);
    gradcheck_layouts("log_softmax_3d", f_log_softmax, p1, 1, in3, false);
    static const int64_t s45[] = {4, 5};
    gc_in ce[2] = {IN(2, s45, V_ANY, 'c'), IN(1, S4, V_TARGET, 'c')};
    ce[1].rg = false;
    gradcheck_layouts("cross_entropy", f_cross_entropy, NULL, 2, ce, true);
    gc_in mse[2] = {IN(2, S34, V_ANY, 'c'), IN(2, S34, V_SMALL, 'c')};
    gradcheck_layouts("mse_loss", f_mse_loss, NULL, 2, mse, true);
    gc_in mseb[2] = {IN(2, S34, V_ANY, 'c'), IN(1, S4, V_SMALL, 'c')};
    gradcheck_layouts("mse_loss_bcast", f_mse_loss, NULL, 2, mseb, false);
    gc_in chain[3] = {IN(2, S34, V_SMALL, 'c'), IN(2, (const int64_t[]){4, 4}, V_SMALL, 'c'),
                      IN(1, S4, V_ANY, 'c')};
    gradcheck_layouts("chain", f_chain, NULL, 3, chain, true);
}

static void views(void **state) {
    gc_in in3[1] = {IN(3, S234, V_ANY, 'c')}, in2[1] = {IN(2, S34, V_ANY, 'c')};
    const double v64[] = {2, 6, 4}, vflat[] = {1, -1}, r38[] = {2, 3, 8}, r26[] = {2, 2, 6};
    gc_in c3[1] = {in3[0]};
    gradcheck("view", f_view, v64, 1, c3, false); /* view needs a viewable layout */
    gradcheck("view_flat", f_view, vflat, 1, c3, false);
    gradcheck_layouts("reshape", f_reshape, r38, 1, in3, false);
    gradcheck_layouts("reshape2", f_reshape, r26, 1, in2, false);
    const double tp[] = {0, 2}, tn[] = {-1, -2};
    gradcheck_layouts("transpose", f_transpose, tp, 1, in3, false);
    gradcheck_layouts("transpose_neg", f_transpose, tn, 1, in3, false);
    const double pm[] = {3, 2, 0, 1};
    gradcheck_layouts("permute", f_permute, pm, 1, in3, false);
    const double nr[] = {1, 1, 2}, nrl[] = {-1, 2, 2};
    gradcheck_layouts("narrow", f_narrow, nr, 1, in3, false);
    gradcheck_layouts("narrow_last", f_narrow, nrl, 1, in3, false);
    const double sl[] = {1, 2}, sln[] = {0, -1};
    gradcheck_layouts("select", f_select, sl, 1, in3, false);
    gradcheck_layouts("select_neg", f_select, sln, 1, in3, false);
    static const int64_t s31[] = {3, 1}, s2131[] = {2, 1, 3, 1};
    gc_in e[1] = {IN(2, s31, V_ANY, 'c')};
    const double ex[] = {3, 2, 3, 4}, exk[] = {2, -1, 5};
    gradcheck_layouts("expand", f_expand, ex, 1, e, false);
    gradcheck_layouts("expand_keep", f_expand, exk, 1, e, false);
    gc_in sq[1] = {IN(4, s2131, V_ANY, 'c')};
    const double sqd[] = {1}, unq[] = {1}, unqe[] = {-1};
    gradcheck_layouts("squeeze", f_squeeze, NULL, 1, sq, false);
    gradcheck_layouts("squeeze_dim", f_squeeze_dim, sqd, 1, sq, false);
    gradcheck_layouts("unsqueeze", f_unsqueeze, unq, 1, in2, false);
    gradcheck_layouts("unsqueeze_end", f_unsqueeze, unqe, 1, in2, false);
    const double fl[] = {1, 2}, fla[] = {0, -1};
    gradcheck_layouts("flatten", f_flatten, fl, 1, in3, false);
    gradcheck_layouts("flatten_all", f_flatten, fla, 1, in2, false);
    gradcheck_layouts("contiguous", f_contiguous, NULL, 1, in2, false);
    gradcheck_layouts("clone", f_clone, NULL, 1, in2, false);
}

static void cat_stack(void **state) {
    static const int64_t s13b[] = {1, 3}, s33[] = {3, 3}, s22[] = {2, 2};
    gc_in c0[3] = {IN(2, S23, V_ANY, 'c'), IN(2, s13b, V_ANY, 'c'), IN(2, s33, V_ANY, 'c')};
    const double d0[] = {0}, d1[] = {1}, dm1[] = {-1}, d2[] = {2};
    gradcheck_layouts("cat0", f_cat, d0, 3, c0, false);
    gc_in c1[3] = {IN(2, S23, V_ANY, 'c'), IN(2, S21, V_ANY, 'c'), IN(2, s22, V_ANY, 'c')};
    gradcheck_layouts("cat1", f_cat, d1, 3, c1, false);
    gradcheck_layouts("cat-1", f_cat, dm1, 3, c1, false);
    gc_in s[2] = {IN(2, S23, V_ANY, 'c'), IN(2, S23, V_ANY, 'c')};
    gradcheck_layouts("stack0", f_stack, d0, 2, s, false);
    gradcheck_layouts("stack1", f_stack, d1, 2, s, false);
    gradcheck_layouts("stack2", f_stack, d2, 2, s, false);
    gradcheck_layouts("stack-1", f_stack, dm1, 2, s, false);
}

static void inplace_ops(void **state) {
    static const struct {
        const char *name;
        int code;
        bool other;
        vkind k;
        double s0, s1;
    } ops[] = {
        {"add_", 0, true, V_ANY, 0, 0},           {"sub_", 1, true, V_ANY, 0, 0},
        {"mul_", 2, true, V_ANY, 0, 0},           {"div_", 3, true, V_AWAY, 0, 0},
        {"add_scalar_", 4, false, V_ANY, 1.5, 0}, {"mul_scalar_", 5, false, V_ANY, -2, 0},
        {"zero_", 6, false, V_ANY, 0, 0},         {"fill_", 7, false, V_ANY, 0.75, 0},
        {"copy_", 8, true, V_ANY, 0, 0},          {"clamp_", 9, false, V_ANY, -0.5, 1.0},
        {"relu_", 10, false, V_ANY, 0, 0},        {"sigmoid_", 11, false, V_ANY, 0, 0},
        {"exp_", 12, false, V_SMALL, 0, 0},       {"neg_", 13, false, V_ANY, 0, 0},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int through_view = 0; through_view < 2; through_view++) {
            const double p[4] = {ops[o].code, through_view, ops[o].s0, ops[o].s1};
            /* through a view: y (3,4), the view rows 1..2 are (2,4); other broadcasts (4) */
            gc_in in[2] = {IN(2, S34, V_ANY, 'c'), IN(1, S4, ops[o].k, 'c')};
            if (!through_view) in[1] = IN(2, S34, ops[o].k, 'c');
            char name[64];
            snprintf(name, sizeof name, "%s%s", ops[o].name, through_view ? "(view)" : "");
            gradcheck_layouts(name, f_inplace, p, ops[o].other ? 2 : 1, in,
                              ops[o].code == 2 || ops[o].code == 11 || ops[o].code == 12);
        }
}

/* ---- indexing and masks ------------------------------------------------------------- */

/* Constant operands (in the caller's scope): index tensors and masks. */
static tn_tensor *ix(int nd, const int64_t *shape, const int64_t *v) {
    return tn_tensor_from(v, TN_I64, nd, shape, false);
}
static tn_tensor *bmask(int nd, const int64_t *shape, const uint8_t *v) {
    return tn_tensor_from(v, TN_BOOL, nd, shape, false);
}
/* p[0] = 1: the result squared, so that second derivatives exist (the ops
 * are linear in their float inputs) and the recorded backward is exercised. */
static tn_tensor *sq(tn_tensor *t, const double *p) { return p[0] != 0 ? tn_mul(t, t) : t; }

static const int64_t IX23[] = {2, 3}, IX_EMB[] = {1, 4, 1, 0, 1, 3}, IX4[] = {4},
                     IX_SEL[] = {3, 0, 3, 1}, IX24[] = {2, 4}, IX_G0[] = {0, 2, 2, 1, 1, 1, 0, 2},
                     IX32[] = {3, 2}, IX_G1[] = {3, 3, 0, 1, 2, 0};
static const uint8_t M4[] = {1, 0, 0, 1}, M34[] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0};

/* p: {square, dim} */
static tn_tensor *f_embedding(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_embedding(x[0], ix(2, IX23, IX_EMB)), p);
}
static tn_tensor *f_index_select(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_index_select(x[0], (int)p[1], ix(1, IX4, IX_SEL)), p);
}
static tn_tensor *f_gather0(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_gather(x[0], 0, ix(2, IX24, IX_G0)), p);
}
static tn_tensor *f_gather1(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_gather(x[0], 1, ix(2, IX32, IX_G1)), p);
}
/* x[1] (2, 4) or larger: src grows beyond the index (zero gradient there) */
static tn_tensor *f_scatter_add(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_scatter_add(x[0], 0, ix(2, IX24, IX_G0), x[1]), p);
}
static tn_tensor *f_where(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_where(bmask(1, IX4, M4), x[0], x[1]), p);
}
static tn_tensor *f_masked_fill(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_masked_fill(x[0], bmask(2, S34, M34), 2.5), p);
}
/* y = x * 1; y.masked_fill_(mask) (p[1] = 1: through the rows 1..2 of y) */
static tn_tensor *f_masked_fill_(tn_tensor *const *x, int n, const double *p) {
    tn_tensor *y = tn_mul_scalar(x[0], 1);
    tn_tensor *t = p[1] != 0 ? tn_narrow(y, 0, 1, 2) : y;
    if (!t || tn_masked_fill_(t, bmask(1, IX4, M4), -1.5) != TN_OK) return NULL;
    return sq(y, p);
}
static tn_tensor *f_tril(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_tril(x[0], (int64_t)p[1]), p);
}
static tn_tensor *f_triu(tn_tensor *const *x, int n, const double *p) {
    return sq(tn_triu(x[0], (int64_t)p[1]), p);
}

static void index_and_mask_ops(void **state) {
    static const int64_t s53[] = {5, 3}, s43[] = {4, 3}, s26[] = {2, 6};
    gc_in w[1] = {IN(2, s53, V_ANY, 'c')}, a43[1] = {IN(2, s43, V_ANY, 'c')};
    gc_in a34[1] = {IN(2, S34, V_ANY, 'c')}, a234[1] = {IN(3, S234, V_ANY, 'c')};
    gc_in sa[2] = {IN(2, S34, V_ANY, 'c'), IN(2, IX24, V_ANY, 'c')};
    gc_in sab[2] = {IN(2, S34, V_ANY, 'c'), IN(2, s26, V_ANY, 'c')}; /* src beyond the index */
    gc_in wh[2] = {IN(2, S34, V_ANY, 'c'), IN(1, IX4, V_ANY, 'c')};
    const struct {
        const char *name;
        gc_fn f;
        double p1; /* dim, diagonal, or masked_fill_ through a view */
        int n;
        gc_in *in;
    } cases[] = {
        {"embedding", f_embedding, 0, 1, w},
        {"index_select0", f_index_select, 0, 1, a43},
        {"index_select-1", f_index_select, -1, 1, a234},
        {"gather0", f_gather0, 0, 1, a34},
        {"gather1", f_gather1, 0, 1, a34},
        {"scatter_add", f_scatter_add, 0, 2, sa},
        {"scatter_add_big_src", f_scatter_add, 0, 2, sab},
        {"where", f_where, 0, 2, wh},
        {"masked_fill", f_masked_fill, 0, 1, a34},
        {"masked_fill_", f_masked_fill_, 0, 1, a34},
        {"masked_fill_(view)", f_masked_fill_, 1, 1, a34},
        {"tril(-1)", f_tril, -1, 1, a234},
        {"tril(0)", f_tril, 0, 1, a234},
        {"tril(1)", f_tril, 1, 1, a234},
        {"triu(-1)", f_triu, -1, 1, a234},
        {"triu(0)", f_triu, 0, 1, a234},
        {"triu(1)", f_triu, 1, 1, a234},
    };
    for (int square = 0; square < 2; square++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const double p[2] = {square, cases[c].p1};
            char name[64];
            snprintf(name, sizeof name, "%s%s", cases[c].name, square ? "^2" : "");
            gradcheck_layouts(name, cases[c].f, p, cases[c].n, cases[c].in, square);
        }
}

/* scaled_dot_product_attention: p[0] is_causal; p[1] mask: 0 none, 1 bool
 * (3, 5), 2 float (2, 1, 5). */
static tn_tensor *f_sdpa(tn_tensor *const *x, int n, const double *p) {
    (void)n;
    static const bool mb[15] = {1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1};
    double mf[10];
    for (int i = 0; i < 10; i++)
        mf[i] = 0.5 * sin(0.7 * i);
    tn_tensor *m = p[1] == 1   ? tn_tensor_from(mb, TN_BOOL, 2, (const int64_t[]){3, 5}, false)
                   : p[1] == 2 ? tn_tensor_from(mf, TN_F64, 3, (const int64_t[]){2, 1, 5}, false)
                               : NULL;
    tn_tensor *out = tn_scaled_dot_product_attention(x[0], x[1], x[2], m, 0, p[0] != 0);
    tn_release(m);
    return out;
}

static void attention_ops(void **state) {
    static const int64_t q[] = {2, 3, 4}, k[] = {2, 5, 4}, v[] = {2, 5, 3}, kb[] = {5, 4};
    gc_in in[3] = {IN(3, q, V_SMALL, 'c'), IN(3, k, V_SMALL, 'c'), IN(3, v, V_ANY, 'c')};
    const char *names[] = {"sdpa", "sdpa_causal", "sdpa_bool_mask", "sdpa_float_mask"};
    const double ps[4][2] = {{0, 0}, {1, 0}, {0, 1}, {0, 2}};
    for (int c = 0; c < 4; c++)
        gradcheck_layouts(names[c], f_sdpa, ps[c], 3, in, true);
    gc_in bc[3] = {IN(3, q, V_SMALL, 'c'), IN(2, kb, V_SMALL, 'c'), IN(3, v, V_ANY, 'c')};
    gradcheck_layouts("sdpa_bcast", f_sdpa, ps[1], 3, bc, true);
}

static int reset(void **state) {
    failures = 0;
    return tt_setup(state);
}

static int verify(void **state) {
    int rc = tt_teardown(state);
    if (failures) fprintf(stderr, "%d gradcheck failure(s) in this test\n", failures);
    return failures ? -1 : rc;
}

static void norm_ops(void **state) {
    static const int64_t s4[] = {4}, s34[] = {3, 4};
    /* x (2, 3, 4) over the last 1 and 2 dims, with weight and/or bias */
    for (int nn = 1; nn <= 2; nn++) {
        const int64_t *ns = nn == 1 ? s4 : s34;
        for (int wb = 0; wb < 4; wb++) {
            double p[3] = {nn, wb & 1, wb >> 1};
            gc_in in[3] = {IN(3, S234, V_ANY, 'c'), IN(nn, ns, V_ANY, 'c'), IN(nn, ns, V_ANY, 'c')};
            int n = 1 + (wb & 1) + (wb >> 1);
            char name[48];
            snprintf(name, sizeof name, "layer_norm(%d, w%d b%d)", nn, wb & 1, wb >> 1);
            /* all layouts for the common case; order 2 everywhere */
            if (wb == 3)
                gradcheck_layouts(name, f_layer_norm, p, n, in, true);
            else
                gradcheck(name, f_layer_norm, p, n, in, true);
        }
    }
    /* batch_norm (training) and group_norm (2 groups of x (2, 4, 3)), order 2 */
    static const int64_t s243[] = {2, 4, 3};
    for (int g = 0; g <= 2; g += 2)
        for (int wb = 0; wb < 4; wb++) {
            double p[4] = {0, wb & 1, wb >> 1, g};
            gc_in in[3] = {IN(3, s243, V_ANY, 'c'), IN(1, s4, V_ANY, 'c'), IN(1, s4, V_ANY, 'c')};
            char name[48];
            snprintf(name, sizeof name, "%s(w%d b%d)", g ? "group_norm" : "batch_norm", wb & 1,
                     wb >> 1);
            if (wb == 3)
                gradcheck_layouts(name, f_channel_norm, p, 1 + (wb & 1) + (wb >> 1), in, true);
            else
                gradcheck(name, f_channel_norm, p, 1 + (wb & 1) + (wb >> 1), in, true);
        }
    gc_in in3[1] = {IN(3, S234, V_ANY, 'c')}, in2[1] = {IN(2, S34, V_ANY, 'c')};
    for (int approx = 0; approx < 2; approx++) {
        const double p[1] = {approx};
        gradcheck_layouts(approx ? "gelu_tanh" : "gelu", f_gelu, p, 1, in2, true);
    }
    gradcheck_layouts("silu", f_silu, NULL, 1, in2, true);
    for (int d = -1; d < 3; d++)
        for (int k = 0; k < 2; k++) {
            const double p[3] = {d, k, 0};
            char name[48];
            snprintf(name, sizeof name, "logsumexp(%d, %d)", d, k);
            gradcheck(name, f_logsumexp, p, 1, in3, true);
            for (int c = 0; c < 2; c++) {
                const double pv[3] = {d, c, k};
                snprintf(name, sizeof name, "var(%d, c%d, %d)", d, c, k);
                gradcheck(name, f_var_dim, pv, 1, in3, true);
                snprintf(name, sizeof name, "std(%d, c%d, %d)", d, c, k);
                gradcheck(name, f_std_dim, pv, 1, in3, true);
            }
        }
    const double p1[3] = {1, 1, 0};
    gradcheck_layouts("logsumexp_2d", f_logsumexp, p1, 1, in2, false);
    gradcheck_layouts("var_2d", f_var_dim, p1, 1, in2, false);
    gradcheck_layouts("std_2d", f_std_dim, p1, 1, in2, false);
    const double pd[1] = {0.3};
    gradcheck_layouts("dropout", f_dropout, pd, 1, in2, true);
}

#define GC_TEST(f) cmocka_unit_test_setup_teardown(f, reset, verify)

int main(void) {
    // clang-format off
    const struct CMUnitTest tests[] = {
        GC_TEST(binary_ops), GC_TEST(scalar_ops),        GC_TEST(unary_ops),
        GC_TEST(reductions), GC_TEST(matmul_and_linear), GC_TEST(nn_ops),
        GC_TEST(views),      GC_TEST(cat_stack),         GC_TEST(inplace_ops),
        GC_TEST(index_and_mask_ops),
        GC_TEST(norm_ops),
        GC_TEST(attention_ops),
    };
    // clang-format on
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    fprintf(stderr, "gradcheck: %d partial derivatives compared\n", checked);
    return r;
}
