/* examples/gpt_data.c — texts, vocabularies and batches for tenet-gpt. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_data.h"

uint64_t gpt_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double gpt_rand_uniform(uint64_t *state) { return (double)(gpt_rand_u64(state) >> 11) * 0x1p-53; }

/* The whole file in a malloc'd buffer; NULL with a message. */
static unsigned char *read_file(const char *path, long *size, char *err, size_t err_size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, err_size, "cannot read %s: %s", path, buf ? "short read" : strerror(errno));
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n;
    return buf;
}

bool gpt_text_load(gpt_text *t, const char *path, char *err, size_t err_size) {
    memset(t, 0, sizeof *t);
    long n;
    unsigned char *buf = read_file(path, &n, err, err_size);
    if (!buf) return false;
    if (n < 2) {
        snprintf(err, err_size, "%s: the text is empty", path);
        free(buf);
        return false;
    }
    int64_t count[256] = {0};
    for (long i = 0; i < n; i++)
        count[buf[i]]++;
    int id[256];
    for (int b = 0; b < 256; b++) {
        id[b] = count[b] ? t->vocab_size : -1;
        if (count[b]) t->vocab[t->vocab_size++] = (unsigned char)b;
        if (count[b]) {
            double p = (double)count[b] / (double)n;
            t->unigram_nats -= p * log(p);
        }
    }
    t->tokens = malloc((size_t)n * sizeof *t->tokens);
    if (!t->tokens) {
        snprintf(err, err_size, "%s: out of memory", path);
        free(buf);
        return false;
    }
    for (long i = 0; i < n; i++)
        t->tokens[i] = id[buf[i]];
    t->n = n;
    free(buf);
    return true;
}

void gpt_text_free(gpt_text *t) {
    free(t->tokens);
    memset(t, 0, sizeof *t);
}

void gpt_text_batch(const gpt_text *t, int64_t lo, int64_t hi, int B, int T, uint64_t *rng,
                    int64_t *x, int64_t *y) {
    uint64_t span = (uint64_t)(hi - lo - T); /* starts in [lo, hi - T) */
    for (int b = 0; b < B; b++) {
        int64_t s = lo + (int64_t)(gpt_rand_u64(rng) % span);
        memcpy(x + (int64_t)b * T, t->tokens + s, (size_t)T * sizeof *x);
        memcpy(y + (int64_t)b * T, t->tokens + s + 1, (size_t)T * sizeof *y);
    }
}

static int64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return (int64_t)v;
}

bool gpt_tokens_load(gpt_tokens_file *f, const char *path, int B, int T, int vocab, char *err,
                     size_t err_size) {
    memset(f, 0, sizeof *f);
    long n;
    unsigned char *buf = read_file(path, &n, err, err_size);
    if (!buf) return false;
    long step_bytes = 2L * B * T * 8;
    if (n == 0 || n % step_bytes) {
        snprintf(err, err_size,
                 "%s: %ld bytes is not a whole number of steps of %ld bytes (B=%d, T=%d)", path, n,
                 step_bytes, B, T);
        free(buf);
        return false;
    }
    f->data = malloc((size_t)(n / 8) * sizeof *f->data);
    for (long i = 0; f->data && i < n / 8; i++) {
        f->data[i] = le64(buf + 8 * i);
        if (f->data[i] < 0 || f->data[i] >= vocab) {
            snprintf(err, err_size,
                     "%s: token %lld at position %ld is outside the vocabulary [0, %d)", path,
                     (long long)f->data[i], i, vocab);
            free(buf);
            gpt_tokens_free(f);
            return false;
        }
    }
    free(buf);
    if (!f->data) {
        snprintf(err, err_size, "%s: out of memory", path);
        return false;
    }
    f->steps = n / step_bytes;
    return true;
}

void gpt_tokens_free(gpt_tokens_file *f) {
    free(f->data);
    memset(f, 0, sizeof *f);
}
