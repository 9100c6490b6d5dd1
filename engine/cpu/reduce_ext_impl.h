/* engine/cpu/reduce_ext_impl.h — the max (CMP >) or min (CMP <) kernels of
 * element type T, included by reduce_impl.h with EXT (max or min) and CMP
 * defined; functions are named FX(name): name_EXT_SUF.
 */
#define FX(name) TN_NAME(TN_NAME(name, EXT), SUF)
/* Values are compared in V, the compute type (float32 for the halves, whose
 * round trip through it is exact), read with LDV, stored back with TN_ST. */
#define V TN_CT(SUF)
#define LDV(ptr) TN_LD(SUF, *(const T *)(ptr))
/* (x, i) replaces the running extremum (m, mi) of earlier elements when it is
 * strictly better or the first NaN; so the first extremum / first NaN wins,
 * whatever the blocking. For integer V, x != x is false and folds away. */
#define IS_NAN(x) ((x) != (x)) /* a macro: no self-comparison warning for integers */
#define BETTER(x, m) ((x)CMP(m) || (IS_NAN(x) && !IS_NAN(m)))

/* Running extremum over n elements starting at logical index i0. */
static void FX(blk_arg)(const char *p, int64_t n, int64_t sb, int64_t i0, V *m, int64_t *mi) {
    V best = *m;
    int64_t bi = *mi;
    for (int64_t i = 0; i < n; i++) {
        V x = LDV(p + i * sb);
        if (BETTER(x, best)) {
            best = x;
            bi = i0 + i;
        }
    }
    *m = best;
    *mi = bi;
}
/* Value only of n >= 1 elements in EXT_LANES lanes (a loop GCC vectorises;
 * 8 unrolled lanes it does not); a NaN (flagged) means a rescan. */
static V FX(blk_val)(const char *p, int64_t n, int64_t sb) {
    V m[EXT_LANES], first = LDV(p);
    uint8_t nan[EXT_LANES];
    for (int k = 0; k < EXT_LANES; k++) {
        m[k] = first;
        nan[k] = 0;
    }
    int64_t i = 0;
    if (sb == (int64_t)sizeof(T)) {
        const T *x = (const T *)p;
        for (; i + EXT_LANES <= n; i += EXT_LANES)
            for (int k = 0; k < EXT_LANES; k++) {
                V v = TN_LD(SUF, x[i + k]);
                m[k] = v CMP m[k] ? v : m[k];
                nan[k] |= IS_NAN(v);
            }
    }
    V best = m[0];
    int any_nan = 0;
    for (int k = 0; k < EXT_LANES; k++) {
        best = m[k] CMP best ? m[k] : best;
        any_nan |= nan[k];
    }
    if (any_nan) { /* from the start: the first NaN wins */
        best = first;
        i = 0;
    }
    int64_t unused = 0;
    FX(blk_arg)(p + i * sb, n - i, sb, 0, &best, &unused);
    return best;
}
/* Extremum of n >= 1 elements starting at logical index i0. Contiguous:
 * the vectorised value first, then its first occurrence (the block is in
 * L1 by then), so the value is the element at the index. */
static void FX(blk_ext)(const char *p, int64_t n, int64_t sb, int64_t i0, bool want_idx, V *m,
                        int64_t *mi) {
    *m = LDV(p);
    *mi = i0;
    if (sb != (int64_t)sizeof(T)) {
        FX(blk_arg)(p, n, sb, i0, m, mi);
        return;
    }
    V v = FX(blk_val)(p, n, sb);
    if (!want_idx) {
        *m = v;
        return;
    }
    const T *x = (const T *)p;
    int64_t i = 0;
    if (!IS_NAN(v))
        while (TN_LD(SUF, x[i]) != v)
            i++;
    else
        while (!IS_NAN(TN_LD(SUF, x[i])))
            i++;
    *m = TN_LD(SUF, x[i]);
    *mi = i0 + i;
}
/* Running (m, mi) of earlier blocks merged with a later block's (v, vi). */
static inline void FX(merge)(V *m, int64_t *mi, V v, int64_t vi) {
    if (BETTER(v, *m)) {
        *m = v;
        *mi = vi;
    }
}
static void FX(slice_blk_ext)(const red_job *jb, int64_t b) {
    int64_t i0 = b * SLICE_BLOCK, sr = jb->c->sr;
    FX(blk_ext)
    (jb->p + i0 * sr, min64(SLICE_BLOCK, jb->c->R - i0), sr, i0, jb->want_idx, (V *)jb->part + b,
     jb->part_i + b);
}
/* Extremum of a slice: fixed blocks (on nt threads or one), merged in
 * block order. */
