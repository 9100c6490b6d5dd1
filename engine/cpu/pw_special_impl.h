/* engine/cpu/pw_special_impl.h — the special pointwise loops of one float
 * dtype, included by pointwise_loop_impl.h with T, CT and F defined: mz_SUF
 * (TN_PW_MASKED_ZERO) and acc_SUF (TN_PW_ACCUM, summed in CT).
 */

/* out = mask ? 0 : x (mask is bool, passed as operand 2) */
static void F(mz)(void *c, int64_t n, char **p, const int64_t *s) {
    (void)c;
    const T zero = TN_ST(SUF, 0);
    if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == 1) { /* vectorised */
        T *o = (T *)p[0];
        const T *x = (const T *)p[1];
        const uint8_t *m = (const uint8_t *)p[2];
        for (int64_t i = 0; i < n; i++)
            o[i] = m[i] ? zero : x[i];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        *(T *)(p[0] + i * s[0]) =
            *(const uint8_t *)(p[2] + i * s[2]) ? zero : *(const T *)(p[1] + i * s[1]);
}

/* TN_PW_ACCUM: out += x where out may repeat (stride 0 over the dims a
 * gradient is summed over); the dispatcher runs it serially. */
static void F(acc)(void *c, int64_t n, char **p, const int64_t *s) {
    (void)c;
    if (s[0] == 0) {
        CT acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += TN_LD(SUF, *(const T *)(p[1] + i * s[1]));
        *(T *)p[0] = TN_ST(SUF, TN_LD(SUF, *(T *)p[0]) + acc);
    } else {
        for (int64_t i = 0; i < n; i++) {
            T *o = (T *)(p[0] + i * s[0]);
            *o = TN_ST(SUF, TN_LD(SUF, *o) + TN_LD(SUF, *(const T *)(p[1] + i * s[1])));
        }
    }
}
