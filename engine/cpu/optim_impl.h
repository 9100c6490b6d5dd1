/* engine/cpu/optim_impl.h — the optimiser update loops of one float dtype,
 * included by optim_kernels.c once per dtype with SUF defined:
 * tn__cpu_sgd_SUF and tn__cpu_adam_SUF (pointwise loops, cpu_backend.h).
 */
#define T TN_T(SUF)
#define C TN_CT(SUF)
#define F(name) TN_NAME(name, SUF)
/* R: a value rounded to the parameter's dtype where torch's update ends one
 * op (mul_, add_, addcmul_, ...): the identity but for the halves, whose
 * state and parameters are computed in float32 op by op. K: a scalar of
 * such an op as the op sees it: PyTorch converts the scalar of mul_, div and
 * add_'s alpha to the tensor's dtype first, while addcmul_ and addcdiv_ take
 * their `value` in float32 (matched bit for bit against 1.13's vectorised
 * bfloat16 path, tests/test_half_optim.c). */
#if TN_IS_HALF(SUF)
#define R(x) TN_LD(SUF, TN_ST(SUF, x))
#else
#define R(x) (x)
#endif
#define K(x) R((C)(x))
#define LD(x) TN_LD(SUF, x)
#define ST(x) TN_ST(SUF, x)

/* p, g, buf are one row of n elements with byte strides s0, s1, s2:
 *   d = g + wd p;  buf = first ? d : momentum buf + d;  p += -lr (buf or d).
 * Called with constant strides for contiguous rows so it vectorises. */
static inline void F(sgd_row)(const sgd_ctx *c, int64_t n, char *pp, const char *gp, char *bp,
                              int64_t s0, int64_t s1, int64_t s2) {
    const C neg_lr = K(-c->lr), mom = K(c->momentum), wd = K(c->wd);
    const bool use_wd = c->wd != 0, use_buf = c->momentum != 0, first = c->first;
    for (int64_t i = 0; i < n; i++) {
        T *p = (T *)(pp + i * s0);
        C g = LD(*(const T *)(gp + i * s1)), pv = LD(*p);
        C d = use_wd ? R(g + wd * pv) : g;
        if (use_buf) {
            T *b = (T *)(bp + i * s2);
            d = first ? d : R(R(LD(*b) * mom) + d);
            *b = ST(d);
        }
        *p = ST(pv + neg_lr * d);
    }
}
void F(tn__cpu_sgd)(void *ctx, int64_t n, char **ptr, const int64_t *s) {
    const sgd_ctx *c = ctx;
    const int64_t e = (int64_t)sizeof(T);
    bool use_buf = c->momentum != 0;
    char *bp = use_buf ? ptr[2] : NULL;
    int64_t s2 = use_buf ? s[2] : e;
    if (s[0] == e && s[1] == e && s2 == e)
        F(sgd_row)(c, n, ptr[0], ptr[1], bp, e, e, e);
    else
        F(sgd_row)(c, n, ptr[0], ptr[1], bp, s[0], s[1], s2);
}

/* p, g, m, v are one row of n elements with byte strides s[0..3]:
 *   p *= decay (AdamW's decoupled decay, torch's param.mul_ first);
 *   d = g + wd p;  m = beta1 m + (1-beta1) d;  v = beta2 v + (1-beta2) d d;
 *   p += -lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
 * in torch's operation order (mul_/add_, addcmul_, addcdiv_). Called with
 * constant strides for contiguous rows so it vectorises (with GCC, only
 * under -fno-math-errno: errno-setting sqrt blocks it). */
static inline void F(adam_row)(const adam_ctx *c, int64_t n, char *pp, const char *gp, char *mp,
                               char *vp, int64_t s0, int64_t s1, int64_t s2, int64_t s3) {
    const C b1 = K(c->beta1), b2 = K(c->beta2), a1 = K(c->one_minus_beta1);
    const C a2 = (C)c->one_minus_beta2, wd = K(c->wd), eps = K(c->eps); /* a2: addcmul_ */
    const C bc2s = K(c->bc2_sqrt), neg_step = (C)c->neg_step_size;    /* addcdiv_ */
    const C decay = K(c->decay);
    const bool use_wd = c->wd != 0, use_decay = c->decay != 1;
    for (int64_t i = 0; i < n; i++) {
        T *p = (T *)(pp + i * s0), *m = (T *)(mp + i * s2), *v = (T *)(vp + i * s3);
        C g = LD(*(const T *)(gp + i * s1)), pv = LD(*p);
        if (use_decay) pv = R(pv * decay);
        C d = use_wd ? R(g + wd * pv) : g;
        C mi = R(R(LD(*m) * b1) + a1 * d);
        C vi = R(R(LD(*v) * b2) + a2 * d * d);
        *m = ST(mi);
        *v = ST(vi);
        C denom = R(R(R(TN_M(sqrt, vi)) / bc2s) + eps);
        *p = ST(pv + neg_step * mi / denom);
    }
}
void F(tn__cpu_adam)(void *ctx, int64_t n, char **ptr, const int64_t *s) {
    const int64_t e = (int64_t)sizeof(T);
    if (s[0] == e && s[1] == e && s[2] == e && s[3] == e)
        F(adam_row)(ctx, n, ptr[0], ptr[1], ptr[2], ptr[3], e, e, e, e);
    else
        F(adam_row)(ctx, n, ptr[0], ptr[1], ptr[2], ptr[3], s[0], s[1], s[2], s[3]);
}

#undef T
#undef C
#undef R
#undef K
#undef LD
#undef ST
#undef F
#undef SUF
