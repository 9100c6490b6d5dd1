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

#include "harness.h"

#define MAX_THREADS 256
#define LOG 64

typedef struct shared {
    tn_tensor *X, *W1, *W2, *B;
    uint64_t seed[MAX_THREADS][LOG];
    double sum[MAX_THREADS][LOG];
    int logged[MAX_THREADS];
} shared;

typedef struct prog {
    uint64_t r;
    int64_t ops;
    char err[256];
} prog;

static int pick(prog *p, int n) {
    p->r ^= p->r >> 12;
    p->r ^= p->r << 25;
    p->r ^= p->r >> 27;
    return (int)(((p->r * 0x2545F4914F6CDD1DULL) >> 33) % (uint64_t)n);
}

/* Sets p->err on the first failure; returns t. */
static tn_tensor *ok(prog *p, tn_tensor *t, const char *what) {
    p->ops++;
    if (!t && !p->err[0]) snprintf(p->err, sizeof p->err, "%s: %s", what, tn_last_error());
    return t;
}

static double total(prog *p, const tn_tensor *t) {
    double v = 0;
    if (!t || tn_item(t, &v) != TN_OK) return NAN;
    p->ops++;
    return v;
}

static tn_tensor *step(prog *p, const shared *s, tn_tensor *a, int64_t rows) {
    switch (pick(p, 8)) {
    case 0:
        return ok(p, tn_tanh(a), "tanh");
    case 1:
        return ok(p, tn_mul(a, ok(p, tn_sigmoid(a), "sigmoid")), "mul");
    case 2:
        return ok(p, tn_relu(a), "relu");
    case 3: { /* in place on a private non-leaf (add saves nothing) */
        tn_tensor *b = ok(p, tn_add_scalar(a, 0.25), "add_scalar");
        if (b && tn_mul_scalar_(b, 0.5) != TN_OK) ok(p, NULL, "mul_scalar_");
        return b;
    }
    case 4: { /* views: (rows,32) -> (rows,2,16) -> transposed -> back */
        int64_t s3[] = {rows, 2, 16}, s2[] = {rows, 32};
        tn_tensor *v = ok(p, tn_transpose(ok(p, tn_reshape(a, 3, s3), "reshape"), 1, 2), "t");
        return ok(p, tn_reshape(v, 2, s2), "reshape back");
    }
    case 5:
        return ok(p, tn_add(a, s->B), "add bias");
    case 6:
        return ok(p, tn_sub(a, ok(p, tn_mean_dim(a, 1, true), "mean_dim")), "sub");
    default:
        return ok(p,
                  tn_mul_scalar(ok(p, tn_narrow(tn_cat(2, (tn_tensor *[]){a, a}, 1), 1, 16, 32),
                                   "cat/narrow"),
                                0.75),
                  "mul_scalar");
    }
}

