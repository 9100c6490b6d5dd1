/* tenet/function.h — custom autograd functions (torch.autograd.Function).
 *
 * A custom function is an op whose forward and backward you write in C:
 *
 *   static int my_exp_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
 *                        tn_tensor **out) {
 *       out[0] = tn_exp(in[0]);                  // runs with grad mode off
 *       if (!out[0]) return tn_last_status();
 *       return tn_function_save_for_backward(ctx, 1, out);   // the output itself
 *   }
 *   static int my_exp_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *gout,
 *                        int n_in, tn_tensor **gin) {
 *       tn_tensor *y;
 *       tn_status st = tn_function_saved_tensors(ctx, 1, &y);  // version-checked
 *       if (st < 0) return st;
 *       gin[0] = tn_mul(gout[0], y);
 *       tn_release(y);
 *       return gin[0] ? 1 : tn_last_status();    // how many gradients were written
 *   }
 *   static const tn_function my_exp = {.name = "MyExpBackward", .forward = my_exp_fw,
 *                                      .backward = my_exp_bw};
 *
 *   tn_tensor *y = tn_function_apply1(&my_exp, 1, &x);   // grad_fn "MyExpBackward"
 *
 * tn_function_apply runs forward with grad mode off; if grad mode is on and
 * an input requires grad, it records ONE node named fn->name whose backward
 * calls fn->backward, as torch.autograd.Function.apply does. Saved tensors
 * are checked like the built-in ops' (the in-place version error, anomaly
 * mode's backtraces); anomaly reports name the node fn->name.
 *
 * Ownership. Both callbacks start outside any scope: tensors they get from
 * tenet outside a scope of their own are theirs, so each callback releases
 * what it makes and does not hand out (or opens a scope and tn_keeps what it
 * hands out: see tn_scope_begin). forward writes NEW references into outputs[0 ..
 * n_out) (to return an input, return tn_retain(input)); backward writes new
 * references (or NULL: no gradient) into grad_inputs. inputs and
 * grad_outputs are borrowed. A tn_function_ctx is valid during the callback
 * it is passed to, and only on that thread.
 *
 * Errors. A callback reports failure by returning a negative tn_status after
 * the failing tenet call set the message (or after tn_last_error was set
 * otherwise); apply or backward then fails with that status and message.
 * A failing tn_function_apply leaks nothing, records nothing and returns no
 * output; what forward itself wrote into its inputs stays written (call
 * tn_function_mark_dirty before writing: it checks PyTorch's rules first).
 *
 * Threads. A tn_function descriptor is only read: one may be applied from
 * any number of threads at once. Backward may run on several threads at once
 * through one node (shared graphs with retain_graph): it must treat the
 * node's data (tn_function_data) as read-only.
 */
#ifndef TENET_FUNCTION_H
#define TENET_FUNCTION_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* The context passed to forward and backward (opaque). */
typedef struct tn_function_ctx tn_function_ctx;

/* forward: outputs[k] = f(inputs), n_out new references, all non-NULL.
 * Runs with grad mode off (nothing it does is recorded). Returns TN_OK or a
 * negative tn_status; on failure the references it left in outputs are
 * released. */
typedef int (*tn_function_forward_fn)(tn_function_ctx *ctx, int n_in, tn_tensor *const *inputs,
                                      int n_out, tn_tensor **outputs);
/* backward: grad_outputs[k] (borrowed, never NULL: zeros for an output that
 * got no gradient or is not differentiable) is the gradient of output k;
 * writes grad_inputs[i] for i < n_in (new references; NULL: none) and
 * returns how many it wrote, n_in (PyTorch's "returned an incorrect number
 * of gradients" otherwise), or a negative tn_status. A gradient may have
 * any shape the input broadcasts to (it is summed back) and any float
 * dtype (it is converted). With create_graph the ops it uses are recorded,
 * so its results can be differentiated again (grad mode is on then). */
typedef int (*tn_function_backward_fn)(tn_function_ctx *ctx, int n_out,
                                       tn_tensor *const *grad_outputs, int n_in,
                                       tn_tensor **grad_inputs);

enum {
    /* torch.autograd.function.once_differentiable: backward runs with grad
     * mode off even under create_graph; when its gradients then come from
     * gradients that require grad, they get an "Error" node that fails a
     * later backward through them with PyTorch's "trying to differentiate
     * twice a function that was marked with @once_differentiable". */
    TN_FUNCTION_ONCE_DIFFERENTIABLE = 1u << 0
};

