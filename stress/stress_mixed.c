/* A mixed random workload from many threads.
 *
 * Shared read-only tensors: data X (64x16), weights W1 (16x32), W2 (32x8)
 * and bias B (32), the weights leaves that require grad. Each iteration a
 * worker draws a seed and runs the random program it names: a narrow of X
 * (sometimes through transposes), a matmul with W1, a chain of random
 * pointwise ops, views, reductions and in-place ops on private non-leaves, a
 * matmul with W2, a loss, tn_autograd_grad w.r.t. the shared weights, and a
 * backward into a private leaf whose gradient must be exactly 2P.
 *
 * Invariants: every call succeeds; each program's checksum (loss and every
 * gradient element) is bit-identical when the main thread replays the seed
 * alone afterwards (results do not depend on what runs beside them); the
 * shared tensors keep version 0, their contents and no .grad; nothing
 * leaks. The second half of the run has the race detector on: it must
 * report nothing (no thread writes shared memory).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define MAX_THREADS 256

typedef struct shared {
    tn_tensor *X, *W1, *W2, *B;
    st_log log[MAX_THREADS];
} shared;

static tn_tensor *step(st_prog *p, const shared *s, tn_tensor *a, int64_t rows) {
    switch (st_pick(p, 8)) {
    case 0:
        return st_ok(p, tn_tanh(a), "tanh");
    case 1:
        return st_ok(p, tn_mul(a, st_ok(p, tn_sigmoid(a), "sigmoid")), "mul");
    case 2:
        return st_ok(p, tn_relu(a), "relu");
    case 3: { /* in place on a private non-leaf (add saves nothing) */
        tn_tensor *b = st_ok(p, tn_add_scalar(a, 0.25), "add_scalar");
        if (b && tn_mul_scalar_(b, 0.5) != TN_OK) st_ok(p, NULL, "mul_scalar_");
        return b;
    }
    case 4: { /* views: (rows,32) -> (rows,2,16) -> transposed -> back */
        int64_t s3[] = {rows, 2, 16}, s2[] = {rows, 32};
        tn_tensor *v = st_ok(p, tn_transpose(st_ok(p, tn_reshape(a, 3, s3), "reshape"), 1, 2), "t");
        return st_ok(p, tn_reshape(v, 2, s2), "reshape back");
    }
    case 5:
        return st_ok(p, tn_add(a, s->B), "add bias");
    case 6:
        return st_ok(p, tn_sub(a, st_ok(p, tn_mean_dim(a, 1, true), "mean_dim")), "sub");
    default:
        return st_ok(
            p,
            tn_mul_scalar(
                st_ok(p, tn_narrow(tn_cat(2, (tn_tensor *[]){a, a}, 1), 1, 16, 32), "cat/narrow"),
                0.75),
            "mul_scalar");
    }
}

