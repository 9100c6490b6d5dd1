/* tests/test_attention.c — tn_scaled_dot_product_attention: output and the
 * three gradients against the composed ops softmax(q k^T / sqrt(E) + M) v
 * (tn_matmul, tn_softmax, ...) for causal / bool / additive / broadcast
 * masks, tile-boundary shapes and L = 1, S = 1; rows with no key; the
 * grad_fn name; thread-count independence of both backward schedules;
 * create_graph and double backward; dropout (kept fraction, and forward and
 * backward against the composed ops with the same mask through the kernel's
 * hash, engine/core/kernel_args.h). */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/base.h"
#include "engine/core/kernel_args.h"
#include "engine/cpu/isa.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

enum { M_NONE, M_CAUSAL, M_BOOL_LS, M_ADD_B1LS, M_BOOL_B1LS, M_ADD_LS };

static tn_tensor *rnd(int nd, const int64_t *shape, tn_dtype dt, bool rg) {
    tn_tensor *t = tn_randn(nd, shape, dt);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

/* softmax(q k^T scale + madd) (times z) v with the public ops. */
static tn_tensor *ref_sdpa(tn_tensor *q, tn_tensor *k, tn_tensor *v, tn_tensor *madd,
                           tn_tensor *z) {
    double scale = 1 / sqrt((double)tn_shape(q)[tn_ndim(q) - 1]);
    tn_tensor *s = tn_mul_scalar(tn_matmul(q, tn_transpose(k, -2, -1)), scale);
    if (madd) s = tn_add(s, madd);
    tn_tensor *p = tn_softmax(s, -1);
    if (z) p = tn_mul(p, z);
    return tn_matmul(p, v);
}

/* An (L, S) 0/-inf additive tensor from a bool one. */
static tn_tensor *additive_of(const tn_tensor *mask, tn_dtype dt) {
    int64_t n = tn_numel(mask);
    double *m = malloc(sizeof(double) * (size_t)n);
    assert_int_equal(tn_copy_to_f64(mask, m, n), TN_OK);
    for (int64_t i = 0; i < n; i++)
        m[i] = m[i] != 0 ? 0 : -INFINITY;
    tn_tensor *t = tn_to(tt_f64(tn_ndim(mask), tn_shape(mask), m, false), dt, TN_DEVICE_KEEP);
    free(m);
    return t;
}

/* A bool mask of the shape with every row keeping key i % S. */
static tn_tensor *bool_mask(int nd, const int64_t *shape) {
    tn_tensor *r = tn_rand(nd, shape, TN_F32);
    int64_t n = tn_numel(r), S = shape[nd - 1], L = shape[nd - 2];
    double *v = malloc(sizeof(double) * (size_t)n);
    assert_int_equal(tn_copy_to_f64(r, v, n), TN_OK);
    for (int64_t i = 0; i < n; i++) {
        int64_t row = i / S % L, col = i % S;
        v[i] = v[i] < 0.6 || col == row % S;
    }
    tn_tensor *t = tn_to(tt_f64(nd, shape, v, false), TN_BOOL, TN_DEVICE_KEEP);
    free(v);
    return t;
}

static tn_tensor *causal_additive(int64_t L, int64_t S, tn_dtype dt) {
    double *v = malloc(sizeof(double) * (size_t)(L * S));
    for (int64_t i = 0; i < L * S; i++)
        v[i] = i % S > i / S ? -INFINITY : 0;
    tn_tensor *t = tn_to(tt_f64(2, S(L, S), v, false), dt, TN_DEVICE_KEEP);
    free(v);
    return t;
}

/* Output and the gradients of q, k, v of the fused op against the composed
 * ops for one case (4-D q, k, v shapes). */
static void run_case(tn_dtype dt, const int64_t *qs, const int64_t *ks, const int64_t *vs, int mode,
                     double tol) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    int64_t B = qs[0], L = qs[2], S = ks[2];
    tn_tensor *q = rnd(4, qs, dt, true), *k = rnd(4, ks, dt, true), *v = rnd(4, vs, dt, true);
    tn_tensor *mask = NULL, *madd = NULL;
    switch (mode) {
    case M_CAUSAL:
        madd = causal_additive(L, S, dt);
        break;
    case M_BOOL_LS:
        mask = bool_mask(2, S(L, S));
        break;
    case M_BOOL_B1LS:
        mask = bool_mask(4, S(B, 1, L, S));
        break;
    case M_ADD_B1LS:
        mask = madd = rnd(4, S(B, 1, L, S), dt, false);
        break;
    case M_ADD_LS:
        mask = madd = rnd(2, S(L, S), dt, false);
        break;
    }
    if (mask && tn_dtype_of(mask) == TN_BOOL) madd = additive_of(mask, dt);
    tn_tensor *out = tn_scaled_dot_product_attention(q, k, v, mask, 0, mode == M_CAUSAL);
    assert_non_null(out);
    assert_string_equal(tn_grad_fn_name(out), "ScaledDotProductFlashAttentionForCpuBackward0");
    tn_tensor *want = ref_sdpa(q, k, v, madd, NULL);
    tt_assert_close_tensors(out, want, tol);
    tn_tensor *g = rnd(tn_ndim(out), tn_shape(out), dt, false);
    assert_int_equal(tn_backward(out, g, false), TN_OK);
    tn_tensor *gq = tn_grad(q), *gk = tn_grad(k), *gv = tn_grad(v);
    assert_int_equal(tn_set_grad(q, NULL), TN_OK);
    assert_int_equal(tn_set_grad(k, NULL), TN_OK);
    assert_int_equal(tn_set_grad(v, NULL), TN_OK);
    assert_int_equal(tn_backward(want, g, false), TN_OK);
    tt_assert_close_tensors(gq, tn_grad(q), tol);
    tt_assert_close_tensors(gk, tn_grad(k), tol);
    tt_assert_close_tensors(gv, tn_grad(v), tol);
    tn_scope_end();
}

