/* engine/cpu/pw_special_impl.h — the special pointwise loops of one float
 * dtype, included by pointwise_loop_impl.h with T and F defined: mz_SUF
 * (TN_PW_MASKED_ZERO) and acc_SUF (TN_PW_ACCUM).
 */

/* out = mask ? 0 : x (mask is bool, passed as operand 2) */
static void F(mz)(void *c, int64_t n, char **p, const int64_t *s) {
    (void)c;
    if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == 1) { /* vectorised */
        T *o = (T *)p[0];
        const T *x = (const T *)p[1];
        const uint8_t *m = (const uint8_t *)p[2];
        for (int64_t i = 0; i < n; i++)
            o[i] = m[i] ? (T)0 : x[i];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        *(T *)(p[0] + i * s[0]) =
            *(const uint8_t *)(p[2] + i * s[2]) ? (T)0 : *(const T *)(p[1] + i * s[1]);
}

/* TN_PW_ACCUM: out += x where out may repeat (stride 0 over the dims a
 * gradient is summed over); the dispatcher runs it serially. */
static void F(acc)(void *c, int64_t n, char **p, const int64_t *s) {
    (void)c;
    if (s[0] == 0) {
        T acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += *(const T *)(p[1] + i * s[1]);
        *(T *)p[0] += acc;
    } else {
        for (int64_t i = 0; i < n; i++)
            *(T *)(p[0] + i * s[0]) += *(const T *)(p[1] + i * s[1]);
    }
}
