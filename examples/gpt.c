/* examples/gpt.c — tenet-gpt: trains the GPT-2-architecture model of
 * gpt_model.h on a text, as nanoGPT's train.py does: AdamW (betas 0.9, 0.95,
 * weight decay 0.1 on 2-D weights only), gradient clipping at norm 1.0,
 * dropout 0. Prints one line per step, then optionally a sample.
 *
 *   tenet-gpt --data FILE [--steps N] [--sample N] [options]
 *   tenet-gpt --init W.safetensors --tokens B.bin --expect-losses L.txt ...
 *   tenet-gpt [--init W.safetensors | --data FILE] --generate N --prompts FILE
 *
 * --data FILE      a text (UTF-8 or any bytes): byte-level vocabulary of the
 *                  bytes it holds; random windows of the first 90% train, the
 *                  rest gives the validation loss printed at the end
 * --tokens FILE    pre-made batches instead (per step: B x T little-endian
 *                  int64 inputs, then B x T targets), for exact comparisons
 * --init FILE      start from these weights (safetensors, nanoGPT's names)
 * --save FILE      write the trained weights (every parameter but the tied
 *                  lm_head.weight)
 * --steps N (200) --batch B (16) --block T (64) --layers L (4) --heads H (4)
 * --embd C (128) --vocab V (the text's, or 96) --lr X (1e-3) --seed S (1337)
 * --cosine         warm up for 5% of the steps, then cosine decay to lr / 10
 * --sample N       generate N bytes at the end (needs --data), one at a time
 *                  with a KV cache; past the block, the context restarts from
 *                  its last block / 2 bytes
 * --temperature X  for sampling (1.0; 0: the most likely token)
 * --top-k K        sample from the K most likely tokens only (0: all)
 * --top-p P        ... and from the fewest whose probability reaches P (1.0)
 * --generate N     generate N tokens after each of --batch prompts (the lines
 *                  of --prompts FILE, cycled), left-padded into one batch
 *                  with a KV cache; prints the texts and tokens/s. Without
 *                  --data or --tokens nothing is trained (the weights: --init,
 *                  or random) and the vocabulary is newline then the 95
 *                  printable ASCII bytes (--vocab 96); with --data, --steps 0
 *                  generates from --init's weights in the text's vocabulary
 * --expect-generation FILE   compare each step's logits (within --rtol) and
 *                  picks with FILE's (scripts/gpt_generate_reference.py);
 *                  exit 1 on a difference
 * --threads N      tenet's threads (default: all)
 * --device D       cpu (default) or cuda: the model and every step on the
 *                  first GPU (exit status 3 when there is none)
 * --autocast T     bf16 or f16: mixed precision (tenet/autocast.h): the
 *                  forward under an autocast region of that dtype, float32
 *                  master weights; f16 also scales the loss with a gradient
 *                  scaler (skipped steps are printed)
 * --infer-dtype T  bf16 or f16: --sample and --generate run the model with
 *                  its weights converted to that dtype (after training and
 *                  --save): half the bytes per token, the KV cache too
 * --monitor        the gradient monitor (tenet/debug.h) on every step, the
 *                  parameters named: warnings name exploding (norm above
 *                  100) or all-zero gradients, and the last step's table is
 *                  printed at the end (with f16, the loss scale and the
 *                  steps the scaler skipped)
 * --expect-losses FILE [--rtol X]   compare each step's loss with FILE's
 *                  lines (PyTorch's, scripts/gpt_reference.py); exit 1 on a
 *                  relative difference above X (1e-4)
 * --profile-steps  (bench) print only the median step time at the end
 * --distributed    data-parallel under mpirun -np N (N divides --batch): each
 *                  process takes its rows of every batch, DDP averages the
 *                  gradients; the losses are the single process's
 * --profile[=PATH] write a timeline (Chrome trace) and print the top ops
 * --numerics PATH  record the training steps' numerics (tenet/numerics.h) for
 *                  tenet-diverge; TENET_NUMERICS=PATH records the whole run,
 *                  the initialisation included
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tenet.h>

#include "dist_flag.h"
#include "expect_losses.h"
#include "gpt_data.h"
#include "gpt_generate.h"
#include "gpt_model.h"
#include "profile_flag.h"

/* Without a text: newline, then the printable ASCII bytes ' ' .. '~'. */
enum { BUILTIN_VOCAB = 96 };

