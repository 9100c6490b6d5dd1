/* cross_entropy(logits, targets) = nll_loss(log_softmax(logits, -1), targets),
 * mean over the targets not equal to ignore_index (-100).
 *
 * Where the device's backend has the fused kernel (the CPU's
 * engine/cpu/cross_entropy_kernels.c, CUDA's engine/cuda/cross_entropy.cu,
 * through tn__dev_cross_entropy): one pass with no log-probability tensor;
 * per row the max m and log(sum exp(x - m)) in the logits' dtype, in the
 * device's log_softmax order, so every value equals the two-step result; the
 * loss sums rows in double (in row order on the CPU). Backward: g / count *
 * (exp(x - m - log_s) - onehot) from the saved row statistics, g read by the
 * kernel: no host read in backward (the targets were checked at forward and
 * their saved version guards them). Elsewhere: log_softmax then the NLL (one
 * node each), as PyTorch.
 *
 * Node layouts:
 *   NllLossBackward0 (fused): input {logits}; saved {0: logits, 1: targets,
 *     2: row stats (N, 2) = m, log_s}; parameters ce_params.
 *   NllLossBackward0 (two-step): input {log_probs}; saved {0: targets};
 *     parameters ce_params.
 * The two are told apart by their backward (ce_fused_bw, nll_bw).
 */
#include <math.h>

#include "autocast.h"
#include "pointwise_driver.h"

typedef struct ce_params {
    int64_t count; /* targets not ignored: the mean's divisor */
} ce_params;
TN_NODE_PARAMS(ce_params, ce_p)

#define IGNORE_INDEX (-100) /* PyTorch's default ignore_index */

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
    double v = -(direct ? gv : 1.0) / (double)ce_p(n)->count;
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
        return tn__error(TN_ERR_DTYPE, "expected scalar type Long but found %s",
                         tn__torch_scalar_name(targets->dtype));
    }
    if (targets->ndim > 1)
        return tn__error(TN_ERR_SHAPE,
                         "0D or 1D target tensor expected, multi-target not supported");
    if (logits->ndim == 1 && targets->ndim == 1 && targets->shape[0] != 1)
        return tn__error(TN_ERR_SHAPE, "size mismatch (got input: [%lld], target: [%lld])",
                         (long long)logits->shape[0], (long long)targets->shape[0]);
    int64_t batch = logits->ndim == 2 ? logits->shape[0] : 1;
    int64_t tb = targets->ndim == 1 ? targets->shape[0] : 1;
    if (logits->ndim == 2 && targets->ndim == 0) { /* a batch needs a 1-D target */
        if (batch == 0) /* PyTorch reads the target's size(0) here */
            return tn__error(TN_ERR_INDEX, "Dimension specified as 0 but tensor has no dimensions");
        tb = 0;
    }
    if (batch != tb)
        return tn__error(TN_ERR_SHAPE,
                         "Expected input batch_size (%lld) to match target "
                         "batch_size (%lld).",
                         (long long)batch, (long long)tb);
    return TN_OK;
}

/* The composed path (a device without the fused kernel): sum(lp * weights),
 * the weights -1/count at the targets. */
static tn_tensor *nll_forward_device(const tn_tensor *lp, const int64_t *vals, int64_t nt,
                                     int64_t count) {
    if (count == 0) return tn__full_on(0, NULL, lp->dtype, NAN, tn__dev(lp));
    tn_tensor *w = target_weights(lp->ndim, lp->shape, lp->dtype, vals, nt, -1.0 / (double)count,
                                  tn__dev(lp));
    tn_tensor *p = w ? tn__pw_binary("nll_loss", TN_PW_mul, lp, w, lp->dtype, lp->dtype) : NULL;
    tn_tensor *out = p ? tn__empty_on(0, NULL, lp->dtype, tn__dev(lp)) : NULL;
    if (out && tn__dev_reduce(TN_RED_SUM, p, -1, out, NULL, 1) < 0) {
        tn_release(out);
        out = NULL;
    }
    tn_release(w);
    tn_release(p);
    return out;
}

