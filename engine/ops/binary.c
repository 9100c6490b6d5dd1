/* Binary pointwise ops (add sub mul div pow maximum minimum), their
 * backward, out= forms, in-place forms, and comparisons.
 * Node layout: inputs {a, b}; saved {0: a, 1: b, 2: result}; parameters
 * binary_params. */
#include "autocast.h"
#include "pointwise_driver.h"

typedef struct binary_params {
    double alpha; /* add, sub: b's factor */
} binary_params;
TN_NODE_PARAMS(binary_params, binary_p)

typedef enum { K_ARITH, K_TRUEDIV, K_CMP } binop_kind;

typedef struct binop {
    const char *name;
    tn_pw_code code;
    binop_kind kind;
    const tn_fn_info *grad;
    bool save_a, save_b, save_out; /* what backward needs */
} binop;

/* ---- backward ------------------------------------------------------------------ */

static bool want(tn_node *n, int i) { return tn__edge_valid(&n->edges[i]); }

/* gi = g * saved[slot] (borrowed g) */
static tn_status mul_saved(tn_node *n, tn_tensor *g, int slot, tn_tensor **gi) {
    tn_tensor *s = tn__node_unpack(n, slot);
    TN_TRY(s);
    *gi = tn_mul(g, s);
    tn_release(s);
    return *gi ? TN_OK : tn_last_status();
}

static tn_status add_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    if (want(n, 0)) gi[0] = tn__retain(go[0]);
    double alpha = binary_p(n)->alpha;
    if (want(n, 1)) TN_TRY(gi[1] = alpha == 1 ? tn__retain(go[0]) : tn_mul_scalar(go[0], alpha));
    return TN_OK;
}

static tn_status sub_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    if (want(n, 0)) gi[0] = tn__retain(go[0]);
    if (want(n, 1)) TN_TRY(gi[1] = tn_neg(go[0]));
    return TN_OK;
}

static tn_status mul_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_status st = TN_OK;
    if (want(n, 0)) st = mul_saved(n, go[0], 1, &gi[0]);
    if (st == TN_OK && want(n, 1)) st = mul_saved(n, go[0], 0, &gi[1]);
    return st;
}

static tn_status div_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *b = tn__node_unpack(n, 1);
    TN_TRY(b);
    tn_status st = TN_OK;
    if (want(n, 0) && !(gi[0] = tn_div(go[0], b))) st = tn_last_status();
    if (st == TN_OK && want(n, 1)) { /* -g * a / (b * b) */
        tn_tensor *a = tn__node_unpack(n, 0);
        tn_tensor *t1 = a ? tn_mul(go[0], a) : NULL;
        tn_tensor *t2 = t1 ? tn_div(t1, b) : NULL;
        tn_tensor *t3 = t2 ? tn_div(t2, b) : NULL;
        if (!(gi[1] = t3 ? tn_neg(t3) : NULL)) st = tn_last_status();
        tn_release(a);
        tn_release(t1);
        tn_release(t2);
        tn_release(t3);
    }
    tn_release(b);
    return st;
}

