/* tests/test_gemm_bf16.c — the bfloat16 product on AVX512-BF16 (engine/cpu/gemm_bf16.h).
 *
 * The portable twin runs the kernel's driver (packing, blocking, edges, batches, threads) on
 * plain-C lanes with vdpbf16ps's semantics; it is checked here on any CPU against a float64
 * reference: shapes from 1 to past the register tile and the cache blocks, odd k, transposed and
 * strided operands, accumulation into C, batches with broadcast strides and empty sizes; with
 * small integers (every sum exact: the result is the reference rounded once, to the bit) and
 * with random values (within one bfloat16 rounding plus float32's summation error). Then the
 * lane rule itself (the odd element first, subnormal inputs as zero), the same bits for 1, 2
 * and 5 threads, the bits of sums made over the whole of k where k spans several K blocks, and
 * the CPU backend's choice. Where the CPU has AVX512-BF16 the same checks run on the real
 * kernel, which is also compared with the twin; elsewhere they are skipped.
 */
#include "util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/backend.h"
#include "engine/core/base.h"
#include "engine/core/half.h"
#include "engine/cpu/gemm_bf16.h"
#include "engine/cpu/isa.h"

static double uniform(void) { return 2.0 * tn__rand_uniform() - 1.0; } /* [-1, 1) */

static float bf(tn_bf16 h) { return tn_bf16_to_f32(h); }

/* n values: integers in [-4, 4], or uniform in [-1, 1) rounded to bfloat16 */
static tn_bf16 *values(int64_t n, bool ints) {
    tn_bf16 *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = tn_f32_to_bf16(ints ? (float)floor(uniform() * 4.5 + 0.5) : (float)uniform());
    return v;
}

/* One product (or a 2 x 3 batch: A broadcast over the second batch dim, B over the first). */
typedef struct shape {
    int64_t m, n, k;
    bool ta, tb;  /* A stored (k, m), B stored (n, k) */
    int64_t step; /* element strides times this: sliced operands */
    bool acc, ints, batched;
} shape;

typedef struct product {
    tn_gemm g;
    tn_gemm_batch bt;
    tn_bf16 *a, *b, *c, *c0;
    int64_t na, nb, nc, nbatch;
} product;

static product make(const shape *s) {
    product p = {.nbatch = s->batched ? 6 : 1};
    const int64_t m = s->m, n = s->n, k = s->k, st = s->step;
    const int64_t sa = m * k * st, sb = k * n * st, sc = m * n;
    p.na = s->batched ? 2 * sa : sa;
    p.nb = s->batched ? 3 * sb : sb;
    p.nc = p.nbatch * sc;
    p.a = values(p.na, s->ints), p.b = values(p.nb, s->ints), p.c = values(p.nc, s->ints);
    p.c0 = malloc((size_t)(p.nc ? p.nc : 1) * sizeof *p.c0);
    memcpy(p.c0, p.c, (size_t)p.nc * sizeof *p.c);
    p.g = (tn_gemm){.m = m,
                    .n = n,
                    .k = k,
                    .a = p.a,
                    .b = p.b,
                    .c = p.c,
                    .rsc = n,
                    .rsa = s->ta ? st : k * st,
                    .csa = s->ta ? m * st : st,
                    .rsb = s->tb ? st : n * st,
                    .csb = s->tb ? k * st : st,
                    .accumulate = s->acc};
    p.bt = (tn_gemm_batch){
        .ndim = 2, .shape = {2, 3}, .bsa = {sa, 0}, .bsb = {0, sb}, .bsc = {3 * sc, sc}};
    return p;
}

static void drop(product *p) { free(p->a), free(p->b), free(p->c), free(p->c0); }

static tn_status run(tn_gemm_bf16_fn fn, product *p, bool batched) {
    memcpy(p->c, p->c0, (size_t)p->nc * sizeof *p->c);
    return fn(&p->g, batched ? &p->bt : NULL);
}

