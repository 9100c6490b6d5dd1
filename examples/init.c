/* examples/init.c — parameter initialisation shared by the demo and bench/. */
#include <math.h>

#include "init.h"

tn_tensor *uniform_leaf(int ndim, const int64_t *shape, int64_t fan_in) {
    double k = 1.0 / sqrt((double)fan_in);
    tn_scope_begin();
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *w = tn_add_scalar(tn_mul_scalar(tn_rand(ndim, shape, TN_F32), 2 * k), -k);
    tn_set_grad_enabled(prev);
    if (w && (tn_requires_grad_(w, true) < 0 || !tn_keep(w))) w = NULL;
    tn_scope_end();
    return w;
}
