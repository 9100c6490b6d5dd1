/* Gradient hooks: Tensor.register_hook, register_post_accumulate_grad_hook,
 * Node.register_prehook / register_hook, with removable handles.
 *
 * Where they live: a leaf's tensor and post-accumulate hooks on its gradient
 * cell, a non-leaf's tensor hooks on its grad_fn (for its output number),
 * node hooks on the node: each owner has one list, appended only.
 *
 * Lock-free: registration appends with a CAS on the last link (release,
 * pairing with the acquire loads of a walk, so a walker that reaches an
 * entry sees it whole); removal sets the entry's flag (relaxed: a plain
 * setting, nothing is published with it) and the walk skips it. Entries are
 * freed only with their owner (a node, or a cell's struct), so a walk never
 * meets freed memory. An entry has two references: its list's and its
 * handle's.
 *
 * retain_grad among tensor hooks (PyTorch 1.13): the gradient a non-leaf
 * retains is the one its hooks registered before retain_grad have seen. A
 * retain_grad registered after some hooks of that output appends a marker
 * entry; without one the capture comes before all hooks.
 */
#include "autograd_internal.h"

enum hook_kind { HOOK_TENSOR, HOOK_RETAIN, HOOK_POST_ACCUMULATE, HOOK_PRE, HOOK_POST };

struct tn_hook {
    _Atomic int64_t refcount;
    atomic_bool removed;
    _Atomic(struct tn_hook *) next;
    enum hook_kind kind;
    int output_nr;   /* HOOK_TENSOR, HOOK_RETAIN on a node */
    tn_tensor *leaf; /* HOOK_POST_ACCUMULATE: the leaf, weak */
    union {
        tn_tensor_hook_fn tensor;
        tn_post_accumulate_hook_fn post_acc;
        tn_node_prehook_fn pre;
        tn_node_hook_fn post;
    } fn;
    void *ctx;
};

static void hook_unref(tn_hook *h) {
    if (!h) return;
    /* acq_rel: the last of list and handle frees after the other's use */
    int64_t old = atomic_fetch_sub_explicit(&h->refcount, 1, memory_order_acq_rel);
    TN_ASSERT(old > 0);
    if (old == 1) {
        if (h->leaf) tn__weak_release(h->leaf);
        tn__free_small(h);
    }
}

void tn__hooks_free(_Atomic(tn_hook *) *list) {
    /* the owner's end: no walker and no registration any more */
    tn_hook *h = atomic_load_explicit(list, memory_order_acquire);
    while (h) {
        tn_hook *next = atomic_load_explicit(&h->next, memory_order_acquire);
        hook_unref(h);
        h = next;
    }
}

static tn_hook *hook_new(enum hook_kind kind, void *ctx, int refs) {
    tn_hook *h = tn__calloc_small(sizeof *h);
    if (!h) return NULL;
    atomic_init(&h->refcount, refs);
    atomic_init(&h->removed, false);
    atomic_init(&h->next, NULL);
    h->kind = kind;
    h->ctx = ctx;
    return h;
}

static void append(_Atomic(tn_hook *) *link, tn_hook *h) {
    for (;;) {
        tn_hook *seen = NULL;
        /* release: publishes h's fields to walkers (their acquire loads) */
        if (atomic_compare_exchange_weak_explicit(link, &seen, h, memory_order_release,
                                                  memory_order_acquire))
            return;
        if (seen) link = &seen->next;
    }
}

static tn_hook *first(_Atomic(tn_hook *) *list) {
    return atomic_load_explicit(list, memory_order_acquire);
}
static tn_hook *next_of(tn_hook *h) { return atomic_load_explicit(&h->next, memory_order_acquire); }
static bool live(tn_hook *h) { return !atomic_load_explicit(&h->removed, memory_order_relaxed); }

/* ---- registration ------------------------------------------------------------------ */

static tn_hook *register_on(_Atomic(tn_hook *) *list, tn_hook *h) {
    append(list, h);
    return h;
}

/* The checks both tensor registrations make; t's history brought up to date. */
static bool tensor_hook_ok(const tn_tensor *t, bool has_fn, const char *who) {
    if (!t || !has_fn) {
        tn__null_arg(t == NULL, "%s: argument '%s' is NULL", who, t ? "fn" : "t");
        return false;
    }
    if (!tn__requires_grad(t)) {
        tn__error(TN_ERR_AUTOGRAD,
                  "cannot register a hook on a tensor that doesn't require gradient");
        return false;
    }
    return tn__view_sync(t) == TN_OK;
}

tn_hook *tn_register_hook(tn_tensor *t, tn_tensor_hook_fn fn, void *ctx) {
    if (!tensor_hook_ok(t, fn != NULL, __func__)) return NULL;
    tn_node *n = tn__grad_fn(t);
    tn_grad_cell *c = tn__leaf_cell(t);
    if (!n && !c) { /* a view made in no-grad mode: its gradient goes nowhere */
        tn__error(TN_ERR_AUTOGRAD, "cannot register a hook on a view created in no_grad mode: "
                  "no gradient is computed for it");
        return NULL;
    }
    tn_hook *h = hook_new(HOOK_TENSOR, ctx, 2);
    if (!h) return NULL;
    h->fn.tensor = fn;
    if (n) {
        h->output_nr = t->ag->output_nr;
        return register_on(&n->hooks, h);
    }
    return register_on(&c->hooks, h);
}

