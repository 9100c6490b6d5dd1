/* engine/cpu/isa.h — the CPU's kernel sets by instruction set, and which one
 * this process runs.
 *
 * The library is compiled for a baseline CPU (x86-64: SSE2), so that one
 * binary runs on any 64-bit x86 (and under valgrind). The kernel files whose
 * loops the compiler vectorises (the list TENET_CPU_ISA_SOURCES in
 * cmake/isa.cmake: products, pointwise, reductions, softmax, layer norm,
 * attention, ...) are compiled once more per level, on x86-64:
 *
 *   baseline  the library's own flags
 *   avx2      -march=x86-64-v3 (AVX2, FMA, F16C, BMI2)
 *   avx512    -march=x86-64-v4 (AVX-512 F, BW, DQ, VL, CD)
 *
 * Each extra compile is a generated wrapper that defines TN_ISA (avx2,
 * avx512) and includes the kernel file; the macros below then give the
 * file's external names the level's suffix (tn__gemm -> tn__gemm_avx2), so
 * the sets link side by side. Each set has its own backend table
 * (tn__cpu_backend, backend.c), and isa.c registers one of them: the best
 * the CPU supports, or the level named by the environment variable
 * TENET_ISA (baseline, avx2, avx512; a level above the CPU's gives the
 * CPU's best), chosen once when the library loads. So the choice costs
 * nothing per call: core reaches the CPU through the table's pointers as
 * before.
 *
 * A file in the list that defines a new external name adds it below, or
 * the sets collide at link time ("multiple definition"). With
 * TENET_NATIVE=ON the whole library is compiled with -march=native and only
 * the baseline set is built (its name is then "native").
 *
 * Half products: every level's gemm takes bfloat16 and float16 products of a few rows itself
 * (tn__gemm_half: the weight read in place) and declines the rest, which core widens to
 * float32 copies — except bfloat16 ones when the level is avx512 and the CPU has AVX512-BF16
 * (vdpbf16ps): those go to gemm_bf16.h's kernel. The tables are const per level, so isa.c
 * registers a copy of the level's with a gemm entry that sends the bfloat16 products the
 * level's gemm declines to the kernel. The environment variable TENET_GEMM_BF16 (read once, with
 * TENET_ISA) overrides the choice: "off" widens, "twin" takes the kernel's portable twin on any CPU
 * (for tests: it is slow), "auto" (or unset) is the rule above.
 *
 * Results agree between levels within rounding, not to the bit: FMA
 * contracts a multiply-add into one rounding, and OpenMP SIMD reductions
 * sum in an order fixed by the vector width. Within one process the level
 * never changes, so the thread-count determinism of each kernel holds.
 */
#ifndef TN_CPU_ISA_H
#define TN_CPU_ISA_H

#include "../core/backend.h"

#ifdef TN_ISA
#define TN_ISA_CAT_(a, b) a##_##b
#define TN_ISA_CAT(a, b) TN_ISA_CAT_(a, b)
#define TN_ISA_NAME(name) TN_ISA_CAT(name, TN_ISA)
/* The external names of the kernel files of TENET_CPU_ISA_SOURCES. */
#define tn__cpu_backend TN_ISA_NAME(tn__cpu_backend)
#define tn__cpu_attention TN_ISA_NAME(tn__cpu_attention)
#define tn__cpu_channel_norm TN_ISA_NAME(tn__cpu_channel_norm)
#define tn__cpu_conv TN_ISA_NAME(tn__cpu_conv)
#define tn__cpu_copy TN_ISA_NAME(tn__cpu_copy)
#define tn__cpu_fill TN_ISA_NAME(tn__cpu_fill)
#define tn__cpu_cross_entropy TN_ISA_NAME(tn__cpu_cross_entropy)
#define tn__cpu_grad_stats TN_ISA_NAME(tn__cpu_grad_stats)
#define tn__cpu_layer_norm TN_ISA_NAME(tn__cpu_layer_norm)
#define tn__cpu_pool TN_ISA_NAME(tn__cpu_pool)
#define tn__cpu_reduce TN_ISA_NAME(tn__cpu_reduce)
#define tn__cpu_softmax TN_ISA_NAME(tn__cpu_softmax)
/* the optimiser loops, one per float dtype (TN_FOR_EACH_FLOAT) */
#define tn__cpu_sgd_f32 TN_ISA_NAME(tn__cpu_sgd_f32)
#define tn__cpu_sgd_f64 TN_ISA_NAME(tn__cpu_sgd_f64)
#define tn__cpu_sgd_bf16 TN_ISA_NAME(tn__cpu_sgd_bf16)
#define tn__cpu_sgd_f16 TN_ISA_NAME(tn__cpu_sgd_f16)
#define tn__cpu_adam_f32 TN_ISA_NAME(tn__cpu_adam_f32)
#define tn__cpu_adam_f64 TN_ISA_NAME(tn__cpu_adam_f64)
#define tn__cpu_adam_bf16 TN_ISA_NAME(tn__cpu_adam_bf16)
#define tn__cpu_adam_f16 TN_ISA_NAME(tn__cpu_adam_f16)
#define tn__gemm TN_ISA_NAME(tn__gemm)
#define tn__gemm_batch_item TN_ISA_NAME(tn__gemm_batch_item)
#define tn__gemm_half TN_ISA_NAME(tn__gemm_half)
#define tn__pw_loops TN_ISA_NAME(tn__pw_loops)
#endif

/* The kernel sets, lowest first. TN_ISA_NATIVE: a TENET_NATIVE build's one
 * set. */
typedef enum tn_cpu_isa {
    TN_ISA_BASELINE,
    TN_ISA_AVX2,
    TN_ISA_AVX512,
    TN_ISA_NATIVE,
} tn_cpu_isa;

/* The set this process runs, chosen on the first call (the library's
 * constructor makes it), under pthread_once: any thread, any time. */
tn_cpu_isa tn__cpu_isa(void);
/* "baseline", "avx2", "avx512", "native". */
const char *tn__cpu_isa_name(tn_cpu_isa isa);
/* The bfloat16 product the registered table runs: "avx512bf16", "twin" or "widened". */
const char *tn__cpu_gemm_bf16_name(void);
/* Bits per vector of the kernels that run (128, 256, 512): blas.c's rule. */
int tn__cpu_isa_bits(void);

/* Whether the CPU's attention takes bfloat16 and float16 calls one slice at a time in float32
 * (attention_kernels.c; on), or declines them all to core's float32 copies (off): a switch for
 * the tests that compare the two, any thread, at any time. */
void tn__cpu_attention_in_place(bool on);
bool tn__cpu_attention_in_place_on(void);

#endif
