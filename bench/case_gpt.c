/* gpt_step: one training step of examples/gpt_model.h's GPT-2 model in the
 * configuration of docs/performance.md (vocab 96, block 64, 4 layers, 4
 * heads, embd 128, batch 16): zero_grad, forward, cross-entropy, backward,
 * clip_grad_norm_(1.0), AdamW with nanoGPT's groups, as tenet-gpt trains.
 * gpt_step_bf16: the same with the forward under autocast bfloat16.
 * gpt2_step and gpt2_step_bf16: the same step at GPT-2 small's dimensions
 * (12 layers, 12 heads, embd 768, block 256, batch 4, vocab 96), float32 and
 * with the forward under autocast bfloat16 (tenet-gpt --autocast bf16). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpt_model.h"

typedef struct gpt_case {
    gpt_model m;
    tn_adam *opt;
    tn_tensor *x, *y;
    tn_dtype autocast; /* TN_DTYPE_SAME: off */
    int64_t tokens;    /* per step */
} gpt_case;

static void gpt_case_free(gpt_case *c) {
    tn_adam_free(c->opt);
    tn_release(c->x);
    tn_release(c->y);
    gpt_free(&c->m);
}

/* The model and a batch of `batch` rows on o->device (--device cuda: the same step on the GPU). */
static bool gpt_case_new(gpt_case *c, const bench_opts *o, gpt_config cfg, int batch,
                         tn_dtype autocast) {
    *c = (gpt_case){.autocast = autocast, .tokens = (int64_t)batch * cfg.block};
    const int64_t shape[2] = {batch, cfg.block};
    if (!gpt_init(&c->m, cfg, 0)) return false;
    if (o->device.type != TN_CPU && !gpt_to(&c->m, TN_DTYPE_SAME, o->device)) {
        gpt_free(&c->m);
        return false;
    }
    c->opt = gpt_optimizer(&c->m, 1e-3);
    /* tokens i * 7 % vocab: the step's cost does not depend on the text */
    int64_t *tok = malloc(((size_t)c->tokens + 1) * sizeof *tok);
    if (tok) {
        for (int64_t i = 0; i <= c->tokens; i++)
            tok[i] = i * 7 % cfg.vocab;
        c->x = bench_on(o, tn_tensor_from(tok, TN_I64, 2, shape, false));
        c->y = bench_on(o, tn_tensor_from(tok + 1, TN_I64, 2, shape, false));
        free(tok);
    }
    bool ok = c->opt && c->x && c->y;
    if (!ok) gpt_case_free(c);
    return ok;
}

/* gpt_step's configuration (quick: a smoke-test size), autocast as gpt_case_new's */
static bool gpt_small_new(gpt_case *c, const bench_opts *o, tn_dtype autocast) {
    const bool quick = o->quick;
    gpt_config cfg = {96, quick ? 16 : 64, quick ? 1 : 4, 4, quick ? 32 : 128};
    return gpt_case_new(c, o, cfg, quick ? 2 : 16, autocast);
}

/* GPT-2 small's dimensions (quick: 2 layers, block 32, batch 1) */
static bool gpt2_new(gpt_case *c, const bench_opts *o, tn_dtype autocast) {
    const bool quick = o->quick;
    gpt_config cfg = {96, quick ? 32 : 256, quick ? 2 : 12, 12, 768};
    return gpt_case_new(c, o, cfg, quick ? 1 : 4, autocast);
}

/* The multiply-adds of one step, times 2: the products of the forward (per layer the q/k/v, output,
 * and two MLP projections, 24 B T C^2, and attention's two T x T products over all positions,
 * 4 B T^2 C; the head's 2 B T C V) and twice that in backward. Layer norms, GELU, softmax, the
 * loss and the optimiser are not counted (as in a model FLOPs utilisation). */
static double gpt_step_flops(const gpt_case *c) {
    const double bt = (double)c->tokens, t = c->m.cfg.block, C = c->m.cfg.embd;
    const double fwd =
        c->m.cfg.layers * (24.0 * bt * C * C + 4.0 * bt * t * C) + 2.0 * bt * C * c->m.cfg.vocab;
    return 3.0 * fwd;
}

/* The loss, its forward under the case's autocast region (if any) */
static tn_tensor *gpt_case_loss(gpt_case *c) {
    if (c->autocast == TN_DTYPE_SAME) return gpt_loss(&c->m, c->x, c->y);
    if (tn_autocast_begin(tn_device_of(c->x).type, c->autocast) != TN_OK) return NULL;
    tn_tensor *l = gpt_loss(&c->m, c->x, c->y);
    return tn_autocast_end() == TN_OK ? l : NULL;
}