static tn_status pow_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *a = tn__node_unpack(n, 0), *b = a ? tn__node_unpack(n, 1) : NULL;
    tn_status st = b ? TN_OK : tn_last_status();
    tn_tensor *t[8] = {0};
    if (st == TN_OK && want(n, 0)) { /* g * b * a^(b-1), 0 where b == 0 */
        tn_tensor *zero = tn__zeros(0, NULL, b->dtype);
        if (!zero || !(t[0] = tn_sub_scalar(b, 1)) || !(t[1] = tn_pow(a, t[0])) ||
            !(t[2] = tn_mul(t[1], b)) || !(t[3] = tn_mul(go[0], t[2])) ||
            !(t[4] = tn_eq(b, zero)) || !(gi[0] = tn__masked_zero(t[3], t[4])))
            st = tn_last_status();
        tn_release(zero);
    }
    if (st == TN_OK && want(n, 1)) { /* g * result * log(a), 0 where a == 0 and b >= 0 */
        tn_tensor *r = tn__node_unpack(n, 2), *zero = tn__zeros(0, NULL, a->dtype);
        tn_tensor *u[6] = {0};
        if (!r || !zero || !(u[0] = tn_log(a)) || !(u[1] = tn_mul(r, u[0])) ||
            !(u[2] = tn_mul(go[0], u[1])) || !(u[3] = tn_eq(a, zero)) ||
            !(u[4] = tn_ge(b, zero)) || !(u[5] = tn_mul(u[3], u[4])) ||
            !(gi[1] = tn__masked_zero(u[2], u[5])))
            st = tn_last_status();
        for (int i = 0; i < 6; i++) tn_release(u[i]);
        tn_release(r);
        tn_release(zero);
    }
    for (int i = 0; i < 8; i++) tn_release(t[i]);
    tn_release(a);
    tn_release(b);
    return st;
}

/* maximum: x gets g where it wins, g/2 on ties (minimum: swap the roles). */
static tn_status minmax_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi, bool is_max) {
    tn_tensor *a = tn__node_unpack(n, 0), *b = a ? tn__node_unpack(n, 1) : NULL;
    tn_status st = b ? TN_OK : tn_last_status();
    tn_dtype dt = b ? tn__promote(a, b) : TN_F32;
    for (int i = 0; i < 2 && st == TN_OK; i++) {
        if (!want(n, i)) continue;
        const tn_tensor *x = (i == 0) == is_max ? a : b, *y = x == a ? b : a;
        tn_tensor *share = tn__pw_binary("maximum_backward", TN_PW_maxshare, x, y, dt, dt);
        if (!share || !(gi[i] = tn_mul(go[0], share))) st = tn_last_status();
        tn_release(share);
    }
    tn_release(a);
    tn_release(b);
    return st;
}
static tn_status maximum_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return minmax_bw(n, go, gi, true);
}
static tn_status minimum_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return minmax_bw(n, go, gi, false);
}

static const tn_fn_info add_fn = {"AddBackward0", add_bw};
static const tn_fn_info sub_fn = {"SubBackward0", sub_bw};
static const tn_fn_info mul_fn = {"MulBackward0", mul_bw};
static const tn_fn_info div_fn = {"DivBackward0", div_bw};
static const tn_fn_info pow_fn = {"PowBackward1", pow_bw};
static const tn_fn_info maximum_fn = {"MaximumBackward0", maximum_bw};
static const tn_fn_info minimum_fn = {"MinimumBackward0", minimum_bw};

static const binop op_add = {"add", TN_PW_add, K_ARITH, &add_fn, false, false, false};
static const binop op_sub = {"sub", TN_PW_sub, K_ARITH, &sub_fn, false, false, false};
static const binop op_mul = {"mul", TN_PW_mul, K_ARITH, &mul_fn, true, true, false};
static const binop op_div = {"div", TN_PW_div, K_TRUEDIV, &div_fn, true, true, false};
static const binop op_pow = {"pow", TN_PW_pow, K_ARITH, &pow_fn, true, true, true};
static const binop op_maximum = {"maximum", TN_PW_maximum, K_ARITH, &maximum_fn, true, true, false};
static const binop op_minimum = {"minimum", TN_PW_minimum, K_ARITH, &minimum_fn, true, true, false};

/* ---- forward ------------------------------------------------------------------- */

static tn_dtype compute_dtype(const binop *op, const tn_tensor *a, const tn_tensor *b) {
    tn_dtype dt = tn__promote(a, b);
    if (op->kind == K_TRUEDIV && !tn__is_float(dt)) dt = TN_F32;
    return dt;
}

