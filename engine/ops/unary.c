/* Unary pointwise ops, scalar forms (tensor op number) and clamp, with
 * backward and in-place forms.
 * Node layout: input {a}; saved {0: a, 1: result}; parameters unary_params. */
#include "autocast.h"
#include "pointwise_driver.h"

/* The op's scalars as its kernel takes them (clamp: min, max; pow: the
 * exponent; mul, div: the factor). */
typedef struct unary_params {
    tn_pw_ctx scalars;
} unary_params;
TN_NODE_PARAMS(unary_params, unary_p)

typedef struct unop {
    const char *name;
    tn_pw_code code;
    bool to_float;  /* integer inputs compute in float32 */
    const tn_fn_info *grad;
    bool save_in, save_out;
} unop;

/* ---- backward -------------------------------------------------------------------- */

/* gi[0] = g * f(saved) where f is built by `fn` from the unpacked tensor. */
typedef tn_tensor *(*local_grad_fn)(tn_node *n, const tn_tensor *x);

static tn_status chain(tn_node *n, tn_tensor *g, int slot, local_grad_fn fn, tn_tensor **gi) {
    tn_tensor *x = tn__node_unpack(n, slot);
    TN_TRY(x);
    tn_tensor *d = fn(n, x);
    tn_release(x);
    TN_TRY(d);
    *gi = tn_mul(g, d);
    tn_release(d);
    return *gi ? TN_OK : tn_last_status();
}

static tn_tensor *d_exp(tn_node *n, const tn_tensor *r) { return tn__retain(r); }
static tn_tensor *d_log(tn_node *n, const tn_tensor *x) { return tn_pow_scalar(x, -1); }
static tn_tensor *d_sqrt(tn_node *n, const tn_tensor *r) { /* 1 / (2 r) */
    tn_tensor *t = tn_mul_scalar(r, 2), *d = t ? tn_pow_scalar(t, -1) : NULL;
    tn_release(t);
    return d;
}
static tn_tensor *d_sigmoid(tn_node *n, const tn_tensor *r) { /* r (1 - r) */
    tn_tensor *t = tn_rsub_scalar(r, 1), *d = t ? tn_mul(r, t) : NULL;
    tn_release(t);
    return d;
}
static tn_tensor *d_tanh(tn_node *n, const tn_tensor *r) { /* 1 - r^2 */
    tn_tensor *t = tn_mul(r, r), *d = t ? tn_rsub_scalar(t, 1) : NULL;
    tn_release(t);
    return d;
}
static tn_tensor *d_sin(tn_node *n, const tn_tensor *x) { return tn_cos(x); }
static tn_tensor *d_cos(tn_node *n, const tn_tensor *x) {
    tn_tensor *t = tn_sin(x), *d = t ? tn_neg(t) : NULL;
    tn_release(t);
    return d;
}
static tn_tensor *d_abs(tn_node *n, const tn_tensor *x) {
    return tn__pw_unary("sign", TN_PW_sign, x, x->dtype, NULL);
}
/* relu's gradient, PyTorch's threshold_backward: g where r > 0, else 0.
 * Under create_graph it records ThresholdBackwardBackward0 (inputs {g, r},
 * saved {0: r}): differentiable in g (the same mask), zero in r. */
static tn_tensor *threshold_backward(const tn_tensor *g, const tn_tensor *r);

static tn_status threshold_bw_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *r = tn__node_unpack(n, 0);
    TN_TRY(r);
    tn_status st = TN_OK;
    if (tn__edge_valid(&n->edges[0]) && !(gi[0] = threshold_backward(go[0], r)))
        st = tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[1]) && !(gi[1] = tn__zeros_like(go[0])))
        st = tn_last_status();
    tn_release(r);
    return st;
}
static const tn_fn_info threshold_bw_fn = {"ThresholdBackwardBackward0", threshold_bw_bw};

