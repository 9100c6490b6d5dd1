/* torch.cuda.amp.GradScaler (tenet/autocast.h), torch 1.13's algorithm:
 * grad_scaler.py's per-optimiser stages (READY -> UNSCALED -> STEPPED, reset
 * by update) and the kernels it calls, _amp_foreach_non_finite_check_and_
 * unscale_ (grads *= inv_scale, found_inf when any grad is inf/NaN) and
 * _amp_update_scale_ (backoff on found_inf, growth after growth_interval
 * clean steps).
 *
 * The inf/NaN check reads every gradient once through tn__optim_grad_stats
 * (max |g|: one wait per call); the unscale is one in-place multiply per
 * gradient. Gradients that grad_stats cannot measure (not dense, or a device
 * without it) are checked by a max-abs reduction each.
 */
#include <math.h>

#include "../ops/ops_internal.h"
#include "optim_internal.h"
#include "tenet/autocast.h"

enum { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED };

typedef struct opt_state {
    const tn_optimizer *opt; /* the key: torch's id(optimizer) */
    int stage;
    bool checked;   /* unscale found at least one gradient (torch's found_inf_per_device) */
    bool found_inf; /* ... and one of them was inf/NaN */
} opt_state;

struct tn_grad_scaler {
    float scale; /* torch's float32 _scale */
    int64_t tracker;
    double growth, backoff;
    int64_t interval;
    bool enabled, started; /* started: scale() was called (torch's _scale is not None) */
    /* update() calls that found inf/NaN (the step skipped, the scale backed off): in all, and
     * in a row up to the last update; steps: every update() */
    int64_t steps, skipped, skipped_in_row;
    int n_states, cap_states;
    opt_state *states;
};

tn_grad_scaler *tn_grad_scaler_new(double init_scale, double growth_factor, double backoff_factor,
                                   int64_t growth_interval, bool enabled) {
    const char *bad = NULL;
    if (enabled && !(growth_factor > 1.0)) bad = "The growth factor must be > 1.0.";
    if (enabled && !bad && !(backoff_factor < 1.0)) bad = "The backoff factor must be < 1.0.";
    if (enabled && !bad && growth_interval < 1) bad = "growth_interval must be at least 1.";
    if (bad) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "%s", bad);
        return NULL;
    }
    tn_grad_scaler *sc = tn__calloc_small(sizeof *sc);
    if (!sc) return NULL;
    *sc = (tn_grad_scaler){.scale = (float)init_scale,
                           .growth = growth_factor,
                           .backoff = backoff_factor,
                           .interval = growth_interval,
                           .enabled = enabled};
    return sc;
}

void tn_grad_scaler_free(tn_grad_scaler *sc) {
    if (!sc) return;
    tn__free_small(sc->states);
    tn__free_small(sc);
}

double tn_grad_scaler_get_scale(const tn_grad_scaler *sc) {
    if (!sc) {
        tn__null_arg(false, "tn_grad_scaler_get_scale: argument 'scaler' is NULL");
        return NAN;
    }
    return sc->enabled ? (double)sc->scale : 1.0;
}

int64_t tn_grad_scaler_growth_tracker(const tn_grad_scaler *sc) {
    if (!sc) {
        tn__null_arg(false, "tn_grad_scaler_growth_tracker: argument 'scaler' is NULL");
        return -1;
    }
    return sc->tracker;
}

tn_tensor *tn_grad_scaler_scale(tn_grad_scaler *sc, const tn_tensor *loss) {
    TN_CHECK_NULL_PTR(sc, "scaler");
    TN_CHECK_NULL_ARG(loss, "outputs");
    if (!sc->enabled) return tn__ret(tn__retain(loss));
    sc->started = true;
    /* the gradient monitor's next pass on this thread is of a loss scaled by this */
    if (TN_UNLIKELY(tn__monitor_on()) && tn__hooks.monitor_scaled)
        tn__hooks.monitor_scaled((double)sc->scale, sc->steps, sc->skipped, sc->skipped_in_row);
    /* torch multiplies by a float32 tensor of shape (1,): a half loss gives float32 */
    tn_tensor *l =
        tn__is_half(loss->dtype) ? tn__to_dtype_autograd(loss, TN_F32) : tn__retain(loss);
    tn_tensor *out = l ? tn_mul_scalar(l, (double)sc->scale) : NULL;
    tn_release(l);
    return out;
}

