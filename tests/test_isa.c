/* The CPU kernel sets (engine/cpu/isa.h): TENET_ISA forces each level the
 * build made, the process runs the level asked for (or the CPU's best when
 * that is lower), and the kernels give the same values at every level
 * within rounding.
 *
 * The level is chosen once per process, so the test runs itself once per
 * level (`test_isa --child`, TENET_ISA set) and compares what each child
 * printed with the baseline child's values. A child runs the kernel
 * families with vectorised loops on fixed inputs: products (tenet's own
 * kernel, CBLAS off), pointwise ops, sums, softmax, cross-entropy, layer
 * norm, attention, their backward, and an Adam step.
 *
 * TEST_ISA_LEVELS (tests/CMakeLists.txt): the levels the build made, lowest
 * first ("native" alone in a TENET_NATIVE build).
 */
#define _POSIX_C_SOURCE 200809L /* popen, readlink */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_VALUES (1 << 17)

/* ---- the child: every kernel family on fixed inputs, values to stdout ---- */

static uint64_t g_rng = 0x9e3779b97f4a7c15u;

static double uniform(void) { /* [-1, 1), splitmix64 */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-52 - 1.0;
}

static tn_tensor *filled(tn_dtype dt, int ndim, const int64_t *shape, bool requires_grad) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    double *v = malloc((size_t)n * sizeof *v);
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)(v[i] = uniform());
    tn_tensor *t =
        tn_tensor_from(dt == TN_F64 ? (void *)v : (void *)f, dt, ndim, shape, requires_grad);
    free(v), free(f);
    return t;
}

static bool g_quiet; /* --quiet: compute, print nothing (the valgrind run) */

static void emit(tn_tensor *t) { /* prints t's values and releases it */
    int64_t n = tn_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    if (tn_copy_to_f64(t, v, n) < 0) {
        printf("error %s\n", tn_last_error());
        exit(1);
    }
    for (int64_t i = 0; !g_quiet && i < n; i++)
        printf("%a\n", v[i]);
    free(v);
    tn_release(t);
}

static void emit_grad(tn_tensor *t) { emit(tn_grad(t)); }

static void products(tn_dtype dt) {
    /* above gemm.c's 32768 multiply-adds: the packed, register-tiled kernel;
     * then a thin one (n = 1) on the plain loop */
    tn_tensor *a = filled(dt, 2, (int64_t[]){67, 300}, false);
    tn_tensor *b = filled(dt, 2, (int64_t[]){300, 129}, false);
    tn_tensor *v = filled(dt, 2, (int64_t[]){300, 1}, false);
    emit(tn_matmul(a, b));
    emit(tn_matmul(a, v));
    tn_release(a), tn_release(b), tn_release(v);
}

static void pointwise_norms(void) {
    int64_t shape[2] = {64, 257};
    tn_tensor *x = filled(TN_F32, 2, shape, true);
    tn_tensor *w = filled(TN_F32, 1, &shape[1], true);
    tn_tensor *g = tn_gelu(x, true), *s = tn_sigmoid(x), *e = tn_exp(x);
    tn_tensor *gs = tn_mul(g, s), *y = tn_add(gs, e);
    tn_tensor *sm = tn_softmax(y, 1);
    tn_tensor *ln = tn_layer_norm(y, 1, &shape[1], w, NULL, 1e-5);
    int64_t tv[64];
    for (int i = 0; i < 64; i++)
        tv[i] = (i * 37) % 257;
    tn_tensor *targets = tn_tensor_from(tv, TN_I64, 1, shape, false);
    tn_tensor *ce = tn_cross_entropy(ln, targets);
    tn_tensor *smln = tn_mul(sm, ln), *ssum = tn_sum(smln);
    tn_tensor *loss = tn_add(ce, ssum);
    if (tn_backward(loss, NULL, false) < 0) exit(1);
    emit(tn_sum(y)), emit(sm), emit(ln), emit(loss);
    emit_grad(x), emit_grad(w);
    tn_release(ce), tn_release(smln), tn_release(ssum), tn_release(targets), tn_release(gs);
    tn_release(g), tn_release(s), tn_release(e), tn_release(y), tn_release(x), tn_release(w);
}

static void attention(void) {
    int64_t shape[4] = {2, 2, 40, 16};
    tn_tensor *q = filled(TN_F32, 4, shape, true), *k = filled(TN_F32, 4, shape, true);
    tn_tensor *v = filled(TN_F32, 4, shape, true), *w = filled(TN_F32, 4, shape, false);
    tn_tensor *o = tn_scaled_dot_product_attention(q, k, v, NULL, 0.0, true);
    tn_tensor *ow = tn_mul(o, w), *l = tn_sum(ow);
    if (tn_backward(l, NULL, false) < 0) exit(1);
    emit(o), emit(l), tn_release(ow);
    emit_grad(q), emit_grad(k), emit_grad(v);
    tn_release(q), tn_release(k), tn_release(v), tn_release(w);
}