/* Runs program `seed`; returns its checksum (NAN with p->err on failure). */
static double run_program(void *arg, uint64_t seed, st_prog *p) {
    const shared *s = arg;
    st_prog_start(p, seed);
    double sum = 0;
    if (tn_scope_begin() != TN_OK) {
        snprintf(p->err, sizeof p->err, "tn_scope_begin: %s", tn_last_error());
        return NAN;
    }
    int64_t rows = 1 + st_pick(p, 64), start = st_pick(p, 65 - (int)rows);
    tn_tensor *h = st_ok(p, tn_narrow(s->X, 0, start, rows), "narrow X");
    if (st_pick(p, 2)) h = st_ok(p, tn_transpose(st_ok(p, tn_transpose(h, 0, 1), "t"), 0, 1), "t");
    tn_tensor *a = st_ok(p, tn_matmul(h, s->W1), "matmul W1");
    for (int i = 0, n = 1 + st_pick(p, 6); i < n && !p->err[0]; i++)
        a = step(p, s, a, rows);
    tn_tensor *o = p->err[0] ? NULL : st_ok(p, tn_matmul(a, s->W2), "matmul W2");
    tn_tensor *loss = !o              ? NULL
                      : st_pick(p, 2) ? st_ok(p, tn_mean(st_ok(p, tn_mul(o, o), "mul")), "mean")
                                      : st_ok(p, tn_sum(st_ok(p, tn_tanh(o), "tanh")), "sum");
    if (loss) {
        tn_tensor *in[3] = {s->W1, s->W2, s->B}, *g[3] = {NULL, NULL, NULL};
        if (tn_autograd_grad(1, &loss, NULL, 3, in, g, false, false) != TN_OK)
            st_ok(p, NULL, "tn_autograd_grad");
        sum = st_total(p, loss);
        for (int i = 0; i < 3; i++) {
            if (g[i]) sum += st_total(p, st_ok(p, tn_sum(g[i]), "sum grad")); /* g: the scope's */
        }
        /* a private leaf: d(sum(P*P))/dP must be exactly 2P */
        tn_tensor *P = st_ok(p, tn_detach(st_ok(p, tn_clone(a), "clone")), "detach");
        if (P && tn_requires_grad_(P, true) == TN_OK &&
            tn_backward(st_ok(p, tn_sum(st_ok(p, tn_mul(P, P), "mul")), "sum"), NULL, false) ==
                TN_OK) {
            tn_tensor *gp = tn_grad(P);
            tn_tensor *diff =
                gp ? st_ok(p, tn_sum(st_ok(p, tn_ne(gp, tn_mul_scalar(P, 2.0)), "ne")), "sum")
                   : NULL;
            double bad = diff ? st_total(p, diff) : 1;
            if (bad != 0 && !p->err[0])
                snprintf(p->err, sizeof p->err, "private leaf: grad != 2P in %g elements", bad);
        } else {
            st_ok(p, NULL, "private leaf backward");
        }
    }
    tn_scope_end();
    return p->err[0] ? NAN : sum;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    for (int64_t i = 0; st_go(w, i); i++) {
        uint64_t seed = st_rand(w);
        st_prog p;
        double sum = run_program(s, seed, &p);
        w->ops += p.ops;
        if (p.err[0]) {
            st_fail(w, "program 0x%llx: %s", (unsigned long long)seed, p.err);
            continue;
        }
        st_log_add(&s->log[w->id], seed, sum); /* the first ST_LOG, for the serial replay */
    }
}

static void replay(shared *s, int threads) {
    printf("replayed %d programs serially\n", st_replay(s->log, threads, run_program, s));
}

static tn_tensor *randn2(int64_t r, int64_t c, bool rg) {
    int64_t shape[] = {r, c};
    tn_tensor *t = tn_randn(c ? 2 : 1, c ? shape : &r, TN_F32);
    if (t && rg) tn_requires_grad_(t, true);
    return t;
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 30,
                 .iterations = 0,
                 .seed = 6,
                 .quick_seconds = 4,
                 .quick_iterations = 0,
                 .quick_threads = 4};
    st_parse(argc, argv, &o,
             "random ops, views, in-place ops and backward from many threads on "
             "private and shared read-only tensors");
    if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    tn_manual_seed(o.seed);
    s.X = randn2(64, 16, false);
    s.W1 = randn2(16, 32, true);
    s.W2 = randn2(32, 8, true);
    s.B = randn2(32, 0, true);
    tn_tensor *sh[4] = {s.X, s.W1, s.W2, s.B};
    double d0[4];
    for (int i = 0; i < 4; i++)
        d0[i] = st_digest(sh[i]);

    st_set_deadline(o.seconds / 2);
    st_run(&o, o.threads, worker, &s);
    replay(&s, o.threads);

    st_race_phase_begin();
    st_set_deadline(o.seconds / 2);
    st_run(&o, o.threads, worker, &s);
    st_race_phase_end();
    replay(&s, o.threads);

    st_release_shared(sh, 4, d0);
    st_check_no_leak(&base, 16u << 20);
    return st_finish("stress_mixed", &o);
}
