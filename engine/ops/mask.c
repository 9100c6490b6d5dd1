/* Masked selection ops, forward and backward: where, masked_fill (and its
 * in-place form), tril, triu. All are one pass of the pointwise code
 * TN_PW_WHERE (out = cond ? x : y over four broadcast operands): masked_fill
 * selects a 0-dim value tensor, tril/triu select the input or a 0-dim zero
 * under a (rows, cols) keep-mask built on the host.
 *
 * Node layouts:
 *   WhereBackward0:      inputs {a, b}; saved {0: cond}.
 *   MaskedFillBackward0: input {a}; saved {0: mask}.
 *   TrilBackward0 / TriuBackward0: input {a}; parameters mask_params.
 */
#include "pointwise_driver.h"

typedef struct mask_params {
    int64_t diagonal; /* tril, triu */
} mask_params;
TN_NODE_PARAMS(mask_params, mask_p)

/* out = cond ? x : y, each operand moved to out's device (x and y in out's
 * dtype; cond bool). No autograd. */
static tn_status select_into(tn_tensor *out, const tn_tensor *cond, const tn_tensor *x,
                             const tn_tensor *y) {
    tn_device dev = tn__dev(out);
    const tn_tensor *in[3] = {cond, x, y};
    tn_tensor *c[3] = {0};
    tn_status st = TN_OK;
    for (int i = 0; i < 3 && st == TN_OK; i++) {
        tn_dtype dt = i == 0 ? TN_BOOL : out->dtype;
        /* a device kernel must not read out's memory through another geometry */
        bool other = in[i]->storage == out->storage && !tn__on_cpu(out) && in[i] != out;
        if (in[i]->dtype != dt || !tn__same_device(tn__dev(in[i]), dev) || other)
            if (!(c[i] = tn__copy_to_device(in[i], dt, dev))) st = tn_last_status();
    }
    if (st == TN_OK)
        st = tn__dev_pointwise(TN_PW_WHERE, out->dtype, 4,
                               (tn_tensor *const[]){out, c[0] ? c[0] : (tn_tensor *)cond,
                                                    c[1] ? c[1] : (tn_tensor *)x,
                                                    c[2] ? c[2] : (tn_tensor *)y},
                               NULL, false);
    if (st == TN_OK) tn__storage_wrote(out->storage);
    for (int i = 0; i < 3; i++)
        tn_release(c[i]);
    return st;
}

/* A new tensor of the broadcast shape of the three, on their device. */
static tn_tensor *select_new(const tn_tensor *cond, const tn_tensor *x, const tn_tensor *y,
                             tn_dtype dt) {
    int n1, nd;
    int64_t s1[TN_MAX_DIMS], shape[TN_MAX_DIMS];
    tn_device dev;
    if (tn__result_device(3, (const tn_tensor *[]){cond, x, y}, &dev) < 0 ||
        tn__broadcast_shape(cond->ndim, cond->shape, x->ndim, x->shape, &n1, s1) < 0 ||
        tn__broadcast_shape(n1, s1, y->ndim, y->shape, &nd, shape) < 0)
        return NULL;
    tn_tensor *out = tn__empty_on(nd, shape, dt, dev);
    if (out && select_into(out, cond, x, y) < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* Records fn over n_in inputs for out, saving `saved` (may be NULL),
 * with diagonal k. */
static tn_status record(const tn_fn_info *fn, int n_in, const tn_tensor *const *in, tn_tensor *out,
                        const tn_tensor *saved, int64_t k) {
    if (!tn__needs_grad(n_in, in)) return TN_OK;
    tn_node *n = tn__node_new(fn, n_in, in, saved ? 1 : 0, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        mask_p(n)->diagonal = k;
        if (saved) st = tn__node_save(n, 0, saved, false);
    }
    tn__node_release(n);
    return st;
}

static tn_status check_bool(const char *fmt, const tn_tensor *m) {
    if (m->dtype == TN_BOOL) return TN_OK;
    return tn__error(TN_ERR_DTYPE, fmt, tn_dtype_name(m->dtype));
}

/* ---- where ------------------------------------------------------------------------ */

static tn_status where_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *c = tn__node_unpack(n, 0);
    TN_TRY(c);
    tn_tensor *z = tn__full_on(0, NULL, go[0]->dtype, 0, TN_DEVICE_CPU);
    tn_status st = z ? TN_OK : tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[0]) && !(gi[0] = tn_where(c, go[0], z)))
        st = tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[1]) && !(gi[1] = tn_where(c, z, go[0])))
        st = tn_last_status();
    tn_release(z);
    tn_release(c);
    return st;
}
static const tn_fn_info where_fn = {"WhereBackward0", where_bw};

tn_tensor *tn_where(const tn_tensor *cond, const tn_tensor *a, const tn_tensor *b) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(cond, "condition");
    TN_CHECK_NULL_ARG(a, "self");
    TN_CHECK_NULL_ARG(b, "other");
    if (check_bool("where expected condition to be a boolean tensor, but got a tensor with "
                   "dtype %s",
                   cond) < 0)
        return NULL;
    tn_tensor *out = select_new(cond, a, b, tn__promote(a, b));
    if (out && record(&where_fn, 2, (const tn_tensor *[]){a, b}, out, cond, 0) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn__op_done("where", t0, out, 2, (const tn_tensor *[]){a, b});
    return tn__ret(out);
}

/* ---- masked_fill ------------------------------------------------------------------- */

