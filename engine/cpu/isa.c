/* Which CPU kernel set runs (isa.h), and the CPU backend's registration.
 *
 * Compiled at the library's baseline flags: nothing here may use an
 * instruction the CPU has not been asked about. TENET_HAVE_ISA_AVX2 and
 * TENET_HAVE_ISA_AVX512 say which extra sets the build made
 * (cmake/isa.cmake); TENET_ISA_NATIVE, a -march=native build with one set.
 */
#include "isa.h"
#include "cpu_backend.h"
#include "gemm_bf16.h"
#include "tenet/runtime.h" /* tn_cpu_capability: exported */

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef TENET_HAVE_ISA_AVX2
extern const tn_backend tn__cpu_backend_avx2;
#endif
#ifdef TENET_HAVE_ISA_AVX512
extern const tn_backend tn__cpu_backend_avx512;
#endif

static const char *const isa_names[] = {
    [TN_ISA_BASELINE] = "baseline",
    [TN_ISA_AVX2] = "avx2",
    [TN_ISA_AVX512] = "avx512",
    [TN_ISA_NATIVE] = "native",
};

const char *tn__cpu_isa_name(tn_cpu_isa isa) {
    return (unsigned)isa < sizeof isa_names / sizeof *isa_names ? isa_names[isa] : "?";
}

/* The best set this CPU and OS can run (libgcc's CPUID reading also checks
 * that the OS saves the AVX and AVX-512 registers). GCC names the levels;
 * clang 14 knows only single features, the ones the sets need. (A
 * TENET_NATIVE build has one set and never asks.) */
#ifndef TENET_ISA_NATIVE
static tn_cpu_isa best_supported(void) {
#if defined(__x86_64__) && (defined(TENET_HAVE_ISA_AVX2) || defined(TENET_HAVE_ISA_AVX512))
    __builtin_cpu_init();
#if defined(__clang__)
    bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
    bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
              __builtin_cpu_supports("avx512cd");
#else
    bool v3 = __builtin_cpu_supports("x86-64-v3");
    bool v4 = __builtin_cpu_supports("x86-64-v4");
#endif
#ifdef TENET_HAVE_ISA_AVX512
    if (v4) return TN_ISA_AVX512;
#else
    (void)v4;
#endif
#ifdef TENET_HAVE_ISA_AVX2
    if (v3) return TN_ISA_AVX2;
#endif
#endif
    return TN_ISA_BASELINE;
}
#endif

/* TENET_ISA names a level to run at most (a lower one forces it; a higher
 * one gives the best the CPU has). */
static tn_cpu_isa chosen(void) {
#ifdef TENET_ISA_NATIVE
    return TN_ISA_NATIVE;
#else
    tn_cpu_isa best = best_supported();
    const char *env = getenv("TENET_ISA");
    if (!env || !*env) return best;
    for (int i = TN_ISA_BASELINE; i <= TN_ISA_AVX512; i++)
        if (!strcmp(env, isa_names[i])) return (tn_cpu_isa)i < best ? (tn_cpu_isa)i : best;
    tn__warn("TENET_ISA=%s: not a level (baseline, avx2, avx512); running %s", env,
             isa_names[best]);
    return best;
#endif
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static tn_cpu_isa isa_chosen; /* written once under isa_once, read after it */

static void isa_init(void) { isa_chosen = chosen(); }

tn_cpu_isa tn__cpu_isa(void) {
    pthread_once(&isa_once, isa_init);
    return isa_chosen;
}

int tn__cpu_isa_bits(void) {
    switch (tn__cpu_isa()) {
    case TN_ISA_AVX512:
        return 512;
    case TN_ISA_AVX2:
        return 256;
    case TN_ISA_BASELINE:
    case TN_ISA_NATIVE:
        break;
    }
    /* the baseline set or the native one: the flags this file was built with */
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX2__) && defined(__FMA__)
    return 256;
#else
    return 128;
#endif
}

const char *tn_cpu_capability(void) { return tn__cpu_isa_name(tn__cpu_isa()); }