static void FX(slice_ext)(const red_job *jb0, const char *p, V *m, int64_t *mi) {
    const red_ctx *c = jb0->c;
    int64_t nb = (c->R + SLICE_BLOCK - 1) / SLICE_BLOCK;
    V vbuf[STACK_PARTS];
    int64_t ibuf[STACK_PARTS];
    red_job jb = {.c = c, .p = p, .want_idx = jb0->want_idx};
    if (jb0->nt > 1 && nb > 1) {
        jb.part = scratch(vbuf, sizeof vbuf, (size_t)nb * sizeof(V));
        jb.part_i = scratch(ibuf, sizeof ibuf, (size_t)nb * sizeof(int64_t));
    }
    if (jb.part && jb.part_i) {
        const V *pv = jb.part;
        run_blocks(nb, jb0->nt, FX(slice_blk_ext), &jb);
        *m = pv[0];
        *mi = jb.part_i[0];
        for (int64_t b = 1; b < nb; b++)
            FX(merge)(m, mi, pv[b], jb.part_i[b]);
    } else {
        for (int64_t b = 0; b < nb; b++) {
            V v;
            int64_t vi;
            int64_t i0 = b * SLICE_BLOCK;
            FX(blk_ext)
            (p + i0 * c->sr, min64(SLICE_BLOCK, c->R - i0), c->sr, i0, jb.want_idx, &v, &vi);
            if (b == 0) {
                *m = v;
                *mi = vi;
            } else {
                FX(merge)(m, mi, v, vi);
            }
        }
    }
    if (jb.part) scratch_free(jb.part, vbuf);
    if (jb.part_i) scratch_free(jb.part_i, ibuf);
}
static void FX(put)(const red_row *w, int64_t j, V m, int64_t mi) {
    if (w->pv) *(T *)(w->pv + j * w->sv) = TN_ST(SUF, m);
    if (w->pj) *(int64_t *)(w->pj + j * w->sj) = mi;
}
static void FX(out_ext)(const red_job *jb, int64_t j) {
    V m;
    int64_t mi;
    FX(slice_ext)(jb, jb->w->pi + j * jb->w->si, &m, &mi);
    FX(put)(jb->w, j, m, mi);
}
/* Column block cb: its columns advance together over the reduced index. */
static void FX(colblock_ext)(const red_job *jb, int64_t cb) {
    const red_row *w = jb->w;
    int64_t j0 = cb * jb->width, n = min64(jb->width, w->n - j0), sr = jb->c->sr;
    const char *p = w->pi + j0 * w->si;
    V m[CB];
    int64_t mi[CB];
    for (int64_t j = 0; j < n; j++) {
        m[j] = LDV(p + j * w->si);
        mi[j] = 0;
    }
    for (int64_t r = 1; r < jb->c->R; r++)
        for (int64_t j = 0; j < n; j++) {
            V x = LDV(p + r * sr + j * w->si);
            bool b = BETTER(x, m[j]);
            m[j] = b ? x : m[j];
            mi[j] = b ? r : mi[j];
        }
    for (int64_t j = 0; j < n; j++)
        FX(put)(w, j0 + j, m[j], mi[j]);
}
static void FX(row_ext)(const red_ctx *c, const red_row *w, int nt) {
    red_job jb = {.c = c, .w = w, .nt = 1, .want_idx = w->pj != NULL};
    if (column_mode(c, w)) {
        run_blocks(col_blocks(w->n, nt, &jb.width), nt, FX(colblock_ext), &jb);
    } else if (nt > 1 && w->n >= nt) {
        run_blocks(w->n, nt, FX(out_ext), &jb);
    } else {
        jb.nt = nt;
        run_blocks(w->n, 1, FX(out_ext), &jb);
    }
}

#undef FX
#undef V
#undef LDV
#undef BETTER
#undef IS_NAN
#undef EXT
#undef CMP
