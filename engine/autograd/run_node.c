/* One node's turn in a backward pass: its output gradients summed from its
 * inboxes (zeros for outputs that got none), their hooks, its saved tensors
 * taken under the lifetime rules of engine.c, its backward function, and
 * each input's gradient summed to the input's shape and sent along its
 * edge. */
#include <stdlib.h>

#include "engine_internal.h"

/* ---- saved tensors: the lifetime rules of engine.c's header -------------------------- */

static tn_status second_time_error(void) {
    return tn__error(TN_ERR_AUTOGRAD,
                     "Trying to backward through the graph a second time (or directly access "
                     "saved tensors after they have already been freed). Saved intermediate values "
                     "of the graph are freed when you call .backward() or autograd.grad(). Specify "
                     "retain_graph=True if you need to backward through the graph a second time or "
                     "if you need to access saved tensors after calling backward.");
}

static void saved_put(tn_node *n) {
    /* acq_rel: the last user's release orders its reads of the saved
     * tensors before the free done by whoever reaches zero. */
    int64_t old = atomic_fetch_sub_explicit(&n->saved_refs, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old == 1) tn__node_free_saved(n);
}

static tn_status saved_get(tn_node *n, bool retain_graph) {
    if (!n->has_saved) return TN_OK;
    if (!retain_graph && atomic_exchange_explicit(&n->claimed, true, memory_order_acq_rel))
        return second_time_error();
    int64_t c = atomic_load_explicit(&n->saved_refs, memory_order_acquire);
    do {
        if (c == 0) return second_time_error();
        /* acquire on success: pairs with the release of the saver/previous
         * user so the saved tensors are fully visible. */
    } while (!atomic_compare_exchange_weak_explicit(&n->saved_refs, &c, c + 1, memory_order_acquire,
                                                    memory_order_acquire));
    return TN_OK;
}

/* n's saved tensors for this run, and those of the in-place node a
 * CopySlices runs the backward of; all or none. */
static tn_status saved_take(const tn_run *r, tn_node *n) {
    tn_node *inner = n->inner;
    tn_status st = saved_get(n, r->retain_graph);
    if (st < 0 && tn__anomaly_enabled()) tn__hooks.backward_error(n, st);
    if (st == TN_OK && inner && (st = saved_get(inner, r->retain_graph)) < 0 && n->has_saved) {
        saved_put(n);
        if (!r->retain_graph) saved_put(n);
    }
    return st;
}

/* Gives back what saved_take took. */
static void saved_drop(const tn_run *r, tn_node *n) {
    tn_node *inner = n->inner;
    for (tn_node *m = n; m; m = m == n ? inner : NULL) {
        if (!m->has_saved) continue;
        saved_put(m);
        if (!r->retain_graph) saved_put(m); /* the graph's reference (claimed) */
    }
}

/* ---- gradients in ------------------------------------------------------------------- */

/* The node's output gradients from its inboxes; functional mode captures
 * those of requested non-leaf inputs here, at their grad_fn. */
static tn_status take_grads(tn_run *r, node_state *s) {
    tn_node *n = s->node;
    tn_status st;
    for (int k = 0; k < n->n_out; k++)
        if ((st = tn__inbox_take(&s->inbox[k], &s->inbuf[k])) < 0) return st;
    for (int k = 0; r->functional && k < r->n_inputs; k++) {
        const tn_tensor *t = r->inputs[k];
        if (tn__grad_fn(t) == n && s->inbuf[t->ag->output_nr]) {
            tn_tensor *g = s->inbuf[t->ag->output_nr];
            if ((st = tn__buffer_add(&r->grads_out[k], tn__retain(g))) < 0) return st;
        }
    }
    return TN_OK;
}

static bool any_grad(const node_state *s) {
    bool any = false;
    for (int k = 0; k < s->node->n_out; k++)
        any |= s->inbuf[k] != NULL;
    return any;
}

/* Zeros for the outputs that got no gradient, then each output's tensor
 * hooks with the retain_grad capture at its place, then the node's
 * pre-hooks. */
