/* Lock-free gradient accumulation into a cell (a leaf's .grad or a retained
 * non-leaf grad).
 *
 * Exchange-and-merge: take the current gradient out of the cell (exchange
 * with NULL). If there was one, add ours into it: the taken tensor is now
 * ours alone (no other accumulator can reach it), so the in-place add races
 * with no one, and a user holding it sees the update as with PyTorch's
 * in-place accumulation. Then try to put the result back with CAS(NULL ->
 * ours). If another thread installed its own gradient meanwhile, the CAS
 * fails; we loop, take theirs and merge again.
 *
 * No update is lost: every gradient is, at each instant, either in the cell
 * or held by exactly one accumulating thread, which keeps merging until its
 * CAS succeeds; each merge adds two disjoint sets of contributions. The loop
 * is lock-free: a CAS fails only because another thread's exchange/CAS
 * succeeded, i.e. the system made progress.
 */
#include "autograd_internal.h"

/* g must be a tensor only we reference, contiguous, with its own storage,
 * so that later in-place merges into it are safe. */
static tn_tensor *own(tn_tensor *g) {
    bool exclusive = atomic_load_explicit(&g->refcount, memory_order_acquire) == 1 &&
                     atomic_load_explicit(&g->storage->refcount, memory_order_acquire) == 1 &&
                     tn__is_contiguous(g) && !g->ag;
    if (exclusive) return g;
    tn_tensor *c = tn__copy_as(g, g->dtype);
    tn_release(g);
    return c;
}

tn_status tn__add_into(tn_tensor *dst, const tn_tensor *src); /* pointwise.c */

tn_status tn__cell_accumulate(tn_grad_cell *c, tn_tensor *g, bool create_graph) {
    if (!create_graph) {
        g = own(g);
        if (!g) return tn_last_status();
    }
    for (;;) {
        /* acq_rel: acquire the previous installer's writes to the tensor we
         * take; release nothing of ours yet (the CAS below publishes). */
        tn_tensor *old = atomic_exchange_explicit(&c->grad, NULL, memory_order_acq_rel);
        if (old) {
            if (create_graph) { /* differentiable: out of place */
                tn_tensor *sum = tn_add(old, g);
                tn_release(g);
                if (!sum) {
                    tn_tensor *expected = NULL;
                    if (!atomic_compare_exchange_strong_explicit(
                            &c->grad, &expected, old, memory_order_acq_rel,
                            memory_order_acquire))
                        tn_release(old);
                    return tn_last_status();
                }
                tn_release(old);
                g = sum;
            } else {
                tn_status st = tn__add_into(old, g);
                tn_release(g);
                g = old;
                if (st < 0) return st;
                tn__version_bump(old, "AccumulateGrad"); /* in place, as PyTorch */
            }
        }
        tn_tensor *expected = NULL;
        /* release on success: pairs with the acq_rel exchange of the next
         * accumulator and the acquire load in tn_grad. */
        if (atomic_compare_exchange_strong_explicit(&c->grad, &expected, g, memory_order_acq_rel,
                                                    memory_order_acquire))
            return TN_OK;
    }
}
