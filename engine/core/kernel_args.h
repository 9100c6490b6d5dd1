/* engine/core/kernel_args.h — the plain structs that describe one kernel
 * launch, shared by the CPU kernels (C11) and the CUDA backend (CUDA C++).
 * Nothing here refers to a tensor handle: a kernel sees pointers, shapes and
 * strides only, so the same description runs on either device.
 */
#ifndef TN_CORE_KERNEL_ARGS_H
#define TN_CORE_KERNEL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenet/types.h"
#include "pw_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pointwise: the iterator -------------------------------------------------------- */

#define TN_ITER_MAX_OPS 4

/* Up to TN_ITER_MAX_OPS operands walked over one output shape (operand 0 is
 * the output; inputs broadcast with stride 0). Dimensions where every
 * operand is contiguous are coalesced, so a contiguous op is one row. Dim
 * ndim-1 is the innermost; strides are in bytes. */
typedef struct tn_iter {
    int ndim; /* >= 1 */
    int nops;
    bool serial; /* run rows in order on one thread (an output written twice) */
    int64_t numel;
    int64_t shape[TN_MAX_DIMS];
    int64_t stride[TN_ITER_MAX_OPS][TN_MAX_DIMS];
    char *base[TN_ITER_MAX_OPS];
} tn_iter;

/* Builds it over nd dims of `shape` (nd may be 0) for nops operands with
 * the given byte strides and first elements: size-1 dims dropped, adjacent
 * dims merged where every operand is contiguous across them
 * (engine/core/iter.c; tensors go through tn__iter_init, core/device.h). */
void tn__iter_build(tn_iter *it, int nops, int nd, const int64_t *shape,
                    const int64_t (*stride)[TN_MAX_DIMS], char *const *base);

/* Scalar parameters of a pointwise op (c0, c1 in pw_ops.h's expressions). */
typedef struct tn_pw_ctx {
    double c0, c1;
} tn_pw_ctx;

/* Pointwise op codes: the expressions of pw_ops.h, then the kernels with more
 * than two inputs or their own context. */
typedef enum tn_pw_code {
#define TN_PW_CODE_(name, kind, expr) TN_PW_##name,
    TN_PW_BINARY_OPS(TN_PW_CODE_) TN_PW_UNARY_OPS(TN_PW_CODE_)
#undef TN_PW_CODE_
    TN_PW_MASKED_ZERO, /* out = mask ? 0 : x; operands out, x, mask (bool); float */
    TN_PW_SGD,         /* operands p, g[, buf]; ctx tn_sgd_ctx; float */
    TN_PW_ADAM,        /* operands p, g, m, v; ctx tn_adam_ctx; float */
    TN_PW_ACCUM,       /* out += x, out repeating over summed dims (serial); float; CPU only */
    TN_PW_WHERE,       /* out = cond ? x : y; operands out, cond (bool), x, y; every dtype */
    TN_PW_COUNT
} tn_pw_code;

/* Which dtypes a code exists for (pw_ops.h's kinds; the three kernels with
 * contexts of their own are float only). Plain C and C++. */
enum { TN_PW_KIND_FLOAT, TN_PW_KIND_NOBOOL, TN_PW_KIND_ALL, TN_PW_KIND_CMP };
static inline int tn_pw_kind(tn_pw_code c) {
    switch (c) {
#define TN_PW_KIND_(name, kind, expr) \
    case TN_PW_##name:                \
        return TN_PW_KIND_##kind;
        TN_PW_BINARY_OPS(TN_PW_KIND_) TN_PW_UNARY_OPS(TN_PW_KIND_)
#undef TN_PW_KIND_
    case TN_PW_WHERE:
        return TN_PW_KIND_ALL;
    default:
        return TN_PW_KIND_FLOAT;
    }
}
static inline bool tn_pw_supports(tn_pw_code c, tn_dtype dt) {
    if ((int)c < 0 || c >= TN_PW_COUNT || (int)dt < 0 || dt >= TN_DTYPE_COUNT) return false;
    int k = tn_pw_kind(c);
    if (k == TN_PW_KIND_ALL || k == TN_PW_KIND_CMP || dt == TN_F32 || dt == TN_F64) return true;
    if (dt == TN_BF16 || dt == TN_F16) return true; /* the halves are float dtypes */
    return k == TN_PW_KIND_NOBOOL && dt != TN_BOOL;
}

