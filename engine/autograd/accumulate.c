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
#include "../ops/ops_internal.h"

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

/* Readers and retirement. A reader announces itself (readers++), loads the
 * pointer, retains it, and leaves. A thread that took tensor t out of the
 * cell (exchange, seq_cst) releases it only after seeing readers == 0
 * (seq_cst): a reader that loaded t did so before the exchange, hence
 * announced itself before it, so it is either counted or done retaining.
 * Readers never wait; a retiring accumulator waits at most for a reader's
 * three instructions (one pointer load and one increment). */
tn_tensor *tn__cell_load(tn_grad_cell *c) {
    atomic_fetch_add_explicit(&c->readers, 1, memory_order_seq_cst);
    tn_tensor *g = atomic_load_explicit(&c->grad, memory_order_seq_cst);
    if (g) tn__retain(g);
    /* release: our retain happens before a retirer's free */
    atomic_fetch_sub_explicit(&c->readers, 1, memory_order_release);
    return g;
}

void tn__cell_release_taken(tn_grad_cell *c, tn_tensor *t) {
    if (!t) return;
    /* acquire pairs with the readers' release decrement */
    while (atomic_load_explicit(&c->readers, memory_order_seq_cst) != 0) {
    }
    atomic_thread_fence(memory_order_acquire);
    tn_release(t);
}

tn_status tn__cell_accumulate(tn_grad_cell *c, tn_tensor *g, bool create_graph) {
    if (!create_graph) {
        g = own(g);
        if (!g) return tn_last_status();
    }
    for (;;) {
        /* seq_cst: acquires the previous installer's writes to the tensor we
         * take, and orders the take before our readers check (retirement). */
        tn_tensor *old = atomic_exchange_explicit(&c->grad, NULL, memory_order_seq_cst);
        if (old) {
            if (create_graph) { /* differentiable: out of place */
                tn_tensor *sum = tn_add(old, g);
                tn__cell_release_taken(c, g); /* g may have been installed before */
                if (!sum) {
                    tn_tensor *expected = NULL;
                    if (!atomic_compare_exchange_strong_explicit(
                            &c->grad, &expected, old, memory_order_acq_rel,
                            memory_order_acquire))
                        tn__cell_release_taken(c, old);
                    return tn_last_status();
                }
                tn__cell_release_taken(c, old);
                g = sum;
            } else {
                tn_status st = tn__add_into(old, g);
                tn__cell_release_taken(c, g); /* g may have been installed before */
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

/* ---- a run's delivery: all cells or none --------------------------------------------- */

tn_status tn__cell_prepare(tn_grad_cell *c, tn_tensor *g, bool create_graph,
                           tn_cell_update *u) {
    *u = (tn_cell_update){0};
    if (!tn__cell_try_retain(c)) { /* its tensors are gone: the gradient reaches no one */
        tn_release(g);
        return TN_OK;
    }
    u->cell = c;
    if (!create_graph) { /* the in-place merge at commit allocates nothing */
        u->g = own(g);
    } else {
        u->g = g;
        u->old = tn__cell_load(c);
        if (u->old) u->sum = tn_add(u->old, g);
    }
    if (u->g && (!u->old || u->sum)) return TN_OK;
    tn__cell_update_drop(u);
    return tn_last_status();
}

void tn__cell_update_drop(tn_cell_update *u) {
    tn_release(u->sum);
    tn_release(u->old);
    tn_release(u->g);
    tn__cell_release(u->cell);
    *u = (tn_cell_update){0};
}

tn_status tn__cell_commit(tn_cell_update *u, bool create_graph) {
    tn_grad_cell *c = u->cell;
    if (create_graph) {
        /* Install the sum made at prepare if the cell still holds what it was
         * made from. acq_rel: pairs with the installers' release (the tensor
         * we take back) and publishes ours to the next reader, as in
         * tn__cell_accumulate. */
        tn_tensor *expected = u->old, *mine = u->sum ? u->sum : u->g;
        if (atomic_compare_exchange_strong_explicit(&c->grad, &expected, mine,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
            if (u->old) {
                tn__cell_release_taken(c, u->old); /* the cell's reference */
                u->sum = NULL;
            } else {
                u->g = NULL;
            }
            tn__cell_update_drop(u);
            return TN_OK;
        }
        /* Another thread changed the cell since: accumulate as usual (this
         * one may allocate, and so fail, when threads race on the cell). */
    }
    tn_tensor *g = u->g;
    u->g = NULL;
    tn_status st = tn__cell_accumulate(c, g, create_graph);
    tn__cell_update_drop(u); /* and our strong reference */
    return st;
}
