/* engine/cpu/gather_impl.h — GATHER of one line for elements of W bits,
 * included by index_kernels.c once per width with W defined: gather_W.
 * out[p] = src[p with p[dim] = idx[p]]; a copy moves bits, so one loop per
 * width serves every dtype.
 */
#define T TN_CAT(TN_CAT(uint, W), _t)

static void TN_NAME(gather, W)(const tn_index_args *a, int64_t L) {
    const line l = line_of(a, L);
    const T *s = (const T *)a->src + l.so;
    T *o = (T *)a->out + l.oo;
    for (int64_t j = 0; j < l.m; j++)
        o[j * l.os] = s[l.ix[j * l.is] * l.ss];
}

#undef T
#undef W