static tn_status check_bool_sub(const binop *op, const tn_tensor *a, const tn_tensor *b) {
    if (op == &op_sub && a->dtype == TN_BOOL && b->dtype == TN_BOOL)
        return tn__error(TN_ERR_DTYPE, "Subtraction, the `-` operator, with two bool tensors is "
                         "not supported. Use the `^` or `logical_xor()` operator instead.");
    return TN_OK;
}

/* Records out = op(a, b); saves per op (mul saves b only when a needs grad). */
static tn_status record(const binop *op, tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
                        double alpha) {
    tn_node *n = tn__node_new(op->grad, 2, (const tn_tensor *[]){a, b}, 3, 1);
    if (!n) return tn_last_status();
    binary_p(n)->alpha = alpha;
    tn_status st = tn__node_set_output(n, out, 0);
    bool ga = tn__requires_grad(a), gb = tn__requires_grad(b);
    bool always = op != &op_mul; /* mul: each input only for the other's grad */
    if (st == TN_OK && op->save_a && (always ? true : gb)) st = tn__node_save(n, 0, a, false);
    if (st == TN_OK && op->save_b && (always ? true : ga)) st = tn__node_save(n, 1, b, false);
    if (st == TN_OK && op->save_out) st = tn__node_save(n, 2, out, true);
    tn__node_release(n);
    return st;
}

static tn_tensor *binary(const char *api, const binop *op, const tn_tensor *a, const tn_tensor *b, double alpha) {
    TN_CHECK_NULL_ARG_IN(api, a, "self");
    TN_CHECK_NULL_ARG_IN(api, b, "other");
    if (check_bool_sub(op, a, b) < 0) return NULL;
    tn_dtype dt = compute_dtype(op, a, b);
    tn_tensor *bb = NULL;
    if (alpha != 1) { /* a + alpha * b */
        tn_pw_ctx c = {alpha, 0};
        if (!(bb = tn__pw_unary("mul", TN_PW_muls, b, dt, &c))) return NULL;
    }
    tn_tensor *out = tn__pw_binary(op->name, op->code, a, bb ? bb : b, dt, dt);
    tn_release(bb);
    if (!out) return NULL;
    if (tn__needs_grad(2, (const tn_tensor *[]){a, b}) && record(op, out, a, b, alpha) < 0) {
        tn_release(out);
        return NULL;
    }
    return tn__ret(out);
}

tn_tensor *tn_add(const tn_tensor *a, const tn_tensor *b) { return binary(__func__, &op_add, a, b, 1); }
tn_tensor *tn_sub(const tn_tensor *a, const tn_tensor *b) { return binary(__func__, &op_sub, a, b, 1); }
tn_tensor *tn_mul(const tn_tensor *a, const tn_tensor *b) { return binary(__func__, &op_mul, a, b, 1); }
tn_tensor *tn_div(const tn_tensor *a, const tn_tensor *b) { return binary(__func__, &op_div, a, b, 1); }
tn_tensor *tn_pow(const tn_tensor *a, const tn_tensor *b) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_POW, 2, (const tn_tensor *[]){a, b}))
        return tn__autocast_done(&f, f.ok ? tn_pow(f.t[0], f.t[1]) : NULL);
    return binary(__func__, &op_pow, a, b, 1);
}
tn_tensor *tn_maximum(const tn_tensor *a, const tn_tensor *b) {
    return binary(__func__, &op_maximum, a, b, 1);
}
tn_tensor *tn_minimum(const tn_tensor *a, const tn_tensor *b) {
    return binary(__func__, &op_minimum, a, b, 1);
}
tn_tensor *tn_add_alpha(const tn_tensor *a, const tn_tensor *b, double alpha) {
    return binary(__func__, &op_add, a, b, alpha);
}

/* ---- comparisons ----------------------------------------------------------------- */

static tn_tensor *compare(const char *api, const char *name, tn_pw_code code, const tn_tensor *a,
                          const tn_tensor *b) {
    TN_CHECK_NULL_ARG_IN(api, a, "self");
    TN_CHECK_NULL_ARG_IN(api, b, "other");
    return tn__ret(tn__pw_binary(name, code, a, b, tn__promote(a, b), TN_BOOL));
}