tn_hook *tn_register_post_accumulate_grad_hook(tn_tensor *t, tn_post_accumulate_hook_fn fn,
                                               void *ctx) {
    if (!tensor_hook_ok(t, fn != NULL, __func__)) return NULL;
    tn_grad_cell *c = tn__leaf_cell(t);
    if (!c) {
        tn__error(TN_ERR_AUTOGRAD,
                  "post accumulate grad hooks cannot be registered on non-leaf tensors");
        return NULL;
    }
    tn_hook *h = hook_new(HOOK_POST_ACCUMULATE, ctx, 2);
    if (!h) return NULL;
    h->fn.post_acc = fn;
    h->leaf = t;
    tn__weak_retain(t);
    return register_on(&c->hooks, h);
}

/* A node hook of either kind: fn is set by the caller on the new entry. */
static tn_hook *node_hook(tn_node *n, bool has_fn, enum hook_kind kind, void *ctx,
                          const char *who) {
    if (!n) {
        tn__null_arg(false, "%s: argument 'n' is NULL", who);
        return NULL;
    }
    if (!has_fn) {
        tn__null_arg(false, "%s: argument 'fn' is NULL", who);
        return NULL;
    }
    return hook_new(kind, ctx, 2);
}

tn_hook *tn_node_register_prehook(tn_node *n, tn_node_prehook_fn fn, void *ctx) {
    tn_hook *h = node_hook(n, fn != NULL, HOOK_PRE, ctx, __func__);
    if (h) h->fn.pre = fn;
    return h ? register_on(&n->hooks, h) : NULL;
}

tn_hook *tn_node_register_hook(tn_node *n, tn_node_hook_fn fn, void *ctx) {
    tn_hook *h = node_hook(n, fn != NULL, HOOK_POST, ctx, __func__);
    if (h) h->fn.post = fn;
    return h ? register_on(&n->hooks, h) : NULL;
}

void tn_hook_remove(tn_hook *h) {
    if (!h) return;
    atomic_store_explicit(&h->removed, true, memory_order_relaxed);
    hook_unref(h);
}

void tn_hook_release(tn_hook *h) { hook_unref(h); }

tn_status tn__hooks_mark_retain(tn_node *n, int k) {
    bool after_hooks = false;
    for (tn_hook *h = first(&n->hooks); h; h = next_of(h))
        after_hooks |= h->kind == HOOK_TENSOR && h->output_nr == k;
    if (!after_hooks) return TN_OK; /* the capture comes first anyway */
    tn_hook *m = hook_new(HOOK_RETAIN, NULL, 1);
    if (!m) return tn_last_status();
    m->output_nr = k;
    append(&n->hooks, m);
    return TN_OK;
}

/* ---- running them ----------------------------------------------------------------- */

/* Replaces *g by r (a hook's new gradient) after PyTorch's checks. */
static tn_status take_replacement(tn_tensor **g, tn_tensor *r, const char *what) {
    if (!r) return TN_OK;
    const tn_tensor *o = *g;
    tn_status st = TN_OK;
    char a[160], b[160];
    if (!tn__same_shape(o, r)) {
        tn__format_shape(a, sizeof a, o->ndim, o->shape);
        tn__format_shape(b, sizeof b, r->ndim, r->shape);
        st = tn__error(TN_ERR_SHAPE, "%s has changed the size of value (was %s got %s)", what, a,
                       b);
    } else if (o->dtype != r->dtype) {
        st = tn__error(TN_ERR_DTYPE, "%s has changed the type of value (was %s got %s)", what,
                       tn_dtype_name(o->dtype), tn_dtype_name(r->dtype));
    } else if (!tn__same_device(tn__dev(o), tn__dev(r))) {
        st = tn__error(TN_ERR_DEVICE, "%s has changed the device of value", what);
    }
    if (st < 0) {
        tn_release(r);
        return st;
    }
    tn_release(*g);
    *g = r;
    return TN_OK;
}

/* A hook's failure: its status, with a message if it set none (the error
 * state is cleared before each call: see before_call). */
static tn_status hook_failed(tn_status st, const char *what) {
    if (tn_last_status() >= 0) tn__error(st, "%s failed with %s", what, tn_status_string(st));
    return st;
}
static void before_call(void) { tn_clear_error(); }

static tn_status call_tensor_hook(tn_hook *h, tn_tensor **g) {
    tn_tensor *r = NULL;
    before_call();
    tn__callback_frame cf;
    tn__callback_enter(&cf);
    tn_status st = h->fn.tensor(*g, &r, h->ctx);
    st = tn__callback_leave(&cf, st, 1, &r, "a tensor hook");
    if (st < 0) {
        tn_release(r);
        return hook_failed(st, "a tensor hook");
    }
    return take_replacement(g, r, "hook");
}

