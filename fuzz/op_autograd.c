/* fuzz/op_autograd.c — in-place ops, aliases, backward and gradients, grad
 * and anomaly modes, scopes, optimisers, runtime switches, slot moves. */
#include <limits.h>
#include <math.h>

#include "program.h"
#include <tenet/testing.h>

/* add_, sub_, mul_, div_, copy_: variant, self, src */
void tf_op_inplace(tf_state *s) {
    static const struct {
        const char *name;
        tn_status (*fn)(tn_tensor *, const tn_tensor *);
    } ops[5] = {{"tn_add_", tn_add_},
                {"tn_sub_", tn_sub_},
                {"tn_mul_", tn_mul_},
                {"tn_div_", tn_div_},
                {"tn_copy_", tn_copy_}};
    uint8_t v = tf_byte(s) % 5;
    tn_tensor *self = tf_in(s), *src = tf_in(s);
    tf_snap sn;
    tf_snap_take(&sn, self);
    tf_snap_check(&sn, ops[v].fn(self, src), ops[v].name);
}

/* add_scalar_, mul_scalar_, fill_ (x), clamp_ (x, y), zero_, relu_,
 * sigmoid_, exp_, neg_: variant, self, x, y */
void tf_op_inplace_scalar(tf_state *s) {
    static const struct {
        const char *name;
        tn_status (*fn)(tn_tensor *);
    } plain[5] = {{"tn_zero_", tn_zero_},
                  {"tn_relu_", tn_relu_},
                  {"tn_sigmoid_", tn_sigmoid_},
                  {"tn_exp_", tn_exp_},
                  {"tn_neg_", tn_neg_}};
    static const struct {
        const char *name;
        tn_status (*fn)(tn_tensor *, double);
    } with_scalar[3] = {{"tn_add_scalar_", tn_add_scalar_},
                        {"tn_mul_scalar_", tn_mul_scalar_},
                        {"tn_fill_", tn_fill_}};
    uint8_t v = tf_byte(s) % 9;
    tn_tensor *self = tf_in(s);
    double x = tf_scalar(s), y = tf_scalar(s);
    tf_snap sn;
    tf_snap_take(&sn, self);
    if (v < 3)
        tf_snap_check(&sn, with_scalar[v].fn(self, x), with_scalar[v].name);
    else if (v == 3)
        tf_snap_check(&sn, tn_clamp_(self, x, y), "tn_clamp_");
    else
        tf_snap_check(&sn, plain[v - 4].fn(self), plain[v - 4].name);
}

/* detach, detach_ (in place, borrowed result), data, clone: variant, src, dst */
void tf_op_alias(tf_state *s) {
    uint8_t v = tf_byte(s) % 4;
    tn_tensor *a = tf_in(s);
    if (v == 1) {
        tn_tensor *r = tn_detach_(a);
        if (!r) tf_check_failed("tn_detach_");
        if (r && r != a) tf_fail("tn_detach_ returned another tensor");
        return;
    }
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    if (v == 3 && !tf_affordable(n, n)) return;
    tf_put(s, dst, v == 0 ? tn_detach(a) : v == 2 ? tn_data(a) : tn_clone(a));
}

/* requires_grad_, retain_grad, set_grad, zero_grad: variant, t, flag, g */
void tf_op_requires_grad(tf_state *s) {
    uint8_t v = tf_byte(s) % 4;
    tn_tensor *t = tf_in(s);
    bool flag = tf_bool(s);
    tn_tensor *g = tf_in(s);
    switch (v) {
    case 0:
        tf_check_status(tn_requires_grad_(t, flag), "tn_requires_grad_");
        break;
    case 1:
        tf_check_status(tn_retain_grad(t), "tn_retain_grad");
        break;
    case 2:
        tf_check_status(tn_set_grad(t, flag ? NULL : g), "tn_set_grad");
        break;
    default:
        tf_check_status(tn_zero_grad(t), "tn_zero_grad");
        break;
    }
}

/* Whether a differentiation may build a graph (TF_HIGHER_ORDER). */
static bool may_create_graph(tf_state *s, bool asked) {
    return asked && s->higher_order++ < TF_HIGHER_ORDER;
}

