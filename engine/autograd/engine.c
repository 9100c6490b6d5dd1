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
 */
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "inbox.h"

typedef struct node_state {
    tn_node *node;
    _Atomic int deps;
    int tmp;
    bool needed;
    tn_tensor **inbuf; /* n_out gradients, summed from the inboxes */
    tn_inbox *inbox;   /* n_out */
} node_state;

/* A leaf cell reached by this run: its contributions wait here. */
typedef struct cell_state {
    tn_grad_cell *cell;
    tn_inbox inbox;
    /* Edges into the cell whose node has not run yet (counted at discovery).
     * The node that brings it to 0 takes the cell's gradient for the pass
     * and runs its hooks (cell_ready): PyTorch's AccumulateGrad time. */
    _Atomic int pending;
    bool ready;          /* taken by cell_ready: the gradient is in ready_g */
    tn_tensor *ready_g;  /* the pass's gradient after the cell's hooks (owned) */
    tn_cell_update up; /* the update deliver_cells prepared */
    bool committed;    /* .grad updated by this run (post-accumulate hooks) */
} cell_state;

/* A callback queued during the pass (tn_backward_queue_callback). */
typedef struct queued_cb {
    struct queued_cb *next;
    tn_backward_callback_fn fn;
    void *ctx;
} queued_cb;

typedef struct run {
    node_state *tab;
    size_t cap; /* power of two */
    size_t count;
    tn_node **heap; /* ready nodes, max-heap on seq */
    size_t heap_n;
    cell_state *cells; /* open addressing, cell_cap a power of two */
    size_t cell_cap, cell_count;
    bool retain_graph, create_graph, functional;
    int n_inputs;
    tn_tensor *const *inputs;
    tn_tensor **grads_out;
    /* parallel runs: the first error, its message copied from the worker */
    _Atomic int status;
    char message[1024];
    void *monitor; /* the gradient monitor's record of this pass, or NULL */
    /* Callbacks for the end of the pass, newest first. Pushed from hooks on
     * any thread of the pass (release CAS), taken once at the end by the
     * thread that runs the pass (acquire exchange), after every worker joined. */
    _Atomic(queued_cb *) callbacks;
} run;

/* The pass this thread is running nodes or hooks of (NULL outside one):
 * where tn_backward_queue_callback queues. Set by the thread that calls
 * backward and, under tn_set_parallel_backward, by each worker around the
 * node it runs; restored afterwards, so a backward called from a hook nests. */
static _Thread_local run *tls_run;

static size_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static node_state *lookup(run *r, tn_node *n) {
    size_t i = hash_ptr(n) & (r->cap - 1);
    while (r->tab[i].node && r->tab[i].node != n) i = (i + 1) & (r->cap - 1);
    return &r->tab[i];
}

/* This thread's last run size: the next table starts there, so a training
 * loop's backward never rehashes. */
static _Thread_local size_t tls_cap_hint;

static tn_status grow(run *r) {
    size_t ncap = r->cap ? r->cap * 2 : (tls_cap_hint ? tls_cap_hint : 64);
    node_state *old = r->tab;
    size_t ocap = r->cap;
    r->tab = tn__calloc_quiet(ncap, sizeof *r->tab);
    if (!r->tab) {
        r->tab = old;
        return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    }
    r->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].node) *lookup(r, old[i].node) = old[i];
    tn__mfree(old);
    return TN_OK;
}

/* Returns the state for n, inserting it; *fresh tells whether it was new. */
static node_state *insert(run *r, tn_node *n, bool *fresh) {
    if ((r->count + 1) * 2 > r->cap && grow(r) < 0) return NULL;
    node_state *s = lookup(r, n);
    *fresh = s->node == NULL;
    if (*fresh) {
        s->node = n;
        s->inbuf = tn__calloc_quiet((size_t)n->n_out, sizeof *s->inbuf + sizeof *s->inbox);
        s->inbox = s->inbuf ? (tn_inbox *)(s->inbuf + n->n_out) : NULL;
        if (!s->inbuf) {
            s->node = NULL;
            tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
            return NULL;
        }
        r->count++;
    }
    return s;
}

static cell_state *cell_lookup(run *r, const tn_grad_cell *c) {
    size_t i = hash_ptr(c) & (r->cell_cap - 1);
    while (r->cells[i].cell && r->cells[i].cell != c) i = (i + 1) & (r->cell_cap - 1);
    return &r->cells[i];
}

