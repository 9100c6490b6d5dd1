/* torch.matmul and F.linear, forward and backward.
 *
 * One node per call, named as the grad_fn PyTorch 2.11 shows on the result
 * (DotBackward0, MvBackward0, MmBackward0, SqueezeBackward4 for 1-D @ 2-D,
 * CloneBackward0 for 2-D @ N-D, UnsafeViewBackward0 for other batched
 * products; AddmmBackward0 / ViewBackward0 / AddBackward0 for linear with a
 * bias). PyTorch builds a chain of view/bmm nodes below that name; here one
 * node computes the whole gradient with public ops (create_graph works).
 *
 * Node layout (matmul): inputs {a, b}; saved {0: a, 1: b}; mm_params.kind.
 * Node layout (linear): inputs {x, w, bias}; saved {0: x, 1: w}; mm_params.bias_ndim.
 * As PyTorch, a is saved only when b needs its gradient and b only when a does.
 */
#include "autocast.h"
#include "pointwise_driver.h"

typedef enum { K_DOT, K_MV, K_VM, K_MM, K_MAT_BATCHED, K_BATCHED } mm_kind;

typedef struct mm_params {
    mm_kind kind;  /* matmul */
    int bias_ndim; /* linear: 0 without a bias */
} mm_params;
TN_NODE_PARAMS(mm_params, mm_p)

static mm_kind kind_of(int na, int nb) {
    if (na == 1 && nb == 1) return K_DOT;
    if (na == 2 && nb == 1) return K_MV;
    if (na == 1 && nb == 2) return K_VM;
    if (na == 2 && nb == 2) return K_MM;
    if (na == 2) return K_MAT_BATCHED;
    return K_BATCHED;
}

/* ---- the product ---------------------------------------------------------------- */

/* Strides (elements) of operand t's batch dims right-aligned to an output
 * batch of nbd dims; 0 where t is broadcast. t's matrix dims are its last
 * `mat` dims (2 for a matrix, 1 for a vector). */
static void batch_strides(const tn_tensor *t, int mat, int nbd, int64_t *bs) {
    int tb = t->ndim - mat;
    for (int d = 0; d < nbd; d++) {
        int td = d - (nbd - tb);
        bs[d] = td >= 0 && t->shape[td] != 1 ? t->stride[td] : 0;
    }
}

/* Whether rows of a (all batch dims and the row dim, sizes `shape`,
 * strides `st`, nd dims) are one arithmetic sequence, so the batch folds
 * into the row count. */
static bool folds(int nd, const int64_t *shape, const int64_t *st, int64_t *row_stride) {
    int64_t expect = -1;
    for (int d = nd - 1; d >= 0; d--) {
        if (shape[d] == 1) continue;
        if (expect >= 0 && st[d] != expect) return false;
        if (expect < 0) *row_stride = st[d];
        expect = st[d] * shape[d];
    }
    return true;
}

/* out (batch, n, m), contiguous, = a·b (+ out when accumulate). a is
 * (abatch, n, k) or a vector (k) when a_vec; b is (bbatch, k, m) or a
 * vector (k) when b_vec. The batch (nbd dims, bshape) is the broadcast of
 * the operands' batch dims. */
static tn_status product_on(tn_tensor *out, const tn_tensor *a, bool a_vec, const tn_tensor *b,
                            bool b_vec, int nbd, const int64_t *bshape, bool accumulate);

/* A device BLAS reads a matrix with unit stride along its rows or its
 * columns (a vector: unit stride); other operands get a contiguous copy. */
static bool blas_layout(const tn_tensor *t, bool vec) {
    if (vec) return t->stride[t->ndim - 1] == 1 || t->shape[t->ndim - 1] <= 1;
    int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1];
    int64_t rs = t->stride[t->ndim - 2], cs = t->stride[t->ndim - 1];
    return (cs == 1 && rs >= (c > 1 ? c : 1)) || (rs == 1 && cs >= (r > 1 ? r : 1));
}