#define TN_PW_FIRST_UNARY TN_PW_neg
static inline bool tn_pw_is_unary(tn_pw_code c) { return c >= TN_PW_FIRST_UNARY && c < TN_PW_MASKED_ZERO; }
static inline bool tn_pw_is_cmp(tn_pw_code c) { return c >= TN_PW_eq && c <= TN_PW_ge; }

/* SGD step of one parameter: d = g + wd p; buf = first ? d : momentum buf + d;
 * p += -lr (buf, or d without momentum). */
typedef struct tn_sgd_ctx {
    double lr, momentum, wd;
    bool first; /* the buffer starts as d (torch: buf = clone(d_p)) */
} tn_sgd_ctx;

/* Adam / AdamW step, scalars computed in double as torch's Python:
 * p *= decay (AdamW: 1 - lr wd; Adam: 1, skipped);
 * d = g + wd p (Adam's L2; AdamW: wd = 0); m = beta1 m + (1-beta1) d;
 * v = beta2 v + (1-beta2) d d; p += neg_step_size * m / (sqrt(v) / bc2_sqrt + eps). */
typedef struct tn_adam_ctx {
    double beta1, beta2, one_minus_beta1, one_minus_beta2, wd, eps;
    double bc2_sqrt, neg_step_size, decay;
} tn_adam_ctx;

/* ---- reductions ---------------------------------------------------------------------- */

typedef enum tn_red_op { TN_RED_SUM, TN_RED_MAX, TN_RED_MIN } tn_red_op;

/* Reduction of one strided input over dim `dim` (or over everything when
 * dim < 0; then the input is contiguous). Outputs are contiguous, one element
 * per slice in row-major order of the input shape without `dim`.
 * SUM: vals is float32/float64 for float input (f32 accumulates in double),
 * divided by div; int64 otherwise. MAX/MIN: vals in the input dtype and/or
 * idx (int64) of the first extremum; NaN wins (the first NaN). Either output
 * may be NULL. Strides in elements. */
typedef struct tn_red_args {
    tn_red_op op;
    tn_dtype dtype; /* input dtype */
    const char *in; /* first element */
    int ndim;
    int64_t shape[TN_MAX_DIMS];
    int64_t stride[TN_MAX_DIMS];
    int dim;
    void *vals;
    int64_t *idx;
    double div;
} tn_red_args;

/* ---- matrix products ------------------------------------------------------------------ */

/* One product C = A·B (+ C). Element (i,p) of A is a[i*rsa + p*csa]; (p,j) of
 * B is b[p*rsb + j*csb]; (i,j) of C is c[i*rsc + j]. Strides in elements. */
typedef struct tn_gemm {
    int64_t m, n, k;
    const void *a;
    int64_t rsa, csa;
    const void *b;
    int64_t rsb, csb;
    void *c;
    int64_t rsc;
    bool accumulate; /* C += A·B; otherwise C = A·B */
} tn_gemm;

/* Batch of products over a (broadcast) batch shape: batch index idx moves
 * the operands by sum(idx[d] * bs?[d]) elements (stride 0 = broadcast). */
typedef struct tn_gemm_batch {
    int ndim;
    int64_t shape[TN_MAX_DIMS];
    int64_t bsa[TN_MAX_DIMS], bsb[TN_MAX_DIMS], bsc[TN_MAX_DIMS];
} tn_gemm_batch;

/* ---- softmax family ------------------------------------------------------------------- */

