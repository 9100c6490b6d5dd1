/* Which node of a backward pass runs next. Serially, a max-heap of ready
 * nodes (every gradient delivered) on creation sequence: the latest first,
 * as PyTorch. With tn_set_parallel_backward(true), OpenMP tasks: the thread
 * whose delivery brings a node's dependency count to zero runs it; inboxes
 * (inbox.h) keep the sums in the serial order, so results are bit-identical.
 */
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine_internal.h"

static void heap_push(tn_run *r, tn_node *n) {
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

static tn_node *heap_pop(tn_run *r) {
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
static void fail(tn_run *r, tn_status st) {
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&r->status, &expected, (int)st,
                                                memory_order_acq_rel, memory_order_acquire))
        snprintf(r->message, sizeof r->message, "%s", tn_last_error());
}

/* One node as a task, on whichever thread: it sets the run's thread-local
 * modes, runs the node, and spawns each child whose count it brings to 0. */
static void task_run(tn_run *r, node_state *s) {
    if (atomic_load_explicit(&r->status, memory_order_acquire) < 0) return;
    bool prev = tn_set_grad_enabled(r->create_graph);
    tn_run *prev_run = tn__tls_run;
    tn__tls_run = r;
    tn__internal_enter();
    tn_status st = tn__run_node(r, s);
    drop_buffers(s);
    if (st == TN_OK) st = tn__node_done(r, s->node);
    tn__internal_leave();
    tn__tls_run = prev_run;
    tn_set_grad_enabled(prev);
    if (st < 0) {
        fail(r, st);
        return;
    }
    tn_node *n = s->node;
    for (int i = 0; i < n->n_in; i++) {
        tn_node *c = n->edges[i].node;
        if (!c) continue;
        node_state *cs = tn__run_lookup(r, c);
        /* acq_rel: our sends into c's inboxes happen before c runs */
        int old = atomic_fetch_sub_explicit(&cs->deps, 1, memory_order_acq_rel);
        TN_ASSERT(old > 0);
        if (old == 1) {
#pragma omp task firstprivate(cs)
            task_run(r, cs);
        }
    }
}

static tn_status run_parallel(tn_run *r, int nt) {
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

static bool use_parallel(const tn_run *r, int *nt) {
#ifdef _OPENMP
    *nt = tn_get_num_threads();
    return tn_is_parallel_backward() && !tn__anomaly_enabled() && !r->monitor && r->count > 1 &&
           *nt > 1 && !omp_in_parallel();
#else
    (void)r;
    *nt = 1;
    return false;
#endif
}

tn_status tn__run_graph(tn_run *r) {
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
        node_state *s = tn__run_lookup(r, n);
        tn_status st = tn__run_node(r, s);
        drop_buffers(s);
        if (st == TN_OK) st = tn__node_done(r, n);
        if (st < 0) return st;
        for (int i = 0; i < n->n_in; i++) {
            tn_node *c = n->edges[i].node;
            if (!c) continue;
            node_state *cs = tn__run_lookup(r, c);
            TN_ASSERT(cs->node == c && cs->deps > 0);
            if (--cs->deps == 0) heap_push(r, c);
        }
    }
    return TN_OK;
}
