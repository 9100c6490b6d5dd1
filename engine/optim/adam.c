/* torch.optim.Adam (L2 weight decay added to the grad, bias correction, no
 * amsgrad). Shared parameter handling lives in sgd.c (optim_internal.h). */
#include <math.h>

#include "optim_internal.h"

struct tn_adam {
    tn_optim_params ps;
    double lr, beta1, beta2, eps, weight_decay;
    /* per state index (first occurrence of a parameter); NULL until used */
    tn_tensor **exp_avg, **exp_avg_sq;
    int64_t *steps; /* torch's state['step']: counts only steps with a grad */
};

/* Scalars of one parameter's update, computed in double as torch's Python. */
typedef tn_adam_ctx adam_ctx; /* engine/core/kernel_args.h: shared with the devices */

/* p, g, m, v are one row of n elements with byte strides s[0..3]:
 *   d = g + wd p;  m = beta1 m + (1-beta1) d;  v = beta2 v + (1-beta2) d d;
 *   p += -lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
 * in torch's operation order (mul_/add_, addcmul_, addcdiv_). Called with
 * constant strides for contiguous rows so it vectorises (with GCC, only
 * under -fno-math-errno: errno-setting sqrt blocks it). */
#define ADAM_KERNEL(T, SFX, SQRT)                                                                  \
    static inline void adam_row_##SFX(const adam_ctx *c, int64_t n, char *pp, const char *gp,      \
                                      char *mp, char *vp, int64_t s0, int64_t s1, int64_t s2,      \
                                      int64_t s3) {                                                \
        const T b1 = (T)c->beta1, b2 = (T)c->beta2, a1 = (T)c->one_minus_beta1;                    \
        const T a2 = (T)c->one_minus_beta2, wd = (T)c->wd, eps = (T)c->eps;                        \
        const T bc2s = (T)c->bc2_sqrt, neg_step = (T)c->neg_step_size;                             \
        const bool use_wd = c->wd != 0;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T *p = (T *)(pp + i * s0), *m = (T *)(mp + i * s2), *v = (T *)(vp + i * s3);           \
            T g = *(const T *)(gp + i * s1);                                                       \
            T d = use_wd ? g + wd * *p : g;                                                        \
            T mi = *m * b1 + a1 * d;                                                               \
            T vi = *v * b2 + a2 * d * d;                                                           \
            *m = mi;                                                                               \
            *v = vi;                                                                               \
            T denom = SQRT(vi) / bc2s + eps;                                                       \
            *p = *p + neg_step * mi / denom;                                                       \
        }                                                                                          \
    }                                                                                              \
    static void adam_loop_##SFX(void *ctx, int64_t n, char **ptr, const int64_t *s) {              \
        const int64_t e = (int64_t)sizeof(T);                                                      \
        if (s[0] == e && s[1] == e && s[2] == e && s[3] == e)                                      \
            adam_row_##SFX(ctx, n, ptr[0], ptr[1], ptr[2], ptr[3], e, e, e, e);                    \
        else                                                                                       \
            adam_row_##SFX(ctx, n, ptr[0], ptr[1], ptr[2], ptr[3], s[0], s[1], s[2], s[3]);        \
    }

ADAM_KERNEL(float, f32, sqrtf)
ADAM_KERNEL(double, f64, sqrt)

static const tn_loop_fn adam_loops[TN_DTYPE_COUNT] = {adam_loop_f32, adam_loop_f64};

/* torch's checks, in torch's order: `not 0.0 <= x` (NaN fails them). */
static tn_status check_hyper(double lr, double beta1, double beta2, double eps, double wd) {
    char v[40];
    const char *what = NULL;
    double bad = 0;
    if (!(0.0 <= lr))
        what = "Invalid learning rate", bad = lr;
    else if (!(0.0 <= eps))
        what = "Invalid epsilon value", bad = eps;
    else if (!(0.0 <= beta1 && beta1 < 1.0))
        what = "Invalid beta parameter at index 0", bad = beta1;
    else if (!(0.0 <= beta2 && beta2 < 1.0))
        what = "Invalid beta parameter at index 1", bad = beta2;
    else if (!(0.0 <= wd))
        what = "Invalid weight_decay value", bad = wd;
    if (!what) return TN_OK;
    tn__optim_fmt(v, sizeof v, bad);
    return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: %s", what, v);
}