/* Registers a leaf cell (discovery only: the table is frozen before nodes run). */
static tn_status cell_insert(run *r, tn_grad_cell *c) {
    if ((r->cell_count + 1) * 2 > r->cell_cap) {
        size_t ncap = r->cell_cap ? r->cell_cap * 2 : 16, ocap = r->cell_cap;
        cell_state *old = r->cells, *nt = tn__calloc_quiet(ncap, sizeof *nt);
        if (!nt) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
        r->cells = nt;
        r->cell_cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].cell) *cell_lookup(r, old[i].cell) = old[i];
        tn__mfree(old);
    }
    cell_state *cs = cell_lookup(r, c);
    if (!cs->cell) {
        cs->cell = c;
        r->cell_count++;
    }
    return TN_OK;
}

/* Registers n's retain_grad cells: like leaves' cells, they are fed at the
 * end of the run (deliver_cells), so a failed run changes no .grad. */
static tn_status note_retained(run *r, tn_node *n) {
    for (int k = 0; k < n->n_out && !r->functional; k++) {
        tn_grad_cell *rc = atomic_load_explicit(&n->retained[k], memory_order_acquire);
        if (rc && cell_insert(r, rc) < 0) return TN_ERR_OUT_OF_MEMORY;
    }
    return TN_OK;
}

/* Discovery: every node reachable from the roots, with dependency counts. */
static tn_status discover(run *r, int n_roots, tn_node *const *roots) {
    size_t cap = 64 + (size_t)n_roots, top = 0;
    tn_node **stack = tn__malloc_quiet(cap * sizeof *stack);
    if (!stack) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    for (int i = 0; i < n_roots; i++) {
        bool fresh;
        if (!roots[i]) continue;
        if (!insert(r, roots[i], &fresh)) goto oom;
        if (fresh) stack[top++] = roots[i];
    }
    while (top) {
        tn_node *n = stack[--top];
        if (note_retained(r, n) < 0) goto oom;
        for (int i = 0; i < n->n_in; i++) {
            if (n->edges[i].cell) {
                if (cell_insert(r, n->edges[i].cell) < 0) goto oom;
                /* relaxed: discovery is single-threaded, before any node runs */
                atomic_fetch_add_explicit(&cell_lookup(r, n->edges[i].cell)->pending, 1,
                                          memory_order_relaxed);
            }
            tn_node *c = n->edges[i].node;
            if (!c) continue;
            bool fresh;
            node_state *s = insert(r, c, &fresh);
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
static bool is_capture_cell(const run *r, const tn_grad_cell *c) {
    for (int i = 0; i < r->n_inputs; i++) {
        const tn_tensor *t = r->inputs[i];
        if (tn__leaf_cell(t) == c) return true;
    }
    return false;
}

static bool feeds_input(const run *r, const tn_edge *e) {
    if (e->cell) return is_capture_cell(r, e->cell);
    if (!e->node) return false; /* an empty edge (an input that needs no grad) feeds nothing */
    for (int k = 0; k < r->n_inputs; k++) {
        const tn_tensor *t = r->inputs[k];
        if (tn__grad_fn(t) == e->node) return true;
    }
    return false;
}

/* Kahn order from the roots, then a reverse sweep: children before parents. */
static tn_status mark_needed(run *r) {
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
            if (c && --lookup(r, c)->tmp == 0) order[tail++] = c;
        }
    }
    while (tail > 0) {
        tn_node *n = order[--tail];
        bool need = false;
        for (int i = 0; i < n->n_in && !need; i++) {
            const tn_edge *e = &n->edges[i];
            need = feeds_input(r, e) || (e->node && lookup(r, e->node)->needed);
        }
        lookup(r, n)->needed = need;
    }
    tn__mfree(order);
    return TN_OK;
}

static void heap_push(run *r, tn_node *n) {
    size_t i = r->heap_n++;
    r->heap[i] = n;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (r->heap[p]->seq >= r->heap[i]->seq) break;
        tn_node *t = r->heap[p];
        r->heap[p] = r->heap[i];
        r->heap[i] = t;
        i = p;
    }
}

