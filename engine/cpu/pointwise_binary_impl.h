/* engine/cpu/pointwise_binary_impl.h — the binary row loop for input T and
 * output OT, included by pointwise_loop_impl.h with T, OT and LOOP (the
 * function's name), OC (op's result type) and STO (OC -> OT) defined:
 * out[i] = STO(op(x[i], y[i])), the inputs loaded as CT. Always inlined into
 * each op's loop, where op is a constant and inlined in turn, so every
 * (op, dtype) gets its own vectorised loop. Paths: contiguous, y broadcast,
 * x broadcast, strided. */
static inline __attribute__((always_inline)) void LOOP(int64_t n, char **p, const int64_t *s,
                                                       OC (*op)(CT, CT)) {
    if (s[0] == sizeof(OT) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
        OT *o = (OT *)p[0];
        const T *xs = (const T *)p[1], *ys = (const T *)p[2];
        for (int64_t i = 0; i < n; i++)
            o[i] = STO(op(TN_LD(SUF, xs[i]), TN_LD(SUF, ys[i])));
    } else if (s[0] == sizeof(OT) && s[1] == sizeof(T) && s[2] == 0) {
        OT *o = (OT *)p[0];
        const T *xs = (const T *)p[1];
        const CT y = TN_LD(SUF, *(const T *)p[2]);
        for (int64_t i = 0; i < n; i++)
            o[i] = STO(op(TN_LD(SUF, xs[i]), y));
    } else if (s[0] == sizeof(OT) && s[1] == 0 && s[2] == sizeof(T)) {
        OT *o = (OT *)p[0];
        const CT x = TN_LD(SUF, *(const T *)p[1]);
        const T *ys = (const T *)p[2];
        for (int64_t i = 0; i < n; i++)
            o[i] = STO(op(x, TN_LD(SUF, ys[i])));
    } else {
        char *o = p[0];
        const char *xp = p[1], *yp = p[2];
        for (int64_t i = 0; i < n; i++, o += s[0], xp += s[1], yp += s[2])
            *(OT *)o = STO(op(TN_LD(SUF, *(const T *)xp), TN_LD(SUF, *(const T *)yp)));
    }
}

#undef OT
#undef OC
#undef STO
#undef LOOP