/* ---- the fused path -------------------------------------------------------------------- */

/* The fused kernel over the contiguous logits x and targets t (nrow rows of
 * c); ops for the race detector as tn__dev_cross_entropy. */
static tn_status ce_run(tn_ce_args *a, const tn_tensor *x, const tn_tensor *t, int64_t nrow,
                        int nops, const tn_tensor *const *ops) {
    a->dtype = x->dtype;
    a->n = nrow;
    a->c = x->shape[x->ndim - 1];
    a->x = tn__ptr(x);
    a->target = (const int64_t *)tn__ptr(t);
    a->ignore_index = IGNORE_INDEX;
    return tn__dev_cross_entropy(a, tn__dev(x), nops, ops);
}

/* Under create_graph: g / count * (softmax(x) - onehot), ignored rows 0,
 * with public ops so the backward is itself recorded. */
static tn_tensor *ce_grad_recorded(const tn_tensor *x, const int64_t *vals, int64_t nrow,
                                   tn_tensor *g, double count) {
    int64_t rshape[2] = {nrow, 1};
    tn_tensor *onehot = target_weights(x->ndim, x->shape, x->dtype, vals, nrow, 1.0, tn__dev(x));
    tn_tensor *rh = tn__empty(x->ndim == 2 ? 2 : 1, x->ndim == 2 ? rshape : &rshape[1], x->dtype);
    if (rh)
        for (int64_t i = 0; i < nrow; i++)
            tn__store(tn__ptr(rh) + i * (int64_t)tn__dtype_sizes[x->dtype], x->dtype,
                      vals[i] != IGNORE_INDEX);
    tn_tensor *rows = rh ? tn__on_device(rh, tn__dev(x)) : NULL; /* 1 where counted */
    tn_tensor *p = rows && onehot ? tn_softmax(x, -1) : NULL;
    tn_tensor *pm = p ? tn_mul(p, rows) : NULL, *d = pm ? tn_sub(pm, onehot) : NULL;
    tn_tensor *gs = d ? tn_div_scalar(g, count) : NULL, *gx = gs ? tn_mul(d, gs) : NULL;
    tn_release(onehot), tn_release(rh), tn_release(rows), tn_release(p), tn_release(pm);
    tn_release(d), tn_release(gs);
    return gx;
}

/* Without create_graph: the kernel's backward from the saved row stats, scaled by -g / count
 * where the kernel runs (g: the loss's gradient, in the logits' dtype). No host read: on a
 * device the backward enqueues and goes on. */
static tn_tensor *ce_grad_direct(const tn_tensor *x, const tn_tensor *t, const tn_tensor *stats,
                                 const tn_tensor *g, double count) {
    tn_tensor *tc = tn__contiguous_on(t, tn__dev(x)), *gx = tc ? tn__empty_like(x) : NULL;
    tn_ce_args a = {.mode = TN_CE_BWD, .stats = tn__ptr(stats), .g = tn__ptr(g), .count = count,
                    .gx = gx ? tn__ptr(gx) : NULL};
    if (gx && ce_run(&a, x, tc, tn_numel(t), 5, (const tn_tensor *[]){gx, x, stats, tc, g}) < 0) {
        tn_release(gx);
        gx = NULL;
    }
    tn_release(tc);
    return gx;
}