static tn_status prepare_outputs(tn_run *r, node_state *s, bool hooked) {
    tn_node *n = s->node;
    tn_status st = TN_OK;
    for (int k = 0; k < n->n_out; k++) {
        bool none = !s->inbuf[k];
        if (none) {
            tn_input_meta *m = &n->out_meta[k];
            s->inbuf[k] = tn__zeros_on(m->ndim, m->shape, m->dtype, m->device);
            if (!s->inbuf[k]) return tn_last_status();
        }
        retain_arg ra = {r, n, k};
        tn_grad_cell *rc = atomic_load_explicit(&n->retained[k], memory_order_acquire);
        if (hooked) /* tensor hooks, with the retain_grad capture at its place */
            st = tn__run_output_hooks(n, k, &s->inbuf[k], none,
                                      rc && !r->functional ? tn__capture_retained : NULL, &ra);
        else if (rc && !r->functional)
            st = tn__capture_retained(&ra, s->inbuf[k]);
        if (st < 0) return st;
    }
    return hooked ? tn__run_prehooks(n, s->inbuf) : TN_OK;
}

/* ---- backward and gradients out ------------------------------------------------------ */

/* n's backward function, with anomaly mode's checks around it. */
static tn_status call_backward(tn_node *n, tn_tensor *const *grads, tn_tensor **gin) {
    bool anomaly = tn__anomaly_enabled();
    tn_node *prev_running = anomaly ? tn__hooks.set_running(n) : NULL;
    tn_status st = n->fn->backward(n, grads, gin);
    if (anomaly) tn__hooks.set_running(prev_running);
    if (st == TN_OK && anomaly && tn__anomaly_nan()) st = tn__hooks.check_backward(n, grads, gin);
    if (st < 0 && anomaly) tn__hooks.backward_error(n, st);
    return st;
}

/* Each input's gradient summed to its shape and dtype, on its device (st:
 * the backward's status; after a failure the gradients are only dropped). */
static tn_status shape_input_grads(tn_node *n, tn_tensor **gin, tn_status st) {
    for (int i = 0; i < n->n_in; i++) {
        tn_tensor *g = gin[i], *h = NULL;
        if (!g) continue;
        if (st == TN_OK && tn__edge_valid(&n->edges[i])) {
            tn_input_meta *m = &n->in_meta[i];
            h = tn__sum_to(g, m->ndim, m->shape, m->dtype);
            if (h && !tn__same_device(tn__dev(h), m->device)) { /* copy_ across devices */
                tn_tensor *x = tn__to_autograd(h, h->dtype, m->device);
                tn_release(h);
                h = x;
            }
            if (!h) st = tn_last_status();
        }
        tn_release(g);
        gin[i] = h;
    }
    return st;
}

/* Sends gin (consumed) along n's edges, or drops it once st is an error. */
static tn_status send_input_grads(tn_run *r, tn_node *n, tn_tensor **gin, tn_status st) {
    for (int i = 0; i < n->n_in; i++) {
        if (!gin[i]) continue;
        if (st == TN_OK)
            st = tn__send(r, &n->edges[i], gin[i], n->seq, i);
        else
            tn_release(gin[i]);
    }
    return st;
}

static tn_status backward_and_send(tn_run *r, node_state *s, bool hooked) {
    tn_node *n = s->node;
    tn_tensor *stack_gin[8];
    tn_tensor **gin = n->n_in <= 8 ? stack_gin : tn__calloc_quiet((size_t)n->n_in, sizeof *gin);
    if (!gin) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    memset(gin, 0, (size_t)n->n_in * sizeof *gin);
    double t0 = tn__prof_start(); /* the profiler: the node's span */
    tn_status st = shape_input_grads(n, gin, call_backward(n, s->inbuf, gin));
    if (TN_UNLIKELY(t0 > 0)) tn__hooks.prof_node(n->fn->name, n->seq, t0);
    if (st == TN_OK && r->monitor) tn__hooks.monitor_node(r->monitor, n, gin);
    if (st == TN_OK && TN_UNLIKELY(tn__numerics_on())) tn__hooks.num_node(n, s->inbuf, gin);
    if (st == TN_OK && hooked) st = tn__run_posthooks(n, gin, s->inbuf);
    st = send_input_grads(r, n, gin, st);
    if (gin != stack_gin) tn__mfree(gin);
    return st;
}

tn_status tn__run_node(tn_run *r, node_state *s) {
    tn_node *n = s->node;
    tn_status st = take_grads(r, s);
    if (st < 0) return st;
    if (r->functional && !s->needed) return TN_OK;
    if (!any_grad(s)) return TN_OK; /* nothing flows through: children get nothing */
    bool hooked = tn__has_hooks(&n->hooks);
    if ((st = prepare_outputs(r, s, hooked)) < 0) return st;
    if ((st = saved_take(r, n)) < 0) return st;
    st = backward_and_send(r, s, hooked);
    saved_drop(r, n);
    return st;
}