static tn_tensor *threshold_backward(const tn_tensor *g, const tn_tensor *r) {
    tn_pw_ctx c = {0, INFINITY};
    tn_tensor *m = tn__pw_unary("relu_backward", TN_PW_clampmask, r, r->dtype, &c);
    /* clampmask gives r >= 0; remove the zeros */
    tn_tensor *z = m ? tn__zeros(0, NULL, r->dtype) : NULL;
    tn_tensor *eq = z ? tn__pw_binary("eq", TN_PW_eq, r, z, r->dtype, TN_BOOL) : NULL;
    tn_tensor *mask = eq ? tn__masked_zero(m, eq) : NULL;
    tn_dtype dt = tn__promote(g, r);
    tn_tensor *out = mask ? tn__pw_binary("mul", TN_PW_mul, g, mask, dt, dt) : NULL;
    tn_release(m);
    tn_release(z);
    tn_release(eq);
    tn_release(mask);
    const tn_tensor *in[2] = {g, r};
    if (!out || !tn__needs_grad(2, in)) return out;
    tn_node *n = tn__node_new(&threshold_bw_fn, 2, in, 1, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) st = tn__node_save(n, 0, r, false);
    tn__node_release(n);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

static tn_status relu_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *r = tn__node_unpack(n, 1);
    TN_TRY(r);
    gi[0] = threshold_backward(go[0], r);
    tn_release(r);
    return gi[0] ? TN_OK : tn_last_status();
}
static tn_tensor *d_clamp(tn_node *n, const tn_tensor *x) {
    return tn__pw_unary("clamp_backward", TN_PW_clampmask, x, x->dtype, &unary_p(n)->scalars);
}
static tn_tensor *d_pows(tn_node *n, const tn_tensor *x) { /* e x^(e-1), 0 when e == 0 */
    double e = unary_p(n)->scalars.c0;
    if (e == 0) return tn__zeros_like(x);
    tn_tensor *t = tn_pow_scalar(x, e - 1), *d = t ? tn_mul_scalar(t, e) : NULL;
    tn_release(t);
    return d;
}

#define CHAIN_BW(NAME, SLOT, FN)                                                          \
    static tn_status NAME(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {             \
        return chain(n, go[0], SLOT, FN, &gi[0]);                                         \
    }
CHAIN_BW(exp_bw, 1, d_exp)
CHAIN_BW(log_bw, 0, d_log)
CHAIN_BW(sqrt_bw, 1, d_sqrt)
CHAIN_BW(sigmoid_bw, 1, d_sigmoid)
CHAIN_BW(tanh_bw, 1, d_tanh)
CHAIN_BW(sin_bw, 0, d_sin)
CHAIN_BW(cos_bw, 0, d_cos)
CHAIN_BW(abs_bw, 0, d_abs)
CHAIN_BW(clamp_bw, 0, d_clamp)
CHAIN_BW(pows_bw, 0, d_pows)

static tn_status neg_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return (gi[0] = tn_neg(go[0])) ? TN_OK : tn_last_status();
}
static tn_status identity_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    gi[0] = tn__retain(go[0]);
    return TN_OK;
}
static tn_status muls_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return (gi[0] = tn_mul_scalar(go[0], unary_p(n)->scalars.c0)) ? TN_OK : tn_last_status();
}
/* The old value does not reach the output: its gradient is zeros (not
 * "none": PyTorch's formula is zeros_like(grad), so leaves still get 0). */
static tn_status zero_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return (gi[0] = tn__zeros_like(go[0])) ? TN_OK : tn_last_status();
}

static const tn_fn_info neg_fn = {"NegBackward0", neg_bw};
static const tn_fn_info exp_fn = {"ExpBackward0", exp_bw};
static const tn_fn_info log_fn = {"LogBackward0", log_bw};
static const tn_fn_info sqrt_fn = {"SqrtBackward0", sqrt_bw};
static const tn_fn_info abs_fn = {"AbsBackward0", abs_bw};
static const tn_fn_info sigmoid_fn = {"SigmoidBackward0", sigmoid_bw};
static const tn_fn_info tanh_fn = {"TanhBackward0", tanh_bw};
static const tn_fn_info relu_fn = {"ReluBackward0", relu_bw};
static const tn_fn_info sin_fn = {"SinBackward0", sin_bw};
static const tn_fn_info cos_fn = {"CosBackward0", cos_bw};
static const tn_fn_info clamp_fn = {"ClampBackward1", clamp_bw};
static const tn_fn_info adds_fn = {"AddBackward0", identity_bw};
static const tn_fn_info subs_fn = {"SubBackward0", identity_bw};
static const tn_fn_info muls_fn = {"MulBackward0", muls_bw};
static const tn_fn_info divs_fn = {"DivBackward0", muls_bw};
static const tn_fn_info rsubs_fn = {"RsubBackward1", neg_bw};
static const tn_fn_info pows_fn = {"PowBackward0", pows_bw};
static const tn_fn_info zero_fn = {"ZeroBackward0", zero_bw};
static const tn_fn_info fill_fn = {"FillBackward0", zero_bw};

