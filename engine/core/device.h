/* engine/core/device.h — where a tensor lives and how an op reaches the
 * kernels of that device (engine/core/device.c, copy.c, iter.c, reduce.c,
 * measure.c).
 *
 * Ops are written once: they validate, pick the result device with
 * tn__result_device, allocate there (tn__empty_on) and run kernels through
 * the tn__dev_* dispatchers, which build the kernel's arguments and call the
 * entry of the device type's backend table (engine/core/backend.h), the
 * CPU's included. The dispatchers are also where the race detector sees
 * every kernel's operands (hooks.h). They are the only way into a back end:
 * the layers above core (optim/ and debug/ included) never call the table.
 * Autograd, versions and every check stay on the host, so they behave the
 * same on every device.
 */
#ifndef TN_CORE_DEVICE_H
#define TN_CORE_DEVICE_H

#include "backend.h"
#include "internal.h"

static inline tn_device tn__dev(const tn_tensor *t) { return t->storage->device; }
static inline bool tn__on_cpu(const tn_tensor *t) { return t->storage->device.type == TN_CPU; }
static inline bool tn__same_device(tn_device a, tn_device b) {
    return a.type == b.type && (a.type == TN_CPU || a.index == b.index);
}

/* The backend of device d (checked: built and present), or NULL + a
 * TN_ERR_DEVICE error. */
const tn_backend *tn__backend_of(tn_device d);
/* The table of an op's device: the CPU's without a check (always there),
 * else tn__backend_of's. */
static inline const tn_backend *tn__table_of(tn_device d) {
    return TN_LIKELY(d.type == TN_CPU) ? tn__backends[TN_CPU] : tn__backend_of(d);
}
/* Checks d names a device this build and machine have. */
tn_status tn__check_device(tn_device d);
/* "cpu" / "cuda:0" */
const char *tn__device_str(tn_device d, char *buf, size_t n);

/* Device of an op's result: the device of its tensor operands, where a
 * 0-dim CPU tensor joins any device (as PyTorch's scalars); NULL entries are
 * skipped. Error (PyTorch's text) when two devices meet. */
tn_status tn__result_device_slow(int n, const tn_tensor *const *ts, tn_device *out);
static inline tn_status tn__result_device(int n, const tn_tensor *const *ts, tn_device *out) {
    for (int i = 0; i < n; i++) /* the common case, inline: every operand on the CPU */
        if (ts[i] && ts[i]->storage->device.type != TN_CPU) return tn__result_device_slow(n, ts, out);
    *out = TN_DEVICE_CPU;
    return TN_OK;
}
/* t on device d: t itself (retained) when it is there, else a contiguous
 * copy. No autograd. */
tn_tensor *tn__on_device(const tn_tensor *t, tn_device d);
/* Same, and contiguous: t itself when it already is both (engine/core/copy.c). */
tn_tensor *tn__contiguous_on(const tn_tensor *t, tn_device d);

/* New contiguous tensor on dev (uninitialised / zeroed). No autograd. */
tn_tensor *tn__empty_on(int ndim, const int64_t *shape, tn_dtype dt, tn_device dev);
tn_tensor *tn__zeros_on(int ndim, const int64_t *shape, tn_dtype dt, tn_device dev);
tn_tensor *tn__full_on(int ndim, const int64_t *shape, tn_dtype dt, double v, tn_device dev);

/* ---- kernel arguments (engine/core/iter.c) ------------------------------------------ */
/* The iterator over ops: ops[0] is the output (its shape is the iteration
 * shape); the others must broadcast to it (checked by the caller). */
void tn__iter_init(tn_iter *it, int nops, tn_tensor *const *ops);

/* ---- kernel dispatch: operands on one device (ops[0], the output, decides) ---- */
/* Pointwise code over ops (dt: the compute dtype, which must have the code:
 * tn_pw_supports); ctx as backend.h's pointwise. serial: rows in order on
 * one thread (an output that aliases itself, e.g. a sum into a broadcast). */