typedef struct options {
    gpt_config cfg;
    int steps, batch, sample, threads, generate, top_k;
    double lr, temperature, rtol, top_p;
    uint64_t seed;
    bool cosine, monitor;
    tn_device dev;
    tn_dtype autocast;    /* TN_DTYPE_SAME: off */
    tn_dtype infer_dtype; /* the weights' for --sample and --generate; TN_DTYPE_SAME: kept */
    const char *data, *tokens, *init, *save, *expect, *numerics, *prompts, *expect_gen;
} options;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "tenet-gpt: %s: %s: %s\n", what, tn_status_string(tn_last_status()),
            tn_last_error());
    return 1;
}

static void usage(void) {
    fprintf(stderr,
            "usage: tenet-gpt (--data FILE | --tokens FILE) [--init FILE] [--save FILE]\n"
            "  [--steps N] [--batch B] [--block T] [--vocab V] [--layers L] [--heads H]\n"
            "  [--embd C] [--lr X] [--seed S] [--cosine] [--sample N] [--temperature X]\n"
            "  [--threads N] [--device cpu|cuda] [--autocast bf16|f16] [--infer-dtype bf16|f16]\n"
            "  [--monitor]\n"
            "  [--expect-losses FILE] [--rtol X] [--numerics PATH] [--top-k K] [--top-p P]\n"
            "  [--generate N --prompts FILE [--expect-generation FILE]]\n");
}

