/* torch.optim.Adam (L2 weight decay added to the grad, bias correction, no
 * amsgrad) and torch.optim.AdamW (the same with decoupled weight decay:
 * p *= 1 - lr wd before the update). Shared parameter handling lives in
 * params.c (optim_internal.h). */
#include <math.h>

#include "optim_internal.h"

struct tn_adam {
    tn_optim_params ps; /* groups hold lr and weight_decay */
    double beta1, beta2, eps;
    bool decoupled; /* AdamW */
    /* per state index (first occurrence of a parameter); NULL until used */
    tn_tensor **exp_avg, **exp_avg_sq;
    int64_t *steps; /* torch's state['step']: counts only steps with a grad */
    tn_optimizer base; /* tn_adam_optimizer */
};

/* torch's checks, in torch's order: `not 0.0 <= x` (NaN fails them). */
static tn_status check_hyper(double lr, double beta1, double beta2, double eps, double wd) {
    char v[40];
    const char *what = NULL;
    double bad = 0;
    if (!(0.0 <= lr))
        what = "Invalid learning rate", bad = lr;
    else if (!(0.0 <= eps))
        what = "Invalid epsilon value", bad = eps;
    else if (!(0.0 <= beta1 && beta1 < 1.0))
        what = "Invalid beta parameter at index 0", bad = beta1;
    else if (!(0.0 <= beta2 && beta2 < 1.0))
        what = "Invalid beta parameter at index 1", bad = beta2;
    else if (!(0.0 <= wd))
        what = "Invalid weight_decay value", bad = wd;
    if (!what) return TN_OK;
    tn__optim_fmt(v, sizeof v, bad);
    return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: %s", what, v);
}

typedef struct adam_hyper {
    double beta1, beta2, eps;
} adam_hyper;

static tn_status check_group(const tn_optim_group *g, const void *hyper) {
    const adam_hyper *h = hyper;
    return check_hyper(g->lr, h->beta1, h->beta2, h->eps, g->weight_decay);
}

static tn_status adam_base_step(tn_optimizer *b) {
    return tn_adam_step((tn_adam *)(void *)((char *)b - offsetof(tn_adam, base)));
}

static tn_adam *adam_new(const char *who, bool decoupled, int n_groups,
                         const tn_param_group *groups, int n, tn_tensor *const *params, double lr,
                         double beta1, double beta2, double eps, double wd) {
    if (check_hyper(lr, beta1, beta2, eps, wd) < 0) return NULL;
    tn_adam *o = tn__calloc_small(sizeof *o);
    if (!o) return NULL;
    tn_status st = groups ? tn__optim_params_init(&o->ps, who, n_groups, groups, lr, wd)
                          : tn__optim_params_init1(&o->ps, who, n, params, lr, wd);
    if (st < 0) {
        tn__free_small(o);
        return NULL;
    }
    adam_hyper h = {beta1, beta2, eps};
    size_t un = (size_t)o->ps.n;
    o->exp_avg = tn__calloc_small(un * sizeof *o->exp_avg);
    o->exp_avg_sq = tn__calloc_small(un * sizeof *o->exp_avg_sq);
    o->steps = tn__calloc_small(un * sizeof *o->steps);
    if (tn__optim_check_groups(&o->ps, check_group, &h) < 0 || !o->exp_avg || !o->exp_avg_sq ||
        !o->steps) {
        tn_adam_free(o);
        return NULL;
    }
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->decoupled = decoupled;
    o->base = (tn_optimizer){&o->ps, adam_base_step};
    return o;
}

tn_adam *tn_adam_new(int n, tn_tensor *const *params, double lr, double beta1, double beta2,
                     double eps, double weight_decay) {
    return adam_new("tn_adam_new", false, 0, NULL, n, params, lr, beta1, beta2, eps, weight_decay);
}

tn_adam *tn_adam_new_groups(int n_groups, const tn_param_group *groups, double lr, double beta1,
                            double beta2, double eps, double weight_decay) {
    TN_CHECK_NULL_PTR(groups, "groups");
    return adam_new("tn_adam_new_groups", false, n_groups, groups, 0, NULL, lr, beta1, beta2, eps,
                    weight_decay);
}

tn_adam *tn_adamw_new(int n, tn_tensor *const *params, double lr, double beta1, double beta2,
                      double eps, double weight_decay) {
    return adam_new("tn_adamw_new", true, 0, NULL, n, params, lr, beta1, beta2, eps, weight_decay);
}

