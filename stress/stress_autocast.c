/* Mixed precision from many threads: autocast regions, their weight-cast caches and half leaves.
 *
 * Shared tensors: the leaves W (D x H float32: the master weight), Hb (D x H bfloat16) and Hf
 * (D x H float16), which require grad, and the read-only data X (B x D, entries in {-1, 0, 1}),
 * E (B x D, one 1 in each column) and R (ROWS x D, normal). Every iteration a worker opens a CPU
 * autocast region, bfloat16 or float16, and runs one of two passes:
 *
 *  - accumulate: loss = sum(X @ W) + sum(E @ Hb) + sum(E @ Hf) in the region, then tn_backward
 *    into the shared leaves. The products of these small values are exact in both half types,
 *    so every pass adds exactly colsum(X) to each row of W.grad (float32, through the cast's
 *    ToCopyBackward0) and exactly 1 to every element of Hb.grad (bfloat16) and Hf.grad
 *    (float16), whatever the region's dtype. After a round of P passes the gradients must be
 *    P colsum(X), P and P bit for bit, whatever order the lock-free accumulation took; a round
 *    keeps P <= 128, well within the integers bfloat16 holds exactly (256).
 *  - functional: a random program of the autocast lists (matmul and linear on W twice, so the
 *    second use hits the thread's weight-cast cache; attention; layer norm, gelu, softmax,
 *    promotion between the two half types; a nested region of the other dtype or a disabled
 *    one; sometimes a no-grad pass first, which must not poison the cache), a float32 loss
 *    (cross-entropy) or a half one, and tn_autograd_grad with respect to the three leaves,
 *    which accumulates nothing. Its checksum must be bit-identical when the main thread
 *    replays the program alone after the round.
 *
 * Invariants besides: a region on one thread never shows on another (tn_autocast_is_enabled
 * and tn_autocast_dtype before, inside, in and after a nested region); the products come out in
 * the region's dtype, the cross-entropy in float32, and each leaf's gradient in the leaf's
 * dtype; the shared tensors keep version 0 and their values; nothing leaks. The second half of
 * the run has the race detector on: it must report nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define MAX_THREADS 256
#define B 4
#define D 8
#define H 16
#define ROWS 12
#define ROUND_PASSES 128 /* accumulate passes per round, at most (all threads together) */

typedef struct shared {
    tn_tensor *W, *Hb, *Hf, *X, *E, *R;
    double colsum[D];
    int64_t per_thread; /* iterations per worker per round */
    int64_t passes[MAX_THREADS];
    st_log log[MAX_THREADS];
} shared;

static void fail(st_prog *p, const char *fmt, const char *a, const char *b) {
    if (!p->err[0]) snprintf(p->err, sizeof p->err, fmt, a, b);
}

static void want_dtype(st_prog *p, const tn_tensor *t, tn_dtype want, const char *what) {
    if (t && tn_dtype_of(t) != want) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s is %s", what, tn_dtype_name(tn_dtype_of(t)));
        fail(p, "%s, want %s", msg, tn_dtype_name(want));
    }
}

/* This thread's CPU autocast state must be (on, dt). */
static void want_region(st_prog *p, bool on, tn_dtype dt, const char *where) {
    if (tn_autocast_is_enabled(TN_CPU) != on)
        fail(p, "autocast %s %s", on ? "off" : "on", where);
    else if (on && tn_autocast_dtype(TN_CPU) != dt)
        fail(p, "autocast dtype %s %s", tn_dtype_name(tn_autocast_dtype(TN_CPU)), where);
}

static tn_dtype other(tn_dtype dt) { return dt == TN_BF16 ? TN_F16 : TN_BF16; }

/* sum(X @ W) + sum(E @ Hb) + sum(E @ Hf) in the open region (dtype dt) */
static tn_tensor *exact_loss(st_prog *p, const shared *s, tn_dtype dt) {
    tn_tensor *a = st_ok(p, tn_matmul(s->X, s->W), "X @ W");
    tn_tensor *b = st_ok(p, tn_matmul(s->E, s->Hb), "E @ Hb");
    tn_tensor *c = st_ok(p, tn_matmul(s->E, s->Hf), "E @ Hf");
    want_dtype(p, a, dt, "X @ W"), want_dtype(p, b, dt, "E @ Hb"), want_dtype(p, c, dt, "E @ Hf");
    return st_ok(
        p,
        tn_add(st_ok(p, tn_add(st_ok(p, tn_sum(a), "sum"), st_ok(p, tn_sum(b), "sum")), "add"),
               st_ok(p, tn_sum(c), "sum")),
        "add");
}

