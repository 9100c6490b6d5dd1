/* Inference mode (tn_set_inference_mode, torch.inference_mode): PyTorch's
 * TestAutogradInferenceMode scenarios, ported with the values and texts
 * PyTorch 1.13 gives (/usr/bin/python3; each scenario in its comment), the
 * fused ops a sampler runs, and threads toggling the mode. Every test runs
 * between tt_setup/tt_teardown: the refused calls leak nothing. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <string.h>

#include "util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})

#define SAVED_ERR                                                                                  \
    "Inference tensors cannot be saved for backward. To work around you can make a clone to "      \
    "get a normal tensor and use it in autograd."
#define INPLACE_ERR                                                                                \
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "      \
    "clone to get a normal tensor before doing inplace update.See "                                \
    "https://github.com/pytorch/rfcs/pull/17 for more details."
#define VIEW_ADVICE                                                                                \
    " in normal mode. Given that this use case is ambiguous and error-prone, it is forbidden. "    \
    "You can clarify your code by moving both the view and the inplace either both inside the "    \
    "inference_mode block (if you don't want the inplace to be tracked) or both outside (if you "  \
    "want the inplace to be tracked)."
#define VIEW_DIRECT_ERR                                                                            \
    "A view was created in inference mode and is being modified inplace" VIEW_ADVICE
#define VIEW_INDIRECT_ERR                                                                          \
    "A view was created in inference mode and its base or another view of its base has been "      \
    "modified inplace" VIEW_ADVICE

/* The last call failed with status st and exactly the message want. */
static void assert_failed(tn_status got, tn_status st, const char *want) {
    assert_int_equal(got, st);
    assert_string_equal(tn_last_error(), want);
    tn_clear_error();
}

/* torch.ones(1, 2, 3, requires_grad=rg) */
static tn_tensor *ones(bool rg) {
    tn_tensor *t = tn_ones(3, S(1, 2, 3), TN_F32);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

/* ones(rg) made inside inference mode */
static tn_tensor *inference_ones(bool rg) {
    bool prev = tn_set_inference_mode(true);
    tn_tensor *t = ones(rg);
    tn_set_inference_mode(prev);
    return t;
}

/* torch.is_inference_mode_enabled() through nested inference_mode(True/False) */
static void test_mode_nests(void **state) {
    (void)state;
    assert_false(tn_is_inference_mode());
    assert_false(tn_set_inference_mode(true));
    assert_true(tn_is_inference_mode());
    assert_true(tn_set_inference_mode(false));
    assert_false(tn_is_inference_mode());
    assert_false(tn_set_inference_mode(true));
    assert_true(tn_is_inference_mode());
    assert_true(tn_set_inference_mode(false));
    assert_false(tn_is_inference_mode());
}

/* Inference mode implies no-grad; leaving it restores the grad mode that was
 * set, also when tn_set_grad_enabled was called (and undone) inside. */
static void test_mode_implies_no_grad(void **state) {
    (void)state;
    bool prev = tn_set_inference_mode(true);
    assert_false(tn_is_grad_enabled());
    bool g = tn_set_grad_enabled(false);
    assert_true(g); /* the setting, which inference mode overrides */
    tn_set_grad_enabled(g);
    assert_false(tn_is_grad_enabled());
    tn_set_inference_mode(prev);
    assert_true(tn_is_grad_enabled());
    tn_set_grad_enabled(false);
    prev = tn_set_inference_mode(true);
    tn_set_inference_mode(prev);
    assert_false(tn_is_grad_enabled()); /* no-grad around it stays */
    tn_set_grad_enabled(true);
}

/* @torch.inference_mode() def func(x): return x * x
 * for rg in (True, False): d = func(ones(rg)) -> is_inference(d), not d.requires_grad */
static void test_decorated_function(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        tn_tensor *c = ones(rg);
        bool prev = tn_set_inference_mode(true);
        tn_tensor *d = tn_mul(c, c);
        tn_set_inference_mode(prev);
        assert_true(tn_is_inference(d));
        assert_false(tn_is_inference(c));
        assert_false(tn_requires_grad(d));
        tt_assert_grad_fn(d, NULL);
        tn_release(d);
        tn_release(c);
    }
}

