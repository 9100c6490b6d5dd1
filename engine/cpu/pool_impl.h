/* engine/cpu/pool_impl.h — the pooling kernels of one float dtype over one
 * plane (tn_pool_args), included by pool_kernels.c once per dtype with SUF
 * defined: max_fwd_SUF, amax_fwd_SUF, max_bwd_SUF, avg_fwd_SUF, aavg_fwd_SUF,
 * avg_bwd_SUF, aavg_bwd_SUF, all of the type pool_plane_fn.
 */
#define T TN_T(SUF)
#define F(name) TN_NAME(name, SUF)

/* The first index at or after x0 - k*d (k >= 0) that is >= 0. */
static inline int64_t F(first_in)(int64_t x0, int64_t d) {
    return x0 >= 0 ? x0 : x0 + (-x0 + d - 1) / d * d;
}

/* One tap over n outputs: output k reads r[k*sw] (flat index ix + k*sw). restrict and no
 * branch: the compiler vectorises both; inlined with sw a constant where it is 1 or 2. */
static inline __attribute__((always_inline)) void F(max_tap)(const T *restrict r, T *restrict y,
                                                             int64_t *restrict id, int64_t n,
                                                             int64_t sw, int64_t ix) {
    for (int64_t k = 0; k < n; k++) {
        T v = r[k * sw], m = y[k];
        bool take = (v > m) | (v != v); /* the first maximum; any NaN */
        y[k] = take ? v : m;
        id[k] = take ? ix + k * sw : id[k];
    }
}

static inline __attribute__((always_inline)) void F(sum_tap)(const T *restrict r, T *restrict y,
                                                             int64_t n, int64_t sw) {
    for (int64_t k = 0; k < n; k++)
        y[k] += r[k * sw];
}

/* The tap j of every output row (lo, hi, x0): output columns [lo, hi) read input column
 * x0 + ox*sw. Computed once per plane for the first TAP_CACHE taps (the divisions of
 * tn__window_range stay out of the row loop), on the fly past them. */
#define TAP_CACHE 16
typedef struct F(taps) {
    int64_t lo[TAP_CACHE], hi[TAP_CACHE];
} F(taps);

static void F(taps_init)(const tn_pool_args *a, int64_t dw, F(taps) * t) {
    for (int64_t j = 0; j < a->kw && j < TAP_CACHE; j++)
        tn__window_range(j * dw - a->pw, a->sw, a->w, a->ow, &t->lo[j], &t->hi[j]);
}

static inline void F(tap_range)(const tn_pool_args *a, const F(taps) * t, int64_t j, int64_t x0,
                                int64_t *lo, int64_t *hi) {
    if (j < TAP_CACHE)
        *lo = t->lo[j], *hi = t->hi[j];
    else
        tn__window_range(x0, a->sw, a->w, a->ow, lo, hi);
}

/* Row y of a max over sliding windows: tap (i, j) of input row iy. */
static void F(max_row_tap)(const tn_pool_args *a, const T *row, T *y, int64_t *id, int64_t lo,
                           int64_t hi, int64_t x0, int64_t base) {
    const T *r = row + x0 + lo * a->sw;
    int64_t ix = base + x0 + lo * a->sw, n = hi - lo;
    if (a->sw == 1)
        F(max_tap)(r, y + lo, id + lo, n, 1, ix);
    else if (a->sw == 2)
        F(max_tap)(r, y + lo, id + lo, n, 2, ix);
    else
        F(max_tap)(r, y + lo, id + lo, n, a->sw, ix);
}

/* Max over sliding windows, output rows [oy0, oh) of plane x (y and id: row oy0's outputs).
 * The taps run outermost, each over the row of outputs it reaches (max_tap); each output still
 * sees its taps in order (i, j), so the first maximum wins and a NaN is always taken, as
 * PyTorch's scan. */
static void F(max_fwd_from)(const tn_pool_args *a, const T *x, T *y, int64_t *id, int64_t oy0) {
    F(taps) t;
    F(taps_init)(a, a->dw, &t);
    for (int64_t oy = oy0; oy < a->oh; oy++, y += a->ow, id += a->ow) {
        int64_t y0 = oy * a->sh - a->ph, iy0 = F(first_in)(y0, a->dh);
        for (int64_t ox = 0; ox < a->ow; ox++) {
            y[ox] = (T)-INFINITY; /* the window's first tap unless a value beats it */
            id[ox] = iy0 * a->w + F(first_in)(ox * a->sw - a->pw, a->dw);
        }
        for (int64_t i = 0; i < a->kh; i++) {
            int64_t iy = y0 + i * a->dh;
            if (iy < 0 || iy >= a->h) continue;
            for (int64_t j = 0; j < a->kw; j++) {
                int64_t x0 = j * a->dw - a->pw, lo, hi;
                F(tap_range)(a, &t, j, x0, &lo, &hi);
                F(max_row_tap)(a, x + iy * a->w, y, id, lo, hi, x0, iy * a->w);
            }
        }
    }
}