/* A few ops of the region's lists on a (rows x H, half). */
static tn_tensor *step(st_prog *p, const shared *s, tn_tensor *a, int64_t rows, tn_dtype dt) {
    switch (st_pick(p, 6)) {
    case 0:
        return st_ok(p, tn_gelu(a, st_pick(p, 2)), "gelu");
    case 1: /* follows its input: stays half */
        return st_ok(p, tn_layer_norm(a, 1, (int64_t[]){H}, NULL, NULL, 1e-5), "layer_norm");
    case 2:
        return st_ok(p, tn_softmax(a, 1), "softmax");
    case 3: { /* causal attention over the rows, one head: q = k = v = a */
        tn_tensor *q = st_ok(p, tn_reshape(a, 3, (int64_t[]){1, rows, H}), "reshape");
        tn_tensor *y = st_ok(p, tn_scaled_dot_product_attention(q, q, q, NULL, 0.0, true), "sdpa");
        want_dtype(p, y, dt, "attention");
        return st_ok(p, tn_reshape(y, 2, (int64_t[]){rows, H}), "reshape back");
    }
    case 4: { /* a product through the cache's cast of W again: (rows x H) @ W^T @ W */
        tn_tensor *b = st_ok(p, tn_matmul(a, st_ok(p, tn_transpose(s->W, 0, 1), "W^T")), "a @ W^T");
        b = st_ok(p, tn_linear(b, st_ok(p, tn_transpose(s->W, 0, 1), "W^T"), NULL), "linear");
        want_dtype(p, b, dt, "linear");
        return st_ok(p, tn_mul_scalar(b, 0.125), "mul_scalar");
    }
    default: { /* a nested region of the other dtype, or a disabled one, makes a (1 x H) row
                * in the other half type or in float32: a + row promotes to float32 */
        bool off = st_pick(p, 2);
        if ((off ? tn_autocast_begin_disabled(TN_CPU) : tn_autocast_begin(TN_CPU, other(dt))) !=
            TN_OK)
            return st_ok(p, NULL, "nested tn_autocast_begin");
        want_region(p, !off, other(dt), "in the nested region");
        tn_tensor *c = st_ok(p, tn_matmul(s->E, off ? s->W : s->Hb), "nested E @ W");
        want_dtype(p, c, off ? TN_F32 : other(dt), "nested product");
        if (tn_autocast_end() != TN_OK) st_ok(p, NULL, "nested tn_autocast_end");
        want_region(p, true, dt, "after the nested region");
        tn_tensor *r = st_ok(p, tn_add(a, st_ok(p, tn_mean_dim(c, 0, true), "mean_dim")), "add");
        want_dtype(p, r, TN_F32, "a + row");
        return r;
    }
    }
}