enum { TN_SM_FWD, TN_LSM_FWD, TN_SM_BWD, TN_LSM_BWD };

/* Contiguous tensors seen as (outer, d, inner) around the softmax dim.
 *   SM_FWD:  out = exp(x - max) / sum          (x)
 *   LSM_FWD: out = (x - max) - log(sum exp)    (x)
 *   SM_BWD:  out = y (g - sum(g y))            (x = g, y = forward result)
 *   LSM_BWD: out = g - exp(y) sum(g)           (x = g, y = forward result) */
typedef struct tn_sm_args {
    int mode;
    tn_dtype dtype; /* float32 or float64 */
    int64_t outer, d, inner;
    const void *x, *y;
    void *out;
} tn_sm_args;

/* ---- fused cross-entropy --------------------------------------------------------------- */

enum { TN_CE_FWD, TN_CE_BWD };

/* Cross-entropy of n rows of c logits x (contiguous (n, c), float32 or
 * float64) against n int64 targets (contiguous; each in [0, c), checked by
 * the caller, or ignore_index: the row counts nothing), in one pass with no
 * log-probability tensor. stats (contiguous (n, 2), the logits' dtype)
 * holds per row m = max (NaN wins) and log_s = log(sum exp(x - m)),
 * computed as the softmax kernel's log_softmax does, so the values equal
 * the two-step log_softmax + NLL.
 *   CE_FWD: writes stats and loss (one element of the dtype):
 *           -(sum over rows of (x[t] - m) - log_s, in double, in row
 *           order; ignored rows 0) / count.
 *   CE_BWD: reads stats; gx (contiguous (n, c)) = S onehot(t) -
 *           exp((x - m) - log_s) S with S = -g / count (in double, then
 *           the dtype), g the loss's gradient: one element of the dtype at
 *           g, in the kernel's device memory, read where the kernel runs (a
 *           device's backward never waits for it). Ignored rows 0. */
typedef struct tn_ce_args {
    int mode;
    tn_dtype dtype;
    int64_t n, c;
    const void *x;
    const int64_t *target;
    int64_t ignore_index;
    void *stats;
    void *loss;   /* CE_FWD */
    double count;  /* the divisor (rows not ignored) */
    const void *g; /* CE_BWD: the loss's gradient */
    void *gx;      /* CE_BWD */
} tn_ce_args;

/* ---- indexing: gather / scatter family ------------------------------------------------ */

enum { TN_IX_ROWS, TN_IX_ROWS_ADD, TN_IX_GATHER, TN_IX_SCATTER_ADD };

/* One indexing kernel. idx is int64, every entry already checked to lie in
 * [0, size of the indexed dim) by the caller. Any dtype (adds on bool are
 * logical or). Strides in elements.
 *  ROWS, ROWS_ADD: contiguous tensors seen as (outer, size, inner) around the
 *  indexed dim and (outer, n, inner) for the other side; idx contiguous (n):
 *    ROWS:     out[o, j, :] = src[o, idx[j], :]           (embedding, index_select)
 *    ROWS_ADD: out[o, idx[j], :] += src[o, j, :]          (their backward, index_add)
 *  GATHER, SCATTER_ADD: over the index's shape (ndim dims, shape), each
 *  tensor through its own strides; p' is p with p[dim] replaced by idx[p]:
 *    GATHER:      out[p] = src[p']
 *    SCATTER_ADD: out[p'] += src[p]
 *  The adds are exact and deterministic: each output element receives its
 *  terms in the order of j (or of p[dim]), on every back end and thread
 *  count; no atomics. */
typedef struct tn_index_args {
    int mode;
    tn_dtype dtype;
    const int64_t *idx;
    const void *src;
    void *out;
    int64_t outer, size, n, inner; /* ROWS, ROWS_ADD */
    int ndim, dim;                 /* GATHER, SCATTER_ADD */
    int64_t shape[TN_MAX_DIMS];
    int64_t istride[TN_MAX_DIMS], sstride[TN_MAX_DIMS], ostride[TN_MAX_DIMS];
} tn_index_args;
/* ---- layer norm ------------------------------------------------------------------------ */