static void values_and_grads(void **state) {
    tn_manual_seed(1);
    const int modes[] = {M_NONE, M_CAUSAL, M_BOOL_LS, M_ADD_B1LS, M_BOOL_B1LS, M_ADD_LS};
    for (int dti = 0; dti < 2; dti++) {
        tn_dtype dt = dti ? TN_F32 : TN_F64;
        double tol = dti ? 2e-5 : 1e-11;
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            run_case(dt, S(2, 3, 17, 8), S(2, 3, 23, 8), S(2, 3, 23, 8), modes[m], tol);
            run_case(dt, S(2, 3, 23, 8), S(2, 3, 17, 8), S(2, 3, 17, 5), modes[m], tol);
            run_case(dt, S(2, 3, 1, 8), S(2, 3, 23, 8), S(2, 3, 23, 8), modes[m], tol);
            run_case(dt, S(2, 3, 17, 8), S(2, 3, 1, 8), S(2, 3, 1, 4), modes[m], tol);
            run_case(dt, S(1, 2, 70, 16), S(1, 2, 65, 16), S(1, 2, 65, 16), modes[m], tol);
            run_case(dt, S(4, 5, 40, 8), S(4, 5, 40, 8), S(4, 5, 40, 8), modes[m], tol); /* fused */
        }
    }
}

/* Broadcast batch dims, 3-D inputs, and a q that is a transposed view. */
static void broadcast_and_strides(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(2);
    tn_tensor *q0 = rnd(4, S(2, 9, 3, 8), TN_F64, true); /* (B, L, H, E) */
    tn_tensor *q = tn_transpose(q0, 1, 2);
    tn_tensor *k = rnd(3, S(1, 11, 8), TN_F64, true), *v = rnd(2, S(11, 6), TN_F64, true);
    tn_tensor *out = tn_scaled_dot_product_attention(q, k, v, NULL, 0, true);
    assert_int_equal(tn_ndim(out), 4);
    assert_int_equal(tn_shape(out)[1], 3);
    tn_tensor *want = ref_sdpa(q, k, v, causal_additive(9, 11, TN_F64), NULL);
    tt_assert_close_tensors(out, want, 1e-12);
    tn_tensor *g = rnd(4, tn_shape(out), TN_F64, false);
    tn_tensor *gr[3], *gw[3], *in[3] = {q0, k, v};
    assert_int_equal(tn_autograd_grad(1, &out, &g, 3, in, gr, false, false), TN_OK);
    assert_int_equal(tn_autograd_grad(1, &want, &g, 3, in, gw, false, false), TN_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tn_ndim(gr[i]), tn_ndim(in[i]));
        tt_assert_close_tensors(gr[i], gw[i], 1e-12);
        tn_release(gr[i]), tn_release(gw[i]);
    }
    tn_scope_end();
}