/* Runs program `seed` (a functional pass); returns its checksum (NAN with p->err on failure). */
static double run_program(void *arg, uint64_t seed, st_prog *p) {
    const shared *s = arg;
    st_prog_start(p, seed);
    const tn_dtype dt = st_pick(p, 2) ? TN_BF16 : TN_F16;
    const int64_t rows = 1 + st_pick(p, ROWS), start = st_pick(p, ROWS + 1 - (int)rows);
    double sum = 0;
    want_region(p, false, dt, "before the region");
    if (tn_scope_begin() != TN_OK) {
        snprintf(p->err, sizeof p->err, "tn_scope_begin: %s", tn_last_error());
        return NAN;
    }
    if (tn_autocast_begin(TN_CPU, dt) != TN_OK) {
        snprintf(p->err, sizeof p->err, "tn_autocast_begin: %s", tn_last_error());
        tn_scope_end();
        return NAN;
    }
    want_region(p, true, dt, "in the region");
    tn_tensor *x = st_ok(p, tn_narrow(s->R, 0, start, rows), "narrow R");
    if (st_pick(p, 3) == 0) { /* an evaluation pass first: its cast must not be reused below */
        bool prev = tn_set_grad_enabled(false);
        st_total(p, st_ok(p, tn_sum(st_ok(p, tn_matmul(x, s->W), "no-grad X @ W")), "sum"));
        tn_set_grad_enabled(prev);
    }
    tn_tensor *a = st_ok(p, tn_matmul(x, s->W), "R @ W");
    want_dtype(p, a, dt, "R @ W");
    for (int i = 0, n = 1 + st_pick(p, 4); i < n && !p->err[0]; i++)
        a = step(p, s, a, rows, dt);
    tn_tensor *loss = NULL;
    if (!p->err[0] && st_pick(p, 2)) { /* on the float32 list */
        int64_t tg[ROWS];
        for (int64_t i = 0; i < rows; i++)
            tg[i] = st_pick(p, H);
        tn_tensor *t = st_ok(p, tn_tensor_from(tg, TN_I64, 1, &rows, false), "targets");
        loss = st_ok(p, tn_cross_entropy(a, t), "cross_entropy");
        want_dtype(p, loss, TN_F32, "cross_entropy");
    } else if (!p->err[0]) {
        loss = st_ok(p, tn_mean(st_ok(p, tn_mul(a, a), "mul")), "mean");
    }
    tn_tensor *ex = loss ? exact_loss(p, s, dt) : NULL; /* every leaf takes part */
    loss = ex ? st_ok(p, tn_add(loss, ex), "add") : NULL;
    if (tn_autocast_end() != TN_OK) st_ok(p, NULL, "tn_autocast_end");
    want_region(p, false, dt, "after the region");
    if (loss && !p->err[0]) {
        tn_tensor *in[3] = {s->W, s->Hb, s->Hf}, *g[3] = {NULL, NULL, NULL};
        if (tn_autograd_grad_ex(1, &loss, NULL, 3, in, g, false, false, false) != TN_OK)
            st_ok(p, NULL, "tn_autograd_grad");
        sum = st_total(p, loss);
        for (int i = 0; i < 3 && !p->err[0]; i++) {
            want_dtype(p, g[i], tn_dtype_of(in[i]), "a leaf's gradient");
            sum += st_total(p, st_ok(p, tn_sum(g[i]), "sum grad")); /* g: the scope's */
        }
    }
    tn_scope_end();
    return p->err[0] ? NAN : sum;
}

/* An accumulate pass: the exact loss's gradients into the shared leaves. */
static bool accumulate(const shared *s, uint64_t seed, st_prog *p) {
    st_prog_start(p, seed);
    const tn_dtype dt = st_pick(p, 2) ? TN_BF16 : TN_F16;
    if (tn_scope_begin() != TN_OK) {
        snprintf(p->err, sizeof p->err, "tn_scope_begin: %s", tn_last_error());
        return false;
    }
    if (tn_autocast_begin(TN_CPU, dt) != TN_OK) {
        snprintf(p->err, sizeof p->err, "tn_autocast_begin: %s", tn_last_error());
        tn_scope_end();
        return false;
    }
    tn_tensor *loss = exact_loss(p, s, dt);
    if (tn_autocast_end() != TN_OK) st_ok(p, NULL, "tn_autocast_end");
    bool done = loss && !p->err[0] && tn_backward(loss, NULL, false) == TN_OK;
    if (loss && !done) st_ok(p, NULL, "backward");
    tn_scope_end();
    return done;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    int64_t passes = 0;
    for (int64_t i = 0; i < s->per_thread && st_go(w, i); i++) {
        uint64_t seed = st_rand(w);
        st_prog p;
        if (seed % 3 == 0) {
            passes += accumulate(s, seed, &p);
        } else {
            double sum = run_program(s, seed, &p);
            if (!p.err[0]) st_log_add(&s->log[w->id], seed, sum); /* for the serial replay */
        }
        w->ops += p.ops;
        if (p.err[0]) st_fail(w, "program 0x%llx: %s", (unsigned long long)seed, p.err);
    }
    s->passes[w->id] = passes;
}

