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
tn_tensor *tn_detach(const tn_tensor *t);
/* In place: drops t's history and requires_grad; returns t (borrowed: the
 * same handle, no new reference). Error on views. Version unchanged. */
tn_tensor *tn_detach_(tn_tensor *t);
/* torch's .data: shares storage, new version counter, no history. */
tn_tensor *tn_data(const tn_tensor *t);
/* Deep copy; grad_fn CloneBackward0 when t requires grad. */
tn_tensor *tn_clone(const tn_tensor *t);
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
 * Ownership: as any op's result, each grads_out[i] belongs to the innermost
 * open scope when there is one (do not release it then), else to the
 * caller (release it). On failure every grads_out[i] is NULL.
 * grad_outputs may be NULL (all outputs must then be scalars). Nothing is
 * accumulated into .grad. */
tn_status tn_autograd_grad(int n_out, tn_tensor *const *outputs,
                           tn_tensor *const *grad_outputs, int n_in,
                           tn_tensor *const *inputs, tn_tensor **grads_out,
                           bool retain_graph, bool create_graph);

/* Several roots at once (torch.autograd.backward([...])): one pass that
 * accumulates the gradients of sum(roots[i] * grads[i]) into the leaves.
 * grads may be NULL, and grads[i] NULL, for roots of one element (seed 1).
 * Every root must require grad ("element i of tensors does not require
 * grad and does not have a grad_fn"); n >= 1. */
tn_status tn_backward_multi(int n, tn_tensor *const *roots, tn_tensor *const *grads,
                            bool retain_graph, bool create_graph);
/* As tn_autograd_grad, with PyTorch's allow_unused: when false, an input
 * that gets no gradient (not reached from the outputs) is an error, "One of
 * the differentiated Tensors appears to not have been used in the graph.
 * Set allow_unused=True if this is the desired behavior." (torch's default);
 * when true its gradient is NULL. tn_autograd_grad is allow_unused = true. */
tn_status tn_autograd_grad_ex(int n_out, tn_tensor *const *outputs,
                              tn_tensor *const *grad_outputs, int n_in,
                              tn_tensor *const *inputs, tn_tensor **grads_out,
                              bool retain_graph, bool create_graph, bool allow_unused);

/* ---- graph introspection (grad_fn, next_functions) ----------------------------
 * Nodes are handed out as new references (tn_node_release); a node stays
 * valid while referenced, whatever happens to the tensors and graph. */
/* t's grad_fn (a new reference), NULL for a leaf or a tensor without
 * history (tn_last_status() stays TN_OK then). */
tn_node *tn_grad_fn(const tn_tensor *t);
tn_node *tn_node_retain(tn_node *n);
void tn_node_release(tn_node *n);
/* The node's name, PyTorch's ("MulBackward0", "CopySlices", a custom
 * function's own name). */
const char *tn_node_name(const tn_node *n);
/* len(grad_fn.next_functions): one per differentiable input of the op. */
int tn_node_num_next(const tn_node *n);
/* next_functions[i]: the next node (a new reference) and which of its
 * outputs the edge comes from (input_nr may be NULL). NULL when the edge
 * ends in a leaf's .grad (PyTorch's AccumulateGrad) or is empty (None):
 * tn_node_next_name tells which. NULL + error for i out of range. */
tn_node *tn_node_next(const tn_node *n, int i, int *input_nr);
/* The name of next_functions[i][0]: the node's name, "AccumulateGrad" for
 * a leaf, NULL for an empty edge (and for i out of range, with an error). */
const char *tn_node_next_name(const tn_node *n, int i);
/* Whether next_functions[i] is the AccumulateGrad of `leaf` (its .grad). */
bool tn_node_next_is_leaf(const tn_node *n, int i, const tn_tensor *leaf);

/* ---- hooks ------------------------------------------------------------------------
 * A hook inspects gradients during backward and may replace them. To replace
 * one, store a new reference in the `replace` slot (it starts NULL; leave it
 * NULL to keep the gradient): tenet releases the old gradient and checks
 * that the new one has the same shape, dtype and device ("hook has changed
 * the size of value"). A negative status stops backward with that status
 * (the hook sets the message with its own call that failed, or any tenet
 * error). Hooks run in registration order, on the thread that runs the node
 * they belong to (an OpenMP worker under tn_set_parallel_backward). A leaf's
 * hooks run as soon as its gradient for the pass is complete, as PyTorch
 * runs them from the leaf's AccumulateGrad node: on the thread that ran the
 * last node feeding the leaf (the thread that called backward when the pass
 * runs serially). Every .grad of the pass is still updated at its end, all
 * or none; post-accumulate hooks run after that, on the thread that called
 * backward.
 * Registration and removal are lock-free and may race with backward passes:
 * a pass that started before a removal may still call the hook. `ctx` is
 * the caller's; it must outlive the hook's last call.
 *
 * Each register function returns a handle (NULL + error on failure):
 * tn_hook_remove(h) unregisters the hook and frees the handle;
 * tn_hook_release(h) frees the handle only (the hook stays for the life of
 * the tensor's node or gradient cell). One of the two must be called. */
typedef struct tn_hook tn_hook;
/* Tensor.register_hook: called with the gradient of t (before it is
 * accumulated into a leaf's .grad, or before t's grad_fn uses it). */