/* Checks p's C against the float64 reference; returns the number of wrong elements. */
static int64_t check(const shape *s, const product *p) {
    const tn_gemm *g = &p->g;
    int64_t bad = 0;
    for (int64_t bi = 0; bi < p->nbatch; bi++) {
        const int64_t i0 = bi / 3, i1 = bi % 3;
        const tn_bf16 *a = p->a + i0 * p->bt.bsa[0] * s->batched;
        const tn_bf16 *b = p->b + i1 * p->bt.bsb[1] * s->batched;
        const int64_t oc = bi * s->m * s->n;
        for (int64_t i = 0; i < s->m; i++)
            for (int64_t j = 0; j < s->n; j++) {
                double r = 0, mag = 0;
                for (int64_t q = 0; q < s->k; q++) {
                    double t =
                        (double)bf(a[i * g->rsa + q * g->csa]) * bf(b[q * g->rsb + j * g->csb]);
                    r += t, mag += fabs(t);
                }
                const int64_t at = oc + i * g->rsc + j;
                if (s->acc) r += bf(p->c0[at]), mag += fabs(bf(p->c0[at]));
                const float got = bf(p->c[at]);
                bool ok;
                if (s->ints)
                    ok = p->c[at].bits == tn_f32_to_bf16((float)r).bits;
                else
                    ok = fabs(got - r) <=
                         0x1p-8 * fabs(r) + 2.0 * (double)(s->k + 1) * 0x1p-24 * mag;
                if (!ok && bad++ == 0)
                    print_error(
                        "m %lld n %lld k %lld ta %d tb %d step %lld acc %d ints %d batch %d: "
                        "[%lld] (%lld, %lld) = %.9g, want %.9g\n",
                        (long long)s->m, (long long)s->n, (long long)s->k, s->ta, s->tb,
                        (long long)s->step, s->acc, s->ints, s->batched, (long long)bi,
                        (long long)i, (long long)j, got, r);
            }
    }
    return bad;
}

/* Shapes around the register tile (12 x 32), the row block (96), the column block (2048 up to
 * k = 1024; 992 at k = 2049, so n = 1000 spans two; its floor of 256 past k = 8192, so n = 300
 * at k = 8300 spans two; under the floor past 16 MiB, 96 at k = 70001) and the K block (1024 pairs,
 * k = 2048: k = 2048, 2049 = 1 block + 1 pair, 4095, 4097 = 2 blocks + 1, 6143 = 3 blocks - 1). */
static const int64_t shapes[][3] = {
    {1, 1, 1},       {1, 1, 2},      {1, 5, 3},       {3, 1, 7},      {12, 32, 2},
    {13, 33, 3},     {11, 31, 64},   {24, 64, 129},   {25, 65, 10},   {97, 40, 33},
    {200, 70, 17},   {7, 2100, 5},   {50, 100, 3001}, {37, 130, 257}, {1, 300, 40},
    {300, 1, 40},    {25, 33, 256},  {40, 96, 511},   {110, 40, 600}, {25, 33, 2048},
    {5, 1000, 2049}, {40, 24, 4095}, {30, 20, 4097},  {13, 40, 6143}, {3, 300, 8300},
    {2, 100, 70001},
};
#define NSHAPES (int)(sizeof shapes / sizeof *shapes)

static void all_shapes(tn_gemm_bf16_fn fn) {
    int cases = 0;
    for (int si = 0; si < NSHAPES; si++)
        for (int v = 0; v < 8; v++) {
            /* the layouts in turn; every variant once on the small shapes */
            if (si >= 9 && v % 3 != si % 3) continue;
            shape s = {shapes[si][0],
                       shapes[si][1],
                       shapes[si][2],
                       .ta = v & 1,
                       .tb = v >> 1 & 1,
                       .step = v == 5 ? 2 : 1,
                       .acc = v >> 2 & 1,
                       .ints = v % 2 == si % 2,
                       .batched = v == 6 && shapes[si][2] < 1000};
            product p = make(&s);
            assert_int_equal(run(fn, &p, s.batched), TN_OK);
            assert_int_equal(check(&s, &p), 0);
            drop(&p);
            cases++;
        }
    print_message("%d products checked\n", cases);
}

static void test_twin_shapes(void **state) {
    (void)state;
    all_shapes(tn__gemm_bf16_twin);
}

/* The sums the kernel makes, one element at a time over the whole of k, with the twin's lane
 * rule (gemm_bf16_twin.c): pairs in order, each pair's odd element first, subnormal inputs as
 * zero and subnormal sums flushed; then C added when accumulating and one rounding. */
static float daz(tn_bf16 h) {
    return (h.bits & 0x7f80u) ? bf(h) : bf((tn_bf16){(uint16_t)(h.bits & 0x8000u)});
}

