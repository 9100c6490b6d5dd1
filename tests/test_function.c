/* tests/test_function.c — custom autograd functions (include/tenet/function.h),
 * torch.autograd.Function's behaviours as PyTorch 1.13 shows them (values and
 * texts checked there; the scenarios follow test/test_autograd.py's
 * test_function, test_function_returns_input, test_mark_non_differentiable,
 * test_dirty_*, test_once_differentiable, test_save_none_for_backward and
 * test_saved_variable_*), finite-difference gradient checks, anomaly mode,
 * the error contract, an allocation-failure walk and threads. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tenet/testing.h>

#define NOINLINE __attribute__((noinline))
#define MODIFIED_MSG                                                                               \
    "one of the variables needed for gradient computation has been modified by an "                \
    "inplace operation: "
#define SECOND_TIME_MSG "Trying to backward through the graph a second time"
#define LEAF_DIRTY_MSG "a leaf Variable that requires grad has been used in an in-place operation."
#define ONCE_MSG                                                                                   \
    "trying to differentiate twice a function that was marked with @once_differentiable"

static const int64_t S2[] = {2}, S3[] = {3};

static tn_tensor *vec3(double x, double y, double z, bool rg) {
    return tt_f32(1, S3, (const float[]){(float)x, (float)y, (float)z}, rg);
}
static tn_tensor *vec2(double x, double y, bool rg) {
    return tt_f32(1, S2, (const float[]){(float)x, (float)y}, rg);
}

/* the gradient as returned by a callback: its count, or the failing status */
static int one_grad(tn_tensor **gi, tn_tensor *g) {
    gi[0] = g;
    return g ? 1 : tn_last_status();
}

/* ---- the functions ----------------------------------------------------------- */

/* MyExp: y = exp(x), saves its output (test_function's exp). */
static int exp_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                  tn_tensor **out) {
    out[0] = tn_exp(in[0]);
    if (!out[0]) return tn_last_status();
    return tn_function_save_for_backward(ctx, 1, out);
}
static int exp_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    tn_tensor *y;
    tn_status st = tn_function_saved_tensors(ctx, 1, &y);
    if (st < 0) return st;
    tn_tensor *g = tn_mul(go[0], y);
    tn_release(y);
    return one_grad(gi, g);
}
static const tn_function MY_EXP = {.name = "MyExpBackward", .forward = exp_fw, .backward = exp_bw};

/* Sq: x * x, saves its input; backward 2 x g with tenet ops (double backward). */
static int sq_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out, tn_tensor **out) {
    if (!(out[0] = tn_mul(in[0], in[0]))) return tn_last_status();
    return tn_function_save_for_backward(ctx, 1, in);
}
static int sq_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    tn_tensor *x;
    tn_status st = tn_function_saved_tensors(ctx, 1, &x);
    if (st < 0) return st;
    tn_tensor *xg = tn_mul(x, go[0]), *g = xg ? tn_mul_scalar(xg, 2) : NULL;
    tn_release(xg);
    tn_release(x);
    return one_grad(gi, g);
}
static const tn_function SQ = {.name = "SqBackward", .forward = sq_fw, .backward = sq_bw};
static const tn_function SQ_ONCE = {.name = "SqOnceBackward",
                                    .forward = sq_fw,
                                    .backward = sq_bw,
                                    .flags = TN_FUNCTION_ONCE_DIFFERENTIABLE};

/* TT: (a * b, a + b), saves both inputs. */
static int tt_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out, tn_tensor **out) {
    out[0] = tn_mul(in[0], in[1]);
    out[1] = tn_add(in[0], in[1]);
    if (!out[0] || !out[1]) return tn_last_status();
    return tn_function_save_for_backward(ctx, 2, in);
}
static int tt_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    tn_tensor *s[2];
    tn_status st = tn_function_saved_tensors(ctx, 2, s);
    if (st < 0) return st;
    tn_tensor *ga = tn_mul(go[0], s[1]), *gb = tn_mul(go[0], s[0]);
    gi[0] = ga ? tn_add(ga, go[1]) : NULL;
    gi[1] = gb ? tn_add(gb, go[1]) : NULL;
    tn_release(ga);
    tn_release(gb);
    tn_release(s[0]);
    tn_release(s[1]);
    return gi[0] && gi[1] ? 2 : tn_last_status();
}
static const tn_function TT = {.name = "TTBackward", .forward = tt_fw, .backward = tt_bw};

/* MulInplace: x *= 2 in place, marked dirty first (test_dirty). */
static int mul2_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                   tn_tensor **out) {
    tn_status st = tn_function_mark_dirty(ctx, in[0]);
    if (st == TN_OK) st = tn_mul_scalar_(in[0], 2);
    if (st == TN_OK) out[0] = tn_retain(in[0]);
    return st;
}
/* The same in PyTorch's usual order: write, then mark dirty; saves x. */
static int mul2_late_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                        tn_tensor **out) {
    tn_status st = tn_mul_scalar_(in[0], 2);
    if (st == TN_OK) st = tn_function_mark_dirty(ctx, in[0]);
    if (st == TN_OK) st = tn_function_save_for_backward(ctx, 1, in);
    if (st == TN_OK) out[0] = tn_retain(in[0]);
    return st;
}
static int times2_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                     tn_tensor **gi) {
    return one_grad(gi, tn_mul_scalar(go[0], 2));
}
/* The same, unpacking what forward saved (the version check). */
static int times2_unpack_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                            tn_tensor **gi) {
    tn_tensor *x;
    tn_status st = tn_function_saved_tensors(ctx, 1, &x);
    if (st < 0) return st;
    tn_release(x);
    return one_grad(gi, tn_mul_scalar(go[0], 2));
}
static const tn_function MUL2 = {
    .name = "MulInplaceBackward", .forward = mul2_fw, .backward = times2_bw};
static const tn_function MUL2_LATE = {
    .name = "MulInplaceLateBackward", .forward = mul2_late_fw, .backward = times2_unpack_bw};

/* AddInto: x += y in place (x dirty), gradients g, g. */
static int addinto_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                      tn_tensor **out) {
    tn_status st = tn_function_mark_dirty(ctx, in[0]);
    if (st == TN_OK) st = tn_add_(in[0], in[1]);
    if (st == TN_OK) out[0] = tn_retain(in[0]);
    return st;
}
static int pass2_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                    tn_tensor **gi) {
    gi[0] = tn_retain(go[0]);
    gi[1] = tn_retain(go[0]);
    return 2;
}
static const tn_function ADD_INTO = {
    .name = "AddIntoBackward", .forward = addinto_fw, .backward = pass2_bw};
/* AddInto2(y, x): x += y, the dirty input second. */
static int addinto2_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                       tn_tensor **out) {
    tn_status st = tn_function_mark_dirty(ctx, in[1]);
    if (st == TN_OK) st = tn_add_(in[1], in[0]);
    if (st == TN_OK) out[0] = tn_retain(in[1]);
    return st;
}
static const tn_function ADD_INTO2 = {
    .name = "AddInto2Backward", .forward = addinto2_fw, .backward = pass2_bw};

/* NotReturned: marks x dirty but returns x * 1. */
static int notret_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                     tn_tensor **out) {
    tn_status st = tn_function_mark_dirty(ctx, in[0]);
    if (st == TN_OK) st = tn_mul_scalar_(in[0], 2);
    if (st == TN_OK && !(out[0] = tn_mul_scalar(in[0], 1))) st = tn_last_status();
    return st;
}
static const tn_function NOT_RET = {
    .name = "NotRetBackward", .forward = notret_fw, .backward = times2_bw};

/* TwoOut: x dirty and returned with a copy: refused for a view. */
static int twoout_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                     tn_tensor **out) {
    tn_status st = tn_function_mark_dirty(ctx, in[0]);
    if (st == TN_OK) st = tn_mul_scalar_(in[0], 2);
    if (st < 0) return st;
    out[0] = tn_retain(in[0]);
    return (out[1] = tn_mul_scalar(in[0], 1)) ? TN_OK : tn_last_status();
}
static int sum2_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                   tn_tensor **gi) {
    return one_grad(gi, tn_add(go[0], go[1]));
}
static const tn_function TWO_OUT = {
    .name = "TwoOutBackward", .forward = twoout_fw, .backward = sum2_bw};

