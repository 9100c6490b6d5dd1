/* engine/cpu/where_impl.h — TN_PW_WHERE's loop for elements of W bits,
 * included by pw_kernels.c once per width with W defined: where_W.
 * out = cond ? x : y (operands out, cond (bool), x, y).
 */
#define T TN_CAT(TN_CAT(uint, W), _t)

static void TN_NAME(where, W)(void *c, int64_t n, char **p, const int64_t *s) {
    (void)c;
    if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        T *o = (T *)p[0];
        const uint8_t *m = (const uint8_t *)p[1];
        const T *x = (const T *)p[2], *y = (const T *)p[3];
        for (int64_t i = 0; i < n; i++)
            o[i] = m[i] ? x[i] : y[i];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        *(T *)(p[0] + i * s[0]) = *(const uint8_t *)(p[1] + i * s[1])
                                      ? *(const T *)(p[2] + i * s[2])
                                      : *(const T *)(p[3] + i * s[3]);
}

#undef T
#undef W