/* A row whose keys are all masked gives 0 and no gradient (PyTorch 2.5+'s
 * _safe_softmax); the other rows are unaffected. */
static void fully_masked_rows(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(3);
    int64_t L = 5, S = 40;
    bool mb[5 * 40];
    for (int i = 0; i < L * S; i++)
        mb[i] = (i / S) != 2 && (i % 3 != 0);
    tn_tensor *mask = tn_tensor_from(mb, TN_BOOL, 2, S(L, S), false);
    tn_tensor *q = rnd(2, S(L, 4), TN_F32, true), *k = rnd(2, S(S, 4), TN_F32, true);
    tn_tensor *v = rnd(2, S(S, 3), TN_F32, true);
    tn_tensor *out = tn_scaled_dot_product_attention(q, k, v, mask, 0, false);
    double o[15];
    assert_int_equal(tn_copy_to_f64(out, o, 15), TN_OK);
    for (int e = 0; e < 3; e++)
        assert_true(o[2 * 3 + e] == 0);
    tn_tensor *want = ref_sdpa(q, k, v, additive_of(mask, TN_F32), NULL);
    double w[15];
    assert_int_equal(tn_copy_to_f64(want, w, 15), TN_OK);
    for (int i = 0; i < 15; i++)
        if (i / 3 != 2) assert_true(fabs(o[i] - w[i]) < 1e-5 * (1 + fabs(w[i])));
    assert_int_equal(tn_backward(tn_sum(out), NULL, false), TN_OK);
    double gq[20];
    assert_int_equal(tn_copy_to_f64(tn_grad(q), gq, 20), TN_OK);
    for (int e = 0; e < 4; e++)
        assert_true(gq[2 * 4 + e] == 0);
    for (int i = 0; i < 20; i++)
        assert_true(isfinite(gq[i]));
    /* additive -inf rows likewise; create_graph path too */
    tn_tensor *ma = additive_of(mask, TN_F32), *gi = NULL;
    tn_tensor *o2 = tn_scaled_dot_product_attention(q, k, v, ma, 0, false);
    tt_assert_close_tensors(o2, out, 0);
    assert_int_equal(tn_autograd_grad(1, &o2, (tn_tensor *[]){tn_full(2, S(L, 3), TN_F32, 1.0)}, 1,
                                      &q, &gi, false, true),
                     TN_OK);
    tt_assert_close_tensors(gi, tn_grad(q), 1e-5);
    tn_release(gi);
    tn_scope_end();
}

/* Both backward schedules (few slices: two passes; many: one per slice)
 * give the same bits on 1 and 2 threads. */
static void thread_independence(void **state) {
    const int64_t shapes[2][4] = {{1, 2, 200, 16}, {4, 8, 70, 16}};
    for (int c = 0; c < 2; c++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_manual_seed(4);
        const int64_t *sh = shapes[c];
        tn_tensor *q = rnd(4, sh, TN_F32, true), *k = rnd(4, sh, TN_F32, true);
        tn_tensor *v = rnd(4, sh, TN_F32, true), *g = rnd(4, sh, TN_F32, false);
        tn_tensor *res[2][4];
        int old = tn_get_num_threads();
        for (int t = 0; t < 2; t++) {
            tn_set_num_threads(t + 1);
            res[t][0] = tn_scaled_dot_product_attention(q, k, v, NULL, 0, true);
            assert_int_equal(tn_autograd_grad(1, &res[t][0], &g, 3, (tn_tensor *[]){q, k, v},
                                              &res[t][1], false, false),
                             TN_OK);
        }
        tn_set_num_threads(old);
        size_t bytes = (size_t)(sh[0] * sh[1] * sh[2] * sh[3]) * sizeof(float);
        for (int i = 0; i < 4; i++)
            assert_memory_equal(tn_data_ptr(res[0][i]), tn_data_ptr(res[1][i]), bytes);
        for (int t = 0; t < 2; t++)
            for (int i = 1; i < 4; i++)
                tn_release(res[t][i]);
        tn_scope_end();
    }
}