/* NonInput: marks its own output dirty (PyTorch warns). */
static int noninput_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                       tn_tensor **out) {
    if (!(out[0] = tn_mul_scalar(in[0], 2))) return tn_last_status();
    return tn_function_mark_dirty(ctx, out[0]);
}
static const tn_function NON_INPUT = {
    .name = "NonInputBackward", .forward = noninput_fw, .backward = times2_bw};

/* Twice: returns one new tensor as both outputs. */
static int twice_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                    tn_tensor **out) {
    if (!(out[0] = tn_mul_scalar(in[0], 2))) return tn_last_status();
    out[1] = tn_retain(out[0]);
    return TN_OK;
}
static int twice_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                    tn_tensor **gi) {
    tn_tensor *s = tn_add(go[0], go[1]), *g = s ? tn_mul_scalar(s, 2) : NULL;
    tn_release(s);
    return one_grad(gi, g);
}
static const tn_function TWICE = {
    .name = "TwiceBackward", .forward = twice_fw, .backward = twice_bw};

/* DoubleInplace: x *= 2 in place, returned twice (test_return_duplicate_inplace). */
static int double_inplace_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                             tn_tensor **out) {
    tn_status st = tn_function_mark_dirty(ctx, in[0]);
    if (st == TN_OK) st = tn_mul_scalar_(in[0], 2);
    if (st < 0) return st;
    out[0] = tn_retain(in[0]);
    out[1] = tn_retain(in[0]);
    return TN_OK;
}
static const tn_function DOUBLE_INPLACE = {
    .name = "DoubleInplaceBackward", .forward = double_inplace_fw, .backward = twice_bw};

/* NDNone: a non-differentiable clone whose backward returns no gradient
 * (test_mark_non_differentiable_none). */
static int clone_nd_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                       tn_tensor **out) {
    if (!(out[0] = tn_clone(in[0]))) return tn_last_status();
    return tn_function_mark_non_differentiable(ctx, out[0]);
}
static int none_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                   tn_tensor **gi) {
    return 1; /* gi[0] stays NULL */
}
static const tn_function ND_NONE = {
    .name = "NDNoneBackward", .forward = clone_nd_fw, .backward = none_bw};

/* Id: returns its input unchanged (test_function_returns_input). */
static int id_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out, tn_tensor **out) {
    out[0] = tn_retain(in[0]);
    return TN_OK;
}
static const tn_function ID = {.name = "IdBackward", .forward = id_fw, .backward = times2_bw};

/* ND: (x * 2, x > 1 (bool), x * 3 marked non-differentiable). */
static double nd_seen[3] = {-1, -1, -1}; /* sums of the gradients backward got */
static tn_dtype nd_seen_dtype;
static int nd_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out, tn_tensor **out) {
    tn_tensor *one = tn_scalar(1, TN_F32);
    out[0] = tn_mul_scalar(in[0], 2);
    out[1] = one ? tn_gt(in[0], one) : NULL;
    out[2] = tn_mul_scalar(in[0], 3);
    tn_release(one);
    if (!out[0] || !out[1] || !out[2]) return tn_last_status();
    return tn_function_mark_non_differentiable(ctx, out[2]);
}
static int nd_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    for (int k = 0; k < 3; k++) {
        tn_tensor *s = tn_sum(go[k]);
        if (s) tn_item(s, &nd_seen[k]);
        tn_release(s);
    }
    nd_seen_dtype = tn_dtype_of(go[1]);
    return one_grad(gi, tn_mul_scalar(go[0], 2));
}
static const tn_function ND = {.name = "NDBackward", .forward = nd_fw, .backward = nd_bw};

/* ND2: its only output is non-differentiable. */
static int nd2_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                  tn_tensor **out) {
    if (!(out[0] = tn_mul_scalar(in[0], 2))) return tn_last_status();
    return tn_function_mark_non_differentiable(ctx, out[0]);
}
static const tn_function ND2 = {.name = "ND2Backward", .forward = nd2_fw, .backward = times2_bw};

/* Probe: records what the context says, in forward and backward. */
static bool probe_fw_needs[2], probe_bw_needs[2], probe_fw_grad_mode = true;
static int probe_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                    tn_tensor **out) {
    for (int i = 0; i < 2; i++)
        probe_fw_needs[i] = tn_function_needs_input_grad(ctx, i);
    probe_fw_grad_mode = tn_is_grad_enabled();
    return (out[0] = tn_mul(in[0], in[1])) ? TN_OK : tn_last_status();
}
static int probe_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                    tn_tensor **gi) {
    for (int i = 0; i < 2; i++)
        probe_bw_needs[i] = tn_function_needs_input_grad(ctx, i);
    gi[0] = tn_retain(go[0]);
    gi[1] = tn_retain(go[0]); /* for an input that does not require grad: dropped */
    return 2;
}
static const tn_function PROBE = {
    .name = "ProbeBackward", .forward = probe_fw, .backward = probe_bw};

/* Badly behaved backwards (PyTorch's Bad, Extra2, BadShape, Bcast, Dt). */
static int mul2_out_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                       tn_tensor **out) {
    return (out[0] = tn_mul_scalar(in[n_in - 1], 2)) ? TN_OK : tn_last_status();
}
static int bad_count_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                        tn_tensor **gi) {
    gi[0] = tn_retain(go[0]);
    return n_in == 1 ? 2 : 1; /* one gradient too many (not written) or too few */
}
static int bad_shape_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                        tn_tensor **gi) {
    return one_grad(gi, tn_ones(1, S3, TN_F32));
}
static int bcast_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                    tn_tensor **gi) {
    return one_grad(gi, tn_ones(2, (int64_t[]){4, 2}, TN_F32));
}
static int f64_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    return one_grad(gi, tn_to(go[0], TN_F64, TN_DEVICE_KEEP));
}
static int fail_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                   tn_tensor **gi) {
    tn_tensor *bad = tn_ones(1, S3, TN_F32), *g = tn_mul(go[0], bad); /* [2] * [3] */
    tn_release(bad);
    return one_grad(gi, g);
}
static int fail_quiet_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                         tn_tensor **gi) {
    return TN_ERR_DTYPE; /* no message of its own */
}
static const tn_function BAD = {
    .name = "BadBackward", .forward = mul2_out_fw, .backward = bad_count_bw};
static const tn_function EXTRA = {
    .name = "Extra2Backward", .forward = mul2_out_fw, .backward = bad_count_bw};
static const tn_function BAD_SHAPE = {
    .name = "BadShapeBackward", .forward = mul2_out_fw, .backward = bad_shape_bw};
static const tn_function BCAST = {
    .name = "BcastBackward", .forward = mul2_out_fw, .backward = bcast_bw};
static const tn_function DT = {.name = "DtBackward", .forward = mul2_out_fw, .backward = f64_bw};
static const tn_function FAIL_BW = {
    .name = "FailBackward", .forward = mul2_out_fw, .backward = fail_bw};
static const tn_function FAIL_QUIET_BW = {
    .name = "QuietBackward", .forward = mul2_out_fw, .backward = fail_quiet_bw};

/* Failing forwards: with a message, without one, leaving an output NULL.
 * Each first makes output 0 and keeps data with a destructor. */
static int data_freed;
static void free_counter(void *p) {
    data_freed++;
    free(p);
}
static int fail_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                   tn_tensor **out) {
    int mode = *(const int *)tn_function_user(ctx);
    tn_function_set_data(ctx, malloc(16), free_counter);
    out[0] = tn_mul_scalar(in[0], 2);
    if (mode == 1) return TN_ERR_AUTOGRAD;                               /* no message */
    if (mode == 2) return TN_OK;                                         /* out[1] left NULL */
    tn_tensor *bad = tn_ones(1, S2, TN_F32), *r = tn_matmul(in[0], bad); /* [3] @ [2] */
    tn_release(bad);
    out[1] = r;
    return r ? TN_OK : tn_last_status();
}