static tn_status ce_fused_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *xs = tn__node_unpack(n, 0), *t = xs ? tn__node_unpack(n, 1) : NULL;
    tn_tensor *stats = t ? tn__node_unpack(n, 2) : NULL;
    /* the kernel reads rows: a strided (saved) input is copied first */
    tn_tensor *x = stats ? tn__contiguous_on(xs, tn__dev(xs)) : NULL;
    if (stats && !x) stats = (tn_release(stats), NULL);
    tn_status st = stats ? TN_OK : tn_last_status();
    if (st == TN_OK && tn__grad_enabled()) {
        /* recorded: the one-hot is built on the host from the targets (checked at forward;
         * the saved targets' version guards them since) */
        int64_t c = x->shape[x->ndim - 1], nrow = tn_numel(t), cnt = 0;
        int64_t *vals = tn__alloc((size_t)(nrow ? nrow : 1) * sizeof *vals);
        st = vals ? read_targets(t, c, vals, &cnt) : tn_last_status();
        if (st == TN_OK &&
            !(gi[0] = ce_grad_recorded(xs, vals, nrow, go[0], (double)ce_p(n)->count)))
            st = tn_last_status();
        tn__free(vals);
    } else if (st == TN_OK) {
        tn_tensor *g = go[0]->dtype == x->dtype ? tn__retain(go[0]) : tn__copy_as(go[0], x->dtype);
        if (!g || !(gi[0] = ce_grad_direct(x, t, stats, g, (double)ce_p(n)->count)))
            st = tn_last_status();
        tn_release(g);
    }
    tn_release(xs), tn_release(x), tn_release(t), tn_release(stats);
    return st;
}
static const tn_fn_info ce_fused_fn = {"NllLossBackward0", ce_fused_bw};

static tn_tensor *ce_fused(const tn_tensor *logits, const tn_tensor *targets, int64_t count) {
    int64_t nrow = tn_numel(targets);
    tn_device dev = tn__dev(logits);
    tn_tensor *x = tn__contiguous_on(logits, dev), *t = x ? tn__contiguous_on(targets, dev) : NULL;
    tn_tensor *stats = t ? tn__empty_on(2, (int64_t[]){nrow, 2}, logits->dtype, dev) : NULL;
    tn_tensor *out = stats ? tn__empty_on(0, NULL, logits->dtype, dev) : NULL;
    if (out) {
        tn_ce_args a = {.mode = TN_CE_FWD, .stats = tn__ptr(stats), .loss = tn__ptr(out),
                        .count = (double)count};
        if (ce_run(&a, x, t, nrow, 4, (const tn_tensor *[]){out, stats, x, t}) < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    if (out && tn__needs_grad(1, &logits)) {
        tn_node *n = tn__node_new(&ce_fused_fn, 1, &logits, 3, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            ce_p(n)->count = count;
            st = tn__node_save(n, 0, logits, false);
        }
        if (st == TN_OK) st = tn__node_save(n, 1, targets, false);
        if (st == TN_OK) st = tn__node_save(n, 2, stats, false);
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    tn_release(x), tn_release(t), tn_release(stats);
    return out;
}

tn_tensor *tn_cross_entropy(const tn_tensor *logits, const tn_tensor *targets) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_CROSS_ENTROPY, 2, (const tn_tensor *[]){logits, targets}))
        return tn__autocast_done(&f, f.ok ? tn_cross_entropy(f.t[0], f.t[1]) : NULL);
    double t0 = tn__prof_start(); /* the profiler: the op's span */
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
    if (tn__dev_has_cross_entropy(tn__dev(logits))) {
        tn__free(vals);
        tn_tensor *out = ce_fused(logits, targets, count);
        tn__op_done("cross_entropy", t0, out, 1, &logits);
        return tn__ret(out);
    }
    tn_tensor *lp = tn__softmax_family(logits, -1, true); /* contiguous */
    tn_tensor *out = lp ? nll_forward_device(lp, vals, nt, count) : NULL;
    tn__free(vals);
    if (out && tn__needs_grad(1, (const tn_tensor *[]){lp})) {
        tn_node *n = tn__node_new(&nll_fn, 1, (const tn_tensor *[]){lp}, 1, 1);
        tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (st == TN_OK) {
            ce_p(n)->count = count;
            st = tn__node_save(n, 0, targets, false);
        }
        tn__node_release(n);
        if (st < 0) {
            tn_release(out);
            out = NULL;
        }
    }
    tn_release(lp);
    tn__op_done("cross_entropy", t0, out, 1, &logits);
    return tn__ret(out);
}

