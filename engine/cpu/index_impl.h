/* engine/cpu/index_impl.h — the adding index kernels of one dtype, included
 * by index_kernels.c once per dtype with SUF defined: rows_add_SUF and
 * scatter_add_SUF. ADD is + as T (bool: |, so that true + true stays true;
 * the halves: in float32, rounded at each add, as PyTorch's).
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)
#if TN_IS_BOOL(SUF)
#define ADD(d, s) ((T)((d) | (s)))
#elif TN_IS_HALF(SUF)
#define ADD(d, s) TN_ST(SUF, TN_LD(SUF, d) + TN_LD(SUF, s))
#else
#define ADD(d, s) ((T)((d) + (s)))
#endif

/* ROWS_ADD, out (outer, size, inner)[o, idx[j]] += src (outer, n, inner)[o, j]:
 * destination rows [r0, r1) of the flattened (outer * size) rows; for each
 * outer index they span, the indices in order, adding those in range. */
static void F(rows_add)(const tn_index_args *a, int64_t r0, int64_t r1) {
    T *out = a->out;
    const T *src = a->src;
    const int64_t in = a->inner;
    for (int64_t o = r0 / a->size; o < a->outer && o * a->size < r1; o++) {
        int64_t lo = r0 - o * a->size, hi = r1 - o * a->size;
        for (int64_t j = 0; j < a->n; j++) {
            int64_t r = a->idx[j];
            if (r < lo || r >= hi) continue;
            T *restrict d = out + (o * a->size + r) * in;
            const T *restrict s = src + (o * a->n + j) * in;
            for (int64_t i = 0; i < in; i++)
                d[i] = ADD(d[i], s[i]);
        }
    }
}

/* SCATTER_ADD of line L: out[p with p[dim] = idx[p]] += src[p], in the
 * order of p[dim]. */
static void F(scatter_add)(const tn_index_args *a, int64_t L) {
    const line l = line_of(a, L);
    const T *s = (const T *)a->src + l.so;
    T *o = (T *)a->out + l.oo;
    for (int64_t j = 0; j < l.m; j++) {
        T *d = o + l.ix[j * l.is] * l.os;
        *d = ADD(*d, s[j * l.ss]);
    }
}

#undef T
#undef F
#undef ADD
#undef SUF
