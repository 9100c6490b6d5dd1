/* examples/gpt_generate.c — next-token choice and batched generation with a
 * KV cache (gpt_generate.h). The prompt goes through the model once (all its
 * positions in one call), then each step feeds the B new tokens: attention
 * reads the cached keys and values, so a step costs the same at position 10
 * as at position 200 but for that attention's reads. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_data.h"
#include "gpt_generate.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct ranked {
    float logit;
    int token;
} ranked;

/* Larger logits first; equal ones by token. */
static int by_logit(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->token - y->token;
}

static int argmax(const float *x, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int gpt_pick(const float *logits, int V, const gpt_sampling *s, uint64_t *rng) {
    if (s->temperature <= 0 || s->top_k == 1) return argmax(logits, V);
    ranked *r = malloc((size_t)V * sizeof *r);
    if (!r) return -1;
    for (int i = 0; i < V; i++)
        r[i] = (ranked){(float)(logits[i] / s->temperature), i};
    qsort(r, (size_t)V, sizeof *r, by_logit);
    int n = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    double sum = 0, *p = malloc((size_t)n * sizeof *p);
    if (!p) {
        free(r);
        return -1;
    }
    for (int i = 0; i < n; i++)
        sum += p[i] = exp((double)r[i].logit - (double)r[0].logit);
    int keep = 0; /* top-p: the most likely tokens until their mass reaches top_p */
    for (double acc = 0; keep < n && (keep == 0 || acc < s->top_p * sum); keep++)
        acc += p[keep];
    double mass = 0;
    for (int i = 0; i < keep; i++)
        mass += p[i];
    double u = gpt_rand_uniform(rng) * mass, acc = 0;
    int pick = keep - 1;
    for (int i = 0; i < keep; i++)
        if ((acc += p[i]) > u) {
            pick = i;
            break;
        }
    int tok = r[pick].token;
    free(p);
    free(r);
    return tok;
}

/* The reference's lines: step row token logits[V]; one per (step, row). */
typedef struct reference {
    FILE *f;
    double worst;
    int bad;
} reference;

/* Compares step s of rows [0, B) (picks tok, logits B x V) with the next B lines. */
static bool check_step(reference *ref, const gpt_gen_run *r, int64_t s, int B, int V,
                       const int64_t *tok, const float *logits) {
    for (int b = 0; b < B; b++) {
        long long rs, rb, rt;
        if (fscanf(ref->f, "%lld %lld %lld", &rs, &rb, &rt) != 3 || rs != s || rb != b) {
            fprintf(stderr, "tenet-gpt: %s: no line for step %lld row %d\n", r->expect,
                    (long long)s, b);
            return false;
        }
        for (int v = 0; v < V; v++) {
            double want, got = logits[(int64_t)b * V + v];
            if (fscanf(ref->f, "%lf", &want) != 1) {
                fprintf(stderr, "tenet-gpt: %s: step %lld row %d: fewer than %d logits\n",
                        r->expect, (long long)s, b, V);
                return false;
            }
            double d = fabs(got - want) / (1 + fabs(want));
            ref->worst = d > ref->worst ? d : ref->worst;
            if (!(d <= r->rtol) && ref->bad++ < 5)
                fprintf(stderr,
                        "tenet-gpt: step %lld row %d logit %d: %.8g, the reference's %.8g\n",
                        (long long)s, b, v, got, want);
        }
        if (rt != tok[b] && ref->bad++ < 5)
            fprintf(stderr, "tenet-gpt: step %lld row %d: token %lld, the reference's %lld\n",
                    (long long)s, b, (long long)tok[b], rt);
    }
    return true;
}

/* One forward over idx (B x n, host) through the cache: the last position's logits into lg. */
static bool step(const gpt_model *m, tn_kv_cache *c, const int64_t *idx, int B, int64_t n,
                 float *lg) {
    if (tn_scope_begin() != TN_OK) return false;
    tn_tensor *x = tn_to(tn_tensor_from(idx, TN_I64, 2, (int64_t[]){B, n}, false), TN_DTYPE_SAME,
                         tn_device_of(m->params[0]));
    tn_tensor *logits = gpt_forward_cached(m, c, x);
    /* a half model's logits (--infer-dtype) read as float32 */
    bool ok = tn_copy_to(tn_to(logits, TN_F32, TN_DEVICE_KEEP), lg,
                         (size_t)B * (size_t)m->cfg.vocab * sizeof *lg) == TN_OK;
    tn_scope_end();
    return ok;
}

static int fail_tn(const char *what) {
    fprintf(stderr, "tenet-gpt: %s: %s: %s\n", what, tn_status_string(tn_last_status()),
            tn_last_error());
    return 1;
}

int gpt_generate(const gpt_model *m, const gpt_prompts *p, const gpt_gen_run *r, int64_t *out) {
    const int B = p->B, V = m->cfg.vocab;
    const int64_t N = r->new_tokens;
    if (p->T + N - 1 > m->cfg.block) {
        fprintf(stderr,
                "tenet-gpt: --generate: the longest prompt (%lld) and %lld new tokens "
                "exceed the block (%d)\n",
                (long long)p->T, (long long)N, m->cfg.block);
        return 1;
    }
    reference ref = {r->expect ? fopen(r->expect, "r") : NULL, 0, 0};
    if (r->expect && !ref.f) {
        fprintf(stderr, "tenet-gpt: %s: cannot open\n", r->expect);
        return 1;
    }
    tn_kv_cache *c = gpt_cache_new(m, B, p->T + N);
    float *lg = malloc((size_t)B * (size_t)V * sizeof *lg);
    int64_t *tok = malloc((size_t)B * sizeof *tok);
    uint64_t rng = r->seed ^ 0x6e6e;
    bool prev = tn_set_grad_enabled(false);
    int rc = !c ? fail_tn("making the KV cache") : !lg || !tok ? 1 : 0;
    if (rc == 0 && tn_kv_cache_set_padding(c, p->pad) != TN_OK) rc = fail_tn("padding");
    double t0 = now_s(), t1 = t0;
    const int64_t *feed = p->idx;
    int64_t n = p->T;
    for (int64_t s = 0; s < N && rc == 0; s++) {
        if (!step(m, c, feed, B, n, lg)) {
            rc = fail_tn("generation step");
            break;
        }
        if (s == 0) t1 = now_s(); /* the prompt's forward done */
        for (int b = 0; b < B && rc == 0; b++)
            if ((tok[b] = out[(int64_t)b * N + s] =
                     gpt_pick(lg + (int64_t)b * V, V, &r->sampling, &rng)) < 0)
                rc = 1;
        if (rc == 0 && ref.f && !check_step(&ref, r, s, B, V, tok, lg)) rc = 1;
        feed = tok, n = 1;
    }
    double t2 = now_s();
    tn_set_grad_enabled(prev);
    if (rc == 0)
        printf("generated %lld tokens for each of %d prompts: prompt %.1f ms, then %.1f tokens/s "
               "(%.2f ms a step of %d tokens)\n",
               (long long)N, B, 1e3 * (t1 - t0),
               N > 1 ? (double)B * (double)(N - 1) / (t2 - t1) : 0.0,
               N > 1 ? 1e3 * (t2 - t1) / (double)(N - 1) : 0.0, B);
    if (rc == 0 && ref.f && ref.bad) {
        fprintf(stderr, "tenet-gpt: %d differences from the reference\n", ref.bad);
        rc = 1;
    } else if (rc == 0 && ref.f) {
        printf("every token equal to the reference's, every logit within %.3g (largest relative "
               "difference %.3g)\n",
               r->rtol, ref.worst);
    }
    if (ref.f) fclose(ref.f);
    tn_kv_cache_free(c);
    free(lg);
    free(tok);
    return rc;
}
