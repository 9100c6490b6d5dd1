/* tenet/tensor.h — errors, lifetime, scopes, creation and metadata.
 *
 * Ownership: every function returning tn_tensor * returns a NEW reference
 * that the caller owns (tn_release it), unless the comment says "borrowed".
 * Inside a scope (tn_scope_begin) returned tensors are owned by the scope.
 * The same holds for tensors written to out-parameters (tn_autograd_grad's
 * grads_out, the *indices of tn_max_dim_with_indices and the pools,
 * tn_split's and tn_unbind's pieces): new references, the innermost open
 * scope's when there is one, else the caller's.
 *
 * const: a `const tn_tensor *` parameter is not changed by the call (values,
 * shape, version, history, grad, hooks); the result may still share its
 * storage (a view, or the input itself from tn_contiguous/tn_to/tn_flatten).
 * In-place ops and the setters of requires_grad, grad and hooks take
 * `tn_tensor *`; arrays of tensors are `tn_tensor *const *` (C converts
 * `tn_tensor **` to nothing more const without a cast).
 *
 * Errors: pointer-returning functions return NULL, status-returning ones a
 * negative tn_status; tn_last_status()/tn_last_error() (thread-local) say why.
 * No call aborts the process; a failed call changes no tensor. Out of memory
 * is TN_ERR_OUT_OF_MEMORY, also in a nested call whose inner call ran out
 * (tn_sum(tn_mul(a, b))); include/tenet/testing.h makes allocations fail.
 *
 * Threads: all functions may be called from any thread. Reading a tensor
 * from several threads is safe; writing one tensor from several threads at
 * once is the caller's race (version counters stay exact).
 */
#ifndef TENET_TENSOR_H
#define TENET_TENSOR_H

#include <stdio.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* ---- errors (thread-local) ---------------------------------------------- */

/* Status of the last failing call on this thread (TN_OK after tn_clear_error). */
tn_status tn_last_status(void);
/* Message of the last failure on this thread; "" when none. Borrowed, valid
 * until the next failing call on this thread. */
const char *tn_last_error(void);
void tn_clear_error(void);
/* Sets this thread's error, for code that extends tenet (a hook, a custom
 * function's backward, a write through tn_write_inplace, a collective):
 * returns st. A non-negative st is refused: TN_ERR_INVALID_ARGUMENT. The
 * arguments may quote tn_last_error() itself, to add context to the message
 * a call left: tn_set_error(st, "loading %s: %s", path, tn_last_error()). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
tn_status tn_set_error(tn_status st, const char *fmt, ...);
/* Static name of a status code, e.g. "TN_ERR_SHAPE". */
const char *tn_status_string(tn_status s);

/* ---- lifetime ----------------------------------------------------------- */

/* Adds a reference; returns t (NULL-safe). Thread-safe. */
tn_tensor *tn_retain(tn_tensor *t);
/* Drops a reference; frees the tensor when it was the last. NULL is a no-op.
 * Do not release tensors owned by an open scope (tn_keep them first). */
void tn_release(tn_tensor *t);

/* Scopes: every tensor returned to this thread between tn_scope_begin and the
 * matching tn_scope_end is released at tn_scope_end, except those passed to
 * tn_keep, which move to the enclosing scope (or to the caller when none).
 * Scopes nest, are thread-local, and autograd keeps its own references.
 * tn_scope_begin returns TN_OK, or TN_ERR_OUT_OF_MEMORY when the scope stack
 * cannot grow: then no scope was opened (a failed call changes nothing), so
 * do NOT call tn_scope_end for it (it would end the enclosing scope). The
 * compiler warns when the status is ignored.
 * Callbacks (hooks, custom functions' forward and backward, backward
 * callbacks) start with no scope of their own: the scopes open around them
 * are not theirs (tn_scope_end ends none of them; outside its own scopes a
 * callback owns what it gets), and the scopes they open work as anywhere
 * else; tn_keep out of a callback's outermost scope hands the tensor to the
 * callback. A scope a callback leaves open is closed when it returns (a
 * tensor it returned from it, in `replace` or outputs, counts as kept) and
 * the callback fails with TN_ERR_INVALID_ARGUMENT ("... returned with 1
 * scope still open"). */