tn_status tn__dev_pointwise(tn_pw_code code, tn_dtype dt, int nops, tn_tensor *const *ops,
                            const void *ctx, bool serial);
/* Reduces `in` over dimension `dim` (0 <= dim < max(in->ndim, 1)), or over
 * all its elements when dim < 0 (then `in` must be contiguous), on in's
 * device (engine/core/reduce.c). vals, idx: contiguous outputs on that
 * device holding one element per reduced slice, in row-major order of in's
 * shape with `dim` removed (either may be NULL). TN_RED_SUM writes vals
 * only: float32/float64 for float inputs (divided by `div`, 1 for a plain
 * sum), int64 otherwise. TN_RED_MAX/MIN write the extreme value (in's
 * dtype) and/or the int64 index of its first occurrence; NaN wins (the
 * first NaN), as PyTorch. An empty input gives sums of 0 (0/div); MAX/MIN
 * need a reduced size > 0 unless there is no output element. Deterministic
 * (backend.h), and on the CPU independent of the thread count. */
tn_status tn__dev_reduce(tn_red_op op, const tn_tensor *in, int dim, tn_tensor *vals,
                         tn_tensor *idx, double div);
/* ops: the product's tensors (output first) for the race detector. */
tn_status tn__dev_gemm(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b, tn_device dev,
                       int nops, const tn_tensor *const *ops);
/* ops: out (written), then x and y (read; y may be NULL), for the race
 * detector. */
tn_status tn__dev_softmax(const tn_sm_args *a, tn_device dev, int nops,
                          const tn_tensor *const *ops);
/* Whether dev's backend has the fused cross-entropy kernel. */
bool tn__dev_has_cross_entropy(tn_device dev);
/* ops (nops of them) for the race detector: CE_FWD {loss, stats (written), x,
 * targets}; CE_BWD {gx (written), x, stats, targets, then g when set}. */
tn_status tn__dev_cross_entropy(const tn_ce_args *a, tn_device dev, int nops,
                                const tn_tensor *const *ops);
/* ops for the race detector (NULL entries skipped); bit k of `written`: ops[k]
 * is written. Forward {y, mean, rstd, x, weight, bias}; backward {dx,
 * dweight, dbias, dy, x, mean, rstd, weight}. Empty (no rows or no columns):
 * nothing runs. */
tn_status tn__dev_layer_norm(const tn_ln_args *a, tn_device dev, int nops,
                             const tn_tensor *const *ops, unsigned written);
/* Batch norm / group norm (tn_cn_args) on dev, as tn__dev_layer_norm: ops for the race
 * detector, bit k of `written`: ops[k] is written. Empty x: nothing runs. */
tn_status tn__dev_channel_norm(const tn_cn_args *a, tn_device dev, int nops,
                               const tn_tensor *const *ops, unsigned written);
/* Fused attention (tn_attn_args) on dev; ops for the race detector: the
 * first n_out are written, the others read. */
tn_status tn__dev_attention(const tn_attn_args *a, tn_device dev, int nops, int n_out,
                            const tn_tensor *const *ops);
/* Convolution's im2col / col2im (tn_conv_args) on dev; ops for the race
 * detector: {written, read} (the columns and the image, by mode). */
tn_status tn__dev_conv(const tn_conv_args *a, tn_device dev, const tn_tensor *const ops[2]);
/* Pooling (tn_pool_args) on dev; ops for the race detector: {out, in, idx}
 * (out written; idx: NULL for average, written by MAX_FWD). */
tn_status tn__dev_pool(const tn_pool_args *a, tn_device dev, const tn_tensor *const ops[3]);
/* Host copy of n bytes of t's data from its first element (t contiguous). */
tn_status tn__dev_read(const tn_tensor *t, void *host, size_t n);
/* Writes n bytes from host to t's data at its first element (t contiguous). */
tn_status tn__dev_write(tn_tensor *t, const void *host, size_t n);
/* dst's bytes = src's (both contiguous, same dtype and numel, any devices). */
tn_status tn__dev_transfer(tn_tensor *dst, const tn_tensor *src);

