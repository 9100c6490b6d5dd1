/* Views that follow their base (PyTorch's view + in-place tracking).
 *
 * A view shares its base's version counter. Its history (grad_fn) is made
 * when the view is, from its input's history; an in-place write through the
 * base or through another view of it changes the base's history and moves
 * the shared counter, but not the view's grad_fn. So each view remembers the
 * version at which its history was made or last checked (view_version):
 * when the counter has moved, the history is stale, and before anyone reads
 * it (an op recording the view as input, a save, backward, introspection)
 * it is regenerated from the base's current history: an AsStridedBackward0
 * node with the view's geometry inside the base, as PyTorch's
 * VariableHooks::grad_fn does. requires_grad follows without regeneration
 * (tn__requires_grad: a view requires grad when its base does).
 *
 * Threads: readers of an up-to-date view only load view_version (acquire)
 * and the version. Regeneration is guarded per view by view_busy, a
 * once-guard: the first thread to see the view stale takes it, builds the
 * node, installs it, then publishes view_version (release) and frees the
 * guard; a thread that finds the guard taken waits for it, then finds the
 * view current. The grad_fn replaced is not freed but retired into the
 * meta until the next regeneration, so a thread that loaded it just before
 * (allowed only when it raced with the write that made the view stale)
 * never holds a freed node.
 */
#include <sched.h>
#include <stdio.h>

#include "autograd_internal.h"

tn_status tn__no_grad_view_error(const tn_tensor *t, bool indirect) {
    const tn_node *fn = tn__grad_fn(t);
    if (t->view_mode == TN_VIEW_MULTI) { /* PyTorch's MULTI_OUTPUT_NODE texts */
        char head[160];
        if (fn)
            snprintf(head, sizeof head, "Output %d of %s is a view and", t->ag->output_nr,
                     fn->fn->name);
        else
            snprintf(head, sizeof head, "A view was created in no_grad mode and");
        return tn__error(TN_ERR_AUTOGRAD,
                         "%s %s modified inplace%s. This view is the output of a function that "
                         "returns multiple views. Such functions do not allow the output views "
                         "to be modified inplace. You should replace the inplace operation by an "
                         "out-of-place one.",
                         head, indirect ? "its base or another view of its base has been" : "is being",
                         fn ? "" : " with grad mode enabled");
    }
    char prefix[160];
    if (fn) /* a view of a view made in no-grad mode, itself made with grad mode on */
        snprintf(prefix, sizeof prefix, "Output %d of %s is a view of a view which was created in",
                 t->ag->output_nr, fn->fn->name);
    else
        snprintf(prefix, sizeof prefix, "A view was created in");
    bool inf = t->view_mode == TN_VIEW_INFERENCE;
    return tn__error(TN_ERR_AUTOGRAD,
                     "%s %s mode and %s modified inplace %s. Given that this use case is "
                     "ambiguous and error-prone, it is forbidden. You can clarify your code by "
                     "moving both the view and the inplace either both inside the %s block (if "
                     "you don't want the inplace to be tracked) or both outside (if you want the "
                     "inplace to be tracked).",
                     prefix, inf ? "inference" : "no_grad",
                     indirect ? "its base or another view of its base has been" : "is being",
                     inf ? "in normal mode" : "with grad mode enabled",
                     inf ? "inference_mode" : "no_grad");
}

/* The new history of stale view t (the guard held). */
static tn_status regenerate(tn_tensor *t) {
    const tn_tensor *base = t->view_base;
    tn_node *old = tn__grad_fn(t);
    /* Nothing to follow: no history of its own, and the base has none. */
    if (!old && !tn__requires_grad(base)) return TN_OK;
    if (t->view_mode != TN_VIEW_GRAD) return tn__no_grad_view_error(t, true);
    tn_node *as = tn__as_strided_node(t, base);
    if (!as) return tn_last_status();
    tn__node_retain(old); /* set_output drops the view's reference: retire it instead */
    tn_status st = tn__node_set_output(as, t, 0);
    tn__node_release(as); /* t holds it now (or it failed and goes) */
    if (st < 0) {
        tn__node_release(old);
        return st;
    }
    tn__node_release(t->ag->retired);
    t->ag->retired = old;
    return TN_OK;
}

tn_status tn__view_sync_slow(tn_tensor *t) {
    /* acquire: pairs with the release that frees the guard, so the winner's
     * history is visible to the next holder. */
    while (atomic_exchange_explicit(&t->view_busy, 1, memory_order_acquire))
        sched_yield();
    uint64_t cur = tn__version_get(t);
    tn_status st = TN_OK;
    if (atomic_load_explicit(&t->view_version, memory_order_relaxed) != cur) {
        st = regenerate(t);
        /* release: pairs with the acquire load in tn__view_stale */
        if (st == TN_OK) atomic_store_explicit(&t->view_version, cur, memory_order_release);
    }
    atomic_store_explicit(&t->view_busy, 0, memory_order_release);
    return st;
}

void tn__view_mark_current(tn_tensor *t) {
    /* release: pairs with the acquire load in tn__view_stale (the history
     * was just set by this thread, which the user serialises with readers) */
    atomic_store_explicit(&t->view_version, tn__version_get(t), memory_order_release);
}