static tn_node *heap_pop(run *r) {
    tn_node *top = r->heap[0];
    r->heap[0] = r->heap[--r->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < r->heap_n && r->heap[l]->seq > r->heap[m]->seq) m = l;
        if (l + 1 < r->heap_n && r->heap[l + 1]->seq > r->heap[m]->seq) m = l + 1;
        if (m == i) break;
        tn_node *t = r->heap[m];
        r->heap[m] = r->heap[i];
        r->heap[i] = t;
        i = m;
    }
    return top;
}

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
    if (atomic_fetch_sub_explicit(&n->saved_refs, 1, memory_order_acq_rel) == 1)
        tn__node_free_saved(n);
}

static tn_status saved_get(tn_node *n, bool retain_graph) {
    if (!n->has_saved) return TN_OK;
    if (!retain_graph &&
        atomic_exchange_explicit(&n->claimed, true, memory_order_acq_rel))
        return second_time_error();
    int64_t c = atomic_load_explicit(&n->saved_refs, memory_order_acquire);
    do {
        if (c == 0) return second_time_error();
        /* acquire on success: pairs with the release of the saver/previous
         * user so the saved tensors are fully visible. */
    } while (!atomic_compare_exchange_weak_explicit(&n->saved_refs, &c, c + 1,
                                                    memory_order_acquire, memory_order_acquire));
    return TN_OK;
}