/* tn_backward / tn_backward_ex: t, flags (grad given, retain, create_graph,
 * ex), grad */
void tf_op_backward(tf_state *s) {
    tn_tensor *t = tf_in(s);
    uint8_t flags = tf_byte(s);
    tn_tensor *grad = tf_in(s);
    const tn_tensor *g = flags & 1 ? grad : NULL;
    bool retain = flags & 2;
    /* a seed gradient (an expanded view, cheap to make) is summed back in full */
    if (!tf_affordable(1, tf_numel(g))) return;
    bool create = may_create_graph(s, (flags & 12) == 12);
    if (flags & 8)
        tf_check_status(tn_backward_ex(t, g, retain, create), "tn_backward_ex");
    else
        tf_check_status(tn_backward(t, g, retain), "tn_backward");
}

/* tn_autograd_grad: n_out, outputs, flags (grad_outputs given, retain,
 * create_graph), grad_outputs, n_in, inputs, then one dst per input */
void tf_op_autograd_grad(tf_state *s) {
    tn_tensor *outs[TF_LIST] = {0}, *gouts[TF_LIST] = {0}, *ins[TF_LIST] = {0};
    tn_tensor *grads[TF_LIST] = {0};
    int n_out = tf_small_count(s, 2);
    for (int i = 0; i < n_out; i++)
        outs[i] = tf_in(s);
    uint8_t flags = tf_byte(s);
    uint64_t seeds = 0; /* as tf_op_backward's seed gradient */
    for (int i = 0; i < n_out; i++) {
        gouts[i] = tf_in(s);
        if (flags & 1 && tf_numel(gouts[i]) > seeds) seeds = tf_numel(gouts[i]);
    }
    int n_in = tf_small_count(s, 3);
    for (int i = 0; i < n_in; i++)
        ins[i] = tf_in(s);
    uint8_t dsts[TF_LIST];
    for (int i = 0; i < n_in; i++)
        dsts[i] = tf_dst(s);
    if (!tf_affordable(1, seeds)) return;
    tn_status st = tn_autograd_grad(n_out, outs, flags & 1 ? gouts : NULL, n_in, ins, grads,
                                    flags & 2, may_create_graph(s, flags & 4));
    tf_check_status(st, "tn_autograd_grad");
    for (int i = 0; i < TF_LIST; i++) {
        if (st < 0 && grads[i]) tf_fail("failed tn_autograd_grad returned a gradient");
        if (i >= n_in && grads[i]) tf_fail("tn_autograd_grad wrote past its n_in gradients");
        if (grads[i]) tf_put(s, dsts[i], grads[i]); /* NULL: an unreachable input */
    }
}

/* tn_grad: t, dst. NULL without an error is "no gradient". */
void tf_op_grad(tf_state *s) {
    tn_tensor *t = tf_in(s);
    uint8_t dst = tf_dst(s);
    tn_tensor *g = tn_grad(t);
    if (g || tn_last_status() != TN_OK) tf_put(s, dst, g);
}

void tf_op_grad_mode(tf_state *s) { tn_set_grad_enabled(tf_bool(s)); }

static void anomaly_report(tf_state *s) {
    const tn_anomaly_report *r = tn_last_anomaly();
    if (!r) return;
    int nf, nd, nr;
    tn_dtype dt;
    const int64_t *shape;
    uint64_t sv, cv;
    (void)tn_anomaly_report_kind(r);
    (void)tn_anomaly_report_node(r);
    (void)tn_anomaly_report_forward_trace(r, &nf);
    (void)tn_anomaly_report_saved(r, &dt, &nd, &shape, &nr, &sv, &cv);
    for (int i = -1; i <= tn_anomaly_report_n_writes(r); i++)
        (void)tn_anomaly_report_write(r, i);
    (void)tn_anomaly_report_dropped(r);
    (void)tn_anomaly_report_output_index(r);
    tf_check_status(tn_anomaly_report_print(r, s->sink), "tn_anomaly_report_print");
}

