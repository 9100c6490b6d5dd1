/* One small MLP training step for the profiler's tests: forward (matmul,
 * relu, mul, sum) and backward (SumBackward0, MulBackward0, ReluBackward0,
 * MmBackward0) on the calling thread. Returns the status. */
#ifndef TN_TESTS_PROF_STEP_H
#define TN_TESTS_PROF_STEP_H

#include "tenet.h"

static inline tn_status prof_step(void) {
    static const int64_t sx[] = {8, 16}, sw[] = {16, 32};
    if (tn_scope_begin() < 0) return tn_last_status();
    tn_tensor *x = tn_rand(2, sx, TN_F32), *w = tn_rand(2, sw, TN_F32);
    tn_status st = w ? tn_requires_grad_(w, true) : tn_last_status();
    tn_tensor *h = st == TN_OK ? tn_relu(tn_matmul(x, w)) : NULL;
    tn_tensor *loss = h ? tn_sum(tn_mul(h, h)) : NULL;
    if (st == TN_OK) st = loss ? tn_backward(loss, NULL, false) : tn_last_status();
    tn_scope_end();
    return st;
}

#endif