/* Parses argv into o; false (after a message) on a bad or missing value. */
static bool parse_args(int argc, char **argv, options *o) {
    *o = (options){.cfg = {0, 64, 4, 4, 128},
                   .steps = 200,
                   .batch = 16,
                   .lr = 1e-3,
                   .temperature = 1.0,
                   .rtol = 1e-4,
                   .top_p = 1.0,
                   .seed = 1337,
                   .autocast = TN_DTYPE_SAME,
                   .infer_dtype = TN_DTYPE_SAME};
    struct {
        const char *name;
        int *i;
        double *d;
        const char **s;
    } flags[] = {{"--steps", &o->steps, 0, 0},
                 {"--batch", &o->batch, 0, 0},
                 {"--block", &o->cfg.block, 0, 0},
                 {"--vocab", &o->cfg.vocab, 0, 0},
                 {"--layers", &o->cfg.layers, 0, 0},
                 {"--heads", &o->cfg.heads, 0, 0},
                 {"--embd", &o->cfg.embd, 0, 0},
                 {"--sample", &o->sample, 0, 0},
                 {"--threads", &o->threads, 0, 0},
                 {"--generate", &o->generate, 0, 0},
                 {"--top-k", &o->top_k, 0, 0},
                 {"--top-p", 0, &o->top_p, 0},
                 {"--prompts", 0, 0, &o->prompts},
                 {"--expect-generation", 0, 0, &o->expect_gen},
                 {"--lr", 0, &o->lr, 0},
                 {"--temperature", 0, &o->temperature, 0},
                 {"--rtol", 0, &o->rtol, 0},
                 {"--data", 0, 0, &o->data},
                 {"--tokens", 0, 0, &o->tokens},
                 {"--init", 0, 0, &o->init},
                 {"--save", 0, 0, &o->save},
                 {"--expect-losses", 0, 0, &o->expect},
                 {"--numerics", 0, 0, &o->numerics}};
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--cosine") || !strcmp(argv[a], "--monitor")) {
            *(argv[a][2] == 'c' ? &o->cosine : &o->monitor) = true;
            continue;
        }
        if (!strcmp(argv[a], "--device") && a + 1 < argc) {
            const char *v = argv[++a];
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
                fprintf(stderr, "tenet-gpt: --device: cpu or cuda, not '%s'\n", v);
                return false;
            }
            o->dev = strcmp(v, "cuda") ? TN_DEVICE_CPU : TN_DEVICE_CUDA(0);
            continue;
        }
        if ((!strcmp(argv[a], "--autocast") || !strcmp(argv[a], "--infer-dtype")) && a + 1 < argc) {
            const char *f = argv[a], *v = argv[++a];
            if (strcmp(v, "bf16") && strcmp(v, "f16")) {
                fprintf(stderr, "tenet-gpt: %s: bf16 or f16, not '%s'\n", f, v);
                return false;
            }
            *(f[2] == 'a' ? &o->autocast : &o->infer_dtype) = strcmp(v, "f16") ? TN_BF16 : TN_F16;
            continue;
        }
        if (!strcmp(argv[a], "--seed") && a + 1 < argc) {
            o->seed = strtoull(argv[++a], NULL, 10);
            continue;
        }
        size_t k = 0, nf = sizeof flags / sizeof flags[0];
        while (k < nf && strcmp(argv[a], flags[k].name))
            k++;
        if (k == nf || a + 1 >= argc) {
            fprintf(stderr, "tenet-gpt: %s '%s'\n", k == nf ? "unknown option" : "no value for",
                    argv[a]);
            usage();
            return false;
        }
        const char *v = argv[++a];
        char *end;
        if (flags[k].s) {
            *flags[k].s = v;
        } else if (flags[k].i) {
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 1 << 24) {
                fprintf(stderr, "tenet-gpt: %s: bad value '%s'\n", flags[k].name, v);
                return false;
            }
            *flags[k].i = (int)x;
        } else {
            *flags[k].d = strtod(v, &end);
            if (*end) {
                fprintf(stderr, "tenet-gpt: %s: bad value '%s'\n", flags[k].name, v);
                return false;
            }
        }
    }
    const gpt_config *c = &o->cfg;
    const char *bad = !o->data && !o->tokens && !o->generate
                          ? "give --data FILE, --tokens FILE or --generate N"
                      : o->generate && !o->prompts        ? "--generate needs --prompts FILE"
                      : !(o->top_p > 0 && o->top_p <= 1)  ? "--top-p must be in (0, 1]"
                      : !(o->temperature >= 0)            ? "--temperature must be >= 0"
                      : o->data && o->tokens              ? "--data and --tokens exclude each other"
                      : o->sample && !o->data             ? "--sample needs --data (its vocabulary)"
                      : c->block < 1 || o->batch < 1      ? "--block and --batch must be positive"
                      : c->layers < 1 || c->heads < 1     ? "--layers and --heads must be positive"
                      : c->embd < 1 || c->embd % c->heads ? "--embd must be a multiple of --heads"
                      : o->steps < 1 && !o->generate      ? "--steps must be positive"
                                                          : NULL;
    if (bad) {
        fprintf(stderr, "tenet-gpt: %s\n", bad);
        usage();
    }
    return !bad;
}

/* The run's data: a text (random windows) or a file of batches. */
typedef struct data {
    gpt_text text;
    gpt_tokens_file file;
    int64_t split; /* text: train on tokens [0, split), validate on the rest */
    uint64_t rng;
    int64_t *x, *y;
} data;

static bool data_open(data *d, options *o) {
    char err[512];
    memset(d, 0, sizeof *d);
    d->rng = o->seed ^ 0xda7a;
    const int B = o->batch, T = o->cfg.block;
    if (o->data) {
        if (!gpt_text_load(&d->text, o->data, err, sizeof err)) goto bad;
        if (o->cfg.vocab == 0) o->cfg.vocab = d->text.vocab_size;
        d->split = d->text.n * 9 / 10;
        if (o->cfg.vocab < d->text.vocab_size || d->split - T < 1 || d->text.n - d->split - T < 1) {
            snprintf(err, sizeof err,
                     "%s: %d distinct bytes and %lld tokens: needs --vocab >= %d "
                     "and more than %d tokens in each split",
                     o->data, d->text.vocab_size, (long long)d->text.n, d->text.vocab_size, T);
            goto bad;
        }
    } else if (!o->tokens) { /* generation only: the built-in vocabulary */
        if (o->cfg.vocab == 0) o->cfg.vocab = BUILTIN_VOCAB;
    } else {
        if (o->cfg.vocab == 0) o->cfg.vocab = 96;
        if (!gpt_tokens_load(&d->file, o->tokens, B, T, o->cfg.vocab, err, sizeof err)) goto bad;
        if (d->file.steps < o->steps) {
            snprintf(err, sizeof err, "%s holds %lld steps, fewer than --steps %d", o->tokens,
                     (long long)d->file.steps, o->steps);
            goto bad;
        }
    }
    d->x = malloc((size_t)B * (size_t)T * sizeof *d->x);
    d->y = malloc((size_t)B * (size_t)T * sizeof *d->y);
    if (d->x && d->y) return true;
    snprintf(err, sizeof err, "out of memory");
bad:
    fprintf(stderr, "tenet-gpt: %s\n", err);
    return false;
}

