/* engine/cpu/half_rows.h — bfloat16 and float16 elements read as float32 and written back, for
 * the CPU kernels that take half operands in place (the few-row products of gemm.c, the
 * few-query attention of attention_kernels.c, and the CPU's copies between float32 and the half
 * dtypes): a row widened (exact), a row rounded once, an element widened, a float rounded once
 * (half.h's round to nearest even). */
#ifndef TN_CPU_HALF_ROWS_H
#define TN_CPU_HALF_ROWS_H

#include "../core/base.h"
#include "../core/half.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* A bfloat16 is the top half of its float32: on raw bits, which vectorise (the struct type of
 * half.h's tn_bf16_to_f32 kept GCC's loops scalar or half width). */
static inline float tn__bf16_bits_f32(uint16_t h) { return tn__bits_f32((uint32_t)h << 16); }

static inline float tn__half_ld(tn_dtype dt, uint16_t h) {
    return dt == TN_BF16 ? tn__bf16_bits_f32(h) : tn_f16_to_f32((tn_f16){h});
}

static inline uint16_t tn__half_st(tn_dtype dt, float v) {
    return dt == TN_BF16 ? tn_f32_to_bf16(v).bits : tn_f32_to_f16(v).bits;
}

/* d[0..n) = s[0..n) widened (exact) */
static inline void tn__widen_half_row(tn_dtype dt, float *restrict d, const uint16_t *restrict s,
                                      int64_t n) {
    int64_t i = 0;
    if (dt == TN_BF16) {
#ifdef __AVX2__ /* GCC's loop below runs at the 16-bit loads' width, the floats in halves */
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_si256(
                (__m256i *)(d + i),
                _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))),
                                  16));
#endif
        for (; i < n; i++)
            d[i] = tn__bf16_bits_f32(s[i]);
        return;
    }
#ifdef __F16C__
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
#endif
    for (; i < n; i++)
        d[i] = tn_f16_to_f32((tn_f16){s[i]});
}

/* d[0..n) = s[0..n) rounded once, half.h's conversions to the bit: to nearest even, inf past
 * the range; a NaN is float16's sign | 0x7e00 (F16C's instruction keeps the payload's top bits,
 * cleared here) or bfloat16's top half quieted. */
static inline void tn__narrow_half_row(tn_dtype dt, uint16_t *restrict d, const float *restrict s,
                                       int64_t n) {
    int64_t i = 0;
    if (dt == TN_BF16) {
#ifdef __AVX2__
        const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff),
                      mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000),
                      quiet = _mm256_set1_epi32(0x40);
        for (; i + 8 <= n; i += 8) {
            const __m256i u = _mm256_loadu_si256((const __m256i *)(s + i)),
                          top = _mm256_srli_epi32(u, 16);
            const __m256i even = _mm256_add_epi32(bias, _mm256_and_si256(top, one));
            const __m256i r = _mm256_blendv_epi8(_mm256_srli_epi32(_mm256_add_epi32(u, even), 16),
                                                 _mm256_or_si256(top, quiet),
                                                 _mm256_cmpgt_epi32(_mm256_and_si256(u, mag), inf));
            /* 32 -> 16 bits within each 128-bit lane, then the lanes' low halves together */
            const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
            _mm_storeu_si128((__m128i *)(d + i), _mm256_castsi256_si128(h));
        }
#endif
        for (; i < n; i++)
            d[i] = tn_f32_to_bf16(s[i]).bits;
        return;
    }
#ifdef __F16C__
    const __m128i exp = _mm_set1_epi16(0x7c00), payload = _mm_set1_epi16(0x01ff);
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
        const __m128i special = _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp); /* inf, NaN */
        h = _mm_andnot_si128(_mm_and_si128(special, payload), h);
        _mm_storeu_si128((__m128i *)(d + i), h);
    }
#endif
    for (; i < n; i++)
        d[i] = tn_f32_to_f16(s[i]).bits;
}

#endif