/* Adds g (consumed) into a gradient buffer slot (single consumer). */
static tn_status buffer_add(tn_tensor **slot, tn_tensor *g) {
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

static int capture_index_cell(const run *r, const tn_grad_cell *c) {
    for (int i = 0; i < r->n_inputs; i++) {
        const tn_tensor *t = r->inputs[i];
        if (tn__leaf_cell(t) == c) return i;
    }
    return -1;
}

/* Sends gradient g (consumed) along edge e; seq/edge order the delivery. */
static tn_status send(run *r, const tn_edge *e, tn_tensor *g, uint64_t seq, int edge) {
    if (e->cell) return tn__inbox_push(&cell_lookup(r, e->cell)->inbox, g, seq, edge);
    node_state *s = lookup(r, e->node);
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

/* End of a run: each leaf's gradient, summed in order, into its .grad (or
 * into grads_out for tn_autograd_grad). Every cell's update is prepared
 * (all allocations) before any is committed, so a failed run changes no
 * .grad. */
static tn_status deliver_cells(run *r) {
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
        if (k < 0) tn_release(g);
        else st = buffer_add(&r->grads_out[k], g);
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
        if (c && r->cells[i].committed && tn__has_hooks(&c->hooks))
            st = tn__run_post_accumulate(c);
    }
    return st;
}

/* retain_grad: output k of n keeps g (borrowed) as its .grad. */
typedef struct retain_arg {
    run *r;
    tn_node *n;
    int k;
} retain_arg;

static tn_status capture_retained(void *arg, tn_tensor *g) {
    retain_arg *a = arg;
    run *r = a->r;
    tn_grad_cell *rc = atomic_load_explicit(&a->n->retained[a->k], memory_order_acquire);
    if (!rc) return TN_OK;
    cell_state *cs = r->cell_cap ? cell_lookup(r, rc) : NULL;
    if (cs && cs->cell == rc) /* registered at discovery: delivered at the end */
        return tn__inbox_push(&cs->inbox, tn__retain(g), a->n->seq, a->k);
    /* retain_grad called while this run was going */
    return accumulate_weak(rc, tn__retain(g), r->create_graph);
}

/* Every producer of leaf cell cs has run: its gradient for the pass is
 * final. Take it and run the cell's hooks now, as PyTorch runs a leaf's
 * hooks when its AccumulateGrad node runs (DDP launches a bucket's
 * allreduce from there); .grad itself is still updated at the end of the
 * pass (deliver_cells), all cells or none. */
static tn_status cell_ready(run *r, cell_state *cs) {
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

/* Node n has run: the leaf cells it feeds have one producer less. */
static tn_status node_done(run *r, const tn_node *n) {
    tn_status st = TN_OK;
    for (int i = 0; i < n->n_in && st == TN_OK; i++) {
        tn_grad_cell *c = n->edges[i].cell;
        if (!c || r->functional) continue;
        cell_state *cs = cell_lookup(r, c);
        /* acq_rel: our sends into the cell's inbox happen before the last
         * producer's take (it acquires every earlier producer's release). */
        if (atomic_fetch_sub_explicit(&cs->pending, 1, memory_order_acq_rel) == 1)
            st = cell_ready(r, cs);
    }
    return st;
}

static tn_status run_callbacks(run *r, tn_status st) __attribute__((noinline));

static tn_status execute(run *r, node_state *s) {
    tn_node *n = s->node;
    tn_status st = TN_OK;
    for (int k = 0; k < n->n_out; k++)
        if ((st = tn__inbox_take(&s->inbox[k], &s->inbuf[k])) < 0) return st;
    /* functional: capture gradients of non-leaf inputs at their grad_fn */
    for (int k = 0; r->functional && k < r->n_inputs; k++) {
        const tn_tensor *t = r->inputs[k];
        if (tn__grad_fn(t) == n && s->inbuf[t->ag->output_nr]) {
            tn_tensor *g = s->inbuf[t->ag->output_nr];
            st = buffer_add(&r->grads_out[k], tn__retain(g));
            if (st < 0) return st;
        }
    }
    if (r->functional && !s->needed) return TN_OK;
    bool any = false;
    for (int k = 0; k < n->n_out; k++) any |= s->inbuf[k] != NULL;
    if (!any) return TN_OK; /* nothing flows through: children get nothing */
    bool hooked = tn__has_hooks(&n->hooks);
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
                                      rc && !r->functional ? capture_retained : NULL, &ra);
        else if (rc && !r->functional)
            st = capture_retained(&ra, s->inbuf[k]);
        if (st < 0) return st;
    }
    if (hooked && (st = tn__run_prehooks(n, s->inbuf)) < 0) return st;
    /* CopySlices runs its inner node's backward: its saved tensors too */
    tn_node *inner = n->inner;
    st = saved_get(n, r->retain_graph);
    if (st < 0 && tn__anomaly_enabled()) tn__hooks.backward_error(n, st);
    if (st == TN_OK && inner && (st = saved_get(inner, r->retain_graph)) < 0 && n->has_saved) {
        saved_put(n);
        if (!r->retain_graph) saved_put(n);
    }
    if (st < 0) return st;
    tn_tensor *stack_gin[8];
    tn_tensor **gin = n->n_in <= 8 ? stack_gin : tn__calloc_quiet((size_t)n->n_in, sizeof *gin);
    if (!gin) {
        st = tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
        goto done;
    }
    memset(gin, 0, (size_t)n->n_in * sizeof *gin);
    double t0 = tn__prof_start(); /* the profiler: the node's span */
    bool anomaly = tn__anomaly_enabled();
    tn_node *prev_running = anomaly ? tn__hooks.set_running(n) : NULL;
    st = n->fn->backward(n, s->inbuf, gin);
    if (anomaly) tn__hooks.set_running(prev_running);
    if (st == TN_OK && anomaly && tn__anomaly_nan()) st = tn__hooks.check_backward(n, s->inbuf, gin);
    if (st < 0 && anomaly) tn__hooks.backward_error(n, st);
    /* each input's gradient summed to its shape, on its device */
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
    if (TN_UNLIKELY(t0 > 0)) tn__hooks.prof_node(n->fn->name, n->seq, t0);
    if (st == TN_OK && r->monitor) tn__hooks.monitor_node(r->monitor, n, gin);
    if (st == TN_OK && hooked) st = tn__run_posthooks(n, gin, s->inbuf);
    for (int i = 0; i < n->n_in; i++) {
        if (!gin[i]) continue;
        if (st == TN_OK) st = send(r, &n->edges[i], gin[i], n->seq, i);
        else tn_release(gin[i]);
    }
    if (gin != stack_gin) tn__mfree(gin);
done:
    for (tn_node *m = n; m; m = m == n ? inner : NULL) {
        if (!m->has_saved) continue;
        saved_put(m);
        if (!r->retain_graph) saved_put(m); /* the graph's reference (claimed) */
    }
    return st;
}

static void run_free(run *r) {
    for (size_t i = 0; i < r->cap; i++) {
        node_state *s = &r->tab[i];
        if (!s->node) continue;
        for (int k = 0; k < s->node->n_out; k++) {
            tn_release(s->inbuf[k]);
            tn__inbox_clear(&s->inbox[k]);
        }
        tn__mfree(s->inbuf);
    }
    for (size_t i = 0; i < r->cell_cap; i++) {
        if (!r->cells[i].cell) continue;
        tn__inbox_clear(&r->cells[i].inbox);
        tn_release(r->cells[i].ready_g);
        tn__cell_update_drop(&r->cells[i].up);
    }
    tn__mfree(r->cells);
    tn__mfree(r->tab);
    tn__mfree(r->heap);
    tls_cap_hint = r->cap <= 4096 ? r->cap : 4096; /* bounded: a small graph after a
                                                      * huge one stays cheap */
}