tn_adam *tn_adamw_new_groups(int n_groups, const tn_param_group *groups, double lr, double beta1,
                             double beta2, double eps, double weight_decay) {
    TN_CHECK_NULL_PTR(groups, "groups");
    return adam_new("tn_adamw_new_groups", true, n_groups, groups, 0, NULL, lr, beta1, beta2, eps,
                    weight_decay);
}

/* Phase 1 tail: zeroed moments for parameters stepped for the first time. */
static tn_status adam_prepare_state(tn_adam *o) {
    tn_optim_params *ps = &o->ps;
    for (int i = 0; i < ps->n; i++) {
        int s = ps->state_of[i];
        if (!ps->grads[i] || o->exp_avg[s]) continue;
        tn_tensor *m = tn__optim_state_like(ps, i);
        tn_tensor *v = m ? tn__optim_state_like(ps, i) : NULL;
        if (!v) {
            tn_release(m);
            return tn_last_status();
        }
        o->exp_avg[s] = m;
        o->exp_avg_sq[s] = v;
    }
    return TN_OK;
}

/* torch's scalars, in double as its Python computes them; AdamW's decay
 * factor is 1 - lr wd (param.mul_(1 - lr * weight_decay)). */
static tn_adam_ctx adam_scalars(const tn_adam *o, const tn_optim_group *g, int64_t step) {
    double bc1 = 1 - pow(o->beta1, (double)step), bc2 = 1 - pow(o->beta2, (double)step);
    return (tn_adam_ctx){.beta1 = o->beta1,
                         .beta2 = o->beta2,
                         .one_minus_beta1 = 1 - o->beta1,
                         .one_minus_beta2 = 1 - o->beta2,
                         .wd = o->decoupled ? 0 : g->weight_decay,
                         .decay = o->decoupled ? 1 - g->lr * g->weight_decay : 1,
                         .eps = o->eps,
                         .bc2_sqrt = sqrt(bc2),
                         .neg_step_size = -(g->lr / bc1)};
}

static tn_status adam_prepare(void *opt) { return adam_prepare_state(opt); }

static tn_status adam_update(void *opt, int i) {
    tn_adam *o = opt;
    tn_optim_params *ps = &o->ps;
    int s = ps->state_of[i];
    tn_adam_ctx c = adam_scalars(o, &ps->groups[ps->group_of[i]], ++o->steps[s]);
    tn_tensor *ops[4] = {tn__optim_target(ps, i), ps->grads[i], o->exp_avg[s], o->exp_avg_sq[s]};
    return tn__optim_apply_param(ps, i, "Adam.step", TN_PW_ADAM, 4, ops, &c);
}

tn_status tn_adam_set_master_weights(tn_adam *o, bool on) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_set_master(&o->ps, "tn_adam_set_master_weights", on);
}

tn_status tn_adam_step(tn_adam *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_step(&o->ps, adam_prepare, adam_update, o);
}

tn_status tn_adam_set_lr(tn_adam *o, int group, double lr) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_set_lr(&o->ps, "tn_adam_set_lr", group, lr);
}

double tn_adam_get_lr(const tn_adam *o, int group) {
    if (!o) {
        tn__null_arg(true, "tn_adam_get_lr: argument 'opt' is NULL");
        return NAN;
    }
    return tn__optim_get_lr(&o->ps, "tn_adam_get_lr", group);
}

int tn_adam_num_groups(const tn_adam *o) {
    if (!o) {
        tn__null_arg(true, "tn_adam_num_groups: argument 'opt' is NULL");
        return -1;
    }
    return o->ps.n_groups;
}

tn_status tn_adam_zero_grad(tn_adam *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_zero_grad(&o->ps);
}

void tn_adam_free(tn_adam *o) {
    if (!o) return;
    for (int i = 0; i < o->ps.n; i++) {
        if (o->exp_avg) tn_release(o->exp_avg[i]);
        if (o->exp_avg_sq) tn_release(o->exp_avg_sq[i]);
    }
    tn__free_small(o->exp_avg);
    tn__free_small(o->exp_avg_sq);
    tn__free_small(o->steps);
    tn__optim_params_free(&o->ps);
    tn__free_small(o);
}

tn_optimizer *tn_adam_optimizer(tn_adam *o) {
    TN_CHECK_NULL_ARG(o, "opt");
    return &o->base;
}
