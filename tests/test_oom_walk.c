/* The OOM walk: fails the 1st, 2nd, 3rd, ... allocation of a representative
 * program, one per run, in one process, until a run completes with no
 * failure injected (include/tenet/testing.h; docs/design.md, "Out of memory").
 *
 * The program: an MLP's forward and backward in anomaly mode (matmul, add,
 * relu, linear, cross_entropy and mse_loss, sum; one step also checks
 * NaN/Inf), SGD and Adam steps, scopes (nested deeper than the frame stack's
 * first size, tn_keep, a scope that grows while tn_autograd_grad registers
 * its results), views (narrow, transpose, reshape, ...), a view that follows its base, a leaf
 * hook, two roots in one backward (tn_backward_multi) and in-place writes
 * through them, clone, detach, copy_, retain_grad, tn_autograd_grad with
 * create_graph (second order), a create_graph backward into an existing
 * .grad, a parallel backward, the other op families, convolutions (conv_transpose2d
 * into conv2d, to second order), printing to a string
 * and to a FILE, an anomaly caught at backward with its report, the graph as
 * DOT.
 *
 * It runs as steps; a step makes new tensors in its own scope and changes
 * the lasting state (parameters, gradients, optimiser state) only through
 * calls that either succeed or change nothing. For every N, each library
 * call must succeed or fail cleanly: only the injected failure, reported as
 * NULL or TN_ERR_OUT_OF_MEMORY with a message, every watched tensor (values,
 * version, .grad) as before the call. The failed step is then cleaned up and
 * run again from its start, and the run goes on to the end; its results
 * (losses, parameters, gradients, printed text) must be bit-identical to
 * those of a run with no failure, which they are only if the failed call
 * changed nothing. After each run every tensor is released
 * (tn_memory_stats: 0 tensors, 0 storages); under the asan preset
 * LeakSanitizer checks the rest at exit.
 *
 * A few allocations may fail with no error by design: anomaly mode's record
 * of a write that has already happened, and the memory of an anomaly report
 * (both then say "not recorded"); such a run must still end with the same
 * results. The summary line counts both kinds; TENET_OOM_WALK_VERBOSE=1
 * lists, for every N, the call that failed (or absorbed the failure).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#include <tenet/testing.h>

enum { B = 4, IN = 6, HID = 8, OUT = 3, STEPS = 4, DEPTH = 20 };
enum { CONV_W = 2 * 3 * 3 * 3 }; /* the conv step's weight (2, 3, 3, 3) */
enum { MAX_WATCH = 12, MAX_NUMEL = 64, MAX_ISSUES = 20 };

/* ---- the injection, with the harness's own work left out -------------------------------- */

typedef struct walk {
    int64_t n;    /* the allocation to fail, counted over the run */
    int64_t used; /* allocations of the run counted before the current hold */
    bool fired;
    int clean;         /* calls that failed cleanly with the injected failure */
    char where[160];   /* the call that failed (line: text) */
    int issues;
    char issue[MAX_ISSUES][512];
} walk;

static walk W;

__attribute__((format(printf, 1, 2))) static void issue(const char *fmt, ...) {
    if (W.issues < MAX_ISSUES) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(W.issue[W.issues], sizeof W.issue[0], fmt, ap);
        va_end(ap);
    }
    W.issues++;
}

/* Stops counting while the harness reads tensors; resume() re-arms for the
 * same N. */
static void hold(void) {
    W.used += tn_test_alloc_count();
    W.fired |= tn_test_alloc_failed();
    tn_test_fail_alloc_at(0);
}

static void resume(void) {
    if (!W.fired) tn_test_fail_alloc_at(W.n - W.used);
}

/* ---- watched tensors: what a failed call must leave as it was ---------------------------- */

typedef struct snap {
    int64_t version, numel;
    bool has_grad;
    double v[MAX_NUMEL], g[MAX_NUMEL];
} snap;

static tn_tensor **watched[MAX_WATCH];
static bool retained[MAX_WATCH]; /* a non-leaf whose .grad is retained */
static int n_watched;
static snap snaps[MAX_WATCH];

static void watch(tn_tensor **slot) {
    if (n_watched < MAX_WATCH) watched[n_watched++] = slot;
}

static void watch_retained(tn_tensor **slot) {
    if (n_watched < MAX_WATCH) retained[n_watched] = true;
    watch(slot);
}

static void take(const tn_tensor *t, bool retains, snap *s) {
    memset(s, 0, sizeof *s);
    s->version = tn_version(t);
    s->numel = tn_numel(t);
    if (s->numel > MAX_NUMEL) s->numel = MAX_NUMEL;
    tn_copy_to_f64(t, s->v, MAX_NUMEL);
    if (!retains && (!tn_is_leaf(t) || !tn_requires_grad(t))) return;
    if (tn_scope_begin() != TN_OK) return; /* owns the grad's reference */
    tn_tensor *g = tn_grad(t);
    s->has_grad = g != NULL;
    if (g) tn_copy_to_f64(g, s->g, MAX_NUMEL);
    tn_scope_end();
}

static void snapshot(void) {
    for (int i = 0; i < n_watched; i++)
        if (*watched[i]) take(*watched[i], retained[i], &snaps[i]);
}