static tn_status product(tn_tensor *out, const tn_tensor *a, bool a_vec, const tn_tensor *b,
                         bool b_vec, int nbd, const int64_t *bshape, bool accumulate) {
    if (tn__on_cpu(out) || (blas_layout(a, a_vec) && blas_layout(b, b_vec)))
        return product_on(out, a, a_vec, b, b_vec, nbd, bshape, accumulate);
    tn_tensor *ac = blas_layout(a, a_vec) ? tn__retain(a) : tn__copy_as(a, a->dtype);
    tn_tensor *bc = !ac ? NULL : blas_layout(b, b_vec) ? tn__retain(b) : tn__copy_as(b, b->dtype);
    tn_status st = bc ? product_on(out, ac, a_vec, bc, b_vec, nbd, bshape, accumulate)
                      : tn_last_status();
    tn_release(ac);
    tn_release(bc);
    return st;
}

static tn_status product_on(tn_tensor *out, const tn_tensor *a, bool a_vec, const tn_tensor *b,
                            bool b_vec, int nbd, const int64_t *bshape, bool accumulate) {
    /* an empty product: nothing to write (its batch strides may not even fit
     * int64, as an empty tensor's sizes need not multiply) */
    if (tn__numel(out->ndim, out->shape) == 0) return TN_OK;
    int64_t n = a_vec ? 1 : a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
    int64_t m = b_vec ? 1 : b->shape[b->ndim - 1];
    tn_gemm g = {
        .m = n,
        .n = m,
        .k = k,
        .a = tn__ptr(a),
        .b = tn__ptr(b),
        .c = tn__ptr(out),
        /* a vector a is a 1 x k matrix: its row stride is arbitrary (k keeps
         * a device BLAS's leading-dimension rule) */
        .rsa = a_vec ? k : a->stride[a->ndim - 2],
        .csa = a->stride[a->ndim - 1],
        .rsb = b->stride[b->ndim - (b_vec ? 1 : 2)],
        .csb = b_vec ? 1 : b->stride[b->ndim - 1],
        .rsc = m,
        .accumulate = accumulate,
    };
    tn_gemm_batch bt = {.ndim = nbd};
    memcpy(bt.shape, bshape, (size_t)nbd * sizeof *bshape);
    batch_strides(a, a_vec ? 1 : 2, nbd, bt.bsa);
    batch_strides(b, b_vec ? 1 : 2, nbd, bt.bsb);
    bool b_shared = true;
    for (int d = nbd - 1; d >= 0; d--) {
        bt.bsc[d] = d == nbd - 1 ? n * m : bt.bsc[d + 1] * bshape[d + 1];
        if (bt.bsb[d] != 0) b_shared = false;
    }
    const tn_tensor *const ops[3] = {out, a, b}; /* for the race detector */
    if (nbd > 0 && b_shared && !a_vec) { /* fold the batch into A's rows */
        int64_t shape[TN_MAX_DIMS + 1], st[TN_MAX_DIMS + 1], rs = g.rsa;
        memcpy(shape, bshape, (size_t)nbd * sizeof *shape);
        memcpy(st, bt.bsa, (size_t)nbd * sizeof *st);
        shape[nbd] = n;
        st[nbd] = g.rsa;
        bool bcast = false;
        for (int d = 0; d < nbd; d++)
            bcast |= bshape[d] != 1 && bt.bsa[d] == 0;
        if (!bcast && folds(nbd + 1, shape, st, &rs)) {
            g.m = n * tn__numel(nbd, bshape);
            g.rsa = rs;
            return tn__dev_gemm(out->dtype, &g, NULL, tn__dev(out), 3, ops);
        }
    }
    return tn__dev_gemm(out->dtype, &g, nbd ? &bt : NULL, tn__dev(out), 3, ops);
}

/* ---- checks ------------------------------------------------------------------- */

static tn_status check_dtypes(mm_kind kind, const tn_tensor *a, const tn_tensor *b) {
    if (a->dtype == TN_BOOL || b->dtype == TN_BOOL)
        return tn__error(TN_ERR_DTYPE, "\"%s\" not implemented for 'bool'",
                         kind == K_DOT ? "dot" : "addmm_impl_cpu_");
    if (a->dtype == b->dtype) return TN_OK;
    if (kind == K_DOT)
        return tn__error(TN_ERR_DTYPE,
                         "dot : expected both vectors to have same dtype, but found %s and %s",
                         tn__torch_scalar_name(a->dtype), tn__torch_scalar_name(b->dtype));
    if (kind == K_MM || kind == K_VM || (kind == K_BATCHED && b->ndim == 2))
        return tn__error(TN_ERR_DTYPE,
                         "expected m1 and m2 to have the same dtype, but got: %s != %s",
                         tn__torch_cpp_name(a->dtype), tn__torch_cpp_name(b->dtype));
    return tn__error(TN_ERR_DTYPE, "expected scalar type %s but found %s",
                     tn__torch_scalar_name(a->dtype), tn__torch_scalar_name(b->dtype));
}

