/* torch.optim.SGD (momentum, weight decay; dampening 0, no nesterov). The
 * parameter list it shares with the other optimisers is params.c. */
#include <math.h>

#include "optim_internal.h"

/* ---- SGD ------------------------------------------------------------------------ */

struct tn_sgd {
    tn_optim_params ps; /* groups hold lr and weight_decay */
    double momentum;
    tn_tensor **buf; /* per state index: momentum buffer, NULL until first used */
    tn_optimizer base; /* tn_sgd_optimizer */
};

/* torch's checks, in torch's order; NaN passes them, as in torch */
static tn_status check_hyper(double lr, double momentum, double weight_decay) {
    char v[40];
    const char *what = NULL;
    double bad = 0;
    if (lr < 0.0)
        what = "Invalid learning rate", bad = lr;
    else if (momentum < 0.0)
        what = "Invalid momentum value", bad = momentum;
    else if (weight_decay < 0.0)
        what = "Invalid weight_decay value", bad = weight_decay;
    if (!what) return TN_OK;
    tn__optim_fmt(v, sizeof v, bad);
    return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: %s", what, v);
}

static tn_status check_group(const tn_optim_group *g, const void *momentum) {
    return check_hyper(g->lr, *(const double *)momentum, g->weight_decay);
}

static tn_status sgd_base_step(tn_optimizer *b) {
    return tn_sgd_step((tn_sgd *)(void *)((char *)b - offsetof(tn_sgd, base)));
}

static tn_sgd *sgd_new(const char *who, int n_groups, const tn_param_group *groups, int n,
                       tn_tensor *const *params, double lr, double momentum, double wd) {
    if (check_hyper(lr, momentum, wd) < 0) return NULL;
    tn_sgd *o = tn__calloc_small(sizeof *o);
    if (!o) return NULL;
    tn_status st = groups ? tn__optim_params_init(&o->ps, who, n_groups, groups, lr, wd)
                          : tn__optim_params_init1(&o->ps, who, n, params, lr, wd);
    if (st < 0) {
        tn__free_small(o);
        return NULL;
    }
    o->buf = tn__calloc_small((size_t)o->ps.n * sizeof *o->buf);
    if (tn__optim_check_groups(&o->ps, check_group, &momentum) < 0 || !o->buf) {
        tn_sgd_free(o);
        return NULL;
    }
    o->momentum = momentum;
    o->base = (tn_optimizer){&o->ps, sgd_base_step};
    return o;
}

tn_sgd *tn_sgd_new(int n, tn_tensor *const *params, double lr, double momentum,
                   double weight_decay) {
    return sgd_new("tn_sgd_new", 0, NULL, n, params, lr, momentum, weight_decay);
}

tn_sgd *tn_sgd_new_groups(int n_groups, const tn_param_group *groups, double lr, double momentum,
                          double weight_decay) {
    TN_CHECK_NULL_PTR(groups, "groups");
    return sgd_new("tn_sgd_new_groups", n_groups, groups, 0, NULL, lr, momentum, weight_decay);
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
        o->buf[s] = tn__optim_state_like(ps, i);
        if (!o->buf[s]) return tn_last_status();
    }
    return TN_OK;
}

static tn_status sgd_prepare(void *opt) { return sgd_prepare_buffers(opt); }

static tn_status sgd_update(void *opt, int i) {
    tn_sgd *o = opt;
    tn_optim_params *ps = &o->ps;
    const tn_optim_group *g = &ps->groups[ps->group_of[i]];
    tn_sgd_ctx c = {g->lr, o->momentum, g->weight_decay, ps->first[i]};
    tn_tensor *ops[3] = {tn__optim_target(ps, i), ps->grads[i], o->buf[ps->state_of[i]]};
    return tn__optim_apply_param(ps, i, "SGD.step", TN_PW_SGD, o->momentum != 0 ? 3 : 2, ops, &c);
}

tn_status tn_sgd_set_master_weights(tn_sgd *o, bool on) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_set_master(&o->ps, "tn_sgd_set_master_weights", on);
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
    tn__optim_set_lr(&o->ps, "tn_sgd_set_lr", -1, lr);
}

tn_status tn_sgd_set_group_lr(tn_sgd *o, int group, double lr) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_set_lr(&o->ps, "tn_sgd_set_group_lr", group, lr);
}

double tn_sgd_get_lr(const tn_sgd *o, int group) {
    if (!o) {
        tn__null_arg(true, "tn_sgd_get_lr: argument 'opt' is NULL");
        return NAN;
    }
    return tn__optim_get_lr(&o->ps, "tn_sgd_get_lr", group);
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

tn_optimizer *tn_sgd_optimizer(tn_sgd *o) {
    TN_CHECK_NULL_ARG(o, "opt");
    return &o->base;
}
