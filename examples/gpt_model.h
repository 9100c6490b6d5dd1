/* examples/gpt_model.h — a GPT-2-architecture language model on tenet, with
 * nanoGPT's layout and state_dict names:
 *
 *   transformer.wte.weight            [V, C]   token embedding (tied: lm_head)
 *   transformer.wpe.weight            [T, C]   position embedding
 *   transformer.h.N.ln_1.{weight,bias}         [C]
 *   transformer.h.N.attn.c_attn.{weight,bias}  [3C, C], [3C]
 *   transformer.h.N.attn.c_proj.{weight,bias}  [C, C], [C]
 *   transformer.h.N.ln_2.{weight,bias}         [C]
 *   transformer.h.N.mlp.c_fc.{weight,bias}     [4C, C], [4C]
 *   transformer.h.N.mlp.c_proj.{weight,bias}   [C, 4C], [C]
 *   transformer.ln_f.{weight,bias}             [C]
 *
 * Pre-LayerNorm blocks (x + attn(ln_1(x)), x + mlp(ln_2(x))), causal
 * self-attention, GELU with the tanh approximation, Linear weights
 * [out, in], lm_head.weight = transformer.wte.weight. Dropout 0.
 */
#ifndef TENET_EXAMPLES_GPT_MODEL_H
#define TENET_EXAMPLES_GPT_MODEL_H

#include <stdbool.h>

#include <tenet.h>

typedef struct gpt_config {
    int vocab, block, layers, heads, embd;
} gpt_config;

enum { GPT_BLOCK_PARAMS = 12 };

typedef struct gpt_model {
    gpt_config cfg;
    int n_params;       /* 2 + 12 layers + 2 */
    tn_tensor **params; /* owned leaves, in state_dict order */
    char **names;       /* their names */
} gpt_model;

/* Makes the parameters with nanoGPT's init from tn_manual_seed(seed):
 * N(0, 0.02) for Linear and Embedding weights, N(0, 0.02 / sqrt(2 layers))
 * for the c_proj weights, zero biases, LayerNorm weight 1 and bias 0.
 * false (tn_last_error() set, nothing held) on failure. */
bool gpt_init(gpt_model *m, gpt_config cfg, uint64_t seed);
void gpt_free(gpt_model *m);

/* Copies every parameter from a safetensors file (nanoGPT's names; the tied
 * lm_head.weight may be present or not, and must then equal wte). false with
 * tn_last_error() set. */
bool gpt_load(gpt_model *m, const char *path);
/* Moves every parameter to dtype (TN_DTYPE_SAME: kept; TN_BF16 / TN_F16
 * for half-precision inference: every activation, the KV cache included,
 * then follows) and dev (TN_DEVICE_KEEP: kept): new leaves with the same
 * values, converted. false with tn_last_error() set, the model unchanged. */
bool gpt_to(gpt_model *m, tn_dtype dtype, tn_device dev);
/* Saves every parameter but the tied lm_head.weight. */
bool gpt_save(const gpt_model *m, const char *path);

/* Logits [B, T, V] for idx [B, T] (int64, T <= block, on the parameters'
 * device). NULL propagates. */
tn_tensor *gpt_forward(const gpt_model *m, tn_tensor *idx);
/* A KV cache for generation with m: every layer, `batch` rows of at most
 * max_len (<= block) positions, on the parameters' device. NULL + error. */
tn_kv_cache *gpt_cache_new(const gpt_model *m, int64_t batch, int64_t max_len);
/* Logits [B, V] of the last of the n new tokens idx [B, n], the positions
 * before them held by cache (their keys and values are appended to it; the
 * position ids are tn_kv_cache_positions', so a left-padded row's first real
 * token has position 0). O(cached positions) attention work per token, not
 * the whole context's recomputation. Under no-grad; NULL propagates. */
tn_tensor *gpt_forward_cached(const gpt_model *m, tn_kv_cache *cache, tn_tensor *idx);
/* Mean cross-entropy of the next-token predictions (targets [B, T]). */
tn_tensor *gpt_loss(const gpt_model *m, tn_tensor *idx, tn_tensor *targets);

/* nanoGPT's optimiser: AdamW (betas 0.9, 0.95, eps 1e-8) with weight decay
 * 0.1 on the 2-D parameters only (a group of its own for the others). NULL
 * with tn_last_error() set on failure. */
tn_adam *gpt_optimizer(const gpt_model *m, double lr);

#endif
