/* The backward engine: discovers the graph from the roots, counts
 * dependencies, runs nodes whose gradients are complete (latest-created
 * first, as PyTorch), unpacks saved tensors with the version check and
 * accumulates into leaves.
 *
 * All per-run state (dependency counts, gradient buffers) lives in a hash
 * table local to the call, so any number of threads may run backward through
 * the same graph at once. The only shared state touched is each node's
 * saved-tensor lifetime (saved_refs/claimed, below) and the leaves' cells
 * (lock-free accumulation, accumulate.c).
 *
 * Saved-tensor lifetime. saved_refs starts at 1: the graph's own reference.
 * A backward that needs the tensors takes a reference (CAS from r > 0 to
 * r + 1; r == 0 means freed: "backward through the graph a second time").
 * Without retain_graph a run first claims the node (exchange on `claimed`):
 * only one run may claim it, the others fail with the same error; the
 * claimant drops the graph's reference after use. Whoever drops the count to
 * 0 frees the tensors, so a concurrent retain_graph reader never sees them
 * freed under it.
 *
 * Gradients travel through inboxes (inbox.h): each node output and each
 * leaf cell reached gets one, summed in a fixed order when its consumer
 * runs, so results do not depend on which thread delivered first. With
 * tn_set_parallel_backward(true), independent branches of one graph run as
 * OpenMP tasks: dependency counts are atomics, the thread that brings a
 * node's count to zero runs it, and the results are bit-identical to the
 * serial order. Leaf gradients are accumulated once per run, at its end.
 *
 * The jobs of a pass are in files of their own (engine_internal.h lists
 * them); this one runs the pass from start to end, seeds the roots'
 * gradients, and runs the callbacks queued for its end.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine_internal.h"

_Thread_local tn_run *tn__tls_run;

static tn_status run_callbacks(tn_run *r, tn_status st) __attribute__((noinline));

/* Sends each root's seed gradient (rn: the roots' grad_fns, NULL for a
 * leaf root) into its node's inbox or its leaf's cell. */
static tn_status seed_roots(tn_run *r, int n_roots, tn_tensor *const *roots,
                            tn_tensor *const *grads, tn_node *const *rn) {
    tn_status st = TN_OK;
    for (int i = 0; st == TN_OK && i < n_roots; i++) {
        tn_edge e = {.node = rn[i], .cell = rn[i] ? NULL : tn__leaf_cell(roots[i]),
                     .input_nr = rn[i] ? roots[i]->ag->output_nr : 0};
        if (!tn__edge_valid(&e)) continue; /* a view made in no-grad mode: leads nowhere */
        tn_tensor *g = tn__retain(grads[i]);
        if (!rn[i]) { /* a leaf root: its gradient is the seed itself */
            st = tn__run_cell_insert(r, e.cell);
            tn_tensor *h = st == TN_OK ? tn__copy_as(g, roots[i]->dtype) : NULL;
            tn_release(g);
            if (!(g = h)) st = tn_last_status();
        } else if (g->dtype != roots[i]->dtype) {
            /* the seed in the output's dtype, as PyTorch's engine casts it (validate_outputs):
             * a node's backward reads its gradients in the dtype it recorded */
            tn_tensor *h = tn__copy_as(g, roots[i]->dtype);
            tn_release(g);
            if (!(g = h)) st = tn_last_status();
        }
        if (st == TN_OK) st = tn__send(r, &e, g, UINT64_MAX, i);
    }
    return st;
}

