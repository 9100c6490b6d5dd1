/* engine/autograd/engine_internal.h — one backward pass's state, shared by
 * the files of the backward engine (private to them):
 *
 *   engine.c    tn__run_backward: the pass from start to end, the roots'
 *               seeds, the end-of-pass callbacks
 *   run_table.c the pass's hash tables of nodes and leaf cells reached
 *   discover.c  discovery (dependency counts) and functional mode's
 *               needed marks
 *   schedule.c  which node runs next: the ready heap, or OpenMP tasks
 *   run_node.c  one node's backward: its gradients in, saved tensors,
 *               hooks, its gradients out
 *   deliver.c   sending gradients along edges, and the leaf cells: their
 *               hooks when ready, .grad at the end of the pass
 *
 * The pass's overview, and the saved-tensor lifetime rules, are in engine.c.
 */
#ifndef TN_AUTOGRAD_ENGINE_INTERNAL_H
#define TN_AUTOGRAD_ENGINE_INTERNAL_H

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
     * and runs its hooks (deliver.c: cell_ready): PyTorch's AccumulateGrad time. */
    _Atomic int pending;
    bool ready;         /* taken by cell_ready: the gradient is in ready_g */
    tn_tensor *ready_g; /* the pass's gradient after the cell's hooks (owned) */
    tn_cell_update up;  /* the update tn__deliver_cells prepared */
    bool committed;     /* .grad updated by this run (post-accumulate hooks) */
} cell_state;

/* A callback queued during the pass (tn_backward_queue_callback). */
typedef struct queued_cb {
    struct queued_cb *next;
    tn_backward_callback_fn fn;
    void *ctx;
} queued_cb;

typedef struct tn_run {
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
} tn_run;

/* The pass this thread is running nodes or hooks of (NULL outside one):
 * where tn_backward_queue_callback queues. Set by the thread that calls
 * backward and, under tn_set_parallel_backward, by each worker around the
 * node it runs; restored afterwards, so a backward called from a hook nests. */
extern _Thread_local tn_run *tn__tls_run;

/* ---- run_table.c ------------------------------------------------------------ */
static inline size_t tn__hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}
/* n's state, or the empty slot where it would go (inline: once per edge). */
static inline node_state *tn__run_lookup(tn_run *r, const tn_node *n) {
    size_t i = tn__hash_ptr(n) & (r->cap - 1);
    while (r->tab[i].node && r->tab[i].node != n)
        i = (i + 1) & (r->cap - 1);
    return &r->tab[i];
}
/* c's state, or the empty slot where it would go. */
static inline cell_state *tn__run_cell_lookup(tn_run *r, const tn_grad_cell *c) {
    size_t i = tn__hash_ptr(c) & (r->cell_cap - 1);
    while (r->cells[i].cell && r->cells[i].cell != c)
        i = (i + 1) & (r->cell_cap - 1);
    return &r->cells[i];
}
/* The first table, or twice the size. TN_OK or out of memory. */
tn_status tn__run_grow(tn_run *r);
/* The state for n, inserted if new (*fresh); NULL + error on OOM. */
node_state *tn__run_insert(tn_run *r, tn_node *n, bool *fresh);
/* Registers a leaf cell (discovery and seeding only: the table is frozen
 * before nodes run). */
tn_status tn__run_cell_insert(tn_run *r, tn_grad_cell *c);
/* Frees everything the pass holds (gradients left on error paths included). */
void tn__run_free(tn_run *r);

/* ---- discover.c ------------------------------------------------------------- */
/* Every node reachable from the roots (NULL entries skipped), with
 * dependency counts; the leaf and retain_grad cells they feed. */
tn_status tn__discover(tn_run *r, int n_roots, tn_node *const *roots);
/* Functional mode: marks the nodes that lead to a requested input. */
tn_status tn__mark_needed(tn_run *r);

/* ---- schedule.c ------------------------------------------------------------- */
/* Runs every discovered node once its gradients are complete. */
tn_status tn__run_graph(tn_run *r);

/* ---- run_node.c ------------------------------------------------------------- */
/* Node s's backward: sums its inboxes, runs its hooks and backward, sends
 * each input's gradient along its edge. */
tn_status tn__run_node(tn_run *r, node_state *s);

/* ---- deliver.c -------------------------------------------------------------- */
/* Sends gradient g (consumed) along edge e; seq/edge order the delivery. */
tn_status tn__send(tn_run *r, const tn_edge *e, tn_tensor *g, uint64_t seq, int edge);
/* Adds g (consumed) into a gradient buffer slot (single consumer). */
tn_status tn__buffer_add(tn_tensor **slot, tn_tensor *g);
/* retain_grad: output k of n keeps g (borrowed) as its .grad. arg: a retain_arg. */
typedef struct retain_arg {
    tn_run *r;
    tn_node *n;
    int k;
} retain_arg;
tn_status tn__capture_retained(void *arg, tn_tensor *g);
/* Node n has run: the leaf cells it feeds have one producer less. */
tn_status tn__node_done(tn_run *r, const tn_node *n);
/* End of a run: each leaf's gradient into its .grad (or grads_out), all or none. */
tn_status tn__deliver_cells(tn_run *r);

#endif