static void data_close(data *d) {
    gpt_text_free(&d->text);
    gpt_tokens_free(&d->file);
    free(d->x);
    free(d->y);
}

/* The inputs and targets of one step as [B, T] tensors (scope-owned). */
static bool data_batch(data *d, const options *o, int step, bool val, tn_tensor **x,
                       tn_tensor **y) {
    const int B = o->batch, T = o->cfg.block;
    const int64_t shape[2] = {B, T}, n = (int64_t)B * T;
    const int64_t *xs = d->x, *ys = d->y;
    if (d->file.data) {
        xs = d->file.data + (int64_t)step * 2 * n;
        ys = xs + n;
    } else if (val) {
        gpt_text_batch(&d->text, d->split, d->text.n, B, T, &d->rng, d->x, d->y);
    } else {
        gpt_text_batch(&d->text, 0, d->split, B, T, &d->rng, d->x, d->y);
    }
    *x = tn_to(tn_tensor_from(xs, TN_I64, 2, shape, false), TN_DTYPE_SAME, o->dev);
    *y = tn_to(tn_tensor_from(ys, TN_I64, 2, shape, false), TN_DTYPE_SAME, o->dev);
    return *x && *y;
}

/* nanoGPT's schedule: linear warm-up, then cosine decay to lr / 10. */
static double lr_at(const options *o, int step) {
    if (!o->cosine) return o->lr;
    int warm = o->steps / 20 > 0 ? o->steps / 20 : 1;
    if (step < warm) return o->lr * (step + 1) / warm;
    double r = (double)(step - warm) / (double)(o->steps - warm > 0 ? o->steps - warm : 1);
    return o->lr / 10 + 0.5 * (1 + cos(acos(-1.0) * r)) * (o->lr - o->lr / 10);
}

static void print_progress(int step, int steps, double loss, double tok_s, double elapsed) {
    printf("step %d loss %.6f  %.0f tok/s", step, loss, tok_s);
    if (steps >= 100 && step > 0) {
        double eta = elapsed / (step + 1) * (steps - step - 1);
        int bar = 20 * (step + 1) / steps;
        printf("  [%.*s%*s] ETA %dm%02ds", bar, "####################", 20 - bar, "", (int)eta / 60,
               (int)eta % 60);
    }
    printf("\n");
    fflush(stdout);
}

/* --distributed: this rank's rows of the global batch (every rank draws the
 * same batch), so that DDP's mean of the ranks' gradients is the batch's. */
static bool local_rows(tn_tensor **x, tn_tensor **y, int batch) {
    if (dist_world == 1) return true;
    int64_t lb = batch / dist_world;
    *x = tn_narrow(*x, 0, dist_rank * lb, lb);
    *y = tn_narrow(*y, 0, dist_rank * lb, lb);
    return *x && *y;
}

/* The loss, its forward under the autocast region of --autocast (if any). */
static tn_tensor *forward_loss(const gpt_model *m, const options *o, tn_tensor *x, tn_tensor *y) {
    if (o->autocast == TN_DTYPE_SAME) return gpt_loss(m, x, y);
    if (tn_autocast_begin(o->dev.type, o->autocast) != TN_OK) return NULL;
    tn_tensor *l = gpt_loss(m, x, y);
    return tn_autocast_end() == TN_OK ? l : NULL;
}