/* variant, then: set_detect_anomaly (flags), local (mode), untracked error
 * (flag), report, clear, graph_dot (t) */
void tf_op_anomaly(tf_state *s) {
    static const int modes[8] = {-1, 0, 1, 2, 3, -2, INT_MIN, INT_MAX};
    uint8_t v = tf_byte(s) % 6, b = tf_byte(s);
    switch (v) {
    case 0:
        tn_set_detect_anomaly(b & 1, b & 2);
        break;
    case 1:
        tn_set_detect_anomaly_local(modes[b % 8]);
        break;
    case 2:
        tn_set_anomaly_untracked_error(b & 1);
        break;
    case 3:
        anomaly_report(s);
        break;
    case 4:
        tn_anomaly_clear();
        break;
    default:
        tf_check_status(tn_graph_dot(s->slot[b % TF_SLOTS], s->sink), "tn_graph_dot");
        break;
    }
}

/* tn_scope_begin, tn_scope_end, tn_keep: variant, slot */
void tf_op_scope(tf_state *s) {
    uint8_t v = tf_byte(s) % 3;
    tn_tensor *t = tf_in(s);
    if (v == 0) {
        tn_status st = tn_scope_begin(); /* out of memory: no scope opened */
        tf_check_status(st, "tn_scope_begin");
        if (st == TN_OK) s->depth++;
    } else if (v == 1) {
        tn_scope_end(); /* also with none open: a no-op */
        if (s->depth) s->depth--;
    } else {
        tn_tensor *r = tn_keep(t);
        if (!r) tf_check_failed("tn_keep");
        if (r && r != t) tf_fail("tn_keep returned another tensor");
        if (r && s->depth == 1) tn_release(r); /* the scope's reference is now ours */
    }
}

/* SGD or Adam over up to 3 slots: variant, count, slots, lr, momentum or
 * betas, weight decay; then a step, zero_grad, another step */
void tf_op_optim(tf_state *s) {
    bool adam = tf_bool(s);
    int n = tf_small_count(s, 3);
    tn_tensor *ps[TF_LIST] = {0};
    for (int i = 0; i < n; i++)
        ps[i] = tf_in(s);
    double lr = tf_scalar(s), m = tf_scalar(s), b2 = tf_scalar(s), wd = tf_scalar(s);
    tf_snap sn[3];
    for (int i = 0; i < 3; i++)
        tf_snap_take(&sn[i], i < n ? ps[i] : NULL);
    if (adam) {
        tn_adam *o = tn_adam_new(n, ps, lr, m, b2, 1e-8, wd);
        if (!o) {
            tf_check_failed("tn_adam_new");
            return;
        }
        tn_status st = tn_adam_step(o);
        tf_snaps_check(sn, 3, st, "tn_adam_step");
        tf_check_status(tn_adam_zero_grad(o), "tn_adam_zero_grad");
        tf_check_status(tn_adam_step(o), "tn_adam_step");
        tn_adam_free(o);
    } else {
        tn_sgd *o = tn_sgd_new(n, ps, lr, m, wd);
        if (!o) {
            tf_check_failed("tn_sgd_new");
            return;
        }
        tn_status st = tn_sgd_step(o);
        tf_snaps_check(sn, 3, st, "tn_sgd_step");
        tn_sgd_set_lr(o, b2);
        tf_check_status(tn_sgd_zero_grad(o), "tn_sgd_zero_grad");
        tf_check_status(tn_sgd_step(o), "tn_sgd_step");
        tn_sgd_free(o);
    }
}

/* The total norm of the gradients of ps for p = 2 or inf, composed from public ops in float64
 * (the way clip_grad_norm_ takes for other norms): the reference for its measured path. false:
 * a gradient could not be read (out of memory). */