/* Inner sizes must agree; the message is the one of the ATen op matmul
 * lowers to (mm/mv/dot/bmm, with the batch folded into rows as PyTorch). */
static tn_status check_inner(mm_kind kind, const tn_tensor *a, const tn_tensor *b, int64_t batch) {
    int64_t k = a->shape[a->ndim - 1], k2 = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
    if (k == k2) return TN_OK;
    int64_t n = a->ndim == 1 ? 1 : a->shape[a->ndim - 2];
    long long m = b->ndim == 1 ? 1 : (long long)b->shape[b->ndim - 1];
    switch (kind) {
    case K_DOT:
        return tn__error(TN_ERR_SHAPE,
                         "inconsistent tensor size, expected tensor [%lld] and src [%lld] to have "
                         "the same number of elements, but got %lld and %lld elements respectively",
                         (long long)k, (long long)k2, (long long)k, (long long)k2);
    case K_MV:
        return tn__error(TN_ERR_SHAPE,
                         "size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)",
                         (long long)n, (long long)n, (long long)k, (long long)k2);
    case K_BATCHED:
        if (b->ndim <= 2) { /* folded into mm / mv */
            long long rows = (long long)(a->ndim >= 2 ? tn__numel(a->ndim - 1, a->shape) : 1);
            if (b->ndim == 1)
                return tn__error(TN_ERR_SHAPE,
                                 "size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)",
                                 rows, rows, (long long)k, (long long)k2);
            return tn__error(TN_ERR_SHAPE,
                             "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                             rows, (long long)k, (long long)k2, m);
        }
        /* fallthrough */
    case K_MAT_BATCHED:
        return tn__error(TN_ERR_SHAPE,
                         "Expected size for first two dimensions of batch2 tensor to be: "
                         "[%lld, %lld] but got: [%lld, %lld].",
                         (long long)batch, (long long)k, (long long)batch, (long long)k2);
    default:
        return tn__error(TN_ERR_SHAPE,
                         "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                         (long long)n, (long long)k, (long long)k2, m);
    }
}

static tn_status check_device(const tn_tensor *a, const tn_tensor *b) {
    if (tn__same_device(tn__dev(a), tn__dev(b))) return TN_OK;
    char x[32], y[32];
    return tn__error(TN_ERR_DEVICE,
                     "Expected all tensors to be on the same device, but found at least two "
                     "devices, %s and %s!",
                     tn__device_str(tn__dev(a), x, sizeof x), tn__device_str(tn__dev(b), y, sizeof y));
}

/* ---- backward --------------------------------------------------------------------- */

static bool want(tn_node *n, int i) { return tn__edge_valid(&n->edges[i]); }

static tn_tensor *mT(tn_tensor *t) { return tn_transpose(t, -2, -1); }

/* x @ y^T and x^T @ y (new references). */
static tn_tensor *mm_nt(tn_tensor *x, tn_tensor *y) {
    tn_tensor *yt = mT(y), *r = yt ? tn_matmul(x, yt) : NULL;
    tn_release(yt);
    return r;
}
static tn_tensor *mm_tn(tn_tensor *x, tn_tensor *y) {
    tn_tensor *xt = mT(x), *r = xt ? tn_matmul(xt, y) : NULL;
    tn_release(xt);
    return r;
}

/* t reshaped to (-1, t.shape[-1]): rows of all batch dims. */
static tn_tensor *rows2d(tn_tensor *t) {
    int64_t shape[2] = {-1, t->shape[t->ndim - 1]};
    return tn_reshape(t, 2, shape);
}

/* grad of b when a has batch dims and b has none: one product over all rows
 * (PyTorch folds the same way), rather than a batch of products to sum. */
static tn_tensor *grad_b_folded(tn_tensor *a, tn_tensor *g2) {
    tn_tensor *af = rows2d(a), *gf = af ? rows2d(g2) : NULL;
    tn_tensor *r = gf ? mm_tn(af, gf) : NULL;
    tn_release(af);
    tn_release(gf);
    return r;
}

/* d(a·b), g = d(out): with a 1-D taken as (1, k) and b 1-D as (k, 1),
 * ga = g·b^T and gb = a^T·g; the engine sums broadcast batch dims back.
 * a is NULL when gb is not wanted, b when ga is not; nda/ndb are the
 * inputs' ranks. */
static tn_status matmul_grads(tn_tensor *a, tn_tensor *b, int nda, int ndb, tn_tensor *g,
                              tn_tensor **ga, tn_tensor **gb) {
    bool av = nda == 1, bv = ndb == 1;
    tn_tensor *g2 = av   ? tn_unsqueeze(g, g->ndim - 1)
                    : bv ? tn_unsqueeze(g, g->ndim)
                         : tn__retain(g);
    tn_status st = g2 ? TN_OK : tn_last_status();
    if (st == TN_OK && b) {
        tn_tensor *b2 = bv ? tn_unsqueeze(b, 1) : tn__retain(b);
        tn_tensor *r = b2 ? mm_nt(g2, b2) : NULL;
        *ga = r && av ? tn_squeeze_dim(r, -2) : r ? tn__retain(r) : NULL;
        if (!*ga) st = tn_last_status();
        tn_release(r);
        tn_release(b2);
    }
    if (st == TN_OK && a) {
        tn_tensor *a2 = av ? tn_unsqueeze(a, 0) : tn__retain(a);
        tn_tensor *r = !a2 ? NULL : ndb == 2 && nda > 2 ? grad_b_folded(a2, g2) : mm_tn(a2, g2);
        *gb = r && bv ? tn_squeeze_dim(r, -1) : r ? tn__retain(r) : NULL;
        if (!*gb) st = tn_last_status();
        tn_release(r);
        tn_release(a2);
    }
    tn_release(g2);
    return st;
}

static tn_status matmul_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    bool wa = want(n, 0), wb = want(n, 1);
    tn_tensor *a = wb ? tn__node_unpack(n, 0) : NULL, *b = wa ? tn__node_unpack(n, 1) : NULL;
    tn_status st = (wb && !a) || (wa && !b) ? tn_last_status() : TN_OK;
    if (st == TN_OK && mm_p(n)->kind == K_DOT) { /* g is 0-dim */
        if (wa && !(gi[0] = tn_mul(go[0], b))) st = tn_last_status();
        if (st == TN_OK && wb && !(gi[1] = tn_mul(go[0], a))) st = tn_last_status();
    } else if (st == TN_OK) {
        st = matmul_grads(a, b, n->in_meta[0].ndim, n->in_meta[1].ndim, go[0], &gi[0], &gi[1]);
    }
    tn_release(a);
    tn_release(b);
    return st;
}

static const tn_fn_info matmul_fns[] = {
    {"DotBackward0", matmul_bw}, {"MvBackward0", matmul_bw},    {"SqueezeBackward4", matmul_bw},
    {"MmBackward0", matmul_bw},  {"CloneBackward0", matmul_bw}, {"UnsafeViewBackward0", matmul_bw},
};

/* Records a two/three-input product node saving x (slot 0) when y needs its
 * gradient and y (slot 1) when x does. */
static tn_status record(const tn_fn_info *fn, tn_tensor *out, int nin, const tn_tensor *const *in,
                        mm_params p) {
    tn_node *n = tn__node_new(fn, nin, in, 2, 1);
    if (!n) return tn_last_status();
    *mm_p(n) = p;
    tn_status st = tn__node_set_output(n, out, 0);
    if (st == TN_OK && tn__requires_grad(in[1])) st = tn__node_save(n, 0, in[0], false);
    if (st == TN_OK && tn__requires_grad(in[0])) st = tn__node_save(n, 1, in[1], false);
    tn__node_release(n);
    return st;
}

/* ---- matmul --------------------------------------------------------------------- */

tn_tensor *tn_matmul(const tn_tensor *a, const tn_tensor *b) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_MATMUL, 2, (const tn_tensor *[]){a, b}))
        return tn__autocast_done(&f, f.ok ? tn_matmul(f.t[0], f.t[1]) : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(a, "self");
    TN_CHECK_NULL_ARG(b, "other");
    if (a->ndim == 0 || b->ndim == 0) {
        tn__error(TN_ERR_SHAPE,
                  "both arguments to matmul need to be at least 1D, but they are %dD and %dD",
                  a->ndim, b->ndim);
        return NULL;
    }
    mm_kind kind = kind_of(a->ndim, b->ndim);
    bool av = a->ndim == 1, bv = b->ndim == 1;
    int nba = av ? 0 : a->ndim - 2, nbb = bv ? 0 : b->ndim - 2, nbd;
    int64_t bshape[TN_MAX_DIMS], oshape[TN_MAX_DIMS];
    if (check_device(a, b) < 0 || check_dtypes(kind, a, b) < 0 ||
        tn__broadcast_shape(nba, a->shape, nbb, b->shape, &nbd, bshape) < 0 ||
        check_inner(kind, a, b, tn__numel(nbd, bshape)) < 0)
        return NULL;
    int ond = nbd;
    memcpy(oshape, bshape, (size_t)nbd * sizeof *oshape);
    if (!av) oshape[ond++] = a->shape[a->ndim - 2];
    if (!bv) oshape[ond++] = b->shape[b->ndim - 1];
    tn_tensor *out = tn__empty_on(ond, oshape, a->dtype, tn__dev(a));
    if (!out) return NULL;
    if (product(out, a, av, b, bv, nbd, bshape, false) < 0 ||
        (tn__needs_grad(2, (const tn_tensor *[]){a, b}) &&
         record(&matmul_fns[kind], out, 2, (const tn_tensor *[]){a, b}, (mm_params){.kind = kind}) <
             0)) {
        tn_release(out);
        return NULL;
    }
    tn__op_done("matmul", t0, out, 2, (const tn_tensor *[]){a, b});
    return tn__ret(out);
}