/* One optimiser step; the loss through *loss. With a gradient scaler (f16),
 * PyTorch's recipe: backward of the scaled loss, unscale_ before clipping,
 * a step skipped on inf/NaN gradients, update. */
static bool train_step(const gpt_model *m, const options *o, tn_adam *opt, tn_grad_scaler *sc,
                       tn_tensor *x, tn_tensor *y, double *loss) {
    tn_tensor *l = forward_loss(m, o, x, y);
    if (!l) return false;
    if (!sc)
        return tn_backward(l, NULL, false) == TN_OK &&
               tn_clip_grad_norm_(m->n_params, m->params, 1.0, 2.0, NULL) == TN_OK &&
               tn_adam_step(opt) == TN_OK && tn_adam_zero_grad(opt) == TN_OK &&
               tn_item(l, loss) == TN_OK;
    tn_optimizer *g = tn_adam_optimizer(opt);
    bool stepped = false;
    bool ok = g && tn_backward(tn_grad_scaler_scale(sc, l), NULL, false) == TN_OK &&
              tn_grad_scaler_unscale_(sc, g) == TN_OK &&
              tn_clip_grad_norm_(m->n_params, m->params, 1.0, 2.0, NULL) == TN_OK &&
              tn_grad_scaler_step(sc, g, &stepped) == TN_OK && tn_grad_scaler_update(sc) == TN_OK &&
              tn_adam_zero_grad(opt) == TN_OK && tn_item(l, loss) == TN_OK;
    if (ok && !stepped)
        printf("step skipped: inf/NaN gradients; loss scale now %g\n",
               tn_grad_scaler_get_scale(sc));
    return ok;
}

/* Trains o->steps steps; 0 on success, 1 on an error or a loss that
 * differs from the reference. */
static int train(const gpt_model *m, data *d, const options *o) {
    tn_adam *opt = gpt_optimizer(m, o->lr);
    if (!opt) return fail("making the optimizer");
    tn_grad_scaler *sc = NULL; /* float16 needs loss scaling; bfloat16 has float32's range */
    if (o->autocast == TN_F16 && !(sc = tn_grad_scaler_new(65536.0, 2.0, 0.5, 2000, true))) {
        tn_adam_free(opt);
        return fail("making the gradient scaler");
    }
    double *ref = o->expect ? read_losses("tenet-gpt", o->expect, o->steps) : NULL;
    int rc = o->expect && !ref ? 1 : 0;
    if (rc == 0 && o->monitor) { /* the table's rows: the parameters by their names */
        if (tn_grad_monitor_watch(m->n_params, (const char *const *)m->names, m->params) < 0)
            rc = fail("naming the monitor's parameters");
        tn_set_grad_monitor(true, 100.0, 0);
    }
    double worst = 0, t0 = now_s();
    const double tokens = (double)o->batch * o->cfg.block;
    for (int s = 0; s < o->steps && rc == 0; s++) {
        tn_adam_set_lr(opt, -1, lr_at(o, s));
        if (tn_scope_begin() != TN_OK) {
            rc = fail("opening a scope");
            break;
        }
        double loss = 0, ts = now_s();
        tn_tensor *x, *y;
        if (!data_batch(d, o, s, false, &x, &y) || !local_rows(&x, &y, o->batch) ||
            !train_step(m, o, opt, sc, x, y, &loss))
            rc = fail("training step");
        tn_scope_end();
        if (rc == 0 && dist_on) { /* the global batch's loss: the mean of the ranks' */
            rc = dist_sum(&loss, 1) ? 0 : fail("averaging the loss");
            loss /= dist_world;
        }
        if (rc) break;
        double now = now_s();
        print_progress(s, o->steps, loss, tokens / (now - ts), now - t0);
        if (ref) {
            double rel = fabs(loss - ref[s]) / fabs(ref[s]);
            worst = rel > worst ? rel : worst;
            if (!(rel <= o->rtol)) {
                fprintf(stderr,
                        "tenet-gpt: step %d: loss %.8f, the reference's %.8f: relative "
                        "difference %.3g above %.3g\n",
                        s, loss, ref[s], rel, o->rtol);
                rc = 1;
            }
        }
    }
    if (ref && rc == 0)
        printf("every loss within %.3g of the reference (largest relative difference %.3g)\n",
               o->rtol, worst);
    if (o->monitor) {
        const tn_grad_monitor_report *r = tn_last_grad_monitor();
        if (rc == 0 && r) tn_grad_monitor_print(r, stdout);
        tn_set_grad_monitor(false, 0, 0);
        tn_grad_monitor_watch(0, NULL, NULL);
    }
    free(ref);
    tn_grad_scaler_free(sc);
    tn_adam_free(opt);
    return rc;
}

