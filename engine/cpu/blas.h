/* engine/cpu/blas.h — float32/float64 products through CBLAS (OpenBLAS).
 *
 * tn__gemm (gemm.c) offers every product to tn__gemm_blas first; it takes
 * the ones CBLAS can express and is expected to be faster on, and declines
 * the rest, which run on tenet's own kernel. Built without CBLAS
 * (TENET_BLAS=OFF, or AUTO with OpenBLAS not found) it declines everything.
 *
 * Modes (process-wide, relaxed atomic): read once from the environment
 * variable TENET_BLAS when the library loads ("0"/"off": off; "all": every
 * product CBLAS can express; otherwise auto), then changed by tn_set_blas or
 * tn__blas_set_mode. Auto is the measured size policy in blas.c.
 *
 * Threads: OpenBLAS runs on tenet's OpenMP threads, as many as tenet's own
 * kernel would use (tn__threads_for); it never starts threads of its own
 * for us. Safe to call from several user threads at once (blas.c says why).
 */
#ifndef TN_CPU_BLAS_H
#define TN_CPU_BLAS_H

#include "gemm.h"

/* tn__gemm_blas's answer when it does not take the product (positive, so
 * it is neither TN_OK nor an error): the caller runs its own kernel. */
#define TN__BLAS_DECLINED ((tn_status)1)

typedef enum tn__blas_mode {
    TN__BLAS_OFF = 0,  /* tenet's kernel for everything */
    TN__BLAS_AUTO = 1, /* CBLAS where measured faster (the default) */
    TN__BLAS_ALL = 2,  /* CBLAS for every product it can express (tests, bench) */
} tn__blas_mode;

/* C = A·B (+ C) as tn__gemm, on CBLAS: TN_OK when done, TN__BLAS_DECLINED
 * when not taken (an integer dtype, a stride pattern CBLAS cannot express,
 * the mode or the size policy, no CBLAS in this build). Never fails. */
tn_status tn__gemm_blas(tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *batch);

/* Built with CBLAS and usable in this process (an OpenMP build of OpenBLAS
 * is not, in a tenet built without OpenMP: its threads could not be kept
 * at tenet's count). Independent of the mode. */
bool tn__blas_available(void);

void tn__blas_set_mode(tn__blas_mode mode);
tn__blas_mode tn__blas_get_mode(void);

#endif