static bool clip_reference(const tf_state *s, int n, tn_tensor *const *ps, double p,
                           double *total) {
    double acc = 0;
    for (int i = 0; i < n; i++) {
        tn_tensor *g = ps[i] ? tn_grad(ps[i]) : NULL;
        if (!g || tn_numel(g) == 0) {
            tf_drop(s, g);
            continue;
        }
        tn_tensor *g64 = tn_to(g, TN_F64, TN_DEVICE_KEEP), *a = NULL, *r = NULL;
        if (g64) a = isinf(p) ? tn_abs(g64) : tn_mul(g64, g64);
        if (a) r = isinf(p) ? tn_max(a) : tn_sum(a);
        double part = 0;
        bool ok = r && tn_item(r, &part) == TN_OK;
        tf_drop(s, r), tf_drop(s, a), tf_drop(s, g64), tf_drop(s, g);
        if (!ok) return false;
        acc = isinf(p) ? (part > acc || isnan(part) ? part : acc) : acc + part;
    }
    *total = isinf(p) ? acc : sqrt(acc);
    return true;
}

/* clip_grad_norm_ over up to 3 slots: count, slots, max_norm, norm type. The 2- and inf-norms
 * against clip_reference (their measured path reads gradients in place, any layout); on
 * failure every gradient as it was. */
void tf_op_clip(tf_state *s) {
    static const double types[] = {2.0, INFINITY, 1.0, 3.0};
    int n = tf_small_count(s, 3);
    tn_tensor *ps[TF_LIST] = {0}, *g[3] = {0};
    for (int i = 0; i < n; i++)
        ps[i] = tf_in(s);
    const double max_norm = tf_scalar(s), p = types[tf_byte(s) % 4];
    tf_snap sn[3];
    for (int i = 0; i < 3; i++) {
        g[i] = i < n && ps[i] ? tn_grad(ps[i]) : NULL;
        tf_snap_take(&sn[i], g[i]);
    }
    double want = 0, got = -1;
    const bool ref = (p == 2 || isinf(p)) && clip_reference(s, n, ps, p, &want);
    tn_clear_error();
    tn_status st = tn_clip_grad_norm_(n, ps, max_norm, p, &got);
    tf_snaps_check(sn, 3, st, "tn_clip_grad_norm_");
    if (st == TN_OK && ref && !(got == want || (isnan(got) && isnan(want)) ||
                                fabs(got - want) <= 1e-9 * fabs(want)))
        tf_fail("tn_clip_grad_norm_ (p = %g) gave the total %.17g, the composed one is %.17g", p,
                got, want);
    for (int i = 0; i < 3; i++)
        tf_drop(s, g[i]);
}

/* variant, value */
void tf_op_runtime(tf_state *s) {
    uint8_t v = tf_byte(s) % 7, b = tf_byte(s);
    switch (v) {
    case 0:
        tn_set_num_threads(b % 4 == 3 ? -1 : b % 3);
        break;
    case 1:
        tn_set_blas(b & 1);
        break;
    case 2:
        tn_set_parallel_backward(b & 1);
        break;
    case 3:
        tn_manual_seed(b);
        break;
    case 4:
        tn_set_detect_races(b & 1);
        break;
    case 5: {
        tn_device d = {(tn_device_type)(b % 4 - 1), b / 4 - 8};
        tf_check_status(tn_synchronize(d), "tn_synchronize");
        break;
    }
    default:
        (void)tn_cuda_is_available();
        (void)tn_cuda_device_count();
        (void)tn_get_num_threads();
        (void)tn_blas_enabled();
        break;
    }
}

/* Out of memory: the n-th allocation from now fails (n = 1 + byte % 64),
 * once; the calls that meet it must fail cleanly like any other. */
void tf_op_fail_alloc(tf_state *s) { tn_test_fail_alloc_at(1 + tf_byte(s) % 64); }

/* release, duplicate (a second reference), swap: variant, slot, slot */
void tf_op_slots(tf_state *s) {
    uint8_t v = tf_byte(s) % 3;
    int i = tf_slot(s), j = tf_slot(s);
    tn_tensor *t = s->slot[i];
    if (v == 0) {
        s->slot[i] = NULL;
        tn_release(t);
    } else if (v == 1) {
        tn_tensor *old = s->slot[j];
        s->slot[j] = tn_retain(t);
        tn_release(old);
    } else {
        s->slot[i] = s->slot[j];
        s->slot[j] = t;
    }
}
