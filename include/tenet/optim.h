/* tenet/optim.h — optimisers over a list of leaf tensors.
 *
 * Ownership: an optimiser retains its parameters; free it with *_free.
 * Steps run under no-grad, update the parameters in place (bumping their
 * versions, as torch.optim does) and skip parameters without a .grad.
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

/* torch.optim.SGD(params, lr, momentum, weight_decay) (dampening 0, no nesterov). */
tn_sgd *tn_sgd_new(int n, tn_tensor *const *params, double lr, double momentum,
                   double weight_decay);
tn_status tn_sgd_step(tn_sgd *opt);
/* Sets every parameter's .grad to NULL. */
tn_status tn_sgd_zero_grad(tn_sgd *opt);
void tn_sgd_set_lr(tn_sgd *opt, double lr);
void tn_sgd_free(tn_sgd *opt);

/* torch.optim.Adam(params, lr, betas=(beta1, beta2), eps, weight_decay). */
tn_adam *tn_adam_new(int n, tn_tensor *const *params, double lr, double beta1,
                     double beta2, double eps, double weight_decay);
tn_status tn_adam_step(tn_adam *opt);
tn_status tn_adam_zero_grad(tn_adam *opt);
void tn_adam_free(tn_adam *opt);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