/* Mean loss of 20 validation batches, under no-grad. */
static int validate(const gpt_model *m, data *d, const options *o) {
    bool prev = tn_set_grad_enabled(false);
    double sum = 0;
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++) {
        if (tn_scope_begin() != TN_OK) {
            rc = fail("opening a scope");
            break;
        }
        tn_tensor *x, *y;
        double l;
        if (!data_batch(d, o, 0, true, &x, &y) || tn_item(forward_loss(m, o, x, y), &l) != TN_OK)
            rc = fail("validation");
        sum += l;
        tn_scope_end();
    }
    tn_set_grad_enabled(prev);
    if (rc == 0)
        printf("validation loss %.4f (the text's unigram entropy: %.4f nats per byte)\n", sum / 20,
               d->text.unigram_nats);
    return rc;
}

/* Token <-> byte: the text's vocabulary, or the built-in one. */
typedef struct vocab {
    int n;
    unsigned char sym[256];
    int id[256]; /* -1: no token */
} vocab;

static void vocab_of(const data *d, vocab *v) {
    v->n = d->text.vocab_size ? d->text.vocab_size : BUILTIN_VOCAB;
    for (int i = 0; i < v->n; i++)
        v->sym[i] = d->text.vocab_size ? d->text.vocab[i] : i ? (unsigned char)(31 + i) : '\n';
    for (int c = 0; c < 256; c++)
        v->id[c] = -1;
    for (int i = 0; i < v->n; i++)
        v->id[v->sym[i]] = i;
}

static void put_token(const vocab *v, int64_t t, bool escape_nl) {
    int c = t < v->n ? v->sym[t] : '?';
    if (c == '\n' && escape_nl)
        fputs("\\n", stdout);
    else
        putchar(c);
}

static gpt_sampling sampling_of(const options *o) {
    return (gpt_sampling){.temperature = o->temperature, .top_p = o->top_p, .top_k = o->top_k};
}

/* Feeds ctx[from, to) to the model through the cache; the last one's logits into lg. */
static bool feed(const gpt_model *m, tn_kv_cache *c, const int64_t *ctx, int64_t from, int64_t to,
                 float *lg) {
    if (tn_scope_begin() != TN_OK) return false;
    tn_tensor *x = tn_to(tn_tensor_from(ctx + from, TN_I64, 2, (int64_t[]){1, to - from}, false),
                         TN_DTYPE_SAME, tn_device_of(m->params[0]));
    tn_tensor *logits = gpt_forward_cached(m, c, x);
    /* a half model's logits (--infer-dtype) read as float32 */
    bool ok = tn_copy_to(tn_to(logits, TN_F32, TN_DEVICE_KEEP), lg,
                         (size_t)m->cfg.vocab * sizeof *lg) == TN_OK;
    tn_scope_end();
    return ok;
}

/* Generates o->sample bytes from a newline (or the text's first byte), one
 * token a step through a KV cache of the block's length; when it is full,
 * the cache restarts from the last block / 2 tokens. */
