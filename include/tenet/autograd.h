/* tenet/autograd.h — reverse-mode autograd with PyTorch's semantics.
 *
 * Aliases (docs/semantics.md §1): views and tn_detach share storage AND version
 * counter; tn_data shares storage with a NEW counter (untracked: unsafe by
 * design, as torch's .data); tn_clone deep-copies with history.
 *
 * Threads: grad mode is thread-local. Backward may run on several threads at
 * once, also into shared leaves (accumulation is lock-free and exact).
 */
#ifndef TENET_AUTOGRAD_H
#define TENET_AUTOGRAD_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* requires_grad_(flag). Error on a non-leaf turning it off ("you can only
 * change requires_grad flags of leaf variables") and on integer dtypes. */
tn_status tn_requires_grad_(tn_tensor *t, bool requires_grad);
/* Keep the gradient of a non-leaf after backward (no-op on leaves). */
tn_status tn_retain_grad(tn_tensor *t);
/* New leaf sharing storage and version counter, requires_grad false. */
tn_tensor *tn_detach(tn_tensor *t);
/* In place: drops t's history and requires_grad; returns t (borrowed: the
 * same handle, no new reference). Error on views. Version unchanged. */
tn_tensor *tn_detach_(tn_tensor *t);
/* torch's .data: shares storage, new version counter, no history. */
tn_tensor *tn_data(tn_tensor *t);
/* Deep copy; grad_fn CloneBackward0 when t requires grad. */
tn_tensor *tn_clone(tn_tensor *t);
/* In place dst <- src (broadcast src to dst's shape, convert dtype). dst keeps
 * its dtype and device; if src requires grad dst joins the graph
 * (CopyBackwards, or CopySlices on its base when dst is a view). Bumps dst's
 * version. Error if dst is a leaf requiring grad while grad mode is on. */
tn_status tn_copy_(tn_tensor *dst, const tn_tensor *src);

/* Computes gradients of t w.r.t. graph leaves and accumulates them into
 * .grad. grad may be NULL only when t has one element. retain_graph keeps the
 * saved tensors for another backward. */
tn_status tn_backward(tn_tensor *t, const tn_tensor *grad, bool retain_graph);
/* As tn_backward; create_graph records the backward computation itself. */
tn_status tn_backward_ex(tn_tensor *t, const tn_tensor *grad, bool retain_graph,
                         bool create_graph);
/* Functional gradients: grads_out[i] (new references, NULL where an input is
 * unreachable) of sum(outputs[j] * grad_outputs[j]) w.r.t. inputs[i].
 * grad_outputs may be NULL (all outputs must then be scalars). Nothing is
 * accumulated into .grad. */
tn_status tn_autograd_grad(int n_out, tn_tensor *const *outputs,
                           tn_tensor *const *grad_outputs, int n_in,
                           tn_tensor *const *inputs, tn_tensor **grads_out,
                           bool retain_graph, bool create_graph);

/* .grad: a new reference, or NULL when there is none (tn_last_status() stays
 * TN_OK then). Reading .grad of a non-leaf that does not retain its grad
 * warns once on stderr, as PyTorch. */
tn_tensor *tn_grad(tn_tensor *t);
/* Sets .grad to g (retained; must match t's shape and dtype), or clears it
 * with NULL. g == t is refused (TN_ERR_AUTOGRAD, "can't assign Variable as
 * its own grad"). A g that leads back to t (t is g's view base, or reached
 * through g's own .grad) would make a reference cycle: a detached alias of
 * g is stored instead (same storage and version counter, no history), and
 * tn_grad(t) returns that alias. */
tn_status tn_set_grad(tn_tensor *t, tn_tensor *g);
/* Clears .grad (sets it to NULL, as zero_grad(set_to_none=True)). */
tn_status tn_zero_grad(tn_tensor *t);

/* Thread-local grad mode (torch.no_grad). Returns the previous mode. */
bool tn_set_grad_enabled(bool enabled);
bool tn_is_grad_enabled(void);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