enum { TN_LN_FWD, TN_LN_BWD };

/* Layer norm of `rows` rows of `cols` elements (x contiguous (rows, cols),
 * float32 or float64; weight and bias (cols) or NULL; mean and rstd (rows),
 * the dtype's), one pass per row.
 *   LN_FWD: mean = sum(x) / cols, var = sum((x - mean)^2) / cols, both
 *           accumulated in double; rstd = 1 / sqrt(var + eps); writes mean,
 *           rstd (rounded to the dtype) and y = (x - mean) rstd w + b
 *           computed in double and rounded once.
 *   LN_BWD: reads mean and rstd; with xhat = (x - mean) rstd, in double:
 *           dx (or NULL) = rstd (dy w - mean(dy w) - xhat mean(dy w xhat));
 *           dweight = sum over rows of dy xhat and dbias = sum over rows of
 *           dy (either may be NULL), summed over fixed blocks of
 *           TN_LN_ROW_BLOCK rows combined in block order, so the result does
 *           not depend on the thread count. */
#define TN_LN_ROW_BLOCK 32
typedef struct tn_ln_args {
    int mode;
    tn_dtype dtype;
    int64_t rows, cols;
    double eps;
    const void *x, *weight, *bias;
    void *mean, *rstd;
    void *y;                    /* LN_FWD */
    const void *dy;             /* LN_BWD */
    void *dx, *dweight, *dbias; /* LN_BWD */
} tn_ln_args;
/* ---- batch norm and group norm: per-channel affine normalisation ------------------- */

enum { TN_CN_FWD, TN_CN_BWD };

/* x contiguous (n, c, s): n*c planes of s elements, plane (i, ch) at (i*c + ch)*s. The
 * statistics are per unit: batch norm (groups 0): a unit per channel, over the n planes of
 * the channel (n*s elements); group norm: a unit per (sample, group), over the group's c /
 * groups planes of the sample. weight, bias: (c) or NULL (1 and 0). mean, rstd: (units).
 *   FWD: y = (x - mean) rstd weight + bias; rstd = 1/sqrt(var + eps). Without fixed: mean
 *        and the biased var of x's units, mean and rstd written, and running_mean /
 *        running_var (c, batch norm) when set updated: r = momentum stat + (1 - momentum) r,
 *        running_var with the unbiased variance. fixed: mean and var read (eval batch norm),
 *        rstd written.
 *   BWD: from dy and the saved mean, rstd: dx (when set), with the statistics' terms
 *        unless fixed; dweight, dbias (when set): per channel, the sums of dy xhat and dy.
 * Deterministic: the same bits for any thread count. */
typedef struct tn_cn_args {
    int mode;
    tn_dtype dtype;
    int64_t n, c, s, groups;
    bool fixed;
    double eps, momentum;
    const void *x, *weight, *bias;
    void *mean, *rstd;
    const void *var;                  /* FWD, fixed */
    void *running_mean, *running_var; /* FWD, not fixed */
    void *y;                          /* FWD */
    const void *dy;                   /* BWD */
    void *dx, *dweight, *dbias;       /* BWD */
} tn_cn_args;

/* ---- convolution: image <-> columns ------------------------------------------------ */

enum { TN_CONV_IM2COL, TN_CONV_COL2IM };

/* nb images, each contiguous (c, h, w), image b at im + b*ims elements; the
 * columns of image b contiguous (c*kh*kw, oh*ow) at col + b*cols. Column row
 * (ci, i, j), column (y, x) holds the image's (ci, y*sh - ph + i*dh,
 * x*sw - pw + j*dw), 0 outside the image (ph, pw: the top and left
 * padding; bottom and right padding follow from oh, ow).
 *   IM2COL: writes col from im.
 *   COL2IM: writes im = the sum over the columns that read each image
 *           element (0 for one no column reads), in a fixed order: the
 *           same bits for any thread count. */
