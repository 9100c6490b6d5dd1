/* tests/ops/rows_inplace.c — rows of the in-place ops. Each adapter runs the op on y = a * 1
 * (a non-leaf copy, as scripts/gen_golden.py's ip_ cases) and returns y; the reference is the
 * out-of-place row's (add_ is add's), so the in-place kernel is checked against the same loops. */
#include <string.h>

#include "op_table.h"

/* y = in[0] * 1, then the op on y: y, or NULL when either failed (y is then released by
 * tt_scoped's scope) */
#define CALL(n, expr)                                                                              \
    static tn_tensor *body_##n(tn_tensor *const *in, const double *p) {                            \
        (void)p;                                                                                   \
        tn_tensor *y = tn_mul_scalar(in[0], 1);                                                    \
        return y && (expr) == TN_OK ? y : NULL;                                                    \
    }                                                                                              \
    static tn_tensor *call_##n(tn_tensor *const *in, const double *p) {                            \
        return tt_scoped(body_##n, in, p);                                                         \
    }
CALL(add_, tn_add_(y, in[1]))
CALL(sub_, tn_sub_(y, in[1]))
CALL(mul_, tn_mul_(y, in[1]))
CALL(div_, tn_div_(y, in[1]))
CALL(add_scalar_, tn_add_scalar_(y, p[0]))
CALL(mul_scalar_, tn_mul_scalar_(y, p[0]))
CALL(zero_, tn_zero_(y))
CALL(fill_, tn_fill_(y, p[0]))
CALL(clamp_, tn_clamp_(y, p[0], p[1]))
CALL(relu_, tn_relu_(y))
CALL(sigmoid_, tn_sigmoid_(y))
CALL(exp_, tn_exp_(y))
CALL(neg_, tn_neg_(y))
CALL(masked_fill_, tn_masked_fill_(y, in[1], p[0]))

/* The out-of-place row's reference (the name without its trailing underscore). */
static bool ref_inplace(tt_ref_io *io) {
    char name[64];
    size_t n = strlen(io->op->name);
    if (n < 2 || n >= sizeof name) return false;
    memcpy(name, io->op->name, n - 1);
    name[n - 1] = 0;
    const tt_op *self = io->op, *base = tt_op_find(name);
    if (!base) return false;
    io->op = base;
    bool ok = base->ref(io);
    io->op = self;
    return ok;
}
static double f_fill(double x, double y, const double *p) {
    (void)x, (void)y;
    return p[0];
}
static double f_zero(double x, double y, const double *p) {
    (void)x, (void)y, (void)p;
    return 0;
}

static const tt_case unary_cases[] = {
    {.tag = "2x3", .ndim = {2}, .shape = {{2, 3}}, .p = {2, 3}},
    {.tag = "3x4", .ndim = {2}, .shape = {{3, 4}}, .p = {-3, 1}},
    {.tag = "0-d", .ndim = {0}, .p = {-1, 1}},
    {.tag = "empty", .ndim = {2}, .shape = {{0, 3}}, .p = {2, 3}},
};
/* b broadcasts to a's shape */
static const tt_case binary_cases[] = {
    {.tag = "same", .ndim = {2, 2}, .shape = {{2, 3}, {2, 3}}, .p = {2}},
    {.tag = "bcast_row", .ndim = {2, 1}, .shape = {{2, 3}, {3}}, .p = {-1}},
    {.tag = "bcast_0d", .ndim = {2, 0}, .shape = {{3, 4}}, .p = {0}},
    {.tag = "0-d", .ndim = {0, 0}, .p = {3}},
    {.tag = "empty", .ndim = {2, 1}, .shape = {{0, 3}, {3}}, .p = {1}},
};
static const tt_case clamp_cases[] = {
    {.tag = "both", .ndim = {2}, .shape = {{3, 4}}, .p = {-0.5, 1}},
    {.tag = "0-d", .ndim = {0}, .p = {-1, 0.5}},
    {.tag = "empty", .ndim = {1}, .shape = {{0}}, .p = {0, 1}},
};

const tt_op tt_rows_inplace[] = {
    {.name = "add_",
     .torch = "Tensor.add_",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_add_,
     .ref = ref_inplace,
     .golden = "ip_add_"},
    {.name = "sub_",
     .torch = "Tensor.sub_",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_sub_,
     .ref = ref_inplace,
     .golden = "ip_sub_"},
    {.name = "mul_",
     .torch = "Tensor.mul_",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(binary_cases),
     .call = call_mul_,
     .ref = ref_inplace,
     .golden = "ip_mul_ ipv_mul_"},
    {.name = "div_",
     .torch = "Tensor.div_",
     .arity = 2,
     .diff = 3,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_AWAY},
     TT_CASES(binary_cases),
     .call = call_div_,
     .ref = ref_inplace,
     .golden = "ip_div_"},
    {.name = "add_scalar_",
     .torch = "Tensor.add_(Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_add_scalar_,
     .ref = ref_inplace,
     .golden = "ip_add_scalar_ ipv_add_scalar_"},
    {.name = "mul_scalar_",
     .torch = "Tensor.mul_(Number)",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_mul_scalar_,
     .ref = ref_inplace,
     .golden = "ip_mul_scalar_"},
    {.name = "zero_",
     .torch = "Tensor.zero_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_zero_,
     .ref = tt_ref_map1,
     .f = f_zero,
     .golden = "ip_zero_ ipv_zero_"},
    {.name = "fill_",
     .torch = "Tensor.fill_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_fill_,
     .ref = tt_ref_map1,
     .f = f_fill,
     .golden = "ip_fill_"},
    {.name = "clamp_",
     .torch = "Tensor.clamp_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(clamp_cases),
     .call = call_clamp_,
     .ref = ref_inplace,
     .golden = "ip_clamp_"},
    {.name = "relu_",
     .torch = "Tensor.relu_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_relu_,
     .ref = ref_inplace,
     .golden = "ip_relu_"},
    {.name = "sigmoid_",
     .torch = "Tensor.sigmoid_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_sigmoid_,
     .ref = ref_inplace,
     .golden = "ip_sigmoid_"},
    {.name = "exp_",
     .torch = "Tensor.exp_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_FLOATS,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_SMALL},
     TT_CASES(unary_cases),
     .call = call_exp_,
     .ref = ref_inplace,
     .golden = "ip_exp_ ipv_exp_"},
    {.name = "neg_",
     .torch = "Tensor.neg_",
     .arity = 1,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     TT_CASES(unary_cases),
     .call = call_neg_,
     .ref = ref_inplace,
     .golden = "ip_neg_"},
    {.name = "masked_fill_",
     .torch = "Tensor.masked_fill_",
     .arity = 2,
     .diff = 1,
     .dtypes = TT_NUMERIC,
     .backends = TT_ALL_BACKENDS,
     .domain = {TT_ANY, TT_MASK},
     TT_CASES(binary_cases),
     .call = call_masked_fill_,
     .ref = ref_inplace,
     .golden = "ip_masked_fill_ ipv_masked_fill_"},
};
const int tt_nrows_inplace = (int)(sizeof tt_rows_inplace / sizeof tt_rows_inplace[0]);
