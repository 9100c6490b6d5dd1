/* examples/gpt_model.c — the GPT-2 model of gpt_model.h, written the way one
 * writes it in PyTorch: a forward pass of tenet ops, backward by autograd. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_model.h"
#ifdef GPT_PLANTED
#include "gpt_plant.h"
#else
#define gpt_plant_gelu_tanh(layer) true
#define gpt_plant_reduce(x) (x)
#endif

/* Index of a block's parameters within m->params. */
enum {
    LN1_W,
    LN1_B,
    ATTN_W,
    ATTN_B,
    ATTN_PROJ_W,
    ATTN_PROJ_B,
    LN2_W,
    LN2_B,
    FC_W,
    FC_B,
    MLP_PROJ_W,
    MLP_PROJ_B
};
static const char *const BLOCK_NAMES[GPT_BLOCK_PARAMS] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

#define WTE(m) ((m)->params[0])
#define WPE(m) ((m)->params[1])
#define BLK(m, l, k) ((m)->params[2 + (l)*GPT_BLOCK_PARAMS + (k)])
#define LNF_W(m) ((m)->params[(m)->n_params - 2])
#define LNF_B(m) ((m)->params[(m)->n_params - 1])

/* A leaf of the given shape: N(0, std) when std > 0, else filled with fill. */
static tn_tensor *make_param(int ndim, const int64_t *shape, double std, double fill) {
    if (tn_scope_begin() != TN_OK) return NULL;
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *p = std > 0 ? tn_mul_scalar(tn_randn(ndim, shape, TN_F32), std)
                           : tn_full(ndim, shape, TN_F32, fill);
    tn_set_grad_enabled(prev);
    if (p && (tn_requires_grad_(p, true) < 0 || !tn_keep(p))) p = NULL;
    tn_scope_end();
    return p;
}

static char *dup_name(const char *prefix, int layer, const char *suffix) {
    char buf[96];
    if (layer >= 0)
        snprintf(buf, sizeof buf, "%s%d.%s", prefix, layer, suffix);
    else
        snprintf(buf, sizeof buf, "%s%s", prefix, suffix);
    char *s = malloc(strlen(buf) + 1);
    if (s) strcpy(s, buf);
    return s;
}

/* Shape, init and name of parameter k of block l (layer -1: the others). */
static bool block_param(gpt_model *m, int i, int l, int k) {
    const int64_t C = m->cfg.embd;
    const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * m->cfg.layers);
    int64_t shape[2] = {C, C};
    int ndim = 1;
    double sd = 0, fill = 0;
    switch (k) {
    case LN1_W:
    case LN2_W:
        fill = 1;
        break;
    case ATTN_W:
        ndim = 2, shape[0] = 3 * C, sd = std;
        break;
    case ATTN_B:
        shape[0] = 3 * C;
        break;
    case ATTN_PROJ_W:
        ndim = 2, sd = proj_std;
        break;
    case FC_W:
        ndim = 2, shape[0] = 4 * C, sd = std;
        break;
    case FC_B:
        shape[0] = 4 * C;
        break;
    case MLP_PROJ_W:
        ndim = 2, shape[1] = 4 * C, sd = proj_std;
        break;
    default:
        break; /* the remaining biases: zeros [C] */
    }
    m->params[i] = make_param(ndim, shape, sd, fill);
    m->names[i] = dup_name("transformer.h.", l, BLOCK_NAMES[k]);
    return m->params[i] && m->names[i];
}

bool gpt_init(gpt_model *m, gpt_config cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->n_params = 2 + GPT_BLOCK_PARAMS * cfg.layers + 2;
    m->params = calloc((size_t)m->n_params, sizeof *m->params);
    m->names = calloc((size_t)m->n_params, sizeof *m->names);
    if (!m->params || !m->names) {
        gpt_free(m);
        return false;
    }
    tn_manual_seed(seed);
    const int64_t C = cfg.embd, ones[1] = {C};
    bool ok = true;
    m->params[0] = make_param(2, (int64_t[]){cfg.vocab, C}, 0.02, 0);
    m->names[0] = dup_name("transformer.wte.weight", -1, "");
    m->params[1] = make_param(2, (int64_t[]){cfg.block, C}, 0.02, 0);
    m->names[1] = dup_name("transformer.wpe.weight", -1, "");
    for (int l = 0; l < cfg.layers && ok; l++)
        for (int k = 0; k < GPT_BLOCK_PARAMS && ok; k++)
            ok = block_param(m, 2 + l * GPT_BLOCK_PARAMS + k, l, k);
    int f = m->n_params - 2;
    m->params[f] = make_param(1, ones, 0, 1);
    m->names[f] = dup_name("transformer.ln_f.weight", -1, "");
    m->params[f + 1] = make_param(1, ones, 0, 0);
    m->names[f + 1] = dup_name("transformer.ln_f.bias", -1, "");
    for (int i = 0; i < m->n_params; i++)
        ok = ok && m->params[i] && m->names[i];
    if (!ok) gpt_free(m);
    return ok;
}

