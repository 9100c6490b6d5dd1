/* examples/gpt_generate.h — generation with the model of gpt_model.h and a
 * KV cache (tenet/kv_cache.h): next-token choice (greedy, temperature,
 * top-k, top-p) and batched generation from prompts of different lengths,
 * left-padded as Hugging Face's generate() does. */
#ifndef TENET_EXAMPLES_GPT_GENERATE_H
#define TENET_EXAMPLES_GPT_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpt_model.h"

/* How the next token is picked from a row of logits. temperature 0 or
 * top_k 1: the largest logit (the first of equal ones). Else softmax(logits /
 * temperature) over the top_k largest (0: all), cut to the smallest set of
 * most likely tokens whose probability reaches top_p (1: all), drawn with
 * gpt_rand_uniform(rng): seeded, reproducible. */
typedef struct gpt_sampling {
    double temperature, top_p;
    int top_k;
} gpt_sampling;

/* The token picked from logits[0, V); -1 when out of memory. */
int gpt_pick(const float *logits, int V, const gpt_sampling *s, uint64_t *rng);

/* A batch of prompts as rows of tokens, left-padded to the longest. */
typedef struct gpt_prompts {
    int B;
    int64_t T;    /* the longest prompt */
    int64_t *pad; /* B: padding slots before row b's prompt */
    int64_t *idx; /* B x T: token 0 on padding */
} gpt_prompts;

/* Everything one generation run needs. expect: a file of the reference's
 * picks and logits (scripts/gpt_generate_reference.py), compared within
 * rtol; NULL: none. */
typedef struct gpt_gen_run {
    int64_t new_tokens;
    gpt_sampling sampling;
    uint64_t seed;
    const char *expect;
    double rtol;
} gpt_gen_run;

/* Generates r->new_tokens tokens after each row of p (one cache of B rows),
 * writing the picks to out (B x new_tokens) and printing the rate; with
 * r->expect, compares each step with the reference. 0, or 1 after a
 * message. */
int gpt_generate(const gpt_model *m, const gpt_prompts *p, const gpt_gen_run *r, int64_t *out);

#endif
