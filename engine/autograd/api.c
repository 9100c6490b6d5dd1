/* Public autograd API: requires_grad_, retain_grad, backward, grad access. */
#include "../ops/ops_internal.h"

tn_status tn_requires_grad_(tn_tensor *t, bool requires_grad) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    if (t->ag && t->ag->grad_fn) {
        if (requires_grad) return TN_OK;
        return tn__error(TN_ERR_AUTOGRAD,
                         "you can only change requires_grad flags of leaf variables. If you want "
                         "to use a computed variable in a subgraph that doesn't require "
                         "differentiation use var_no_grad = var.detach().");
    }
    if (requires_grad && !tn__is_float(t->dtype))
        return tn__error(TN_ERR_DTYPE,
                         "Only Tensors of floating point and complex dtype can require gradients");
    if (!requires_grad && !t->ag) return TN_OK;
    tn_autograd_meta *m = tn__meta_get_or_create(t);
    if (!m) return TN_ERR_OUT_OF_MEMORY;
    if (requires_grad && !m->cell) {
        m->cell = tn__cell_new();
        if (!m->cell) return TN_ERR_OUT_OF_MEMORY;
    }
    m->requires_grad = requires_grad;
    return TN_OK;
}

tn_status tn_retain_grad(tn_tensor *t) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    if (!tn__requires_grad(t))
        return tn__error(TN_ERR_AUTOGRAD,
                         "can't retain_grad on Tensor that has requires_grad=False");
    tn_autograd_meta *m = t->ag;
    if (!m->grad_fn || m->retains_grad) return TN_OK;
    if (!m->cell) {
        m->cell = tn__cell_new();
        if (!m->cell) return TN_ERR_OUT_OF_MEMORY;
    }
    m->retains_grad = true;
    tn__cell_retain(m->cell);
    tn_grad_cell *prev = atomic_exchange_explicit(&m->grad_fn->retained[m->output_nr], m->cell,
                                                  memory_order_acq_rel);
    tn__cell_release(prev);
    return TN_OK;
}

static tn_status check_root(const tn_tensor *t, int index) {
    if (!tn__requires_grad(t))
        return tn__error(TN_ERR_AUTOGRAD,
                         "element %d of tensors does not require grad and does not have a grad_fn",
                         index);
    return TN_OK;
}

/* The seed gradient: ones for a scalar, else the caller's (shape checked). */
static tn_tensor *seed_grad(const tn_tensor *t, const tn_tensor *grad, int index) {
    if (!grad) {
        if (tn__numel(t->ndim, t->shape) != 1) {
            tn__error(TN_ERR_SHAPE, "grad can be implicitly created only for scalar outputs");
            return NULL;
        }
        return tn__full_on(t->ndim, t->shape, t->dtype, 1.0, t->storage->device);
    }
    if (!tn__same_shape(t, grad)) {
        char a[160], b[160];
        tn__format_shape(a, sizeof a, grad->ndim, grad->shape);
        tn__format_shape(b, sizeof b, t->ndim, t->shape);
        tn__error(TN_ERR_SHAPE,
                  "Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] has a "
                  "shape of %s.",
                  index, a, index, b);
        return NULL;
    }
    return tn__retain((tn_tensor *)grad);
}

tn_status tn_backward_ex(tn_tensor *t, const tn_tensor *grad, bool retain_graph,
                         bool create_graph) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    tn_status st = check_root(t, 0);
    if (st < 0) return st;
    tn_tensor *g = seed_grad(t, grad, 0);
    if (!g) return tn_last_status();
    st = tn__run_backward(1, &t, &g, retain_graph || create_graph, create_graph, 0, NULL, NULL);
    tn_release(g);
    return st;
}

tn_status tn_backward(tn_tensor *t, const tn_tensor *grad, bool retain_graph) {
    return tn_backward_ex(t, grad, retain_graph, false);
}