/* with inference_mode(): c = ones() -> inference, not rg;
 * ones(requires_grad=True) -> rg and inference; ones().requires_grad_(False) -> inference */
static void test_tensor_creation(void **state) {
    (void)state;
    bool prev = tn_set_inference_mode(true);
    tn_tensor *c = ones(false), *tmp = ones(true);
    float v[2] = {1, 2};
    tn_tensor *from = tn_tensor_from(v, TN_F32, 1, S(2), true);
    tn_set_inference_mode(prev);
    assert_true(tn_is_inference(c));
    assert_false(tn_requires_grad(c));
    assert_true(tn_is_inference(tmp));
    assert_true(tn_requires_grad(tmp));
    assert_true(tn_is_leaf(tmp));
    assert_true(tn_is_inference(from));
    assert_true(tn_requires_grad(from));
    assert_int_equal(tn_requires_grad_(tmp, false), TN_OK); /* off: allowed outside too */
    assert_false(tn_requires_grad(tmp));
    assert_true(tn_is_inference(tmp));
    /* c._version: "Inference tensors do not track version counter." */
    assert_int_equal(tn_version(c), -1);
    assert_string_equal(tn_last_error(), "Inference tensors do not track version counter.");
    tn_clear_error();
    /* c.requires_grad_() outside */
    assert_failed(tn_requires_grad_(c, true), TN_ERR_AUTOGRAD,
                  "Setting requires_grad=True on inference tensor outside InferenceMode is not "
                  "allowed.");
    assert_false(tn_requires_grad(c));
    assert_false(tn_is_inference(NULL));
    tn_release(c);
    tn_release(tmp);
    tn_release(from);
}

/* s = ones(rg=True); a = s.clone(); out = a * a
 * with inference_mode(): a.add_(2)   (a is not an inference tensor: its version moves)
 * out.backward(ones_like(out)) -> "one of the variables needed for gradient computation has
 * been modified by an inplace operation" */
static void test_existing_autograd_session(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *s = ones(true), *a = tn_clone(s), *out = tn_mul(a, a);
    int64_t v0 = tn_version(a);
    bool prev = tn_set_inference_mode(true);
    assert_int_equal(tn_add_scalar_(a, 2), TN_OK);
    tn_set_inference_mode(prev);
    assert_false(tn_is_inference(a));
    assert_int_equal(tn_version(a), v0 + 1);
    tn_status st = tn_backward(out, tn_ones(3, S(1, 2, 3), TN_F32), false);
    tt_assert_error(st, "one of the variables needed for gradient computation has been modified "
                        "by an inplace operation");
    tn_clear_error();
    tn_scope_end();
}

/* with inference_mode(): for rg: c = ones(rg); c * c -> inference, not rg;
 * c.view(-1) -> inference, not rg; c.add_(2) -> still inference, c.requires_grad == rg */
static void test_inference_tensor_inside(void **state) {
    (void)state;
    bool prev = tn_set_inference_mode(true);
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *c = ones(rg);
        tn_tensor *f = tn_mul(c, c), *v = tn_view(c, 1, S(-1));
        assert_true(tn_is_inference(f));
        assert_false(tn_requires_grad(f));
        assert_true(tn_is_inference(v));
        assert_false(tn_requires_grad(v));
        assert_int_equal(tn_add_scalar_(c, 2), TN_OK);
        assert_int_equal(tn_add_scalar_(v, 1), TN_OK); /* through the view */
        assert_true(tn_is_inference(c));
        assert_int_equal(tn_requires_grad(c), rg);
        double got;
        assert_int_equal(tn_item(tn_select(v, 0, 5), &got), TN_OK);
        assert_true(got == 4.0);
        tn_scope_end();
    }
    tn_set_inference_mode(prev);
}

