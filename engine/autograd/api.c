/* Public autograd API: requires_grad_, retain_grad, backward, grad access. */
#include <stdlib.h>

#include "../ops/ops_internal.h"

tn_status tn_requires_grad_(tn_tensor *t, bool requires_grad) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    if (tn__view_sync(t) < 0) return tn_last_status();
    if (tn__grad_fn(t)) {
        if (requires_grad) return TN_OK;
        return tn__error(TN_ERR_AUTOGRAD,
                         "you can only change requires_grad flags of leaf variables. If you want "
                         "to use a computed variable in a subgraph that doesn't require "
                         "differentiation use var_no_grad = var.detach().");
    }
    if (requires_grad && !tn__is_float(t->dtype))
        return tn__error(TN_ERR_DTYPE,
                         "Only Tensors of floating point and complex dtype can require gradients");
    if (requires_grad && tn__is_inference(t) && !tn__inference_on)
        return tn__error(TN_ERR_AUTOGRAD, "Setting requires_grad=True on inference tensor "
                         "outside InferenceMode is not allowed.");
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
    if (tn__view_sync(t) < 0) return tn_last_status();
    tn_autograd_meta *m = t->ag;
    if (!tn__grad_fn(t) || m->retains_grad) return TN_OK; /* leaves keep theirs anyway */
    if (!m->cell) {
        m->cell = tn__cell_new();
        if (!m->cell) return TN_ERR_OUT_OF_MEMORY;
    }
    tn_status st = tn__hooks_mark_retain(m->grad_fn, m->output_nr);
    if (st < 0) return st;
    m->retains_grad = true;
    tn__cell_weak_retain(m->cell); /* the graph's reference is weak (no cycle) */
    tn_grad_cell *prev = atomic_exchange_explicit(&m->grad_fn->retained[m->output_nr], m->cell,
                                                  memory_order_acq_rel);
    tn__cell_weak_release(prev);
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
    return tn__retain(grad);
}

static tn_status backward(const char *api, tn_tensor *t, const tn_tensor *grad,
                         bool retain_graph, bool create_graph) {
    TN_CHECK_NULL_ARG_ST_IN(api, t, "t");
    tn_status st = check_root(t, 0);
    if (st < 0) return st;
    tn_tensor *g = seed_grad(t, grad, 0);
    if (!g) return tn_last_status();
    st = tn__run_backward(1, &t, &g, retain_graph || create_graph, create_graph, 0, NULL, NULL);
    tn_release(g);
    return st;
}

tn_status tn_backward_ex(tn_tensor *t, const tn_tensor *grad, bool retain_graph,
                         bool create_graph) {
    return backward(__func__, t, grad, retain_graph, create_graph);
}

tn_status tn_backward(tn_tensor *t, const tn_tensor *grad, bool retain_graph) {
    return backward(__func__, t, grad, retain_graph, false);
}

tn_status tn_backward_multi(int n, tn_tensor *const *roots, tn_tensor *const *grads,
                            bool retain_graph, bool create_graph) {
    if (n <= 0 || !roots)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_backward_multi: empty or NULL root list");
    for (int i = 0; i < n; i++) {
        if (!roots[i]) return tn__null_arg(true, "tn_backward_multi: roots[%d] is NULL", i);
        tn_status st = check_root(roots[i], i);
        if (st < 0) return st;
    }
    tn_tensor *local[8], **seeds = n <= 8 ? local : tn__calloc_small((size_t)n * sizeof *seeds);
    if (!seeds) return TN_ERR_OUT_OF_MEMORY;
    tn_status st = TN_OK;
    int made = 0;
    for (; made < n && st == TN_OK; made++)
        if (!(seeds[made] = seed_grad(roots[made], grads ? grads[made] : NULL, made)))
            st = tn_last_status();
    if (st == TN_OK)
        st = tn__run_backward(n, roots, seeds, retain_graph || create_graph, create_graph, 0,
                              NULL, NULL);
    for (int i = 0; i < made; i++)
        tn_release(seeds[i]);
    if (seeds != local) tn__free_small(seeds);
    return st;
}

