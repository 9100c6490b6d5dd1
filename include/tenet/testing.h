/* tenet/testing.h — allocation-failure injection, for testing that a program
 * (and tenet) handles running out of memory, and gradient checks for
 * functions built from tenet ops (a custom function's backward). Not
 * included by tenet.h.
 *
 * Every allocation tenet makes (tensor buffers, handles, autograd nodes,
 * backward's working memory, scope stacks, printing buffers, anomaly-mode
 * records) is counted while a failure is armed, and the n-th fails exactly
 * as if the allocator had returned NULL: the call that needed it returns
 * NULL or TN_ERR_OUT_OF_MEMORY with a message and changes nothing; later
 * allocations succeed again. Allocations of CUDA device memory and of the
 * libraries tenet uses (OpenMP, libunwind, libdw) are not counted.
 *
 * Walking n = 1, 2, 3, ... over a program until a run completes with no
 * failure injected (tn_test_alloc_failed() false) fails each of its
 * allocations in turn: tests/test_oom_walk.c does so over training steps.
 *
 * Threads: the count is process-wide (all threads count against n). Arm and
 * read it while no other thread is inside tenet; the hook itself is
 * thread-safe. Off, it costs an allocation one relaxed load and a branch.
 */
#ifndef TENET_TESTING_H
#define TENET_TESTING_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* Fails the n-th allocation from now (n >= 1), once; n <= 0 disarms. Resets
 * the count and the fired flag. Also read at load time from the environment
 * variable TENET_FAIL_ALLOC_AT=n. */
void tn_test_fail_alloc_at(int64_t n);
/* Allocations counted since the last tn_test_fail_alloc_at(n > 0), the
 * failed one included (counting goes on after it fired). */
int64_t tn_test_alloc_count(void);
/* Whether the armed failure has happened. */
bool tn_test_alloc_failed(void);

/* ---- gradient checks (torch.autograd.gradcheck / gradgradcheck) ------------
 * fn(inputs, n, ctx) computes one tensor from inputs[0..n) with tenet ops
 * and returns it (a new reference, or one the open scope owns; NULL + an
 * error on failure); it is called many times, each call in a scope of its
 * own, with the caller's inputs (the analytical pass) or with private
 * contiguous float64 CPU copies of them (the numerical pass; the caller's
 * tensors are never written). tn_gradcheck compares, for every input that
 * requires grad (at least one must), the analytical Jacobian (one backward
 * per output element) with central differences of step eps, element by
 * element as allclose: |analytical - numerical| <= atol + rtol
 * |numerical| (PyTorch's defaults: eps 1e-6, atol 1e-5, rtol 1e-3; inputs
 * should be float64: others are warned about, as PyTorch). Returns TN_OK,
 * or TN_ERR_AUTOGRAD with PyTorch's report as the message ("Jacobian
 * mismatch for output 0 with respect to input 1,\nnumerical:tensor(...)
 * analytical:tensor(...)", each Jacobian (input numel, output numel)), or
 * the status of fn's failure. tn_gradgradcheck checks the second
 * derivatives: gradcheck of the gradients of sum(fn(inputs) * v) with
 * respect to the inputs that require grad, v fixed values of fn's output
 * shape, also checked as an input. n: 1..TN_GRADCHECK_MAX_INPUTS (one
 * less for gradgradcheck). Not thread-safe against other gradient checks
 * on the same inputs; fn must be deterministic. */
#define TN_GRADCHECK_MAX_INPUTS 16
typedef tn_tensor *(*tn_gradcheck_fn)(tn_tensor *const *inputs, int n, void *ctx);
tn_status tn_gradcheck(tn_gradcheck_fn fn, void *ctx, int n, tn_tensor *const *inputs, double eps,
                       double atol, double rtol);
tn_status tn_gradgradcheck(tn_gradcheck_fn fn, void *ctx, int n, tn_tensor *const *inputs,
                           double eps, double atol, double rtol);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