/* for rg: with inference_mode(): c = ones(rg)
 * c * c -> not inference, not rg, a leaf (all inputs inference: no autograd);
 * c.view(-1) -> inference, not rg, a leaf (not a view) */
static void test_inference_tensor_outside_functional_and_view(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        tn_tensor *c = inference_ones(rg);
        tn_tensor *f = tn_mul(c, c), *v = tn_view(c, 1, S(-1));
        assert_false(tn_is_inference(f));
        assert_false(tn_requires_grad(f));
        assert_true(tn_is_leaf(f));
        assert_true(tn_is_inference(v));
        assert_false(tn_requires_grad(v));
        assert_true(tn_is_leaf(v));
        tn_tensor *d = tn_detach(c), *cl = tn_clone(c), *da = tn_data(c);
        assert_true(tn_is_inference(d));   /* c.detach().is_inference() */
        assert_false(tn_is_inference(cl)); /* c.clone().is_inference() */
        assert_true(tn_is_inference(da));  /* c.data.is_inference() */
        tn_release(d);
        tn_release(cl);
        tn_release(da);
        tn_release(f);
        tn_release(v);
        tn_release(c);
    }
}

/* for rg in (False, True): with inference_mode(): c = ones(rg)
 * c.add_(2) outside: rg False -> "Inplace update to inference tensor outside InferenceMode ...",
 * rg True -> "a leaf Variable that requires grad is being used in an in-place operation."
 * Under no_grad the inference error stays. PyTorch writes before it refuses (c holds 2 after
 * the error); tenet refuses first: c still holds 1. */
static void test_inference_tensor_inplace_outside(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        tn_tensor *c = inference_ones(rg);
        tn_status st = tn_add_scalar_(c, 2);
        if (rg)
            assert_failed(st, TN_ERR_AUTOGRAD,
                          "a leaf Variable that requires grad is being used in an in-place "
                          "operation.");
        else
            assert_failed(st, TN_ERR_AUTOGRAD, INPLACE_ERR);
        bool g = tn_set_grad_enabled(false);
        assert_failed(tn_fill_(c, 5), TN_ERR_AUTOGRAD, INPLACE_ERR);
        tn_set_grad_enabled(g);
        tt_assert_close(c, D(1, 1, 1, 1, 1, 1), 6, 0);
        tn_release(c);
    }
    /* copy_ into it, a view of it, masked_fill_, an out= form */
    tn_tensor *c = inference_ones(false), *n = tn_zeros(3, S(1, 2, 3), TN_F32);
    tn_tensor *row = tn_select(c, 1, 0), *m = tn_eq(n, n);
    assert_failed(tn_copy_(c, n), TN_ERR_AUTOGRAD, INPLACE_ERR);
    assert_failed(tn_zero_(row), TN_ERR_AUTOGRAD, INPLACE_ERR);
    assert_failed(tn_masked_fill_(c, m, 3), TN_ERR_AUTOGRAD, INPLACE_ERR);
    assert_failed(tn_add_out(c, n, n), TN_ERR_AUTOGRAD, INPLACE_ERR);
    tt_assert_close(c, D(1, 1, 1, 1, 1, 1), 6, 0);
    assert_int_equal(tn_copy_(n, c), TN_OK); /* reading it into a normal tensor is fine */
    tt_assert_close(n, D(1, 1, 1, 1, 1, 1), 6, 0);
    tn_release(m);
    tn_release(row);
    tn_release(n);
    tn_release(c);
}

/* for rg: s = ones(rg); a = s.clone()
 * with inference_mode(): a.add_(2) twice -> not inference, a.requires_grad == rg;
 *   a.view(-1) -> not inference, requires_grad == rg
 * then outside: a.add_(2) twice -> the same; a.view(-1) the same */