static float ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

static tn_bf16 lane_sum(const product *p, int64_t i, int64_t j) {
    const tn_gemm *g = &p->g;
    float t = 0;
    for (int64_t q = 0; q < g->k; q += 2) {
        const tn_bf16 zero = {0};
        const tn_bf16 a1 = q + 1 < g->k ? p->a[i * g->rsa + (q + 1) * g->csa] : zero;
        const tn_bf16 b1 = q + 1 < g->k ? p->b[(q + 1) * g->rsb + j * g->csb] : zero;
        t = ftz(t + daz(a1) * daz(b1));
        t = ftz(t + daz(p->a[i * g->rsa + q * g->csa]) * daz(p->b[q * g->rsb + j * g->csb]));
    }
    if (g->accumulate) t += bf(p->c0[i * g->rsc + j]);
    return tn_f32_to_bf16(t);
}

/* p's values made such that the order of the sums shows in the bits: even k indices below
 * 2h (h = k / 4 * 2) hold large values, A(i, q) = s 2^e and B(q, j) an integer, cancelled
 * exactly by A(i, q + h) = -A(i, q) and B(q + h, j) = B(q, j); the other indices stay small. The
 * running sum is large, so each small product added to it rounds, and the result, which is
 * small, keeps those roundings: another order (even element first, another pairing or blocks
 * summed apart) changes many outputs' bits. */
static void order_sensitive(product *p) {
    const tn_gemm *g = &p->g;
    tn_bf16 *a = p->a, *b = p->b;
    const int64_t h = g->k / 4 * 2;
    for (int64_t q = 0; q < h; q += 2) {
        for (int64_t i = 0; i < g->m; i++) {
            const double big = ldexp(uniform() < 0 ? -1 : 1, 8 + (int)(6 * tn__rand_uniform()));
            a[i * g->rsa + q * g->csa] = tn_f32_to_bf16((float)big);
            a[i * g->rsa + (q + h) * g->csa] = tn_f32_to_bf16((float)-big);
        }
        for (int64_t j = 0; j < g->n; j++)
            b[(q + h) * g->rsb + j * g->csb] = b[q * g->rsb + j * g->csb] =
                tn_f32_to_bf16((float)floor(uniform() * 4.5 + 0.5));
    }
}

/* Products whose k spans several K blocks give the bits of the sums made over the whole of k
 * (the K blocks carry the sums in float32, so the order is the same), on values whose bits
 * show the order (order_sensitive). */
static void blocked_bits(tn_gemm_bf16_fn fn) {
    const shape cases[] = {
        {30, 70, 2049, .ta = true, .step = 1, .acc = true},
        {13, 40, 6143, .tb = true, .step = 1},
        {25, 65, 4097, .step = 2, .acc = true},
        {50, 100, 3001, .step = 1},
        {12, 32, 2048, .step = 1},
    };
    for (int ci = 0; ci < 5; ci++) {
        product p = make(&cases[ci]);
        order_sensitive(&p);
        assert_int_equal(run(fn, &p, false), TN_OK);
        int64_t differ = 0;
        for (int64_t i = 0; i < p.g.m; i++)
            for (int64_t j = 0; j < p.g.n; j++)
                differ += p.c[i * p.g.rsc + j].bits != lane_sum(&p, i, j).bits;
        assert_int_equal(differ, 0);
        drop(&p);
    }
}

static void test_twin_blocked_bits(void **state) {
    (void)state;
    blocked_bits(tn__gemm_bf16_twin);
}

/* Empty sizes: nothing written for m = 0, n = 0 or an empty batch; k = 0: C = 0, or unchanged
 * when accumulating. */
static void empty_sizes(tn_gemm_bf16_fn fn) {
    for (int acc = 0; acc < 2; acc++) {
        shape s = {3, 4, 0, .step = 1, .acc = acc, .ints = true};
        product p = make(&s);
        assert_int_equal(run(fn, &p, false), TN_OK);
        for (int64_t i = 0; i < p.nc; i++)
            assert_int_equal(p.c[i].bits, acc ? p.c0[i].bits : 0);
        drop(&p);
    }
    shape s = {3, 4, 5, .step = 1, .ints = true, .batched = true};
    product p = make(&s);
    p.g.m = 0;
    assert_int_equal(run(fn, &p, false), TN_OK);
    p.g.m = 3, p.g.n = 0;
    assert_int_equal(run(fn, &p, true), TN_OK);
    p.g.n = 4, p.bt.shape[1] = 0;
    assert_int_equal(run(fn, &p, true), TN_OK);
    assert_memory_equal(p.c, p.c0, (size_t)p.nc * sizeof *p.c);
    drop(&p);
}

