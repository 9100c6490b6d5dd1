/* tenet/dlpack_io.h — zero-copy tensor exchange through DLPack
 * (https://dmlc.github.io/dlpack/), the protocol PyTorch, NumPy, JAX, CuPy and
 * TVM speak. Include <dlpack/dlpack.h> (Debian: libdlpack-dev) to read the
 * structures; this header only names them.
 *
 * Export: tn_to_dlpack(t) returns a DLManagedTensor sharing t's memory (no
 * copy): data points at t's first element (byte_offset 0), shape and strides
 * in elements, device kDLCPU or kDLCUDA with its index; dtypes float16,
 * bfloat16, float32, float64, int16/32/64, and bool as kDLUInt 8 (as PyTorch
 * maps it). The consumer calls its deleter once, which drops tenet's
 * reference. A CUDA tensor's pending kernels are waited for first.
 *
 * Import: tn_from_dlpack(m) takes ownership of m on success: the tensor
 * shares m's memory and m->deleter(m) runs once, when the last tenet
 * reference to that memory goes (on whichever thread drops it). On failure
 * it returns NULL with an error and leaves m to the caller (nothing is
 * freed): other dtypes, lanes != 1, a device tenet lacks, negative strides,
 * strides whose reach overflows, byte offsets not a multiple of the element
 * size, a NULL data pointer with elements, more than TN_MAX_DIMS dims.
 * kDLUInt 8 imports as bool (PyTorch's own export of bool); kDLCUDAHost
 * memory as CPU memory.
 *
 * Aliasing: the other framework may write the memory at any time; tenet's
 * version counter cannot see it. Anomaly mode checks a saved imported tensor
 * at backward and reports a change as "written outside tenet"
 * (docs/semantics.md, "Memory shared with other frameworks").
 */
#ifndef TENET_DLPACK_IO_H
#define TENET_DLPACK_IO_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

struct DLManagedTensor;

struct DLManagedTensor *tn_to_dlpack(const tn_tensor *t);
tn_tensor *tn_from_dlpack(struct DLManagedTensor *m);

TN_API_END
#ifdef __cplusplus
}
#endif

#endif