static void test_normal_tensor_inplace_in_inference_mode(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *a = tn_clone(s);
        int64_t v0 = tn_version(a);
        for (int mode = 1; mode >= 0; mode--) {
            bool prev = tn_set_inference_mode(mode);
            for (int k = 0; k < 2; k++) {
                assert_int_equal(tn_add_scalar_(a, 2), TN_OK);
                assert_false(tn_is_inference(a));
                assert_int_equal(tn_requires_grad(a), rg);
            }
            tn_tensor *v = tn_view(a, 1, S(-1));
            assert_false(tn_is_inference(v));
            assert_int_equal(tn_requires_grad(v), rg);
            tn_set_inference_mode(prev);
        }
        assert_int_equal(tn_version(a), v0 + 4); /* every write moved it */
        tt_assert_close(a, D(9, 9, 9, 9, 9, 9), 6, 0);
        tn_scope_end();
    }
}

/* for rg: s = ones(rg); a = s.clone()
 * with inference_mode(): out = a.view(-1) -> not inference, rg, a view;
 *   tmp = out.view(-1) -> the same, a leaf; tmp.add_(2) -> a._version == tmp._version */
static void test_normal_tensor_view_in_inference_mode(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *a = tn_clone(s);
        bool prev = tn_set_inference_mode(true);
        tn_tensor *out = tn_view(a, 1, S(-1)), *tmp = tn_view(out, 1, S(-1));
        assert_false(tn_is_inference(out));
        assert_int_equal(tn_requires_grad(out), rg);
        assert_false(tn_is_inference(tmp));
        assert_int_equal(tn_requires_grad(tmp), rg);
        assert_true(tn_is_leaf(tmp));
        assert_int_equal(tn_add_scalar_(tmp, 2), TN_OK);
        assert_false(tn_is_inference(tmp));
        assert_int_equal(tn_version(a), tn_version(tmp));
        tn_set_inference_mode(prev);
        tn_scope_end();
    }
}

/* for rg: s = ones(rg); a = s.clone(); with inference_mode(): out = a.view(-1)
 * tmp = out * out -> not inference, requires_grad == rg
 * out.add_(2): rg -> "A view was created in inference mode and is being modified inplace in
 * normal mode. ..."; else fine. out.view(2, 3) -> not inference, rg. */
static void test_normal_tensor_view_outside(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *a = tn_clone(s);
        bool prev = tn_set_inference_mode(true);
        tn_tensor *out = tn_view(a, 1, S(-1));
        tn_set_inference_mode(prev);
        tn_tensor *tmp = tn_mul(out, out);
        assert_false(tn_is_inference(tmp));
        assert_int_equal(tn_requires_grad(tmp), rg);
        tn_status st = tn_add_scalar_(out, 2);
        if (rg)
            assert_failed(st, TN_ERR_AUTOGRAD, VIEW_DIRECT_ERR);
        else
            assert_int_equal(st, TN_OK);
        tmp = tn_view(out, 2, S(2, 3));
        assert_false(tn_is_inference(tmp));
        assert_int_equal(tn_requires_grad(tmp), rg);
        tn_scope_end();
    }
}

/* for rg: s = ones(rg); a = s.clone(); with inference_mode(): view_out = a.view(-1)
 * a.add_(2) outside, then view_out.grad_fn: rg -> "A view was created in inference mode and its
 * base or another view of its base has been modified inplace in normal mode. ..." */
static void test_view_on_rebase_indirect(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *a = tn_clone(s);
        bool prev = tn_set_inference_mode(true);
        tn_tensor *v = tn_view(a, 1, S(-1));
        tn_set_inference_mode(prev);
        assert_int_equal(tn_add_scalar_(a, 2), TN_OK);
        const char *name = tn_grad_fn_name(v);
        assert_null(name);
        if (rg)
            assert_failed(tn_last_status(), TN_ERR_AUTOGRAD, VIEW_INDIRECT_ERR);
        else
            assert_int_equal(tn_last_status(), TN_OK);
        tn_scope_end();
    }
}

