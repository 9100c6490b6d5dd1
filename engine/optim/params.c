/* The parameter list all optimisers share (optim_internal.h): parameter
 * groups with their own lr and weight decay, duplicate detection, the
 * two-phase step driver, and torch's number formatting for error texts. */
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

/* state_of[i] = first index holding the same tensor. Sorting keeps
 * construction O(n log n) for models with many parameters. A tensor in two
 * groups is torch's error; twice in one group, its warning. */
static tn_status find_duplicates(tn_optim_params *op, ptr_index *tmp) {
    bool dup = false;
    for (int i = 0; i < op->n; i++)
        tmp[i] = (ptr_index){(uintptr_t)op->params[i], i};
    qsort(tmp, (size_t)op->n, sizeof *tmp, cmp_ptr_index);
    for (int k = 0; k < op->n; k++) {
        bool same = k > 0 && tmp[k].p == tmp[k - 1].p;
        op->state_of[tmp[k].i] = same ? op->state_of[tmp[k - 1].i] : tmp[k].i;
        if (same && op->group_of[tmp[k].i] != op->group_of[tmp[k - 1].i])
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "some parameters appear in more than one parameter group");
        dup |= same;
    }
    if (dup)
        tn__warn("optimizer contains a parameter group with duplicate parameters; in future, "
                 "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                 "more information");
    return TN_OK;
}

static tn_status check_param(const char *who, int g, int i, const tn_tensor *p) {
    if (!p) {
        if (g == 0) return tn__null_arg(true, "%s: params[%d] is NULL", who, i);
        return tn__null_arg(true, "%s: groups[%d].params[%d] is NULL", who, g, i);
    }
    /* torch also accepts a non-leaf that retains its grad */
    bool leaf = !p->ag || !p->ag->grad_fn;
    if (!leaf && !p->ag->retains_grad)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "can't optimize a non-leaf Tensor");
    return TN_OK;
}

/* Counts the parameters of every group, checking each; n_total < INT_MAX. */
static tn_status check_groups(const char *who, int n_groups, const tn_param_group *groups,
                              int *n_total) {
    if (n_groups < 1)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "optimizer got an empty parameter list");
    if (!groups) return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'groups' is NULL", who);
    int64_t total = 0;
    for (int g = 0; g < n_groups; g++) {
        const tn_param_group *gr = &groups[g];
        if (gr->n < 0 || (gr->n > 0 && !gr->params))
            return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: group %d has %s", who, g,
                             gr->n < 0 ? "a negative parameter count" : "NULL params");
        for (int i = 0; i < gr->n; i++) {
            tn_status st = check_param(who, n_groups == 1 ? 0 : g, i, gr->params[i]);
            if (st < 0) return st;
        }
        total += gr->n;
        if (total >= INT32_MAX)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: too many parameters", who);
    }
    if (total == 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "optimizer got an empty parameter list");
    *n_total = (int)total;
    return TN_OK;
}

static bool alloc_lists(tn_optim_params *op, int n, int n_groups) {
    size_t un = (size_t)n;
    op->params = tn__calloc_small(un * sizeof *op->params);
    op->state_of = tn__calloc_small(un * sizeof *op->state_of);
    op->group_of = tn__calloc_small(un * sizeof *op->group_of);
    op->grads = tn__calloc_small(un * sizeof *op->grads);
    op->first = tn__calloc_small(un * sizeof *op->first);
    op->groups = tn__calloc_small((size_t)n_groups * sizeof *op->groups);
    op->master = tn__calloc_small(un * sizeof *op->master);
    return op->params && op->state_of && op->group_of && op->grads && op->first && op->groups &&
           op->master;
}

tn_status tn__optim_params_init(tn_optim_params *op, const char *who, int n_groups,
                                const tn_param_group *groups, double lr, double weight_decay) {
    memset(op, 0, sizeof *op);
    int n = 0;
    tn_status st = check_groups(who, n_groups, groups, &n);
    if (st < 0) return st;
    ptr_index *tmp = NULL;
    if (!alloc_lists(op, n, n_groups) || !(tmp = tn__calloc_small((size_t)n * sizeof *tmp))) {
        tn__optim_params_free(op);
        return TN_ERR_OUT_OF_MEMORY;
    }
    op->n_groups = n_groups;
    for (int g = 0, i = 0; g < n_groups; g++) {
        const tn_param_group *gr = &groups[g];
        op->groups[g].lr = isnan(gr->lr) ? lr : gr->lr;
        op->groups[g].weight_decay = isnan(gr->weight_decay) ? weight_decay : gr->weight_decay;
        for (int k = 0; k < gr->n; k++, i++) {
            op->params[i] = tn__retain(gr->params[k]);
            op->group_of[i] = g;
        }
    }
    op->n = n;
    st = find_duplicates(op, tmp);
    tn__free_small(tmp);
    if (st < 0) tn__optim_params_free(op);
    return st;
}