/* create_graph: the backward is recorded from public ops: first-order
 * gradients equal the fused ones, second order equals the composed ops'. */
static void double_backward(void **state) {
    for (int causal = 0; causal < 2; causal++) {
        assert_int_equal(tn_scope_begin(), TN_OK);
        tn_manual_seed(5);
        tn_tensor *q = rnd(3, S(2, 6, 4), TN_F64, true), *k = rnd(3, S(2, 7, 4), TN_F64, true);
        tn_tensor *v = rnd(3, S(2, 7, 3), TN_F64, true), *in[3] = {q, k, v};
        tn_tensor *out = tn_scaled_dot_product_attention(q, k, v, NULL, 0, causal);
        tn_tensor *want = ref_sdpa(q, k, v, causal ? causal_additive(6, 7, TN_F64) : NULL, NULL);
        tn_tensor *g = rnd(3, S(2, 6, 3), TN_F64, false), *ga[3], *gb[3];
        assert_int_equal(tn_autograd_grad(1, &out, &g, 3, in, ga, true, true), TN_OK);
        assert_int_equal(tn_autograd_grad(1, &want, &g, 3, in, gb, true, true), TN_OK);
        tn_tensor *la = tn_sum(tn_mul(ga[0], ga[0])), *lb = tn_sum(tn_mul(gb[0], gb[0]));
        for (int i = 0; i < 3; i++) {
            tt_assert_close_tensors(ga[i], gb[i], 1e-12);
            tn_release(ga[i]), tn_release(gb[i]);
        }
        tn_tensor *da[3], *db[3];
        assert_int_equal(tn_autograd_grad(1, &la, NULL, 3, in, da, false, false), TN_OK);
        assert_int_equal(tn_autograd_grad(1, &lb, NULL, 3, in, db, false, false), TN_OK);
        for (int i = 0; i < 3; i++) {
            tt_assert_close_tensors(da[i], db[i], 1e-10);
            tn_release(da[i]), tn_release(db[i]);
        }
        tn_scope_end();
    }
}

/* The dropout scale tensor (B, H, L, S) of a call made right after
 * tn_manual_seed(seed): the op draws its hash seed from the generator. */
static tn_tensor *dropout_z(uint64_t seed, int64_t nb, const int64_t *shape, double p, tn_dtype dt,
                            double *kept) {
    tn_manual_seed(seed);
    uint64_t hs = tn__rand_u64();
    int64_t L = shape[2], S = shape[3], n = nb * L * S, nk = 0;
    double *z = malloc(sizeof(double) * (size_t)n);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < S; j++) {
                bool keep = tn_attn_keep(hs, b, i, j, p);
                nk += keep;
                z[(b * L + i) * S + j] = keep ? 1 / (1 - p) : 0;
            }
    *kept = (double)nk / (double)n;
    tn_tensor *t = tn_to(tt_f64(4, shape, z, false), dt, TN_DEVICE_KEEP);
    free(z);
    return t;
}