/* SaveNone: saves (NULL, b) (test_save_none_for_backward). */
static int savenone_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                       tn_tensor **out) {
    if (!(out[0] = tn_mul(in[0], in[1]))) return tn_last_status();
    return tn_function_save_for_backward(ctx, 2, (tn_tensor *[]){NULL, in[1]});
}
static bool savenone_got_null;
static int savenone_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                       tn_tensor **gi) {
    tn_tensor *s[2];
    tn_status st = tn_function_saved_tensors(ctx, 2, s);
    if (st < 0) return st;
    savenone_got_null = s[0] == NULL;
    gi[0] = tn_mul(go[0], s[1]);
    tn_release(s[1]);
    return gi[0] ? 2 : tn_last_status();
}
static const tn_function SAVE_NONE = {
    .name = "SaveNoneBackward", .forward = savenone_fw, .backward = savenone_bw};

/* NoSave: saves nothing; backward twice works. */
static const tn_function NO_SAVE = {
    .name = "NoSaveBackward", .forward = mul2_out_fw, .backward = times2_bw};

/* MySilu: docs/api.md's example, x * sigmoid(x). */
static int silu_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                   tn_tensor **out) {
    tn_tensor *s = tn_sigmoid(in[0]);
    out[0] = s ? tn_mul(in[0], s) : NULL;
    tn_release(s); /* the callbacks own what they make: no scope collects it */
    if (!out[0]) return tn_last_status();
    return tn_function_save_for_backward(ctx, 1, in); /* x, version-checked at backward */
}

static int silu_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *gout, int n_in,
                   tn_tensor **gin) {
    tn_tensor *x;
    tn_status st = tn_function_saved_tensors(ctx, 1, &x);
    if (st < 0) return st;
    /* s (1 + x (1 - s)), s = sigmoid(x) recomputed from x: under create_graph these ops are
     * recorded, so the gradient can be differentiated again */
    tn_tensor *s = tn_sigmoid(x), *t = tn_rsub_scalar(s, 1), *xt = tn_mul(x, t);
    tn_tensor *p = tn_add_scalar(xt, 1), *d = tn_mul(s, p);
    gin[0] = tn_mul(gout[0], d);
    tn_release(s), tn_release(t), tn_release(xt), tn_release(p), tn_release(d), tn_release(x);
    return gin[0] ? 1 : tn_last_status(); /* the number of gradients, or an error */
}

static const tn_function SILU = {.name = "MySiluBackward", .forward = silu_fw, .backward = silu_bw};

/* ---- values, gradients and names ------------------------------------------------ */

static void exp_values_and_gradient(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(0.5, -1.0, 2.0, true);
    tn_tensor *y = tn_function_apply1(&MY_EXP, 1, &x);
    const double e[] = {1.6487213, 0.36787945, 7.3890562}; /* PyTorch 1.13 */
    tt_assert_close(y, e, 3, 1e-6);
    assert_string_equal(tn_grad_fn_name(y), "MyExpBackward");
    assert_false(tn_is_leaf(y));
    assert_true(tn_requires_grad(y));
    assert_int_equal(tn_version(y), 0);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tt_assert_grad(x, e, 3, 1e-6);
    /* no grad mode: nothing recorded */
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *y2 = tn_function_apply1(&MY_EXP, 1, &x);
    tn_set_grad_enabled(prev);
    assert_false(tn_requires_grad(y2));
    assert_null(tn_grad_fn_name(y2));
    /* nothing requires grad: nothing recorded either */
    tn_tensor *c = vec3(0, 0, 0, false), *y3 = tn_function_apply1(&MY_EXP, 1, &c);
    assert_null(tn_grad_fn_name(y3));
    tn_scope_end();
}

static void doc_example_silu(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(-1, 0, 2, true), *y = tn_function_apply1(&SILU, 1, &x), *g;
    char text[128];
    tn_format(y, text, sizeof text);
    assert_string_equal(text, "tensor([-0.2689,  0.0000,  1.7616], grad_fn=<MySiluBackward>)");
    assert_int_equal(tn_backward(tn_sum(y), NULL, true), TN_OK);
    tt_assert_grad(x, (const double[]){0.0723295, 0.5, 1.0907842}, 3, 1e-5);
    /* second order, as torch.autograd.grad(silu(x).sum(), x, create_graph=True) */
    tn_zero_grad(x);
    assert_int_equal(tn_autograd_grad(1, (tn_tensor *[]){tn_sum(y)}, NULL, 1, &x, &g, false, true),
                     TN_OK);
    assert_int_equal(tn_backward(tn_sum(g), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){0.3024, 0.5, 0.0501}, 3, 1e-3);
    tn_scope_end();
}

static void context_probe(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec2(1, 2, true), *c = vec2(5, 6, false);
    tn_tensor *y = tn_function_apply1(&PROBE, 2, (tn_tensor *[]){a, c});
    assert_false(probe_fw_grad_mode); /* forward runs with grad mode off */
    assert_true(probe_fw_needs[0]);
    assert_false(probe_fw_needs[1]);
    assert_true(tn_is_grad_enabled());
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    assert_true(probe_bw_needs[0]);
    assert_false(probe_bw_needs[1]);
    tt_assert_grad(a, (const double[]){1, 1}, 2, 0);
    assert_null(tn_grad(c));
    tn_scope_end();
}

static void two_inputs_two_outputs(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec2(1, 2, true), *b = vec2(3, 4, true), *o[2];
    assert_int_equal(tn_function_apply(&TT, 2, (tn_tensor *[]){a, b}, 2, o), TN_OK);
    tt_assert_close(o[0], (const double[]){3, 8}, 2, 0);
    tt_assert_close(o[1], (const double[]){4, 6}, 2, 0);
    assert_string_equal(tn_grad_fn_name(o[0]), "TTBackward");
    assert_string_equal(tn_grad_fn_name(o[1]), "TTBackward");
    tn_tensor *l = tn_sum(tn_add(tn_mul_scalar(o[0], 2), tn_mul_scalar(o[1], 3)));
    assert_int_equal(tn_backward(l, NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){9, 11}, 2, 0);
    tt_assert_grad(b, (const double[]){5, 7}, 2, 0);
    /* one output used: the other's gradient is zeros */
    tn_zero_grad(a);
    tn_zero_grad(b);
    assert_int_equal(tn_function_apply(&TT, 2, (tn_tensor *[]){a, b}, 2, o), TN_OK);
    assert_int_equal(tn_backward(tn_sum(o[0]), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){3, 4}, 2, 0);
    tt_assert_grad(b, (const double[]){1, 2}, 2, 0);
    tn_scope_end();
}

static void non_differentiable_outputs(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *o[3];
    assert_int_equal(tn_function_apply(&ND, 1, &a, 3, o), TN_OK);
    assert_true(tn_requires_grad(o[0]));
    assert_false(tn_requires_grad(o[1])); /* bool: never differentiable */
    assert_false(tn_requires_grad(o[2])); /* marked */
    assert_null(tn_grad_fn_name(o[2]));
    tt_assert_close(o[1], (const double[]){0, 1, 1}, 3, 0);
    assert_int_equal(tn_backward(tn_sum(o[0]), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){2, 2, 2}, 3, 0);
    assert_true(nd_seen[0] == 3 && nd_seen[1] == 0 && nd_seen[2] == 0); /* zeros for both */
    assert_int_equal(nd_seen_dtype, TN_BOOL);
    /* the only output non-differentiable: no history at all */
    tn_zero_grad(a);
    tn_tensor *r = tn_function_apply1(&ND_NONE, 1, (tn_tensor *[]){tn_mul(a, a)});
    assert_int_equal(tn_backward(tn_sum(tn_mul(r, a)), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){1, 4, 9}, 3, 0); /* r is a constant: a * a */
    tn_tensor *y = tn_function_apply1(&ND2, 1, &a);
    assert_false(tn_requires_grad(y));
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "element 0 of tensors does not require grad and does not have a grad_fn");
    tn_scope_end();
}