typedef struct tn_conv_args {
    int mode;
    tn_dtype dtype; /* float32 or float64 */
    int64_t nb, c, h, w;
    int64_t kh, kw, oh, ow;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t ims, cols;
    void *im, *col; /* IM2COL: im read, col written; COL2IM: the reverse */
} tn_conv_args;

/* ---- pooling: max and average over 2-D windows ------------------------------------ */

enum { TN_POOL_MAX_FWD, TN_POOL_MAX_BWD, TN_POOL_AVG_FWD, TN_POOL_AVG_BWD };

/* planes contiguous (h, w) input planes, each pooled into a contiguous (oh,
 * ow) output plane. Window of output (y, x): adaptive, rows
 * [tn_pool_start(y, oh, h), tn_pool_end(y, oh, h)) and likewise columns;
 * otherwise the taps (y*sh - ph + i*dh, x*sw - pw + j*dw), i < kh, j < kw,
 * inside the plane (dh = dw = 1 for average).
 *   MAX_FWD: reads in (planes, h, w); writes out (planes, oh, ow) = the
 *            window's maximum, taps in order (i, j), the first of equal
 *            values, a NaN always taken (the last NaN); idx (planes, oh, ow)
 *            its flat index iy*w + ix in the plane (the window's first tap
 *            when no value beats -inf).
 *   MAX_BWD: reads in = the output's gradient (planes, oh, ow) and idx;
 *            writes out (planes, h, w) = the sum of the gradients of the
 *            outputs whose index is that element, in output order.
 *   AVG_FWD: out = the window's sum (in the dtype, taps in order) divided by
 *            tn_pool_avg_div (adaptive: by the rows', then the columns'
 *            count).
 *   AVG_BWD: reads in = the output's gradient; out (planes, h, w) = the sum
 *            of g / the divisor of the windows that hold the element.
 * The sums of the backward run in output order (y, then x) on every back end:
 * the same bits on the CPU and a device, for any thread count. */
typedef struct tn_pool_args {
    int mode;
    tn_dtype dtype; /* float32 or float64 */
    bool adaptive;
    bool count_include_pad; /* AVG: the divisor counts the padding */
    int64_t divisor;        /* AVG: when not 0, every window's divisor */
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw; /* not adaptive */
    const void *in;
    void *out;
    int64_t *idx; /* MAX: written by FWD, read by BWD */
} tn_pool_args;

#ifdef __CUDACC__
#define TN_POOL_HD __host__ __device__
#else
#define TN_POOL_HD
#endif
/* Adaptive windows (PyTorch's start_index / end_index): output o of n over
 * an input of size s spans [floor(o s / n), ceil((o + 1) s / n)). */
TN_POOL_HD static inline int64_t tn_pool_start(int64_t o, int64_t n, int64_t s) {
    return o * s / n;
}
TN_POOL_HD static inline int64_t tn_pool_end(int64_t o, int64_t n, int64_t s) {
    return ((o + 1) * s + n - 1) / n;
}
/* Average pooling's divisor of output (y, x), not adaptive (PyTorch's): the
 * override, else the window's size clipped to the padded plane (counting the
 * padding) or to the plane. */
TN_POOL_HD static inline int64_t tn_pool_avg_div(const tn_pool_args *a, int64_t y, int64_t x) {
    if (a->divisor) return a->divisor;
    int64_t y0 = y * a->sh - a->ph, x0 = x * a->sw - a->pw;
    int64_t y1 = y0 + a->kh < a->h + a->ph ? y0 + a->kh : a->h + a->ph;
    int64_t x1 = x0 + a->kw < a->w + a->pw ? x0 + a->kw : a->w + a->pw;
    if (a->count_include_pad) return (y1 - y0) * (x1 - x0);
    y0 = y0 > 0 ? y0 : 0, x0 = x0 > 0 ? x0 : 0;
    y1 = y1 < a->h ? y1 : a->h, x1 = x1 < a->w ? x1 : a->w;
    return (y1 - y0) * (x1 - x0);
}
#undef TN_POOL_HD

