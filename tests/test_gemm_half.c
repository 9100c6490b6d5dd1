/* tests/test_gemm_half.c — the CPU's bfloat16 and float16 products of a few rows
 * (engine/cpu/gemm_half.c, tn__gemm_half: x·Wᵀ with the half weight read in place), through the CPU
 * back end's gemm entry as core calls it.
 *
 * Against a float64 reference, for both dtypes: 1 to 32 rows, n not a multiple of the 3-column
 * tile, k odd and past the vector width, A transposed or strided, accumulation into C, batches
 * with the weight broadcast; small integers give every sum exactly, so the result is the
 * reference rounded once, to the bit. The same bits for 1 and 2 threads. The shapes it leaves to
 * core (33 rows, B not read along k, short k) are declined with C untouched. Through tn_linear
 * and tn_matmul, a half product of a few rows agrees with the float32 product of the same
 * (widened) values, rounded once.
 */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/backend.h"
#include "engine/core/base.h"
#include "engine/core/half.h"
#include "engine/cpu/isa.h"

static double uniform(void) { return 2.0 * tn__rand_uniform() - 1.0; } /* [-1, 1) */

static float ld(tn_dtype dt, uint16_t h) {
    return dt == TN_BF16 ? tn_bf16_to_f32((tn_bf16){h}) : tn_f16_to_f32((tn_f16){h});
}

static uint16_t st(tn_dtype dt, float v) {
    return dt == TN_BF16 ? tn_f32_to_bf16(v).bits : tn_f32_to_f16(v).bits;
}

static uint16_t *values(tn_dtype dt, int64_t n, bool ints) {
    uint16_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = st(dt, ints ? (float)floor(uniform() * 4.5 + 0.5) : (float)uniform());
    return v;
}

/* x·Wᵀ: A (m, k) (stored (k, m) when ta), B read as W (n, k): rsb 1, csb k (times step);
 * batched: 2 products, the weight broadcast (bsb 0). */
typedef struct shape {
    int64_t m, n, k;
    bool ta, acc, ints, batched;
    int64_t step;
} shape;

typedef struct product {
    tn_dtype dt;
    shape s;
    tn_gemm g;
    tn_gemm_batch bt;
    uint16_t *a, *b, *c, *c0;
    int64_t nc, nbatch;
} product;

static product make(tn_dtype dt, shape s) {
    product p = {.dt = dt, .s = s, .nbatch = s.batched ? 2 : 1};
    const int64_t m = s.m, n = s.n, k = s.k, sa = m * k * s.step;
    p.nc = p.nbatch * m * n;
    p.a = values(dt, p.nbatch * sa, s.ints), p.b = values(dt, n * k * s.step, s.ints);
    p.c = values(dt, p.nc, s.ints), p.c0 = malloc((size_t)p.nc * sizeof *p.c0);
    memcpy(p.c0, p.c, (size_t)p.nc * sizeof *p.c);
    p.g = (tn_gemm){.m = m,
                    .n = n,
                    .k = k,
                    .a = p.a,
                    .b = p.b,
                    .c = p.c,
                    .rsc = n,
                    .rsa = s.ta ? s.step : k * s.step,
                    .csa = s.ta ? m * s.step : s.step,
                    .rsb = 1,
                    .csb = k * s.step,
                    .accumulate = s.acc};
    p.bt = (tn_gemm_batch){.ndim = 1, .shape = {2}, .bsa = {sa}, .bsb = {0}, .bsc = {m * n}};
    return p;
}

static void drop(product *p) { free(p->a), free(p->b), free(p->c), free(p->c0); }

static tn_status run(product *p) {
    memcpy(p->c, p->c0, (size_t)p->nc * sizeof *p->c);
    return tn__backends[TN_CPU]->gemm(0, p->dt, &p->g, p->s.batched ? &p->bt : NULL);
}

/* Wrong elements of p's C against the float64 reference. */
static int64_t check(const product *p) {
    const tn_gemm *g = &p->g;
    const shape *s = &p->s;
    int64_t bad = 0;
    for (int64_t bi = 0; bi < p->nbatch; bi++)
        for (int64_t i = 0; i < s->m; i++)
            for (int64_t j = 0; j < s->n; j++) {
                const uint16_t *a = p->a + bi * p->bt.bsa[0];
                double r = 0, mag = 0;
                for (int64_t q = 0; q < s->k; q++) {
                    double t = (double)ld(p->dt, a[i * g->rsa + q * g->csa]) *
                               ld(p->dt, p->b[q * g->rsb + j * g->csb]);
                    r += t, mag += fabs(t);
                }
                const int64_t at = bi * s->m * s->n + i * s->n + j;
                if (s->acc) r += ld(p->dt, p->c0[at]), mag += fabs(ld(p->dt, p->c0[at]));
                const float got = ld(p->dt, p->c[at]);
                const double ulp = p->dt == TN_BF16 ? 0x1p-8 : 0x1p-11;
                bool ok = s->ints
                              ? p->c[at] == st(p->dt, (float)r)
                              : fabs(got - r) <= ulp * fabs(r) + 2.0 * (s->k + 1) * 0x1p-24 * mag;
                if (!ok && bad++ == 0)
                    print_error("%s m %lld n %lld k %lld ta %d acc %d ints %d batch %d step %lld: "
                                "(%lld, %lld) = %.9g, want %.9g\n",
                                tn_dtype_name(p->dt), (long long)s->m, (long long)s->n,
                                (long long)s->k, s->ta, s->acc, s->ints, s->batched,
                                (long long)s->step, (long long)i, (long long)j, got, r);
            }
    return bad;
}