/* A custom function. Only read by tenet (it may be const and shared); the
 * struct itself is copied at each apply, but `name` is kept: it must stay
 * valid as long as any tensor, graph or anomaly report may show it (a
 * string literal). */
typedef struct tn_function {
    const char *name; /* the grad_fn name, e.g. "MyExpBackward" */
    tn_function_forward_fn forward;
    tn_function_backward_fn backward;
    unsigned flags; /* TN_FUNCTION_* */
    void *user;     /* yours: tn_function_user(ctx) returns it */
} tn_function;

/* Calls fn->forward on n_in inputs (non-NULL tensors; n_in >= 0) and returns
 * its n_out outputs (n_out >= 1) in outputs[] as new references. When grad
 * mode is on and an input requires grad, the outputs are non-leaf outputs
 * 0 .. n_out-1 of one node named fn->name, with edges to the inputs, except
 * those marked non-differentiable and non-float ones (they do not require
 * grad). An input that forward returns unmodified comes back as a new
 * handle over the same storage and version counter (PyTorch returns a view),
 * whose history is the node; the input keeps its own. An input marked dirty
 * comes back as itself: its version is bumped once more (as PyTorch) and the
 * node becomes its history (for a view: CopySlices on its base). On failure
 * outputs[] are all NULL and nothing is recorded; the one failure that comes
 * after the recording is the caller's scope failing to grow to register the
 * outputs (TN_ERR_OUT_OF_MEMORY): the graph is then recorded and the dirty
 * inputs bumped, and the outputs already registered go with the scope. */
tn_status tn_function_apply(const tn_function *fn, int n_in, tn_tensor *const *inputs, int n_out,
                            tn_tensor **outputs);
/* The same for a function with one output: the output or NULL. */
tn_tensor *tn_function_apply1(const tn_function *fn, int n_in, tn_tensor *const *inputs);

/* ---- the context: forward only ------------------------------------------------ */

/* ctx.save_for_backward: keeps tensors[0 .. n) (inputs, outputs or others;
 * NULL entries allowed) for backward, replacing an earlier call's. They are
 * saved as the built-in ops save theirs: an in-place change before backward
 * fails it with PyTorch's "one of the variables needed for gradient
 * computation has been modified by an inplace operation" (with anomaly
 * mode's backtraces of the writes). */
tn_status tn_function_save_for_backward(tn_function_ctx *ctx, int n, tn_tensor *const *tensors);
/* ctx.mark_dirty: forward modifies input t in place and returns it. Call it
 * before writing: it refuses (and nothing is written yet) a leaf that
 * requires grad or a view of one while recording ("a leaf Variable that
 * requires grad has been used in an in-place operation."), and a view when
 * the function has more than one output (PyTorch's text) or when the view is
 * not inputs[0]. t must be returned as an output ("Some elements marked as
 * dirty during the forward method were not returned as output ..."). */
tn_status tn_function_mark_dirty(tn_function_ctx *ctx, tn_tensor *t);
/* ctx.mark_non_differentiable: output t will not require grad; backward
 * still gets a (zero) gradient for it. */
tn_status tn_function_mark_non_differentiable(tn_function_ctx *ctx, tn_tensor *t);
/* Data of yours kept with the node: free_data(data) (may be NULL) runs when
 * the node is freed, on whichever thread drops its last reference, or when
 * apply returns if nothing was recorded or apply failed. Replacing it frees
 * the previous data. */
tn_status tn_function_set_data(tn_function_ctx *ctx, void *data, void (*free_data)(void *data));

/* ---- the context: forward and backward -------------------------------------- */

/* ctx.needs_input_grad[i]: input i required grad at apply. false for bad arguments. */
bool tn_function_needs_input_grad(const tn_function_ctx *ctx, int i);
/* The data of tn_function_set_data (NULL when none) and the descriptor's user pointer. */
void *tn_function_data(const tn_function_ctx *ctx);
void *tn_function_user(const tn_function_ctx *ctx);

/* ---- the context: backward only ----------------------------------------------- */

/* How many tensors forward saved (-1 and an error outside backward). */
int tn_function_saved_count(const tn_function_ctx *ctx);
/* ctx.saved_tensors: out[0 .. n) = new references to the saved tensors (NULL
 * where NULL was saved); n must be tn_function_saved_count. Fails, with
 * every out[] NULL, when one was modified in place since it was saved, or
 * was freed by an earlier backward without retain_graph (PyTorch's texts).
 * Under create_graph they carry their history, so the gradients built from
 * them can be differentiated again. */
tn_status tn_function_saved_tensors(tn_function_ctx *ctx, int n, tn_tensor **out);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