/* ---- linear ----------------------------------------------------------------------- */

typedef enum { L_ADDMM, L_VIEW, L_ADD, L_VEC, L_MM, L_UNSAFE_VIEW } linear_kind;

/* PyTorch 2.11's F.linear: addmm for 2-D input with bias, a flattened addmm
 * (then view) for contiguous input, otherwise matmul (+ add_). */
static linear_kind linear_kind_of(const tn_tensor *x, const tn_tensor *bias) {
    if (bias) {
        if (x->ndim == 2) return L_ADDMM;
        if (tn__is_contiguous(x) && (x->ndim == 3 || bias->ndim == 1)) return L_VIEW;
        return L_ADD;
    }
    return x->ndim == 1 ? L_VEC : x->ndim == 2 ? L_MM : L_UNSAFE_VIEW;
}

static tn_status linear_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *g = go[0], *gf = NULL;
    tn_status st = TN_OK;
    if (want(n, 0)) { /* gx = g @ w */
        tn_tensor *w = tn__node_unpack(n, 1);
        if (!w || !(gi[0] = tn_matmul(g, w))) st = tn_last_status();
        tn_release(w);
    }
    if (st == TN_OK && (want(n, 1) || want(n, 2)) && !(gf = rows2d(g))) st = tn_last_status();
    if (st == TN_OK && want(n, 1)) { /* gw = g^T @ x over all rows */
        tn_tensor *x = tn__node_unpack(n, 0), *xf = x ? rows2d(x) : NULL;
        if (!xf || !(gi[1] = mm_tn(gf, xf))) st = tn_last_status();
        tn_release(x);
        tn_release(xf);
    }
    if (st == TN_OK && want(n, 2) && !(gi[2] = tn_sum_dim(gf, 0, mm_p(n)->bias_ndim == 2)))
        st = tn_last_status();
    tn_release(gf);
    return st;
}