static int sample(const gpt_model *m, const data *d, const options *o) {
    const gpt_text *t = &d->text;
    const int T = o->cfg.block, V = o->cfg.vocab;
    int64_t *ctx = malloc((size_t)(o->sample + 1) * sizeof *ctx);
    float *lg = malloc((size_t)V * sizeof *lg);
    const unsigned char *nl = memchr(t->vocab, '\n', (size_t)t->vocab_size);
    uint64_t rng = o->seed ^ 0x5a3b1e;
    const gpt_sampling sp = sampling_of(o);
    vocab voc;
    vocab_of(d, &voc);
    tn_kv_cache *c = gpt_cache_new(m, 1, T);
    int rc = !c ? fail("making the KV cache") : ctx && lg ? 0 : 1;
    if (rc == 0) ctx[0] = nl ? nl - t->vocab : t->tokens[0];
    bool prev = tn_set_grad_enabled(false);
    printf("sample:\n");
    int64_t fed = 0; /* ctx[0, fed) are in the cache (from ctx[fed - length]) */
    for (int n = 1; n <= o->sample && rc == 0; n++) {
        if (tn_kv_cache_length(c, 0) == T) { /* full: restart from the last T / 2 tokens */
            tn_kv_cache_reset(c);
            fed = n - 1 - (T / 2 > 0 ? T / 2 : 1);
        }
        if (!feed(m, c, ctx, fed, n, lg)) {
            rc = fail("sampling");
            break;
        }
        fed = n;
        int tok = gpt_pick(lg, V, &sp, &rng);
        ctx[n] = tok >= 0 && tok < t->vocab_size ? tok : 0;
        put_token(&voc, ctx[n], false);
    }
    printf("\n");
    tn_set_grad_enabled(prev);
    tn_kv_cache_free(c);
    free(ctx);
    free(lg);
    return rc;
}

/* The lines of path (cycled) as --batch prompts of tokens, left-padded. */
static bool read_prompts(const char *path, const vocab *v, int B, gpt_prompts *p) {
    FILE *f = fopen(path, "rb");
    char line[4096];
    int64_t *tok[256] = {0}, len[256] = {0};
    int n = 0;
    bool ok = f != NULL;
    while (ok && n < 256 && fgets(line, sizeof line, f)) {
        size_t l = strcspn(line, "\r\n");
        if (l == 0) continue;
        ok = (tok[n] = malloc(l * sizeof *tok[n])) != NULL;
        for (size_t i = 0; ok && i < l; i++)
            if ((tok[n][i] = v->id[(unsigned char)line[i]]) < 0) {
                fprintf(stderr, "tenet-gpt: %s: byte 0x%02x of line %d has no token\n", path,
                        (unsigned char)line[i], n + 1);
                ok = false;
            }
        len[n++] = (int64_t)l;
    }
    if (f) fclose(f);
    if (ok && n == 0) fprintf(stderr, "tenet-gpt: %s: no prompt\n", path);
    if (!f) fprintf(stderr, "tenet-gpt: %s: cannot open\n", path);
    ok = ok && n > 0;
    *p = (gpt_prompts){.B = B};
    for (int b = 0; ok && b < B; b++)
        p->T = len[b % n] > p->T ? len[b % n] : p->T;
    p->pad = ok ? calloc((size_t)B, sizeof *p->pad) : NULL;
    p->idx = ok ? calloc((size_t)B * (size_t)p->T, sizeof *p->idx) : NULL;
    ok = ok && p->pad && p->idx;
    for (int b = 0; ok && b < B; b++) {
        p->pad[b] = p->T - len[b % n];
        memcpy(p->idx + b * p->T + p->pad[b], tok[b % n], (size_t)len[b % n] * sizeof *p->idx);
    }
    for (int i = 0; i < n; i++)
        free(tok[i]);
    return ok;
}