tn_tensor *tn_eq(const tn_tensor *a, const tn_tensor *b) { return compare(__func__, "eq", TN_PW_eq, a, b); }
tn_tensor *tn_ne(const tn_tensor *a, const tn_tensor *b) { return compare(__func__, "ne", TN_PW_ne, a, b); }
tn_tensor *tn_lt(const tn_tensor *a, const tn_tensor *b) { return compare(__func__, "lt", TN_PW_lt, a, b); }
tn_tensor *tn_le(const tn_tensor *a, const tn_tensor *b) { return compare(__func__, "le", TN_PW_le, a, b); }
tn_tensor *tn_gt(const tn_tensor *a, const tn_tensor *b) { return compare(__func__, "gt", TN_PW_gt, a, b); }
tn_tensor *tn_ge(const tn_tensor *a, const tn_tensor *b) { return compare(__func__, "ge", TN_PW_ge, a, b); }

/* ---- masked zero (differentiable in x) -------------------------------------------- */

static tn_status masked_zero_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *m = tn__node_unpack(n, 0);
    TN_TRY(m);
    gi[0] = tn__masked_zero(go[0], m);
    tn_release(m);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info masked_zero_fn = {"MaskedFillBackward0", masked_zero_bw};

tn_tensor *tn__masked_zero(const tn_tensor *x, const tn_tensor *mask) {
    int nd;
    int64_t shape[TN_MAX_DIMS];
    tn_device dev;
    if (!tn__is_float(x->dtype)) {
        tn__error(TN_ERR_DTYPE, "\"masked_fill\" not implemented for '%s'",
                  tn_dtype_name(x->dtype));
        return NULL;
    }
    if (tn__result_device(2, (const tn_tensor *[]){x, mask}, &dev) < 0) return NULL;
    if (tn__broadcast_shape(x->ndim, x->shape, mask->ndim, mask->shape, &nd, shape) < 0)
        return NULL;
    tn_tensor *out = tn__empty_on(nd, shape, x->dtype, dev);
    tn_tensor *xd = out ? tn__on_device(x, dev) : NULL, *md = xd ? tn__on_device(mask, dev) : NULL;
    tn_status st0 = md ? tn__dev_pointwise(TN_PW_MASKED_ZERO, x->dtype, 3,
                                           (tn_tensor *const[]){out, xd, md}, NULL, false)
                       : tn_last_status();
    tn_release(xd);
    tn_release(md);
    if (st0 < 0) {
        tn_release(out);
        return NULL;
    }
    if (tn__needs_grad(1, &x)) {
        tn_node *n = tn__node_new(&masked_zero_fn, 1, &x, 1, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) st = tn__node_save(n, 0, mask, false);
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            return NULL;
        }
    }
    return tn__ret(out);
}

/* ---- out= forms ------------------------------------------------------------------ */

static tn_status binary_out(const char *api, const binop *op, tn_tensor *out, const tn_tensor *a,
                            const tn_tensor *b) {
    TN_CHECK_NULL_ARG_ST_IN(api, out, "out");
    TN_CHECK_NULL_ARG_ST_IN(api, a, "self");
    TN_CHECK_NULL_ARG_ST_IN(api, b, "other");
    if (tn__needs_grad(3, (const tn_tensor *[]){out, a, b}))
        return tn__error(TN_ERR_AUTOGRAD,
                         "%s(): functions with out=... arguments don't support automatic "
                         "differentiation, but one of the arguments requires grad.",
                         op->name);
    tn_dtype dt = compute_dtype(op, a, b);
    tn_status st = check_bool_sub(op, a, b);
    if (st == TN_OK) st = tn__inplace_prepare(op->name, out, NULL, dt);
    int nd;
    int64_t shape[TN_MAX_DIMS];
    if (st == TN_OK) st = tn__broadcast_shape(a->ndim, a->shape, b->ndim, b->shape, &nd, shape);
    if (st == TN_OK) st = tn__check_out_shape(out, nd, shape);
    if (st < 0) return st;
    if (out->dtype != dt)
        return tn__error(TN_ERR_DTYPE, "%s(): expected out dtype %s, got %s", op->name,
                         tn_dtype_name(dt), tn_dtype_name(out->dtype));
    st = tn__pw_binary_into(op->name, op->code, out, a, b, dt);
    if (st == TN_OK) tn__version_bump(out, op->name);
    return st;
}