/* Output rows [0, oh) of a 2x2 window at stride 2 wholly inside the plane (no padding, no
 * dilation; the CNN's pool): the four taps of an output in one pass, in max_fwd's tap order
 * ((0, 0), (0, 1), (1, 0), (1, 1)) and with its rule, so the same values and indices, where
 * max_fwd_from makes four passes over each output row, each a loop of a few elements. */
static void F(max2x2_rows)(const tn_pool_args *a, const T *x, T *restrict y, int64_t *restrict id,
                           int64_t oh) {
    const int64_t w = a->w, ow = a->ow;
    for (int64_t oy = 0; oy < oh; oy++, y += ow, id += ow) {
        const T *restrict r0 = x + 2 * oy * w, *restrict r1 = r0 + w;
        const int64_t i0 = 2 * oy * w;
        for (int64_t ox = 0; ox < ow; ox++) {
            T m = r0[2 * ox], v;
            int64_t k = i0 + 2 * ox;
            bool take;
            v = r0[2 * ox + 1], take = (v > m) | (v != v);
            m = take ? v : m, k = take ? i0 + 2 * ox + 1 : k;
            v = r1[2 * ox], take = (v > m) | (v != v);
            m = take ? v : m, k = take ? i0 + w + 2 * ox : k;
            v = r1[2 * ox + 1], take = (v > m) | (v != v);
            m = take ? v : m, k = take ? i0 + w + 2 * ox + 1 : k;
            y[ox] = m;
            id[ox] = k;
        }
    }
}

static void F(max_fwd)(const tn_pool_args *a, int64_t p) {
    const T *x = (const T *)a->in + p * a->h * a->w;
    T *y = (T *)a->out + p * a->oh * a->ow;
    int64_t *id = a->idx + p * a->oh * a->ow;
    if (a->kh == 2 && a->kw == 2 && a->sh == 2 && a->sw == 2 && a->dh == 1 && a->dw == 1 &&
        a->ph == 0 && a->pw == 0 && 2 * a->ow <= a->w) {
        /* rows whose windows are whole (ceil_mode may add a last, partial one) */
        int64_t whole = a->oh < a->h / 2 ? a->oh : a->h / 2;
        F(max2x2_rows)(a, x, y, id, whole);
        if (whole == a->oh) return;
        y += whole * a->ow, id += whole * a->ow;
        /* the last row below, by the general loop from oy = whole */
        F(max_fwd_from)(a, x, y, id, whole);
        return;
    }
    F(max_fwd_from)(a, x, y, id, 0);
}

/* Max over adaptive windows, each scanned in row-major order. */
static void F(amax_fwd)(const tn_pool_args *a, int64_t p) {
    const T *x = (const T *)a->in + p * a->h * a->w;
    T *y = (T *)a->out + p * a->oh * a->ow;
    int64_t *id = a->idx + p * a->oh * a->ow;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        int64_t y0 = tn_pool_start(oy, a->oh, a->h), y1 = tn_pool_end(oy, a->oh, a->h);
        for (int64_t ox = 0; ox < a->ow; ox++, y++, id++) {
            int64_t x0 = tn_pool_start(ox, a->ow, a->w), x1 = tn_pool_end(ox, a->ow, a->w);
            T m = (T)-INFINITY;
            int64_t mi = y0 * a->w + x0;
            for (int64_t iy = y0; iy < y1; iy++)
                for (int64_t ix = x0; ix < x1; ix++) {
                    T v = x[iy * a->w + ix];
                    if (v > m || v != v) m = v, mi = iy * a->w + ix;
                }
            *y = m;
            *id = mi;
        }
    }
}

/* The plane's gradient: each output's gradient added at its index, in output order. */
static void F(max_bwd)(const tn_pool_args *a, int64_t p) {
    int64_t hw = a->h * a->w, n = a->oh * a->ow;
    T *gx = (T *)a->out + p * hw;
    const T *g = (const T *)a->in + p * n;
    const int64_t *id = a->idx + p * n;
    memset(gx, 0, (size_t)hw * sizeof(T));
    for (int64_t k = 0; k < n; k++)
        if ((uint64_t)id[k] < (uint64_t)hw) gx[id[k]] += g[k];
}

/* Average over sliding windows: the sums taps-outermost as max_fwd's (each
 * output adds its taps in order (i, j), in the dtype, as PyTorch), then one
 * division per output. */
