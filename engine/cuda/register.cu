/* engine/cuda/register.cu — the static library's CUDA back end: linked in
 * with the rest of tenet (libtenet.a), it registers its table from a
 * constructor, before main, as the CPU's does. Not part of the plugin
 * (libtenet-cuda.so), whose table core asks plugin.cu for.
 */
#include "cuda_internal.h"

__attribute__((constructor)) static void register_cuda(void) {
    tn__backend_register(TN_CUDA, tnc::backend_table());
}
