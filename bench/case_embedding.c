/* bench/case_embedding.c — the first op of a transformer: embedding of
 * 16x64 token ids into a (V, D) float32 table, forward (a row copy: GB/s of
 * the rows read and written) and backward (the table's gradient: zeros plus
 * the rows added at repeated ids, µs/op), for a small (96, 128) table and
 * GPT-2's (50257, 768). */
#include "bench.h"

#include <stdio.h>

typedef struct emb {
    tn_tensor *w, *idx, *out, *g;
} emb;

static void emb_free(emb *e) {
    tn_release(e->w), tn_release(e->idx), tn_release(e->out), tn_release(e->g);
}

static bool emb_init(emb *e, int64_t V, int64_t D, tn_device dev) {
    enum { B = 16, T = 64 };
    int64_t ids[B * T];
    for (int i = 0; i < B * T; i++) /* repeats, as text has */
        ids[i] = i % 5 == 0 ? 13 % V : (int64_t)((i * 2654435761u) % (uint64_t)V);
    tn_tensor *w = tn_randn(2, (int64_t[]){V, D}, TN_F32);
    tn_tensor *idx = tn_tensor_from(ids, TN_I64, 2, (int64_t[]){B, T}, false);
    e->w = w ? tn_to(w, TN_DTYPE_SAME, dev) : NULL;
    e->idx = idx ? tn_to(idx, TN_DTYPE_SAME, dev) : NULL;
    tn_release(w), tn_release(idx);
    if (!e->w || !e->idx || tn_requires_grad_(e->w, true) != TN_OK) return false;
    e->out = tn_embedding(e->w, e->idx);
    e->g = e->out ? tn_ones(3, tn_shape(e->out), TN_F32) : NULL;
    tn_tensor *gd = e->g ? tn_to(e->g, TN_DTYPE_SAME, dev) : NULL;
    tn_release(e->g);
    e->g = gd;
    return e->g != NULL;
}

static int fwd_body(void *st, int64_t iters) {
    emb *e = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *y = tn_embedding(e->w, e->idx);
        if (!y) return bench_fail("embedding", "forward");
        tn_release(y);
    }
    return 0;
}

static int bwd_body(void *st, int64_t iters) {
    emb *e = st;
    for (int64_t i = 0; i < iters; i++) {
        tn_tensor *gw = NULL;
        if (tn_autograd_grad(1, &e->out, &e->g, 1, &e->w, &gw, true, false) != TN_OK)
            return bench_fail("embedding", "backward");
        tn_release(gw);
    }
    return 0;
}

static int emb_case(const bench_opts *o, const char *name, int64_t V, int64_t D) {
    emb e = {0};
    double secs[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = emb_init(&e, V, D, o->device) ? 0 : bench_fail(name, "setup");
    double bytes = 2.0 * 16 * 64 * (double)D * 4; /* rows read + written */
    if (rc == 0 && bench_time(o, fwd_body, &e, 0.2, secs) >= 0) {
        bench_result r = {.unit = "GB/s", .higher_is_better = true};
        snprintf(r.name, sizeof r.name, "%s_fwd", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = bench_gbps(bytes, secs[i]);
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "us", 1e6 * secs[0]);
        bench_emit(&r);
    } else {
        rc = -1;
    }
    if (rc == 0 && bench_time(o, bwd_body, &e, 0.2, secs) >= 0) {
        bench_result r = {.unit = "us/op", .higher_is_better = false};
        snprintf(r.name, sizeof r.name, "%s_bwd", name);
        for (int i = 0; i < o->repeat; i++)
            v[i] = 1e6 * secs[i];
        bench_stats(&r, v, o->repeat);
        bench_extra(&r, "table_GBps_written", bench_gbps((double)V * (double)D * 4, secs[0]));
        bench_emit(&r);
    } else {
        rc = -1;
    }
    emb_free(&e);
    return rc;
}

int bench_embedding(const bench_opts *o) {
    int rc = emb_case(o, "embedding_96x128", 96, 128);
    if (rc == 0 && !o->quick) rc = emb_case(o, "embedding_50257x768", 50257, 768);
    return rc;
}
