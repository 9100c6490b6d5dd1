/* Where a backward pass's gradients go: along an edge into the next node's
 * inbox or a leaf cell's; a cell's hooks once its last producer ran
 * (PyTorch's AccumulateGrad time); and, at the end of the pass, every cell's
 * sum into its .grad (or into tn_autograd_grad's results), all or none. */
#include <stdlib.h>

#include "engine_internal.h"

tn_status tn__buffer_add(tn_tensor **slot, tn_tensor *g) {
    if (!*slot) {
        *slot = g;
        return TN_OK;
    }
    tn_tensor *sum = tn_add(*slot, g);
    tn_release(g);
    if (!sum) return tn_last_status();
    tn_release(*slot);
    *slot = sum;
    return TN_OK;
}

static int capture_index_cell(const tn_run *r, const tn_grad_cell *c) {
    for (int i = 0; i < r->n_inputs; i++) {
        const tn_tensor *t = r->inputs[i];
        if (tn__leaf_cell(t) == c) return i;
    }
    return -1;
}

tn_status tn__send(tn_run *r, const tn_edge *e, tn_tensor *g, uint64_t seq, int edge) {
    if (e->cell) return tn__inbox_push(&tn__run_cell_lookup(r, e->cell)->inbox, g, seq, edge);
    node_state *s = tn__run_lookup(r, e->node);
    TN_ASSERT(s->node == e->node && e->input_nr >= 0 && e->input_nr < s->node->n_out);
    return tn__inbox_push(&s->inbox[e->input_nr], g, seq, edge);
}

/* The graph holds cells weakly: accumulate g (consumed) into c while its
 * tensor lives; a gradient for a tensor that is gone is dropped. */
static tn_status accumulate_weak(tn_grad_cell *c, tn_tensor *g, bool create_graph) {
    if (!tn__cell_try_retain(c)) {
        tn_release(g);
        return TN_OK;
    }
    tn_status st = tn__cell_accumulate(c, g, create_graph);
    tn__cell_release(c);
    return st;
}

/* Each leaf's gradient, summed in order, into its .grad (or into grads_out
 * for tn_autograd_grad). Every cell's update is prepared (all allocations)
 * before any is committed, so a failed run changes no .grad. */
tn_status tn__deliver_cells(tn_run *r) {
    tn_status st = TN_OK;
    for (size_t i = 0; i < r->cell_cap && st == TN_OK; i++) {
        cell_state *cs = &r->cells[i];
        tn_tensor *g = NULL;
        if (!cs->cell) continue;
        if (cs->ready) { /* taken, hooks run, when its last producer finished */
            g = cs->ready_g;
            cs->ready_g = NULL;
            if (!g) continue;
        } else if ((st = tn__inbox_take(&cs->inbox, &g)) < 0 || !g) {
            continue;
        }
        if (!r->functional) {
            if (!cs->ready && tn__has_hooks(&cs->cell->hooks) &&
                (st = tn__run_cell_hooks(cs->cell, &g)) < 0) {
                tn_release(g);
                break;
            }
            if (r->monitor) tn__hooks.monitor_leaf(r->monitor, cs->cell, g);
            st = tn__cell_prepare(cs->cell, g, r->create_graph, &cs->up);
            continue;
        }
        int k = capture_index_cell(r, cs->cell);
        if (k < 0)
            tn_release(g);
        else
            st = tn__buffer_add(&r->grads_out[k], g);
    }
    for (size_t i = 0; i < r->cell_cap && st == TN_OK; i++) {
        cell_state *cs = &r->cells[i];
        if (cs->up.cell) {
            st = tn__cell_commit(&cs->up, r->create_graph);
            cs->committed = st == TN_OK;
        }
    }
    /* post-accumulate hooks, once every .grad of the pass is in place */
    for (size_t i = 0; i < r->cell_cap && st == TN_OK; i++) {
        tn_grad_cell *c = r->cells[i].cell;
        if (c && r->cells[i].committed && tn__has_hooks(&c->hooks)) st = tn__run_post_accumulate(c);
    }
    return st;
}

tn_status tn__capture_retained(void *arg, tn_tensor *g) {
    retain_arg *a = arg;
    tn_run *r = a->r;
    tn_grad_cell *rc = atomic_load_explicit(&a->n->retained[a->k], memory_order_acquire);
    if (!rc) return TN_OK;
    cell_state *cs = r->cell_cap ? tn__run_cell_lookup(r, rc) : NULL;
    if (cs && cs->cell == rc) /* registered at discovery: delivered at the end */
        return tn__inbox_push(&cs->inbox, tn__retain(g), a->n->seq, a->k);
    /* retain_grad called while this run was going */
    return accumulate_weak(rc, tn__retain(g), r->create_graph);
}

/* Every producer of leaf cell cs has run: its gradient for the pass is
 * final. Take it and run the cell's hooks now, as PyTorch runs a leaf's
 * hooks when its AccumulateGrad node runs (DDP launches a bucket's
 * allreduce from there); .grad itself is still updated at the end of the
 * pass (tn__deliver_cells), all cells or none. */
static tn_status cell_ready(tn_run *r, cell_state *cs) {
    if (r->functional || !tn__has_hooks(&cs->cell->hooks)) return TN_OK;
    tn_tensor *g = NULL;
    tn_status st = tn__inbox_take(&cs->inbox, &g);
    if (st == TN_OK && g) st = tn__run_cell_hooks(cs->cell, &g);
    if (st < 0) {
        tn_release(g);
        return st;
    }
    cs->ready_g = g;
    cs->ready = true;
    return TN_OK;
}

tn_status tn__node_done(tn_run *r, const tn_node *n) {
    tn_status st = TN_OK;
    for (int i = 0; i < n->n_in && st == TN_OK; i++) {
        tn_grad_cell *c = n->edges[i].cell;
        if (!c || r->functional) continue;
        cell_state *cs = tn__run_cell_lookup(r, c);
        /* acq_rel: our sends into the cell's inbox happen before the last
         * producer's take (it acquires every earlier producer's release). */
        TN_ASSERT(cs->cell == c);
        int old = atomic_fetch_sub_explicit(&cs->pending, 1, memory_order_acq_rel);
        TN_ASSERT(old > 0);
        if (old == 1) st = cell_ready(r, cs);
    }
    return st;
}