/* Runs program `seed`; returns its checksum (NAN with p->err on failure). */
static double run_program(const shared *s, uint64_t seed, prog *p) {
    memset(p, 0, sizeof *p);
    p->r = seed | 1;
    double sum = 0;
    if (tn_scope_begin() != TN_OK) {
        snprintf(p->err, sizeof p->err, "tn_scope_begin: %s", tn_last_error());
        return NAN;
    }
    int64_t rows = 1 + pick(p, 64), start = pick(p, 65 - (int)rows);
    tn_tensor *h = ok(p, tn_narrow(s->X, 0, start, rows), "narrow X");
    if (pick(p, 2)) h = ok(p, tn_transpose(ok(p, tn_transpose(h, 0, 1), "t"), 0, 1), "t");
    tn_tensor *a = ok(p, tn_matmul(h, s->W1), "matmul W1");
    for (int i = 0, n = 1 + pick(p, 6); i < n && !p->err[0]; i++)
        a = step(p, s, a, rows);
    tn_tensor *o = p->err[0] ? NULL : ok(p, tn_matmul(a, s->W2), "matmul W2");
    tn_tensor *loss = !o           ? NULL
                      : pick(p, 2) ? ok(p, tn_mean(ok(p, tn_mul(o, o), "mul")), "mean")
                                   : ok(p, tn_sum(ok(p, tn_tanh(o), "tanh")), "sum");
    if (loss) {
        tn_tensor *in[3] = {s->W1, s->W2, s->B}, *g[3] = {NULL, NULL, NULL};
        if (tn_autograd_grad(1, &loss, NULL, 3, in, g, false, false) != TN_OK)
            ok(p, NULL, "tn_autograd_grad");
        sum = total(p, loss);
        for (int i = 0; i < 3; i++) {
            if (g[i]) sum += total(p, ok(p, tn_sum(g[i]), "sum grad")); /* g: the scope's */
        }
        /* a private leaf: d(sum(P*P))/dP must be exactly 2P */
        tn_tensor *P = ok(p, tn_detach(ok(p, tn_clone(a), "clone")), "detach");
        if (P && tn_requires_grad_(P, true) == TN_OK &&
            tn_backward(ok(p, tn_sum(ok(p, tn_mul(P, P), "mul")), "sum"), NULL, false) == TN_OK) {
            tn_tensor *gp = tn_grad(P);
            tn_tensor *diff =
                gp ? ok(p, tn_sum(ok(p, tn_ne(gp, tn_mul_scalar(P, 2.0)), "ne")), "sum") : NULL;
            double bad = diff ? total(p, diff) : 1;
            if (bad != 0 && !p->err[0])
                snprintf(p->err, sizeof p->err, "private leaf: grad != 2P in %g elements", bad);
        } else {
            ok(p, NULL, "private leaf backward");
        }
    }
    tn_scope_end();
    return p->err[0] ? NAN : sum;
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    for (int64_t i = 0; st_go(w, i); i++) {
        uint64_t seed = st_rand(w);
        prog p;
        double sum = run_program(s, seed, &p);
        w->ops += p.ops;
        if (p.err[0]) {
            st_fail(w, "program 0x%llx: %s", (unsigned long long)seed, p.err);
            continue;
        }
        int k = s->logged[w->id];
        if (k < LOG) { /* keep the first LOG for the serial replay */
            s->seed[w->id][k] = seed;
            s->sum[w->id][k] = sum;
            s->logged[w->id] = k + 1;
        }
    }
}

static void replay(shared *s, int threads) {
    int n = 0;
    for (int t = 0; t < threads; t++) {
        for (int k = 0; k < s->logged[t]; k++, n++) {
            prog p;
            double sum = run_program(s, s->seed[t][k], &p);
            st_count(p.ops);
            if (memcmp(&sum, &s->sum[t][k], sizeof sum) != 0)
                st_fail(NULL, "program 0x%llx: checksum %.17g alone, %.17g among threads",
                        (unsigned long long)s->seed[t][k], sum, s->sum[t][k]);
        }
        s->logged[t] = 0;
    }
    printf("replayed %d programs serially\n", n);
}

static tn_tensor *randn2(int64_t r, int64_t c, bool rg) {
    int64_t shape[] = {r, c};
    tn_tensor *t = tn_randn(c ? 2 : 1, c ? shape : &r, TN_F32);
    if (t && rg) tn_requires_grad_(t, true);
    return t;
}

static double digest(const tn_tensor *t) {
    int64_t n = tn_numel(t);
    double *v = malloc((size_t)n * sizeof *v), d = 0;
    if (v && tn_copy_to_f64(t, v, n) == TN_OK)
        for (int64_t i = 0; i < n; i++)
            d = d * 1.0000001 + v[i];
    free(v);
    return d;
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
        d0[i] = digest(sh[i]);

    st_set_deadline(o.seconds / 2);
    st_run(&o, o.threads, worker, &s);
    replay(&s, o.threads);

    tn_set_race_report_stream(NULL);
    tn_race_reports_reset();
    tn_set_detect_races(true);
    st_set_deadline(o.seconds / 2);
    st_run(&o, o.threads, worker, &s);
    tn_set_detect_races(false);
    tn_set_race_report_stream(stderr);
    if (tn_race_reports() != 0) {
        char buf[4096];
        tn_race_last_report(buf, sizeof buf);
        st_fail(NULL, "%llu race reports on a race-free workload; the last:\n%s",
                (unsigned long long)tn_race_reports(), buf);
    }
    replay(&s, o.threads);

    for (int i = 0; i < 4; i++) {
        tn_tensor *g = tn_grad(sh[i]);
        if (tn_version(sh[i]) != 0 || digest(sh[i]) != d0[i] || g)
            st_fail(NULL, "shared tensor %d was modified (version %lld%s)", i,
                    (long long)tn_version(sh[i]), g ? ", has a .grad" : "");
        tn_release(g);
        tn_release(sh[i]);
    }
    st_check_no_leak(&base, 16u << 20);
    return st_finish("stress_mixed", &o);
}