/* Every element of t must be exactly want(column) (a function of the column alone). */
static void check_grad(tn_tensor *leaf, const char *name, int64_t passes, const double *per_row) {
    tn_tensor *g = tn_grad(leaf);
    if (!g) {
        if (passes) st_fail(NULL, "%s.grad is NULL after %lld passes", name, (long long)passes);
        return;
    }
    double v[D * H];
    if (tn_dtype_of(g) != tn_dtype_of(leaf))
        st_fail(NULL, "%s.grad is %s", name, tn_dtype_name(tn_dtype_of(g)));
    else if (tn_copy_to_f64(g, v, D * H) != TN_OK)
        st_fail(NULL, "%s.grad: %s", name, tn_last_error());
    else
        for (int i = 0; i < D * H; i++) {
            double want = (double)passes * (per_row ? per_row[i / H] : 1.0);
            if (v[i] != want) {
                st_fail(NULL, "%s.grad[%d] = %.9g after %lld passes, want exactly %.9g", name, i,
                        v[i], (long long)passes, want);
                break;
            }
        }
    tn_release(g);
    if (tn_set_grad(leaf, NULL) != TN_OK) st_fail(NULL, "tn_set_grad: %s", tn_last_error());
}

static int rounds(const st_opts *o, shared *s) {
    int n = 0;
    do {
        st_run(o, o->threads, worker, s);
        int64_t passes = 0;
        for (int i = 0; i < o->threads; i++)
            passes += s->passes[i];
        check_grad(s->W, "W", passes, s->colsum);
        check_grad(s->Hb, "Hb", passes, NULL);
        check_grad(s->Hf, "Hf", passes, NULL);
        st_replay(s->log, o->threads, run_program, s);
        n++;
    } while (st_time_left() && st_violations() == 0);
    return n;
}

static tn_tensor *leaf(const float *v, tn_dtype dt) {
    tn_tensor *f = tn_tensor_from(v, TN_F32, 2, (int64_t[]){D, H}, false);
    tn_tensor *t = f ? tn_to(f, dt, TN_DEVICE_CPU) : NULL;
    tn_release(f);
    if (t && tn_requires_grad_(t, true) != TN_OK) tn_release(t), t = NULL;
    return t;
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 30,
                 .iterations = 0,
                 .seed = 28,
                 .quick_seconds = 4,
                 .quick_iterations = 0,
                 .quick_threads = 4};
    st_parse(argc, argv, &o,
             "autocast regions (bfloat16, float16, nested) and half leaves from many threads: "
             "exact gradient sums, serial replays, per-thread regions");
    if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    float w[D * H], x[B * D], e[B * D];
    for (int i = 0; i < D * H; i++)
        w[i] = (float)((i * 7) % 17 - 8) / 4.0f; /* quarters in [-2, 2]: exact in both halves */
    for (int i = 0; i < B * D; i++) {
        x[i] = (float)((i * 5 + 1) % 3 - 1);
        e[i] = i / D == (i % D) % B ? 1.0f : 0.0f; /* column j's 1 in row j mod B */
        s.colsum[i % D] += x[i];
    }
    tn_manual_seed(o.seed);
    s.W = leaf(w, TN_F32), s.Hb = leaf(w, TN_BF16), s.Hf = leaf(w, TN_F16);
    s.X = tn_tensor_from(x, TN_F32, 2, (int64_t[]){B, D}, false);
    s.E = tn_tensor_from(e, TN_F32, 2, (int64_t[]){B, D}, false);
    s.R = tn_randn(2, (int64_t[]){ROWS, D}, TN_F32);
    tn_tensor *sh[6] = {s.W, s.Hb, s.Hf, s.X, s.E, s.R};
    double d0[6];
    for (int i = 0; i < 6; i++) {
        if (!sh[i]) {
            st_fail(NULL, "setup: %s", tn_last_error());
            return st_finish("stress_autocast", &o);
        }
        d0[i] = st_digest(sh[i]);
    }
    /* each round: every worker's share of the passes (a third of its iterations accumulate) */
    s.per_thread = 3 * ROUND_PASSES / 2 / o.threads;
    if (s.per_thread < 1) s.per_thread = 1;

    st_set_deadline(o.seconds / 2);
    int n = rounds(&o, &s);
    st_race_phase_begin();
    st_set_deadline(o.seconds / 2);
    n += rounds(&o, &s);
    st_race_phase_end();
    printf("%d rounds\n", n);

    st_release_shared(sh, 6, d0);
    st_check_no_leak(&base, 16u << 20);
    return st_finish("stress_autocast", &o);
}