static bool unchanged(const char *call) {
    bool ok = true;
    for (int i = 0; i < n_watched; i++) {
        if (!*watched[i]) continue;
        snap now;
        take(*watched[i], retained[i], &now);
        if (memcmp(&now, &snaps[i], sizeof now) != 0) {
            issue("N=%lld: %s failed but changed watched tensor %d (version %lld -> %lld)",
                  (long long)W.n, call, i, (long long)snaps[i].version, (long long)now.version);
            ok = false;
        }
    }
    return ok;
}

/* ---- one library call ----------------------------------------------------------------- */

typedef enum { CALL_OK, CALL_FAILED } call_result;

static void before_call(void) {
    hold();
    snapshot();
    tn_clear_error();
    resume();
}

/* ok: the call succeeded. want: the error it must fail with when no
 * allocation failed (TN_OK: it must succeed). */
static call_result after_call(bool ok, tn_status want, const char *call, int line) {
    tn_status st = tn_last_status();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", tn_last_error());
    hold();
    bool fired_here = tn_test_alloc_failed() || W.fired;
    if (fired_here && !W.where[0]) /* absorbed, unless this call failed (set below) */
        snprintf(W.where, sizeof W.where, "absorbed in line %d: %s", line, call);
    if (ok && want == TN_OK) {
        if (st != TN_OK)
            issue("N=%lld: line %d: %s succeeded but left error %s (%s)", (long long)W.n, line,
                  call, tn_status_string(st), msg);
        resume();
        return CALL_OK;
    }
    if (!ok && want != TN_OK && st == want) { /* the expected error */
        resume();
        return CALL_OK;
    }
    if (ok) {
        issue("N=%lld: line %d: %s succeeded, expected %s", (long long)W.n, line, call,
              tn_status_string(want));
        resume();
        return CALL_OK;
    }
    if (!fired_here)
        issue("N=%lld: line %d: %s failed with no allocation failed: %s (%s)", (long long)W.n,
              line, call, tn_status_string(st), msg);
    else if (st != TN_ERR_OUT_OF_MEMORY || !msg[0])
        issue("N=%lld: line %d: %s failed unclean: %s (\"%s\")", (long long)W.n, line, call,
              tn_status_string(st), msg);
    else if (unchanged(call))
        W.clean++;
    snprintf(W.where, sizeof W.where, "failed in line %d: %s", line, call);
    return CALL_FAILED; /* stays held: the step is cleaned up, then run again */
}