static int gpt_body(void *state, int64_t iters) {
    gpt_case *c = state;
    for (int64_t i = 0; i < iters; i++) {
        if (tn_adam_zero_grad(c->opt) < 0 || tn_scope_begin() < 0)
            return bench_fail("gpt_step", "setup of a step");
        tn_tensor *loss = gpt_case_loss(c);
        tn_status st = loss ? tn_backward(loss, NULL, false) : tn_last_status();
        if (st == TN_OK) st = tn_clip_grad_norm_(c->m.n_params, c->m.params, 1.0, 2.0, NULL);
        if (st == TN_OK) st = tn_adam_step(c->opt);
        tn_scope_end();
        if (st < 0) return bench_fail("gpt_step", "training step");
    }
    return 0;
}

/* thresholds no gradient crosses: no warnings */
static void gpt_monitor_mode(bool on) { tn_set_grad_monitor(on, 1e30, 0); }

/* One figure: ms per step, with tokens/s and the products' GFLOP/s as extras. */
static int gpt_step_case(const bench_opts *o, const char *name, gpt_case *c, double min_run_s) {
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = bench_time(o, gpt_body, c, min_run_s, secs) < 0 ? -1 : 0;
    if (rc == 0) {
        bench_result r = {.unit = "ms/step", .higher_is_better = false};
        snprintf(r.name, sizeof r.name, "%s", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e3 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "tokens_per_s", (double)c->tokens / (1e-3 * r.median));
        bench_extra(&r, "GFLOP/s", gpt_step_flops(c) / (1e-3 * r.median) * 1e-9);
        bench_emit(&r);
    }
    gpt_case_free(c);
    return rc;
}

int bench_gpt_step(const bench_opts *o) {
    gpt_case c;
    if (!gpt_small_new(&c, o, TN_DTYPE_SAME)) return bench_fail("gpt_step", "setup");
    return gpt_step_case(o, "gpt_step", &c, 0.2);
}

int bench_gpt_step_bf16(const bench_opts *o) {
    gpt_case c;
    if (!gpt_small_new(&c, o, TN_BF16)) return bench_fail("gpt_step_bf16", "setup");
    return gpt_step_case(o, "gpt_step_bf16", &c, 0.2);
}

int bench_gpt2_step(const bench_opts *o) {
    gpt_case c;
    if (!gpt2_new(&c, o, TN_DTYPE_SAME)) return bench_fail("gpt2_step", "setup");
    return gpt_step_case(o, "gpt2_step", &c, 0.0);
}

int bench_gpt2_step_bf16(const bench_opts *o) {
    gpt_case c;
    if (!gpt2_new(&c, o, TN_BF16)) return bench_fail("gpt2_step_bf16", "setup");
    return gpt_step_case(o, "gpt2_step_bf16", &c, 0.0);
}

/* the numerics recorder's records, formatted and written to /dev/null (what the file costs is the
 * disk's) */
static void gpt_numerics_mode(bool on) {
    if (on)
        tn_numerics_begin("/dev/null", NULL);
    else
        tn_numerics_end();
}

/* anomaly mode with its NaN/Inf checks, the gradient monitor or the numerics recorder, on the
 * same step (mode: NULL for anomaly mode) */
static int gpt_mode_case(const bench_opts *o, const char *name, void (*mode)(bool)) {
    gpt_case c;
    if (!gpt_small_new(&c, o, TN_DTYPE_SAME)) return bench_fail(name, "setup");
    int rc = mode ? bench_mode_ratio(o, name, gpt_body, &c, 0.2, 1, "ms", mode)
                  : bench_anomaly_ratio(o, name, gpt_body, &c, 0.2, 1, "ms");
    gpt_case_free(&c);
    return rc;
}

int bench_gpt_step_anomaly_nan(const bench_opts *o) {
    return gpt_mode_case(o, "gpt_step_anomaly_nan", NULL);
}
int bench_gpt_step_monitor(const bench_opts *o) {
    return gpt_mode_case(o, "gpt_step_monitor", gpt_monitor_mode);
}
int bench_gpt_step_numerics(const bench_opts *o) {
    return gpt_mode_case(o, "gpt_step_numerics", gpt_numerics_mode);
}