static void F(avg_fwd)(const tn_pool_args *a, int64_t p) {
    const T *x = (const T *)a->in + p * a->h * a->w;
    T *y = (T *)a->out + p * a->oh * a->ow;
    F(taps) t;
    F(taps_init)(a, 1, &t);
    for (int64_t oy = 0; oy < a->oh; oy++, y += a->ow) {
        memset(y, 0, (size_t)a->ow * sizeof(T));
        for (int64_t i = 0; i < a->kh; i++) {
            int64_t iy = oy * a->sh - a->ph + i;
            if (iy < 0 || iy >= a->h) continue;
            const T *row = x + iy * a->w;
            for (int64_t j = 0; j < a->kw; j++) {
                int64_t x0 = j - a->pw, lo, hi;
                F(tap_range)(a, &t, j, x0, &lo, &hi);
                const T *r = row + x0 + lo * a->sw;
                if (a->sw == 1)
                    F(sum_tap)(r, y + lo, hi - lo, 1);
                else if (a->sw == 2)
                    F(sum_tap)(r, y + lo, hi - lo, 2);
                else
                    F(sum_tap)(r, y + lo, hi - lo, a->sw);
            }
        }
        for (int64_t ox = 0; ox < a->ow; ox++) {
            int64_t d = tn_pool_avg_div(a, oy, ox);
            y[ox] = d ? y[ox] / (T)d : (T)0; /* d == 0: a window of padding only */
        }
    }
}

/* Average over adaptive windows: the sum in the dtype, divided by the rows'
 * count, then by the columns', as PyTorch. */
static void F(aavg_fwd)(const tn_pool_args *a, int64_t p) {
    const T *x = (const T *)a->in + p * a->h * a->w;
    T *y = (T *)a->out + p * a->oh * a->ow;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        int64_t y0 = tn_pool_start(oy, a->oh, a->h), y1 = tn_pool_end(oy, a->oh, a->h);
        for (int64_t ox = 0; ox < a->ow; ox++) {
            int64_t x0 = tn_pool_start(ox, a->ow, a->w), x1 = tn_pool_end(ox, a->ow, a->w);
            T s = 0;
            for (int64_t iy = y0; iy < y1; iy++)
                for (int64_t ix = x0; ix < x1; ix++)
                    s += x[iy * a->w + ix];
            *y++ = s / (T)(y1 - y0) / (T)(x1 - x0);
        }
    }
}

/* The plane's gradient of average pooling: each output's g / divisor added
 * over its window, outputs in order; a window's row is one contiguous run. */
static void F(avg_bwd)(const tn_pool_args *a, int64_t p) {
    T *gx = (T *)a->out + p * a->h * a->w;
    const T *g = (const T *)a->in + p * a->oh * a->ow;
    memset(gx, 0, (size_t)(a->h * a->w) * sizeof(T));
    for (int64_t oy = 0; oy < a->oh; oy++) {
        int64_t y0 = oy * a->sh - a->ph, y1 = y0 + a->kh < a->h ? y0 + a->kh : a->h;
        y0 = y0 > 0 ? y0 : 0;
        for (int64_t ox = 0; ox < a->ow; ox++, g++) {
            int64_t x0 = ox * a->sw - a->pw, x1 = x0 + a->kw < a->w ? x0 + a->kw : a->w;
            x0 = x0 > 0 ? x0 : 0;
            int64_t d = tn_pool_avg_div(a, oy, ox);
            if (!d) continue;
            T v = *g / (T)d;
            for (int64_t iy = y0; iy < y1; iy++)
                for (int64_t ix = x0; ix < x1; ix++)
                    gx[iy * a->w + ix] += v;
        }
    }
}

static void F(aavg_bwd)(const tn_pool_args *a, int64_t p) {
    T *gx = (T *)a->out + p * a->h * a->w;
    const T *g = (const T *)a->in + p * a->oh * a->ow;
    memset(gx, 0, (size_t)(a->h * a->w) * sizeof(T));
    for (int64_t oy = 0; oy < a->oh; oy++) {
        int64_t y0 = tn_pool_start(oy, a->oh, a->h), y1 = tn_pool_end(oy, a->oh, a->h);
        for (int64_t ox = 0; ox < a->ow; ox++, g++) {
            int64_t x0 = tn_pool_start(ox, a->ow, a->w), x1 = tn_pool_end(ox, a->ow, a->w);
            T v = *g / (T)(y1 - y0) / (T)(x1 - x0);
            for (int64_t iy = y0; iy < y1; iy++)
                for (int64_t ix = x0; ix < x1; ix++)
                    gx[iy * a->w + ix] += v;
        }
    }
}

#undef T
#undef F
#undef SUF
#undef TAP_CACHE