static tn_status masked_fill_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *m = tn__node_unpack(n, 0);
    TN_TRY(m);
    gi[0] = tn__masked_zero(go[0], m);
    tn_release(m);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info masked_fill_fn = {"MaskedFillBackward0", masked_fill_bw};

#define MASK_DTYPE_MSG "masked_fill_ only supports boolean masks, but got mask with dtype %s"

tn_tensor *tn_masked_fill(const tn_tensor *a, const tn_tensor *mask, double value) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    TN_CHECK_NULL_ARG(a, "self");
    TN_CHECK_NULL_ARG(mask, "mask");
    if (check_bool(MASK_DTYPE_MSG, mask) < 0 || tn__check_scalar(value, a->dtype) < 0) return NULL;
    tn_tensor *v = tn__full_on(0, NULL, a->dtype, value, TN_DEVICE_CPU);
    tn_tensor *out = v ? select_new(mask, v, a, a->dtype) : NULL;
    tn_release(v);
    if (out && record(&masked_fill_fn, 1, &a, out, mask, 0) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn__op_done("masked_fill", t0, out, 1, &a);
    return tn__ret(out);
}

tn_status tn_masked_fill_(tn_tensor *a, const tn_tensor *mask, double value) {
    TN_CHECK_NULL_ARG_ST(a, "self");
    TN_CHECK_NULL_ARG_ST(mask, "mask");
    tn_device dev;
    tn_status st = check_bool(MASK_DTYPE_MSG, mask);
    if (st == TN_OK) st = tn__inplace_prepare("masked_fill_", a, mask, a->dtype);
    if (st == TN_OK) st = tn__check_scalar(value, a->dtype);
    if (st == TN_OK) st = tn__result_device(2, (const tn_tensor *[]){a, mask}, &dev);
    if (st < 0) return st;
    tn_tensor *v = tn__full_on(0, NULL, a->dtype, value, TN_DEVICE_CPU);
    if (!v) return tn_last_status();
    tn_node *n = NULL;
    if (tn__needs_grad(1, (const tn_tensor *[]){a})) {
        n = tn__node_new(&masked_fill_fn, 1, (const tn_tensor *[]){a}, 1, 1);
        st = n ? tn__node_save(n, 0, mask, false) : tn_last_status();
        if (st < 0) {
            tn__node_release(n);
            tn_release(v);
            return st;
        }
    }
    tn_rebase rb;
    if ((st = tn__inplace_prepare_rebase(a, n, &rb)) == TN_OK) { /* consumes n */
        if ((st = select_into(a, mask, v, a)) < 0)
            tn__inplace_abandon(&rb);
        else
            st = tn__inplace_commit(a, &rb, "masked_fill_");
    }
    tn_release(v);
    return st;
}

/* ---- tril / triu ------------------------------------------------------------------- */

static tn_status tril_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return (gi[0] = tn_tril(go[0], mask_p(n)->diagonal)) ? TN_OK : tn_last_status();
}
static tn_status triu_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return (gi[0] = tn_triu(go[0], mask_p(n)->diagonal)) ? TN_OK : tn_last_status();
}
static const tn_fn_info tril_fn = {"TrilBackward0", tril_bw};
static const tn_fn_info triu_fn = {"TriuBackward0", triu_bw};

/* The (rows, cols) keep-mask on dev: col - row <= k (tril) / >= k (triu). */
static tn_tensor *tri_mask(int64_t rows, int64_t cols, int64_t k, bool lower, tn_device dev) {
    tn_tensor *m = tn__empty_on(2, (int64_t[]){rows, cols}, TN_BOOL, TN_DEVICE_CPU);
    if (!m) return NULL;
    uint8_t *p = (uint8_t *)tn__ptr(m);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) /* c - r cannot overflow: both are sizes */
            p[r * cols + c] = lower ? c - r <= k : c - r >= k;
    if (tn__same_device(dev, TN_DEVICE_CPU)) return m;
    tn_tensor *d = tn__copy_to_device(m, TN_BOOL, dev);
    tn_release(m);
    return d;
}

static tn_tensor *tri(const tn_tensor *a, int64_t k, bool lower) {
    double t0 = tn__prof_start(); /* the profiler: the op's span */
    if (a->ndim < 2) {
        tn__error(TN_ERR_SHAPE, "%s: input tensor must have at least 2 dimensions",
                  lower ? "tril" : "triu");
        return NULL;
    }
    /* the output first: the mask is never larger, and an empty one needs none */
    tn_tensor *out = tn__empty_on(a->ndim, a->shape, a->dtype, tn__dev(a)), *m = NULL, *z = NULL;
    tn_status st = out ? TN_OK : tn_last_status();
    if (st == TN_OK && tn_numel(out) > 0) {
        m = tri_mask(a->shape[a->ndim - 2], a->shape[a->ndim - 1], k, lower, tn__dev(a));
        z = m ? tn__full_on(0, NULL, a->dtype, 0, TN_DEVICE_CPU) : NULL;
        st = z ? select_into(out, m, a, z) : tn_last_status();
    }
    if (st == TN_OK) st = record(lower ? &tril_fn : &triu_fn, 1, &a, out, NULL, k);
    tn_release(m);
    tn_release(z);
    if (st < 0) {
        tn_release(out);
        return NULL;
    }
    tn__op_done(lower ? "tril" : "triu", t0, out, 1, &a);
    return out;
}

tn_tensor *tn_tril(const tn_tensor *a, int64_t diagonal) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(tri(a, diagonal, true));
}

tn_tensor *tn_triu(const tn_tensor *a, int64_t diagonal) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(tri(a, diagonal, false));
}