tn_status tn_autograd_grad(int n_out, tn_tensor *const *outputs, tn_tensor *const *grad_outputs,
                           int n_in, tn_tensor *const *inputs, tn_tensor **grads_out,
                           bool retain_graph, bool create_graph) {
    if (n_out <= 0 || n_in <= 0 || !outputs || !inputs || !grads_out)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_autograd_grad: empty or NULL argument list");
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i])
            return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_autograd_grad: inputs[%d] is NULL", i);
        if (!tn__requires_grad(inputs[i]))
            return tn__error(TN_ERR_AUTOGRAD, "One of the differentiated Tensors does not "
                             "require grad");
    }
    tn_tensor **seeds = tn__calloc_small((size_t)n_out * sizeof *seeds);
    if (!seeds) return TN_ERR_OUT_OF_MEMORY;
    tn_status st = TN_OK;
    for (int i = 0; i < n_out && st == TN_OK; i++) {
        if (!outputs[i])
            st = tn__error(TN_ERR_INVALID_ARGUMENT, "tn_autograd_grad: outputs[%d] is NULL", i);
        else if ((st = check_root(outputs[i], i)) == TN_OK &&
                 !(seeds[i] = seed_grad(outputs[i], grad_outputs ? grad_outputs[i] : NULL, i)))
            st = tn_last_status();
    }
    for (int i = 0; i < n_in; i++) grads_out[i] = NULL;
    if (st == TN_OK)
        st = tn__run_backward(n_out, outputs, seeds, retain_graph || create_graph, create_graph,
                              n_in, inputs, grads_out);
    for (int i = 0; i < n_out; i++) tn_release(seeds[i]);
    tn__free_small(seeds);
    for (int i = 0; i < n_in; i++) {
        if (st < 0) {
            tn_release(grads_out[i]);
            grads_out[i] = NULL;
        } else if (grads_out[i]) {
            tn_tensor *h = tn__sum_to(grads_out[i], inputs[i]->ndim, inputs[i]->shape,
                                      inputs[i]->dtype);
            tn_release(grads_out[i]);
            grads_out[i] = tn__ret(h);
        }
    }
    return st;
}

tn_tensor *tn_grad(tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "t");
    tn_autograd_meta *m = t->ag;
    if (!m) return NULL;
    if (m->grad_fn && !m->retains_grad) {
        if (!atomic_flag_test_and_set_explicit(&m->warned_nonleaf_grad, memory_order_relaxed))
            tn__warn("The .grad attribute of a Tensor that is not a leaf Tensor is being "
                     "accessed. Its .grad attribute won't be populated during backward(). If you "
                     "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                     "tn_retain_grad() on the non-leaf Tensor.");
        return NULL;
    }
    if (!m->cell) return NULL;
    tn_tensor *g = tn__cell_load(m->cell);
    return g ? tn__ret(g) : NULL;
}

/* Whether t is reachable from g through what tensors own besides their
 * history: their view base and their .grad (a view of t, a tensor whose
 * .grad is t, ...). t's cell would then own t: a reference cycle, which
 * refcounting never frees. The walk holds references (tn__cell_load); past
 * TN_OWN_WALK tensors it gives up (no cycle assumed). */
#define TN_OWN_WALK 64
static bool owns(tn_tensor *g, const tn_tensor *t) {
    tn_tensor *todo[TN_OWN_WALK];
    int n = 0, seen = 0;
    bool found = false;
    todo[n++] = tn__retain(g);
    while (n > 0) {
        tn_tensor *x = todo[--n];
        found |= x == t;
        tn_tensor *next[2] = {x->view_base ? tn__retain(x->view_base) : NULL,
                              x->ag && x->ag->cell ? tn__cell_load(x->ag->cell) : NULL};
        for (int k = 0; k < 2; k++) {
            if (next[k] && !found && n < TN_OWN_WALK && ++seen < TN_OWN_WALK) todo[n++] = next[k];
            else tn_release(next[k]);
        }
        tn_release(x);
    }
    return found;
}

tn_status tn_set_grad(tn_tensor *t, tn_tensor *g) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    if (g == t) /* t's cell would own t: a reference cycle */
        return tn__error(TN_ERR_AUTOGRAD, "can't assign Variable as its own grad");
    if (g && owns(g, t))
        return tn__error(TN_ERR_AUTOGRAD,
                         "can't assign as grad a Variable that references the tensor itself (a "
                         "view of it, or a tensor whose grad it is): a reference cycle");
    if (g) {
        if (!tn__same_shape(t, g))
            return tn__error(TN_ERR_SHAPE, "assigned grad has data of a different size");
        if (g->dtype != t->dtype)
            return tn__error(TN_ERR_DTYPE, "assigned grad has data of a different type");
    }
    tn_autograd_meta *m = t->ag;
    if (!m || !m->cell) {
        if (!g) return TN_OK;
        m = tn__meta_get_or_create(t);
        if (!m) return TN_ERR_OUT_OF_MEMORY;
        m->cell = tn__cell_new();
        if (!m->cell) return TN_ERR_OUT_OF_MEMORY;
    }
    if (g) tn__retain(g);
    tn__cell_release_taken(m->cell,
                           atomic_exchange_explicit(&m->cell->grad, g, memory_order_seq_cst));
    return TN_OK;
}

tn_status tn_zero_grad(tn_tensor *t) { return tn_set_grad(t, NULL); }

/* ---- autograd metadata ---------------------------------------------------------------- */

bool tn_requires_grad(const tn_tensor *t) {
    if (!t) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 't' is NULL", __func__);
        return false;
    }
    return tn__requires_grad(t);
}
bool tn_is_leaf(const tn_tensor *t) {
    if (!t) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 't' is NULL", __func__);
        return false;
    }
    return !t->ag || !t->ag->grad_fn;
}
const char *tn_grad_fn_name(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "t");
    return t->ag && t->ag->grad_fn ? t->ag->grad_fn->fn->name : NULL;
}