tn_adam *tn_adam_new(int n, tn_tensor *const *params, double lr, double beta1, double beta2,
                     double eps, double weight_decay) {
    if (check_hyper(lr, beta1, beta2, eps, weight_decay) < 0) return NULL;
    tn_adam *o = tn__calloc_small(sizeof *o);
    if (!o) return NULL;
    if (tn__optim_params_init(&o->ps, "tn_adam_new", n, params) < 0) {
        tn__free_small(o);
        return NULL;
    }
    o->exp_avg = tn__calloc_small((size_t)n * sizeof *o->exp_avg);
    o->exp_avg_sq = tn__calloc_small((size_t)n * sizeof *o->exp_avg_sq);
    o->steps = tn__calloc_small((size_t)n * sizeof *o->steps);
    if (!o->exp_avg || !o->exp_avg_sq || !o->steps) {
        tn_adam_free(o);
        return NULL;
    }
    o->lr = lr;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    return o;
}

/* Phase 1 tail: zeroed moments for parameters stepped for the first time. */
static tn_status adam_prepare_state(tn_adam *o) {
    tn_optim_params *ps = &o->ps;
    for (int i = 0; i < ps->n; i++) {
        int s = ps->state_of[i];
        if (!ps->grads[i] || o->exp_avg[s]) continue;
        tn_tensor *m = tn__optim_state_like(ps->params[i]);
        tn_tensor *v = m ? tn__optim_state_like(ps->params[i]) : NULL;
        if (!v) {
            tn_release(m);
            return tn_last_status();
        }
        o->exp_avg[s] = m;
        o->exp_avg_sq[s] = v;
    }
    return TN_OK;
}

static adam_ctx adam_scalars(const tn_adam *o, int64_t step) {
    double bc1 = 1 - pow(o->beta1, (double)step), bc2 = 1 - pow(o->beta2, (double)step);
    return (adam_ctx){.beta1 = o->beta1,
                      .beta2 = o->beta2,
                      .one_minus_beta1 = 1 - o->beta1,
                      .one_minus_beta2 = 1 - o->beta2,
                      .wd = o->weight_decay,
                      .eps = o->eps,
                      .bc2_sqrt = sqrt(bc2),
                      .neg_step_size = -(o->lr / bc1)};
}

static tn_status adam_prepare(void *opt) { return adam_prepare_state(opt); }

static tn_status adam_update(void *opt, int i) {
    tn_adam *o = opt;
    tn_optim_params *ps = &o->ps;
    int s = ps->state_of[i];
    tn_tensor *p = ps->params[i];
    adam_ctx c = adam_scalars(o, ++o->steps[s]);
    tn_tensor *ops[4] = {p, ps->grads[i], o->exp_avg[s], o->exp_avg_sq[s]};
    return tn__optim_apply("Adam.step", TN_PW_ADAM, 4, ops, adam_loops[p->dtype], &c);
}

tn_status tn_adam_step(tn_adam *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_step(&o->ps, adam_prepare, adam_update, o);
}

tn_status tn_adam_zero_grad(tn_adam *o) {
    TN_CHECK_NULL_ARG_ST(o, "opt");
    return tn__optim_zero_grad(&o->ps);
}

void tn_adam_free(tn_adam *o) {
    if (!o) return;
    for (int i = 0; i < o->ps.n; i++) {
        if (o->exp_avg) tn_release(o->exp_avg[i]);
        if (o->exp_avg_sq) tn_release(o->exp_avg_sq[i]);
    }
    tn__free_small(o->exp_avg);
    tn__free_small(o->exp_avg_sq);
    tn__free_small(o->steps);
    tn__optim_params_free(&o->ps);
    tn__free_small(o);
}
