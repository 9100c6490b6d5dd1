/* torch.optim.SGD (momentum, weight decay; dampening 0, no nesterov), and
 * the parameter-list code both optimisers share (optim_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../ops/pointwise_driver.h"
#include "optim_internal.h"

/* ---- shared: parameter list --------------------------------------------------- */

typedef struct ptr_index {
    uintptr_t p;
    int i;
} ptr_index;

static int cmp_ptr_index(const void *a, const void *b) {
    const ptr_index *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? -1 : 1;
    return x->i - y->i;
}

/* state_of[i] = first index holding the same tensor; true when any repeats.
 * Sorting keeps construction O(n log n) for models with many parameters. */
static bool find_duplicates(tn_optim_params *op, ptr_index *tmp) {
    bool dup = false;
    for (int i = 0; i < op->n; i++)
        tmp[i] = (ptr_index){(uintptr_t)op->params[i], i};
    qsort(tmp, (size_t)op->n, sizeof *tmp, cmp_ptr_index);
    for (int k = 0; k < op->n; k++) {
        bool same = k > 0 && tmp[k].p == tmp[k - 1].p;
        op->state_of[tmp[k].i] = same ? op->state_of[tmp[k - 1].i] : tmp[k].i;
        dup |= same;
    }
    return dup;
}

static tn_status check_param(const char *who, int i, const tn_tensor *p) {
    if (!p) return tn__null_arg(true, "%s: params[%d] is NULL", who, i);
    /* torch also accepts a non-leaf that retains its grad */
    bool leaf = !p->ag || !p->ag->grad_fn;
    if (!leaf && !p->ag->retains_grad)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "can't optimize a non-leaf Tensor");
    return TN_OK;
}