static const tn_fn_info linear_fns[] = {
    {"AddmmBackward0", linear_bw}, {"ViewBackward0", linear_bw},
    {"AddBackward0", linear_bw},   {"SqueezeBackward4", linear_bw},
    {"MmBackward0", linear_bw},    {"UnsafeViewBackward0", linear_bw},
};

static tn_status linear_check(const tn_tensor *x, const tn_tensor *w, const tn_tensor *bias) {
    if (x->ndim == 0 || w->ndim == 0)
        return tn__error(TN_ERR_SHAPE,
                         "both arguments to linear need to be at least 1D, but they are %dD and "
                         "%dD",
                         x->ndim, w->ndim);
    if (w->ndim != 2)
        return tn__error(TN_ERR_SHAPE,
                         "linear: weight must be 2-D (out_features, in_features), "
                         "got %dD",
                         w->ndim);
    if (check_device(x, w) < 0 || (bias && check_device(bias, w) < 0)) return tn_last_status();
    if (!tn__is_float(w->dtype))
        return tn__error(TN_ERR_DTYPE, "\"addmm_impl_cpu_\" not implemented for '%s'",
                         tn_dtype_name(w->dtype));
    if (x->dtype != w->dtype)
        return tn__error(TN_ERR_DTYPE, "mat1 and mat2 must have the same dtype, but got %s and %s",
                         tn__torch_scalar_name(x->dtype), tn__torch_scalar_name(w->dtype));
    if (bias && bias->dtype != w->dtype)
        return tn__error(TN_ERR_DTYPE, "self and mat2 must have the same dtype, but got %s and %s",
                         tn__torch_scalar_name(bias->dtype), tn__torch_scalar_name(w->dtype));
    int64_t in = x->shape[x->ndim - 1], rows = tn__numel(x->ndim - 1, x->shape);
    if (in != w->shape[1])
        return tn__error(
            TN_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
            (long long)rows, (long long)in, (long long)w->shape[1], (long long)w->shape[0]);
    if (!bias) return TN_OK;
    int64_t target[2] = {rows, w->shape[0]};
    char ts[64], bs[160];
    tn__format_shape(ts, sizeof ts, 2, target);
    tn__format_shape(bs, sizeof bs, bias->ndim, bias->shape);
    if (bias->ndim > 2) /* addmm expands the bias to (rows, out) */
        return tn__error(TN_ERR_SHAPE,
                         "expand([%s %s], size=%s): the number of sizes provided (2) must be "
                         "greater or equal to the number of dimensions in the tensor (%d)",
                         tn_dtype_name(bias->dtype), bs, ts, bias->ndim);
    for (int d = 1; d >= 2 - bias->ndim; d--) { /* right-aligned against (rows, out) */
        int64_t s = bias->shape[bias->ndim - 2 + d];
        if (s != 1 && s != target[d])
            return tn__error(TN_ERR_SHAPE,
                             "The expanded size of the tensor (%lld) must match the existing size "
                             "(%lld) at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                             "sizes: %s",
                             (long long)target[d], (long long)s, d, ts, bs);
    }
    return TN_OK;
}

