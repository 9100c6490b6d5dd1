/* tests/ops/rows_pointwise.c — rows of the pointwise ops: binary (broadcasting), scalar forms,
 * comparisons, unary, clamp, gelu, silu, the out= forms. References: the op's value per element
 * (f below), over broadcast inputs (tt_ref_map1 / tt_ref_map2). */
#include <math.h>

#include "op_table.h"

/* Shapes every unary row runs: a matrix (also transposed and strided), 0-D, empty. */
static const tt_case unary_cases[] = {
    {.tag = "2x3", .ndim = {2}, .shape = {{2, 3}}},
    {.tag = "3x4x2", .ndim = {3}, .shape = {{3, 4, 2}}},
    {.tag = "0-d", .ndim = {0}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}},
};
/* Shapes every binary row runs: same shapes, broadcasts, a 0-D operand, empty. */
static const tt_case binary_cases[] = {
    {.tag = "same", .ndim = {2, 2}, .shape = {{2, 3}, {2, 3}}},
    {.tag = "bcast_row", .ndim = {2, 1}, .shape = {{2, 3}, {3}}},
    {.tag = "bcast_both", .ndim = {3, 2}, .shape = {{4, 1, 3}, {2, 1}}},
    {.tag = "bcast_0d", .ndim = {2, 0}, .shape = {{2, 3}, {0}}},
    {.tag = "0-d", .ndim = {0, 0}},
    {.tag = "empty", .ndim = {2, 1}, .shape = {{0, 3}, {3}}},
};

#define CALL1(n, expr)                                                                             \
    static tn_tensor *call_##n(tn_tensor *const *in, const double *p) {                            \
        (void)p;                                                                                   \
        return expr;                                                                               \
    }
#define FN(n, expr)                                                                                \
    static double f_##n(double x, double y, const double *p) {                                     \
        (void)x, (void)y, (void)p;                                                                 \
        return expr;                                                                               \
    }

/* ---- binary ---------------------------------------------------------------------------- */
CALL1(add, tn_add(in[0], in[1]))
CALL1(sub, tn_sub(in[0], in[1]))
CALL1(mul, tn_mul(in[0], in[1]))
CALL1(div, tn_div(in[0], in[1]))
CALL1(pow, tn_pow(in[0], in[1]))
CALL1(maximum, tn_maximum(in[0], in[1]))
CALL1(minimum, tn_minimum(in[0], in[1]))
CALL1(add_alpha, tn_add_alpha(in[0], in[1], p[0])) /* p: alpha */
FN(add, x + y)
FN(sub, x - y)
FN(mul, x *y)
FN(div, x / y)
FN(pow, pow(x, y))
FN(maximum, x > y ? x : y)
FN(minimum, x < y ? x : y)
FN(add_alpha, x + p[0] * y)
static const tt_case alpha_cases[] = {
    {.tag = "bcast_row", .ndim = {2, 1}, .shape = {{2, 3}, {3}}, .p = {-2.5}},
    {.tag = "same", .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}}, .p = {0.5}},
};

/* ---- scalar forms: p[0] is the scalar ---------------------------------------------------- */
CALL1(add_scalar, tn_add_scalar(in[0], p[0]))
CALL1(sub_scalar, tn_sub_scalar(in[0], p[0]))
CALL1(mul_scalar, tn_mul_scalar(in[0], p[0]))
CALL1(div_scalar, tn_div_scalar(in[0], p[0]))
CALL1(pow_scalar, tn_pow_scalar(in[0], p[0]))
CALL1(rsub_scalar, tn_rsub_scalar(in[0], p[0]))
FN(add_scalar, x + p[0])
FN(sub_scalar, x - p[0])
FN(mul_scalar, x *p[0])
FN(div_scalar, x / p[0])
FN(pow_scalar, pow(x, p[0]))
FN(rsub_scalar, p[0] - x)
static const tt_case scalar_cases[] = {
    {.tag = "2x3", .ndim = {1}, .shape = {{6}}, .p = {1.75}},
    {.tag = "3x4_int", .ndim = {2}, .shape = {{3, 4}}, .p = {-3}},
    {.tag = "0-d", .ndim = {0}, .p = {0.4}},
    {.tag = "empty", .ndim = {2}, .shape = {{2, 0}}, .p = {2}},
};
static const tt_case pow_scalar_cases[] = {
    {.tag = "2", .ndim = {2}, .shape = {{2, 3}}, .p = {2}},
    {.tag = "0.5", .ndim = {2}, .shape = {{3, 4}}, .p = {0.5}},
    {.tag = "-1.5", .ndim = {1}, .shape = {{5}}, .p = {-1.5}},
    {.tag = "0", .ndim = {0}, .p = {0}},
    {.tag = "empty", .ndim = {1}, .shape = {{0}}, .p = {3}},
};

