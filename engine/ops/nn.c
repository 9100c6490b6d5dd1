/* softmax, log_softmax, cross_entropy (log_softmax + nll_loss), mse_loss,
 * forward and backward.
 *
 * Node layouts:
 *   SoftmaxBackward0 / LogSoftmaxBackward0: input {x}; saved {0: result}; i[0] = dim.
 *   NllLossBackward0: input {log_probs}; saved {0: targets}; d[0] = number of
 *     counted targets (the mean's divisor).
 *   MseLossBackward0: inputs {a, b}; saved {0: a, 1: b}; d[0] = numel.
 */
#include <math.h>

#include "../cpu/reduce_kernels.h"
#include "pointwise_driver.h"

#define IGNORE_INDEX (-100) /* PyTorch's default ignore_index */

/* ---- softmax kernels --------------------------------------------------------------- */

/* A tensor seen as (outer, D, inner) around the softmax dim; work is split
 * into rows of one outer index and up to CHUNK inner positions. */
#define CHUNK 256
typedef struct sm_geom {
    int64_t outer, d, inner, chunks;
} sm_geom;

static sm_geom geom_of(const tn_tensor *t, int dim) {
    sm_geom g = {1, 1, 1, 1};
    for (int i = 0; i < t->ndim; i++) {
        if (i < dim)
            g.outer *= t->shape[i];
        else if (i == dim)
            g.d = t->shape[i];
        else
            g.inner *= t->shape[i];
    }
    g.chunks = (g.inner + CHUNK - 1) / CHUNK;
    return g;
}

/* modes: TN_SM_FWD, TN_LSM_FWD, TN_SM_BWD, TN_LSM_BWD (kernel_args.h) */

/* Forward (x -> y) and backward (g, y -> gx) of softmax and log_softmax
 * over one row of g->d values spaced `inner` apart, for w <= CHUNK
 * adjacent inner positions at once (the inner loops vectorise over them).
 *   softmax:      y = e / sum(e), e = exp(x - max)
 *   log_softmax:  y = (x - max) - log(sum(e))
 *   backward:     softmax gx = y (g - sum(g y)); log_softmax gx = g - exp(y) sum(g) */