tn_status tn_autograd_grad(int n_out, tn_tensor *const *outputs, tn_tensor *const *grad_outputs,
                           int n_in, tn_tensor *const *inputs, tn_tensor **grads_out,
                           bool retain_graph, bool create_graph) {
    return tn_autograd_grad_ex(n_out, outputs, grad_outputs, n_in, inputs, grads_out,
                               retain_graph, create_graph, true);
}

tn_status tn_autograd_grad_ex(int n_out, tn_tensor *const *outputs,
                              tn_tensor *const *grad_outputs, int n_in,
                              tn_tensor *const *inputs, tn_tensor **grads_out,
                              bool retain_graph, bool create_graph, bool allow_unused) {
    if (n_in == 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "grad requires non-empty inputs.");
    if (n_out <= 0 || n_in < 0 || !outputs || !inputs || !grads_out)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_autograd_grad: empty or NULL argument list");
    /* PyTorch's order: the outputs first ("element 0 of tensors does not
     * require grad ..." when x does not require grad in grad(f(x), x)). */
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i])
            return tn__null_arg(true, "tn_autograd_grad: outputs[%d] is NULL", i);
        tn_status st = check_root(outputs[i], i);
        if (st < 0) return st;
    }
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i])
            return tn__null_arg(true, "tn_autograd_grad: inputs[%d] is NULL", i);
        if (!tn__requires_grad(inputs[i]))
            return tn__error(TN_ERR_AUTOGRAD, "One of the differentiated Tensors does not "
                             "require grad");
    }
    tn_tensor **seeds = tn__calloc_small((size_t)n_out * sizeof *seeds);
    if (!seeds) return TN_ERR_OUT_OF_MEMORY;
    tn_status st = TN_OK;
    for (int i = 0; i < n_out && st == TN_OK; i++)
        if (!(seeds[i] = seed_grad(outputs[i], grad_outputs ? grad_outputs[i] : NULL, i)))
            st = tn_last_status();
    for (int i = 0; i < n_in; i++) grads_out[i] = NULL;
    if (st == TN_OK)
        st = tn__run_backward(n_out, outputs, seeds, retain_graph || create_graph, create_graph,
                              n_in, inputs, grads_out);
    for (int i = 0; i < n_out; i++) tn_release(seeds[i]);
    tn__free_small(seeds);
    /* Summed to the inputs' shapes, then handed out (registered in the
     * caller's scope) only once every one is made: a failure returns none. */
    for (int i = 0; i < n_in && st == TN_OK; i++) {
        if (!grads_out[i] && !allow_unused)
            st = tn__error(TN_ERR_AUTOGRAD, "One of the differentiated Tensors appears to not "
                           "have been used in the graph. Set allow_unused=True if this is the "
                           "desired behavior.");
        if (!grads_out[i]) continue;
        tn_tensor *h = tn__sum_to(grads_out[i], inputs[i]->ndim, inputs[i]->shape,
                                  inputs[i]->dtype);
        tn_release(grads_out[i]);
        if (!(grads_out[i] = h)) st = tn_last_status();
    }
    int handed = 0; /* grads_out[0, handed) are the scope's now (or NULL) */
    for (; st == TN_OK && handed < n_in; handed++)
        if (grads_out[handed] && !(grads_out[handed] = tn__ret(grads_out[handed])))
            st = tn_last_status();
    for (int i = 0; i < n_in && st < 0; i++) {
        if (i >= handed) tn_release(grads_out[i]);
        grads_out[i] = NULL;
    }
    return st;
}

tn_tensor *tn_grad(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "t");
    if (tn__view_sync(t) < 0) return NULL;
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