/* torch's _check_scale_growth_tracker */
static tn_status check_started(const tn_grad_scaler *sc, const char *fn) {
    if (sc->started) return TN_OK;
    return tn__error(TN_ERR_INVALID_ARGUMENT,
                     "Attempted %s but _scale is None.  This may indicate your script did not use "
                     "scaler.scale(loss or outputs) earlier in the iteration.",
                     fn);
}

/* opt's state, added READY when new; NULL + error when it cannot be kept. */
static opt_state *state_of(tn_grad_scaler *sc, const tn_optimizer *opt) {
    for (int i = 0; i < sc->n_states; i++)
        if (sc->states[i].opt == opt) return &sc->states[i];
    if (sc->n_states == sc->cap_states) {
        int cap = sc->cap_states ? 2 * sc->cap_states : 4;
        opt_state *s = tn__calloc_small((size_t)cap * sizeof *s);
        if (!s) return NULL;
        if (sc->n_states) memcpy(s, sc->states, (size_t)sc->n_states * sizeof *s);
        tn__free_small(sc->states);
        sc->states = s, sc->cap_states = cap;
    }
    sc->states[sc->n_states] = (opt_state){.opt = opt};
    return &sc->states[sc->n_states++];
}

/* Whether any gradient holds an inf or NaN: grad_stats' max |g| in one read, else a
 * max-abs reduction per gradient. */
static tn_status any_nonfinite(int n, tn_tensor *const *grads, bool *found) {
    double *host;
    int m;
    bool done;
    tn_status st = tn__optim_grad_stats(n, grads, &host, &m, &done);
    *found = false;
    for (int k = 0; k < m && st == TN_OK; k++)
        *found |= !isfinite(host[2 * k + 1]);
    tn__free(host);
    for (int i = 0; i < n && !done && st == TN_OK; i++) {
        if (!grads[i] || tn_numel(grads[i]) == 0) continue;
        tn_tensor *a = tn_abs(grads[i]), *mx = a ? tn_max(a) : NULL;
        double v = 0;
        st = mx ? tn_item(mx, &v) : tn_last_status();
        *found |= !isfinite(v);
        tn_release(mx);
        tn_release(a);
    }
    return st;
}

/* The distinct parameters' gradients (new references, NULL without one) into grads; *n_found:
 * how many have one. torch's "Attempting to unscale FP16 gradients." before anything. */
static tn_status collect(const tn_optim_params *ps, tn_tensor **grads, int *n_found) {
    *n_found = 0;
    for (int i = 0; i < ps->n; i++) {
        grads[i] = ps->state_of[i] == i ? tn_grad(ps->params[i]) : NULL;
        if (!grads[i]) continue;
        ++*n_found;
        if (grads[i]->dtype == TN_F16)
            return tn__error(TN_ERR_DTYPE, "Attempting to unscale FP16 gradients.");
    }
    return TN_OK;
}

static tn_status unscale(tn_grad_scaler *sc, opt_state *s) {
    const tn_optim_params *ps = s->opt->ps;
    tn_tensor **grads = ps->n ? tn__calloc_small((size_t)ps->n * sizeof *grads) : NULL;
    if (ps->n && !grads) return tn_last_status();
    tn__internal_enter();
    bool prev = tn_set_grad_enabled(false);
    int n_found = 0;
    bool found = false;
    tn_status st = collect(ps, grads, &n_found);
    if (st == TN_OK) st = any_nonfinite(ps->n, grads, &found);
    /* torch: inv_scale = scale.double().reciprocal().float() */
    double inv = (double)(float)(1.0 / (double)sc->scale);
    for (int i = 0; i < ps->n && st == TN_OK; i++)
        if (grads[i]) st = tn_mul_scalar_(grads[i], inv);
    for (int i = 0; i < ps->n; i++)
        tn_release(grads[i]);
    tn_set_grad_enabled(prev);
    tn__internal_leave();
    tn__free_small(grads);
    if (st < 0) return st;
    s->stage = STAGE_UNSCALED;
    s->checked = n_found > 0;
    s->found_inf = found;
    return TN_OK;
}