static void returns_input(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec2(1, 2, true);
    tn_tensor *y = tn_function_apply1(&ID, 1, &a);
    assert_ptr_not_equal(y, a); /* a new handle, as PyTorch's view ... */
    assert_true(tn_shares_storage(y, a));
    assert_string_equal(tn_grad_fn_name(y), "IdBackward");
    assert_true(tn_is_leaf(a)); /* ... and the input keeps its own history */
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){2, 2}, 2, 0);
    bool prev = tn_set_grad_enabled(false); /* same counter: a write to a shows in y */
    assert_int_equal(tn_add_scalar_(a, 1), TN_OK);
    tn_tensor *z = tn_function_apply1(&ID, 1, &a); /* no grad: an alias without history */
    tn_set_grad_enabled(prev);
    assert_int_equal(tn_version(y), 1);
    assert_ptr_not_equal(z, a);
    assert_false(tn_requires_grad(z));
    assert_true(tn_shares_storage(z, a));
    /* tenet: writing the result in place records on top of the custom node
     * (PyTorch refuses: its result is a view) */
    tn_zero_grad(a);
    y = tn_function_apply1(&ID, 1, &a);
    assert_int_equal(tn_mul_scalar_(y, 3), TN_OK);
    assert_string_equal(tn_grad_fn_name(y), "MulBackward0");
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){6, 6}, 2, 0);
    tn_scope_end();
}

/* ---- in place: mark_dirty -------------------------------------------------------- */

static void dirty_non_leaf(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *b = tn_mul_scalar(a, 1);
    tn_tensor *y = tn_function_apply1(&MUL2, 1, &b);
    assert_ptr_equal(y, b);             /* the input itself */
    assert_int_equal(tn_version(b), 2); /* mul_ in forward, then mark_dirty's bump */
    assert_string_equal(tn_grad_fn_name(b), "MulInplaceBackward");
    tt_assert_close(b, (const double[]){2, 4, 6}, 3, 0);
    assert_int_equal(tn_backward(tn_sum(b), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){2, 2, 2}, 3, 0);
    /* dirty input not requiring grad, another input does: it joins the graph */
    tn_tensor *c = tn_zeros(1, S3, TN_F32), *w = vec3(1, 1, 1, true);
    y = tn_function_apply1(&ADD_INTO, 2, (tn_tensor *[]){c, w});
    assert_ptr_equal(y, c);
    assert_true(tn_requires_grad(c));
    assert_string_equal(tn_grad_fn_name(c), "AddIntoBackward");
    assert_int_equal(tn_version(c), 2);
    assert_int_equal(tn_backward(tn_sum(c), NULL, false), TN_OK);
    tt_assert_grad(w, (const double[]){1, 1, 1}, 3, 0);
    tn_scope_end();
}

static void dirty_leaf(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *y;
    /* marked before the write: refused and nothing written */
    assert_null(tn_function_apply1(&MUL2, 1, &a));
    tt_assert_error(TN_ERR_AUTOGRAD, LEAF_DIRTY_MSG);
    assert_int_equal(tn_version(a), 0);
    tt_assert_close(a, (const double[]){1, 2, 3}, 3, 0);
    /* marked after the write (PyTorch's order): refused, forward's write stays */
    assert_null(tn_function_apply1(&MUL2_LATE, 1, &a));
    tt_assert_error(TN_ERR_AUTOGRAD, LEAF_DIRTY_MSG);
    assert_int_equal(tn_version(a), 1);
    tt_assert_close(a, (const double[]){2, 4, 6}, 3, 0);
    /* under no grad a leaf may be written: an alias comes back, version + 2 */
    bool prev = tn_set_grad_enabled(false);
    y = tn_function_apply1(&MUL2, 1, &a);
    tn_set_grad_enabled(prev);
    assert_non_null(y);
    assert_ptr_not_equal(y, a);
    assert_false(tn_requires_grad(y));
    assert_int_equal(tn_version(a), 3);
    tt_assert_close(a, (const double[]){4, 8, 12}, 3, 0);
    tn_scope_end();
}

static void dirty_view(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *c = tn_mul_scalar(a, 1), *v = tn_narrow(c, 0, 1, 2);
    tn_tensor *y = tn_function_apply1(&MUL2, 1, &v);
    assert_ptr_equal(y, v);
    assert_string_equal(tn_grad_fn_name(v), "AsStridedBackward0");
    assert_string_equal(tn_grad_fn_name(c), "CopySlices");
    assert_int_equal(tn_version(c), 2);
    tt_assert_close(c, (const double[]){1, 4, 6}, 3, 0);
    assert_int_equal(tn_backward(tn_sum(c), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){1, 2, 2}, 3, 0);
    /* through the view's own history too */
    tn_zero_grad(a);
    c = tn_mul_scalar(a, 1);
    v = tn_narrow(c, 0, 0, 2);
    assert_non_null(tn_function_apply1(&MUL2_LATE, 1, &v)); /* saves the view */
    assert_int_equal(tn_backward(tn_sum(tn_mul(v, v)), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){8, 16, 0}, 3, 0); /* d/da (2a)^2 = 8a */
    /* ... and twice (create_graph unpacks the saved view with its history after the write) */
    c = tn_mul_scalar(a, 1);
    v = tn_narrow(c, 0, 0, 2);
    assert_non_null(tn_function_apply1(&MUL2_LATE, 1, &v));
    tn_tensor *g1, *g2, *l1 = tn_sum(tn_mul(v, v));
    assert_int_equal(tn_autograd_grad(1, &l1, NULL, 1, &a, &g1, false, true), TN_OK);
    tt_assert_close(g1, (const double[]){8, 16, 0}, 3, 0);
    tn_tensor *l2 = tn_sum(g1);
    assert_int_equal(tn_autograd_grad(1, &l2, NULL, 1, &a, &g2, false, false), TN_OK);
    tt_assert_close(g2, (const double[]){8, 8, 0}, 3, 0);
    /* a view of a leaf, or more than one output, or not the first input: refused */
    tn_tensor *va = tn_narrow(a, 0, 1, 2);
    assert_null(tn_function_apply1(&MUL2, 1, &va));
    tt_assert_error(TN_ERR_AUTOGRAD, "a view of a leaf Variable that requires grad is being "
                                     "used in an in-place operation.");
    c = tn_mul_scalar(a, 1);
    v = tn_narrow(c, 0, 1, 2);
    tn_tensor *o[2];
    assert_int_equal(tn_function_apply(&TWO_OUT, 1, &v, 2, o), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "If your Function modifies inplace an input that is a view "
                                     "of another Tensor, your Function cannot return more than "
                                     "one Tensor.");
    assert_null(o[0]);
    assert_int_equal(tn_version(c), 0);
    tn_tensor *w = vec2(1, 1, true);
    assert_null(tn_function_apply1(&ADD_INTO2, 2, (tn_tensor *[]){w, v}));
    tt_assert_error(TN_ERR_AUTOGRAD, "AddInto2Backward: an input modified in place that is a "
                                     "view of another tensor must be the function's first input "
                                     "(it is input 1)");
    assert_int_equal(tn_version(c), 0);
    /* nothing recording: a view may be written anywhere */
    tn_tensor *wc = vec2(1, 1, false), *cc = tn_zeros(1, S3, TN_F32), *vc = tn_narrow(cc, 0, 1, 2);
    assert_ptr_equal(tn_function_apply1(&ADD_INTO2, 2, (tn_tensor *[]){wc, vc}), vc);
    assert_int_equal(tn_version(cc), 2);
    tt_assert_close(cc, (const double[]){0, 1, 1}, 3, 0);
    tn_scope_end();
}

static void dirty_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *c = tn_mul_scalar(a, 1);
    assert_null(tn_function_apply1(&NOT_RET, 1, &c));
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "Some elements marked as dirty during the forward method were not returned "
                    "as output. The inputs that are modified inplace must all be outputs of the "
                    "Function.");
    assert_int_equal(tn_version(c), 1); /* forward's own write only */
    assert_string_equal(tn_grad_fn_name(c), "MulBackward0");
    /* a non-input marked dirty: PyTorch's warning, then an ordinary output
     * (whose version mark_dirty bumps) */
    tn_tensor *y = tn_function_apply1(&NON_INPUT, 1, &a);
    assert_int_equal(tn_version(y), 1);
    assert_string_equal(tn_grad_fn_name(y), "NonInputBackward");
    /* one tensor returned twice: two outputs (the second an alias) */
    tn_tensor *o[2];
    assert_int_equal(tn_function_apply(&TWICE, 1, &a, 2, o), TN_OK);
    assert_ptr_not_equal(o[0], o[1]);
    assert_true(tn_shares_storage(o[0], o[1]));
    assert_string_equal(tn_grad_fn_name(o[1]), "TwiceBackward");
    assert_int_equal(tn_backward(tn_sum(tn_add(o[0], tn_mul_scalar(o[1], 3))), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){8, 8, 8}, 3, 0); /* (1 + 3) * 2 */
    /* a dirty input returned twice: itself, then an alias */
    tn_zero_grad(a);
    tn_tensor *cl = tn_clone(a);
    assert_int_equal(tn_function_apply(&DOUBLE_INPLACE, 1, &cl, 2, o), TN_OK);
    assert_ptr_equal(o[0], cl);
    assert_true(tn_shares_storage(o[1], cl));
    assert_int_equal(tn_version(o[1]), 2);
    assert_int_equal(tn_backward(tn_sum(tn_add(o[0], o[1])), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){4, 4, 4}, 3, 0);
    tn_scope_end();
}

