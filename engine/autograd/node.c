/* Graph nodes (grad_fn), autograd meta, gradient cells, saved tensors. */
#include <stdio.h>
#include <stdlib.h>

#include "autograd_internal.h"

/* ---- gradient cells ----------------------------------------------------------- */

tn_grad_cell *tn__cell_new(void) {
    tn_grad_cell *c = tn__calloc_small(sizeof *c);
    if (!c) return NULL;
    atomic_init(&c->refcount, 1);
    atomic_init(&c->weak, 1);
    atomic_init(&c->grad, NULL);
    atomic_init(&c->hooks, NULL);
    return c;
}

void tn__cell_retain(tn_grad_cell *c) {
    atomic_fetch_add_explicit(&c->refcount, 1, memory_order_relaxed);
}

void tn__cell_weak_retain(tn_grad_cell *c) {
    /* relaxed: made from a reference the caller holds (strong or weak). */
    if (c) atomic_fetch_add_explicit(&c->weak, 1, memory_order_relaxed);
}

void tn__cell_weak_release(tn_grad_cell *c) {
    if (!c) return;
    /* acq_rel: the last holder frees after every other's use of the struct */
    int64_t old = atomic_fetch_sub_explicit(&c->weak, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old == 1) {
        if (tn__has_hooks(&c->hooks)) tn__hooks_free(&c->hooks);
        tn__free_small(c);
    }
}

void tn__cell_release(tn_grad_cell *c) {
    if (!c) return;
    int64_t old = atomic_fetch_sub_explicit(&c->refcount, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old != 1) return;
    /* No strong holder is left, so no tn_grad reader either: the gradient
     * goes now, whoever still holds the struct weakly. */
    tn_release(atomic_exchange_explicit(&c->grad, NULL, memory_order_acq_rel));
    tn__cell_weak_release(c);
}

bool tn__cell_try_retain(tn_grad_cell *c) {
    return tn__ref_try_inc(&c->refcount); /* 0: the gradient went with its tensors */
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
    tn__node_release(m->retired);
    tn__cell_release(m->cell);
    tn__free_small(m);
}

/* core frees a tensor's meta through its hook table (it knows no nodes). */
__attribute__((constructor)) static void install_meta_free(void) {
    tn__hooks.meta_free = tn__meta_free;
}

/* ---- nodes -------------------------------------------------------------------- */

/* Nodes are the graph's most frequent allocation: kept within jemalloc's
 * 224-byte size class (the next is 256). Eight more bytes grew the memory
 * a busy multi-threaded program holds, round after round
 * (stress/stress_saved_weak.c). */
_Static_assert(sizeof(tn_node) <= 224, "tn_node outgrew its 224-byte size class");

tn_node *tn__node_new(const tn_fn_info *fn, int n_in, const tn_tensor *const *inputs,
                      int n_saved, int n_out) {
    /* fn->backward may be NULL: a custom function's stand-in (function.c) */
    TN_ASSERT(fn && n_in >= 0 && n_saved >= 0 && n_out >= 0);
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
        if (tn__view_sync(t) < 0) {
            tn__node_release(n); /* the edges taken so far go with it */
            return NULL;
        }
        tn_edge *e = &n->edges[i];
        if ((e->node = tn__grad_fn(t))) {
            tn__node_retain(e->node);
            e->input_nr = t->ag->output_nr;
        } else if ((e->cell = tn__leaf_cell(t))) {
            tn__cell_weak_retain(e->cell);
        } /* else a view made in no-grad mode: requires grad, leads nowhere */
    }
    return n;
}