static const unop op_neg = {"neg", TN_PW_neg, false, &neg_fn, false, false};
static const unop op_exp = {"exp", TN_PW_exp, true, &exp_fn, false, true};
static const unop op_log = {"log", TN_PW_log, true, &log_fn, true, false};
static const unop op_sqrt = {"sqrt", TN_PW_sqrt, true, &sqrt_fn, false, true};
static const unop op_abs = {"abs", TN_PW_abs, false, &abs_fn, true, false};
static const unop op_sigmoid = {"sigmoid", TN_PW_sigmoid, true, &sigmoid_fn, false, true};
static const unop op_tanh = {"tanh", TN_PW_tanh, true, &tanh_fn, false, true};
static const unop op_relu = {"relu", TN_PW_relu, false, &relu_fn, false, true};
static const unop op_sin = {"sin", TN_PW_sin, true, &sin_fn, true, false};
static const unop op_cos = {"cos", TN_PW_cos, true, &cos_fn, true, false};
static const unop op_clamp = {"clamp", TN_PW_clamp, false, &clamp_fn, true, false};
static const unop op_adds = {"add", TN_PW_adds, false, &adds_fn, false, false};
static const unop op_subs = {"sub", TN_PW_adds, false, &subs_fn, false, false};
static const unop op_muls = {"mul", TN_PW_muls, false, &muls_fn, false, false};
static const unop op_divs = {"div", TN_PW_muls, true, &divs_fn, false, false};
static const unop op_rsubs = {"rsub", TN_PW_rsubs, false, &rsubs_fn, false, false};
static const unop op_pows = {"pow", TN_PW_pows, true, &pows_fn, true, false};
/* fills: code unused (tn__fill_into), any dtype */
static const unop op_zero = {"zero_", TN_PW_neg, false, &zero_fn, false, false};
static const unop op_fill = {"fill_", TN_PW_neg, false, &fill_fn, false, false};

/* ---- forward --------------------------------------------------------------------- */

static tn_status record(const unop *op, tn_tensor *out, const tn_tensor *in_edge,
                        const tn_tensor *in_saved, const tn_pw_ctx *c, tn_node **keep) {
    tn_node *n = tn__node_new(op->grad, 1, &in_edge, 2, 1);
    if (!n) return tn_last_status();
    if (c) unary_p(n)->scalars = *c;
    tn_status st = TN_OK;
    if (op->save_in) st = tn__node_save(n, 0, in_saved, false);
    if (keep) { /* in-place: the caller rebases and saves the output after */
        *keep = n;
        return st;
    }
    if (st == TN_OK) st = tn__node_set_output(n, out, 0);
    if (st == TN_OK && op->save_out) st = tn__node_save(n, 1, out, true);
    tn__node_release(n);
    return st;
}

static tn_dtype out_dtype(const unop *op, tn_dtype in, double scalar) {
    tn_dtype dt = op->code == TN_PW_adds || op->code == TN_PW_muls || op->code == TN_PW_rsubs
                      ? tn__promote_scalar(in, scalar)
                      : in;
    if (op->to_float && !tn__is_float(dt)) dt = TN_F32;
    return dt;
}