void gpt_free(gpt_model *m) {
    for (int i = 0; i < m->n_params; i++) {
        if (m->params) tn_release(m->params[i]);
        if (m->names) free(m->names[i]);
    }
    free(m->params);
    free(m->names);
    memset(m, 0, sizeof *m);
}

bool gpt_load(gpt_model *m, const char *path) {
    tn_state_dict *sd = tn_load(path);
    if (!sd) return false;
    /* every parameter must come from the file; lm_head.weight, the tied copy
     * PyTorch's state_dict has, is the only other name allowed */
    bool ok = true;
    for (int i = 0; ok && i < m->n_params; i++)
        if (!tn_state_dict_contains(sd, m->names[i])) {
            fprintf(stderr, "tenet-gpt: %s: missing parameter %s\n", path, m->names[i]);
            ok = false;
        }
    int64_t extra = tn_state_dict_count(sd) - m->n_params;
    if (ok && (extra > 1 || (extra == 1 && !tn_state_dict_contains(sd, "lm_head.weight")))) {
        fprintf(stderr, "tenet-gpt: %s: unexpected tensors (the model has %d)\n", path,
                m->n_params);
        ok = false;
    }
    ok = ok && tn_load_state_dict(sd, m->n_params, (const char *const *)m->names, m->params,
                                  false) == TN_OK;
    tn_state_dict_free(sd);
    return ok;
}

bool gpt_to(gpt_model *m, tn_dtype dtype, tn_device dev) {
    tn_tensor **moved = calloc((size_t)m->n_params, sizeof *moved);
    bool ok = moved != NULL;
    for (int i = 0; ok && i < m->n_params; i++) /* a fresh leaf: the same values, converted */
        ok = (moved[i] = tn_new_tensor(m->params[i], dtype, dev, true)) != NULL;
    for (int i = 0; moved && i < m->n_params; i++) {
        tn_tensor *drop = ok ? m->params[i] : moved[i];
        if (ok) m->params[i] = moved[i];
        tn_release(drop);
    }
    free(moved);
    return ok;
}

bool gpt_save(const gpt_model *m, const char *path) {
    return tn_save_tensors(path, m->n_params, (const char *const *)m->names, m->params) == TN_OK;
}

/* [B, T, C] -> [B, H, T, C / H] */
static tn_tensor *split_heads(tn_tensor *x, const gpt_config *c, int64_t B, int64_t T) {
    int64_t shape[4] = {B, T, c->heads, c->embd / c->heads};
    return tn_transpose(tn_reshape(x, 4, shape), 1, 2);
}

/* q, k and v [B, H, T, C / H] of x [B, T, C]: the fused projection split in three along the
 * channels, as nanoGPT's c_attn(x).split(C, dim=2). One SplitBackward0 node: its backward is
 * one cat of the three gradients, where three narrows would each fill a zero (B, T, 3C)
 * gradient and add them up. Fails (false, a message set) when any step does. */
static bool qkv_heads(const gpt_model *m, int l, tn_tensor *x, int64_t B, int64_t T,
                      tn_tensor *out[3]) {
    tn_tensor *qkv = tn_linear(x, BLK(m, l, ATTN_W), BLK(m, l, ATTN_B)), *p[3];
    if (!qkv || tn_split(qkv, m->cfg.embd, 2, p, 3, NULL) != TN_OK) return false;
    for (int i = 0; i < 3; i++)
        if (!(out[i] = split_heads(p[i], &m->cfg, B, T))) return false;
    return true;
}

/* causal self-attention of x [B, T, C] */
static tn_tensor *attention(const gpt_model *m, int l, tn_tensor *x, int64_t B, int64_t T) {
    const int64_t C = m->cfg.embd;
    tn_tensor *h[3];
    if (!qkv_heads(m, l, x, B, T, h)) return NULL;
    tn_tensor *y = tn_scaled_dot_product_attention(h[0], h[1], h[2], NULL, 0.0, true);
    y = tn_reshape(tn_transpose(y, 1, 2), 3, (int64_t[]){B, T, C});
    return tn_linear(y, BLK(m, l, ATTN_PROJ_W), BLK(m, l, ATTN_PROJ_B));
}

static tn_tensor *mlp(const gpt_model *m, int l, tn_tensor *x) {
    tn_tensor *h = tn_gelu(tn_linear(x, BLK(m, l, FC_W), BLK(m, l, FC_B)), gpt_plant_gelu_tanh(l));
    return tn_linear(h, BLK(m, l, MLP_PROJ_W), BLK(m, l, MLP_PROJ_B));
}