/* (m, n, k): every m * n * k past the kernel's minimum work (32768) */
static const int64_t shapes[][3] = {{1, 600, 64},  {1, 301, 129}, {2, 400, 65},
                                    {3, 100, 200}, {4, 97, 96},   {5, 50, 257},
                                    {16, 200, 77}, {17, 31, 300}, {32, 64, 100}};
#define NSHAPES (int)(sizeof shapes / sizeof *shapes)

static void test_shapes(void **state) {
    (void)state;
    int cases = 0;
    for (int d = 0; d < 2; d++)
        for (int si = 0; si < NSHAPES; si++)
            for (int v = 0; v < 6; v++) {
                shape s = {shapes[si][0],     shapes[si][1],         shapes[si][2],
                           .ta = v & 1,       .acc = v >> 1 & 1,     .ints = v % 2 == si % 2,
                           .batched = v == 4, .step = v == 5 ? 2 : 1};
                product p = make(d ? TN_F16 : TN_BF16, s);
                assert_int_equal(run(&p), TN_OK);
                assert_int_equal(check(&p), 0);
                drop(&p);
                cases++;
            }
    print_message("%d products checked\n", cases);
}

/* What the kernel leaves to core: declined, C untouched (bfloat16 with the AVX512-BF16 kernel
 * chosen goes to that kernel instead, and is right). */
static void test_declined(void **state) {
    (void)state;
    const bool kernel = tn__backends[TN_CPU]->gemm_halves & (1u << TN_BF16) &&
                        strcmp(tn__cpu_gemm_bf16_name(), "widened") != 0;
    const shape shapes2[] = {
        {33, 100, 64, .step = 1}, {8, 100, 32, .step = 1}, {1, 5, 64, .step = 1}};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 3; i++) {
            const tn_dtype dt = d ? TN_F16 : TN_BF16;
            product p = make(dt, shapes2[i]);
            tn_status r = run(&p);
            if (dt == TN_BF16 && kernel) {
                assert_int_equal(r, TN_OK);
                assert_int_equal(check(&p), 0);
            } else {
                assert_int_equal(r, TN__DECLINED);
                assert_memory_equal(p.c, p.c0, (size_t)p.nc * sizeof *p.c);
            }
            drop(&p);
        }
    /* B read across k (rsb != 1: not x·Wᵀ): declined as well */
    product p = make(TN_F16, (shape){4, 100, 100, .step = 1});
    p.g.rsb = p.s.n, p.g.csb = 1;
    assert_int_equal(run(&p), TN__DECLINED);
    assert_memory_equal(p.c, p.c0, (size_t)p.nc * sizeof *p.c);
    drop(&p);
}

/* The same bits whatever the thread count. */
static void test_threads(void **state) {
    (void)state;
    const int before = tn_get_num_threads();
    for (int d = 0; d < 2; d++) {
        product p = make(d ? TN_F16 : TN_BF16, (shape){16, 3000, 768, .step = 1});
        tn_set_num_threads(1);
        assert_int_equal(run(&p), TN_OK);
        uint16_t *one = malloc((size_t)p.nc * sizeof *one);
        memcpy(one, p.c, (size_t)p.nc * sizeof *one);
        tn_set_num_threads(2);
        assert_int_equal(run(&p), TN_OK);
        assert_memory_equal(one, p.c, (size_t)p.nc * sizeof *one);
        free(one);
        drop(&p);
    }
    tn_set_num_threads(before);
}

/* tn_linear of 4 rows over a bfloat16 / float16 weight: within one rounding of the float32
 * linear of the same values; a float16 weight against a bfloat16 input is PyTorch's error. */
static void test_linear(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    for (int d = 0; d < 2; d++) {
        const tn_dtype dt = d ? TN_F16 : TN_BF16;
        tn_tensor *x = tn_randn(2, (int64_t[]){4, 256}, TN_F32);
        tn_tensor *w = tn_randn(2, (int64_t[]){300, 256}, TN_F32);
        tn_tensor *b = tn_randn(1, (int64_t[]){300}, TN_F32);
        tn_tensor *xh = tn_to(x, dt, TN_DEVICE_KEEP), *wh = tn_to(w, dt, TN_DEVICE_KEEP),
                  *bh = tn_to(b, dt, TN_DEVICE_KEEP);
        tn_tensor *got = tn_linear(xh, wh, bh);
        assert_non_null(got);
        assert_int_equal(tn_dtype_of(got), dt);
        tn_tensor *want =
            tn_linear(tn_to(xh, TN_F32, TN_DEVICE_KEEP), tn_to(wh, TN_F32, TN_DEVICE_KEEP),
                      tn_to(bh, TN_F32, TN_DEVICE_KEEP));
        tt_assert_close_tensors(tn_to(got, TN_F32, TN_DEVICE_KEEP), want, d ? 0x1p-10 : 0x1p-7);
    }
    tn_tensor *x = tn_to(tn_randn(2, (int64_t[]){4, 256}, TN_F32), TN_BF16, TN_DEVICE_KEEP);
    tn_tensor *w = tn_to(tn_randn(2, (int64_t[]){300, 256}, TN_F32), TN_F16, TN_DEVICE_KEEP);
    assert_null(tn_linear(x, w, NULL));
    assert_int_equal(tn_last_status(), TN_ERR_DTYPE);
    tn_scope_end();
}

int main(void) {
    tn_manual_seed(11);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_declined),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