/* ---- comparisons ------------------------------------------------------------------------- */
CALL1(eq, tn_eq(in[0], in[1]))
CALL1(ne, tn_ne(in[0], in[1]))
CALL1(lt, tn_lt(in[0], in[1]))
CALL1(le, tn_le(in[0], in[1]))
CALL1(gt, tn_gt(in[0], in[1]))
CALL1(ge, tn_ge(in[0], in[1]))
FN(eq, x == y)
FN(ne, x != y)
FN(lt, x < y)
FN(le, x <= y)
FN(gt, x > y)
FN(ge, x >= y)

/* ---- unary ------------------------------------------------------------------------------- */
CALL1(neg, tn_neg(in[0]))
CALL1(exp, tn_exp(in[0]))
CALL1(log, tn_log(in[0]))
CALL1(sqrt, tn_sqrt(in[0]))
CALL1(abs, tn_abs(in[0]))
CALL1(sigmoid, tn_sigmoid(in[0]))
CALL1(tanh, tn_tanh(in[0]))
CALL1(relu, tn_relu(in[0]))
CALL1(sin, tn_sin(in[0]))
CALL1(cos, tn_cos(in[0]))
CALL1(clamp, tn_clamp(in[0], p[0], p[1])) /* p: lo, hi */
CALL1(gelu, tn_gelu(in[0], p[0] != 0))    /* p: tanh approximation */
CALL1(silu, tn_silu(in[0]))
FN(neg, -x)
FN(exp, exp(x))
FN(log, log(x))
FN(sqrt, sqrt(x))
FN(abs, fabs(x))
FN(sigmoid, 1 / (1 + exp(-x)))
FN(tanh, tanh(x))
FN(relu, x > 0 ? x : 0)
FN(sin, sin(x))
FN(cos, cos(x))
/* min(max(x, lo), hi); a NaN bound: NaN */
FN(clamp, isnan(p[0]) || isnan(p[1]) ? NAN : fmin(fmax(x, p[0]), p[1]))
FN(gelu, p[0] ? 0.5 * x *(1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)))
              : 0.5 * x * (1 + erf(x / sqrt(2))))
FN(silu, x / (1 + exp(-x)))
static const tt_case clamp_cases[] = {
    {.tag = "both", .ndim = {2}, .shape = {{3, 4}}, .p = {-0.5, 1.0}},
    {.tag = "min", .ndim = {2}, .shape = {{2, 3}}, .p = {0.25, INFINITY}},
    {.tag = "max", .ndim = {1}, .shape = {{5}}, .p = {-INFINITY, 0.25}},
    {.tag = "0-d", .ndim = {0}, .p = {-1, 1}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 2}}, .p = {-1, 1}},
    {.tag = "crossed", .ndim = {2}, .shape = {{2, 3}}, .p = {0.5, -0.5}}, /* hi everywhere */
};
static const tt_case gelu_cases[] = {
    {.tag = "erf", .ndim = {2}, .shape = {{3, 4}}, .p = {0}},
    {.tag = "tanh", .ndim = {3}, .shape = {{2, 3, 2}}, .p = {1}},
    {.tag = "0-d", .ndim = {0}, .p = {1}},
    {.tag = "empty", .ndim = {1}, .shape = {{0}}, .p = {0}},
};

/* ---- out= forms: out is made here, of the inputs' broadcast shape and a's dtype, in
 * tt_scoped's scope ----------------------------------------------------------------------- */