static tn_tensor *layer_norm(const gpt_model *m, tn_tensor *x, tn_tensor *w, tn_tensor *b) {
    const int64_t C = m->cfg.embd;
    return tn_layer_norm(x, 1, &C, w, b, 1e-5);
}

tn_tensor *gpt_forward(const gpt_model *m, tn_tensor *idx) {
    if (!idx) return NULL;
    const int64_t B = tn_shape(idx)[0], T = tn_shape(idx)[1];
    /* wpe(arange(T)) is wpe's first T rows: a view (as llm.c's encoder), the same values and
     * gradient bits as the embedding, with no position tensor to make or upload and no index
     * range check to read back from a device each step */
    tn_tensor *x = tn_add(tn_embedding(WTE(m), idx), tn_narrow(WPE(m), 0, 0, T));
    for (int l = 0; l < m->cfg.layers; l++) {
        x = tn_add(x, attention(m, l, layer_norm(m, x, BLK(m, l, LN1_W), BLK(m, l, LN1_B)), B, T));
        x = tn_add(x, mlp(m, l, layer_norm(m, x, BLK(m, l, LN2_W), BLK(m, l, LN2_B))));
    }
    x = gpt_plant_reduce(layer_norm(m, x, LNF_W(m), LNF_B(m)));
    return tn_linear(x, WTE(m), NULL); /* lm_head, tied to wte */
}

tn_kv_cache *gpt_cache_new(const gpt_model *m, int64_t batch, int64_t max_len) {
    const gpt_config *c = &m->cfg;
    return tn_kv_cache_new(c->layers, batch, c->heads, max_len, c->embd / c->heads,
                           tn_dtype_of(WTE(m)), tn_device_of(WTE(m)));
}

/* attention of x [B, n, C] over the cache of layer l, after appending x's keys and values */
static tn_tensor *attention_cached(const gpt_model *m, tn_kv_cache *cache, int l, tn_tensor *x,
                                   int64_t B, int64_t n) {
    const int64_t C = m->cfg.embd;
    tn_tensor *h[3];
    if (!qkv_heads(m, l, x, B, n, h) || tn_kv_cache_append(cache, l, h[1], h[2]) != TN_OK)
        return NULL;
    tn_tensor *y = tn_kv_cache_attention(cache, l, h[0]);
    y = tn_reshape(tn_transpose(y, 1, 2), 3, (int64_t[]){B, n, C});
    return tn_linear(y, BLK(m, l, ATTN_PROJ_W), BLK(m, l, ATTN_PROJ_B));
}

tn_tensor *gpt_forward_cached(const gpt_model *m, tn_kv_cache *cache, tn_tensor *idx) {
    if (!idx || !cache) return NULL;
    const int64_t B = tn_shape(idx)[0], n = tn_shape(idx)[1];
    tn_tensor *x =
        tn_add(tn_embedding(WTE(m), idx), tn_embedding(WPE(m), tn_kv_cache_positions(cache, n)));
    for (int l = 0; l < m->cfg.layers && x; l++) {
        tn_tensor *a = attention_cached(m, cache, l,
                                        layer_norm(m, x, BLK(m, l, LN1_W), BLK(m, l, LN1_B)), B, n);
        x = tn_add(x, a);
        x = tn_add(x, mlp(m, l, layer_norm(m, x, BLK(m, l, LN2_W), BLK(m, l, LN2_B))));
    }
    x = layer_norm(m, tn_select(x, 1, n - 1), LNF_W(m), LNF_B(m)); /* [B, C]: the last token */
    return tn_linear(x, WTE(m), NULL);
}

tn_tensor *gpt_loss(const gpt_model *m, tn_tensor *idx, tn_tensor *targets) {
    tn_tensor *logits = gpt_forward(m, idx);
    if (!logits || !targets) return NULL;
    const int64_t BT = tn_numel(targets);
    return tn_cross_entropy(tn_reshape(logits, 2, (int64_t[]){BT, m->cfg.vocab}),
                            tn_reshape(targets, 1, &BT));
}

tn_adam *gpt_optimizer(const gpt_model *m, double lr) {
    tn_tensor **ps = malloc((size_t)m->n_params * sizeof *ps);
    if (!ps) return NULL;
    int nd = 0, no = m->n_params; /* 2-D weights first, the rest from the end */
    for (int i = 0; i < m->n_params; i++)
        ps[tn_ndim(m->params[i]) >= 2 ? nd++ : --no] = m->params[i];
    tn_param_group g[2] = {{nd, ps, TN_OPTIM_DEFAULT, 0.1},
                           {m->n_params - nd, ps + nd, TN_OPTIM_DEFAULT, 0.0}};
    tn_adam *opt = tn_adamw_new_groups(2, g, lr, 0.9, 0.95, 1e-8, 0.1);
    free(ps);
    return opt;
}