#define DEFINE_SM_ROW(SUF, T)                                                                      \
    static void sm_row_##SUF(int mode, const T *x, const T *y, T *out, int64_t dn, int64_t inner,  \
                             int64_t w) {                                                          \
        T m[CHUNK], s[CHUNK];                                                                      \
        for (int64_t i = 0; i < w; i++) {                                                          \
            m[i] = mode == TN_SM_FWD || mode == TN_LSM_FWD ? x[i] : 0;                                   \
            s[i] = 0;                                                                              \
        }                                                                                          \
        if (mode == TN_SM_FWD || mode == TN_LSM_FWD) {                                                   \
            for (int64_t d = 1; d < dn; d++)                                                       \
                for (int64_t i = 0; i < w; i++) {                                                  \
                    T v = x[d * inner + i];                                                        \
                    m[i] = v > m[i] || v != v ? v : m[i];                                          \
                }                                                                                  \
            for (int64_t d = 0; d < dn; d++)                                                       \
                for (int64_t i = 0; i < w; i++) {                                                  \
                    T e = TN_M(exp, x[d * inner + i] - m[i]);                                      \
                    if (mode == TN_SM_FWD) out[d * inner + i] = e;                                    \
                    s[i] += e;                                                                     \
                }                                                                                  \
            if (mode == TN_SM_FWD) {                                                                  \
                for (int64_t i = 0; i < w; i++)                                                    \
                    s[i] = 1 / s[i];                                                               \
                for (int64_t d = 0; d < dn; d++)                                                   \
                    for (int64_t i = 0; i < w; i++)                                                \
                        out[d * inner + i] *= s[i];                                                \
            } else {                                                                               \
                /* (x - max) - log(sum) keeps the precision of small differences */                \
                for (int64_t i = 0; i < w; i++)                                                    \
                    s[i] = TN_M(log, s[i]);                                                        \
                for (int64_t d = 0; d < dn; d++)                                                   \
                    for (int64_t i = 0; i < w; i++)                                                \
                        out[d * inner + i] = (x[d * inner + i] - m[i]) - s[i];                     \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        /* backward: x is the incoming gradient g */                                               \
        for (int64_t d = 0; d < dn; d++)                                                           \
            for (int64_t i = 0; i < w; i++)                                                        \
                s[i] += mode == TN_SM_BWD ? x[d * inner + i] * y[d * inner + i] : x[d * inner + i];   \
        for (int64_t d = 0; d < dn; d++)                                                           \
            for (int64_t i = 0; i < w; i++) {                                                      \
                int64_t k = d * inner + i;                                                         \
                out[k] = mode == TN_SM_BWD ? y[k] * (x[k] - s[i]) : x[k] - TN_M(exp, y[k]) * s[i];    \
            }                                                                                      \
    }
DEFINE_SM_ROW(f32, float)
DEFINE_SM_ROW(f64, double)

/* out = mode(x[, y]); all contiguous with geometry g. Threads own rows. */
static tn_status sm_run(int mode, tn_dtype dt, const tn_tensor *x, const tn_tensor *y,
                        tn_tensor *out, sm_geom g) {
    if (!tn__on_cpu(out)) {
        tn_sm_args a = {mode, dt, g.outer, g.d, g.inner, tn__ptr(x), y ? tn__ptr(y) : NULL,
                        tn__ptr(out)};
        tn_status st = tn__dev_softmax(&a, tn__dev(out));
        if (st == TN_OK) tn__storage_wrote(out->storage);
        return st;
    }
    int64_t rows = g.outer * g.chunks;
    int nt = tn__threads_for(g.outer * g.d * g.inner);
    (void)nt; /* only read by OpenMP */
    size_t es = tn__dtype_sizes[dt];
    const char *xp = tn__ptr(x), *yp = y ? tn__ptr(y) : NULL;
    char *op = tn__ptr(out);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r / g.chunks, i0 = r % g.chunks * CHUNK;
        int64_t w = g.inner - i0 < CHUNK ? g.inner - i0 : CHUNK;
        size_t off = (size_t)(o * g.d * g.inner + i0) * es;
        if (dt == TN_F32)
            sm_row_f32(mode, (const float *)(xp + off), yp ? (const float *)(yp + off) : NULL,
                       (float *)(op + off), g.d, g.inner, w);
        else
            sm_row_f64(mode, (const double *)(xp + off), yp ? (const double *)(yp + off) : NULL,
                       (double *)(op + off), g.d, g.inner, w);
    }
    tn__storage_wrote(out->storage);
    return TN_OK;
}

/* t itself when contiguous, else a contiguous copy (new reference either way). */
static tn_tensor *contig(const tn_tensor *t) {
    return tn__is_contiguous(t) ? tn__retain((tn_tensor *)t) : tn__copy_as(t, t->dtype);
}

/* ---- softmax / log_softmax ---------------------------------------------------------- */

/* Backward with public ops when the graph of the backward is recorded
 * (create_graph); one fused pass otherwise. */
static tn_status softmax_family_bw(tn_node *n, tn_tensor *g, tn_tensor **gi, bool log) {
    tn_tensor *y = tn__node_unpack(n, 0);
    TN_TRY(y);
    int dim = (int)n->i[0];
    tn_status st = TN_OK;
    if (!tn__grad_enabled()) {
        tn_tensor *gc = contig(g), *out = gc ? tn__empty_like(y) : NULL;
        st = out ? sm_run(log ? TN_LSM_BWD : TN_SM_BWD, y->dtype, gc, y, out, geom_of(y, dim))
                 : tn_last_status();
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
        tn_release(gc);
        gi[0] = out;
    } else if (log) { /* g - exp(y) * sum(g, dim) */
        tn_tensor *s = tn_sum_dim(g, dim, true), *e = s ? tn_exp(y) : NULL;
        tn_tensor *p = e ? tn_mul(e, s) : NULL;
        if (!p || !(gi[0] = tn_sub(g, p))) st = tn_last_status();
        tn_release(s);
        tn_release(e);
        tn_release(p);
    } else { /* y * (g - sum(g * y, dim)) */
        tn_tensor *gy = tn_mul(g, y), *s = gy ? tn_sum_dim(gy, dim, true) : NULL;
        tn_tensor *d = s ? tn_sub(g, s) : NULL;
        if (!d || !(gi[0] = tn_mul(y, d))) st = tn_last_status();
        tn_release(gy);
        tn_release(s);
        tn_release(d);
    }
    tn_release(y);
    return st;
}

static tn_status softmax_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return softmax_family_bw(n, go[0], gi, false);
}
static tn_status log_softmax_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    return softmax_family_bw(n, go[0], gi, true);
}
static const tn_fn_info softmax_fn = {"SoftmaxBackward0", softmax_bw};
static const tn_fn_info log_softmax_fn = {"LogSoftmaxBackward0", log_softmax_bw};

