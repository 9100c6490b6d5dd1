/* One small MLP training step for the profiler's tests: forward (matmul,
 * relu, mul, sum) and backward (SumBackward0, MulBackward0, ReluBackward0,
 * MmBackward0) on the calling thread. Returns the status. */
#ifndef TN_TESTS_PROF_STEP_H
#define TN_TESTS_PROF_STEP_H

#include "tenet.h"

static inline tn_status prof_step(void) {
    static const int64_t sx[] = {8, 16}, sw[] = {16, 32};
    if (tn_scope_begin() < 0) return tn_last_status();
    tn_tensor *x, *w, *y, *h, *hh, *loss;
    tn_status st = (x = tn_rand(2, sx, TN_F32)) && (w = tn_rand(2, sw, TN_F32)) &&
                           tn_requires_grad_(w, true) == TN_OK && (y = tn_matmul(x, w)) &&
                           (h = tn_relu(y)) && (hh = tn_mul(h, h)) && (loss = tn_sum(hh))
                       ? tn_backward(loss, NULL, false)
                       : tn_last_status();
    tn_scope_end();
    return st;
}

#endif