void tn__node_retain(tn_node *n) {
    if (n) atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

void tn__node_free_saved(tn_node *n) {
    for (int i = 0; i < n->n_saved; i++) {
        tn_saved *s = &n->saved[i];
        if (s->orig) {
            tn__storage_release(s->orig->storage);
            tn__version_release(s->orig->version);
            tn__weak_release(s->orig);
            s->orig = NULL;
        }
        if (s->has_fn) tn__node_release(s->h.grad_fn);
        else tn__cell_weak_release(s->h.cell);
        s->h.grad_fn = NULL;
        s->has_fn = false;
    }
}

/* Work stack of nodes whose reference is to drop (release below); starts
 * in the caller's array, moves to the heap when it outgrows it. */
typedef struct drop_stack {
    tn_node **v, **first;
    size_t n, cap;
} drop_stack;

static void drop_push(drop_stack *w, tn_node *child) {
    if (!child) return;
    if (w->n == w->cap) {
        size_t ncap = w->cap * 2;
        tn_node **v = tn__malloc_quiet(ncap * sizeof *v);
        if (!v) { /* no room: recurse for this one rather than leak */
            tn__node_release(child);
            return;
        }
        memcpy(v, w->v, w->n * sizeof *v);
        if (w->v != w->first) tn__mfree(w->v);
        w->v = v;
        w->cap = ncap;
    }
    w->v[w->n++] = child;
}

/* Iterative: dropping the head of a long chain must not recurse per node. */
void tn__node_release(tn_node *n) {
    tn_node *stack[64];
    drop_stack w = {stack, stack, 0, 64};
    while (n) {
        int64_t old = atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel);
        TN_ASSERT(old > 0);
        if (old == 1) {
            for (int i = 0; i < n->n_in; i++) {
                tn__cell_weak_release(n->edges[i].cell);
                drop_push(&w, n->edges[i].node);
            }
            for (int i = 0; i < n->n_saved; i++) { /* their histories: older nodes */
                tn_saved *s = &n->saved[i];
                if (!s->has_fn) continue;
                drop_push(&w, s->h.grad_fn);
                s->h.grad_fn = NULL;
                s->has_fn = false;
            }
            tn__node_free_saved(n);
            for (int i = 0; i < n->n_out; i++)
                tn__cell_weak_release(atomic_load_explicit(&n->retained[i], memory_order_acquire));
            drop_push(&w, n->inner);
            if (n->trace || n->parent) tn__hooks.node_free(n);
            if (tn__has_hooks(&n->hooks)) tn__hooks_free(&n->hooks);
            tn__free_small(n->geom);
            if (n->fn->backward == tn__function_backward) tn__function_node_free(n);
            tn__free_small(n);
        }
        n = w.n ? w.v[--w.n] : NULL;
    }
    if (w.v != w.first) tn__mfree(w.v);
}

tn_status tn__node_set_output(tn_node *n, tn_tensor *out, int output_nr) {
    TN_ASSERT(output_nr >= 0 && output_nr < n->n_out);
    tn_autograd_meta *m = tn__meta_get_or_create(out);
    if (!m) return TN_ERR_OUT_OF_MEMORY;
    tn__node_retain(n);
    tn_node *old = m->grad_fn;
    int old_nr = m->output_nr;
    m->grad_fn = n;
    m->output_nr = output_nr;
    m->requires_grad = true;
    tn_input_meta *om = &n->out_meta[output_nr];
    om->ndim = out->ndim;
    om->dtype = out->dtype;
    om->device = out->storage->device;
    memcpy(om->shape, out->shape, (size_t)out->ndim * sizeof(int64_t));
    if (TN_UNLIKELY(tn__profile_on())) tn__hooks.prof_link(out, n->seq);
    if (TN_UNLIKELY(tn__numerics_on())) tn__hooks.num_link(out, n->seq);
    if (m->cell && m->retains_grad) {
        /* retain_grad follows the tensor to its new grad_fn (in-place, a
         * view regenerated) and leaves the old one: .grad is the gradient
         * of the tensor's current value only, as PyTorch. */
        tn__cell_weak_retain(m->cell);
        atomic_store_explicit(&n->retained[output_nr], m->cell, memory_order_release);
        tn_grad_cell *mine = m->cell;
        /* acq_rel: pairs with the engine's acquire load of the slot */
        if (old && atomic_compare_exchange_strong_explicit(&old->retained[old_nr], &mine, NULL,
                                                           memory_order_acq_rel,
                                                           memory_order_relaxed))
            tn__cell_weak_release(mine);
    } else if (m->cell) {
        /* A leaf that became a non-leaf (copy_ into it): no .grad any more. */
        tn__cell_release(m->cell);
        m->cell = NULL;
    }
    tn__node_release(old);
    return TN_OK;
}

tn_status tn__inference_saved_error(void) {
    return tn__error(TN_ERR_AUTOGRAD,
                     "Inference tensors cannot be saved for backward. To work around you can make "
                     "a clone to get a normal tensor and use it in autograd.");
}

tn_status tn__node_save(tn_node *n, int slot, const tn_tensor *t, bool is_output) {
    TN_ASSERT(slot >= 0 && slot < n->n_saved);
    tn_saved *s = &n->saved[slot];
    if (!t) return TN_OK;
    if (TN_UNLIKELY(tn__is_inference(t))) return tn__inference_saved_error();
    if (!is_output && tn__view_sync(t) < 0) return tn_last_status(); /* its history, current */
    s->orig = (tn_tensor *)t;
    tn__weak_retain(s->orig);
    tn__storage_retain(t->storage);
    tn__version_retain(t->version);
    s->defined = true;
    n->has_saved = true;
    s->version = tn__version_save(t);
    s->epoch = atomic_load_explicit(&t->storage->write_epoch, memory_order_relaxed);
    /* memory shared with another framework: its writes move no counter of ours, so anomaly
     * mode keeps a digest of the bytes to compare at backward (debug/anomaly.c) */
    s->digested = TN_UNLIKELY(t->storage->external) && tn__anomaly_enabled() && tn__on_cpu(t);
    if (s->digested) s->digest = (uint32_t)tn__tensor_digest(t);
    s->is_output = is_output;
    s->output_nr = t->ag ? t->ag->output_nr : 0;
    TN_ASSERT(s->output_nr == (t->ag ? t->ag->output_nr : 0)); /* fits its 26 bits */
    if (is_output) return TN_OK; /* its history is n itself, rebuilt at unpack */
    const tn_autograd_meta *m = t->ag;
    if (!m) return TN_OK; /* tn__node_new synced a view input's history */
    s->requires_grad = m->requires_grad;
    if (m->grad_fn) {
        s->has_fn = true;
        s->h.grad_fn = m->grad_fn;
        tn__node_retain(s->h.grad_fn);
    } else if (m->requires_grad) {
        s->h.cell = m->cell;
        tn__cell_weak_retain(s->h.cell);
    }
    return TN_OK;
}