tn_status tn__run_backward(int n_roots, tn_tensor *const *roots, tn_tensor *const *grads,
                           bool retain_graph, bool create_graph, int n_inputs,
                           tn_tensor *const *inputs, tn_tensor **grads_out) {
    tn_run r = {.retain_graph = retain_graph, .create_graph = create_graph,
                .functional = inputs != NULL, .n_inputs = n_inputs, .inputs = inputs,
                .grads_out = grads_out};
    tn_node *stack_roots[8];
    tn_node **rn = n_roots <= 8 ? stack_roots : tn__calloc_quiet((size_t)n_roots, sizeof *rn);
    if (!rn) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    bool prev_mode = tn_set_grad_enabled(create_graph);
    uint8_t prev_autocast = tn__autocast_on; /* backward ops keep their forward's dtypes */
    tn__autocast_on = 0;
    tn_run *prev_run = tn__tls_run;
    tn__tls_run = &r;
    tn__internal_enter();
    tn_status st = TN_OK;
    /* stale views first: their histories are read below and while running */
    for (int i = 0; st == TN_OK && i < n_roots; i++)
        st = tn__view_sync(roots[i]);
    for (int i = 0; st == TN_OK && i < n_inputs; i++)
        st = tn__view_sync(inputs[i]);
    for (int i = 0; i < n_roots; i++)
        rn[i] = st == TN_OK ? tn__grad_fn(roots[i]) : NULL;
    if (st == TN_OK) st = tn__run_grow(&r);
    if (st == TN_OK && !r.functional && TN_UNLIKELY(tn__monitor_on()))
        r.monitor = tn__hooks.monitor_begin();
    if (st == TN_OK) st = tn__discover(&r, n_roots, rn);
    if (st == TN_OK && r.functional) st = tn__mark_needed(&r);
    if (st == TN_OK) st = seed_roots(&r, n_roots, roots, grads, rn);
    if (st == TN_OK) st = tn__run_graph(&r);
    /* device NaN checks: a synchronisation point of every device */
    if (st == TN_OK && (tn__anomaly_nan() || tn__nf_any_batched()))
        st = tn__hooks.poll_devices(true);
    if (st == TN_OK) st = tn__deliver_cells(&r);
    if (r.monitor) tn__hooks.monitor_end(r.monitor, st);
    tn__run_free(&r);
    if (rn != stack_roots) tn__mfree(rn);
    /* inside backward, as hooks (each in a callback frame). Relaxed: this thread is the only
     * one left in the pass (the workers joined); run_callbacks acquires what it takes. */
    if (atomic_load_explicit(&r.callbacks, memory_order_relaxed)) st = run_callbacks(&r, st);
    tn__internal_leave();
    tn_set_grad_enabled(prev_mode);
    tn__autocast_on = prev_autocast;
    tn__tls_run = prev_run;
    return st;
}

/* ---- callbacks at the end of the pass --------------------------------------------- */

tn_status tn_backward_queue_callback(tn_backward_callback_fn fn, void *ctx) {
    tn_run *r = tn__tls_run;
    if (!fn) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_backward_queue_callback: fn is NULL");
    if (!r)
        return tn__error(TN_ERR_AUTOGRAD,
                         "Final callbacks can only be installed during backward pass.");
    queued_cb *q = tn__malloc_quiet(sizeof *q);
    if (!q) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in tn_backward_queue_callback");
    q->fn = fn;
    q->ctx = ctx;
    q->next = atomic_load_explicit(&r->callbacks, memory_order_relaxed);
    /* release: q's fields are visible to the acquire exchange in run_callbacks */
    while (!atomic_compare_exchange_weak_explicit(&r->callbacks, &q->next, q,
                                                  memory_order_release, memory_order_relaxed)) {
    }
    return TN_OK;
}

/* Runs the queued callbacks in queue order, on the thread that ran the pass,
 * after every .grad was updated (or the pass failed: st says which). A
 * callback may queue more; they run after it. The first failure becomes the
 * pass's status when it had none. */
__attribute__((noinline)) /* its message buffer stays off backward's frame (reentrant passes nest) */
static tn_status run_callbacks(tn_run *r, tn_status st) {
    queued_cb *list;
    char saved[1024]; /* a failed pass's message, kept from the callbacks' own calls */
    bool have_saved = false;
    tn_status failed = st;
    /* acquire: pairs with the release CAS of each push */
    while ((list = atomic_exchange_explicit(&r->callbacks, NULL, memory_order_acquire))) {
        if (failed < 0 && !have_saved) {
            snprintf(saved, sizeof saved, "%s", tn_last_error());
            have_saved = true;
        }
        queued_cb *fifo = NULL;
        while (list) { /* newest first -> queue order */
            queued_cb *next = list->next;
            list->next = fifo;
            fifo = list;
            list = next;
        }
        while (fifo) {
            queued_cb *next = fifo->next;
            tn__callback_frame cf;
            tn__callback_enter(&cf);
            tn_status cst = fifo->fn(st, fifo->ctx);
            cst = tn__callback_leave(&cf, cst, 0, NULL, "a backward callback");
            if (cst < 0 && st == TN_OK) st = cst;
            tn__mfree(fifo);
            fifo = next;
        }
    }
    if (have_saved) tn__error(failed, "%s", saved);
    return st;
}