/* Gradients of n's outputs are consumed: free them to bound peak memory. */
static void drop_buffers(node_state *s) {
    for (int k = 0; k < s->node->n_out; k++) {
        tn_release(s->inbuf[k]);
        s->inbuf[k] = NULL;
    }
}

/* ---- parallel runs ------------------------------------------------------------- */

/* Off by default: most graphs are chains whose big ops use OpenMP inside,
 * and an op inside a task runs on one thread. Relaxed: a plain setting. */
static _Atomic bool g_parallel_backward;

void tn_set_parallel_backward(bool enabled) {
    atomic_store_explicit(&g_parallel_backward, enabled, memory_order_relaxed);
}
bool tn_is_parallel_backward(void) {
    return atomic_load_explicit(&g_parallel_backward, memory_order_relaxed);
}

#ifdef _OPENMP
/* The first failing task's status and message (the run's result). */
static void fail(run *r, tn_status st) {
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&r->status, &expected, (int)st,
                                                memory_order_acq_rel, memory_order_acquire))
        snprintf(r->message, sizeof r->message, "%s", tn_last_error());
}

/* One node as a task, on whichever thread: it sets the run's thread-local
 * modes, runs the node, and spawns each child whose count it brings to 0. */
static void task_run(run *r, node_state *s) {
    if (atomic_load_explicit(&r->status, memory_order_acquire) < 0) return;
    bool prev = tn_set_grad_enabled(r->create_graph);
    run *prev_run = tls_run;
    tls_run = r;
    tn__internal_enter();
    tn_status st = execute(r, s);
    drop_buffers(s);
    if (st == TN_OK) st = node_done(r, s->node);
    tn__internal_leave();
    tls_run = prev_run;
    tn_set_grad_enabled(prev);
    if (st < 0) {
        fail(r, st);
        return;
    }
    tn_node *n = s->node;
    for (int i = 0; i < n->n_in; i++) {
        tn_node *c = n->edges[i].node;
        if (!c) continue;
        node_state *cs = lookup(r, c);
        /* acq_rel: our sends into c's inboxes happen before c runs */
        if (atomic_fetch_sub_explicit(&cs->deps, 1, memory_order_acq_rel) == 1) {
#pragma omp task firstprivate(cs)
            task_run(r, cs);
        }
    }
}

static tn_status run_parallel(run *r, int nt) {
    /* The roots are listed before any task starts: a running task brings
     * other counts to zero, and those nodes are its to spawn, not ours. */
    node_state **ready = tn__malloc_quiet((r->count + 1) * sizeof *ready);
    if (!ready) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    size_t n_ready = 0;
    for (size_t i = 0; i < r->cap; i++)
        if (r->tab[i].node && atomic_load_explicit(&r->tab[i].deps, memory_order_relaxed) == 0)
            ready[n_ready++] = &r->tab[i];
#pragma omp parallel num_threads(nt)
    {
        TN_OMP_SPAN("backward"); /* each worker: the tasks it ran, to the team's barrier */
#pragma omp single
        {
            for (size_t i = 0; i < n_ready; i++) {
                node_state *s = ready[i];
#pragma omp task firstprivate(s)
                task_run(r, s);
            }
        }
    }
    tn__mfree(ready);
    tn_status st = (tn_status)atomic_load_explicit(&r->status, memory_order_acquire);
    return st < 0 ? tn__error(st, "%s", r->message) : TN_OK;
}
#endif

static bool use_parallel(const run *r, int *nt) {
#ifdef _OPENMP
    *nt = tn_get_num_threads();
    return tn_is_parallel_backward() && !tn__anomaly_enabled() && !r->monitor && r->count > 1 &&
           *nt > 1 &&
           !omp_in_parallel();
#else
    (void)r;
    *nt = 1;
    return false;
#endif
}