static tn_tensor *out_form(tn_tensor *const *in, bool mul) {
    int na = tn_ndim(in[0]), nb = tn_ndim(in[1]);
    if (na < 0 || nb < 0) return NULL;
    int nd = na > nb ? na : nb;
    int64_t shape[TN_MAX_DIMS];
    for (int d = 0; d < nd; d++) { /* a size that does not broadcast: out_ refuses it */
        int64_t sa = d < na ? tn_shape(in[0])[na - 1 - d] : 1;
        int64_t sb = d < nb ? tn_shape(in[1])[nb - 1 - d] : 1;
        shape[nd - 1 - d] = sa == 1 ? sb : sa;
    }
    tn_tensor *out = tn_empty(nd, shape, tn_dtype_of(in[0]));
    tn_tensor *dev = out ? tn_to(out, TN_DTYPE_SAME, tn_device_of(in[0])) : NULL;
    if (!dev) return NULL;
    tn_status st = mul ? tn_mul_out(dev, in[0], in[1]) : tn_add_out(dev, in[0], in[1]);
    return st == TN_OK ? dev : NULL;
}
static tn_tensor *body_add_out(tn_tensor *const *in, const double *p) {
    (void)p;
    return out_form(in, false);
}
static tn_tensor *body_mul_out(tn_tensor *const *in, const double *p) {
    (void)p;
    return out_form(in, true);
}
static tn_tensor *call_add_out(tn_tensor *const *in, const double *p) {
    return tt_scoped(body_add_out, in, p);
}
static tn_tensor *call_mul_out(tn_tensor *const *in, const double *p) {
    return tt_scoped(body_mul_out, in, p);
}