tn_status tn__optim_params_init1(tn_optim_params *op, const char *who, int n,
                                 tn_tensor *const *params, double lr, double weight_decay) {
    if (n >= 1 && !params) {
        memset(op, 0, sizeof *op);
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'params' is NULL", who);
    }
    tn_param_group g = {n, params, lr, weight_decay};
    return tn__optim_params_init(op, who, 1, &g, lr, weight_decay);
}

tn_status tn__optim_check_groups(const tn_optim_params *op, tn_optim_check_fn check,
                                 const void *hyper) {
    for (int g = 0; g < op->n_groups; g++) {
        tn_status st = check(&op->groups[g], hyper);
        if (st < 0) return st;
    }
    return TN_OK;
}

tn_status tn__optim_set_lr(tn_optim_params *op, const char *who, int group, double lr) {
    if (group < -1 || group >= op->n_groups)
        return tn__error(TN_ERR_INDEX, "%s: group %d out of range (the optimizer has %d)", who,
                         group, op->n_groups);
    /* unchecked, as assigning torch's param_groups[g]['lr'] */
    for (int g = 0; g < op->n_groups; g++)
        if (group < 0 || g == group) op->groups[g].lr = lr;
    return TN_OK;
}

double tn__optim_get_lr(const tn_optim_params *op, const char *who, int group) {
    if (group < 0 || group >= op->n_groups) {
        tn__error(TN_ERR_INDEX, "%s: group %d out of range (the optimizer has %d)", who, group,
                  op->n_groups);
        return NAN;
    }
    return op->groups[group].lr;
}

void tn__optim_params_free(tn_optim_params *op) {
    for (int i = 0; i < op->n; i++) {
        if (op->params) tn_release(op->params[i]);
        if (op->master) tn_release(op->master[i]);
    }
    tn__free_small(op->params);
    tn__free_small(op->master);
    tn__free_small(op->state_of);
    tn__free_small(op->group_of);
    tn__free_small(op->grads);
    tn__free_small(op->first);
    tn__free_small(op->groups);
    memset(op, 0, sizeof *op);
}

/* A new reference to p's .grad, or NULL. The acquire load pairs with the
 * release CAS that installed the gradient (accumulate.c), as tn_grad. */
static tn_tensor *grad_of(const tn_tensor *p) {
    if (!p->ag || !p->ag->cell) return NULL;
    tn_tensor *g = atomic_load_explicit(&p->ag->cell->grad, memory_order_acquire);
    return g ? tn__retain(g) : NULL;
}

/* Parameter i is stepped through a float32 master copy. */
static bool mastered(const tn_optim_params *op, int i) {
    return op->use_master && tn__is_half(op->params[i]->dtype);
}

static tn_status collect_one(int i, tn_tensor *p, tn_dtype step_dt, tn_tensor **out) {
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
    tn_tensor *c = tn__cast(g, step_dt);
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
        tn_tensor *p = op->params[i];
        tn_status st = collect_one(i, p, mastered(op, i) ? TN_F32 : p->dtype, &op->grads[i]);
        int s = op->state_of[i];
        if (st == TN_OK && op->grads[i] && mastered(op, i) && !op->master[s] &&
            !(op->master[s] = tn__copy_as(p, TN_F32)))
            st = tn_last_status(); /* a master kept on failure is harmless: it is p's value */
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
        ps->stepped = true;
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

tn_tensor *tn__optim_state_like(const tn_optim_params *op, int i) {
    const tn_tensor *p = op->params[i];
    if (!mastered(op, i)) return tn__zeros_like(p);
    return tn__zeros_on(p->ndim, p->shape, TN_F32, tn__dev(p));
}

tn_tensor *tn__optim_target(const tn_optim_params *op, int i) {
    return mastered(op, i) ? op->master[op->state_of[i]] : op->params[i];
}

tn_status tn__optim_apply_param(const tn_optim_params *op, int i, const char *name,
                                tn_pw_code code, int nops, tn_tensor *const *ops, const void *ctx) {
    tn_status st = tn__optim_apply(name, code, nops, ops, ctx);
    tn_tensor *p = op->params[i];
    if (st == TN_OK && ops[0] != p) {
        st = tn__copy_into(p, ops[0]); /* the master rounded into the parameter */
        if (st == TN_OK) tn__version_bump(p, name);
    }
    if (st == TN_OK && TN_UNLIKELY(tn__numerics_on()))
        tn__hooks.num_update(name, i, p, op->grads ? op->grads[i] : NULL);
    return st;
}

tn_status tn__optim_set_master(tn_optim_params *op, const char *who, bool on) {
    if (op->stepped)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "%s: master weights are chosen before the first step", who);
    op->use_master = on;
    return TN_OK;
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

tn_status tn_optimizer_step(tn_optimizer *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return o->step(o);
}