static tn_tensor *unary(const char *api, const unop *op, const tn_tensor *a, double c0, double c1) {
    TN_CHECK_NULL_ARG_IN(api, a, "self");
    tn_pw_ctx c = {c0, c1};
    tn_dtype dt = out_dtype(op, a->dtype, c0);
    if (op == &op_neg && dt == TN_BOOL) {
        tn__error(TN_ERR_DTYPE, "Negation, the `-` operator, on a bool tensor is not supported. "
                  "If you are trying to invert a mask, use the `~` or `logical_not()` operator "
                  "instead.");
        return NULL;
    }
    tn_tensor *out = tn__pw_unary(op->name, op->code, a, dt, &c);
    if (!out) return NULL;
    if (tn__needs_grad(1, &a) && record(op, out, a, a, &c, NULL) < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__ret(out);
}

tn_tensor *tn_neg(const tn_tensor *a) { return unary(__func__, &op_neg, a, 0, 0); }
tn_tensor *tn_exp(const tn_tensor *a) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_EXP, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_exp(f.t[0]) : NULL);
    return unary(__func__, &op_exp, a, 0, 0);
}
tn_tensor *tn_log(const tn_tensor *a) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_LOG, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_log(f.t[0]) : NULL);
    return unary(__func__, &op_log, a, 0, 0);
}
tn_tensor *tn_sqrt(const tn_tensor *a) { return unary(__func__, &op_sqrt, a, 0, 0); }
tn_tensor *tn_abs(const tn_tensor *a) { return unary(__func__, &op_abs, a, 0, 0); }
tn_tensor *tn_sigmoid(const tn_tensor *a) { return unary(__func__, &op_sigmoid, a, 0, 0); }
tn_tensor *tn_tanh(const tn_tensor *a) { return unary(__func__, &op_tanh, a, 0, 0); }
tn_tensor *tn_relu(const tn_tensor *a) { return unary(__func__, &op_relu, a, 0, 0); }
tn_tensor *tn_sin(const tn_tensor *a) { return unary(__func__, &op_sin, a, 0, 0); }
tn_tensor *tn_cos(const tn_tensor *a) { return unary(__func__, &op_cos, a, 0, 0); }
/* An integer tensor's bounds are cut to its dtype's range (-INFINITY /
 * INFINITY: no bound), so they convert exactly; a fractional bound
 * truncates toward zero. */
static void clamp_bounds(tn_dtype dt, double *lo, double *hi) {
    double min, max;
    switch (dt) {
    case TN_I16: min = -32768.0, max = 32767.0; break;
    case TN_I32: min = -TN_TWO_31, max = TN_TWO_31 - 1.0; break;
    case TN_I64: min = -TN_TWO_63, max = TN_TWO_63; /* converts saturating: INT64_MAX */ break;
    case TN_BOOL: min = 0.0, max = 1.0; break;
    default: return;
    }
    *lo = *lo < min ? min : *lo > max ? max : *lo;
    *hi = *hi > max ? max : *hi < min ? min : *hi;
}

/* PyTorch's clamp takes any bounds (lo > hi gives hi, a NaN bound NaN); an integer tensor's
 * NaN bound, which PyTorch answers in float, has no value in the tensor's dtype. */
static tn_status check_clamp(const tn_tensor *a, double lo, double hi) {
    if (!a || tn__is_float(a->dtype) || !(isnan(lo) || isnan(hi))) return TN_OK;
    return tn__error(TN_ERR_INVALID_ARGUMENT,
                     "clamp: a NaN bound for an %s tensor (tenet clamps integers in their dtype; "
                     "PyTorch's result would be float)",
                     tn_dtype_name(a->dtype));
}

tn_tensor *tn_clamp(const tn_tensor *a, double lo, double hi) {
    if (check_clamp(a, lo, hi) < 0) return NULL;
    if (a) clamp_bounds(a->dtype, &lo, &hi);
    return unary(__func__, &op_clamp, a, lo, hi);
}
tn_tensor *tn_add_scalar(const tn_tensor *a, double s) { return unary(__func__, &op_adds, a, s, 0); }
tn_tensor *tn_sub_scalar(const tn_tensor *a, double s) { return unary(__func__, &op_subs, a, -s, 0); }
tn_tensor *tn_mul_scalar(const tn_tensor *a, double s) { return unary(__func__, &op_muls, a, s, 0); }
tn_tensor *tn_div_scalar(const tn_tensor *a, double s) { return unary(__func__, &op_divs, a, 1 / s, 0); }
tn_tensor *tn_rsub_scalar(const tn_tensor *a, double s) { return unary(__func__, &op_rsubs, a, s, 0); }
tn_tensor *tn_pow_scalar(const tn_tensor *a, double e) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_POW, 1, (const tn_tensor *[]){a}))
        return tn__autocast_done(&f, f.ok ? tn_pow_scalar(f.t[0], e) : NULL);
    return unary(__func__, &op_pows, a, e, 0);
}

