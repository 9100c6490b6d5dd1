/* examples/gpt_data.h — what tenet-gpt trains on: a text made into tokens
 * with a byte-level vocabulary, random windows of it as batches, or batches
 * read from a file made elsewhere (scripts/gpt_reference.py). */
#ifndef TENET_EXAMPLES_GPT_DATA_H
#define TENET_EXAMPLES_GPT_DATA_H

#include <stdbool.h>
#include <stdint.h>

/* A text as tokens. The vocabulary is the set of distinct bytes of the text,
 * in byte order: token i is the byte vocab[i] (a UTF-8 text is learnt byte by
 * byte, so every character, ASCII or not, is made of tokens). */
typedef struct gpt_text {
    int64_t n;       /* tokens */
    int64_t *tokens; /* n */
    int vocab_size;  /* distinct bytes */
    unsigned char vocab[256];
    double unigram_nats; /* entropy of the token frequencies, nats per token */
} gpt_text;

/* Reads a whole file; false with a message in err on failure (missing,
 * empty, unreadable). */
bool gpt_text_load(gpt_text *t, const char *path, char *err, size_t err_size);
void gpt_text_free(gpt_text *t);

/* B windows of T + 1 consecutive tokens drawn from tokens [lo, hi) with the
 * generator *rng (advanced): x[b][t] = tok[s_b + t], y[b][t] = tok[s_b + t + 1]. */
void gpt_text_batch(const gpt_text *t, int64_t lo, int64_t hi, int B, int T, uint64_t *rng,
                    int64_t *x, int64_t *y);

/* A file of pre-made batches: for each step, B x T little-endian int64
 * inputs then B x T int64 targets. */
typedef struct gpt_tokens_file {
    int64_t steps; /* whole steps in the file */
    int64_t *data; /* steps * 2 * B * T */
} gpt_tokens_file;

/* false with a message when the file is unreadable, its size is not a
 * multiple of one step's bytes, or a token is outside [0, vocab). */
bool gpt_tokens_load(gpt_tokens_file *f, const char *path, int B, int T, int vocab, char *err,
                     size_t err_size);
void gpt_tokens_free(gpt_tokens_file *f);

/* splitmix64: the example's generator (batches, sampling). */
uint64_t gpt_rand_u64(uint64_t *state);
double gpt_rand_uniform(uint64_t *state); /* [0, 1) */

#endif