static tn_status run_graph(run *r) {
    int nt;
#ifdef _OPENMP
    if (use_parallel(r, &nt)) return run_parallel(r, nt);
#else
    (void)use_parallel(r, &nt);
#endif
    r->heap = tn__malloc_quiet((r->count + 1) * sizeof *r->heap);
    if (!r->heap) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    for (size_t i = 0; i < r->cap; i++)
        if (r->tab[i].node && r->tab[i].deps == 0) heap_push(r, r->tab[i].node);
    while (r->heap_n) {
        tn_node *n = heap_pop(r);
        node_state *s = lookup(r, n);
        tn_status st = execute(r, s);
        drop_buffers(s);
        if (st == TN_OK) st = node_done(r, n);
        if (st < 0) return st;
        for (int i = 0; i < n->n_in; i++) {
            tn_node *c = n->edges[i].node;
            if (c && --lookup(r, c)->deps == 0) heap_push(r, c);
        }
    }
    return TN_OK;
}

tn_status tn__run_backward(int n_roots, tn_tensor *const *roots, tn_tensor *const *grads,
                           bool retain_graph, bool create_graph, int n_inputs,
                           tn_tensor *const *inputs, tn_tensor **grads_out) {
    run r = {.retain_graph = retain_graph, .create_graph = create_graph,
             .functional = inputs != NULL, .n_inputs = n_inputs, .inputs = inputs,
             .grads_out = grads_out};
    tn_node *stack_roots[8];
    tn_node **rn = n_roots <= 8 ? stack_roots : tn__calloc_quiet((size_t)n_roots, sizeof *rn);
    if (!rn) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    bool prev_mode = tn_set_grad_enabled(create_graph);
    run *prev_run = tls_run;
    tls_run = &r;
    tn__internal_enter();
    tn_status st = TN_OK;
    /* stale views first: their histories are read below and while running */
    for (int i = 0; st == TN_OK && i < n_roots; i++)
        st = tn__view_sync(roots[i]);
    for (int i = 0; st == TN_OK && i < n_inputs; i++)
        st = tn__view_sync(inputs[i]);
    for (int i = 0; i < n_roots; i++)
        rn[i] = st == TN_OK ? tn__grad_fn(roots[i]) : NULL;
    if (st == TN_OK) st = grow(&r);
    if (st == TN_OK && !r.functional && TN_UNLIKELY(tn__monitor_on()))
        r.monitor = tn__hooks.monitor_begin();
    if (st == TN_OK) st = discover(&r, n_roots, rn);
    if (st == TN_OK && r.functional) st = mark_needed(&r);
    /* Seed the roots' gradients. */
    for (int i = 0; st == TN_OK && i < n_roots; i++) {
        tn_edge e = {.node = rn[i], .cell = rn[i] ? NULL : tn__leaf_cell(roots[i]),
                     .input_nr = rn[i] ? roots[i]->ag->output_nr : 0};
        if (!tn__edge_valid(&e)) continue; /* a view made in no-grad mode: leads nowhere */
        tn_tensor *g = tn__retain(grads[i]);
        if (!rn[i]) { /* a leaf root: its gradient is the seed itself */
            st = cell_insert(&r, e.cell);
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
        if (st == TN_OK) st = send(&r, &e, g, UINT64_MAX, i);
    }
    if (st == TN_OK) st = run_graph(&r);
    /* device NaN checks: a synchronisation point of every device */
    if (st == TN_OK && (tn__anomaly_nan() || tn__nf_any_batched()))
        st = tn__hooks.poll_devices(true);
    if (st == TN_OK) st = deliver_cells(&r);
    if (r.monitor) tn__hooks.monitor_end(r.monitor, st);
    run_free(&r);
    if (rn != stack_roots) tn__mfree(rn);
    /* inside backward, as hooks: no scope registers their tensors. Relaxed: this thread is the
     * only one left in the pass (the workers joined); run_callbacks acquires what it takes. */
    if (atomic_load_explicit(&r.callbacks, memory_order_relaxed)) st = run_callbacks(&r, st);
    tn__internal_leave();
    tn_set_grad_enabled(prev_mode);
    tls_run = prev_run;
    return st;
}

/* ---- callbacks at the end of the pass --------------------------------------------- */

tn_status tn_backward_queue_callback(tn_backward_callback_fn fn, void *ctx) {
    run *r = tls_run;
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
static tn_status run_callbacks(run *r, tn_status st) {
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
            tn_status cst = fifo->fn(st, fifo->ctx);
            if (cst < 0 && st == TN_OK) st = cst;
            tn__mfree(fifo);
            fifo = next;
        }
    }
    if (have_saved) tn__error(failed, "%s", saved);
    return st;
}
