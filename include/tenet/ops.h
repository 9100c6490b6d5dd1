/* tenet/ops.h — tensor operations, forward and backward.
 *
 * Every op returns a NEW reference (NULL on error, nothing changed). Binary
 * ops broadcast like PyTorch and promote dtypes like torch.result_type.
 * Views share storage and the version counter with their input.
 * In-place ops (trailing underscore) return a tn_status, bump the version
 * counter once, and follow PyTorch's leaf/view rules (docs/semantics.md §4).
 * Threads: ops may run concurrently on any tensors; concurrent in-place
 * writes to the same tensor are the caller's race.
 */
#ifndef TENET_OPS_H
#define TENET_OPS_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* ---- pointwise, binary (broadcasting) ------------------------------------ */
tn_tensor *tn_add(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_sub(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_mul(const tn_tensor *a, const tn_tensor *b);
/* True division: integer inputs give float32. */
tn_tensor *tn_div(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_pow(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_maximum(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_minimum(const tn_tensor *a, const tn_tensor *b);
/* a + alpha * b (torch.add(a, b, alpha=...)). */
tn_tensor *tn_add_alpha(const tn_tensor *a, const tn_tensor *b, double alpha);

/* Scalar forms: the scalar behaves like a Python number (does not promote a
 * float tensor; makes an integer tensor float32 when not integral). */
tn_tensor *tn_add_scalar(const tn_tensor *a, double s);
tn_tensor *tn_sub_scalar(const tn_tensor *a, double s);
tn_tensor *tn_mul_scalar(const tn_tensor *a, double s);
tn_tensor *tn_div_scalar(const tn_tensor *a, double s);
tn_tensor *tn_pow_scalar(const tn_tensor *a, double exponent);
/* s - a */
tn_tensor *tn_rsub_scalar(const tn_tensor *a, double s);

/* Comparisons, result TN_BOOL, never require grad. */
tn_tensor *tn_eq(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_ne(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_lt(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_le(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_gt(const tn_tensor *a, const tn_tensor *b);
tn_tensor *tn_ge(const tn_tensor *a, const tn_tensor *b);

/* ---- pointwise, unary ---------------------------------------------------- */
tn_tensor *tn_neg(const tn_tensor *a);
tn_tensor *tn_exp(const tn_tensor *a);
tn_tensor *tn_log(const tn_tensor *a);
tn_tensor *tn_sqrt(const tn_tensor *a);
tn_tensor *tn_abs(const tn_tensor *a);
tn_tensor *tn_sigmoid(const tn_tensor *a);
tn_tensor *tn_tanh(const tn_tensor *a);
tn_tensor *tn_relu(const tn_tensor *a);
tn_tensor *tn_sin(const tn_tensor *a);
tn_tensor *tn_cos(const tn_tensor *a);
/* torch.clamp: min(max(x, lo), hi); pass -INFINITY / INFINITY for no bound.
 * lo > hi gives hi everywhere and a NaN bound NaN (floating tensors; an
 * integer tensor's NaN bound is TN_ERR_INVALID_ARGUMENT). ClampBackward1. */
tn_tensor *tn_clamp(const tn_tensor *a, double lo, double hi);

/* ---- out= forms: write into a preallocated `out` of the broadcast shape.
 * Error (PyTorch's text) when an input requires grad and grad mode is on. */
tn_status tn_add_out(tn_tensor *out, const tn_tensor *a, const tn_tensor *b);
tn_status tn_mul_out(tn_tensor *out, const tn_tensor *a, const tn_tensor *b);

/* ---- reductions ---------------------------------------------------------- */
/* Whole tensor to a 0-dim tensor. Integer sums are int64; mean needs floats. */
tn_tensor *tn_sum(const tn_tensor *a);
tn_tensor *tn_mean(const tn_tensor *a);
tn_tensor *tn_max(const tn_tensor *a);
tn_tensor *tn_min(const tn_tensor *a);
tn_tensor *tn_sum_dim(const tn_tensor *a, int dim, bool keepdim);
tn_tensor *tn_mean_dim(const tn_tensor *a, int dim, bool keepdim);
/* Values of the max along dim (the gradient goes to the first maximum). */
tn_tensor *tn_max_dim(const tn_tensor *a, int dim, bool keepdim);
/* Values of the min along dim (torch.min(a, dim)[0]; the gradient goes to
 * the first minimum). MinBackward0. */
tn_tensor *tn_min_dim(const tn_tensor *a, int dim, bool keepdim);
/* torch.max(a, dim, keepdim) / torch.min(a, dim, keepdim): the values (the
 * result) and, in *indices, the int64 index along dim of each slice's first
 * maximum / minimum (the first NaN when there is one), a new reference of
 * the values' shape that never requires grad. indices must not be NULL; on
 * failure *indices is NULL. An empty dim is PyTorch's error ("max():
 * Expected reduction dim 0 to have non-zero size."). */
tn_tensor *tn_max_dim_with_indices(const tn_tensor *a, int dim, bool keepdim,
                                   tn_tensor **indices);
tn_tensor *tn_min_dim_with_indices(const tn_tensor *a, int dim, bool keepdim,
                                   tn_tensor **indices);
/* int64 index of the first maximum / minimum of the flattened tensor
 * (0-dim); the _dim forms along dim. Bool inputs: PyTorch's error. */
tn_tensor *tn_argmax(const tn_tensor *a);
tn_tensor *tn_argmax_dim(const tn_tensor *a, int dim, bool keepdim);
tn_tensor *tn_argmin(const tn_tensor *a);
tn_tensor *tn_argmin_dim(const tn_tensor *a, int dim, bool keepdim);

/* torch.linalg.vector_norm(x, ord, dim, keepdim): (sum |x|^ord)^(1/ord) over
 * dims[0..ndims) (ndims 0 or dims NULL: every dim); ord INFINITY / -INFINITY:
 * max / min |x|, 0: the count of non-zeros, 1, 2 or any other p. Float
 * inputs only ("linalg.vector_norm: Expected a floating point or complex
 * tensor as input. Got Long"); the inf norms of an empty reduction and a
 * repeated dim are PyTorch's errors. LinalgVectorNormBackward0, with
 * PyTorch's gradient where the norm is 0 (zero), for the inf norms (shared
 * by the extreme elements) and for ord 0 (none). */
tn_tensor *tn_vector_norm(const tn_tensor *x, double ord, int ndims, const int *dims,
                          bool keepdim);

/* ---- linear algebra ------------------------------------------------------ */
/* torch.matmul: 1-D/2-D/batched with broadcast batch dims. */
tn_tensor *tn_matmul(const tn_tensor *a, const tn_tensor *b);
/* x @ w^T + b; x (*, in), w (out, in), b (out) or NULL. */
tn_tensor *tn_linear(const tn_tensor *x, const tn_tensor *w, const tn_tensor *b);

/* ---- nn ------------------------------------------------------------------ */
tn_tensor *tn_softmax(const tn_tensor *a, int dim);
tn_tensor *tn_log_softmax(const tn_tensor *a, int dim);
/* logits (N, C), targets int64 (N) in [0, C): mean of -log_softmax[target]. */
tn_tensor *tn_cross_entropy(const tn_tensor *logits, const tn_tensor *targets);
/* How a loss reduces its per-element values (PyTorch's reduction=). */
typedef enum tn_reduction {
    TN_REDUCTION_MEAN = 0, /* 'mean' */
    TN_REDUCTION_SUM = 1,  /* 'sum' */
    TN_REDUCTION_NONE = 2  /* 'none': one value per target */
} tn_reduction;
/* torch.nn.functional.nll_loss(input, target, weight, ignore_index=,
 * reduction=): input (C), (N, C) or (N, C, d1, ...) of log-probabilities
 * (float), target int64 () / (1), (N) or (N, d1, ...) of class indices in [0,
 * C) or ignore_index, weight (C) or NULL. Each target's loss is
 * -weight[t] input[..., t, ...] (0 when ignored); 'mean' divides the sum by
 * the total weight of the targets not ignored (NaN when there is none).
 * grad_fn NllLossBackward0 (NllLoss2DBackward0 from 3 dims on). Errors:
 * PyTorch 1.13's texts (batch sizes, target shape and dtype, weight size,
 * "Target 5 is out of bounds.", "3 is not a valid value for reduction"). */
tn_tensor *tn_nll_loss(const tn_tensor *input, const tn_tensor *target, const tn_tensor *weight,
                       tn_reduction reduction, int64_t ignore_index);
/* torch.nn.functional.cross_entropy with every option: log_softmax over the
 * class dim (0 for a 1-dim input, else 1) then nll_loss; label_smoothing in
 * [0, 1] mixes in the uniform distribution as PyTorch 1.13 does. A float
 * target of input's shape holds class probabilities (ignore_index must then
 * be -100, "ignore_index is not supported for floating point target"). The
 * defaults (NULL, TN_REDUCTION_MEAN, -100, 0) on (C) or (N, C) are
 * tn_cross_entropy's fused kernel. */
tn_tensor *tn_cross_entropy_ex(const tn_tensor *input, const tn_tensor *target,
                               const tn_tensor *weight, tn_reduction reduction,
                               int64_t ignore_index, double label_smoothing);
/* mean((a - b)^2), broadcasting. */
tn_tensor *tn_mse_loss(const tn_tensor *a, const tn_tensor *b);

/* ---- views (share storage and version counter) ---------------------------- */
/* shape may contain one -1. view needs compatible strides, reshape copies
 * when it must. */
tn_tensor *tn_view(const tn_tensor *a, int ndim, const int64_t *shape);
tn_tensor *tn_reshape(const tn_tensor *a, int ndim, const int64_t *shape);
tn_tensor *tn_transpose(const tn_tensor *a, int dim0, int dim1);
tn_tensor *tn_permute(const tn_tensor *a, int ndim, const int *dims);
tn_tensor *tn_narrow(const tn_tensor *a, int dim, int64_t start, int64_t length);
tn_tensor *tn_select(const tn_tensor *a, int dim, int64_t index);
tn_tensor *tn_expand(const tn_tensor *a, int ndim, const int64_t *shape);
/* Removes every size-1 dim / the given dim if it has size 1. */
tn_tensor *tn_squeeze(const tn_tensor *a);
tn_tensor *tn_squeeze_dim(const tn_tensor *a, int dim);
tn_tensor *tn_unsqueeze(const tn_tensor *a, int dim);
tn_tensor *tn_flatten(const tn_tensor *a, int start_dim, int end_dim);
/* a itself (new reference) when already contiguous, else a copy. */
tn_tensor *tn_contiguous(const tn_tensor *a);
tn_tensor *tn_cat(int n, tn_tensor *const *ts, int dim);
tn_tensor *tn_stack(int n, tn_tensor *const *ts, int dim);

/* ---- split, chunk, unbind: several views of one tensor ---------------------
 * Ownership: the pieces are written to the caller's array out[0..*n_out);
 * each is a new reference (owned by the innermost open scope, if any),
 * released one by one as any op's result. out NULL: only the number of
 * pieces is written to *n_out (TN_OK); more pieces than cap: nothing is
 * made, *n_out still says how many, TN_ERR_INVALID_ARGUMENT. On any failure
 * out holds NULLs. n_out may be NULL. The pieces are views made by one
 * autograd node (SplitBackward0, SplitWithSizesBackward0, UnbindBackward0):
 * as in PyTorch, writing one in place while grad mode is on and something
 * requires grad, or using one after its base was written, is an error
 * ("... This view is the output of a function that returns multiple
 * views. ..."). Errors (PyTorch's texts): a 0-dim input, a bad dim. */
/* torch.split(a, split_size, dim): pieces of split_size along dim, the last
 * smaller when it does not divide; an empty dim gives one empty piece.
 * split_size < 0, or 0 on a non-empty dim: an error. SplitBackward0. */
tn_status tn_split(const tn_tensor *a, int64_t split_size, int dim, tn_tensor **out, int cap,
                   int *n_out);
/* torch.split(a, [sizes...], dim): n pieces of the given sizes, which must
 * be non-negative and sum to a.size(dim); out has room for n.
 * SplitWithSizesBackward0. */
tn_status tn_split_with_sizes(const tn_tensor *a, int n, const int64_t *sizes, int dim,
                              tn_tensor **out);
/* torch.chunk(a, chunks, dim): split with split_size ceil(size / chunks),
 * so at most chunks pieces (fewer when they run out; chunks empty pieces of
 * an empty dim); out has room for chunks. chunks <= 0: an error. */
tn_status tn_chunk(const tn_tensor *a, int chunks, int dim, tn_tensor **out, int *n_out);
/* torch.unbind(a, dim): the a.size(dim) slices select(dim, i).
 * UnbindBackward0. */
tn_status tn_unbind(const tn_tensor *a, int dim, tn_tensor **out, int cap, int *n_out);

/* ---- in-place (bump the version; leaf/view rules) -------------------------- */
tn_status tn_add_(tn_tensor *a, const tn_tensor *b);
tn_status tn_sub_(tn_tensor *a, const tn_tensor *b);
tn_status tn_mul_(tn_tensor *a, const tn_tensor *b);
tn_status tn_div_(tn_tensor *a, const tn_tensor *b);
tn_status tn_add_scalar_(tn_tensor *a, double s);
tn_status tn_mul_scalar_(tn_tensor *a, double s);
tn_status tn_zero_(tn_tensor *a);
/* value must fit a's dtype, as tn_full's (TN_ERR_INVALID_ARGUMENT otherwise). */
tn_status tn_fill_(tn_tensor *a, double value);
tn_status tn_clamp_(tn_tensor *a, double lo, double hi);
tn_status tn_relu_(tn_tensor *a);
tn_status tn_sigmoid_(tn_tensor *a);
tn_status tn_exp_(tn_tensor *a);
tn_status tn_neg_(tn_tensor *a);

/* ---- indexing ----------------------------------------------------------------
 * Index tensors are int64 (embedding and index_select also take int32, as
 * PyTorch); every index must lie in [0, size) of the indexed dim (no
 * negative indices), checked before anything is written: TN_ERR_INDEX with
 * PyTorch's message ("index out of range in self" for embedding and
 * index_select; "index 5 is out of bounds for dimension 0 with size 3" for
 * gather and scatter_add). Gradients summed into repeated indices are exact
 * and deterministic (the same bits for any thread count). Returned tensors
 * are new references; NULL + error on failure. */
/* torch.nn.functional.embedding(indices, weight): weight (num, dim), indices
 * of any shape -> (*indices.shape, dim), rows of weight. EmbeddingBackward0. */
tn_tensor *tn_embedding(const tn_tensor *weight, const tn_tensor *indices);
/* torch.index_select: index 1-D (or 0-dim); a's shape with dim's size
 * numel(index). IndexSelectBackward0. */
tn_tensor *tn_index_select(const tn_tensor *a, int dim, const tn_tensor *index);
/* torch.gather: out[p] = a[p with p[dim] = index[p]], out of index's shape;
 * index has a's number of dims, index.size(d) <= a.size(d) for d != dim.
 * GatherBackward0. */
tn_tensor *tn_gather(const tn_tensor *a, int dim, const tn_tensor *index);
/* torch.scatter_add (out of place): a copy of a with out[p with p[dim] =
 * index[p]] += src[p] for p over index's shape; src has a's dtype, index
 * <= src in every dim and <= a in every dim but dim. ScatterAddBackward0. */
tn_tensor *tn_scatter_add(const tn_tensor *a, int dim, const tn_tensor *index,
                          const tn_tensor *src);

/* ---- masks ---------------------------------------------------------------------- */
/* torch.where(cond, a, b): cond bool; cond, a, b broadcast together; the
 * result has a and b's promoted dtype. WhereBackward0. */
tn_tensor *tn_where(const tn_tensor *cond, const tn_tensor *a, const tn_tensor *b);
/* a.masked_fill(mask, value): value where mask (bool) is true, a elsewhere;
 * the result has the broadcast shape of a and mask and a's dtype (value
 * converted as tn_fill_ does). MaskedFillBackward0. */
tn_tensor *tn_masked_fill(const tn_tensor *a, const tn_tensor *mask, double value);
/* In place: mask must broadcast to a's shape; the in-place rules of
 * tn_add_ (leaf checks, version bump, views rebased with CopySlices). */
tn_status tn_masked_fill_(tn_tensor *a, const tn_tensor *mask, double value);
/* torch.tril / torch.triu on the last two dims (a has >= 2 dims): elements
 * with col - row <= diagonal (tril) / >= diagonal (triu) kept, others 0.
 * TrilBackward0 / TriuBackward0. */
tn_tensor *tn_tril(const tn_tensor *a, int64_t diagonal);
tn_tensor *tn_triu(const tn_tensor *a, int64_t diagonal);
/* ---- normalisation, activations, statistics ------------------------------------ */
/* torch.nn.functional.layer_norm: normalises over the last n_norm_dims dims
 * of x, whose sizes must equal normalized_shape[0..n_norm_dims) (PyTorch's
 * error otherwise: "Given normalized_shape=[5], expected input with shape
 * [*, 5], but got input of size[2, 3, 4]"); y = (x - mean) / sqrt(var + eps)
 * * weight + bias with the biased variance. weight and bias (either may be
 * NULL) have shape normalized_shape and x's dtype; x is floating (float32,
 * float64, bfloat16 or float16: a half x has float32 statistics and one
 * rounding of y). grad_fn NativeLayerNormBackward0 (double backward supported). */
tn_tensor *tn_layer_norm(const tn_tensor *x, int n_norm_dims, const int64_t *normalized_shape,
                         const tn_tensor *weight, const tn_tensor *bias, double eps);
/* torch.nn.functional.batch_norm(input, running_mean, running_var, weight, bias, training,
 * momentum, eps): input (N, C, *) normalised per channel over N and the trailing dims; y =
 * (x - mean) / sqrt(var + eps) * weight + bias. training: the batch's mean and biased variance,
 * and running_mean / running_var (either may be NULL) updated in place, r = (1 - momentum) r +
 * momentum stat with the unbiased variance, their version counters untouched (as PyTorch 1.13);
 * eval: the running statistics, which are then required. weight, bias (C) or NULL. Parameters of
 * x's dtype, or float32 ones for a bfloat16/float16 x. An empty input gives a copy
 * (CloneBackward0) and leaves the statistics alone. PyTorch's errors ("Expected more than 1
 * value per channel when training, got input size [1, 3]", "running_mean should contain 3
 * elements not 4", ...). grad_fn NativeBatchNormBackward0 (double backward supported);
 * running_mean / running_var must not require grad. Returns a new tensor; the caller owns it. */
tn_tensor *tn_batch_norm(const tn_tensor *input, tn_tensor *running_mean, tn_tensor *running_var,
                         const tn_tensor *weight, const tn_tensor *bias, bool training,
                         double momentum, double eps);
/* torch.nn.functional.group_norm(input, num_groups, weight, bias, eps): input (N, C, *), each
 * sample's C channels split into num_groups groups (C divisible by it), each group normalised
 * over its channels and trailing dims with the biased variance, then weight (C) and bias (C)
 * (either NULL) per channel, of x's dtype. grad_fn NativeGroupNormBackward0 (double backward
 * supported). Returns a new tensor; the caller owns it. */
tn_tensor *tn_group_norm(const tn_tensor *input, int64_t num_groups, const tn_tensor *weight,
                         const tn_tensor *bias, double eps);
/* torch.nn.functional.gelu(x, approximate='tanh' if tanh_approx else
 * 'none'): x Phi(x), or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * Float inputs only. GeluBackward0. */
tn_tensor *tn_gelu(const tn_tensor *x, bool tanh_approx);
/* torch.nn.functional.silu: x sigmoid(x). Float inputs only. SiluBackward0. */
tn_tensor *tn_silu(const tn_tensor *x);
/* torch.nn.functional.dropout(x, p, training): each element kept with
 * probability 1 - p and scaled by 1 / (1 - p), else 0 (p == 1: x * 0). The
 * mask comes from the calling thread's generator (tn_manual_seed: the same
 * seed gives the same mask on the same thread). p == 0 or !training: x
 * itself (a new reference to the same handle). p outside [0, 1]: PyTorch's
 * error. Float inputs only when it applies. NativeDropoutBackward0 (2.x). */
tn_tensor *tn_dropout(const tn_tensor *x, double p, bool training);
/* torch.logsumexp(x, dim, keepdim): log(sum(exp(x))) along dim, computed
 * max-shifted (stable). Integer inputs give float32. LogsumexpBackward0. */
tn_tensor *tn_logsumexp(const tn_tensor *x, int dim, bool keepdim);
/* torch.var / torch.std along dim: sum((x - mean)^2) / max(0, N - correction)
 * (correction 1: unbiased, 0: population; a zero divisor gives inf/NaN as in
 * PyTorch). Float inputs only. VarBackward0 / StdBackward0 (std's gradient
 * is 0 where std is 0). */
tn_tensor *tn_var_dim(const tn_tensor *x, int dim, double correction, bool keepdim);
tn_tensor *tn_std_dim(const tn_tensor *x, int dim, double correction, bool keepdim);
/* ---- convolution ------------------------------------------------------------ */
/* PyTorch's padding='valid' / 'same' for tn_conv2d_mode and tn_conv1d_mode:
 * EXPLICIT is no padding there (the explicit entries take sizes); VALID is
 * no padding; SAME pads so that the output has the input's size, the odd
 * unit of an even extent dilation*(k-1) after (bottom / right), as PyTorch;
 * stride 1 only ("padding='same' is not supported for strided
 * convolutions"). */
typedef enum tn_conv_padding {
    TN_CONV_PAD_EXPLICIT = 0,
    TN_CONV_PAD_VALID,
    TN_CONV_PAD_SAME
} tn_conv_padding;
/* torch.nn.functional.conv2d: input (N, C, H, W) or unbatched (C, H, W),
 * weight (OC, C / groups, KH, KW), bias (OC) or NULL; the result is (N, OC,
 * OH, OW) (unbatched: (OC, OH, OW)) with OH = (H + 2 padding[0] -
 * dilation[0] (KH - 1) - 1) / stride[0] + 1, likewise OW. stride and
 * dilation NULL: 1; padding NULL: 0. float32 / float64, the three of one
 * dtype and one device. Errors (NULL, PyTorch's texts, nothing changed):
 * the input's rank ("Expected 3D (unbatched) or 4D (batched) input to
 * conv2d, but got input of size: [2, 3]"), the weight's, channels ("Given
 * groups=1, weight of size [2, 3, 3, 3], expected input[1, 4, 5, 5] to have
 * 3 channels, but got 4 channels instead"), groups, bias, a kernel larger
 * than the padded input, negative padding, stride or dilation below 1,
 * integer dtypes ("\"slow_conv2d_cpu\" not implemented for 'Long'"), and
 * (tenet's limit, checked right after the signs, before any arithmetic on
 * them) a size, stride, padding, dilation or groups of 2^31 or more. grad_fn
 * ConvolutionBackward0; the gradients of input, weight and bias, and of any
 * order under create_graph (ConvolutionBackwardBackward0 nodes). */
tn_tensor *tn_conv2d(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                     const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                     int64_t groups);
/* conv2d with padding='valid' or 'same' (tn_conv_padding). */
tn_tensor *tn_conv2d_mode(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                          const int64_t stride[2], tn_conv_padding padding,
                          const int64_t dilation[2], int64_t groups);
/* torch.nn.functional.conv1d: input (N, C, L) or unbatched (C, L), weight
 * (OC, C / groups, K), bias (OC) or NULL; as tn_conv2d over one spatial
 * dim ("Expected 2D (unbatched) or 3D (batched) input to conv1d, ...").
 * grad_fn ConvolutionBackward0. */
tn_tensor *tn_conv1d(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                     int64_t stride, int64_t padding, int64_t dilation, int64_t groups);
/* conv1d with padding='valid' or 'same' (tn_conv_padding). */
tn_tensor *tn_conv1d_mode(const tn_tensor *input, const tn_tensor *weight, const tn_tensor *bias,
                          int64_t stride, tn_conv_padding padding, int64_t dilation,
                          int64_t groups);
/* torch.nn.functional.conv_transpose2d (PyTorch 1.13): the gradient of conv2d
 * with respect to its input, exposed. input (N, C, H, W) or unbatched (C, H,
 * W), weight (C, OC / groups, KH, KW), bias (OC) or NULL; the result is (N,
 * OC, OH, OW) (unbatched: (OC, OH, OW)) with OH = (H - 1) stride[0] - 2
 * padding[0] + dilation[0] (KH - 1) + output_padding[0] + 1, likewise OW.
 * stride and dilation NULL: 1; padding and output_padding NULL: 0. Note
 * PyTorch's argument order: groups before dilation. Floating dtypes, the
 * three of one dtype and one device. Errors (NULL, PyTorch's texts, nothing
 * changed): as tn_conv2d's for rank, weight, groups, padding and stride;
 * "negative output_padding is not supported", channels ("Given transposed=1,
 * weight of size [4, 3, 3, 3], expected input[2, 5, 5, 5] to have 4 channels,
 * but got 5 channels instead"), the bias, an empty kernel, dilation below 1,
 * "output padding must be smaller than either stride or dilation, ...", "...
 * Output size is too small", a dtype mismatch ("expected scalar type Float but
 * found Double"), integer dtypes ("\"slow_conv_transpose2d_out_cpu\" not
 * implemented for 'Long'": PyTorch's CPU computes Long, tenet has no integer
 * kernel). grad_fn ConvolutionBackward0; gradients of input, weight and bias,
 * and of any order under create_graph. */
tn_tensor *tn_conv_transpose2d(const tn_tensor *input, const tn_tensor *weight,
                               const tn_tensor *bias, const int64_t stride[2],
                               const int64_t padding[2], const int64_t output_padding[2],
                               int64_t groups, const int64_t dilation[2]);
/* torch.nn.functional.conv_transpose1d: input (N, C, L) or unbatched (C, L),
 * weight (C, OC / groups, K); as tn_conv_transpose2d over one spatial dim
 * (its texts name a height of 1, as PyTorch's). */
tn_tensor *tn_conv_transpose1d(const tn_tensor *input, const tn_tensor *weight,
                               const tn_tensor *bias, int64_t stride, int64_t padding,
                               int64_t output_padding, int64_t groups, int64_t dilation);
/* ---- pooling ---------------------------------------------------------------- */
/* torch.nn.functional.max_pool2d (PyTorch 1.13): input (N, C, H, W) or
 * unbatched (C, H, W), float32 / float64; kernel_size (kh, kw); stride NULL:
 * the kernel size; padding NULL: 0 (padded positions never win); dilation
 * NULL: 1. OH = floor((H + 2 padding[0] - dilation[0] (kh - 1) - 1 + (ceil_mode
 * ? stride[0] - 1 : 0)) / stride[0]) + 1, one less in ceil mode when the last
 * window would start past the input and its left padding; likewise OW. Each
 * output is its window's maximum, the first of equal values, NaN when the
 * window holds one. Errors (NULL, PyTorch's texts, in its order): the rank
 * ("non-empty 3D or 4D (batch mode) tensor expected for input"), stride 0,
 * negative padding, padding above half the kernel ("pad should be at most
 * half of kernel size, but got pad=2 and kernel_size=2"), kernel, stride or
 * dilation below 1, an empty C, H or W, an output below 1 ("Given input size:
 * (1x2x2). Calculated output size: (1x0x0). Output size is too small"),
 * integer dtypes ("\"max_pool2d\" not implemented for 'Long'"); values
 * beyond 2^31. grad_fn MaxPool2DWithIndicesBackward0 (double backward:
 * MaxPool2DWithIndicesBackwardBackward0). */
tn_tensor *tn_max_pool2d(const tn_tensor *input, const int64_t kernel_size[2],
                         const int64_t stride[2], const int64_t padding[2],
                         const int64_t dilation[2], bool ceil_mode);
/* max_pool2d(..., return_indices=True): as tn_max_pool2d, and *indices (a new
 * reference, int64, the output's shape, never requiring grad) receives each
 * maximum's flat index h * W + w in its plane. On failure *indices is NULL. */
tn_tensor *tn_max_pool2d_with_indices(const tn_tensor *input, const int64_t kernel_size[2],
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t dilation[2], bool ceil_mode,
                                      tn_tensor **indices);
/* torch.nn.functional.avg_pool2d: the shapes and checks of tn_max_pool2d
 * (dilation 1; a rank below 3 is PyTorch's "Dimension out of range ..."),
 * each output its window's sum divided by divisor_override when not 0
 * (PyTorch's None is 0 here), else by the window's size clipped to the
 * padded input (count_include_pad) or to the input. Float dtypes only
 * (PyTorch also averages integers). grad_fn AvgPool2DBackward0. */
tn_tensor *tn_avg_pool2d(const tn_tensor *input, const int64_t kernel_size[2],
                         const int64_t stride[2], const int64_t padding[2], bool ceil_mode,
                         bool count_include_pad, int64_t divisor_override);
/* torch.nn.functional.adaptive_avg_pool2d: output (..., OH, OW) =
 * output_size; output (y, x) averages rows [floor(y H / OH), ceil((y + 1) H /
 * OH)) and likewise columns. output_size (1, 1) is PyTorch's shortcut: the
 * mean over the last two dims (keepdim), grad_fn MeanBackward1; otherwise
 * AdaptiveAvgPool2DBackward0. Errors (PyTorch's texts): a negative size, the
 * rank ("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [3, 5]"),
 * an empty H or W, integer dtypes. */
tn_tensor *tn_adaptive_avg_pool2d(const tn_tensor *input, const int64_t output_size[2]);
/* torch.nn.functional.adaptive_max_pool2d: the windows of
 * tn_adaptive_avg_pool2d, the maxima of tn_max_pool2d. Errors: the rank, an
 * empty C (batched), H or W, a negative size ("Trying to create tensor with
 * negative dimension -1: [2, 3, -1, 2]"), integer dtypes.
 * AdaptiveMaxPool2DBackward0. */
tn_tensor *tn_adaptive_max_pool2d(const tn_tensor *input, const int64_t output_size[2]);
/* adaptive_max_pool2d(..., return_indices=True): *indices as
 * tn_max_pool2d_with_indices'. */
tn_tensor *tn_adaptive_max_pool2d_with_indices(const tn_tensor *input, const int64_t output_size[2],
                                               tn_tensor **indices);
/* ---- attention ------------------------------------------------------------- */
/* torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x semantics):
 * softmax(q k^T / sqrt(E) + mask) v with q (*, L, E), k (*, S, E), v (*, S,
 * Ev), leading dims broadcast; result (*, L, Ev) in q's dtype (floating:
 * float32, float64, bfloat16 or float16; half scores and sums in float32).
 * attn_mask: NULL, bool (true = takes part) or float (added to the scores;
 * float32 or q's dtype), broadcastable into (*, L, S); not differentiated.
 * is_causal: key j takes part in row i only when j <= i (top-left aligned);
 * an error together with attn_mask. dropout_p in [0, 1] drops attention
 * weights (scaled by 1/(1-p)) by a hash of a seed drawn from the calling
 * thread's generator (tn_manual_seed). A row where no key takes part gives
 * 0 (PyTorch 2.5+). grad_fn ScaledDotProductFlashAttentionForCpuBackward0.
 * Fused kernel: the L x S matrix is never stored. Returns a new reference;
 * NULL + error (PyTorch's texts) on bad dtypes, shapes, devices or p. */
tn_tensor *tn_scaled_dot_product_attention(const tn_tensor *q, const tn_tensor *k,
                                           const tn_tensor *v, const tn_tensor *attn_mask,
                                           double dropout_p, bool is_causal);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
