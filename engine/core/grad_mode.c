/* Thread-local grad mode (torch.no_grad / set_grad_enabled) and inference
 * mode (torch.inference_mode): core settings, read by every op before it
 * records (tn__needs_grad) and by every tensor constructor (an inference
 * tensor has no version counter); and autocast's per-thread switch
 * (engine/ops/autocast.c), read by every autocast op. */
#include "internal.h"

/* initial-exec, as the two below: read by every op (no __tls_get_addr call) */
static _Thread_local bool tls_grad_disabled TN_TLS_INITIAL_EXEC;
_Thread_local uint8_t tn__autocast_on TN_TLS_INITIAL_EXEC;
_Thread_local bool tn__inference_on TN_TLS_INITIAL_EXEC;

/* Inference mode implies no-grad; the grad-mode flag itself is kept, so
 * that leaving inference mode restores what tn_set_grad_enabled set. */
bool tn__grad_enabled(void) { return !tls_grad_disabled && !tn__inference_on; }

/* Returns the previous setting, not the effective mode: a restore made
 * inside inference mode must not leave grad mode off after it. */
bool tn_set_grad_enabled(bool enabled) {
    bool prev = !tls_grad_disabled;
    tls_grad_disabled = !enabled;
    return prev;
}

bool tn_is_grad_enabled(void) { return tn__grad_enabled(); }

bool tn_set_inference_mode(bool on) {
    bool prev = tn__inference_on;
    tn__inference_on = on;
    return prev;
}

bool tn_is_inference_mode(void) { return tn__inference_on; }

bool tn_is_inference(const tn_tensor *t) { return t && tn__is_inference(t); }

/* An op records only when one of its inputs is a normal tensor: as in
 * PyTorch, where inference tensors lack the autograd dispatch key, an op
 * whose inputs are all inference tensors skips autograd even when one of
 * them requires grad (a leaf made so in inference mode). */
bool tn__needs_grad(int n, const tn_tensor *const *inputs) {
    if (!tn__grad_enabled()) return false;
    bool any_rg = false, any_normal = false;
    for (int i = 0; i < n; i++) {
        if (!inputs[i]) continue;
        any_rg = any_rg || tn__requires_grad(inputs[i]);
        any_normal = any_normal || !tn__is_inference(inputs[i]);
        if (any_rg && any_normal) return true;
    }
    return false;
}
