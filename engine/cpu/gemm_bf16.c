/* The bfloat16 product on AVX512-BF16 (gemm_bf16.h): gemm_bf16_impl.h's operations as
 * intrinsics, one vdpbf16ps per 16 x 2 multiply-adds.
 *
 * This whole file is compiled for AVX-512 F, BW, VL and BF16 (cmake/isa.cmake), so the
 * compiler may use them anywhere in it: nothing here runs before isa.c has found them on the
 * CPU (tn__gemm_bf16_native). Built only where the compiler has them (TENET_HAVE_GEMM_BF16).
 */
#include "gemm_bf16.h"

#include <immintrin.h>

typedef __m512 vacc;
typedef __m512bh vpairs;

static inline vacc v_zero(void) { return _mm512_setzero_ps(); }
static inline vpairs v_load(const uint16_t *p) { return (vpairs)_mm512_loadu_si512(p); }
static inline vpairs v_bcast(const uint32_t *p) { return (vpairs)_mm512_set1_epi32((int)*p); }
static inline vacc v_dp(vacc acc, vpairs a, vpairs b) { return _mm512_dpbf16_ps(acc, a, b); }
static inline void v_store(float *p, vacc acc) { _mm512_storeu_ps(p, acc); }
static inline vacc v_loadf(const float *p) { return _mm512_loadu_ps(p); }

#define GB_ENTRY tn__gemm_bf16
#include "gemm_bf16_impl.h"