/* for rg: s = ones(rg); with inference_mode(): c = ones(rg)
 * out = c.add(s) -> not inference, requires_grad == rg; rg: out.backward(ones) -> c.grad ones
 * (an inference leaf that requires grad still gets its gradient);
 * rg: c * s -> "Inference tensors cannot be saved for backward. ..." */
static void test_mix_functional(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *c = inference_ones(rg);
        tn_tensor *out = tn_add(c, s);
        assert_false(tn_is_inference(out));
        assert_int_equal(tn_requires_grad(out), rg);
        if (rg) {
            assert_int_equal(tn_backward(out, tn_ones(3, S(1, 2, 3), TN_F32), false), TN_OK);
            tt_assert_grad(c, D(1, 1, 1, 1, 1, 1), 6, 0);
            assert_null(tn_mul(c, s));
            assert_failed(tn_last_status(), TN_ERR_AUTOGRAD, SAVED_ERR);
            assert_null(tn_mul(s, c));
            assert_failed(tn_last_status(), TN_ERR_AUTOGRAD, SAVED_ERR);
            /* c * (a normal tensor not requiring grad): only that one is saved */
            tn_tensor *d = tn_mul(c, tn_ones(3, S(1, 2, 3), TN_F32));
            tt_assert_grad_fn(d, "MulBackward0");
            tn_tensor *ts[2] = {s, c};
            tt_assert_grad_fn(tn_stack(2, ts, 0), "StackBackward0"); /* saves no input */
        } else {
            tt_assert_grad_fn(tn_mul(c, s), NULL);
        }
        tn_scope_end();
    }
}

/* class F(Function): forward(ctx, x, y): ctx.save_for_backward(y); return x * 2
 * F.apply(s, c) with c an inference tensor -> "Inference tensors cannot be saved ..." */
static int save_second_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                          tn_tensor **out) {
    (void)n_in;
    (void)n_out;
    out[0] = tn_mul_scalar(in[0], 2);
    if (!out[0]) return tn_last_status();
    return tn_function_save_for_backward(ctx, 1, &in[1]);
}
static int save_second_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *gout, int n_in,
                          tn_tensor **gin) {
    (void)ctx;
    (void)n_out;
    (void)n_in;
    gin[0] = tn_retain(gout[0]);
    return 1;
}
static const tn_function SAVE_SECOND = {
    .name = "SaveSecondBackward", .forward = save_second_fw, .backward = save_second_bw};

static void test_custom_function_saves_inference_tensor(void **state) {
    (void)state;
    tn_tensor *s = ones(true), *c = inference_ones(false), *o = NULL;
    assert_failed(tn_function_apply(&SAVE_SECOND, 2, (tn_tensor *[]){s, c}, 1, &o),
                  TN_ERR_AUTOGRAD, SAVED_ERR);
    assert_null(o);
    tn_tensor *n = tn_clone(c); /* the way out */
    assert_int_equal(tn_function_apply(&SAVE_SECOND, 2, (tn_tensor *[]){s, n}, 1, &o), TN_OK);
    tt_assert_grad_fn(o, "SaveSecondBackward");
    tn_release(o);
    tn_release(n);
    tn_release(c);
    tn_release(s);
}

/* for rg: s = ones(rg); a = s.clone(); with inference_mode(): c = ones()
 * rg: a.mul_(c) -> saved error; torch.mul(s, s, out=c) -> the out= error
 * else: a.mul_(c) fine; torch.mul(s, s, out=c) -> the in-place error */
static void test_mix_inplace(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *a = tn_clone(s), *c = inference_ones(false);
        if (rg) {
            int64_t v0 = tn_version(a);
            assert_failed(tn_mul_(a, c), TN_ERR_AUTOGRAD, SAVED_ERR);
            assert_int_equal(tn_version(a), v0); /* refused before the write */
            assert_failed(tn_mul_out(c, s, s), TN_ERR_AUTOGRAD,
                          "mul(): functions with out=... arguments don't support automatic "
                          "differentiation, but one of the arguments requires grad.");
        } else {
            assert_int_equal(tn_mul_(a, c), TN_OK);
            assert_failed(tn_mul_out(c, s, s), TN_ERR_AUTOGRAD, INPLACE_ERR);
        }
        tn_scope_end();
    }
}