/* Statement forms, each for ONE library call whose arguments are ready. */
#define CALL_T(dst, call)                                                                          \
    do {                                                                                           \
        before_call();                                                                             \
        void *r_ = (call); /* a tensor or an optimiser */                                          \
        if (after_call(r_ != NULL, TN_OK, #call, __LINE__) != CALL_OK) goto failed;                \
        (dst) = r_;                                                                                \
    } while (0)
#define CALL_S(call)                                                                               \
    do {                                                                                           \
        before_call();                                                                             \
        tn_status s_ = (call);                                                                     \
        if (after_call(s_ == TN_OK, TN_OK, #call, __LINE__) != CALL_OK) goto failed;               \
    } while (0)
#define CALL_E(call, want)                                                                         \
    do {                                                                                           \
        before_call();                                                                             \
        tn_status s_ = (call);                                                                     \
        if (after_call(s_ == TN_OK, (want), #call, __LINE__) != CALL_OK) goto failed;              \
    } while (0)
#define CALL_N(call) /* a count, negative on failure */                                            \
    do {                                                                                           \
        before_call();                                                                             \
        int n_ = (call);                                                                           \
        if (after_call(n_ >= 0, TN_OK, #call, __LINE__) != CALL_OK) goto failed;                   \
    } while (0)
/* Opens the step's scope; `scoped` says whether there is one to end. */
#define SCOPE()                                                                                    \
    do {                                                                                           \
        CALL_S(tn_scope_begin());                                                                  \
        scoped = true;                                                                             \
    } while (0)

/* ---- the program ------------------------------------------------------------------------ */

typedef struct results {
    double loss[STEPS], params[4][HID * IN], fgrad[HID * IN], ggrad[HID * IN], retained[B * OUT];
    double misc[2][B * IN], handed[2][2], cgrad[HID * IN], follow[HID * IN];
    char text[512], loss_text[128];
    double norm[2][B * IN], norm_w[IN];
    double conv[2][CONV_W];
    double extra[B * IN], extra_w[B * IN], extra_s[3 * B];
} results;

typedef struct program {
    tn_tensor *p[4]; /* w1 (HID, IN), b1 (HID), w2 (OUT, HID), b2 (OUT): owned */
    tn_sgd *sgd;
    tn_adam *adam;
    FILE *sink;
    results r;
} program;

static const int64_t P_SHAPE[4][2] = {{HID, IN}, {HID, 0}, {OUT, HID}, {OUT, 0}};

static double xval(int i) { return sin(0.7 * i + 0.3); }

static tn_tensor *input_batch(void) {
    float x[B * IN];
    for (int i = 0; i < B * IN; i++)
        x[i] = (float)xval(i);
    return tn_tensor_from(x, TN_F32, 2, (int64_t[]){B, IN}, false);
}

static void begin_step(void) {
    n_watched = 0;
    memset(retained, 0, sizeof retained);
}

/* The end of a step, run to its end (ok) or not: its scope ends when it
 * opened one, and the modes steps switch on are off again. */
static bool step_end(bool scoped, bool ok) {
    if (scoped) tn_scope_end();
    tn_anomaly_clear();
    tn_set_detect_anomaly(false, false);
    tn_set_parallel_backward(false);
    return ok;
}

/* The parameters: w1 from the generator, the others from formulas. */
static bool step_init(program *g) {
    begin_step();
    for (int k = 0; k < 4; k++) watch(&g->p[k]);
    tn_manual_seed(11);
    CALL_T(g->p[0], tn_randn(2, P_SHAPE[0], TN_F32));
    CALL_S(tn_mul_scalar_(g->p[0], 0.3));
    for (int k = 1; k < 4; k++) {
        float v[HID * IN];
        int nd = P_SHAPE[k][1] ? 2 : 1;
        for (int i = 0; i < HID * IN; i++)
            v[i] = (float)(0.1 * cos(0.5 * i + k));
        CALL_T(g->p[k], tn_tensor_from(v, TN_F32, nd, P_SHAPE[k], false));
    }
    for (int k = 0; k < 4; k++)
        CALL_S(tn_requires_grad_(g->p[k], true));
    CALL_T(g->sgd, tn_sgd_new(4, g->p, 0.1, 0.9, 0.01));
    CALL_T(g->adam, tn_adam_new(4, g->p, 0.01, 0.9, 0.999, 1e-8, 0.0));
    return true;
failed:
    tn_adam_free(g->adam);
    tn_sgd_free(g->sgd);
    g->adam = NULL;
    g->sgd = NULL;
    for (int k = 0; k < 4; k++) {
        tn_release(g->p[k]);
        g->p[k] = NULL;
    }
    return false;
}

/* zero_grad, forward, loss, backward, optimiser step: SGD, then Adam. */
static bool step_train(program *g, int it) {
    bool scoped = false;
    begin_step();
    for (int k = 0; k < 4; k++) watch(&g->p[k]);
    tn_tensor *x = NULL, *w1t = NULL, *h = NULL, *a = NULL, *hr = NULL, *logits = NULL,
              *loss = NULL, *y = NULL, *prob = NULL, *flat = NULL, *part = NULL;
    tn_set_detect_anomaly(true, it == 1); /* one step also checks for NaN/Inf */
    SCOPE();
    if (it < 2) CALL_S(tn_sgd_zero_grad(g->sgd));
    else CALL_S(tn_adam_zero_grad(g->adam));
    CALL_T(x, input_batch());
    CALL_T(w1t, tn_transpose(g->p[0], 0, 1));
    CALL_T(h, tn_matmul(x, w1t));
    CALL_T(a, tn_add(h, g->p[1]));
    CALL_T(hr, tn_relu(a));
    CALL_T(logits, tn_linear(hr, g->p[2], g->p[3]));
    if (it % 2 == 0) {
        CALL_T(y, tn_tensor_from((int64_t[]){0, 2, 1, it % 3}, TN_I64, 1, (int64_t[]){B}, false));
        CALL_T(loss, tn_cross_entropy(logits, y));
    } else {
        float t[B * OUT];
        for (int i = 0; i < B * OUT; i++)
            t[i] = (float)(i % OUT == it % OUT);
        CALL_T(y, tn_tensor_from(t, TN_F32, 2, (int64_t[]){B, OUT}, false));
        CALL_T(prob, tn_softmax(logits, 1));
        CALL_T(flat, tn_reshape(prob, 1, (int64_t[]){B * OUT}));
        CALL_T(part, tn_narrow(flat, 0, 0, B * OUT));
        CALL_T(prob, tn_reshape(part, 2, (int64_t[]){B, OUT}));
        CALL_T(loss, tn_mse_loss(prob, y));
    }
    CALL_S(tn_backward(loss, NULL, false));
    if (it < 2) CALL_S(tn_sgd_step(g->sgd));
    else CALL_S(tn_adam_step(g->adam));
    CALL_S(tn_item(loss, &g->r.loss[it]));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

/* Views, in-place writes through them (CopySlices), clone/detach/copy_,
 * retain_grad, a second-order tn_autograd_grad, printing. */
static bool step_views(program *g) {
    bool scoped = false;
    begin_step();
    for (int k = 0; k < 4; k++) watch(&g->p[k]);
    tn_tensor *c = NULL, *v = NULL, *t = NULL, *r = NULL, *d = NULL, *e = NULL, *cp = NULL,
              *ex = NULL, *s = NULL, *sq = NULL, *gr[1] = {NULL}, *gg[1] = {NULL}, *q = NULL,
              *x = NULL, *lo = NULL, *one = NULL, *k = NULL, *kv = NULL, *ks = NULL, *ls = NULL;
    watch(&c);
    watch(&v);
    watch(&cp);
    watch(&k);
    tn_set_detect_anomaly(true, false);
    SCOPE();
    CALL_S(tn_adam_zero_grad(g->adam)); /* the backward below adds to .grad: run again, same */
    CALL_T(c, tn_clone(g->p[0]));                     /* CloneBackward0 */
    CALL_T(v, tn_narrow(c, 0, 1, 3));                 /* a view of a non-leaf */
    CALL_S(tn_mul_scalar_(v, 2.0));                   /* CopySlices on c */
    CALL_T(t, tn_transpose(v, 0, 1));
    CALL_S(tn_add_scalar_(t, 0.5));                   /* through a view of a view */
    CALL_T(r, tn_reshape(c, 1, (int64_t[]){HID * IN}));
    CALL_T(d, tn_detach(r));
    CALL_T(e, tn_clone(d));
    CALL_T(cp, tn_zeros(1, (int64_t[]){HID * IN}, TN_F32));
    CALL_T(ex, tn_exp(e));
    CALL_S(tn_copy_(cp, ex));                         /* no history */
    CALL_S(tn_copy_(cp, r));                          /* CopyBackwards */
    CALL_S(tn_retain_grad(cp));
    CALL_T(k, tn_mul_scalar(c, 1.0));
    CALL_T(kv, tn_mul_scalar(c, 1.0));
    CALL_S(tn_mul_(kv, kv)); /* its saved input becomes an alias (no backward: it fails) */
    CALL_S(tn_mul_(k, c));                            /* saves k's old value */
    CALL_T(kv, tn_narrow(k, 1, 0, 2));
    CALL_S(tn_add_(kv, kv));                          /* binary, through a view */
    CALL_S(tn_relu_(k));                              /* saves its output */
    CALL_T(sq, tn_mul(cp, cp));
    CALL_T(s, tn_sum(sq));
    CALL_T(ks, tn_sum(k));
    CALL_T(s, tn_add(s, ks));
    CALL_S(tn_autograd_grad(1, &s, NULL, 1, &g->p[0], gr, false, true));
    CALL_S(tn_copy_to_f64(gr[0], g->r.fgrad, HID * IN));
    CALL_T(q, tn_mul(gr[0], gr[0]));
    CALL_T(q, tn_sum(q));
    CALL_S(tn_autograd_grad(1, &q, NULL, 1, &g->p[0], gg, false, false));
    CALL_S(tn_copy_to_f64(gg[0], g->r.ggrad, HID * IN));
    /* a retained non-leaf grad, from a backward that keeps the graph */
    CALL_T(x, input_batch());
    CALL_T(lo, tn_linear(x, g->p[0], g->p[1]));
    CALL_T(lo, tn_narrow(lo, 1, 0, OUT));
    CALL_S(tn_retain_grad(lo));
    watch_retained(&lo);
    CALL_T(ls, tn_sum(lo));
    CALL_S(tn_backward(ls, NULL, true));
    CALL_T(one, tn_grad(lo));
    CALL_S(tn_copy_to_f64(one, g->r.retained, B * OUT));
    /* create_graph: into the .grad that backward just gave w1 (an out-of-place sum) */
    CALL_S(tn_backward_ex(ls, NULL, true, true));
    CALL_T(one, tn_grad(g->p[0]));
    CALL_S(tn_copy_to_f64(one, g->r.cgrad, HID * IN));
    CALL_S(tn_adam_zero_grad(g->adam));
    CALL_N(tn_format(v, g->r.text, sizeof g->r.text));
    CALL_S(tn_print(s, g->sink));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

/* A view that follows its base (regenerated after a write through a
 * sibling view), a leaf hook, two roots in one backward. The hook is
 * registered by the step and removed on both paths, so a retried step
 * meets no hook of its first try. */
static double follow_scale = 0.5;
static tn_status follow_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    *replace = tn_mul_scalar(g, *(const double *)ctx);
    return *replace ? TN_OK : tn_last_status();
}

static bool step_follow(program *g) {
    bool scoped = false;
    begin_step();
    watch(&g->p[0]);
    tn_tensor *c = NULL, *v1 = NULL, *v2 = NULL, *cc = NULL, *roots[2] = {NULL, NULL}, *one = NULL;
    tn_hook *h = NULL;
    SCOPE();
    CALL_S(tn_adam_zero_grad(g->adam));
    CALL_T(c, tn_clone(g->p[0]));
    CALL_T(v1, tn_narrow(c, 0, 0, 2));
    CALL_T(v2, tn_narrow(c, 0, 1, 2));
    CALL_S(tn_mul_scalar_(v1, 3.0)); /* v2's history is stale now */
    CALL_T(h, tn_register_hook(g->p[0], follow_hook, &follow_scale));
    CALL_T(roots[0], tn_sum(v2)); /* regenerates v2's history */
    CALL_T(cc, tn_mul(c, c));
    CALL_T(roots[1], tn_sum(cc));
    CALL_S(tn_backward_multi(2, roots, NULL, false, false));
    CALL_T(one, tn_grad(g->p[0]));
    CALL_S(tn_copy_to_f64(one, g->r.follow, HID * IN));
    CALL_S(tn_adam_zero_grad(g->adam));
    tn_hook_remove(h);
    return step_end(scoped, true);
failed:
    tn_hook_remove(h);
    return step_end(scoped, false);
}

/* Scopes nested deeper than the frame stack's first allocation; each keeps
 * its tensor into the enclosing one. */
static bool step_scopes(program *g) {
    begin_step();
    int depth = 0;
    tn_tensor *t = NULL, *u = NULL;
    while (depth < DEPTH) {
        CALL_S(tn_scope_begin());
        depth++;
        if (t) {
            CALL_T(u, tn_add_scalar(t, 1.0));
            CALL_T(u, tn_add(u, t));
        } else {
            CALL_T(u, tn_ones(1, (int64_t[]){3}, TN_F32));
        }
        t = u;
    }
    for (; depth > 1; depth--) {
        CALL_T(t, tn_keep(t));
        tn_scope_end();
    }
    CALL_N(tn_format(t, g->r.loss_text, sizeof g->r.loss_text));
    tn_scope_end();
    return true;
failed:
    for (; depth > 0; depth--)
        tn_scope_end();
    return false;
}

/* The other op families (joins, reductions along a dim, the rest of the
 * views, pointwise, conversions, out=), backward through them on several
 * threads (parallel backward, anomaly mode off), .data, detach_, set_grad. */
static bool step_misc(program *g) {
    bool scoped = false;
    begin_step();
    tn_tensor *x = NULL, *l = NULL, *cat = NULL, *st = NULL, *pm = NULL, *sel = NULL, *ex = NULL,
              *un = NULL, *sq = NULL, *fl = NULL, *ct = NULL, *mx = NULL, *mn = NULL, *ls = NULL,
              *pw = NULL, *dv = NULL, *tot = NULL, *d64 = NULL, *nt = NULL,
              *out = NULL, *da = NULL, *gr = NULL, *cl = NULL, *t = NULL;
    watch(&x);
    watch(&out);
    watch(&cl);
    tn_set_parallel_backward(true);
    SCOPE();
    CALL_T(x, input_batch());
    CALL_S(tn_requires_grad_(x, true));
    CALL_T(l, tn_tanh(x));
    CALL_T(cat, tn_cat(2, (tn_tensor *[]){l, x}, 1));                 /* (B, 2 IN) */
    CALL_T(st, tn_stack(2, (tn_tensor *[]){l, x}, 0));                /* (2, B, IN) */
    CALL_T(pm, tn_permute(st, 3, (int[]){2, 0, 1}));                  /* (IN, 2, B) */
    CALL_T(sel, tn_select(pm, 1, 0));                                 /* (IN, B) */
    CALL_T(un, tn_unsqueeze(sel, 0));                                 /* (1, IN, B) */
    CALL_T(ex, tn_expand(un, 3, (int64_t[]){2, IN, B}));
    CALL_T(t, tn_narrow(ex, 0, 0, 1));
    CALL_T(sq, tn_squeeze(t));                                        /* (IN, B) */
    CALL_T(fl, tn_flatten(ex, 1, 2));                                 /* (2, IN B) */
    CALL_T(ct, tn_contiguous(fl));
    CALL_T(mx, tn_max_dim(ct, 1, true));
    CALL_T(mn, tn_mean_dim(cat, 0, false));
    CALL_T(ls, tn_log_softmax(cat, 1));
    CALL_T(t, tn_argmax_dim(ls, 1, false));
    CALL_T(t, tn_sigmoid(mn));
    CALL_T(pw, tn_pow_scalar(t, 2.0));
    CALL_T(t, tn_add_scalar(mn, 3.0));
    CALL_T(dv, tn_div(pw, t));
    CALL_T(tot, tn_sum(ls));
    CALL_T(t, tn_sum(mx));
    CALL_T(tot, tn_add(tot, t));
    CALL_T(t, tn_sum(dv));
    CALL_T(tot, tn_add(tot, t));
    CALL_T(t, tn_sum(sq));
    CALL_T(tot, tn_add(tot, t));
    CALL_T(d64, tn_to(tot, TN_F64, TN_DEVICE_KEEP));
    CALL_S(tn_backward(d64, NULL, false));
    CALL_T(gr, tn_grad(x));
    CALL_S(tn_copy_to_f64(gr, g->r.misc[0], B * IN));
    CALL_T(nt, tn_new_tensor(gr, TN_F64, TN_DEVICE_KEEP, false));
    CALL_T(out, tn_zeros(2, (int64_t[]){B, IN}, TN_F64));
    CALL_S(tn_add_out(out, nt, nt));
    CALL_T(cl, tn_clamp(out, -0.5, 0.5));
    CALL_T(da, tn_data(cl));
    CALL_S(tn_neg_(da));
    CALL_T(t, tn_detach_(cl));
    CALL_S(tn_set_grad(x, NULL));
    CALL_S(tn_copy_to_f64(cl, g->r.misc[1], B * IN));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

/* Fills a scope to one entry short of its first 64, then tn_autograd_grad
 * hands out two results: registering the second grows the scope. (Nothing
 * is watched here: reading a .grad would register it in the scope.) */
static bool step_handed(program *g) {
    bool scoped = false;
    begin_step();
    tn_tensor *a = NULL, *b = NULL, *m = NULL, *s = NULL, *f = NULL, *gs[2] = {NULL, NULL};
    SCOPE();
    CALL_T(a, tn_tensor_from((float[]){1, 2}, TN_F32, 1, (int64_t[]){2}, true));
    CALL_T(b, tn_tensor_from((float[]){3, 4}, TN_F32, 1, (int64_t[]){2}, true));
    CALL_T(m, tn_mul(a, b));
    CALL_T(s, tn_sum(m));
    for (int i = 0; i < 59; i++)
        CALL_T(f, tn_scalar(i, TN_F32)); /* the scope owns it */
    (void)f;
    CALL_S(tn_autograd_grad(1, &s, NULL, 2, (tn_tensor *[]){a, b}, gs, false, false));
    for (int i = 0; i < 2; i++)
        CALL_S(tn_copy_to_f64(gs[i], g->r.handed[i], 2));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

/* An in-place write caught at backward in anomaly mode, its report, the graph as DOT. */
static bool step_anomaly(program *g) {
    bool scoped = false;
    begin_step();
    tn_tensor *a = NULL, *out = NULL, *d = NULL, *loss = NULL;
    tn_set_detect_anomaly(true, false);
    SCOPE();
    CALL_T(a, tn_tensor_from((float[]){1, 2, 3}, TN_F32, 1, (int64_t[]){3}, true));
    CALL_T(out, tn_sigmoid(a));
    CALL_T(d, tn_detach(out));
    watch(&a);
    CALL_S(tn_zero_(d));
    CALL_T(loss, tn_sum(out));
    CALL_E(tn_backward(loss, NULL, true), TN_ERR_INPLACE_MODIFIED);
    const tn_anomaly_report *r = tn_last_anomaly();
    if (!r) issue("N=%lld: no anomaly report", (long long)W.n);
    else CALL_S(tn_anomaly_report_print(r, g->sink));
    CALL_S(tn_graph_dot(loss, g->sink));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

static void copy_params(program *g) {
    hold();
    for (int k = 0; k < 4; k++)
        tn_copy_to_f64(g->p[k], g->r.params[k], HID * IN);
    resume();
}

/* One run; every step that fails is run again (the failure fired once). */
/* layer_norm, gelu (both forms), silu, dropout (seeded at the step's start,
 * so that a rerun draws the same mask), logsumexp, var, std, batch_norm
 * (training, a running mean) and group_norm: a first-order
 * gradient with create_graph, a second-order one through it, then backward
 * into the layer norm's weight (also its bias). */
static bool step_norm(program *g) {
    bool scoped = false;
    begin_step();
    tn_tensor *x = NULL, *w = NULL, *y = NULL, *t = NULL, *u = NULL, *tot = NULL, *gx = NULL,
              *gg = NULL, *gw = NULL, *rm = NULL;
    watch(&x);
    watch(&w);
    SCOPE();
    tn_manual_seed(5);
    CALL_T(x, input_batch());
    CALL_S(tn_requires_grad_(x, true));
    CALL_T(w, tn_full(1, (int64_t[]){IN}, TN_F32, 0.5));
    CALL_S(tn_requires_grad_(w, true));
    CALL_T(y, tn_layer_norm(x, 1, (int64_t[]){IN}, w, w, 1e-5)); /* (B, IN) */
    CALL_T(t, tn_gelu(y, true));
    CALL_T(t, tn_silu(t));
    CALL_T(t, tn_gelu(t, false));
    CALL_T(t, tn_dropout(t, 0.3, true));
    CALL_T(t, tn_logsumexp(t, 1, false)); /* (B) */
    CALL_T(tot, tn_sum(t));
    CALL_T(t, tn_var_dim(y, 0, 1, false)); /* (IN) */
    CALL_T(u, tn_std_dim(x, 1, 0, true));  /* (B, 1) */
    CALL_T(t, tn_sum(t));
    CALL_T(tot, tn_add(tot, t));
    CALL_T(t, tn_sum(u));
    CALL_T(tot, tn_add(tot, t));
    CALL_T(rm, tn_zeros(1, (int64_t[]){IN}, TN_F32));
    CALL_T(t, tn_batch_norm(x, rm, NULL, w, w, true, 0.1, 1e-5)); /* (B, IN) */
    CALL_T(t, tn_group_norm(t, 2, w, NULL, 1e-5));
    CALL_T(t, tn_mul(t, t));
    CALL_T(t, tn_sum(t));
    CALL_T(tot, tn_add(tot, t));
    CALL_S(tn_autograd_grad(1, &tot, NULL, 1, &x, &gx, true, true));
    CALL_T(t, tn_mul(gx, gx));
    CALL_T(t, tn_sum(t));
    CALL_S(tn_autograd_grad(1, &t, NULL, 1, &x, &gg, true, false)); /* tot's graph stays */
    CALL_S(tn_copy_to_f64(gx, g->r.norm[0], B * IN));
    CALL_S(tn_copy_to_f64(gg, g->r.norm[1], B * IN));
    CALL_S(tn_backward(tot, NULL, false));
    CALL_T(gw, tn_grad(w));
    CALL_S(tn_copy_to_f64(gw, g->r.norm_w, IN));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

/* Convolutions: conv_transpose2d (stride 2, output_padding 1) into conv2d, with biases,
 * backward into the shared weight; a second-order gradient through both. */
static bool step_conv(program *g) {
    bool scoped = false;
    begin_step();
    tn_tensor *x = NULL, *w = NULL, *b = NULL, *y = NULL, *t = NULL, *tot = NULL, *gw = NULL,
              *gg = NULL;
    int64_t two[2] = {2, 2}, one[2] = {1, 1}, zero[2] = {0, 0};
    watch(&w);
    SCOPE();
    CALL_T(x, tn_arange(0, 2 * 3 * 3, 1, TN_F32));
    CALL_T(x, tn_reshape(x, 4, (int64_t[]){1, 2, 3, 3}));
    CALL_T(x, tn_sin(x));
    CALL_T(w, tn_full(4, (int64_t[]){2, 3, 3, 3}, TN_F32, 0.25));
    CALL_S(tn_requires_grad_(w, true));
    CALL_T(b, tn_full(1, (int64_t[]){3}, TN_F32, 0.5));
    CALL_T(y, tn_conv_transpose2d(x, w, b, two, one, one, 1, one)); /* (1, 3, 6, 6) */
    CALL_T(t, tn_tanh(y));
    CALL_T(b, tn_full(1, (int64_t[]){2}, TN_F32, -0.25));
    CALL_T(t, tn_conv2d(t, w, b, one, zero, one, 1)); /* w as (OC 2, C 3): (1, 2, 4, 4) */
    CALL_T(tot, tn_sum(t));
    CALL_S(tn_autograd_grad(1, &tot, NULL, 1, &w, &gw, true, true));
    CALL_T(t, tn_mul(gw, gw));
    CALL_T(t, tn_sum(t));
    CALL_S(tn_autograd_grad(1, &t, NULL, 1, &w, &gg, false, false));
    CALL_S(tn_copy_to_f64(gw, g->r.conv[0], CONV_W));
    CALL_S(tn_copy_to_f64(gg, g->r.conv[1], CONV_W));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

/* The functions a PyTorch user reaches for: split, chunk, unbind, min with indices,
 * nll_loss, cross_entropy with smoothing, vector_norm, the initialisers,
 * clip_grad_value_, multinomial. */
static bool step_extras(program *g) {
    bool scoped = false;
    begin_step();
    tn_tensor *x = NULL, *w = NULL, *pc[4] = {0}, *ub[B] = {0}, *t = NULL, *u = NULL, *tot = NULL,
              *idx = NULL, *tg = NULL, *gx = NULL, *gw = NULL;
    int np = 0;
    watch(&x);
    watch(&w);
    SCOPE();
    tn_manual_seed(9);
    CALL_T(x, input_batch()); /* (B, IN) */
    CALL_S(tn_requires_grad_(x, true));
    CALL_T(w, tn_empty(2, (int64_t[]){B, IN}, TN_F32));
    CALL_S(tn_init_kaiming_uniform_(w, 0, "fan_in", "relu"));
    CALL_S(tn_init_xavier_normal_(w, 1.0));
    CALL_S(tn_requires_grad_(w, true));
    CALL_T(t, tn_mul(x, w));
    CALL_S(tn_chunk(t, 2, 1, pc, &np));
    CALL_S(tn_split(t, 1, 0, ub, B, &np));
    CALL_S(tn_unbind(pc[0], 0, ub, B, &np));
    CALL_T(u, tn_min_dim_with_indices(pc[1], 1, false, &idx)); /* (B) */
    CALL_T(tot, tn_sum(u));
    CALL_T(u, tn_vector_norm(ub[0], 2, 0, NULL, false));
    CALL_T(tot, tn_add(tot, u));
    CALL_T(tg, tn_argmax_dim(x, 1, false));
    CALL_T(u, tn_cross_entropy_ex(t, tg, NULL, TN_REDUCTION_MEAN, -100, 0.1));
    CALL_T(tot, tn_add(tot, u));
    CALL_T(u, tn_log_softmax(x, 1));
    CALL_T(u, tn_nll_loss(u, tg, NULL, TN_REDUCTION_SUM, 0));
    CALL_T(tot, tn_add(tot, u));
    CALL_S(tn_backward(tot, NULL, false));
    CALL_S(tn_clip_grad_value_(2, (tn_tensor *[]){x, w}, 0.05));
    CALL_T(gx, tn_grad(x));
    CALL_T(gw, tn_grad(w));
    CALL_S(tn_copy_to_f64(gx, g->r.extra, B * IN));
    CALL_S(tn_copy_to_f64(gw, g->r.extra_w, B * IN));
    CALL_T(u, tn_softmax(x, 1));
    CALL_T(u, tn_multinomial(u, 2, false));
    CALL_S(tn_copy_to_f64(idx, g->r.extra_s, B));
    CALL_S(tn_copy_to_f64(u, g->r.extra_s + B, 2 * B));
    return step_end(scoped, true);
failed:
    return step_end(scoped, false);
}

static void run_program(program *g) {
    memset(&g->r, 0, sizeof g->r);
#define STEP(call)                                                                                 \
    for (int try_ = 0; !(call); try_++)                                                            \
        if (try_ == 1) {                                                                           \
            issue("N=%lld: %s failed twice", (long long)W.n, #call);                               \
            goto teardown;                                                                         \
        }
    STEP(step_init(g));
    for (int it = 0; it < STEPS; it++)
        STEP(step_train(g, it));
    STEP(step_views(g));
    STEP(step_follow(g));
    STEP(step_scopes(g));
    STEP(step_anomaly(g));
    STEP(step_misc(g));
    STEP(step_handed(g));
    STEP(step_norm(g));
    STEP(step_conv(g));
    STEP(step_extras(g));
    copy_params(g);
#undef STEP
teardown:
    hold();
    tn_sgd_free(g->sgd);
    tn_adam_free(g->adam);
    g->sgd = NULL;
    g->adam = NULL;
    for (int k = 0; k < 4; k++) {
        tn_release(g->p[k]);
        g->p[k] = NULL;
    }
}

static void oom_walk(void **state) {
    program g = {.sink = tmpfile()};
    assert_non_null(g.sink);
    tn_memory_stats_t base; /* what was alive before: every run must come back to it */
    tn_memory_stats(&base);
    /* The reference run: allocations counted, none failed. A first run warms
     * what later runs find ready (backward sizes its tables from the last). */
    W = (walk){.n = INT64_MAX};
    run_program(&g);
    W = (walk){.n = INT64_MAX};
    resume();
    run_program(&g);
    tn_test_fail_alloc_at(0);
    for (int i = 0; i < W.issues && i < MAX_ISSUES; i++)
        fprintf(stderr, "oom walk: reference run: %s\n", W.issue[i]);
    assert_int_equal(W.issues, 0);
    results ref = g.r;
    int64_t total = W.used;
    assert_true(total > 0);
    int clean = 0, absorbed = 0, unclean = 0;
    int64_t n = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;; n++) {
        W = (walk){.n = n};
        resume();
        run_program(&g);
        tn_test_fail_alloc_at(0);
        if (!W.fired) break; /* the run made fewer than n allocations: done */
        if (memcmp(&g.r, &ref, sizeof ref) != 0)
            issue("N=%lld: the run's results differ from the reference run's", (long long)n);
        tn_memory_stats_t ms;
        tn_memory_stats(&ms);
        if (ms.tensors_live != base.tensors_live || ms.storages_live != base.storages_live ||
            ms.bytes_live != base.bytes_live)
            issue("N=%lld: %lld tensors, %lld storages (%zu bytes) alive after the run",
                  (long long)n, (long long)(ms.tensors_live - base.tensors_live),
                  (long long)(ms.storages_live - base.storages_live),
                  ms.bytes_live - base.bytes_live);
        if (getenv("TENET_OOM_WALK_VERBOSE"))
            printf("N=%lld: %s\n", (long long)n, W.where);
        if (W.issues) {
            for (int i = 0; i < W.issues && i < MAX_ISSUES && unclean < MAX_ISSUES; i++)
                fprintf(stderr, "oom walk: %s\n", W.issue[i]);
            unclean++;
        } else if (W.clean) {
            clean++;
        } else {
            absorbed++;
        }
    }
    if (unclean) fail_msg("oom walk: %d of %lld runs unclean", unclean, (long long)(n - 1));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fclose(g.sink);
    if (n - 1 != total)
        fail_msg("oom walk: the reference run made %lld allocations, the walk failed %lld",
                 (long long)total, (long long)(n - 1));
    printf("oom walk: %lld allocations failed one by one (N = 1..%lld): %d with a clean "
           "TN_ERR_OUT_OF_MEMORY, %d absorbed by design with identical results; every run "
           "changed nothing, leaked nothing and went on (%.1f s)\n",
           (long long)(n - 1), (long long)(n - 1), clean, absorbed,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

/* ---- the failures the walk found, one by one ------------------------------------------ */

/* A scope whose frame stack cannot grow is not opened, and says so: the
 * enclosing scope (or the caller) still owns what is returned. */
static void scope_begin_out_of_memory(void **state) {
    tn_test_fail_alloc_at(1); /* the frame stack's first allocation */
    assert_int_equal(tn_scope_begin(), TN_ERR_OUT_OF_MEMORY);
    tn_test_fail_alloc_at(0);
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "out of memory opening a scope");
    tn_tensor *t = tn_ones(1, (int64_t[]){2}, TN_F32);
    assert_ptr_equal(tn_keep(t), t); /* no scope open: t is ours */
    tn_release(t);
    int depth = 0;
    for (; depth < 16; depth++) /* the frame stack's first size */
        assert_int_equal(tn_scope_begin(), TN_OK);
    tn_test_fail_alloc_at(1);
    assert_int_equal(tn_scope_begin(), TN_ERR_OUT_OF_MEMORY);
    tn_test_fail_alloc_at(0);
    t = tn_ones(1, (int64_t[]){2}, TN_F32); /* the 16th scope's */
    assert_non_null(t);
    for (; depth > 0; depth--)
        tn_scope_end(); /* the teardown checks that t went with the 16th */
}

/* Out of memory in an inner call of a nested expression stays out of memory
 * (not "argument is NULL"); a NULL passed after a tensor came back is still
 * reported as a NULL argument. */
static void nested_calls_keep_out_of_memory(void **state) {
    tn_tensor *a = tn_ones(1, (int64_t[]){3}, TN_F32);
    tn_test_fail_alloc_at(1); /* tn_mul's */
    tn_tensor *s = tn_sum(tn_mul(a, a));
    tn_test_fail_alloc_at(0);
    assert_null(s);
    tt_assert_error(TN_ERR_OUT_OF_MEMORY, "out of memory");
    tn_tensor *m = tn_mul(a, a);
    assert_non_null(m);
    assert_null(tn_sum(NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "argument 'self' is NULL");
    tn_release(m);
    tn_release(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {TT_TEST(scope_begin_out_of_memory),
                                       TT_TEST(nested_calls_keep_out_of_memory),
                                       TT_TEST(oom_walk)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
