/* tenet/optim.h — optimisers over a list of leaf tensors, and gradient
 * clipping.
 *
 * Ownership: an optimiser retains its parameters; free it with *_free.
 * Steps run under no-grad, update the parameters in place (bumping their
 * versions, as torch.optim does) and skip parameters without a .grad.
 * Parameter groups (torch's param_groups): each *_new_groups constructor
 * takes groups of parameters with their own lr and weight decay; the plain
 * constructors make one group. Groups are numbered from 0 in the order given.
 * Threads: one optimiser must not be stepped from two threads at once.
 */
#ifndef TENET_OPTIM_H
#define TENET_OPTIM_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

typedef struct tn_sgd tn_sgd;
typedef struct tn_adam tn_adam;

/* A group's lr or weight_decay equal to TN_OPTIM_DEFAULT takes the value
 * given to the constructor, as a key left out of a torch param group. */
#define TN_OPTIM_DEFAULT (__builtin_nan(""))

/* One parameter group: n tensors (borrowed for the call; the optimiser
 * retains them) with their own lr and weight decay, e.g. nanoGPT's
 *   {n_decay, decay, TN_OPTIM_DEFAULT, 0.1}, {n_other, other, TN_OPTIM_DEFAULT, 0.0}.
 * A group may be empty, but not all of them ("optimizer got an empty
 * parameter list"); a tensor in two groups is refused ("some parameters
 * appear in more than one parameter group"). */
typedef struct tn_param_group {
    int n;
    tn_tensor *const *params;
    double lr;
    double weight_decay;
} tn_param_group;

/* torch.optim.SGD(params, lr, momentum, weight_decay) (dampening 0, no nesterov). */
tn_sgd *tn_sgd_new(int n, tn_tensor *const *params, double lr, double momentum,
                   double weight_decay);
tn_status tn_sgd_step(tn_sgd *opt);
/* Sets every parameter's .grad to NULL. */
tn_status tn_sgd_zero_grad(tn_sgd *opt);
/* Sets the lr of every group (unchecked, as assigning param_groups[g]['lr']). */
void tn_sgd_set_lr(tn_sgd *opt, double lr);
void tn_sgd_free(tn_sgd *opt);
/* torch.optim.SGD(groups, lr, momentum, weight_decay). */
tn_sgd *tn_sgd_new_groups(int n_groups, const tn_param_group *groups, double lr, double momentum,
                          double weight_decay);

/* torch.optim.Adam(params, lr, betas=(beta1, beta2), eps, weight_decay). */
tn_adam *tn_adam_new(int n, tn_tensor *const *params, double lr, double beta1, double beta2,
                     double eps, double weight_decay);
tn_status tn_adam_step(tn_adam *opt);
tn_status tn_adam_zero_grad(tn_adam *opt);
void tn_adam_free(tn_adam *opt);
/* torch.optim.Adam(groups, lr, betas, eps, weight_decay). */
tn_adam *tn_adam_new_groups(int n_groups, const tn_param_group *groups, double lr, double beta1,
                            double beta2, double eps, double weight_decay);

/* torch.optim.AdamW(params, lr, betas, eps, weight_decay): Adam with
 * decoupled weight decay, in torch's order: p *= 1 - lr wd, then the Adam
 * update of the raw gradient. Stepped, zeroed and freed as an Adam
 * (tn_adam_step, ...). torch's defaults: lr 1e-3, betas (0.9, 0.999), eps
 * 1e-8, weight_decay 1e-2. */
tn_adam *tn_adamw_new(int n, tn_tensor *const *params, double lr, double beta1, double beta2,
                      double eps, double weight_decay);
tn_adam *tn_adamw_new_groups(int n_groups, const tn_param_group *groups, double lr, double beta1,
                             double beta2, double eps, double weight_decay);

/* Half-precision parameters (bfloat16, float16). By default, as torch.optim:
 * the state (momentum buffer, exp_avg, exp_avg_sq) is in the parameter's
 * dtype and each update rounds where torch's ends one tensor op, so a bf16
 * run follows PyTorch's bf16 run. With master weights on (llm.c's recipe),
 * each half parameter is stepped as a float32 copy made at its first step,
 * with float32 grads and state, and gets the copy rounded to its dtype after
 * every update: small updates that bf16 would round away accumulate in the
 * copy. Use it to train with bf16 parameters (2 bytes a weight read in the
 * forward, 4 + 8 more for the copy and Adam's state); keep the default to
 * match PyTorch, or keep float32 parameters under autocast (the usual mixed
 * precision, where the float32 leaves are the master weights). Chosen
 * before the first step (TN_ERR_INVALID_ARGUMENT after); parameters of
 * other dtypes are unaffected. */
tn_status tn_sgd_set_master_weights(tn_sgd *opt, bool on);
tn_status tn_adam_set_master_weights(tn_adam *opt, bool on);
/* Learning rate of every group (group -1) or of one, as assigning
 * param_groups[g]['lr'] (unchecked); TN_ERR_INDEX for a group out of range.
 * tn_*_get_lr returns a group's lr, or NaN + TN_ERR_INDEX. */
tn_status tn_adam_set_lr(tn_adam *opt, int group, double lr);
double tn_adam_get_lr(const tn_adam *opt, int group);
tn_status tn_sgd_set_group_lr(tn_sgd *opt, int group, double lr);
double tn_sgd_get_lr(const tn_sgd *opt, int group);
int tn_adam_num_groups(const tn_adam *opt);

/* Any optimiser, for code that works with every kind (the gradient scaler,
 * tenet/autocast.h): a borrowed view of an SGD or Adam/AdamW handle, valid
 * while that handle lives (NULL + error for NULL). tn_optimizer_step steps
 * it as its own *_step does. */
typedef struct tn_optimizer tn_optimizer;
tn_optimizer *tn_sgd_optimizer(tn_sgd *opt);
tn_optimizer *tn_adam_optimizer(tn_adam *opt);
tn_status tn_optimizer_step(tn_optimizer *opt);

/* torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type): the norm of
 * all the .grads together (parameters without one are skipped), as if they
 * were one vector; when it exceeds max_norm, every .grad is scaled in place
 * by max_norm / (norm + 1e-6) (torch multiplies by the coefficient clamped
 * to 1, so the grads' versions move on every call, as here). norm_type: any
 * p > 0, or INFINITY for the max-abs norm. Writes the total norm to
 * *total_norm (may be NULL), 0 when no parameter has a .grad. Sums are
 * accumulated in float64. Errors: NULL arguments, a non-positive or NaN
 * norm_type or NaN max_norm (TN_ERR_INVALID_ARGUMENT); nothing is scaled on
 * error. */
tn_status tn_clip_grad_norm_(int n, tn_tensor *const *params, double max_norm, double norm_type,
                             double *total_norm);
/* torch.nn.utils.clip_grad_value_(params, clip_value): every .grad of
 * params[0..n) (those without one are skipped) clamped in place to
 * [-clip_value, clip_value] under no-grad (each grad's version moves once).
 * A NaN clip_value or a NULL parameter: TN_ERR_INVALID_ARGUMENT, nothing
 * clamped. */
tn_status tn_clip_grad_value_(int n, tn_tensor *const *params, double clip_value);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