/* for rg: s = ones(rg); with inference_mode(): c = ones()
 * c.view_as(s) -> inference, not rg; s.view_as(c) -> not inference, requires_grad == rg */
static void test_mix_view(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *c = inference_ones(false);
        tn_tensor *t1 = tn_view(c, tn_ndim(s), tn_shape(s));
        tn_tensor *t2 = tn_view(s, tn_ndim(c), tn_shape(c));
        assert_true(tn_is_inference(t1));
        assert_false(tn_requires_grad(t1));
        assert_false(tn_is_inference(t2));
        assert_int_equal(tn_requires_grad(t2), rg);
        tn_scope_end();
    }
}

/* for rg: s = ones(rg); a = s.clone(); with inference_mode(): view_out = a.view_as(a)
 * view_out.add_(2) outside: rg -> the direct view error; else fine */
static void test_view_on_rebase_direct(void **state) {
    (void)state;
    for (int rg = 0; rg < 2; rg++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_tensor *s = ones(rg), *a = tn_clone(s);
        bool prev = tn_set_inference_mode(true);
        tn_tensor *v = tn_view(a, tn_ndim(a), tn_shape(a));
        tn_set_inference_mode(prev);
        tn_status st = tn_add_scalar_(v, 2);
        if (rg)
            assert_failed(st, TN_ERR_AUTOGRAD, VIEW_DIRECT_ERR);
        else
            assert_int_equal(st, TN_OK);
        tn_scope_end();
    }
}

/* A sampler's ops in inference mode over weights that require grad (a model):
 * linear, layer_norm, embedding, the fused attention, softmax. The results are
 * inference tensors without history, with the values the same calls give
 * under no-grad; used outside (read, not saved) they record nothing. */
typedef struct sampler_out {
    tn_tensor *probs, *attn;
} sampler_out;

static sampler_out sampler_step(tn_tensor *wte, tn_tensor *w, tn_tensor *b, tn_tensor *ln_w,
                                tn_tensor *idx) {
    tn_tensor *x = tn_embedding(wte, idx);                      /* (1, 4, 8) */
    tn_tensor *h = tn_layer_norm(x, 1, S(8), ln_w, NULL, 1e-5); /* (1, 4, 8) */
    tn_tensor *q = tn_linear(h, w, b);                          /* (1, 4, 8) */
    tn_tensor *y = tn_scaled_dot_product_attention(q, h, h, NULL, 0, true);
    tn_tensor *last = tn_select(y, 1, 3);                         /* (1, 8) */
    tn_tensor *logits = tn_matmul(last, tn_transpose(wte, 0, 1)); /* (1, 16) */
    return (sampler_out){tn_softmax(logits, -1), y};
}

