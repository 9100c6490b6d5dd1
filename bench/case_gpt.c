/* gpt_step: one training step of examples/gpt_model.h's GPT-2 model in the
 * configuration of docs/performance.md (vocab 96, block 64, 4 layers, 4
 * heads, embd 128, batch 16): zero_grad, forward, cross-entropy, backward,
 * clip_grad_norm_(1.0), AdamW with nanoGPT's groups, as tenet-gpt trains. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpt_model.h"

typedef struct gpt_case {
    gpt_model m;
    tn_adam *opt;
    tn_tensor *x, *y;
} gpt_case;

static void gpt_case_free(gpt_case *c) {
    tn_adam_free(c->opt);
    tn_release(c->x);
    tn_release(c->y);
    gpt_free(&c->m);
}

/* The model and the batch on o->device (--device cuda: the same step on the GPU). */
static bool gpt_case_new(gpt_case *c, const bench_opts *o) {
    const bool quick = o->quick;
    *c = (gpt_case){0};
    gpt_config cfg = {96, quick ? 16 : 64, quick ? 1 : 4, 4, quick ? 32 : 128};
    const int64_t shape[2] = {quick ? 2 : 16, cfg.block};
    if (!gpt_init(&c->m, cfg, 0)) return false;
    if (o->device.type != TN_CPU && !gpt_to(&c->m, o->device)) {
        gpt_free(&c->m);
        return false;
    }
    c->opt = gpt_optimizer(&c->m, 1e-3);
    /* tokens i * 7 % 96: the step's cost does not depend on the text */
    int64_t tok[16 * 64 + 1];
    for (int i = 0; i <= 16 * 64; i++)
        tok[i] = (int64_t)i * 7 % cfg.vocab;
    c->x = bench_on(o, tn_tensor_from(tok, TN_I64, 2, shape, false));
    c->y = bench_on(o, tn_tensor_from(tok + 1, TN_I64, 2, shape, false));
    bool ok = c->opt && c->x && c->y;
    if (!ok) gpt_case_free(c);
    return ok;
}

static int gpt_body(void *state, int64_t iters) {
    gpt_case *c = state;
    for (int64_t i = 0; i < iters; i++) {
        if (tn_adam_zero_grad(c->opt) < 0 || tn_scope_begin() < 0)
            return bench_fail("gpt_step", "setup of a step");
        tn_tensor *loss = gpt_loss(&c->m, c->x, c->y);
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

int bench_gpt_step(const bench_opts *o) {
    gpt_case c;
    if (!gpt_case_new(&c, o)) return bench_fail("gpt_step", "setup");
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = bench_time(o, gpt_body, &c, 0.2, secs) < 0 ? -1 : 0;
    if (rc == 0) {
        bench_result r = {.name = "gpt_step", .unit = "ms/step", .higher_is_better = false};
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e3 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "tokens_per_s", (o->quick ? 32 : 1024) / (1e-3 * r.median));
        bench_emit(&r);
    }
    gpt_case_free(&c);
    return rc;
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
    if (!gpt_case_new(&c, o)) return bench_fail(name, "setup");
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