/* Indexing kernel (tn_index_args, kernel_args.h; its indices checked by the
 * caller). ops for the race detector: {out (written), src, idx}. */
tn_status tn__dev_index(const tn_index_args *a, tn_device dev, const tn_tensor *const ops[3]);

/* ---- measures for optim/ and debug/ (engine/core/measure.c) ------------------------------- */
/* The gradient monitor and clip_grad_norm_ reach the backends' grad_stats and read-back only
 * here, anomaly mode its NaN/Inf checks: the layers above the ops never call the table. */

/* Float64 results of measures enqueued on a device, read back to the host once. The caller
 * holds the struct; core owns the memory behind it (scratch memory on the device, then the
 * read-back's) from a successful tn__dev_results_init until tn__dev_results_read, which must
 * follow it once. On the CPU the kernels write straight into the caller's array. */
typedef struct tn_dev_results {
    tn_device dev;
    size_t bytes;
    double *mem;  /* where the measures land: device scratch memory, or the CPU caller's array */
    void *ticket; /* a read-back begun (tn__dev_results_readback_begin); NULL: none */
} tn_dev_results;

/* Whether dev's backend measures gradients (grad_stats). Never fails. */
bool tn__dev_has_grad_stats(tn_device dev);
/* Room for n doubles of results on dev: `host` itself (the caller's, n doubles) on the CPU,
 * else core's scratch memory on the device. Error: nothing held. */
tn_status tn__dev_results_init(tn_dev_results *r, tn_device dev, int n, double *host);
/* Enqueues the measure (backend.h's grad_stats) of count (1 .. TN_GRAD_STATS_MAX) non-empty
 * tensors of one float dtype on r's device, each one dense block (tn__dense_block): tensor i's
 * sum of squares and largest |value| are results 2 (first + i) and 2 (first + i) + 1. No wait;
 * on the CPU they are there when it returns. Bracketed for the race detector (every tensor
 * read); while the detector is on, in launches of TN_RACE_MAX_OPS tensors (the same bits). */
tn_status tn__dev_grad_stats(tn_dev_results *r, int first, int count, const tn_tensor *const *ts);
/* Starts reading r back without waiting for the device (backend.h's readback_begin: at most
 * TN_READBACK_MAX bytes); r's scratch memory goes (stream order keeps it until the copy).
 * Where the device has no such read-back (and on the CPU) nothing starts; on an error r is
 * unchanged. Either way tn__dev_results_read then copies plainly. */
tn_status tn__dev_results_readback_begin(tn_dev_results *r);
/* Copies r's results to host (NULL: drops them): waits for the read-back's copy only when one
 * was begun, else for the device's stream. Not a synchronisation point (tn__sync_point: the
 * caller says when it is one). Releases what r held, whatever it returns. */
tn_status tn__dev_results_read(tn_dev_results *r, double *host);

/* The devices of `type` when its back end is loaded already, else 0 (then no tensor was ever
 * on one); never loads it, never sets an error: for anomaly mode's polls of every device. */
int tn__dev_count_loaded(tn_device_type type);
/* Whether dev has anomaly mode's batched NaN/Inf check (backend.h's nonfinite_check and
 * nonfinite_poll; never the CPU, whose data the host scans). Never fails. */
bool tn__dev_has_nonfinite(tn_device dev);
/* backend.h's nonfinite_check of count items on dev (enqueued, one launch). */
tn_status tn__dev_nonfinite_check(tn_device dev, int count, const tn_nf_item *items);
/* backend.h's nonfinite_poll (waits for dev's stream); out all 0 where dev has no check. */
tn_status tn__dev_nonfinite_poll(tn_device dev, uint64_t out[TN_NONFINITE_WORDS]);

#endif