tn_status tn_add_out(tn_tensor *out, const tn_tensor *a, const tn_tensor *b) {
    return binary_out(__func__, &op_add, out, a, b);
}
tn_status tn_mul_out(tn_tensor *out, const tn_tensor *a, const tn_tensor *b) {
    return binary_out(__func__, &op_mul, out, a, b);
}

/* ---- in-place -------------------------------------------------------------------- */

/* self op= b. With autograd, the node takes self's old history as input 0;
 * mul_/div_ keep a copy of self's old value when b needs its gradient. */
static tn_status binary_(const char *api, const binop *op, const char *name, tn_tensor *self, const tn_tensor *b) {
    TN_CHECK_NULL_ARG_ST_IN(api, self, "self");
    TN_CHECK_NULL_ARG_ST_IN(api, b, "other");
    tn_dtype dt = compute_dtype(op, self, b);
    tn_status st = check_bool_sub(op, self, b);
    if (st == TN_OK) st = tn__inplace_prepare(op->name, self, b, dt);
    if (st == TN_OK) st = tn__pw_check_dtype(op->name, op->code, self->dtype);
    if (st < 0) return st;
    tn_node *n = NULL;
    tn_tensor *src = NULL;
    if (b->storage == self->storage && !tn__same_shape(b, self))
        if (!(src = tn__copy_as(b, b->dtype))) return tn_last_status(); /* overlap */
    if (tn__needs_grad(2, (const tn_tensor *[]){self, b})) {
        n = tn__node_new(op->grad, 2, (const tn_tensor *[]){self, b}, 3, 1);
        if (!n) st = tn_last_status();
        else
            binary_p(n)->alpha = 1;
        if (n && op->save_a && tn__requires_grad(b)) {
            tn_tensor *old = tn__clone_recorded(self); /* with history: double backward */
            st = old ? tn__node_save(n, 0, old, false) : tn_last_status();
            tn_release(old);
        }
        if (st == TN_OK && n && op->save_b && (op != &op_mul || tn__requires_grad(self)))
            st = tn__node_save(n, 1, b, false);
    }
    if (st < 0) tn__node_release(n);
    tn_rebase rb;
    if (st == TN_OK) st = tn__inplace_prepare_rebase(self, n, &rb); /* consumes n */
    if (st == TN_OK) {
        st = tn__pw_binary_into(op->name, op->code, self, self, src ? src : b, self->dtype);
        if (st < 0) tn__inplace_abandon(&rb);
    }
    tn_release(src);
    return st < 0 ? st : tn__inplace_commit(self, &rb, name);
}

tn_status tn_add_(tn_tensor *a, const tn_tensor *b) { return binary_(__func__, &op_add, "add_", a, b); }
tn_status tn_sub_(tn_tensor *a, const tn_tensor *b) { return binary_(__func__, &op_sub, "sub_", a, b); }
tn_status tn_mul_(tn_tensor *a, const tn_tensor *b) { return binary_(__func__, &op_mul, "mul_", a, b); }
tn_status tn_div_(tn_tensor *a, const tn_tensor *b) { return binary_(__func__, &op_div, "div_", a, b); }

/* dst += src, no autograd, no version bump (gradient accumulation). */
tn_status tn__add_into(tn_tensor *dst, const tn_tensor *src) {
    return tn__pw_binary_into("add", TN_PW_add, dst, dst, src, dst->dtype);
}