static tn_tensor *softmax_family(const tn_tensor *a, int dim, bool log) {
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0) return NULL;
    if (!tn__is_float(a->dtype)) {
        bool last = d >= a->ndim - 1;
        tn__error(TN_ERR_DTYPE, "\"%s%s_kernel_impl\" not implemented for '%s'",
                  log ? "log_softmax" : "softmax", last ? "_lastdim" : "", tn_dtype_name(a->dtype));
        return NULL;
    }
    tn_tensor *x = contig(a), *out = x ? tn__empty_like(a) : NULL;
    if (out && tn_numel(a) > 0 &&
        sm_run(log ? TN_LSM_FWD : TN_SM_FWD, a->dtype, x, NULL, out, geom_of(a, d)) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(x);
    if (!out) return NULL;
    if (tn__needs_grad(1, &a)) {
        tn_node *n = tn__node_new(log ? &log_softmax_fn : &softmax_fn, 1, &a, 1, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            n->i[0] = d;
            st = tn__node_save(n, 0, out, true);
        }
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            return NULL;
        }
    }
    return out;
}

tn_tensor *tn_softmax(const tn_tensor *a, int dim) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(softmax_family(a, dim, false));
}

tn_tensor *tn_log_softmax(const tn_tensor *a, int dim) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(softmax_family(a, dim, true));
}

/* ---- cross_entropy = nll_loss(log_softmax(logits, -1), targets) ------------------------ */

/* Targets as int64 values in logical order, checked against [0, c) (or
 * the ignore index); count = targets not ignored. */
static tn_status read_targets(const tn_tensor *t, int64_t c, int64_t *vals, int64_t *count) {
    tn_status st = tn_copy_to(t, vals, (size_t)tn_numel(t) * sizeof *vals);
    if (st < 0) return st;
    *count = 0;
    for (int64_t i = 0; i < tn_numel(t); i++) {
        if (vals[i] == IGNORE_INDEX) continue;
        if (vals[i] < 0 || vals[i] >= c)
            return tn__error(TN_ERR_INDEX, "Target %lld is out of bounds.", (long long)vals[i]);
        (*count)++;
    }
    return TN_OK;
}

/* d(loss)/d(log_probs): -g / count at each counted target, 0 elsewhere.
 * Under create_graph it is built as g * (constant scatter), so the
 * recorded graph reaches g (the loss is linear in log_probs: no term
 * through the log-probs themselves). */
/* A (N, C) or (C) tensor on dev: v at each counted target, 0 elsewhere
 * (built on the host: one scatter of N values). */
static tn_tensor *target_weights(int ndim, const int64_t *shape, tn_dtype dt, const int64_t *vals,
                                 int64_t nt, double v, tn_device dev) {
    tn_tensor *s = tn__zeros(ndim, shape, dt);
    if (!s) return NULL;
    char *p = tn__ptr(s);
    size_t es = tn__dtype_sizes[dt];
    int64_t c = shape[ndim - 1];
    for (int64_t i = 0; i < nt; i++)
        if (vals[i] != IGNORE_INDEX) tn__store(p + (size_t)(i * c + vals[i]) * es, dt, v);
    tn_tensor *d = tn__on_device(s, dev);
    tn_release(s);
    return d;
}

static tn_status nll_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *t = tn__node_unpack(n, 0);
    TN_TRY(t);
    const tn_input_meta *m = &n->in_meta[0];
    int64_t c = m->shape[m->ndim - 1], nt = tn_numel(t), cnt = 0;
    int64_t *vals = tn__alloc((size_t)(nt ? nt : 1) * sizeof *vals);
    double gv = 0;
    bool direct = !tn__grad_enabled();
    tn_status st = vals ? read_targets(t, c, vals, &cnt) : tn_last_status();
    if (st == TN_OK && direct) st = tn_item(go[0], &gv);
    double v = -(direct ? gv : 1.0) / (double)n->d[0];
    tn_tensor *s = st == TN_OK ? target_weights(m->ndim, m->shape, m->dtype, vals, nt, v, m->device)
                               : NULL;
    if (s) {
        if (direct)
            gi[0] = s;
        else if (!(gi[0] = tn_mul(s, go[0])))
            st = tn_last_status();
        if (!direct) tn_release(s);
    } else if (st == TN_OK) {
        st = tn_last_status();
    }
    tn__free(vals);
    tn_release(t);
    return st;
}
static const tn_fn_info nll_fn = {"NllLossBackward0", nll_bw};

