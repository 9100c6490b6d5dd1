/* Thread-local grad mode (torch.no_grad / set_grad_enabled): a core setting,
 * read by every op before it records (tn__needs_grad); and autocast's
 * per-thread switch (engine/ops/autocast.c), read by every autocast op. */
#include "internal.h"

static _Thread_local bool tls_grad_disabled;
_Thread_local uint8_t tn__autocast_on TN_TLS_INITIAL_EXEC;

bool tn__grad_enabled(void) { return !tls_grad_disabled; }

bool tn_set_grad_enabled(bool enabled) {
    bool prev = !tls_grad_disabled;
    tls_grad_disabled = !enabled;
    return prev;
}

bool tn_is_grad_enabled(void) { return !tls_grad_disabled; }

bool tn__needs_grad(int n, const tn_tensor *const *inputs) {
    if (tls_grad_disabled) return false;
    for (int i = 0; i < n; i++)
        if (tn__requires_grad(inputs[i])) return true;
    return false;
}