/* ---- saved tensors ------------------------------------------------------------------ */

static void saved_output_modified(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(0.5, -1, 2, true), *y = tn_function_apply1(&MY_EXP, 1, &x);
    tn_tensor *s = tn_sum(y);
    assert_int_equal(tn_mul_scalar_(tn_detach(y), 2), TN_OK);
    assert_int_equal(tn_backward(s, NULL, true), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    MODIFIED_MSG "[float32 [3]], which is output 0 of MyExpBackward, is at "
                                 "version 1; expected version 0 instead. Hint: enable anomaly "
                                 "detection");
    assert_null(tn_grad(x));
    /* a saved input: the error names its current grad_fn, the in-place op's */
    tn_tensor *h = tn_mul_scalar(x, 1), *q = tn_sum(tn_function_apply1(&SQ, 1, &h));
    assert_int_equal(tn_add_scalar_(h, 1), TN_OK);
    assert_int_equal(tn_backward(q, NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED, "which is output 0 of AddBackward0, is at version 1; "
                                             "expected version 0 instead.");
    /* a dirty input saved after the write: saved as the node's output, at
     * the version apply left it (2); written again, backward fails */
    tn_tensor *b = tn_mul_scalar(x, 1);
    assert_non_null(tn_function_apply1(&MUL2_LATE, 1, &b));
    tn_tensor *r = tn_sum(b);
    assert_int_equal(tn_backward(r, NULL, true), TN_OK);
    assert_int_equal(tn_add_scalar_(b, 1), TN_OK);
    assert_int_equal(tn_backward(r, NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "[float32 [3]], which is output 0 of MulInplaceLateBackward, is at version 3; "
                    "expected version 2 instead.");
    tn_scope_end();
}

static void save_none_and_twice(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec2(1, 1, true), *b = tt_f32(1, S2, (const float[]){3, 3}, true);
    tn_tensor *y = tn_function_apply1(&SAVE_NONE, 2, (tn_tensor *[]){a, b});
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    assert_true(savenone_got_null);
    tt_assert_grad(a, (const double[]){3, 3}, 2, 0);
    assert_null(tn_grad(b));
    /* saved tensors are freed by backward */
    tn_tensor *x = vec3(1, 2, 3, true), *s = tn_sum(tn_function_apply1(&SQ, 1, &x));
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    assert_int_equal(tn_backward(s, NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, SECOND_TIME_MSG);
    /* nothing saved: backward twice accumulates */
    tn_zero_grad(x);
    s = tn_sum(tn_function_apply1(&NO_SAVE, 1, &x));
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){4, 4, 4}, 3, 0);
    tn_scope_end();
}

/* ---- anomaly mode ------------------------------------------------------------------- */

static int make_line;
static NOINLINE tn_tensor *make_exp(tn_tensor *x) {
    make_line = __LINE__ + 1;
    tn_tensor *y = tn_function_apply1(&MY_EXP, 1, &x);
    tn_version(y); /* not a tail call: this frame stays on the stack */
    return y;
}
static int write_line;
static NOINLINE void corrupt(tn_tensor *y) {
    tn_tensor *d = tn_detach(y);
    write_line = __LINE__ + 1;
    tn_status st = tn_mul_scalar_(d, 2);
    tn_release(d);
    assert_int_equal(st, TN_OK);
}

static void anomaly_names_custom_node(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, false);
    tn_tensor *x = vec3(0.5, -1, 2, true), *y = make_exp(x), *s = tn_sum(y);
    corrupt(y);
    assert_int_equal(tn_backward(s, NULL, true), TN_ERR_INPLACE_MODIFIED);
    assert_non_null(strstr(tn_last_error(), "output 0 of MyExpBackward, is at version 1"));
    assert_non_null(strstr(tn_last_error(), "corrupt ("));
    const tn_anomaly_report *r = tn_last_anomaly();
    assert_non_null(r);
    assert_int_equal(tn_anomaly_report_kind(r), TN_ANOMALY_INPLACE);
    assert_string_equal(tn_anomaly_report_node(r), "MyExpBackward");
    int n = 0;
    const tn_frame *f = tn_anomaly_report_forward_trace(r, &n);
    assert_true(n > 0);
    assert_string_equal(f[0].function, "make_exp");
    assert_int_equal(f[0].line, make_line);
    assert_int_equal(tn_anomaly_report_n_writes(r), 1);
    const tn_write_event *w = tn_anomaly_report_write(r, 0);
    assert_string_equal(w->op, "mul_scalar_");
    assert_string_equal(w->frames[0].function, "corrupt");
    assert_int_equal(w->frames[0].line, write_line);
    char *dot = NULL; /* the graph names the node too, and marks the stale saved output */
    size_t dot_n = 0;
    FILE *f_dot = open_memstream(&dot, &dot_n);
    assert_int_equal(tn_graph_dot(s, f_dot), TN_OK);
    fclose(f_dot);
    assert_non_null(strstr(dot, "MyExpBackward"));
    assert_non_null(strstr(dot, "float32 [3] output, saved v0, now v1"));
    free(dot);
    /* a second backward through it: the report names it too */
    tn_tensor *x2 = vec3(1, 2, 3, true), *s2 = tn_sum(tn_function_apply1(&SQ, 1, &x2));
    assert_int_equal(tn_backward(s2, NULL, false), TN_OK);
    assert_int_equal(tn_backward(s2, NULL, false), TN_ERR_AUTOGRAD);
    assert_string_equal(tn_anomaly_report_node(tn_last_anomaly()), "SqBackward");
    /* a write by a custom in-place function is recorded under its name */
    tn_tensor *h = tn_mul_scalar(x2, 1), *e = tn_exp(h), *se = tn_sum(e);
    assert_non_null(tn_function_apply1(&MUL2, 1, &e));
    assert_int_equal(tn_backward(se, NULL, false), TN_ERR_INPLACE_MODIFIED);
    r = tn_last_anomaly();
    assert_string_equal(tn_anomaly_report_node(r), "ExpBackward0");
    assert_int_equal(tn_anomaly_report_n_writes(r), 2);
    assert_string_equal(tn_anomaly_report_write(r, 0)->op, "mul_scalar_");
    assert_string_equal(tn_anomaly_report_write(r, 1)->op, "MulInplaceBackward");
    tn_set_detect_anomaly(false, false);
    tn_scope_end();
}

/* NaN: forward log(x) (NaN for x < 0), backward g * NaN. */
static int log_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                  tn_tensor **out) {
    return (out[0] = tn_log(in[0])) ? TN_OK : tn_last_status();
}
static int nan_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in, tn_tensor **gi) {
    return one_grad(gi, tn_mul_scalar(go[0], NAN));
}
static const tn_function NAN_FN = {.name = "MyNanBackward", .forward = log_fw, .backward = nan_bw};

