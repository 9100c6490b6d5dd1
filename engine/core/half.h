/* engine/core/half.h — the two 16-bit float storage types, bfloat16 and
 * float16 (IEEE binary16), and their conversions to and from float32:
 * plain C11 and CUDA C++, host and device, so the CPU kernels, core and the
 * CUDA kernels (and the host emulator) round identically.
 *
 * The types are structs holding the bits, so arithmetic on a stored value is
 * a compile error: a kernel body loads an element into its compute type
 * (float) with TN_LD, computes in float32 and rounds once per result with
 * TN_ST (engine/cpu/dtype_dispatch.h), as PyTorch's CPU kernels do.
 *
 * Conversions, as PyTorch 1.13 (checked against it, tests/test_half.c):
 *  - float32 -> half rounds to nearest, ties to even; float16 overflows to
 *    ±inf (65520.0 and above), bfloat16 rounds past its largest finite value
 *    to ±inf as well; subnormals are kept (float16: 2^-24 is the smallest,
 *    values above half of it round up to it); -0.0 stays -0.0;
 *  - NaN stays a quiet NaN with its sign (float16 0x7e00 | sign, bfloat16
 *    the high half with the quiet bit set);
 *  - float64 converts through float32, as PyTorch's Half(float) and
 *    BFloat16(float) constructors do;
 *  - widening (half -> float32 or float64) is exact.
 */
#ifndef TN_CORE_HALF_H
#define TN_CORE_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TN_HALF_FN static __host__ __device__ __forceinline__
#else
#define TN_HALF_FN static inline
#endif

typedef struct tn_bf16 {
    uint16_t bits;
} tn_bf16;
typedef struct tn_f16 {
    uint16_t bits;
} tn_f16;

TN_HALF_FN uint32_t tn__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
TN_HALF_FN float tn__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

TN_HALF_FN float tn_bf16_to_f32(tn_bf16 h) { return tn__bits_f32((uint32_t)h.bits << 16); }

TN_HALF_FN tn_bf16 tn_f32_to_bf16(float f) {
    uint32_t u = tn__f32_bits(f);
    tn_bf16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: keep sign and payload's top, quiet */
        h.bits = (uint16_t)((u >> 16) | 0x0040u);
        return h;
    }
    /* Round to nearest even on the low 16 bits; a carry into the exponent
     * is the right result (up to inf at the top of the range). */
    u += 0x7fffu + ((u >> 16) & 1u);
    h.bits = (uint16_t)(u >> 16);
    return h;
}

TN_HALF_FN float tn_f16_to_f32(tn_f16 h) {
    uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16;
    uint32_t exp = (h.bits >> 10) & 0x1fu, man = h.bits & 0x3ffu;
    if (exp == 0x1f) /* inf; a NaN quieted, as F16C's vcvtph2ps and PyTorch's conversion */
        return tn__bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
    if (exp != 0) return tn__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in float32 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
}

TN_HALF_FN tn_f16 tn_f32_to_f16(float f) {
    uint32_t u = tn__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    tn_f16 h;
    if (a > 0x7f800000u) { /* NaN */
        h.bits = (uint16_t)(sign | 0x7e00u);
    } else if (a >= 0x477ff000u) { /* >= 65520: rounds to inf (and inf itself) */
        h.bits = (uint16_t)(sign | 0x7c00u);
    } else if (a >= 0x38800000u) { /* >= 2^-14: normal */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round to nearest even at bit 13 */
        h.bits = (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    } else if (a > 0x33000000u) { /* above 2^-25: subnormal (or rounds up to 2^-14) */
        uint32_t e = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24: value = man * 2^(e-150), unit 2^-24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        q += rem > half || (rem == half && (q & 1u));
        h.bits = (uint16_t)(sign | q);
    } else { /* 2^-25 (a tie to the even zero) and below */
        h.bits = sign;
    }
    return h;
}

#endif