/* --generate: o->generate tokens after each of o->batch prompts; prints them. */
static int generate(const gpt_model *m, const data *d, const options *o) {
    vocab voc;
    vocab_of(d, &voc);
    gpt_prompts p;
    if (!read_prompts(o->prompts, &voc, o->batch, &p)) {
        free(p.pad), free(p.idx);
        return 1;
    }
    const int64_t N = o->generate;
    int64_t *out = malloc((size_t)(o->batch * N + 1) * sizeof *out);
    gpt_gen_run r = {N, sampling_of(o), o->seed, o->expect_gen, o->rtol};
    int rc = out ? gpt_generate(m, &p, &r, out) : 1;
    for (int b = 0; rc == 0 && b < o->batch; b++) {
        printf("[%d] ", b);
        for (int64_t i = p.pad[b]; i < p.T; i++)
            put_token(&voc, p.idx[b * p.T + i], true);
        printf(" |");
        for (int64_t i = 0; i < N; i++)
            put_token(&voc, out[b * N + i], true);
        printf("\n");
    }
    free(out), free(p.pad), free(p.idx);
    return rc;
}

int main(int argc, char **argv) {
    profile_flag(&argc, argv);                           /* --profile[=PATH] */
    if (!dist_flag(&argc, &argv, "tenet-gpt")) return 1; /* --distributed */
    options o;
    if (!parse_args(argc, argv, &o)) return 2;
    if (o.batch % dist_world) {
        fprintf(stderr, "tenet-gpt: --distributed: --batch %d does not split over %d processes\n",
                o.batch, dist_world);
        return 2;
    }
    if (o.threads > 0) tn_set_num_threads(o.threads);
    if (o.dev.type == TN_CUDA && !tn_cuda_is_available()) {
        fprintf(stderr, "tenet-gpt: --device cuda: no CUDA device (none found, or tenet was "
                        "built without CUDA)\n");
        return 3;
    }
    data d;
    if (!data_open(&d, &o)) {
        data_close(&d);
        return 1;
    }
    gpt_model m;
    if (!gpt_init(&m, o.cfg, o.seed)) {
        data_close(&d);
        return fail("initialising the model");
    }
    int rc = o.init && !gpt_load(&m, o.init) ? fail("loading --init") : 0;
    if (rc == 0 && o.dev.type != TN_CPU && !gpt_to(&m, TN_DTYPE_SAME, o.dev))
        rc = fail("moving the model");
#ifdef TENET_EXAMPLES_MPI
    tn_ddp *ddp = NULL; /* gradients averaged over the processes during backward */
    if (rc == 0 && dist_on && !(ddp = tn_ddp_new(m.params, m.n_params, 0))) rc = fail("tn_ddp_new");
#endif
    if (rc == 0 && dist_on)
        printf("distributed: %d processes, each %d rows of every batch of %d\n", dist_world,
               o.batch / dist_world, o.batch);
    if (rc == 0) {
        printf("tenet-gpt: %d layers, %d heads, embd %d, block %d, vocab %d, batch %d, %d "
               "threads%s%s%s\n",
               o.cfg.layers, o.cfg.heads, o.cfg.embd, o.cfg.block, o.cfg.vocab, o.batch,
               tn_get_num_threads(), o.dev.type == TN_CUDA ? ", on cuda:0" : "",
               o.autocast == TN_DTYPE_SAME ? "" : ", autocast ",
               o.autocast == TN_DTYPE_SAME ? "" : tn_dtype_name(o.autocast));
        if (o.numerics && tn_numerics_begin(o.numerics, NULL) != TN_OK) rc = fail("--numerics");
        if (rc == 0 && (o.data || o.tokens)) rc = train(&m, &d, &o);
        if (o.numerics && tn_numerics_enabled() && tn_numerics_end() != TN_OK && rc == 0)
            rc = fail("--numerics");
    }
    if (rc == 0 && o.data) rc = validate(&m, &d, &o);
    if (rc == 0 && o.save && dist_rank == 0 && !gpt_save(&m, o.save)) rc = fail("saving --save");
    if (rc == 0 && o.infer_dtype != TN_DTYPE_SAME && (o.sample || o.generate) &&
        !gpt_to(&m, o.infer_dtype, TN_DEVICE_KEEP))
        rc = fail("converting the model for --infer-dtype");
    if (rc == 0 && o.sample) rc = sample(&m, &d, &o);
    if (rc == 0 && o.generate) rc = generate(&m, &d, &o);
#ifdef TENET_EXAMPLES_MPI
    tn_ddp_free(ddp);
#endif
    gpt_free(&m);
    data_close(&d);
    return rc;
}
