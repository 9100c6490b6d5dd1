/* gpt_generate: generation with examples/gpt_model.h's model at GPT-2
 * dimensions (12 layers, 12 heads, embd 768, block 256, vocab 96), random
 * float32 weights, under no-grad: a 64-token prompt through the KV cache,
 * then one token a step to position 256, greedy, at batch 1 and batch 16.
 * Per run: tokens/s over the 192 steps, and around positions 64, 128 and 256
 * (the median step of +-4 steps: flat when a step's cost does not grow with
 * the position). The weights' bytes go out as an extra, so that the
 * weight-streaming limit at batch 1 (bytes / the triad case's GB/s of the
 * same run) sits beside the time per token (bench/compare_torch.py).
 * gpt_generate_bf16: the same with the weights in bfloat16 (the model
 * converted; the activations and the KV cache follow), half the bytes. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpt_model.h"

enum { PROMPT = 64, AT_WINDOW = 4 };
static const int AT[3] = {64, 128, 256};

/* One greedy step over idx (B x n host tokens); the picks into next. */
static bool step(const gpt_model *m, tn_kv_cache *c, const int64_t *idx, int B, int64_t n,
                 int64_t *next, float *lg) {
    if (tn_scope_begin() != TN_OK) return false;
    tn_tensor *logits =
        gpt_forward_cached(m, c, tn_tensor_from(idx, TN_I64, 2, (int64_t[]){B, n}, false));
    const int V = m->cfg.vocab;
    /* a half model's logits (--infer-dtype) read as float32 */
    bool ok = tn_copy_to(tn_to(logits, TN_F32, TN_DEVICE_KEEP), lg,
                         (size_t)B * (size_t)V * sizeof *lg) == TN_OK;
    tn_scope_end();
    for (int b = 0; ok && b < B; b++) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (lg[b * V + v] > lg[b * V + best]) best = v;
        next[b] = best;
    }
    return ok;
}

/* A run: the prompt, then `steps` steps; step_s[i]: step i (position P + i). */
static bool run(const gpt_model *m, tn_kv_cache *c, int B, int P, int steps, double *step_s,
                float *lg, int64_t *tok) {
    if (tn_kv_cache_reset(c) != TN_OK) return false;
    int64_t *prompt = malloc((size_t)B * (size_t)P * sizeof *prompt);
    if (!prompt) return false;
    for (int i = 0; i < B * P; i++)
        prompt[i] = (int64_t)i * 7 % m->cfg.vocab;
    bool ok = step(m, c, prompt, B, P, tok, lg);
    free(prompt);
    for (int i = 0; ok && i < steps; i++) {
        double t0 = bench_now();
        ok = step(m, c, tok, B, 1, tok, lg);
        step_s[i] = bench_now() - t0;
    }
    return ok;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of the steps within AT_WINDOW of step i, over every run. */
static double median_around(double *const *runs, int nruns, int nsteps, int i) {
    double v[BENCH_MAX_RUNS * (2 * AT_WINDOW + 1)];
    int n = 0;
    for (int r = 0; r < nruns; r++)
        for (int j = i - AT_WINDOW; j <= i + AT_WINDOW; j++)
            if (j >= 0 && j < nsteps) v[n++] = runs[r][j];
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* dt: the weights' dtype (and so the activations' and the KV cache's) */
static int generate_case(const bench_opts *o, const char *name, int B, tn_dtype dt) {
    gpt_config cfg = {96, o->quick ? 32 : 256, o->quick ? 2 : 12, o->quick ? 2 : 12,
                      o->quick ? 64 : 768};
    gpt_model m;
    if (!gpt_init(&m, cfg, 0)) return bench_fail(name, "setup");
    if (dt != TN_F32 && !gpt_to(&m, dt, TN_DEVICE_KEEP)) {
        gpt_free(&m);
        return bench_fail(name, "converting the weights");
    }
    const int P = o->quick ? 16 : PROMPT, nsteps = cfg.block - P;
    const int nruns = o->repeat < 3 ? o->repeat : 3;
    tn_kv_cache *c = gpt_cache_new(&m, B, cfg.block);
    float *lg = malloc((size_t)B * (size_t)cfg.vocab * sizeof *lg);
    int64_t *tok = malloc((size_t)B * sizeof *tok);
    double *runs[BENCH_MAX_RUNS] = {0}, v[BENCH_MAX_RUNS];
    bool prev = tn_set_grad_enabled(false);
    bool ok = c && lg && tok;
    for (int r = -1; ok && r < nruns; r++) { /* run -1: the warm-up, the prompt and 8 steps */
        double *s = malloc((size_t)nsteps * sizeof *s);
        ok = s && run(&m, c, B, P, r < 0 ? 8 : nsteps, s, lg, tok);
        if (r < 0 || !ok) {
            free(s);
            continue;
        }
        runs[r] = s;
        double total = 0;
        for (int i = 0; i < nsteps; i++)
            total += s[i];
        v[r] = B * nsteps / total;
    }
    tn_set_grad_enabled(prev);
    int rc = ok ? 0 : bench_fail(name, "generation");
    if (ok) {
        bench_result res = {.unit = "tokens/s", .higher_is_better = true};
        snprintf(res.name, sizeof res.name, "%s", name);
        bench_stats(&res, v, nruns);
        bench_extra(&res, "ms_per_step", 1e3 * B / res.median);
        for (int k = 0; k < 3; k++) {
            char key[32];
            int i = AT[k] - P < nsteps ? AT[k] - P : nsteps - 1;
            snprintf(key, sizeof key, "tok_s_at_%d", AT[k]);
            bench_extra(&res, key, B / median_around(runs, nruns, nsteps, i));
        }
        double bytes = 0;
        for (int i = 0; i < m.n_params; i++)
            bytes += (double)tn_dtype_size(dt) * (double)tn_numel(m.params[i]);
        bench_extra(&res, "weight_bytes", bytes);
        bench_extra(&res, "batch", B);
        bench_emit(&res);
    }
    for (int r = 0; r < nruns; r++)
        free(runs[r]);
    free(lg), free(tok);
    tn_kv_cache_free(c);
    gpt_free(&m);
    return rc;
}

int bench_gpt_generate(const bench_opts *o) {
    return generate_case(o, "gpt_generate_b1", 1, TN_F32) < 0 ||
                   generate_case(o, "gpt_generate_b16", o->quick ? 2 : 16, TN_F32) < 0
               ? -1
               : 0;
}

int bench_gpt_generate_bf16(const bench_opts *o) {
    return generate_case(o, "gpt_generate_bf16_b1", 1, TN_BF16) < 0 ||
                   generate_case(o, "gpt_generate_bf16_b16", o->quick ? 2 : 16, TN_BF16) < 0
               ? -1
               : 0;
}