static void dropout(void **state) {
    const double ps[] = {0.1, 0.5};
    for (int pi = 0; pi < 2; pi++) {
        for (int causal = 0; causal < 2; causal++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            double p = ps[pi], kept;
            tn_manual_seed(6);
            tn_tensor *q = rnd(4, S(2, 3, 40, 8), TN_F32, true);
            tn_tensor *k = rnd(4, S(2, 3, 50, 8), TN_F32, true);
            tn_tensor *v = rnd(4, S(2, 3, 50, 8), TN_F32, true), *in[3] = {q, k, v};
            tn_tensor *z = dropout_z(77, 6, S(2, 3, 40, 50), p, TN_F32, &kept);
            assert_true(fabs(kept - (1 - p)) < 0.02);
            tn_manual_seed(77);
            tn_tensor *out = tn_scaled_dot_product_attention(q, k, v, NULL, p, causal);
            tn_tensor *want = ref_sdpa(q, k, v, causal ? causal_additive(40, 50, TN_F32) : NULL, z);
            tt_assert_close_tensors(out, want, 2e-5);
            tn_tensor *g = rnd(4, S(2, 3, 40, 8), TN_F32, false), *ga[3], *gb[3], *gc[3];
            assert_int_equal(tn_autograd_grad(1, &out, &g, 3, in, ga, true, false), TN_OK);
            assert_int_equal(tn_autograd_grad(1, &out, &g, 3, in, gc, false, true), TN_OK);
            assert_int_equal(tn_autograd_grad(1, &want, &g, 3, in, gb, false, false), TN_OK);
            for (int i = 0; i < 3; i++) {
                tt_assert_close_tensors(ga[i], gb[i], 2e-5);
                tt_assert_close_tensors(gc[i], gb[i], 2e-5);
                tn_release(ga[i]), tn_release(gb[i]), tn_release(gc[i]);
            }
            tn_scope_end();
        }
    }
    /* p = 1 drops everything: zeros */
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *q = rnd(3, S(1, 4, 8), TN_F32, false);
    tn_tensor *o = tn_scaled_dot_product_attention(q, q, q, NULL, 1.0, false);
    tt_assert_close_tensors(o, tn_zeros(3, S(1, 4, 8), TN_F32), 0);
    tn_scope_end();
}

static void no_grad_and_empty(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *q = rnd(4, S(2, 0, 5, 8), TN_F32, true);
    tn_tensor *o = tn_scaled_dot_product_attention(q, q, q, NULL, 0, false);
    assert_int_equal(tn_numel(o), 0);
    /* no query rows: dK and dV are 0 */
    tn_tensor *q0 = rnd(3, S(2, 0, 8), TN_F32, true), *k0 = rnd(3, S(2, 5, 8), TN_F32, true);
    tn_tensor *v0 = rnd(3, S(2, 5, 3), TN_F32, true);
    tn_tensor *o0 = tn_scaled_dot_product_attention(q0, k0, v0, NULL, 0, false);
    assert_int_equal(tn_numel(o0), 0);
    assert_int_equal(tn_backward(tn_sum(o0), NULL, false), TN_OK);
    tt_assert_close_tensors(tn_grad(k0), tn_zeros(3, S(2, 5, 8), TN_F32), 0);
    tt_assert_close_tensors(tn_grad(v0), tn_zeros(3, S(2, 5, 3), TN_F32), 0);
    tn_tensor *q2 = rnd(3, S(2, 5, 8), TN_F32, false);
    tn_tensor *o2 = tn_scaled_dot_product_attention(q2, q2, q2, NULL, 0, true);
    assert_null(tn_grad_fn_name(o2));
    tn_scope_end();
}

/* Heads as a transformer makes them, a transposed view of (B, L, H, E): out comes laid out as
 * (B, L, H, Ev) (PyTorch's fused CPU kernel does the same), so out.transpose(1, 2).reshape(B,
 * L, H Ev) is a view of out's storage; the gradients of q, k, v follow their inputs' layouts;
 * and every value is bit for bit what contiguous copies of the same inputs give (float32 and
 * float64, causal and not, a gradient arriving transposed or broadcast). */