static void anomaly_nan_names_custom_node(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_set_detect_anomaly(true, true);
    tn_tensor *x = vec2(1, 2, true);
    tn_tensor *y = tn_function_apply1(&NAN_FN, 1, &x);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_NAN);
    tt_assert_error(TN_ERR_NAN, "Function 'MyNanBackward' returned nan values in its 0th output.");
    assert_int_equal(tn_anomaly_report_kind(tn_last_anomaly()), TN_ANOMALY_NAN_BACKWARD);
    assert_string_equal(tn_anomaly_report_node(tn_last_anomaly()), "MyNanBackward");
    /* forward: the custom function is the producer (a warning and a report) */
    tn_tensor *neg = vec2(-1, 2, false);
    assert_non_null(tn_function_apply1(&NAN_FN, 1, &neg));
    assert_int_equal(tn_anomaly_report_kind(tn_last_anomaly()), TN_ANOMALY_NAN_FORWARD);
    assert_string_equal(tn_anomaly_report_node(tn_last_anomaly()), "MyNanBackward");
    tn_set_detect_anomaly(false, false);
    tn_scope_end();
}

/* ---- higher order ------------------------------------------------------------------- */

static void double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(1, 2, 3, true), *gx;
    tn_tensor *s = tn_sum(tn_function_apply1(&SQ, 1, &x));
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &x, &gx, false, true), TN_OK);
    tt_assert_close(gx, (const double[]){2, 4, 6}, 3, 0);
    assert_string_equal(tn_grad_fn_name(gx), "MulBackward0"); /* the backward's own ops */
    assert_int_equal(tn_backward(tn_sum(gx), NULL, false), TN_OK);
    tt_assert_grad(x, (const double[]){2, 2, 2}, 3, 0);
    /* through a saved output: d2/dx2 sum(exp x) = exp x */
    tn_tensor *z = vec3(0.5, -1, 2, true), *gz, *ggz;
    tn_tensor *se = tn_sum(tn_function_apply1(&MY_EXP, 1, &z));
    assert_int_equal(tn_autograd_grad(1, &se, NULL, 1, &z, &gz, false, true), TN_OK);
    tn_tensor *sgz = tn_sum(gz);
    assert_int_equal(tn_autograd_grad(1, &sgz, NULL, 1, &z, &ggz, false, false), TN_OK);
    tt_assert_close(ggz, (const double[]){1.6487213, 0.36787945, 7.3890562}, 3, 1e-6);
    tn_scope_end();
}

static void once_differentiable(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec3(1, 2, 3, true), *gx;
    tn_tensor *y = tn_function_apply1(&SQ_ONCE, 1, &x);
    /* gradients that do not require grad: nothing to delay */
    tn_tensor *s = tn_sum(y);
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &x, &gx, true, true), TN_OK);
    tt_assert_close(gx, (const double[]){2, 4, 6}, 3, 0);
    assert_false(tn_requires_grad(gx));
    /* through y * y: the gradient requires grad, via an Error node */
    tn_tensor *s2 = tn_sum(tn_mul(y, y));
    assert_int_equal(tn_autograd_grad(1, &s2, NULL, 1, &x, &gx, true, true), TN_OK);
    tt_assert_close(gx, (const double[]){4, 32, 108}, 3, 0);
    assert_true(tn_requires_grad(gx));
    assert_string_equal(tn_grad_fn_name(gx), "Error");
    assert_int_equal(tn_backward(tn_sum(gx), NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, ONCE_MSG);
    assert_null(tn_grad(x));
    /* functional: the Error node leads nowhere, x is not reached */
    tn_tensor *gg = NULL, *sg = tn_sum(gx);
    assert_int_equal(tn_autograd_grad(1, &sg, NULL, 1, &x, &gg, false, false), TN_OK);
    assert_null(gg);
    tn_scope_end();
}

/* ---- gradients a backward returns ----------------------------------------------------- */

static void wrong_gradients(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec2(1, 1, true), *b = vec2(1, 1, true);
    tn_tensor *y = tn_function_apply1(&BAD, 2, (tn_tensor *[]){a, b});
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "function BadBackward returned an incorrect number of "
                                     "gradients (expected 2, got 1)");
    assert_null(tn_grad(a));
    y = tn_function_apply1(&EXTRA, 1, &a);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "function Extra2Backward returned an incorrect number of "
                                     "gradients (expected 1, got 2)");
    y = tn_function_apply1(&BAD_SHAPE, 1, &a);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "Function BadShapeBackward returned an invalid gradient at "
                                  "index 0 - got [3] but expected shape compatible with [2]");
    assert_null(tn_grad(a));
    /* a gradient of a shape the input broadcasts to is summed back */
    y = tn_function_apply1(&BCAST, 1, &a);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tt_assert_grad(a, (const double[]){4, 4}, 2, 0);
    /* another dtype is converted */
    tn_zero_grad(a);
    y = tn_function_apply1(&DT, 1, &a);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    tn_tensor *g = tn_grad(a);
    assert_int_equal(tn_dtype_of(g), TN_F32);
    tt_assert_close(g, (const double[]){1, 1}, 2, 0);
    tn_scope_end();
}

/* ---- errors ------------------------------------------------------------------------- */

static void callback_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(1, 2, 3, true), *o[2] = {a, a};
    int modes[3] = {0, 1, 2};
    tn_function f = {.name = "FailBackward", .forward = fail_fw, .backward = pass2_bw};
    int64_t live = tt_live_tensors();
    data_freed = 0;
    /* forward fails in a tenet call: its status and message */
    f.user = &modes[0];
    assert_int_equal(tn_function_apply(&f, 1, &a, 2, o), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "");
    assert_null(o[0]);
    assert_null(o[1]);
    assert_int_equal(data_freed, 1);
    /* forward fails without a message of its own */
    tn_clear_error();
    f.user = &modes[1];
    assert_int_equal(tn_function_apply(&f, 1, &a, 2, o), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "FailBackward: forward failed with TN_ERR_AUTOGRAD");
    /* forward succeeds but leaves an output NULL */
    f.user = &modes[2];
    assert_int_equal(tn_function_apply(&f, 1, &a, 2, o), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "FailBackward: forward returned TN_OK but left "
                                             "outputs[1] NULL");
    assert_int_equal(data_freed, 3);
    assert_int_equal(tt_live_tensors(), live);
    assert_int_equal(tn_version(a), 0);
    /* backward fails in a tenet call: backward fails with it, no .grad */
    tn_tensor *b = vec2(1, 2, true), *y = tn_function_apply1(&FAIL_BW, 1, &b);
    assert_int_equal(tn_backward(tn_sum(y), NULL, true), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "The size of tensor a (2) must match the size of tensor b (3)");
    assert_null(tn_grad(b));
    y = tn_function_apply1(&FAIL_QUIET_BW, 1, &b);
    tn_clear_error();
    assert_int_equal(tn_backward(tn_sum(y), NULL, true), TN_ERR_DTYPE);
    tt_assert_error(TN_ERR_DTYPE, "QuietBackward: backward failed with TN_ERR_DTYPE");
    tn_scope_end();
}

static void bad_arguments(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec2(1, 2, true), *o = a;
    tn_function nameless = MY_EXP;
    nameless.name = NULL;
    assert_int_equal(tn_function_apply(&nameless, 1, &a, 1, &o), TN_ERR_INVALID_ARGUMENT);
    assert_null(o);
    tn_clear_error();
    assert_int_equal(tn_function_apply(NULL, 1, &a, 1, &o), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_function_apply(&MY_EXP, 1, &a, 0, &o), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_function_apply(&MY_EXP, -1, &a, 1, &o), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_int_equal(tn_function_apply(&MY_EXP, 1, (tn_tensor *[]){NULL}, 1, &o),
                     TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "inputs[0] is NULL");
    /* a NULL input right after running out of memory: that failure's result */
    tn_test_fail_alloc_at(1);
    tn_tensor *m = tn_mul(a, a);
    tn_test_fail_alloc_at(0);
    assert_null(m);
    assert_null(tn_function_apply1(&MY_EXP, 1, &m));
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "out of memory");
    /* the context outside its phase */
    tn_clear_error();
    assert_int_equal(tn_function_save_for_backward(NULL, 0, NULL), TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tn_function_saved_count(NULL), -1);
    assert_false(tn_function_needs_input_grad(NULL, 0));
    assert_null(tn_function_data(NULL));
    tn_scope_end();
}