const tt_op tt_rows_pointwise[] = {
    {.name = "add",
     .torch = "torch.add",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_add,
     .ref = tt_ref_map2,
     .f = f_add,
     .golden = "add"},
    {.name = "sub",
     .torch = "torch.sub",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_sub,
     .ref = tt_ref_map2,
     .f = f_sub,
     .golden = "sub"},
    {.name = "mul",
     .torch = "torch.mul",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_mul,
     .ref = tt_ref_map2,
     .f = f_mul,
     .golden = "mul"},
    {.name = "div",
     .torch = "torch.div",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_AWAY},
     TT_CASES(binary_cases),
     .call = call_div,
     .ref = tt_ref_map2,
     .f = f_div,
     .golden = "div"},
    {.name = "pow",
     .torch = "torch.pow",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_POS, TT_SMALL},
     TT_CASES(binary_cases),
     .call = call_pow,
     .ref = tt_ref_map2,
     .f = f_pow,
     .golden = "pow"},
    {.name = "maximum",
     .torch = "torch.maximum",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_maximum,
     .ref = tt_ref_map2,
     .f = f_maximum,
     .golden = "maximum"},
    {.name = "minimum",
     .torch = "torch.minimum",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_minimum,
     .ref = tt_ref_map2,
     .f = f_minimum,
     .golden = "minimum"},
    {.name = "add_alpha",
     .torch = "torch.add(alpha=)",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(alpha_cases),
     .call = call_add_alpha,
     .ref = tt_ref_map2,
     .f = f_add_alpha,
     .golden = "add_alpha"},
    {.name = "add_scalar",
     .torch = "torch.add(Tensor, Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(scalar_cases),
     .call = call_add_scalar,
     .ref = tt_ref_map1,
     .f = f_add_scalar,
     .golden = "add_scalar"},
    {.name = "sub_scalar",
     .torch = "torch.sub(Tensor, Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(scalar_cases),
     .call = call_sub_scalar,
     .ref = tt_ref_map1,
     .f = f_sub_scalar,
     .golden = "sub_scalar"},
    {.name = "mul_scalar",
     .torch = "torch.mul(Tensor, Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(scalar_cases),
     .call = call_mul_scalar,
     .ref = tt_ref_map1,
     .f = f_mul_scalar,
     .golden = "mul_scalar"},
    {.name = "div_scalar",
     .torch = "torch.div(Tensor, Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(scalar_cases),
     .call = call_div_scalar,
     .ref = tt_ref_map1,
     .f = f_div_scalar,
     .golden = "div_scalar"},
    {.name = "pow_scalar",
     .torch = "torch.pow(Tensor, Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_POS},
     TT_CASES(pow_scalar_cases),
     .call = call_pow_scalar,
     .ref = tt_ref_map1,
     .f = f_pow_scalar,
     .golden = "pow_scalar"},
    {.name = "rsub_scalar",
     .torch = "torch.rsub(Tensor, Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(scalar_cases),
     .call = call_rsub_scalar,
     .ref = tt_ref_map1,
     .f = f_rsub_scalar,
     .golden = "rsub_scalar"},
    {.name = "eq",
     .torch = "torch.eq",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_eq,
     .ref = tt_ref_map2,
     .f = f_eq,
     .golden = "eq",
     .flags = TT_NO_GRAD},
    {.name = "ne",
     .torch = "torch.ne",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_ne,
     .ref = tt_ref_map2,
     .f = f_ne,
     .golden = "ne",
     .flags = TT_NO_GRAD},
    {.name = "lt",
     .torch = "torch.lt",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_lt,
     .ref = tt_ref_map2,
     .f = f_lt,
     .golden = "lt",
     .flags = TT_NO_GRAD},
    {.name = "le",
     .torch = "torch.le",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_le,
     .ref = tt_ref_map2,
     .f = f_le,
     .golden = "le",
     .flags = TT_NO_GRAD},
    {.name = "gt",
     .torch = "torch.gt",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_gt,
     .ref = tt_ref_map2,
     .f = f_gt,
     .golden = "gt",
     .flags = TT_NO_GRAD},
    {.name = "ge",
     .torch = "torch.ge",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_ge,
     .ref = tt_ref_map2,
     .f = f_ge,
     .golden = "ge",
     .flags = TT_NO_GRAD},
    {.name = "neg",
     .torch = "torch.neg",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_neg,
     .ref = tt_ref_map1,
     .f = f_neg,
     .golden = "neg"},
    {.name = "exp",
     .torch = "torch.exp",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_SMALL},
     TT_CASES(unary_cases),
     .call = call_exp,
     .ref = tt_ref_map1,
     .f = f_exp,
     .golden = "exp"},
    {.name = "log",
     .torch = "torch.log",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_POS},
     TT_CASES(unary_cases),
     .call = call_log,
     .ref = tt_ref_map1,
     .f = f_log,
     .golden = "log"},
    {.name = "sqrt",
     .torch = "torch.sqrt",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_POS},
     TT_CASES(unary_cases),
     .call = call_sqrt,
     .ref = tt_ref_map1,
     .f = f_sqrt,
     .golden = "sqrt"},
    {.name = "abs",
     .torch = "torch.abs",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_abs,
     .ref = tt_ref_map1,
     .f = f_abs,
     .golden = "abs"},
    {.name = "sigmoid",
     .torch = "torch.sigmoid",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_sigmoid,
     .ref = tt_ref_map1,
     .f = f_sigmoid,
     .golden = "sigmoid"},
    {.name = "tanh",
     .torch = "torch.tanh",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_tanh,
     .ref = tt_ref_map1,
     .f = f_tanh,
     .golden = "tanh"},
    {.name = "relu",
     .torch = "torch.relu",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_relu,
     .ref = tt_ref_map1,
     .f = f_relu,
     .golden = "relu"},
    {.name = "sin",
     .torch = "torch.sin",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_sin,
     .ref = tt_ref_map1,
     .f = f_sin,
     .golden = "sin"},
    {.name = "cos",
     .torch = "torch.cos",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_cos,
     .ref = tt_ref_map1,
     .f = f_cos,
     .golden = "cos"},
    {.name = "clamp",
     .torch = "torch.clamp",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(clamp_cases),
     .call = call_clamp,
     .ref = tt_ref_map1,
     .f = f_clamp,
     .golden = "clamp clamp_min clamp_max"},
    {.name = "gelu",
     .torch = "torch.nn.functional.gelu",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(gelu_cases),
     .call = call_gelu,
     .ref = tt_ref_map1,
     .f = f_gelu,
     .golden = "gelu"},
    {.name = "silu",
     .torch = "torch.nn.functional.silu",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_silu,
     .ref = tt_ref_map1,
     .f = f_silu,
     .golden = "silu"},
    {.name = "add_out",
     .torch = "torch.add(out=)",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_add_out,
     .ref = tt_ref_map2,
     .f = f_add,
     .no_golden = "add's values (its golden cases); out= only chooses where they go",
     .flags = TT_NO_GRAD},
    {.name = "mul_out",
     .torch = "torch.mul(out=)",
     .arity = 2,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_mul_out,
     .ref = tt_ref_map2,
     .f = f_mul,
     .no_golden = "mul's values (its golden cases); out= only chooses where they go",
     .flags = TT_NO_GRAD},
};
const int tt_nrows_pointwise = (int)(sizeof tt_rows_pointwise / sizeof tt_rows_pointwise[0]);