static void output_layout_follows_the_heads(void **state) {
    (void)state;
    const int64_t B = 2, L = 37, H = 3, E = 16;
    for (int dt = 0; dt < 2; dt++)
        for (int causal = 0; causal < 2; causal++) {
            assert_int_equal(tn_scope_begin(), TN_OK);
            tn_dtype d = dt ? TN_F64 : TN_F32;
            tn_manual_seed(7 + (uint64_t)causal);
            tn_tensor *qkv = rnd(4, S(B, L, H, 3 * E), d, true); /* one projection, split */
            tn_tensor *parts[3];
            assert_int_equal(tn_split(qkv, E, 3, parts, 3, NULL), TN_OK);
            tn_tensor *hv[3], *hc[3];
            for (int i = 0; i < 3; i++) {
                hv[i] = tn_transpose(parts[i], 1, 2);    /* (B, H, L, E), strided */
                hc[i] = tn_contiguous(tn_detach(hv[i])); /* the same values, contiguous */
                assert_int_equal(tn_requires_grad_(hc[i], true), TN_OK);
            }
            tn_tensor *o = tn_scaled_dot_product_attention(hv[0], hv[1], hv[2], NULL, 0, causal);
            tn_tensor *oc = tn_scaled_dot_product_attention(hc[0], hc[1], hc[2], NULL, 0, causal);
            assert_non_null(o);
            assert_non_null(oc);
            const int64_t *st = tn_stride(o);
            assert_true(st[0] == L * H * E && st[1] == E && st[2] == H * E && st[3] == 1);
            assert_true(tn_is_contiguous(oc));
            tn_tensor *y = tn_reshape(tn_transpose(o, 1, 2), 3, S(B, L, H * E));
            assert_ptr_equal(tn_data_ptr(y), tn_data_ptr(o)); /* a view: no copy */
            tt_assert_close_tensors(o, oc, 0);                /* the same bits */
            /* a gradient through y (o's layout) and a broadcast one (a sum's); the graph kept */
            for (int gk = 0; gk < 2; gk++) {
                tn_tensor *g = gk ? NULL : rnd(3, S(B, L, H * E), d, false), *gc = NULL;
                tn_tensor *src = gk ? tn_sum(y) : y, *srcc = NULL;
                if (gk) {
                    srcc = tn_sum(oc);
                } else {
                    gc = tn_contiguous(tn_transpose(tn_reshape(g, 4, S(B, L, H, E)), 1, 2));
                    srcc = oc;
                }
                tn_tensor *gv[3], *gcv[3];
                assert_int_equal(tn_autograd_grad(1, &src, gk ? NULL : &g, 3,
                                                  (tn_tensor *[]){parts[0], parts[1], parts[2]}, gv,
                                                  true, false),
                                 TN_OK);
                assert_int_equal(
                    tn_autograd_grad(1, &srcc, gk ? NULL : &gc, 3, hc, gcv, true, false), TN_OK);
                for (int i = 0; i < 3; i++) {
                    tn_tensor *back = tn_transpose(gv[i], 1, 2); /* (B, H, L, E) as hc */
                    tt_assert_close_tensors(back, gcv[i], 0);
                }
            }
            tn_scope_end();
        }
}

/* bfloat16 and float16 attention runs one slice at a time in float32 on the CPU
 * (engine/cpu/attention_kernels.c) where core would otherwise make float32 copies of the
 * operands: the output and the three gradients must be the copies' to the bit, for causal,
 * boolean and additive masks, keys longer than the queries, a few query rows, a transposed
 * (strided) query, and slices fewer than the threads (which core's copies take). */
static void half_pass(tn_dtype dt, tn_tensor *const base[4], const tn_tensor *mask, bool causal,
                      bool transpose_q, uint16_t *out[4]) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *leaf[3], *in[3];
    for (int i = 0; i < 3; i++) {
        leaf[i] = tn_detach(base[i]);
        assert_int_equal(tn_requires_grad_(leaf[i], true), TN_OK);
        in[i] = leaf[i];
    }
    if (transpose_q) in[0] = tn_transpose(leaf[0], 1, 2);
    tn_tensor *o = tn_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0, causal);
    assert_non_null(o);
    assert_int_equal(tn_dtype_of(o), dt);
    assert_int_equal(tn_backward(o, base[3], false), TN_OK);
    const tn_tensor *res[4] = {o, tn_grad(leaf[0]), tn_grad(leaf[1]), tn_grad(leaf[2])};
    for (int i = 0; i < 4; i++) {
        assert_non_null(res[i]);
        tn_tensor *c = tn_contiguous(res[i]);
        out[i] = malloc((size_t)tn_numel(c) * sizeof **out);
        assert_int_equal(tn_copy_to(c, out[i], (size_t)tn_numel(c) * sizeof **out), TN_OK);
    }
    tn_scope_end();
}