typedef tn_status (*tn_tensor_hook_fn)(const tn_tensor *grad, tn_tensor **replace, void *ctx);
/* Tensor.register_post_accumulate_grad_hook: called with the leaf after its
 * .grad was updated. */
typedef tn_status (*tn_post_accumulate_hook_fn)(tn_tensor *leaf, void *ctx);
/* Node.register_prehook: the node's output gradients before it runs. */
typedef tn_status (*tn_node_prehook_fn)(tn_node *n, int n_out, tn_tensor *const *grad_outputs,
                                        tn_tensor **replace, void *ctx);
/* Node.register_hook: the gradients the node computed for its inputs
 * (NULL where none; summed to the inputs' shapes) and its output gradients. */
typedef tn_status (*tn_node_hook_fn)(tn_node *n, int n_in, tn_tensor *const *grad_inputs,
                                     tn_tensor **replace, int n_out,
                                     tn_tensor *const *grad_outputs, void *ctx);

/* On a leaf: its gradient cell; on a non-leaf: its grad_fn (for the output
 * t is). Error when t does not require grad ("cannot register a hook on a
 * tensor that doesn't require gradient"). */
tn_hook *tn_register_hook(tn_tensor *t, tn_tensor_hook_fn fn, void *ctx);
/* Leaves only ("post accumulate grad hooks cannot be registered on non-leaf
 * tensors"). Not called by tn_autograd_grad, which accumulates nothing. */
tn_hook *tn_register_post_accumulate_grad_hook(tn_tensor *t, tn_post_accumulate_hook_fn fn,
                                               void *ctx);
tn_hook *tn_node_register_prehook(tn_node *n, tn_node_prehook_fn fn, void *ctx);
tn_hook *tn_node_register_hook(tn_node *n, tn_node_hook_fn fn, void *ctx);
void tn_hook_remove(tn_hook *h);
void tn_hook_release(tn_hook *h);

/* Variable._execution_engine.queue_callback: from a hook (or a custom
 * function's backward) during a backward pass, queues fn to run once at the
 * end of that pass, on the thread that called backward, after every .grad of
 * the pass was updated and the post-accumulate hooks ran; callbacks run in
 * queue order and may queue more. Unlike PyTorch, they also run when the
 * pass failed (pass_status < 0), so that they can release what they hold;
 * the pass's error and message are kept. Like hooks, callbacks run inside
 * backward (grad mode as the pass: on only with create_graph), and what
 * they make outside a scope of their own is theirs: release it (scopes in
 * hooks and callbacks: see tn_scope_begin). A callback's negative status
 * becomes backward's when the pass itself succeeded. Outside a pass:
 * TN_ERR_AUTOGRAD, "Final callbacks can only be installed during backward
 * pass." (DDP, tenet/dist.h, waits for its allreduces from one.) */
typedef tn_status (*tn_backward_callback_fn)(tn_status pass_status, void *ctx);
tn_status tn_backward_queue_callback(tn_backward_callback_fn fn, void *ctx);

/* .grad: a new reference, or NULL when there is none (tn_last_status() stays
 * TN_OK then). Reading .grad of a non-leaf that does not retain its grad
 * warns once on stderr, as PyTorch. */
tn_tensor *tn_grad(const tn_tensor *t);
/* Sets .grad to g (retained; must match t's shape and dtype), or clears it
 * with NULL. g == t is refused (TN_ERR_AUTOGRAD, "can't assign Variable as
 * its own grad"). A g that leads back to t (t is g's view base, or reached
 * through g's own .grad) would make a reference cycle: a detached alias of
 * g is stored instead (same storage and version counter, no history), and
 * tn_grad(t) returns that alias. */
tn_status tn_set_grad(tn_tensor *t, tn_tensor *g);
/* Clears .grad (sets it to NULL, as zero_grad(set_to_none=True)). */
tn_status tn_zero_grad(tn_tensor *t);

/* Thread-local grad mode (torch.no_grad). Returns the previous setting.
 * tn_is_grad_enabled is false inside inference mode whatever the setting,
 * which inference mode overrides without changing it. */
bool tn_set_grad_enabled(bool enabled);
bool tn_is_grad_enabled(void);

/* Thread-local inference mode (torch.inference_mode): no-grad, and every
 * tensor made meanwhile (except views of normal tensors) is an inference
 * tensor: no version counter and no autograd history, cheaper to make than
 * under no-grad. Returns the previous mode; restore it with that value:
 *
 *     bool prev = tn_set_inference_mode(true);
 *     ... sample ...
 *     tn_set_inference_mode(prev);
 *
 * Outside inference mode an inference tensor may be read by any op, but
 * not saved for backward ("Inference tensors cannot be saved for
 * backward. ..."), written in place ("Inplace update to inference tensor
 * outside InferenceMode is not allowed. ..."; refused before anything is
 * written), made to require grad, or asked its version (docs/semantics.md
 * §4). A new thread starts with it off. */
bool tn_set_inference_mode(bool on);
bool tn_is_inference_mode(void);
/* Tensor.is_inference(); false for NULL. */
bool tn_is_inference(const tn_tensor *t);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