/* The saved input's grad_fn now (in-place ops and detach_ change it since
 * the save); the save-time one once the tensor is gone. */
static const tn_fn_info *input_fn_now(const tn_saved *s, int *output_nr) {
    if (s->orig && tn__try_retain(s->orig)) {
        const tn_autograd_meta *m = s->orig->ag;
        const tn_fn_info *fn = m && m->grad_fn ? m->grad_fn->fn : NULL;
        *output_nr = fn ? m->output_nr : 0;
        tn__internal_enter(); /* our own reference: not a scope's */
        tn_release(s->orig);
        tn__internal_leave();
        return fn;
    }
    *output_nr = s->output_nr;
    return s->has_fn ? s->h.grad_fn->fn : NULL;
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
    type_string(type, sizeof type, s->orig);
    int nr = s->output_nr;
    const tn_fn_info *fn = s->is_output ? n->fn : input_fn_now(s, &nr);
    if (fn) snprintf(which, sizeof which, ", which is output %d of %s,", nr, fn->name);
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

/* r (a fresh alias of a saved input) gets the input's history as it was
 * when saved: its grad_fn, or its leaf's cell (a new one if the leaf is
 * gone: the gradient then reaches no one, as it would have). */
static tn_status rebuild_input_history(const tn_saved *s, tn_tensor *r) {
    tn_autograd_meta *m = tn__meta_get_or_create(r);
    if (!m) return TN_ERR_OUT_OF_MEMORY;
    m->requires_grad = true;
    if (s->has_fn) {
        m->grad_fn = s->h.grad_fn;
        tn__node_retain(m->grad_fn);
        m->output_nr = s->output_nr;
        return TN_OK;
    }
    if (s->h.cell && tn__cell_try_retain(s->h.cell)) {
        m->cell = s->h.cell;
        return TN_OK;
    }
    m->cell = tn__cell_new();
    return m->cell ? TN_OK : TN_ERR_OUT_OF_MEMORY;
}

tn_tensor *tn__node_unpack(tn_node *n, int slot) {
    TN_ASSERT(slot >= 0 && slot < n->n_saved);
    tn_saved *s = &n->saved[slot];
    if (!s->defined) return NULL;
    if (!s->orig) {
        tn__error(TN_ERR_AUTOGRAD,
                  "Trying to backward through the graph a second time (or directly access saved "
                  "tensors after they have already been freed). Saved intermediate values of the "
                  "graph are freed when you call .backward() or autograd.grad(). Specify "
                  "retain_graph=True if you need to backward through the graph a second time or "
                  "if you need to access saved tensors after calling backward.");
        return NULL;
    }
    int nr;
    if (s->has_fn && !input_fn_now(s, &nr)) {
        tn__error(TN_ERR_AUTOGRAD,
                  "Trying to use a saved tensor that has been detached in-place, i.e. with "
                  ".detach_().This is not supported, please use out-of-place `.detach()` instead");
        return NULL;
    }
    uint64_t cur = tn__version_get(s->orig);
    TN_ASSERT(cur >= s->version); /* a counter only rises, and the slot holds it since the save */
    if (cur != s->version) {
        version_error(n, s, cur);
        return NULL;
    }
    if (TN_UNLIKELY(tn__anomaly_enabled()) && tn__hooks.check_untracked(n, s) < 0)
        return NULL;
    if (!tn__grad_enabled()) /* the tensor itself, or its data once it is gone */
        return tn__try_retain(s->orig) ? s->orig : tn__detached_alias(s->orig);
    /* create_graph: a tensor with the saved one's history, made afresh. */
    tn_tensor *r = tn__detached_alias(s->orig);
    if (!r) return NULL;
    tn_status st = TN_OK;
    tn_node *cs = s->is_output ? tn__copy_slices_running(n) : NULL;
    if (cs) st = tn__view_history_after_write(cs, r);
    else if (s->is_output) st = tn__node_set_output(n, r, s->output_nr);
    else if (s->requires_grad) st = rebuild_input_history(s, r);
    if (st < 0) {
        tn_release(r);
        return NULL;
    }
    return r;
}