static void half_in_place_matches_copies(void **state) {
    (void)state;
    const struct {
        int64_t B, H, L, S, E, Ev;
        int mask; /* M_NONE, M_CAUSAL (is_causal), M_BOOL_LS, M_ADD_B1LS */
        bool tq;  /* q read through a transposed view */
    } cases[] = {
        {4, 8, 70, 70, 24, 40, M_CAUSAL, false}, {3, 6, 33, 50, 16, 16, M_BOOL_LS, false},
        {2, 9, 40, 40, 8, 8, M_ADD_B1LS, false}, {2, 4, 3, 60, 16, 16, M_CAUSAL, false},
        {2, 8, 40, 40, 16, 24, M_NONE, true},    {1, 2, 64, 64, 16, 16, M_CAUSAL, false},
    };
    const int saved = tn_get_num_threads();
    tn_set_num_threads(2);
    for (int d = 0; d < 2; d++) {
        const tn_dtype dt = d ? TN_F16 : TN_BF16;
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            const int64_t B = cases[ci].B, H = cases[ci].H, L = cases[ci].L, S = cases[ci].S;
            assert_int_equal(tn_scope_begin(), TN_OK); /* the operands, the mask's temporaries */
            tn_tensor *base[4];
            base[0] = cases[ci].tq ? rnd(4, S(B, L, H, cases[ci].E), dt, false)
                                   : rnd(4, S(B, H, L, cases[ci].E), dt, false);
            base[1] = rnd(4, S(B, H, S, cases[ci].E), dt, false);
            base[2] = rnd(4, S(B, H, S, cases[ci].Ev), dt, false);
            base[3] = rnd(4, S(B, H, L, cases[ci].Ev), dt, false); /* the output's gradient */
            tn_tensor *mask = cases[ci].mask == M_BOOL_LS    ? bool_mask(2, S(L, S))
                              : cases[ci].mask == M_ADD_B1LS ? rnd(4, S(B, 1, L, S), dt, false)
                                                             : NULL;
            uint16_t *in_place[4], *copies[4];
            const bool causal = cases[ci].mask == M_CAUSAL;
            tn__cpu_attention_in_place(true);
            half_pass(dt, base, mask, causal, cases[ci].tq, in_place);
            tn__cpu_attention_in_place(false);
            half_pass(dt, base, mask, causal, cases[ci].tq, copies);
            tn__cpu_attention_in_place(true);
            const int64_t n[4] = {B * H * L * cases[ci].Ev, B * H * L * cases[ci].E,
                                  B * H * S * cases[ci].E, B * H * S * cases[ci].Ev};
            for (int r = 0; r < 4; r++) {
                int64_t differ = 0;
                for (int64_t i = 0; i < n[r]; i++)
                    differ += in_place[r][i] != copies[r][i];
                if (differ)
                    print_error("%s case %zu, result %d: %lld of %lld differ\n", tn_dtype_name(dt),
                                ci, r, (long long)differ, (long long)n[r]);
                assert_int_equal(differ, 0);
                free(in_place[r]);
                free(copies[r]);
            }
            tn_scope_end();
        }
    }
    tn_set_num_threads(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(values_and_grads),
        TT_TEST(broadcast_and_strides),
        TT_TEST(fully_masked_rows),
        TT_TEST(thread_independence),
        TT_TEST(double_backward),
        TT_TEST(dropout),
        TT_TEST(no_grad_and_empty),
        TT_TEST(output_layout_follows_the_heads),
        TT_TEST(half_in_place_matches_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