/* ---- in-place -------------------------------------------------------------------- */

static tn_status unary_(const char *api, const unop *op, const char *name, tn_tensor *self, double c0, double c1) {
    TN_CHECK_NULL_ARG_ST_IN(api, self, "self");
    tn_pw_ctx c = {c0, c1};
    tn_dtype dt = op == &op_zero || op == &op_fill ? self->dtype : out_dtype(op, self->dtype, c0);
    tn_status st = tn__inplace_prepare(op->name, self, NULL, dt);
    if (st == TN_OK) st = tn__pw_check_dtype(op->name, op->code, self->dtype);
    if (st == TN_OK && op == &op_fill) st = tn__check_scalar(c0, self->dtype);
    if (st < 0) return st;
    tn_node *n = NULL;
    if (tn__needs_grad(1, (const tn_tensor *[]){self})) {
        tn_tensor *old = op->save_in ? tn__clone_recorded(self) : NULL;
        st = op->save_in && !old ? tn_last_status() : record(op, self, self, old, &c, &n);
        tn_release(old);
        if (st < 0) {
            tn__node_release(n);
            return st;
        }
    }
    /* The result is self at its new version (relu_, exp_, ...): its alias is
     * made now, the version and epoch it is saved at after the write. */
    if (n && op->save_out && (st = tn__node_save(n, 1, self, true)) < 0) {
        tn__node_release(n);
        return st;
    }
    tn_rebase rb;
    if ((st = tn__inplace_prepare_rebase(self, n, &rb)) < 0) return st; /* consumes n */
    bool fill = op == &op_zero || op == &op_fill;
    st = fill ? tn__fill_into(self, c0) : tn__pw_unary_into(op->name, op->code, self, self, &c);
    if (st < 0) {
        tn__inplace_abandon(&rb);
        return st;
    }
    st = tn__inplace_commit(self, &rb, name); /* self is now its output */
    if (n && op->save_out) { /* n lives on in self's history */
        tn_saved *s = &n->saved[1];
        s->version = tn__version_get(self);
        s->epoch = atomic_load_explicit(&self->storage->write_epoch, memory_order_relaxed);
        s->output_nr = 0;
    }
    return st;
}

tn_status tn_add_scalar_(tn_tensor *a, double s) { return unary_(__func__, &op_adds, "add_scalar_", a, s, 0); }
tn_status tn_mul_scalar_(tn_tensor *a, double s) { return unary_(__func__, &op_muls, "mul_scalar_", a, s, 0); }
tn_status tn_zero_(tn_tensor *a) { return unary_(__func__, &op_zero, "zero_", a, 0, 0); }
tn_status tn_fill_(tn_tensor *a, double v) { return unary_(__func__, &op_fill, "fill_", a, v, 0); }
tn_status tn_relu_(tn_tensor *a) { return unary_(__func__, &op_relu, "relu_", a, 0, 0); }
tn_status tn_sigmoid_(tn_tensor *a) { return unary_(__func__, &op_sigmoid, "sigmoid_", a, 0, 0); }
tn_status tn_exp_(tn_tensor *a) { return unary_(__func__, &op_exp, "exp_", a, 0, 0); }
tn_status tn_neg_(tn_tensor *a) { return unary_(__func__, &op_neg, "neg_", a, 0, 0); }
tn_status tn_clamp_(tn_tensor *a, double lo, double hi) {
    if (check_clamp(a, lo, hi) < 0) return tn_last_status();
    if (a) clamp_bounds(a->dtype, &lo, &hi);
    return unary_(__func__, &op_clamp, "clamp_", a, lo, hi);
}
