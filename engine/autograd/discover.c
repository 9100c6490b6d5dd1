/* Discovery: the nodes a backward pass reaches from its roots, how many
 * edges point to each (a node runs once they all delivered), and the cells
 * their gradients end in; in functional mode (tn_autograd_grad), which
 * nodes lead to a requested input at all. Single-threaded, before any node
 * runs. */
#include <stdlib.h>

#include "engine_internal.h"

/* Registers n's retain_grad cells: like leaves' cells, they are fed at the
 * end of the run (tn__deliver_cells), so a failed run changes no .grad. */
static tn_status note_retained(tn_run *r, tn_node *n) {
    for (int k = 0; k < n->n_out && !r->functional; k++) {
        tn_grad_cell *rc = atomic_load_explicit(&n->retained[k], memory_order_acquire);
        if (rc && tn__run_cell_insert(r, rc) < 0) return TN_ERR_OUT_OF_MEMORY;
    }
    return TN_OK;
}

tn_status tn__discover(tn_run *r, int n_roots, tn_node *const *roots) {
    size_t cap = 64 + (size_t)n_roots, top = 0;
    tn_node **stack = tn__malloc_quiet(cap * sizeof *stack);
    if (!stack) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    for (int i = 0; i < n_roots; i++) {
        bool fresh;
        if (!roots[i]) continue;
        if (!tn__run_insert(r, roots[i], &fresh)) goto oom;
        if (fresh) stack[top++] = roots[i];
    }
    while (top) {
        tn_node *n = stack[--top];
        if (note_retained(r, n) < 0) goto oom;
        for (int i = 0; i < n->n_in; i++) {
            if (n->edges[i].cell) {
                if (tn__run_cell_insert(r, n->edges[i].cell) < 0) goto oom;
                /* relaxed: discovery is single-threaded, before any node runs */
                atomic_fetch_add_explicit(&tn__run_cell_lookup(r, n->edges[i].cell)->pending, 1,
                                          memory_order_relaxed);
            }
            tn_node *c = n->edges[i].node;
            if (!c) continue;
            bool fresh;
            node_state *s = tn__run_insert(r, c, &fresh);
            if (!s) goto oom;
            s->deps++;
            if (!fresh) continue;
            if (top == cap) {
                tn_node **ns = tn__realloc(stack, cap * 2 * sizeof *stack);
                if (!ns) goto oom;
                stack = ns;
                cap *= 2;
            }
            stack[top++] = c;
        }
    }
    tn__mfree(stack);
    return TN_OK;
oom:
    tn__mfree(stack);
    return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
}

/* Functional mode: a node is needed when it leads to a requested input. */
static bool is_capture_cell(const tn_run *r, const tn_grad_cell *c) {
    for (int i = 0; i < r->n_inputs; i++) {
        const tn_tensor *t = r->inputs[i];
        if (tn__leaf_cell(t) == c) return true;
    }
    return false;
}

static bool feeds_input(const tn_run *r, const tn_edge *e) {
    if (e->cell) return is_capture_cell(r, e->cell);
    if (!e->node) return false; /* an empty edge (an input that needs no grad) feeds nothing */
    for (int k = 0; k < r->n_inputs; k++) {
        const tn_tensor *t = r->inputs[k];
        if (tn__grad_fn(t) == e->node) return true;
    }
    return false;
}

/* Kahn order from the roots, then a reverse sweep: children before parents. */
tn_status tn__mark_needed(tn_run *r) {
    tn_node **order = tn__malloc_quiet((r->count + 1) * sizeof *order);
    if (!order) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < r->cap; i++) {
        r->tab[i].tmp = r->tab[i].deps;
        if (r->tab[i].node && r->tab[i].deps == 0) order[tail++] = r->tab[i].node;
    }
    while (head < tail) {
        tn_node *n = order[head++];
        for (int i = 0; i < n->n_in; i++) {
            tn_node *c = n->edges[i].node;
            if (c && --tn__run_lookup(r, c)->tmp == 0) order[tail++] = c;
        }
    }
    while (tail > 0) {
        tn_node *n = order[--tail];
        bool need = false;
        for (int i = 0; i < n->n_in && !need; i++) {
            const tn_edge *e = &n->edges[i];
            need = feeds_input(r, e) || (e->node && tn__run_lookup(r, e->node)->needed);
        }
        tn__run_lookup(r, n)->needed = need;
    }
    tn__mfree(order);
    return TN_OK;
}