/* ---- fused scaled dot-product attention ---------------------------------------------- */

enum { TN_ATTN_FWD, TN_ATTN_BWD };
enum { TN_ATTN_MASK_NONE, TN_ATTN_MASK_BOOL, TN_ATTN_MASK_ADD };

/* softmax(q k^T scale + mask) v over a (broadcast) batch of nb = prod(bshape)
 * (batch-head) slices; q (L, E), k (S, E), v (S, Ev) per slice. Element
 * (b, i, e) of q is q[sum(idx[d] bsq[d]) + i rsq + e] (idx: b's index in
 * bshape; stride 0 = broadcast), likewise k, v; the mask's (b, i, j) is
 * mask[sum(idx[d] bsm[d]) + i rsm + j csm] (bool bytes: nonzero takes part;
 * ADD: the dtype, added to the scores). Strides in elements. causal: key j
 * takes part in query row i only when j <= i + causal_offset (0 for the
 * public op; a KV cache's queries sit causal_offset positions after its
 * first key). Dropout (p > 0): weight (b,
 * i, j) is kept, scaled by 1/(1-p), when tn_attn_keep(seed, b, i, j, p).
 * A row with no key taking part gives 0 (lse -inf) and no gradient.
 * o, dout, dq, dk and dv are addressed as q: element (b, i, e) of o is
 * o[sum(idx[d] bso[d]) + i rso + e], likewise dout (bsg, rsg), dq (bsdq,
 * rsdq), dk (bsdk, rsdk), dv (bsdv, rsdv); rows unit-stride, the written
 * ones not overlapping. lse is contiguous (nb, L).
 *   ATTN_FWD: writes o and lse (the dtype): the row's log(sum exp(scores)).
 *   ATTN_BWD: reads o, lse and dout; writes dq (L, E per slice), dk (S, E)
 *             and dv (S, Ev). */
typedef struct tn_attn_args {
    int mode;
    tn_dtype dtype; /* float32 or float64; bfloat16 / float16 where attention_halves says */
    int bdim;
    int64_t bshape[TN_MAX_DIMS];
    int64_t L, S, E, Ev;
    double scale;
    const void *q, *k, *v, *mask;
    int64_t bsq[TN_MAX_DIMS], bsk[TN_MAX_DIMS], bsv[TN_MAX_DIMS], bsm[TN_MAX_DIMS];
    int64_t rsq, rsk, rsv, rsm, csm;
    int mask_kind;
    bool causal;
    int64_t causal_offset;
    double dropout_p;
    uint64_t seed;
    void *o, *lse;
    const void *dout;
    void *dq, *dk, *dv;
    int64_t bso[TN_MAX_DIMS], bsg[TN_MAX_DIMS], bsdq[TN_MAX_DIMS], bsdk[TN_MAX_DIMS],
        bsdv[TN_MAX_DIMS];
    int64_t rso, rsg, rsdq, rsdk, rsdv;
} tn_attn_args;

/* The dropout decision for weight (b, i, j): a counter-based hash of
 * (seed, b, i, j), so backward regenerates forward's mask. Plain C and
 * CUDA (host and device). */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline bool tn_attn_keep(uint64_t seed, int64_t b, int64_t i, int64_t j, double p) {
    uint64_t x = seed ^ ((uint64_t)b * 0x9e3779b97f4a7c15ULL);
    x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33;
    x ^= ((uint64_t)i << 32) ^ (uint64_t)j;
    x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL, x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL, x ^= x >> 33;
    return (double)(x >> 11) * 0x1.0p-53 >= p;
}

#ifdef __cplusplus
}
#endif
#endif
