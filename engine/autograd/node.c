/* Graph nodes (grad_fn), autograd meta, gradient cells, saved tensors. */
#include <stdio.h>
#include <stdlib.h>

#include "autograd_internal.h"

/* ---- gradient cells ----------------------------------------------------------- */

tn_grad_cell *tn__cell_new(void) {
    tn_grad_cell *c = tn__calloc_small(sizeof *c);
    if (!c) return NULL;
    atomic_init(&c->refcount, 1);
    atomic_init(&c->grad, NULL);
    return c;
}

void tn__cell_retain(tn_grad_cell *c) {
    atomic_fetch_add_explicit(&c->refcount, 1, memory_order_relaxed);
}

void tn__cell_release(tn_grad_cell *c) {
    if (!c || atomic_fetch_sub_explicit(&c->refcount, 1, memory_order_acq_rel) != 1) return;
    tn_release(atomic_load_explicit(&c->grad, memory_order_acquire));
    tn__free_small(c);
}

/* ---- autograd meta ------------------------------------------------------------ */

tn_autograd_meta *tn__meta_get_or_create(tn_tensor *t) {
    if (t->ag) return t->ag;
    tn_autograd_meta *m = tn__calloc_small(sizeof *m);
    if (!m) return NULL;
    atomic_flag_clear(&m->warned_nonleaf_grad);
    t->ag = m;
    return m;
}

void tn__meta_free(tn_autograd_meta *m) {
    if (!m) return;
    tn__node_release(m->grad_fn);
    tn__cell_release(m->cell);
    tn__free_small(m);
}

/* core frees a tensor's meta through its hook table (it knows no nodes). */
__attribute__((constructor)) static void install_meta_free(void) {
    tn__hooks.meta_free = tn__meta_free;
}

/* ---- nodes -------------------------------------------------------------------- */

