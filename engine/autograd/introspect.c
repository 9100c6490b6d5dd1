/* Graph introspection: grad_fn, node names, next_functions (PyTorch's
 * Tensor.grad_fn and Node.next_functions). Nodes go out as new references;
 * a leaf's gradient edge is PyTorch's AccumulateGrad, which tenet keeps as a
 * gradient cell, not a node: it is named, and compared with a leaf. */
#include "autograd_internal.h"

tn_node *tn_grad_fn(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "t");
    if (tn__view_sync(t) < 0) return NULL;
    tn_node *n = tn__grad_fn(t);
    tn__node_retain(n);
    return n;
}

tn_node *tn_node_retain(tn_node *n) {
    tn__node_retain(n);
    return n;
}

void tn_node_release(tn_node *n) { tn__node_release(n); }

const char *tn_node_name(const tn_node *n) {
    TN_CHECK_NULL_PTR(n, "n");
    return n->fn->name;
}

int tn_node_num_next(const tn_node *n) {
    if (!n) {
        tn__null_arg(false, "%s: argument 'n' is NULL", __func__);
        return -1;
    }
    return n->n_in;
}

static const tn_edge *edge_at(const tn_node *n, int i, const char *who) {
    if (!n) {
        tn__null_arg(false, "%s: argument 'n' is NULL", who);
        return NULL;
    }
    if (i < 0 || i >= n->n_in) {
        tn__error(TN_ERR_INDEX, "%s: index %d is out of range for %s, which has %d next "
                  "functions", who, i, n->fn->name, n->n_in);
        return NULL;
    }
    return &n->edges[i];
}

tn_node *tn_node_next(const tn_node *n, int i, int *input_nr) {
    const tn_edge *e = edge_at(n, i, __func__);
    if (!e) return NULL;
    if (input_nr) *input_nr = e->node ? e->input_nr : 0;
    tn__node_retain(e->node);
    return e->node;
}

const char *tn_node_next_name(const tn_node *n, int i) {
    const tn_edge *e = edge_at(n, i, __func__);
    if (!e) return NULL;
    if (e->node) return e->node->fn->name;
    return e->cell ? "AccumulateGrad" : NULL;
}

bool tn_node_next_is_leaf(const tn_node *n, int i, const tn_tensor *leaf) {
    const tn_edge *e = edge_at(n, i, __func__);
    if (!e || !leaf) {
        if (e) tn__null_arg(true, "%s: argument 'leaf' is NULL", __func__);
        return false;
    }
    return e->cell && e->cell == tn__leaf_cell(leaf);
}
