/* engine/core/fast_exp.h — exp of a float as plain arithmetic the compiler
 * vectorises, for the CPU loops whose cost is exp (GELU's tanh form, SiLU,
 * attention's softmax): the C library's expf is a call per element, about
 * 7x slower here than this in a vectorised loop.
 *
 * Cephes' expf: n = rint(x log2 e), r = x - n ln 2 (ln 2 in two parts),
 * exp(r) a degree-6 polynomial on [-ln2/2, ln2/2] (fused multiply-adds where the target
 * has them: the bits differ between kernel sets, within the bound), times 2^n built in two
 * halves so that results down to the smallest subnormal come out right.
 * Within 1 ulp of the correctly rounded value over the whole float range, 1.01 with the fused
 * steps (checked against exp() in double at 4e6 points, subnormals included: tests/
 * test_fast_exp.c);
 * exp(NaN) = NaN, exp(+inf) = +inf and above ~88.72 overflows to +inf,
 * exp(-inf) = 0. Plain C, no intrinsics: any target vectorises it. */
#ifndef TN_CORE_FAST_EXP_H
#define TN_CORE_FAST_EXP_H

#include <stdint.h>
#include <string.h>

/* a*b + c, fused where the target has FMA (the AVX2 and AVX-512 kernel sets): fewer steps,
 * and each rounds once */
#ifdef __FMA__
#define TN_EXP_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define TN_EXP_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* exp(xc) = p 2^n for finite xc: n = rint(xc log2 e) (into *n), r = xc - n ln 2 (ln 2's high
 * part exact times |n| < 2^11, then its low part), p = exp(r) by the polynomial. */
static inline __attribute__((always_inline)) float tn__expf_core(float xc, float *n) {
    *n = __builtin_rintf(xc * 1.44269504088896341f);
    float r = TN_EXP_FMA(*n, -0.693145751953125f, xc);
    r = TN_EXP_FMA(*n, -1.428606765330187045e-6f, r);
    float p = 1.9875691500e-4f;
    p = TN_EXP_FMA(p, r, 1.3981999507e-3f);
    p = TN_EXP_FMA(p, r, 8.3334519073e-3f);
    p = TN_EXP_FMA(p, r, 4.1665795894e-2f);
    p = TN_EXP_FMA(p, r, 1.6666665459e-1f);
    p = TN_EXP_FMA(p, r, 5.0000001201e-1f);
    return TN_EXP_FMA(p, r * r, r) + 1.0f;
}

/* Always inlined: a call per element would keep its loop scalar (GCC stops inlining it into a
 * loop body that already holds a few). */
static inline __attribute__((always_inline)) float tn__expf_fast(float x) {
    const float hi = 88.72283935546875f, lo = -103.972084f; /* exp(lo) < half the least subnormal */
    float xc = x > hi ? hi : (x < lo ? lo : x);
    xc = xc != xc ? 0.0f : xc; /* NaN: computed on 0 (no NaN to int conversion), returned below */
    float n, p = tn__expf_core(xc, &n);
    int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1; /* 2^n = 2^n1 2^n2, each normal */
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = p * s1 * s2;
    y = x > hi ? __builtin_inff() : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* exp(x) for x <= 0, -inf or NaN: a softmax's exp(s - max), where the row's largest term is
 * exp(0) = 1. Shorter than tn__expf_fast: no overflow side, 2^n one factor (results below
 * 2^-126, x < -87.34, are 0: under the rounding of any sum that holds the 1) and fused
 * multiply-adds where the target has them. Within 1 ulp above 2^-126 as tn__expf_fast (1.01
 * with the fused steps). */
static inline __attribute__((always_inline)) float tn__expf_nonpos(float x) {
    const float lo = -87.33654022216796875f; /* ln 2^-126, rounded up */
    float xc = x >= lo ? x : lo;             /* NaN too: computed on lo, returned below */
    float n, p = tn__expf_core(xc, &n);
    uint32_t b = (uint32_t)((int32_t)n + 127) << 23; /* n in [-126, 0]: a normal 2^n */
    float s;
    memcpy(&s, &b, sizeof s);
    float y = x < lo ? 0.0f : p * s;
    return x != x ? x : y;
}
#undef TN_EXP_FMA

#endif