static tn_status ce_check(const tn_tensor *logits, const tn_tensor *targets) {
    if (logits->ndim < 1 || logits->ndim > 2)
        return tn__error(TN_ERR_SHAPE,
                         "cross_entropy: expected logits of shape (C) or (N, C), got %d dims",
                         logits->ndim);
    if (!tn__is_float(logits->dtype))
        return tn__error(TN_ERR_DTYPE,
                         "\"log_softmax_lastdim_kernel_impl\" not implemented for '%s'",
                         tn_dtype_name(logits->dtype));
    if (targets->dtype != TN_I64) {
        static const char *const names[TN_DTYPE_COUNT] = {"Float", "Double", "Short",
                                                          "Int",   "Long",   "Bool"};
        return tn__error(TN_ERR_DTYPE, "expected scalar type Long but found %s",
                         names[targets->dtype]);
    }
    if (targets->ndim > 1)
        return tn__error(TN_ERR_SHAPE,
                         "0D or 1D target tensor expected, multi-target not supported");
    if (logits->ndim == 1 && targets->ndim == 1 && targets->shape[0] != 1)
        return tn__error(TN_ERR_SHAPE, "size mismatch (got input: [%lld], target: [%lld])",
                         (long long)logits->shape[0], (long long)targets->shape[0]);
    int64_t batch = logits->ndim == 2 ? logits->shape[0] : 1;
    int64_t tb = targets->ndim == 1 ? targets->shape[0] : 1;
    if (logits->ndim == 2 && targets->ndim == 0) tb = 0; /* a batch needs a 1-D target */
    if (batch != tb)
        return tn__error(TN_ERR_SHAPE,
                         "Expected input batch_size (%lld) to match target "
                         "batch_size (%lld).",
                         (long long)batch, (long long)tb);
    return TN_OK;
}