TN_NODISCARD tn_status tn_scope_begin(void);
void tn_scope_end(void);
/* Returns t. Error (NULL) if t is not owned by the innermost open scope. */
tn_tensor *tn_keep(tn_tensor *t);

/* ---- creation (all copy their input) ------------------------------------- */

/* data: ndim-dimensional row-major array of `dtype` values (may be NULL only
 * when the numel is 0). requires_grad needs a floating dtype. */
tn_tensor *tn_tensor_from(const void *data, tn_dtype dtype, int ndim,
                          const int64_t *shape, bool requires_grad);
/* 0-dim tensor holding value converted to dtype. tn_scalar and tn_full
 * refuse a value that does not fit the dtype (NaN, ±Inf or out of range for
 * an integer dtype, a finite value beyond float32's range): NULL and
 * TN_ERR_INVALID_ARGUMENT, "value cannot be converted to type int without
 * overflow" (docs/semantics.md §6b); a fraction truncates toward zero. */
tn_tensor *tn_scalar(double value, tn_dtype dtype);
tn_tensor *tn_empty(int ndim, const int64_t *shape, tn_dtype dtype);
tn_tensor *tn_zeros(int ndim, const int64_t *shape, tn_dtype dtype);
tn_tensor *tn_ones(int ndim, const int64_t *shape, tn_dtype dtype);
tn_tensor *tn_full(int ndim, const int64_t *shape, tn_dtype dtype, double value);
/* 1-dim [start, end) by step (step != 0), like torch.arange. */
tn_tensor *tn_arange(double start, double end, double step, tn_dtype dtype);
/* Uniform [0,1) / standard normal, from this thread's generator. */
tn_tensor *tn_rand(int ndim, const int64_t *shape, tn_dtype dtype);
tn_tensor *tn_randn(int ndim, const int64_t *shape, tn_dtype dtype);
/* torch.randint(low, high, shape, dtype=): uniform integers in [low, high)
 * (low >= high: PyTorch's error; both ends must fit dtype). torch.randperm(n,
 * dtype=): a random permutation of 0..n-1. From this thread's generator
 * (tenet's stream, not torch's). */
tn_tensor *tn_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, tn_dtype dtype);
tn_tensor *tn_randperm(int64_t n, tn_dtype dtype);
/* torch.multinomial(probs, num_samples, replacement): probs (C) or (R, C) of
 * non-negative finite weights (any positive sum; float dtypes); num_samples
 * int64 class indices per row ((num_samples) or (R, num_samples)), on
 * probs' device, drawn with replacement, or without (each class at most
 * once, num_samples <= C; zero-weight classes come last). PyTorch 1.13's
 * errors ("probability tensor contains either `inf`, `nan` or element < 0",
 * "invalid multinomial distribution (sum of probabilities <= 0)", ...). */
tn_tensor *tn_multinomial(const tn_tensor *probs, int64_t num_samples, bool replacement);
/* torch.empty_like / zeros_like / ones_like / full_like / rand_like /
 * randn_like: a new tensor of a's shape, dtype and device, contiguous (torch
 * keeps a dense input's strides; the values are the same), no history,
 * requires_grad false. full_like's value must fit the dtype (tn_full's
 * error); rand_like and randn_like need a floating dtype and draw from the
 * calling thread's generator, on the CPU for any device. */
tn_tensor *tn_empty_like(const tn_tensor *a);
tn_tensor *tn_zeros_like(const tn_tensor *a);
tn_tensor *tn_ones_like(const tn_tensor *a);
tn_tensor *tn_full_like(const tn_tensor *a, double value);
tn_tensor *tn_rand_like(const tn_tensor *a);
tn_tensor *tn_randn_like(const tn_tensor *a);
/* Seeds the generator of the calling thread (and the default for new threads). */
void tn_manual_seed(uint64_t seed);
/* torch.Tensor.new_tensor(src): a deep copy with a fresh version counter, no
 * history; dtype TN_DTYPE_SAME keeps src's, device type TN_DEVICE_SAME keeps src's. */
tn_tensor *tn_new_tensor(const tn_tensor *src, tn_dtype dtype, tn_device device,
                         bool requires_grad);
/* ---- tensors over memory the caller owns (no copy) ------------------------ */