tn_tensor *tn_linear(const tn_tensor *x, const tn_tensor *w, const tn_tensor *bias) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_LINEAR, 3, (const tn_tensor *[]){x, w, bias}))
        return tn__autocast_done(&f, f.ok ? tn_linear(f.t[0], f.t[1], f.t[2]) : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(x, "input");
    TN_CHECK_NULL_ARG(w, "weight");
    if (linear_check(x, w, bias) < 0) return NULL;
    int64_t oshape[TN_MAX_DIMS];
    memcpy(oshape, x->shape, (size_t)x->ndim * sizeof *oshape);
    oshape[x->ndim - 1] = w->shape[0];
    tn_tensor *out = tn__empty_on(x->ndim, oshape, x->dtype, tn__dev(x));
    /* w^T as a (in, out) operand read through w's strides: no copy. */
    int64_t wt_shape[2] = {w->shape[1], w->shape[0]}, wt_stride[2] = {w->stride[1], w->stride[0]};
    tn_tensor *wt = out ? tn__alias(w, 2, wt_shape, wt_stride, w->offset) : NULL;
    tn_status st = wt ? TN_OK : tn_last_status();
    if (st == TN_OK && bias) { /* C starts as the bias: fused into the product */
        int64_t shape2[2] = {tn__numel(x->ndim - 1, x->shape), w->shape[0]};
        tn_tensor *o2 = tn__alias(out, 2, shape2, (int64_t[]){shape2[1], 1}, out->offset);
        st = o2 ? tn__copy_into(o2, bias) : tn_last_status();
        tn_release(o2);
    }
    if (st == TN_OK)
        st = product(out, x, x->ndim == 1, wt, false, x->ndim > 2 ? x->ndim - 2 : 0, x->shape,
                     bias != NULL);
    tn_release(wt);
    const tn_tensor *in[3] = {x, w, bias};
    if (st == TN_OK && tn__needs_grad(3, in))
        st = record(&linear_fns[linear_kind_of(x, bias)], out, 3, in,
                    (mm_params){.bias_ndim = bias ? bias->ndim : 0});
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    tn__op_done("linear", t0, out, bias ? 3 : 2, in);
    return tn__ret(out);
}
