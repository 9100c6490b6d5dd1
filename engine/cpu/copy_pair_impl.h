/* engine/cpu/copy_pair_impl.h — the copy loop from dtype SS to dtype SUF,
 * included by copy_impl.h once per source dtype with SS defined:
 * copy_SUF_SS. dst is (N), src is (N) or broadcast (stride 0):
 * out[i] = src[i] as DT (TN_TO: halves through float32).
 */
#define ST TN_T(SS)

static void TN_NAME(TN_NAME(copy, SUF), SS)(void *ctx, int64_t n, char **p, const int64_t *s) {
    (void)ctx;
    if (s[0] == sizeof(DT) && s[1] == sizeof(ST)) {
        DT *o = (DT *)p[0];
        const ST *x = (const ST *)p[1];
        for (int64_t i = 0; i < n; i++)
            o[i] = TN_TO(SUF, TN_LD(SS, x[i]));
    } else if (s[0] == sizeof(DT) && s[1] == 0) {
        DT *o = (DT *)p[0];
        DT v = TN_TO(SUF, TN_LD(SS, *(const ST *)p[1]));
        for (int64_t i = 0; i < n; i++)
            o[i] = v;
    } else if (s[0] == sizeof(DT) && s[1] % (int64_t)sizeof(ST) == 0) {
        /* a transposed source (iter.c tiles it): indexed, so it vectorises
         * as a gather */
        DT *o = (DT *)p[0];
        const ST *x = (const ST *)p[1];
        int64_t xs = s[1] / (int64_t)sizeof(ST);
        for (int64_t i = 0; i < n; i++)
            o[i] = TN_TO(SUF, TN_LD(SS, x[i * xs]));
    } else {
        char *o = p[0];
        const char *x = p[1];
        for (int64_t i = 0; i < n; i++, o += s[0], x += s[1])
            *(DT *)o = TN_TO(SUF, TN_LD(SS, *(const ST *)x));
    }
}

#undef ST
#undef SS