static void adam(void) {
    int64_t n = 1000;
    tn_tensor *p = filled(TN_F32, 1, &n, true);
    tn_tensor *pp = tn_mul(p, p), *l = tn_sum(pp);
    if (tn_backward(l, NULL, false) < 0) exit(1);
    tn_release(pp);
    tn_adam *opt = tn_adam_new(1, &p, 1e-2, 0.9, 0.999, 1e-8, 0.01);
    if (!opt || tn_adam_step(opt) < 0) exit(1);
    tn_adam_free(opt);
    tn_release(l);
    emit(p);
}

static int child(void) {
    tn_set_blas(false); /* tenet's own product kernel, not OpenBLAS's */
    printf("isa %s\n", tn_cpu_capability());
    products(TN_F32);
    products(TN_F64);
    pointwise_norms();
    attention();
    adam();
    return 0;
}

/* ---- the parent: one child per level ------------------------------------- */

typedef struct run {
    char isa[32];
    int64_t n;
    double *v;
} run;

static void run_child(const char *level, run *r) {
    char exe[4096], cmd[4200];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(len > 0);
    exe[len] = '\0';
    snprintf(cmd, sizeof cmd, "TENET_ISA=%s '%s' --child", level, exe);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    r->v = malloc(MAX_VALUES * sizeof *r->v);
    r->n = 0;
    char line[128];
    assert_non_null(fgets(line, sizeof line, f));
    assert_int_equal(sscanf(line, "isa %31s", r->isa), 1);
    while (fgets(line, sizeof line, f) && r->n < MAX_VALUES)
        r->v[r->n++] = strtod(line, NULL);
    assert_int_equal(pclose(f), 0);
}

/* The level a request gives: itself, or the CPU's best when lower. */
static int cpu_best(int nlevels, const char *const *levels) {
    int best = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    for (int i = 1; i < nlevels; i++) {
        bool ok = false;
#if defined(__clang__)
        bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        if (!strcmp(levels[i], "avx2")) ok = v3;
        if (!strcmp(levels[i], "avx512"))
            ok = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
        if (!strcmp(levels[i], "avx2")) ok = __builtin_cpu_supports("x86-64-v3");
        if (!strcmp(levels[i], "avx512")) ok = __builtin_cpu_supports("x86-64-v4");
#endif
        if (ok) best = i;
    }
#endif
    return best;
}

static void every_level_agrees(void **state) {
    (void)state;
    char list[] = TEST_ISA_LEVELS;
    const char *levels[8];
    int n = 0;
    for (char *tok = strtok(list, ","); tok && n < 8; tok = strtok(NULL, ","))
        levels[n++] = tok;
    bool native = n == 1 && !strcmp(levels[0], "native");
    int best = native ? 0 : cpu_best(n, levels);
    /* every level the build made, and avx512 when it did not make it */
    const char *asked[9];
    int na = 0;
    for (int i = 0; i < n; i++)
        asked[na++] = levels[i];
    if (!native && strcmp(levels[n - 1], "avx512")) asked[na++] = "avx512";
    run base = {{0}, 0, NULL};
    for (int i = 0; i < na; i++) {
        run r;
        run_child(asked[i], &r);
        int want = native ? 0 : (i < n ? (i < best ? i : best) : best);
        printf("TENET_ISA=%s: runs %s (%lld values)\n", asked[i], r.isa, (long long)r.n);
        assert_string_equal(r.isa, levels[want]);
        if (i == 0) {
            base = r;
            assert_true(base.n > 10000);
            continue;
        }
        assert_int_equal(r.n, base.n);
        int64_t differ = 0;
        for (int64_t j = 0; j < r.n; j++) {
            double a = r.v[j], b = base.v[j];
            if (a != b) differ++;
            if (!(fabs(a - b) <= 1e-4 * (1 + fabs(b)))) {
                printf("value %lld: %s %.9g, baseline %.9g\n", (long long)j, r.isa, a, b);
                fail();
            }
        }
        printf("  %lld of %lld values differ from the baseline's in their last bits\n",
               (long long)differ, (long long)r.n);
        free(r.v);
    }
    free(base.v);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--child")) {
        g_quiet = argc > 2 && !strcmp(argv[2], "--quiet");
        return child();
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_level_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