/* Misuse of the context from inside the callbacks. */
static tn_status phase_st[4];
static int misuse_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                     tn_tensor **out) {
    tn_tensor *t;
    phase_st[0] = tn_function_saved_tensors(ctx, 0, &t);
    phase_st[1] = tn_function_saved_count(ctx);
    phase_st[2] = tn_function_save_for_backward(ctx, -1, NULL);
    return (out[0] = tn_mul_scalar(in[0], 2)) ? TN_OK : tn_last_status();
}
static int misuse_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                     tn_tensor **gi) {
    phase_st[3] = tn_function_mark_dirty(ctx, go[0]);
    return one_grad(gi, tn_retain(go[0]));
}

static void context_misuse(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_function f = {.name = "MisuseBackward", .forward = misuse_fw, .backward = misuse_bw};
    tn_tensor *a = vec2(1, 2, true), *y = tn_function_apply1(&f, 1, &a);
    assert_non_null(y);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_OK);
    assert_int_equal(phase_st[0], TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(phase_st[1], -1);
    assert_int_equal(phase_st[2], TN_ERR_INVALID_ARGUMENT);
    assert_int_equal(phase_st[3], TN_ERR_INVALID_ARGUMENT);
    tn_scope_end();
}

/* The data slot lives as long as the node. */
static int data_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                   tn_tensor **out) {
    int *k = malloc(sizeof *k);
    *k = 7;
    tn_function_set_data(ctx, k, free_counter);
    return (out[0] = tn_mul_scalar(in[0], 2)) ? TN_OK : tn_last_status();
}
static int data_seen;
static int data_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                   tn_tensor **gi) {
    data_seen = *(int *)tn_function_data(ctx);
    return one_grad(gi, tn_retain(go[0]));
}

static void user_data_lifetime(void **state) {
    tn_function f = {.name = "DataBackward", .forward = data_fw, .backward = data_bw};
    tn_tensor *a = vec2(1, 2, true), *y = tn_function_apply1(&f, 1, &a), *s = tn_sum(y);
    data_freed = 0;
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    assert_int_equal(data_seen, 7);
    tn_release(y);
    assert_int_equal(data_freed, 0); /* s's graph still holds the node */
    tn_release(s);
    assert_int_equal(data_freed, 1);
    bool prev = tn_set_grad_enabled(false); /* nothing recorded: freed at once */
    y = tn_function_apply1(&f, 1, &a);
    tn_set_grad_enabled(prev);
    assert_int_equal(data_freed, 2);
    tn_release(y);
    tn_release(a);
}

/* Nested: a custom function inside another's forward and backward. */
static int outer_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                    tn_tensor **out) {
    tn_tensor *e = tn_function_apply1(&MY_EXP, 1, in);
    if (!e) return tn_last_status();
    assert_false(tn_requires_grad(e)); /* forward runs with grad mode off */
    out[0] = e;
    return tn_function_save_for_backward(ctx, 1, in);
}
static int outer_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *go, int n_in,
                    tn_tensor **gi) {
    tn_tensor *x;
    tn_status st = tn_function_saved_tensors(ctx, 1, &x);
    if (st < 0) return st;
    tn_tensor *e = tn_function_apply1(&MY_EXP, 1, &x), *g = e ? tn_mul(go[0], e) : NULL;
    tn_release(e);
    tn_release(x);
    return one_grad(gi, g);
}

static void nested_and_scoped(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_function f = {.name = "OuterBackward", .forward = outer_fw, .backward = outer_bw};
    tn_tensor *x = vec3(0.5, -1, 2, true), *gx, *ggx;
    tn_tensor *s = tn_sum(tn_function_apply1(&f, 1, &x));
    assert_int_equal(tn_autograd_grad(1, &s, NULL, 1, &x, &gx, false, true), TN_OK);
    const double e[] = {1.6487213, 0.36787945, 7.3890562};
    tt_assert_close(gx, e, 3, 1e-6);
    assert_string_equal(tn_grad_fn_name(gx), "MulBackward0"); /* recorded: MyExp inside */
    tn_tensor *sg = tn_sum(gx);
    assert_int_equal(tn_autograd_grad(1, &sg, NULL, 1, &x, &ggx, false, false), TN_OK);
    tt_assert_close(ggx, e, 3, 1e-6);
    tn_scope_end(); /* the outputs were the scope's: the teardown finds no leak */
}

/* ---- finite differences ------------------------------------------------------------------- */

#define FD_EPS 1e-6
#define FD_MAX 8

/* L = sum_k sum(f(x)_k * w_k), w_k[j] = cos(j + k) + 1.5; grads: dL/dx (create_graph). */
static tn_tensor *fd_loss(const tn_function *f, int n_in, tn_tensor **x, int n_out) {
    tn_tensor *o[4], *l = NULL;
    if (tn_function_apply(f, n_in, x, n_out, o) < 0) return NULL;
    for (int k = 0; k < n_out; k++) {
        double w[FD_MAX];
        int64_t n = tn_numel(o[k]);
        for (int64_t j = 0; j < n; j++)
            w[j] = cos((double)(j + k)) + 1.5;
        tn_tensor *wt = tt_f64(tn_ndim(o[k]), tn_shape(o[k]), w, false);
        tn_tensor *t = tn_sum(tn_mul(o[k], wt));
        l = l ? tn_add(l, t) : t;
    }
    return l;
}

static double fd_value(const tn_function *f, int n_in, tn_tensor **x, int n_out) {
    double v = 0;
    bool prev = tn_set_grad_enabled(false);
    assert_int_equal(tn_item(fd_loss(f, n_in, x, n_out), &v), TN_OK);
    tn_set_grad_enabled(prev);
    return v;
}

/* Checks dL/dx against central differences; with second, also d(sum dL/dx)/dx. */
static void fd_check(const tn_function *f, int n_in, tn_tensor **x, int n_out, bool second) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *l = fd_loss(f, n_in, x, n_out), *g[FD_MAX], *gg[FD_MAX];
    assert_int_equal(tn_autograd_grad(1, &l, NULL, n_in, x, g, true, second), TN_OK);
    if (second) {
        tn_tensor *s = NULL;
        for (int i = 0; i < n_in; i++)
            s = s ? tn_add(s, tn_sum(g[i])) : tn_sum(g[i]);
        assert_int_equal(tn_autograd_grad(1, &s, NULL, n_in, x, gg, true, false), TN_OK);
    }
    for (int i = 0; i < n_in; i++) {
        double *p = tn_data_ptr(x[i]), ga[FD_MAX], gga[FD_MAX];
        int64_t n = tn_numel(x[i]);
        tn_copy_to_f64(g[i], ga, n);
        if (second) tn_copy_to_f64(gg[i], gga, n);
        for (int64_t j = 0; j < n; j++) {
            double keep = p[j];
            p[j] = keep + FD_EPS;
            double up = fd_value(f, n_in, x, n_out);
            p[j] = keep - FD_EPS;
            double down = fd_value(f, n_in, x, n_out);
            p[j] = keep;
            double num = (up - down) / (2 * FD_EPS);
            if (fabs(num - ga[j]) > 1e-5 * (1 + fabs(num)))
                fail_msg("%s: dL/dx%d[%lld] = %.9g, finite differences %.9g", f->name, i,
                         (long long)j, ga[j], num);
            if (!second) continue;
            /* d/dx_j of S = sum_i sum(dL/dx_i), S by autograd at x +- eps */
            double sv[2];
            for (int side = 0; side < 2; side++) {
                p[j] = keep + (side ? -FD_EPS : FD_EPS);
                tn_tensor *lj = fd_loss(f, n_in, x, n_out), *gj[FD_MAX];
                assert_int_equal(tn_autograd_grad(1, &lj, NULL, n_in, x, gj, false, false), TN_OK);
                sv[side] = 0;
                for (int k = 0; k < n_in; k++) {
                    double v;
                    tn_item(tn_sum(gj[k]), &v);
                    sv[side] += v;
                }
            }
            p[j] = keep;
            num = (sv[0] - sv[1]) / (2 * FD_EPS);
            if (fabs(num - gga[j]) > 1e-5 * (1 + fabs(num)))
                fail_msg("%s: second derivative [%d][%lld] = %.9g, finite differences %.9g",
                         f->name, i, (long long)j, gga[j], num);
        }
    }
    tn_scope_end();
}

