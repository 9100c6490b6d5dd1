/* The bfloat16 product's portable twin (gemm_bf16.h): gemm_bf16_impl.h's operations in plain
 * C, lane by lane, as the Intel SDM defines vdpbf16ps: for lane l,
 *     t = acc[l];  t += a[2l + 1] * b[2l + 1];  t += a[2l] * b[2l];  acc[l] = t
 * each += rounded to nearest even in float32, bfloat16 subnormal inputs read as zero and
 * subnormal results flushed to zero, whatever MXCSR says. A product of two bfloat16 values is
 * exact in float32 (8-bit significands) unless it leaves float32's range, so the twin gives
 * the instruction's bits for such data; on any CPU, slowly. The tests check the driver with
 * it, and test_ops runs the op table through it (TENET_GEMM_BF16=twin, isa.h).
 */
#include "../core/half.h"
#include "gemm_bf16.h"

#include <float.h>
#include <math.h>

typedef struct vacc {
    float f[16];
} vacc;
typedef struct vpairs {
    uint16_t h[32];
} vpairs;

static inline vacc v_zero(void) { return (vacc){{0}}; }

static inline vpairs v_load(const uint16_t *p) {
    vpairs v;
    memcpy(v.h, p, sizeof v.h);
    return v;
}

static inline vpairs v_bcast(const uint32_t *p) {
    vpairs v;
    for (int l = 0; l < 16; l++) {
        v.h[2 * l] = (uint16_t)(*p & 0xffffu);
        v.h[2 * l + 1] = (uint16_t)(*p >> 16);
    }
    return v;
}

/* a bfloat16 input, subnormals as zero of their sign */
static inline float daz(uint16_t h) {
    return tn_bf16_to_f32((tn_bf16){(h & 0x7f80u) ? h : (uint16_t)(h & 0x8000u)});
}

/* a float32 result, subnormals flushed to zero of their sign (NaN fails the compare) */
static inline float ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

static inline vacc v_dp(vacc acc, vpairs a, vpairs b) {
    for (int l = 0; l < 16; l++) {
        float t = acc.f[l];
        t = ftz(t + daz(a.h[2 * l + 1]) * daz(b.h[2 * l + 1]));
        t = ftz(t + daz(a.h[2 * l]) * daz(b.h[2 * l]));
        acc.f[l] = t;
    }
    return acc;
}

static inline void v_store(float *p, vacc acc) { memcpy(p, acc.f, sizeof acc.f); }

static inline vacc v_loadf(const float *p) {
    vacc v;
    memcpy(v.f, p, sizeof v.f);
    return v;
}

#define GB_ENTRY tn__gemm_bf16_twin
#include "gemm_bf16_impl.h"