/* True when t can be reached from g through .grad and view bases: storing
 * g in t's cell would then make a reference cycle (x.grad = y; y.grad = x,
 * or x.grad = a view of x). Iterative; each step holds a reference. */
static bool leads_to(tn_tensor *g, const tn_tensor *t, bool *oom) {
    tn_tensor *local[16], **stack = local;
    size_t n = 0, cap = 16;
    bool found = false;
    stack[n++] = tn__retain(g);
    while (n) {
        tn_tensor *u = stack[--n];
        found |= u == t || u->view_base == t;
        tn_tensor *next[2] = {u->view_base ? tn__retain(u->view_base) : NULL,
                              u->ag && u->ag->cell ? tn__cell_load(u->ag->cell) : NULL};
        tn_release(u);
        for (int k = 0; k < 2; k++) {
            if (!next[k]) continue;
            if (found) {
                tn_release(next[k]);
                continue;
            }
            if (n == cap) {
                tn_tensor **w = tn__malloc_quiet(2 * cap * sizeof *w);
                if (!w) {
                    *oom = true;
                    found = true; /* stop; the caller reports the failure */
                    tn_release(next[k]);
                    continue;
                }
                memcpy(w, stack, n * sizeof *w);
                if (stack != local) tn__mfree(stack);
                stack = w;
                cap *= 2;
            }
            stack[n++] = next[k];
        }
    }
    if (stack != local) tn__mfree(stack);
    return found;
}

tn_status tn_set_grad(tn_tensor *t, tn_tensor *g) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    if (g == t) /* t's cell would own t: a reference cycle */
        return tn__error(TN_ERR_AUTOGRAD, "can't assign Variable as its own grad");
    if (g) {
        if (!tn__same_shape(t, g))
            return tn__error(TN_ERR_SHAPE, "assigned grad has data of a different size");
        if (g->dtype != t->dtype)
            return tn__error(TN_ERR_DTYPE, "assigned grad has data of a different type");
        /* A gradient that leads back to t is stored as a detached alias
         * (same storage and version counter, no history nor .grad). */
        bool oom = false;
        tn__internal_enter();
        bool cycle = (g->view_base || (g->ag && g->ag->cell)) && leads_to(g, t, &oom);
        tn__internal_leave();
        if (oom) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in tn_set_grad");
        g = cycle ? tn__detached_alias(g) : tn__retain(g);
        if (!g) return TN_ERR_OUT_OF_MEMORY;
    }
    tn_autograd_meta *m = t->ag;
    if (!m || !m->cell) {
        if (!g) return TN_OK;
        tn_grad_cell *c = tn__cell_new();
        m = c ? tn__meta_get_or_create(t) : NULL;
        if (!m) {
            tn__cell_release(c);
            tn_release(g);
            return TN_ERR_OUT_OF_MEMORY;
        }
        m->cell = c;
    }
    tn__cell_release_taken(m->cell,
                           atomic_exchange_explicit(&m->cell->grad, g, memory_order_seq_cst));
    return TN_OK;
}

tn_status tn_zero_grad(tn_tensor *t) { return tn_set_grad(t, NULL); }

/* ---- autograd metadata ---------------------------------------------------------------- */

bool tn_requires_grad(const tn_tensor *t) {
    if (!t) {
        tn__null_arg(true, "%s: argument 't' is NULL", __func__);
        return false;
    }
    return tn__requires_grad(t);
}
bool tn_is_leaf(const tn_tensor *t) {
    if (!t) {
        tn__null_arg(true, "%s: argument 't' is NULL", __func__);
        return false;
    }
    if (tn__view_sync(t) < 0) return false;
    return !tn__grad_fn(t);
}
const char *tn_grad_fn_name(const tn_tensor *t) {
    TN_CHECK_NULL_ARG(t, "t");
    if (tn__view_sync(t) < 0) return NULL;
    return tn__grad_fn(t) ? tn__grad_fn(t)->fn->name : NULL;
}