static void test_twin_empty(void **state) {
    (void)state;
    empty_sizes(tn__gemm_bf16_twin);
}

/* C (1 x 1) of A (1 x k) and B (k x 1) given as float products a[q] * 1. */
static float dot(tn_gemm_bf16_fn fn, int k, const float *a) {
    tn_bf16 av[8], bv[8], c = {0};
    for (int q = 0; q < k; q++)
        av[q] = tn_f32_to_bf16(a[q]), bv[q] = tn_f32_to_bf16(1.0f);
    tn_gemm g = {.m = 1,
                 .n = 1,
                 .k = k,
                 .a = av,
                 .rsa = k,
                 .csa = 1,
                 .b = bv,
                 .rsb = 1,
                 .csb = 1,
                 .c = &c,
                 .rsc = 1};
    assert_int_equal(fn(&g, NULL), TN_OK);
    return bf(c);
}

/* vdpbf16ps' order: pair (k0, k1) then (k2, k3), each pair's odd element first. Products 0, 1,
 * -2^24, 2^24: 1 + 2^24 rounds to 2^24 (ties to even), then - 2^24 gives 0; the even element
 * first would give 1, as the exact sum. A subnormal bfloat16 input counts as zero. */
static void lane_rule(tn_gemm_bf16_fn fn, bool strict) {
    const float order[4] = {0, 1, -0x1p24f, 0x1p24f};
    const float sub[2] = {0x1p-130f, 0}; /* a bfloat16 subnormal times 1 */
    float got_order = dot(fn, 4, order), got_sub = dot(fn, 2, sub);
    print_message("odd element first: %s; subnormal input as zero: %s\n",
                  got_order == 0 ? "yes" : "no", got_sub == 0 ? "yes" : "no");
    if (strict) {
        assert_true(got_order == 0.0f);
        assert_true(got_sub == 0.0f);
    }
}

static void test_twin_lane_rule(void **state) {
    (void)state;
    lane_rule(tn__gemm_bf16_twin, true);
}

/* The same bits for 1, 2 and 5 threads: split by rows, by columns (short and wide) and by
 * batches. */
static void same_bits_any_threads(tn_gemm_bf16_fn fn) {
    const shape cases[] = {
        {150, 300, 257, .step = 1},
        {24, 2000, 250, .tb = true, .step = 1, .acc = true},
        {20, 70, 1001, .ta = true, .step = 1, .batched = true},
        {14, 1000, 2100, .tb = true, .step = 1}, /* 2 K blocks, 2 column blocks */
    };
    const int saved = tn_get_num_threads();
    for (int ci = 0; ci < 4; ci++) {
        product p = make(&cases[ci]);
        tn_bf16 *first = malloc((size_t)p.nc * sizeof *first);
        const int threads[] = {1, 2, 5};
        for (int ti = 0; ti < 3; ti++) {
            tn_set_num_threads(threads[ti]);
            assert_int_equal(run(fn, &p, cases[ci].batched), TN_OK);
            if (ti == 0)
                memcpy(first, p.c, (size_t)p.nc * sizeof *first);
            else
                assert_memory_equal(first, p.c, (size_t)p.nc * sizeof *first);
        }
        assert_int_equal(check(&cases[ci], &p), 0);
        free(first);
        drop(&p);
    }
    tn_set_num_threads(saved);
}

static void test_twin_threads(void **state) {
    (void)state;
    same_bits_any_threads(tn__gemm_bf16_twin);
}

/* ---- the real kernel, where the CPU has AVX512-BF16 ---- */

static tn_gemm_bf16_fn native_or_skip(void) {
    tn_gemm_bf16_fn fn = tn__gemm_bf16_native();
    if (!fn) {
        print_message("no AVX512-BF16 on this CPU (or not built): skipped\n");
        skip();
    }
    return fn;
}

static void test_native_shapes(void **state) {
    (void)state;
    all_shapes(native_or_skip());
}

