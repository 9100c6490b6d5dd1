/* engine/cpu/vec.h — vectors of the register set a kernel file is compiled for (TN_VEC_BYTES,
 * gemm.h), for register tiles that the compiler must keep in registers.
 *
 * A tile of plain scalar accumulators (T t[MR][BK]) ends on the stack: GCC turns its zeroing
 * into a memset and its copy-out into a memcpy, and then cannot keep it in registers. An array
 * of these vector types indexed by constants stays in registers.
 *
 * TN_VFMA_SUF(a, b, c) is c + a*b per lane with the rounding of FMADD (gemm.h): fused where
 * FMADD is, unfused (strict C11 does not contract) where it is not, so a vector tile's bits are
 * those of the scalar loop it replaces. TN_VSPLAT_SUF broadcasts a scalar; tn_vld_SUF and
 * tn_vout_SUF load and store (or add into) a vector at any alignment.
 */
#ifndef TN_CPU_VEC_H
#define TN_CPU_VEC_H

#include <stdbool.h>
#include <string.h>

#include "gemm.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

typedef float tn_vec_f32 __attribute__((vector_size(TN_VEC_BYTES)));
typedef double tn_vec_f64 __attribute__((vector_size(TN_VEC_BYTES)));

#if defined(__FMA__) && TN_VEC_BYTES == 64
#define TN_VFMA_f32(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define TN_VFMA_f64(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#elif defined(__FMA__) && TN_VEC_BYTES == 32
#define TN_VFMA_f32(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define TN_VFMA_f64(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#else
#define TN_VFMA_f32(a, b, c) ((c) + (a) * (b))
#define TN_VFMA_f64(a, b, c) ((c) + (a) * (b))
#endif

/* x in every lane: one broadcast (GCC builds a lane-by-lane loop from inserts) */
#if TN_VEC_BYTES == 64
#define TN_VSPLAT_f32(x) _mm512_set1_ps(x)
#define TN_VSPLAT_f64(x) _mm512_set1_pd(x)
#elif TN_VEC_BYTES == 32
#define TN_VSPLAT_f32(x) _mm256_set1_ps(x)
#define TN_VSPLAT_f64(x) _mm256_set1_pd(x)
#elif defined(__SSE2__)
#define TN_VSPLAT_f32(x) _mm_set1_ps(x)
#define TN_VSPLAT_f64(x) _mm_set1_pd(x)
#else
#define TN_VSPLAT_f32(x) ((x) - (tn_vec_f32){0}) /* x - 0 is x, -0 and NaN too */
#define TN_VSPLAT_f64(x) ((x) - (tn_vec_f64){0})
#endif

/* A vector of the elements at p (any alignment), and its store at c: c = t, or c + t when add. */
#define TN_VEC_MEM(SUF, T)                                                                         \
    static inline __attribute__((always_inline)) tn_vec_##SUF tn_vld_##SUF(const T *p) {           \
        tn_vec_##SUF v;                                                                            \
        memcpy(&v, p, sizeof v);                                                                   \
        return v;                                                                                  \
    }                                                                                              \
    static inline                                                                                  \
        __attribute__((always_inline)) void tn_vout_##SUF(T *c, tn_vec_##SUF t, bool add) {        \
        if (add) t = tn_vld_##SUF(c) + t;                                                          \
        memcpy(c, &t, sizeof t);                                                                   \
    }
TN_VEC_MEM(f32, float)
TN_VEC_MEM(f64, double)
#undef TN_VEC_MEM

#endif
