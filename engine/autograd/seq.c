/* Node sequence numbers: the order the engine runs ready nodes in. */
#include "autograd_internal.h"

/* Creation order of nodes; the engine runs later nodes first among the ready
 * ones, as PyTorch, and sums gradients in that order. Each thread reserves
 * blocks of TN_SEQ_BLOCK numbers, so numbers are unique and increase along
 * each thread's program order without a shared cache line per node.
 * Relaxed: only uniqueness matters across threads. */
#define TN_SEQ_BLOCK 4096
static _Atomic uint64_t g_seq;
static _Thread_local uint64_t tls_seq_next, tls_seq_end;
uint64_t tn__next_seq(void) {
    if (TN_UNLIKELY(tls_seq_next == tls_seq_end)) {
        tls_seq_next = atomic_fetch_add_explicit(&g_seq, TN_SEQ_BLOCK, memory_order_relaxed);
        tls_seq_end = tls_seq_next + TN_SEQ_BLOCK;
    }
    return tls_seq_next++;
}