static const tn_backend *isa_table(tn_cpu_isa isa) {
    switch (isa) {
#ifdef TENET_HAVE_ISA_AVX512
    case TN_ISA_AVX512:
        return &tn__cpu_backend_avx512;
#endif
#ifdef TENET_HAVE_ISA_AVX2
    case TN_ISA_AVX2:
        return &tn__cpu_backend_avx2;
#endif
    default:
        return &tn__cpu_backend;
    }
}

/* ---- bfloat16 products (gemm_bf16.h) -------------------------------------------------- */

#ifdef TENET_HAVE_GEMM_BF16
/* AVX512-BF16 and the AVX-512 F, BW and VL that gemm_bf16.c is compiled with, the OS saving
 * the ZMM and mask registers (XCR0 bits 1, 2, 5, 6, 7). */
static bool cpu_has_avx512bf16(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7 || !__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return false;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned fbwvl = 1u << 16 | 1u << 30 | 1u << 31;
    if (a < 1 || (b & fbwvl) != fbwvl) return false; /* a: the last subleaf */
    __cpuid_count(7, 1, a, b, c, d);
    if (!(a & (1u << 5))) return false;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6u) == 0xe6u;
#else
    return false;
#endif
}
#endif

tn_gemm_bf16_fn tn__gemm_bf16_native(void) {
#ifdef TENET_HAVE_GEMM_BF16
    return cpu_has_avx512bf16() ? tn__gemm_bf16 : NULL;
#else
    return NULL;
#endif
}

/* TENET_GEMM_BF16 (isa.h): the bfloat16 product the CPU backend takes itself, or NULL. */
static tn_gemm_bf16_fn bf16_choice(tn_cpu_isa isa, const char **name) {
    const char *env = getenv("TENET_GEMM_BF16");
    bool any = !env || !*env || !strcmp(env, "auto");
    *name = "widened";
    if (env && !strcmp(env, "twin")) {
        *name = "twin";
        return tn__gemm_bf16_twin;
    }
    if (!any && strcmp(env, "off"))
        tn__warn("TENET_GEMM_BF16=%s: not a choice (auto, off, twin); taking auto", env);
    if (env && !strcmp(env, "off")) return NULL;
    tn_gemm_bf16_fn fn = isa == TN_ISA_AVX512 ? tn__gemm_bf16_native() : NULL;
    if (fn) *name = "avx512bf16";
    return fn;
}

/* The registered table: a copy of the level's, taking bfloat16 products when bf16_gemm is set
 * (written once by the constructor, before any op). */
static tn_backend cpu_table;
static const tn_backend *level_table;
static tn_gemm_bf16_fn bf16_gemm;
static const char *bf16_name = "widened";

/* bfloat16 products the level's gemm declines (all but those of a few rows, which read the
 * weight in place: tn__gemm_half) go to the kernel */
static tn_status gemm_with_bf16(int dev, tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b) {
    tn_status st = level_table->gemm(dev, dt, g, b);
    return dt == TN_BF16 && st == TN__DECLINED ? bf16_gemm(g, b) : st;
}

const char *tn__cpu_gemm_bf16_name(void) { return bf16_name; }

/* Before main (or in dlopen), so the choice is made once, before any op. */
__attribute__((constructor)) static void register_cpu(void) {
    level_table = isa_table(tn__cpu_isa());
    cpu_table = *level_table;
    bf16_gemm = bf16_choice(tn__cpu_isa(), &bf16_name);
    if (bf16_gemm) {
        cpu_table.gemm = gemm_with_bf16;
    }
    tn__backend_register(TN_CPU, &cpu_table);
}

/* Relaxed: a test's switch, read once per attention call; it orders no other memory. */
static _Atomic bool g_attention_copies;

void tn__cpu_attention_in_place(bool on) {
    atomic_store_explicit(&g_attention_copies, !on, memory_order_relaxed);
}

bool tn__cpu_attention_in_place_on(void) {
    return !atomic_load_explicit(&g_attention_copies, memory_order_relaxed);
}
