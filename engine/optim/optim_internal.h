/* engine/optim/optim_internal.h — what the optimisers share (params.c): the
 * parameter list and its groups, the per-step gradient snapshot and the
 * fused update driver.
 *
 * A step runs in two phases so that a failing step changes nothing:
 *   1. collect: read every .grad, check it and the parameter (phase 1 may
 *      allocate optimiser state, which is harmless to keep on failure);
 *   2. apply: one fused kernel pass per parameter that has a grad, then one
 *      version bump (torch's p.add_ / p.addcdiv_ bump once per step).
 *
 * torch keys optimiser state by tensor, so a parameter listed twice shares
 * one state (state_of[i] is the index of its first occurrence) and is
 * stepped twice, as torch does (torch warns; so do we).
 *
 * Threads: an optimiser is not thread-safe (one optimiser per thread); the
 * kernels themselves may use OpenMP above TN_GRAIN elements.
 */
#ifndef TN_OPTIM_INTERNAL_H
#define TN_OPTIM_INTERNAL_H

#include "../autograd/autograd_internal.h"

/* A parameter group's own hyperparameters (torch's param_groups[g]). */
typedef struct tn_optim_group {
    double lr, weight_decay;
} tn_optim_group;

typedef struct tn_optim_params {
    int n;
    tn_tensor **params; /* n, retained, the groups' lists one after the other */
    int *state_of;      /* n: index of the first occurrence of params[i] */
    int *group_of;      /* n: the group params[i] belongs to */
    int n_groups;
    tn_optim_group *groups; /* n_groups */
    tn_tensor **grads;      /* n: this step's grads (phase 1 -> 2), else NULL */
    bool *first;            /* n: state not yet initialised when the step began */
    /* Master weights (tn_*_set_master_weights): a half parameter is stepped as a float32
     * copy, master[state index], made at its first step, with float32 grads and state;
     * the parameter gets the copy rounded after each update. */
    bool use_master;
    bool stepped; /* a step has run: the choice above is fixed */
    tn_tensor **master; /* n, NULL until used (and for parameters that are not half) */
} tn_optim_params;

/* The kind-independent view of an optimiser (tenet/optim.h's tn_optimizer),
 * embedded in each optimiser: its parameters and its step. */
struct tn_optimizer {
    tn_optim_params *ps;
    tn_status (*step)(tn_optimizer *self);
};

/* Validates and retains the parameter groups (torch's Optimizer.__init__:
 * empty list, non-leaf, a tensor in two groups); a group's NaN lr or
 * weight_decay takes `lr` / `weight_decay`. `who` names the caller in
 * NULL-argument errors. On error *op holds nothing. */
tn_status tn__optim_params_init(tn_optim_params *op, const char *who, int n_groups,
                                const tn_param_group *groups, double lr, double weight_decay);
/* The same for one group of n parameters. */
tn_status tn__optim_params_init1(tn_optim_params *op, const char *who, int n,
                                 tn_tensor *const *params, double lr, double weight_decay);
/* Runs an optimiser's hyperparameter check on every group (torch checks the
 * defaults; a group's own values are checked here too). */
typedef tn_status (*tn_optim_check_fn)(const tn_optim_group *g, const void *hyper);
tn_status tn__optim_check_groups(const tn_optim_params *op, tn_optim_check_fn check,
                                 const void *hyper);
/* lr of group `group`, or of every group when group == -1 (unchecked, as
 * assigning torch's param_groups[g]['lr']); TN_ERR_INDEX out of range. */
tn_status tn__optim_set_lr(tn_optim_params *op, const char *who, int group, double lr);
/* lr of one group; NaN + TN_ERR_INDEX out of range. */
double tn__optim_get_lr(const tn_optim_params *op, const char *who, int group);
void tn__optim_params_free(tn_optim_params *op);

/* Phase 1: fills op->grads with each parameter's grad (new references,
 * converted to the parameter's dtype; NULL = skip) and checks that each
 * parameter can be written in place. On error every grad is released. */
tn_status tn__optim_collect(tn_optim_params *op);
void tn__optim_release_grads(tn_optim_params *op);

/* Phase 2 for one parameter: runs `loop` over ops[0..nops) (ops[0] is the
 * parameter, the others share its shape) and bumps the parameter's version
 * (and its storage's write epoch). */
/* One optimiser step under no-grad: collects the grads, lets `prepare` make
 * the state buffers, calls `update(opt, i)` for every parameter i that has
 * a grad, releases the grads. Changes nothing when collect/prepare fail. */
typedef tn_status (*tn_optim_prepare_fn)(void *opt);
typedef tn_status (*tn_optim_update_fn)(void *opt, int i);
tn_status tn__optim_step(tn_optim_params *ps, tn_optim_prepare_fn prepare,
                         tn_optim_update_fn update, void *opt);

/* Runs the update kernel `code` (TN_PW_SGD / TN_PW_ADAM, whose CPU loops are
 * engine/cpu/optim_kernels.c) over ops (ops[0] the parameter, written; all
 * on its device) and bumps its version; `name` labels the write in anomaly
 * reports. */
tn_status tn__optim_apply(const char *name, tn_pw_code code, int nops, tn_tensor *const *ops,
                          const void *ctx);

/* Sets every parameter's .grad to NULL (zero_grad(set_to_none=True)). */
tn_status tn__optim_zero_grad(const tn_optim_params *op);

/* Sum of squares and max |g| (NaN when g holds a NaN) of each gradient with
 * elements, in order, into (*host)[2k] and (*host)[2k + 1] (*m of them; free
 * *host with tn__free), by core's grad_stats in one wait (grad_measure.c).
 * *done = false, nothing measured, unless every gradient is an empty or
 * dense float block on one device that measures. NULL entries are skipped. */
tn_status tn__optim_grad_stats(int n, tn_tensor *const *grads, double **host, int *m, bool *done);

/* A contiguous zero tensor shaped like parameter i (optimiser state): of its
 * dtype, or float32 for a half parameter with master weights. */
tn_tensor *tn__optim_state_like(const tn_optim_params *op, int i);
/* What the update of parameter i writes: the parameter, or its master copy. */
tn_tensor *tn__optim_target(const tn_optim_params *op, int i);
/* tn__optim_apply on ops (ops[0] = tn__optim_target(op, i)), then, with a
 * master copy, the copy rounded into the parameter (whose version moves). */
tn_status tn__optim_apply_param(const tn_optim_params *op, int i, const char *name,
                                tn_pw_code code, int nops, tn_tensor *const *ops, const void *ctx);
/* tn_*_set_master_weights: refused once a step has run. */
tn_status tn__optim_set_master(tn_optim_params *op, const char *who, bool on);

/* Python's repr(float), for torch's "Invalid learning rate: -0.1" texts. */
void tn__optim_fmt(char *buf, size_t size, double v);

#endif