tn_status tn_grad_scaler_unscale_(tn_grad_scaler *sc, tn_optimizer *opt) {
    TN_CHECK_NULL_PTR_ST(sc, "scaler");
    TN_CHECK_NULL_ARG_ST(opt, "optimizer");
    if (!sc->enabled) return TN_OK;
    tn_status st = check_started(sc, "unscale_");
    opt_state *s = st == TN_OK ? state_of(sc, opt) : NULL;
    if (!s) return tn_last_status();
    if (s->stage == STAGE_UNSCALED)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "unscale_() has already been called on this "
                                                  "optimizer since the last update().");
    if (s->stage == STAGE_STEPPED)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "unscale_() is being called after step().");
    return unscale(sc, s);
}

tn_status tn_grad_scaler_step(tn_grad_scaler *sc, tn_optimizer *opt, bool *stepped) {
    TN_CHECK_NULL_PTR_ST(sc, "scaler");
    TN_CHECK_NULL_ARG_ST(opt, "optimizer");
    if (stepped) *stepped = false;
    if (!sc->enabled) {
        tn_status st = tn_optimizer_step(opt);
        if (st == TN_OK && stepped) *stepped = true;
        return st;
    }
    tn_status st = check_started(sc, "step");
    opt_state *s = st == TN_OK ? state_of(sc, opt) : NULL;
    if (!s) return tn_last_status();
    if (s->stage == STAGE_STEPPED)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "step() has already been called since the last update().");
    if (s->stage == STAGE_READY && (st = unscale(sc, s)) < 0) return st;
    if (!s->checked)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "No inf checks were recorded for this optimizer.");
    if (!s->found_inf && (st = tn_optimizer_step(opt)) < 0) return st;
    s->stage = STAGE_STEPPED;
    if (stepped) *stepped = !s->found_inf;
    return TN_OK;
}

/* torch's _amp_update_scale_ (float32 scale, int32 tracker in torch) */
static void update_scale(tn_grad_scaler *sc, bool found_inf) {
    if (found_inf) {
        sc->scale = (float)((double)sc->scale * sc->backoff);
        sc->tracker = 0;
        return;
    }
    int64_t successful = sc->tracker + 1;
    if (successful == sc->interval) {
        float grown = (float)((double)sc->scale * sc->growth);
        if (isfinite(grown)) sc->scale = grown;
        sc->tracker = 0;
    } else {
        sc->tracker = successful;
    }
}

tn_status tn_grad_scaler_update(tn_grad_scaler *sc) {
    TN_CHECK_NULL_PTR_ST(sc, "scaler");
    if (!sc->enabled) return TN_OK;
    tn_status st = check_started(sc, "update");
    if (st < 0) return st;
    bool any = false, found = false;
    for (int i = 0; i < sc->n_states; i++) {
        any |= sc->states[i].checked;
        found |= sc->states[i].checked && sc->states[i].found_inf;
    }
    if (!any)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "No inf checks were recorded prior to update.");
    update_scale(sc, found);
    sc->steps++;
    sc->skipped += found;
    sc->skipped_in_row = found ? sc->skipped_in_row + 1 : 0;
    sc->n_states = 0;
    return TN_OK;
}

int64_t tn_grad_scaler_skipped_steps(const tn_grad_scaler *sc, int64_t *steps, int64_t *in_row) {
    if (!sc) {
        tn__null_arg(false, "tn_grad_scaler_skipped_steps: argument 'scaler' is NULL");
        return -1;
    }
    if (steps) *steps = sc->steps;
    if (in_row) *in_row = sc->skipped_in_row;
    return sc->skipped;
}

tn_status tn_grad_scaler_update_to(tn_grad_scaler *sc, double new_scale) {
    TN_CHECK_NULL_PTR_ST(sc, "scaler");
    if (!sc->enabled) return TN_OK;
    tn_status st = check_started(sc, "update");
    if (st < 0) return st;
    sc->scale = (float)new_scale;
    sc->n_states = 0;
    return TN_OK;
}