/* On a device: sum(lp * weights), the weights -1/count at the targets. */
static tn_tensor *nll_forward_device(const tn_tensor *lp, const int64_t *vals, int64_t nt,
                                     int64_t count) {
    if (count == 0) return tn__full_on(0, NULL, lp->dtype, NAN, tn__dev(lp));
    tn_tensor *w = target_weights(lp->ndim, lp->shape, lp->dtype, vals, nt, -1.0 / (double)count,
                                  tn__dev(lp));
    tn_tensor *p = w ? tn__pw_binary("nll_loss", TN_PW_mul, lp, w, lp->dtype, lp->dtype) : NULL;
    tn_tensor *out = p ? tn__empty_on(0, NULL, lp->dtype, tn__dev(lp)) : NULL;
    if (out && tn__reduce_kernel(TN_RED_SUM, p, -1, out, NULL, 1) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(w);
    tn_release(p);
    return out;
}

/* loss = -mean over counted targets of log_probs[i, t_i] (NaN when none). */
static tn_tensor *nll_forward(const tn_tensor *lp, const int64_t *vals, int64_t nt, int64_t count) {
    if (!tn__on_cpu(lp)) return nll_forward_device(lp, vals, nt, count);
    int64_t c = lp->shape[lp->ndim - 1];
    double sum = 0;
    const char *p = tn__ptr(lp);
    size_t es = tn__dtype_sizes[lp->dtype];
    for (int64_t i = 0; i < nt; i++)
        if (vals[i] != IGNORE_INDEX) sum += tn__load(p + (size_t)(i * c + vals[i]) * es, lp->dtype);
    return tn__full(0, NULL, lp->dtype, -sum / (double)count);
}

tn_tensor *tn_cross_entropy(const tn_tensor *logits, const tn_tensor *targets) {
    TN_CHECK_NULL_ARG(logits, "input");
    TN_CHECK_NULL_ARG(targets, "target");
    tn_device dev;
    if (ce_check(logits, targets) < 0 ||
        tn__result_device(2, (const tn_tensor *[]){logits, targets}, &dev) < 0)
        return NULL;
    int64_t nt = tn_numel(targets), count = 0;
    int64_t *vals = tn__alloc((size_t)(nt ? nt : 1) * sizeof *vals);
    if (!vals || read_targets(targets, logits->shape[logits->ndim - 1], vals, &count) < 0) {
        tn__free(vals);
        return NULL;
    }
    tn_tensor *lp = softmax_family(logits, -1, true); /* contiguous */
    tn_tensor *out = lp ? nll_forward(lp, vals, nt, count) : NULL;
    tn__free(vals);
    if (out && tn__needs_grad(1, (const tn_tensor *[]){lp})) {
        tn_node *n = tn__node_new(&nll_fn, 1, (const tn_tensor *[]){lp}, 1, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            n->d[0] = (double)count;
            st = tn__node_save(n, 0, targets, false);
        }
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    tn_release(lp);
    tn__anomaly_forward("cross_entropy", out, 1, &logits);
    return tn__ret(out);
}

/* ---- mse_loss -------------------------------------------------------------------------- */

/* Sum of a contiguous float buffer in fixed blocks (partial sums in block
 * order), so the result does not depend on the thread count. */
#define SUM_BLOCK 4096
static tn_status sum_contig(const tn_tensor *t, double *out) {
    int64_t n = tn_numel(t), nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    double stack[64], *part = nb <= 64 ? stack : tn__alloc((size_t)nb * sizeof *part);
    if (!part) return TN_ERR_OUT_OF_MEMORY;
    int nt = tn__threads_for(n);
    (void)nt; /* only read by OpenMP */
    const void *p = tn__ptr(t);
    bool f32 = t->dtype == TN_F32;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * SUM_BLOCK, i1 = i0 + SUM_BLOCK < n ? i0 + SUM_BLOCK : n;
        double s[16] = {0};
        for (int64_t i = i0; i < i1; i++)
            s[i % 16] += f32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
        double acc = 0;
        for (int l = 0; l < 16; l++)
            acc += s[l];
        part[b] = acc;
    }
    double total = 0;
    for (int64_t b = 0; b < nb; b++)
        total += part[b];
    if (part != stack) tn__free(part);
    *out = total;
    return TN_OK;
}

/* Mean of a contiguous float tensor as a 0-dim tensor on its device. */
static tn_tensor *mean_all(const tn_tensor *t) {
    int64_t n = tn_numel(t);
    if (tn__on_cpu(t)) {
        double sum = 0;
        return sum_contig(t, &sum) == TN_OK ? tn__full(0, NULL, t->dtype, sum / (double)n) : NULL;
    }
    tn_tensor *out = tn__empty_on(0, NULL, t->dtype, tn__dev(t));
    if (out && tn__reduce_kernel(TN_RED_SUM, t, -1, out, NULL, (double)n) < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* d/da = 2 (a - b) g / numel, d/db = the negation; the engine sums the
 * broadcast back to each input's shape and dtype. */
static tn_status mse_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *a = tn__node_unpack(n, 0), *b = a ? tn__node_unpack(n, 1) : NULL;
    tn_tensor *d = b ? tn_sub(a, b) : NULL, *dg = d ? tn_mul(d, go[0]) : NULL;
    tn_tensor *ga = dg ? tn_mul_scalar(dg, 2.0 / n->d[0]) : NULL;
    tn_status st = ga ? TN_OK : tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[1]) && !(gi[1] = tn_neg(ga))) st = tn_last_status();
    if (st == TN_OK && tn__edge_valid(&n->edges[0])) gi[0] = tn__retain(ga);
    tn_release(a);
    tn_release(b);
    tn_release(d);
    tn_release(dg);
    tn_release(ga);
    return st;
}
static const tn_fn_info mse_fn = {"MseLossBackward0", mse_bw};

tn_tensor *tn_mse_loss(const tn_tensor *a, const tn_tensor *b) {
    TN_CHECK_NULL_ARG(a, "input");
    TN_CHECK_NULL_ARG(b, "target");
    tn_dtype dt = tn__promote(a, b);
    if (!tn__is_float(dt)) {
        tn__error(TN_ERR_DTYPE, "\"mse_cpu\" not implemented for '%s'", tn_dtype_name(dt));
        return NULL;
    }
    tn_tensor *sq = tn__pw_binary("mse_loss", TN_PW_sqdiff, a, b, dt, dt);
    if (!sq) return NULL;
    int64_t numel = tn_numel(sq);
    tn_tensor *out = mean_all(sq);
    tn_release(sq);
    if (out && tn__needs_grad(2, (const tn_tensor *[]){a, b})) {
        tn_node *n = tn__node_new(&mse_fn, 2, (const tn_tensor *[]){a, b}, 2, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            n->d[0] = (double)numel;
            st = tn__node_save(n, 0, a, false);
        }
        if (st == TN_OK) st = tn__node_save(n, 1, b, false);
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    tn__anomaly_forward("mse_loss", out, 2, (const tn_tensor *[]){a, b});
    return tn__ret(out);
}