static void test_sampler_ops(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(3);
    tn_tensor *wte = tn_randn(2, S(16, 8), TN_F32), *w = tn_randn(2, S(8, 8), TN_F32);
    tn_tensor *b = tn_randn(1, S(8), TN_F32), *ln_w = tn_rand(1, S(8), TN_F32);
    tn_tensor *params[4] = {wte, w, b, ln_w};
    for (int i = 0; i < 4; i++)
        assert_int_equal(tn_requires_grad_(params[i], true), TN_OK);
    int64_t ids[4] = {3, 1, 4, 1};
    tn_tensor *idx = tn_tensor_from(ids, TN_I64, 2, S(1, 4), false);
    bool g = tn_set_grad_enabled(false);
    sampler_out ref = sampler_step(wte, w, b, ln_w, idx);
    tn_set_grad_enabled(g);
    bool prev = tn_set_inference_mode(true);
    sampler_out inf = sampler_step(wte, w, b, ln_w, idx);
    tn_set_inference_mode(prev);
    assert_non_null(inf.probs);
    assert_true(tn_is_inference(inf.probs));
    assert_true(tn_is_inference(inf.attn));
    assert_false(tn_requires_grad(inf.probs));
    tt_assert_grad_fn(inf.probs, NULL);
    double want[16], got[16];
    assert_int_equal(tn_copy_to_f64(ref.probs, want, 16), TN_OK);
    assert_int_equal(tn_copy_to_f64(inf.probs, got, 16), TN_OK);
    assert_memory_equal(want, got, sizeof want); /* the same kernels: bit for bit */
    /* outside: reading it records nothing (all inputs inference) and a normal
     * operand that requires grad records what saves no inference tensor */
    tn_tensor *top = tn_argmax_dim(inf.probs, -1, false);
    assert_non_null(top);
    assert_false(tn_is_inference(top));
    tn_tensor *more = tn_add(inf.probs, tn_narrow(tn_select(wte, 0, 0), 0, 0, 1));
    tt_assert_grad_fn(more, "AddBackward0");
    assert_null(tn_linear(inf.attn, w, b)); /* linear saves its input for w's gradient */
    assert_failed(tn_last_status(), TN_ERR_AUTOGRAD, SAVED_ERR);
    tn_scope_end();
}

/* ---- threads: the mode is per thread -------------------------------------------- */

#define NT 4
#define ROUNDS 200

typedef struct worker {
    pthread_barrier_t *bar;
    tn_tensor *shared; /* an inference tensor every thread reads */
    int id, bad;       /* rounds whose results disagreed with the thread's own mode */
} worker;

static void *toggle_worker(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->bar);
    for (int r = 0; r < ROUNDS; r++) {
        bool on = ((r + w->id) & 1) != 0;
        bool prev = tn_set_inference_mode(on);
        if (tn_scope_begin() != TN_OK) {
            w->bad++;
            break;
        }
        tn_tensor *x = tn_mul_scalar(w->shared, 2), *v = tn_view(x, 1, S(-1));
        bool ok = !prev && x && v && tn_is_inference(x) == on && tn_is_inference(v) == on &&
                  tn_is_grad_enabled() == !on && tn_add_scalar_(x, 1) == TN_OK &&
                  (on || tn_version(x) == 1);
        double got = 0;
        ok = ok && tn_item(tn_select(v, 0, 0), &got) == TN_OK && got == 3.0;
        tn_scope_end();
        tn_set_inference_mode(prev);
        w->bad += !ok;
    }
    return NULL;
}

static void test_threads_toggle(void **state) {
    (void)state;
    tn_tensor *shared = inference_ones(false);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    pthread_t th[NT];
    worker w[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (worker){.bar = &bar, .shared = shared, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, toggle_worker, &w[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].bad, 0);
    }
    pthread_barrier_destroy(&bar);
    assert_false(tn_is_inference_mode()); /* the main thread's own, untouched */
    tn_release(shared);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_mode_nests),
        TT_TEST(test_mode_implies_no_grad),
        TT_TEST(test_decorated_function),
        TT_TEST(test_tensor_creation),
        TT_TEST(test_existing_autograd_session),
        TT_TEST(test_inference_tensor_inside),
        TT_TEST(test_inference_tensor_outside_functional_and_view),
        TT_TEST(test_inference_tensor_inplace_outside),
        TT_TEST(test_normal_tensor_inplace_in_inference_mode),
        TT_TEST(test_normal_tensor_view_in_inference_mode),
        TT_TEST(test_normal_tensor_view_outside),
        TT_TEST(test_view_on_rebase_indirect),
        TT_TEST(test_mix_functional),
        TT_TEST(test_mix_inplace),
        TT_TEST(test_mix_view),
        TT_TEST(test_custom_function_saves_inference_tensor),
        TT_TEST(test_view_on_rebase_direct),
        TT_TEST(test_sampler_ops),
        TT_TEST(test_threads_toggle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
