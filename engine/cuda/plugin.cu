/* engine/cuda/plugin.cu — the entry of the CUDA plugin (libtenet-cuda.so),
 * which libtenet.so loads on the first use of a CUDA device
 * (engine/core/backend.c): tn_cuda_plugin_init, the plugin's one exported
 * symbol, and the core services the back end's files call, forwarded to the
 * host's. The plugin does not link libtenet: tn__error here formats the
 * message and hands it to libtenet's, which sets the calling thread's error
 * state there, where tn_last_error() reads it. Not part of the static
 * library, where these are core's own (register.cu registers the table).
 */
#include <stdarg.h>
#include <stdio.h>

#include "tenet.h" /* TENET_VERSION_* */

#include "cuda_internal.h"

namespace {

/* Set once by tn_cuda_plugin_init, under core's pthread_once, before core
 * publishes the table: every call through the table is ordered after it. */
const tn_plugin_host *g_host = nullptr;

} // namespace

tn_status tn__error(tn_status st, const char *fmt, ...) {
    char msg[1024]; /* error.c's bound */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return g_host->error(st, "%s", msg);
}

bool tn__tf32_allowed(void) { return g_host->tf32_allowed(); }

/* NULL for a host of another ABI or release: core then unloads the plugin. */
extern "C" __attribute__((visibility("default"))) const tn_backend *
tn_cuda_plugin_init(const tn_plugin_host *host) {
    if (!host || host->abi != TN_PLUGIN_ABI || host->version != TN_PLUGIN_VERSION) return nullptr;
    g_host = host;
    return tnc::backend_table();
}