static void test_native_empty(void **state) {
    (void)state;
    empty_sizes(native_or_skip());
}

static void test_native_threads(void **state) {
    (void)state;
    same_bits_any_threads(native_or_skip());
}

static void test_native_blocked_bits(void **state) {
    (void)state;
    blocked_bits(native_or_skip());
}

/* The instruction against its twin: the lane rule (reported; the SDM's is asserted on the
 * twin), and random products, which must agree within the reference's bound; how many bits
 * differ is reported. */
static void test_native_vs_twin(void **state) {
    (void)state;
    tn_gemm_bf16_fn fn = native_or_skip();
    lane_rule(fn, false);
    int64_t differ = 0, total = 0;
    for (int si = 0; si < NSHAPES; si++) {
        shape s = {shapes[si][0], shapes[si][1], shapes[si][2],
                   .ta = si & 1,  .step = 1,     .acc = si & 2};
        product p = make(&s);
        assert_int_equal(run(fn, &p, false), TN_OK);
        tn_bf16 *mine = malloc((size_t)p.nc * sizeof *mine);
        memcpy(mine, p.c, (size_t)p.nc * sizeof *mine);
        assert_int_equal(run(tn__gemm_bf16_twin, &p, false), TN_OK);
        for (int64_t i = 0; i < p.nc; i++)
            differ += mine[i].bits != p.c[i].bits;
        total += p.nc;
        free(mine);
        drop(&p);
    }
    print_message("AVX512-BF16 and its twin: %lld of %lld outputs differ in their bits\n",
                  (long long)differ, (long long)total);
}

/* The CPU backend takes half products itself (those of a few rows at every level:
 * tests/test_gemm_half.c; the other bfloat16 ones when its choice names a kernel), and matmul
 * gives the reference's values either way. */
static void test_backend_choice(void **state) {
    (void)state;
    const char *name = tn__cpu_gemm_bf16_name();
    print_message("CPU level %s, bfloat16 products: %s\n", tn_cpu_capability(), name);
    assert_true(tn__backends[TN_CPU]->gemm_halves & (1u << TN_BF16));
    assert_true(tn__backends[TN_CPU]->gemm_halves & (1u << TN_F16));
    if (!strcmp(name, "avx512bf16")) assert_string_equal(tn_cpu_capability(), "avx512");
    /* integers: exact sums, the same values on every path */
    float fa[40 * 70], fb[70 * 50];
    tn_bf16 ha[40 * 70], hb[70 * 50];
    for (int i = 0; i < 40 * 70; i++)
        ha[i] = tn_f32_to_bf16(fa[i] = (float)(i % 9 - 4));
    for (int i = 0; i < 70 * 50; i++)
        hb[i] = tn_f32_to_bf16(fb[i] = (float)(i % 7 - 3));
    tn_tensor *a = tn_tensor_from(fa, TN_F32, 2, (int64_t[]){40, 70}, false);
    tn_tensor *b = tn_tensor_from(fb, TN_F32, 2, (int64_t[]){70, 50}, false);
    tn_tensor *a16 = tn_tensor_from(ha, TN_BF16, 2, (int64_t[]){40, 70}, false);
    tn_tensor *b16 = tn_tensor_from(hb, TN_BF16, 2, (int64_t[]){70, 50}, false);
    tn_tensor *want = tn_matmul(a, b), *got = tn_matmul(a16, b16);
    assert_non_null(got);
    assert_int_equal(tn_dtype_of(got), TN_BF16);
    tt_assert_close_tensors(got, want, 0x1p-8);
    tn_tensor *all[] = {a, b, a16, b16, want, got};
    for (int i = 0; i < 6; i++)
        tn_release(all[i]);
}

int main(void) {
    tn_manual_seed(7);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twin_shapes),         cmocka_unit_test(test_twin_empty),
        cmocka_unit_test(test_twin_lane_rule),      cmocka_unit_test(test_twin_threads),
        cmocka_unit_test(test_twin_blocked_bits),   cmocka_unit_test(test_native_shapes),
        cmocka_unit_test(test_native_empty),        cmocka_unit_test(test_native_threads),
        cmocka_unit_test(test_native_blocked_bits), cmocka_unit_test(test_native_vs_twin),
        cmocka_unit_test(test_backend_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
