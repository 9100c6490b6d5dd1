/* tenet/kv_cache.h — keys and values of past positions for autoregressive
 * generation, and attention over them.
 *
 * A transformer decoding one token at a time recomputes nothing for the
 * positions it has seen: each layer keeps their keys and values. A cache
 * holds, per layer, two (B, H, max_len, D) tensors allocated once; each
 * step appends the new positions' keys and values (a copy into the next
 * slots, never a reallocation) and attends to everything cached so far:
 *
 *   tn_kv_cache *c = tn_kv_cache_new(layers, B, H, max_len, D, TN_F32, dev);
 *   // per step, per layer l, with q, k, v (B, H, n, D) of the n new positions:
 *   tn_kv_cache_append(c, l, k, v);
 *   tn_tensor *y = tn_kv_cache_attention(c, l, q);   // (B, H, n, D)
 *
 * tn_kv_cache_attention is the fused attention kernel of
 * tn_scaled_dot_product_attention with a causal offset: the cache holds S
 * positions after the append, and new query i (position S - n + i) attends to
 * cache positions 0 .. S - n + i. A prompt of n tokens and a step of one token
 * are the same call, so the prompt's results equal those of the causal
 * attention over the whole context.
 *
 * Prompts of different lengths in one batch: left padding, as Hugging Face's
 * generate() with an attention mask. Row b's prompt is preceded by pad[b]
 * slots (tn_kv_cache_set_padding before the first append); those keys never
 * take part, and tn_kv_cache_positions gives the position ids to embed (row
 * b's first real token has position 0). A query row that sees no real key
 * (a padding slot's own query) gives 0, not NaN.
 *
 * Inference only: nothing is recorded for autograd (the cache holds copies of
 * values), and tn_kv_cache_attention refuses a query that requires grad while
 * grad mode is on. Call under tn_set_grad_enabled(false).
 *
 * Ownership: the cache owns its tensors; tn_kv_cache_free releases them.
 * Returned tensors are new references. A cache is not safe to use from two
 * threads at once. Errors: NULL / negative tn_status and tn_last_error(); a
 * refused call changes nothing (an append that would overflow appends
 * nothing).
 */
#ifndef TENET_KV_CACHE_H
#define TENET_KV_CACHE_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

typedef struct tn_kv_cache tn_kv_cache;

/* A cache of `layers` layers, each keys and values (batch, heads, max_len,
 * head_dim) of a float dtype on device (float32, float64, or bfloat16 /
 * float16 for a model run in half precision: half the bytes per position;
 * its attention computes in float32 and rounds the output once), empty
 * (length 0), no padding. NULL +
 * TN_ERR_INVALID_ARGUMENT for sizes < 1, TN_ERR_SHAPE when one layer's
 * elements overflow int64, TN_ERR_DTYPE, TN_ERR_DEVICE,
 * TN_ERR_OUT_OF_MEMORY (on the CPU, checked for all layers together before
 * any is allocated: more than the machine's memory and swap). */
tn_kv_cache *tn_kv_cache_new(int layers, int64_t batch, int64_t heads, int64_t max_len,
                             int64_t head_dim, tn_dtype dtype, tn_device device);
void tn_kv_cache_free(tn_kv_cache *c); /* NULL: no-op */

/* Empties every layer (length 0) and clears the padding; the memory stays. */
tn_status tn_kv_cache_reset(tn_kv_cache *c);

/* Left padding: row b's first pad[b] slots are padding (their keys never take
 * part). pad: `batch` values in [0, max_len]; NULL clears it. Only while
 * every layer is empty (TN_ERR_INVALID_ARGUMENT otherwise). */
tn_status tn_kv_cache_set_padding(tn_kv_cache *c, const int64_t *pad);

/* Positions held by layer (appended so far); -1 + error for a bad layer. */
int64_t tn_kv_cache_length(const tn_kv_cache *c, int layer);
int64_t tn_kv_cache_max_length(const tn_kv_cache *c);

/* Copies k and v, (batch, heads, n, head_dim) of the cache's dtype and
 * device (any strides), into slots length .. length + n - 1 of layer, whose
 * length grows by n. TN_ERR_SHAPE on another shape, TN_ERR_INDEX when the
 * layer would hold more than max_len (nothing appended), TN_ERR_DTYPE,
 * TN_ERR_DEVICE. */
tn_status tn_kv_cache_append(tn_kv_cache *c, int layer, const tn_tensor *k, const tn_tensor *v);

/* softmax(q K^T / sqrt(head_dim) + mask) V over layer's cached keys K and
 * values V (S positions), q (batch, heads, n, head_dim) the last n of them:
 * query i attends to slots j <= S - n + i that are not padding. Returns
 * (batch, heads, n, head_dim), not differentiated. TN_ERR_SHAPE when q's
 * shape differs or n > S; TN_ERR_AUTOGRAD when q requires grad under grad
 * mode. */
tn_tensor *tn_kv_cache_attention(tn_kv_cache *c, int layer, const tn_tensor *q);

/* Position ids (int64, (batch, n), the cache's device) of the next n slots of
 * layer 0: slot - pad[b], and 0 on padding slots. */
tn_tensor *tn_kv_cache_positions(const tn_kv_cache *c, int64_t n);

/* Views (batch, heads, length, head_dim) of layer's cached keys / values
 * (alive while the cache is; later appends write past them). */
tn_tensor *tn_kv_cache_keys(const tn_kv_cache *c, int layer);
tn_tensor *tn_kv_cache_values(const tn_kv_cache *c, int layer);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