/* torch.from_blob: a tensor (no history, requires_grad false) over data,
 * shape and strides in elements (strides NULL: contiguous row-major), on
 * device (TN_DEVICE_CPU, or TN_DEVICE_CUDA(i) for device memory). No copy:
 * tenet reads and writes data in place. deleter(ctx) (may be NULL) runs once,
 * when the last tenet reference to the memory goes — on whichever thread
 * drops it. On failure (NULL + error: a bad dtype or shape, a negative
 * stride, strides reaching beyond the address space, data NULL for a
 * non-empty tensor or not aligned to the element size, an unusable device)
 * the deleter is NOT called: the memory stays the caller's. Writes made to
 * the memory by others are invisible to the version counter
 * (docs/semantics.md: aliasing). */
tn_tensor *tn_from_blob(void *data, tn_dtype dtype, int ndim, const int64_t *shape,
                        const int64_t *strides, tn_device device, void (*deleter)(void *ctx),
                        void *ctx);

/* Converts to dtype/device (TN_DTYPE_SAME / TN_DEVICE_KEEP keep). Returns a new
 * reference to src itself when nothing changes (as torch's .to). Differentiable. */
tn_tensor *tn_to(const tn_tensor *src, tn_dtype dtype, tn_device device);

/* ---- metadata (all thread-safe, NULL-safe: return 0/-1/false and set an error) */

int tn_ndim(const tn_tensor *t);
/* Borrowed pointer to ndim sizes; valid while t lives and is not reshaped in place. */
const int64_t *tn_shape(const tn_tensor *t);
const int64_t *tn_stride(const tn_tensor *t);
/* Size of one dimension; negative dims count from the end. -1 on error. */
int64_t tn_size(const tn_tensor *t, int dim);
int64_t tn_numel(const tn_tensor *t);
tn_dtype tn_dtype_of(const tn_tensor *t);
tn_device tn_device_of(const tn_tensor *t);
/* Name of a dtype: "float32", "int64", ... */
const char *tn_dtype_name(tn_dtype dt);
size_t tn_dtype_size(tn_dtype dt);
/* Borrowed pointer to the first element (storage data + offset). Writing
 * through it is an untracked write (no version bump). */
void *tn_data_ptr(const tn_tensor *t);
/* An in-place write by the caller's own code (a collective, a library's
 * kernel), tracked as tenet's in-place ops are: t must be contiguous
 * (TN_ERR_INVALID_ARGUMENT otherwise, "tn_write_inplace: the tensor must be
 * contiguous"); the write counts as one made under no-grad (allowed on a
 * leaf that requires grad, as `with torch.no_grad(): p.copy_(...)`). tenet
 * registers the write with the race detector, calls fn(data, numel, ctx)
 * with t's first element (device memory for a CUDA tensor) and then bumps
 * t's version once, whatever fn returned (it may have written part);
 * anomaly mode records the write under the name op (a string that outlives
 * the process, e.g. a literal). Returns fn's status. */
typedef tn_status (*tn_write_fn)(void *data, int64_t numel, void *ctx);
tn_status tn_write_inplace(tn_tensor *t, const char *op, tn_write_fn fn, void *ctx);
/* Value of a one-element tensor as double. */
tn_status tn_item(const tn_tensor *t, double *out);
/* Copies the elements, in row-major logical order, into buffer (bytes must
 * be >= numel * dtype size). */
tn_status tn_copy_to(const tn_tensor *t, void *buffer, size_t bytes);
/* Same, converting each element to double (any dtype). */
tn_status tn_copy_to_f64(const tn_tensor *t, double *buffer, int64_t count);
bool tn_is_contiguous(const tn_tensor *t);
bool tn_shares_storage(const tn_tensor *a, const tn_tensor *b);
/* tensor._version: the shared version counter. -1 + error for an inference
 * tensor ("Inference tensors do not track version counter."). */
int64_t tn_version(const tn_tensor *t);
bool tn_requires_grad(const tn_tensor *t);
bool tn_is_leaf(const tn_tensor *t);
/* "MulBackward0", ... ; NULL for leaves. Borrowed static string. */
const char *tn_grad_fn_name(const tn_tensor *t);
/* PyTorch-like text, e.g. "tensor([1., 2.], requires_grad=True)\n". */
tn_status tn_print(const tn_tensor *t, FILE *f);
/* Same text into buf (always NUL-terminated); returns the full length. */
int tn_format(const tn_tensor *t, char *buf, size_t size);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
