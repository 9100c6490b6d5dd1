/* engine/cpu/half_rows.h — bfloat16 and float16 elements read as float32 and written back, for
 * the CPU kernels that take half operands in place (the few-row products of gemm.c, the
 * few-query attention of attention_kernels.c): a row widened (exact), an element widened, a float
 * rounded once (half.h's round to nearest even). */
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

#endif