static void gradcheck(void **state) {
    tn_tensor *x[2] = {tt_f64(1, S3, (const double[]){0.3, -1.2, 0.8}, true),
                       tt_f64(1, S3, (const double[]){1.1, 0.4, -0.7}, true)};
    fd_check(&MY_EXP, 1, x, 1, true);
    fd_check(&SQ, 1, x, 1, true);
    fd_check(&SILU, 1, x, 1, true);
    fd_check(&TT, 2, x, 2, true);
    fd_check(&TWICE, 1, x, 2, false); /* test_return_duplicate; linear: no second order */
    tn_release(x[0]);
    tn_release(x[1]);
}

/* ---- out of memory ---------------------------------------------------------------------- */

/* Fails allocation 1, 2, 3, ... of one call until it succeeds: each failure
 * must be clean (TN_ERR_OUT_OF_MEMORY with a message, outputs NULL, the
 * inputs' versions and values as before, except a dirty input's write that
 * forward made itself) and leak nothing. */
typedef enum { W_APPLY_TT, W_APPLY_DIRTY_VIEW, W_APPLY_ND, W_BACKWARD, W_ONCE } walk_kind;

static int walk_one(walk_kind kind, int64_t n) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec3(0.5, 1, 2, true), *b = vec3(3, 4, 5, true);
    tn_tensor *c = tn_mul_scalar(a, 1), *v = tn_narrow(c, 0, 1, 2), *o[3] = {0}, *r[3] = {0};
    tn_tensor *s = NULL, *y = NULL;
    if (kind == W_BACKWARD) {
        tn_function_apply(&TT, 2, (tn_tensor *[]){a, b}, 2, o);
        s = tn_sum(tn_add(tn_function_apply1(&MY_EXP, 1, &o[0]), o[1]));
    } else if (kind == W_ONCE) {
        y = tn_function_apply1(&SQ_ONCE, 1, &a);
        s = tn_sum(tn_mul(y, y));
    }
    double cv[3];
    tn_copy_to_f64(c, cv, 3);
    int64_t cver = tn_version(c);
    tn_clear_error();
    tn_test_fail_alloc_at(n);
    tn_status st;
    tn_tensor *g = NULL;
    switch (kind) {
    case W_APPLY_TT:
        st = tn_function_apply(&TT, 2, (tn_tensor *[]){a, b}, 2, r);
        break;
    case W_APPLY_DIRTY_VIEW:
        st = (r[0] = tn_function_apply1(&MUL2, 1, &v)) ? 0 : -1;
        break;
    case W_APPLY_ND:
        st = tn_function_apply(&ND, 1, &c, 3, r);
        break;
    case W_BACKWARD:
        st = tn_backward(s, NULL, false);
        break;
    default:
        st = tn_autograd_grad(1, &s, NULL, 1, &a, &g, false, true);
        break;
    }
    bool fired = tn_test_alloc_failed();
    tn_test_fail_alloc_at(0);
    if (st < 0) {
        if (!fired)
            fail_msg("walk %d, N=%lld: failed with no allocation failed: %s", kind, (long long)n,
                     tn_last_error());
        tt_assert_error(TN_ERR_OUT_OF_MEMORY, "");
        assert_true(tn_last_error()[0] != '\0');
        for (int k = 0; k < 3; k++)
            assert_null(r[k]);
        int64_t moved = tn_version(c) - cver;
        assert_true(moved == 0 || (kind == W_APPLY_DIRTY_VIEW && moved == 1));
        if (moved == 0) tt_assert_close(c, cv, 3, 0);
        assert_null(tn_grad(a));
    } else if (kind == W_BACKWARD) {
        tt_assert_grad(b, (const double[]){1 + 0.5 * exp(1.5), 1 + exp(4), 1 + 2 * exp(10)}, 3,
                       1e-5);
    }
    tn_scope_end();
    return fired;
}

static void oom_walk(void **state) {
    tn_set_detect_anomaly(true, false); /* node traces: one more allocation per node */
    for (walk_kind kind = W_APPLY_TT; kind <= W_ONCE; kind++) {
        int64_t n = 1;
        while (walk_one(kind, n))
            n++;
        assert_true(n > 3); /* the walk did fail something */
    }
    tn_set_detect_anomaly(false, false);
}

/* ---- threads ------------------------------------------------------------------------- */

enum { THREADS = 8, ITERS = 40 };

typedef struct thread_arg {
    tn_tensor *x;     /* shared leaf */
    tn_tensor *loss;  /* shared graph: TT's, retained */
    tn_tensor *ab[2]; /* its leaves */
    int failures;
    char msg[256];
} thread_arg;

static pthread_barrier_t barrier;

static void note_failure(thread_arg *t, const char *what) {
    if (!t->failures++) snprintf(t->msg, sizeof t->msg, "%s: %s", what, tn_last_error());
}

static void *thread_main(void *p) {
    thread_arg *t = p;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < ITERS; i++) {
        if (tn_scope_begin() != TN_OK) {
            note_failure(t, "scope");
            continue;
        }
        /* the same descriptor from every thread, into one shared leaf */
        tn_tensor *y = tn_function_apply1(&MY_EXP, 1, &t->x);
        if (!y || tn_backward(tn_sum(y), NULL, false) < 0) note_failure(t, "exp");
        /* one shared graph, concurrently, with retain_graph */
        tn_tensor *g[2];
        double ga[2], gb[2];
        if (tn_autograd_grad(1, &t->loss, NULL, 2, t->ab, g, true, false) < 0 ||
            tn_copy_to_f64(g[0], ga, 2) < 0 || tn_copy_to_f64(g[1], gb, 2) < 0)
            note_failure(t, "shared graph");
        else if (ga[0] != 9 || ga[1] != 11 || gb[0] != 5 || gb[1] != 7)
            note_failure(t, "shared graph values");
        /* an in-place custom function on the thread's own non-leaf */
        tn_tensor *c = tn_mul_scalar(t->x, 1);
        if (!tn_function_apply1(&MUL2, 1, &c) || tn_version(c) != 2) note_failure(t, "dirty");
        tn_scope_end();
    }
    return NULL;
}

static void threads(void **state) {
    tn_tensor *x = tt_f64(1, S3, (const double[]){0.5, -1, 2}, true);
    tn_tensor *a = vec2(1, 2, true), *b = vec2(3, 4, true), *o[2];
    assert_int_equal(tn_function_apply(&TT, 2, (tn_tensor *[]){a, b}, 2, o), TN_OK);
    tn_tensor *o0 = tn_mul_scalar(o[0], 2), *o1 = tn_mul_scalar(o[1], 3), *sum = tn_add(o0, o1);
    tn_tensor *loss = tn_sum(sum);
    tn_release(o0);
    tn_release(o1);
    tn_release(sum);
    tn_release(o[0]);
    tn_release(o[1]);
    thread_arg args[THREADS];
    pthread_t th[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        args[i] = (thread_arg){.x = x, .loss = loss, .ab = {a, b}};
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < THREADS; i++)
        if (args[i].failures)
            fail_msg("thread %d: %d failures, first %s", i, args[i].failures, args[i].msg);
    double n = THREADS * ITERS;
    tt_assert_grad(x, (const double[]){n * exp(0.5), n * exp(-1.0), n * exp(2.0)}, 3, 1e-12);
    tn_release(loss);
    tn_release(a);
    tn_release(b);
    tn_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(exp_values_and_gradient),
        TT_TEST(doc_example_silu),
        TT_TEST(context_probe),
        TT_TEST(two_inputs_two_outputs),
        TT_TEST(non_differentiable_outputs),
        TT_TEST(returns_input),
        TT_TEST(dirty_non_leaf),
        TT_TEST(dirty_leaf),
        TT_TEST(dirty_view),
        TT_TEST(dirty_errors),
        TT_TEST(saved_output_modified),
        TT_TEST(save_none_and_twice),
        TT_TEST(anomaly_names_custom_node),
        TT_TEST(anomaly_nan_names_custom_node),
        TT_TEST(double_backward),
        TT_TEST(once_differentiable),
        TT_TEST(wrong_gradients),
        TT_TEST(callback_errors),
        TT_TEST(bad_arguments),
        TT_TEST(context_misuse),
        TT_TEST(user_data_lifetime),
        TT_TEST(nested_and_scoped),
        TT_TEST(gradcheck),
        TT_TEST(oom_walk),
        TT_TEST(threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
