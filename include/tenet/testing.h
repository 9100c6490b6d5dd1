/* tenet/testing.h — allocation-failure injection, for testing that a program
 * (and tenet) handles running out of memory. Not included by tenet.h.
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

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