tn_status tn__optim_params_init(tn_optim_params *op, const char *who, int n,
                                tn_tensor *const *params) {
    memset(op, 0, sizeof *op);
    if (n < 1) return tn__error(TN_ERR_INVALID_ARGUMENT, "optimizer got an empty parameter list");
    if (!params) return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'params' is NULL", who);
    for (int i = 0; i < n; i++) {
        tn_status st = check_param(who, i, params[i]);
        if (st < 0) return st;
    }
    size_t un = (size_t)n;
    op->params = tn__calloc_small(un * sizeof *op->params);
    op->state_of = tn__calloc_small(un * sizeof *op->state_of);
    op->grads = tn__calloc_small(un * sizeof *op->grads);
    op->first = tn__calloc_small(un * sizeof *op->first);
    ptr_index *tmp = tn__calloc_small(un * sizeof *tmp);
    if (!op->params || !op->state_of || !op->grads || !op->first || !tmp) {
        tn__free_small(tmp);
        tn__optim_params_free(op);
        return TN_ERR_OUT_OF_MEMORY;
    }
    op->n = n;
    for (int i = 0; i < n; i++)
        op->params[i] = tn__retain(params[i]);
    if (find_duplicates(op, tmp))
        tn__warn("optimizer contains a parameter group with duplicate parameters; in future, "
                 "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                 "more information");
    tn__free_small(tmp);
    return TN_OK;
}

void tn__optim_params_free(tn_optim_params *op) {
    if (op->params)
        for (int i = 0; i < op->n; i++)
            tn_release(op->params[i]);
    tn__free_small(op->params);
    tn__free_small(op->state_of);
    tn__free_small(op->grads);
    tn__free_small(op->first);
    memset(op, 0, sizeof *op);
}

/* A new reference to p's .grad, or NULL. The acquire load pairs with the
 * release CAS that installed the gradient (accumulate.c), as tn_grad. */
static tn_tensor *grad_of(const tn_tensor *p) {
    if (!p->ag || !p->ag->cell) return NULL;
    tn_tensor *g = atomic_load_explicit(&p->ag->cell->grad, memory_order_acquire);
    return g ? tn__retain(g) : NULL;
}

static tn_status collect_one(int i, tn_tensor *p, tn_tensor **out) {
    *out = NULL;
    tn_tensor *g = grad_of(p);
    if (!g) return TN_OK;
    if (!tn__is_float(p->dtype)) {
        tn_release(g);
        return tn__error(TN_ERR_DTYPE,
                         "optimizer step: parameter %d has dtype %s; only floating "
                         "point parameters can be optimized",
                         i, tn_dtype_name(p->dtype));
    }
    if (!tn__same_device(tn__dev(p), tn__dev(g))) {
        tn_release(g);
        return tn__error(TN_ERR_DEVICE,
                         "optimizer step: the grad of parameter %d is on another device", i);
    }
    if (!tn__same_shape(p, g)) {
        tn_release(g);
        return tn__error(TN_ERR_SHAPE,
                         "optimizer step: the grad of parameter %d does not have "
                         "the parameter's shape",
                         i);
    }
    tn_tensor *c = tn__cast(g, p->dtype);
    tn_release(g);
    if (!c) return tn_last_status();
    /* Grad mode is off here, so this checks only what torch's p.add_ would
     * still refuse: a parameter with overlapping (expanded) elements. */
    tn_status st = tn__inplace_prepare("add_", p, NULL, p->dtype);
    if (st < 0) {
        tn_release(c);
        return st;
    }
    *out = c;
    return TN_OK;
}

void tn__optim_release_grads(tn_optim_params *op) {
    for (int i = 0; i < op->n; i++) {
        tn_release(op->grads[i]);
        op->grads[i] = NULL;
    }
}

tn_status tn__optim_collect(tn_optim_params *op) {
    for (int i = 0; i < op->n; i++) {
        tn_status st = collect_one(i, op->params[i], &op->grads[i]);
        if (st < 0) {
            tn__optim_release_grads(op);
            return st;
        }
    }
    return TN_OK;
}

tn_status tn__optim_step(tn_optim_params *ps, tn_optim_prepare_fn prepare,
                         tn_optim_update_fn update, void *opt) {
    bool prev = tn_set_grad_enabled(false);
    tn_status st = tn__optim_collect(ps);
    if (st >= 0) {
        st = prepare(opt);
        if (st < 0) tn__optim_release_grads(ps);
    }
    if (st >= 0) {
        st = TN_OK;
        for (int i = 0; i < ps->n && st == TN_OK; i++) /* only a device can fail here */
            if (ps->grads[i]) st = update(opt, i);
        tn__optim_release_grads(ps);
    }
    tn_set_grad_enabled(prev);
    return st;
}

tn_status tn__optim_apply(const char *name, tn_pw_code code, int nops, tn_tensor *const *ops,
                          const void *ctx) {
    tn_device dev;
    tn_status st = tn__result_device(nops, (const tn_tensor *const *)ops, &dev);
    if (st == TN_OK && !tn__same_device(dev, tn__dev(ops[0]))) st = TN_ERR_DEVICE;
    if (st == TN_OK) st = tn__dev_pointwise(code, ops[0]->dtype, nops, ops, ctx, false);
    if (st < 0) return st;
    tn__version_bump(ops[0], name);
    return TN_OK;
}

tn_status tn__optim_zero_grad(const tn_optim_params *op) {
    for (int i = 0; i < op->n; i++) {
        tn_status st = tn_set_grad(op->params[i], NULL);
        if (st < 0) return st;
    }
    return TN_OK;
}

tn_tensor *tn__optim_state_like(const tn_tensor *p) {
    return tn__zeros_like(p);
}

/* Python's repr: the shortest digits that read back as v; exponent form
 * when the decimal point falls outside (-4, 16], else fixed with ".0". */
void tn__optim_fmt(char *buf, size_t size, double v) {
    if (isnan(v) || isinf(v)) {
        snprintf(buf, size, "%s", isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf"));
        return;
    }
    char e[40], digits[24], out[64];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, v);
    const char *s = e + (e[0] == '-');
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int exp10 = atoi(s + 1), decpt = exp10 + 1, k = 0;
    if (signbit(v)) out[k++] = '-';
    if (decpt <= -4 || decpt > 16) { /* d[.ddd]e-05 */
        out[k++] = digits[0];
        if (nd > 1) out[k++] = '.';
        for (int i = 1; i < nd; i++)
            out[k++] = digits[i];
        snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else { /* digits around the point, zero-padded on either side */
        int lo = decpt <= 0 ? decpt - 1 : 0, hi = decpt >= nd ? decpt + 1 : nd;
        for (int i = lo; i < hi; i++) {
            if (i == decpt) out[k++] = '.';
            out[k++] = (i >= 0 && i < nd) ? digits[i] : '0';
        }
        out[k] = '\0';
    }
    snprintf(buf, size, "%s", out);
}

/* ---- SGD ------------------------------------------------------------------------ */

struct tn_sgd {
    tn_optim_params ps;
    double lr, momentum, weight_decay;
    tn_tensor **buf; /* per state index: momentum buffer, NULL until first used */
};

tn_sgd *tn_sgd_new(int n, tn_tensor *const *params, double lr, double momentum,
                   double weight_decay) {
    char v[40];
    /* torch's checks, in torch's order; NaN passes them, as in torch */
    if (lr < 0.0) {
        tn__optim_fmt(v, sizeof v, lr);
        tn__error(TN_ERR_INVALID_ARGUMENT, "Invalid learning rate: %s", v);
        return NULL;
    }
    if (momentum < 0.0) {
        tn__optim_fmt(v, sizeof v, momentum);
        tn__error(TN_ERR_INVALID_ARGUMENT, "Invalid momentum value: %s", v);
        return NULL;
    }
    if (weight_decay < 0.0) {
        tn__optim_fmt(v, sizeof v, weight_decay);
        tn__error(TN_ERR_INVALID_ARGUMENT, "Invalid weight_decay value: %s", v);
        return NULL;
    }
    tn_sgd *o = tn__calloc_small(sizeof *o);
    if (!o) return NULL;
    if (tn__optim_params_init(&o->ps, "tn_sgd_new", n, params) < 0) {
        tn__free_small(o);
        return NULL;
    }
    o->buf = tn__calloc_small((size_t)n * sizeof *o->buf);
    if (!o->buf) {
        tn_sgd_free(o);
        return NULL;
    }
    o->lr = lr;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    return o;
}

/* Phase 1 tail: snapshot which buffers start this step (before allocating
 * any, so a repeated parameter starts both of its passes fresh, as torch's
 * per-step buffer list does), then allocate them. */
static tn_status sgd_prepare_buffers(tn_sgd *o) {
    tn_optim_params *ps = &o->ps;
    for (int i = 0; i < ps->n; i++)
        ps->first[i] = ps->grads[i] && !o->buf[ps->state_of[i]];
    if (o->momentum == 0) return TN_OK;
    for (int i = 0; i < ps->n; i++) {
        int s = ps->state_of[i];
        if (!ps->grads[i] || o->buf[s]) continue;
        o->buf[s] = tn__optim_state_like(ps->params[i]);
        if (!o->buf[s]) return tn_last_status();
    }
    return TN_OK;
}

static tn_status sgd_prepare(void *opt) { return sgd_prepare_buffers(opt); }

static tn_status sgd_update(void *opt, int i) {
    tn_sgd *o = opt;
    tn_optim_params *ps = &o->ps;
    tn_tensor *p = ps->params[i];
    tn_sgd_ctx c = {o->lr, o->momentum, o->weight_decay, ps->first[i]};
    tn_tensor *ops[3] = {p, ps->grads[i], o->buf[ps->state_of[i]]};
    return tn__optim_apply("SGD.step", TN_PW_SGD, o->momentum != 0 ? 3 : 2, ops, &c);
}

tn_status tn_sgd_step(tn_sgd *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_step(&o->ps, sgd_prepare, sgd_update, o);
}

tn_status tn_sgd_zero_grad(tn_sgd *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_zero_grad(&o->ps);
}

void tn_sgd_set_lr(tn_sgd *o, double lr) {
    if (!o) {
        tn__null_arg(true, "tn_sgd_set_lr: argument 'opt' is NULL");
        return;
    }
    o->lr = lr; /* unchecked, as assigning torch's param_groups[0]['lr'] */
}

void tn_sgd_free(tn_sgd *o) {
    if (!o) return;
    if (o->buf)
        for (int i = 0; i < o->ps.n; i++)
            tn_release(o->buf[i]);
    tn__free_small(o->buf);
    tn__optim_params_free(&o->ps);
    tn__free_small(o);
}