tn_node *tn__node_new(const tn_fn_info *fn, int n_in, const tn_tensor *const *inputs,
                      int n_saved, int n_out) {
    size_t sz = sizeof(tn_node) + (size_t)n_in * (sizeof(tn_edge) + sizeof(tn_input_meta)) +
                (size_t)n_out * sizeof(tn_input_meta) +
                (size_t)n_saved * sizeof(tn_saved) + (size_t)n_out * sizeof(tn_grad_cell *);
    tn_node *n = tn__calloc_small(sz);
    if (!n) return NULL;
    atomic_init(&n->refcount, 1);
    n->fn = fn;
    n->seq = tn__next_seq();
    n->n_in = n_in;
    n->n_out = n_out;
    n->n_saved = n_saved;
    atomic_init(&n->saved_refs, 1);
    atomic_init(&n->claimed, false);
    char *p = (char *)(n + 1);
    n->edges = (tn_edge *)p;
    p += (size_t)n_in * sizeof(tn_edge);
    n->in_meta = (tn_input_meta *)p;
    p += (size_t)n_in * sizeof(tn_input_meta);
    n->out_meta = (tn_input_meta *)p;
    p += (size_t)n_out * sizeof(tn_input_meta);
    n->saved = (tn_saved *)p;
    p += (size_t)n_saved * sizeof(tn_saved);
    n->retained = (_Atomic(tn_grad_cell *) *)p;
    if (TN_UNLIKELY(tn__anomaly_enabled()) && tn__hooks.node_new(n) < 0) {
        tn__node_release(n); /* no edge taken yet */
        return NULL;
    }
    for (int i = 0; i < n_in; i++) {
        const tn_tensor *t = inputs ? inputs[i] : NULL;
        if (!t) continue;
        tn_input_meta *m = &n->in_meta[i];
        m->ndim = t->ndim;
        m->dtype = t->dtype;
        m->device = t->storage->device;
        memcpy(m->shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
        if (!tn__requires_grad(t)) continue;
        tn_edge *e = &n->edges[i];
        if (t->ag->grad_fn) {
            e->node = t->ag->grad_fn;
            tn__node_retain(e->node);
            e->input_nr = t->ag->output_nr;
        } else {
            e->cell = t->ag->cell;
            tn__cell_retain(e->cell);
        }
    }
    return n;
}

void tn__node_retain(tn_node *n) {
    if (n) atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

static void free_saved(tn_node *n) {
    for (int i = 0; i < n->n_saved; i++) {
        tn_release(n->saved[i].t);
        n->saved[i].t = NULL;
    }
}

/* Iterative: dropping the head of a long chain must not recurse per node. */
void tn__node_release(tn_node *n) {
    tn_node *stack[64];
    tn_node **work = stack;
    size_t top = 0, cap = 64;
    while (n) {
        if (atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) == 1) {
            for (int i = 0; i < n->n_in; i++) {
                tn__cell_release(n->edges[i].cell);
                tn_node *child = n->edges[i].node;
                if (!child) continue;
                if (top == cap) {
                    size_t ncap = cap * 2;
                    tn_node **w = tn__malloc_quiet(ncap * sizeof *w);
                    if (!w) { /* fall back to recursion rather than leak */
                        tn__node_release(child);
                        continue;
                    }
                    memcpy(w, work, top * sizeof *w);
                    if (work != stack) tn__mfree(work);
                    work = w;
                    cap = ncap;
                }
                work[top++] = child;
            }
            free_saved(n);
            for (int i = 0; i < n->n_out; i++)
                tn__cell_release(atomic_load_explicit(&n->retained[i], memory_order_acquire));
            if (n->inner) {
                if (top == cap) tn__node_release(n->inner);
                else work[top++] = n->inner;
            }
            if (n->trace || n->parent) tn__hooks.node_free(n);
            tn__free_small(n->geom);
            tn__free_small(n);
        }
        n = top ? work[--top] : NULL;
    }
    if (work != stack) tn__mfree(work);
}

tn_status tn__node_alias_self(tn_node *n, tn_tensor *out, int output_nr) {
    /* A saved input that is this very tensor (x.mul_(x)) would make a cycle
     * node -> tensor -> node: keep it as a detached alias instead. Its saved
     * version predates the write, so backward reports the in-place change;
     * it is an output now, so the detach_() check of inputs does not apply. */
    for (int i = 0; i < n->n_saved; i++) {
        tn_saved *s = &n->saved[i];
        if (s->t != out || s->is_output) continue;
        tn_tensor *alias = tn__detached_alias(out);
        if (!alias) return TN_ERR_OUT_OF_MEMORY;
        tn_release(s->t);
        s->t = alias;
        s->is_output = true;
        s->had_grad_fn = false;
        s->output_nr = output_nr;
    }
    return TN_OK;
}

tn_status tn__node_set_output(tn_node *n, tn_tensor *out, int output_nr) {
    /* what can fail first, so that a failure changes nothing */
    if (tn__node_alias_self(n, out, output_nr) < 0) return TN_ERR_OUT_OF_MEMORY;
    tn_autograd_meta *m = tn__meta_get_or_create(out);
    if (!m) return TN_ERR_OUT_OF_MEMORY;
    tn__node_retain(n);
    tn_node *old = m->grad_fn;
    m->grad_fn = n;
    m->output_nr = output_nr;
    m->requires_grad = true;
    tn_input_meta *om = &n->out_meta[output_nr];
    om->ndim = out->ndim;
    om->dtype = out->dtype;
    om->device = out->storage->device;
    memcpy(om->shape, out->shape, (size_t)out->ndim * sizeof(int64_t));
    if (m->cell && m->retains_grad) {
        /* retain_grad follows the tensor to its new grad_fn (in-place). */
        tn__cell_retain(m->cell);
        atomic_store_explicit(&n->retained[output_nr], m->cell, memory_order_release);
    } else if (m->cell) {
        /* A leaf that became a non-leaf (copy_ into it): no .grad any more. */
        tn__cell_release(m->cell);
        m->cell = NULL;
    }
    tn__node_release(old);
    return TN_OK;
}

tn_status tn__node_save(tn_node *n, int slot, const tn_tensor *t, bool is_output) {
    tn_saved *s = &n->saved[slot];
    if (!t) return TN_OK;
    s->defined = true;
    n->has_saved = true;
    s->version = tn__version_get(t);
    s->epoch = atomic_load_explicit(&t->storage->write_epoch, memory_order_relaxed);
    s->is_output = is_output;
    if (is_output) {
        s->t = tn__detached_alias(t);
        if (!s->t) return TN_ERR_OUT_OF_MEMORY;
        s->output_nr = t->ag ? t->ag->output_nr : 0;
    } else {
        s->t = tn__retain((tn_tensor *)t);
        s->had_grad_fn = t->ag && t->ag->grad_fn;
    }
    return TN_OK;
}

static void type_string(char *buf, size_t n, const tn_tensor *t) {
    char shape[160];
    tn__format_shape(shape, sizeof shape, t->ndim, t->shape);
    char dev[48] = "";
    if (!tn__on_cpu(t)) { /* PyTorch: torch.cuda.FloatTensor */
        char d[32];
        snprintf(dev, sizeof dev, " on %s", tn__device_str(tn__dev(t), d, sizeof d));
    }
    snprintf(buf, n, "[%s %s%s]", tn_dtype_name(t->dtype), shape, dev);
}

static tn_status version_error(tn_node *n, const tn_saved *s, uint64_t cur) {
    char type[200], which[200] = "", hint[600];
    type_string(type, sizeof type, s->t);
    if (s->is_output)
        snprintf(which, sizeof which, ", which is output %d of %s,", s->output_nr, n->fn->name);
    else if (s->t->ag && s->t->ag->grad_fn)
        snprintf(which, sizeof which, ", which is output %d of %s,", s->t->ag->output_nr,
                 s->t->ag->grad_fn->fn->name);
    if (tn__anomaly_enabled()) {
        /* PyTorch ends with "Good luck!"; we name the write instead. */
        const char *who = tn__hooks.inplace_report(n, s, cur);
        if (who)
            snprintf(hint, sizeof hint,
                     "the variable was modified in place by %s. tn_last_anomaly() lists every "
                     "write since the save with its thread and backtrace.", who);
        else
            snprintf(hint, sizeof hint,
                     "the write that modified it was not recorded (made with anomaly mode off, "
                     "or dropped). tn_last_anomaly() has the forward backtrace of %s.",
                     n->fn->name);
    } else {
        snprintf(hint, sizeof hint,
                 "enable anomaly detection to find the operation that failed to compute its "
                 "gradient, with tn_set_detect_anomaly(true, false) or TENET_DETECT_ANOMALY=1.");
    }
    return tn__error(TN_ERR_INPLACE_MODIFIED,
                     "one of the variables needed for gradient computation has been modified "
                     "by an inplace operation: %s%s is at version %llu; expected version %llu "
                     "instead. Hint: %s",
                     type, which, (unsigned long long)cur, (unsigned long long)s->version, hint);
}

tn_tensor *tn__node_unpack(tn_node *n, int slot) {
    tn_saved *s = &n->saved[slot];
    if (!s->defined) return NULL;
    if (!s->t) {
        tn__error(TN_ERR_AUTOGRAD,
                  "Trying to backward through the graph a second time (or directly access saved "
                  "tensors after they have already been freed). Saved intermediate values of the "
                  "graph are freed when you call .backward() or autograd.grad(). Specify "
                  "retain_graph=True if you need to backward through the graph a second time or "
                  "if you need to access saved tensors after calling backward.");
        return NULL;
    }
    if (s->had_grad_fn && !(s->t->ag && s->t->ag->grad_fn)) {
        tn__error(TN_ERR_AUTOGRAD,
                  "Trying to use a saved tensor that has been detached in-place, i.e. with "
                  ".detach_().This is not supported, please use out-of-place `.detach()` instead");
        return NULL;
    }
    uint64_t cur = tn__version_get(s->t);
    if (cur != s->version) {
        version_error(n, s, cur);
        return NULL;
    }
    if (TN_UNLIKELY(tn__anomaly_enabled()) && tn__hooks.check_untracked(n, s) < 0)
        return NULL;
    if (!s->is_output || !tn__grad_enabled()) return tn__retain(s->t);
    /* create_graph: the saved output must carry its history (this node). */
    tn_tensor *r = tn__detached_alias(s->t);
    if (r && tn__node_set_output(n, r, s->output_nr) < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}