tn_status tn__run_output_hooks(tn_node *n, int k, tn_tensor **g, bool skip_tensor_hooks,
                               tn_status (*capture)(void *arg, tn_tensor *g), void *arg) {
    bool marked = false;
    for (tn_hook *h = first(&n->hooks); h; h = next_of(h))
        marked |= h->kind == HOOK_RETAIN && h->output_nr == k;
    tn_status st = TN_OK;
    if (!marked && capture) st = capture(arg, *g);
    for (tn_hook *h = first(&n->hooks); h && st == TN_OK; h = next_of(h)) {
        if (h->output_nr != k || !live(h)) continue;
        if (h->kind == HOOK_RETAIN && capture) st = capture(arg, *g);
        else if (h->kind == HOOK_TENSOR && !skip_tensor_hooks) st = call_tensor_hook(h, g);
    }
    return st;
}

tn_status tn__run_prehooks(tn_node *n, tn_tensor **grads_out) {
    tn_tensor *local[8], **rep = n->n_out <= 8 ? local : NULL;
    tn_status st = TN_OK;
    for (tn_hook *h = first(&n->hooks); h && st == TN_OK; h = next_of(h)) {
        if (h->kind != HOOK_PRE || !live(h)) continue;
        if (!rep && !(rep = tn__malloc_quiet((size_t)n->n_out * sizeof *rep)))
            return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
        memset(rep, 0, (size_t)n->n_out * sizeof *rep);
        before_call();
        tn__callback_frame cf;
        tn__callback_enter(&cf);
        st = h->fn.pre(n, n->n_out, grads_out, rep, h->ctx);
        st = tn__callback_leave(&cf, st, n->n_out, rep, "a node pre-hook");
        if (st < 0) hook_failed(st, "a node pre-hook");
        for (int k = 0; k < n->n_out; k++) {
            if (st < 0) tn_release(rep[k]);
            else st = take_replacement(&grads_out[k], rep[k], "pre-hook");
            rep[k] = NULL;
        }
    }
    if (rep != local) tn__mfree(rep);
    return st;
}

tn_status tn__run_posthooks(tn_node *n, tn_tensor **gin, tn_tensor *const *grads_out) {
    tn_tensor *local[8], **rep = n->n_in <= 8 ? local : NULL;
    tn_status st = TN_OK;
    for (tn_hook *h = first(&n->hooks); h && st == TN_OK; h = next_of(h)) {
        if (h->kind != HOOK_POST || !live(h)) continue;
        if (!rep && !(rep = tn__malloc_quiet((size_t)n->n_in * sizeof *rep)))
            return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
        memset(rep, 0, (size_t)n->n_in * sizeof *rep);
        before_call();
        tn__callback_frame cf;
        tn__callback_enter(&cf);
        st = h->fn.post(n, n->n_in, gin, rep, n->n_out, grads_out, h->ctx);
        st = tn__callback_leave(&cf, st, n->n_in, rep, "a node hook");
        if (st < 0) hook_failed(st, "a node hook");
        for (int i = 0; i < n->n_in; i++) {
            if (st < 0 || !rep[i]) {
                tn_release(rep[i]);
            } else if (!gin[i]) { /* a gradient where there was none: checked against the input */
                const tn_input_meta *m = &n->in_meta[i];
                if (!tn__edge_valid(&n->edges[i])) {
                    tn_release(rep[i]); /* the input needs none */
                } else if (rep[i]->ndim != m->ndim || rep[i]->dtype != m->dtype ||
                           memcmp(rep[i]->shape, m->shape, (size_t)m->ndim * sizeof *m->shape)) {
                    tn_release(rep[i]);
                    st = tn__error(TN_ERR_SHAPE, "hook of %s returned a gradient for input %d "
                                   "whose shape or dtype is not the input's", n->fn->name, i);
                } else {
                    gin[i] = rep[i];
                }
            } else {
                st = take_replacement(&gin[i], rep[i], "hook");
            }
            rep[i] = NULL;
        }
    }
    if (rep != local) tn__mfree(rep);
    return st;
}

tn_status tn__run_cell_hooks(tn_grad_cell *c, tn_tensor **g) {
    tn_status st = TN_OK;
    for (tn_hook *h = first(&c->hooks); h && st == TN_OK; h = next_of(h))
        if (h->kind == HOOK_TENSOR && live(h)) st = call_tensor_hook(h, g);
    return st;
}

tn_status tn__run_post_accumulate(tn_grad_cell *c) {
    tn_status st = TN_OK;
    for (tn_hook *h = first(&c->hooks); h && st == TN_OK; h = next_of(h)) {
        if (h->kind != HOOK_POST_ACCUMULATE || !live(h) || !tn__try_retain(h->leaf)) continue;
        before_call();
        tn__callback_frame cf;
        tn__callback_enter(&cf);
        st = h->fn.post_acc(h->leaf, h->ctx);
        st = tn__callback_leave(&cf, st, 0, NULL, "a post accumulate grad hook");
        if (st < 0) hook_failed(st, "a post accumulate grad hook");
        tn__internal_enter(); /* our own reference: not a scope's */
        tn_release(h->leaf);
        tn__internal_leave();
    }
    return st;
}
