/* The CPU's batch-norm and group-norm kernel: the backend table's `channel_norm` entry
 * (tn_cn_args in engine/core/kernel_args.h). x is (n, c, s), contiguous: n*c planes of s
 * elements. Work is split into items, fixed chunks of CN_CHUNK elements of one plane, so that
 * a few channels of large planes (batch norm over N*H*W) still feed every thread. Each pass
 * over the data runs over items, threads owning whole items; a pass's per-item sums are
 * combined per plane, unit (the statistics' groups) or channel in item order by threads owning
 * whole results: the same bits whatever the thread count.
 *   forward: sums -> means -> squared deviations -> variances -> y, three reads of x
 *            (two with fixed statistics: one);
 *   backward: sum(dy) and sum(dy (x - mean)) per item -> per plane -> dweight, dbias and the
 *            units' terms -> dx, two reads of dy and x.
 */
#include <math.h>

#include "cpu_backend.h"
#include "dtype_dispatch.h"

#define TN_IMPL "channel_norm_impl.h"
#define TN_EACH TN_EACH_WIDE
#include "each_dtype.h"

enum { CN_CHUNK = 4096 };

typedef struct cn_kernels {
    double (*sum)(const void *x, int64_t n, double m);
    void (*dots)(const void *dy, const void *x, int64_t n, double m, double out[2]);
    void (*affine)(void *out, const void *x, const void *g, int64_t n, double m, double a, double b,
                   double c);
} cn_kernels;
#define CN_KERNELS(ID, CT, S) [ID] = {cn_sum_##S, cn_dots_##S, cn_affine_##S},
static const cn_kernels kernels[TN_DTYPE_COUNT] = {TN_FOR_EACH_WIDE(CN_KERNELS)};

/* One call's geometry and its scratch (doubles): part (2 per item), plane sums (2 per plane),
 * unit statistics mean, rstd and the backward's two sums per unit. */
typedef struct cn_run {
    const tn_cn_args *a;
    const cn_kernels *k;
    size_t es;
    int64_t planes, nk, items, units, per_unit;
    double count; /* elements of a unit */
    double *part, *ps, *mean, *rs, *g1, *g2;
} cn_run;

static int64_t unit_of(const cn_run *r, int64_t p) {
    const tn_cn_args *a = r->a;
    int64_t ch = p % a->c;
    return a->groups ? p / a->c * a->groups + ch / (a->c / a->groups) : ch;
}

/* the j-th plane of unit u, in order */
static int64_t plane_of(const cn_run *r, int64_t u, int64_t j) {
    const tn_cn_args *a = r->a;
    if (!a->groups) return j * a->c + u;
    return u / a->groups * a->c + u % a->groups * (a->c / a->groups) + j;
}

static double param(const cn_run *r, const void *p, int64_t i, double none) {
    return p ? tn__load((const char *)p + i * r->es, r->a->dtype) : none;
}

/* item it's plane, offset (elements) and length */
static int64_t item_at(const cn_run *r, int64_t it, int64_t *off, int64_t *len) {
    int64_t p = it / r->nk, k = it % r->nk;
    *off = p * r->a->s + k * CN_CHUNK;
    *len = r->a->s - k * CN_CHUNK < CN_CHUNK ? r->a->s - k * CN_CHUNK : CN_CHUNK;
    return p;
}

/* part[it] = the sum over item it of x (mean NULL) or of (x - mean[unit])^2 */
static void pass_sums(const cn_run *r, const double *mean) {
    const char *x = r->a->x;
    int nt = tn__threads_for(r->planes * r->a->s);
    (void)nt; /* only read by OpenMP */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t it = 0; it < r->items; it++) {
        int64_t off, len, p = item_at(r, it, &off, &len);
        r->part[it] = r->k->sum(x + off * r->es, len, mean ? mean[unit_of(r, p)] : NAN);
    }
}

/* out[u] = the sum of unit u's items of part (stride: doubles per item, field: which) */
static void unit_totals(const cn_run *r, const double *part, int stride, double *out) {
    int nt = tn__threads_for(r->items);
    (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t u = 0; u < r->units; u++) {
        double s = 0;
        for (int64_t j = 0; j < r->per_unit; j++)
            for (int64_t k = 0, p = plane_of(r, u, j); k < r->nk; k++)
                s += part[(p * r->nk + k) * stride];
        out[u] = s;
    }
}

/* The statistics: r->mean and r->rs in double; mean, rstd (and the running statistics) written
 * rounded to the dtype. */
static void statistics(cn_run *r) {
    const tn_cn_args *a = r->a;
    if (a->fixed) {
        for (int64_t u = 0; u < r->units; u++) {
            r->mean[u] = param(r, a->mean, u, 0);
            r->rs[u] = 1.0 / sqrt(param(r, a->var, u, 0) + a->eps);
            tn__store((char *)a->rstd + u * r->es, a->dtype, r->rs[u]);
        }
        return;
    }
    pass_sums(r, NULL);
    unit_totals(r, r->part, 1, r->mean);
    for (int64_t u = 0; u < r->units; u++)
        r->mean[u] /= r->count;
    pass_sums(r, r->mean);
    unit_totals(r, r->part, 1, r->rs); /* the sums of squared deviations */
    for (int64_t u = 0; u < r->units; u++) {
        double ss = r->rs[u], m = r->mean[u];
        r->rs[u] = 1.0 / sqrt(ss / r->count + a->eps);
        tn__store((char *)a->mean + u * r->es, a->dtype, m);
        tn__store((char *)a->rstd + u * r->es, a->dtype, r->rs[u]);
        double mo = a->momentum;
        if (a->running_mean)
            tn__store((char *)a->running_mean + u * r->es, a->dtype,
                      mo * m + (1 - mo) * param(r, a->running_mean, u, 0));
        if (a->running_var)
            tn__store((char *)a->running_var + u * r->es, a->dtype,
                      mo * (ss / (r->count - 1)) + (1 - mo) * param(r, a->running_var, u, 0));
    }
}

static void forward(cn_run *r) {
    const tn_cn_args *a = r->a;
    statistics(r);
    const char *x = a->x;
    char *y = a->y;
    int nt = tn__threads_for(r->planes * a->s);
    (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t it = 0; it < r->items; it++) {
        int64_t off, len, p = item_at(r, it, &off, &len), u = unit_of(r, p), ch = p % a->c;
        double sc = r->rs[u] * param(r, a->weight, ch, 1), b = param(r, a->bias, ch, 0);
        r->k->affine(y + off * r->es, x + off * r->es, NULL, len, r->mean[u], sc, b, 0);
    }
}

/* part[2 it], part[2 it + 1] = sum(dy), sum(dy (x - mean)) over item it; then per plane */
static void backward_sums(cn_run *r) {
    const tn_cn_args *a = r->a;
    const char *x = a->x, *dy = a->dy;
    int nt = tn__threads_for(r->planes * a->s);
    (void)nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (int64_t it = 0; it < r->items; it++) {
            int64_t off, len, p = item_at(r, it, &off, &len);
            r->k->dots(dy + off * r->es, x + off * r->es, len, r->mean[unit_of(r, p)],
                       r->part + 2 * it);
        }
#pragma omp for schedule(static)
        for (int64_t p = 0; p < r->planes; p++) {
            double s1 = 0, s2 = 0;
            for (int64_t k = 0; k < r->nk; k++) {
                s1 += r->part[2 * (p * r->nk + k)];
                s2 += r->part[2 * (p * r->nk + k) + 1];
            }
            r->ps[2 * p] = s1;
            r->ps[2 * p + 1] = s2;
        }
    }
}

/* dweight[ch] = sum over the channel's planes of sum(dy (x - mean)) rstd, dbias[ch] = sum(dy);
 * g1[u], g2[u] = the sums over the unit's planes of weight sum(dy), weight sum(dy (x - mean)) */
static void backward_terms(cn_run *r) {
    const tn_cn_args *a = r->a;
    for (int64_t ch = 0; (a->dweight || a->dbias) && ch < a->c; ch++) {
        double sw = 0, sb = 0;
        for (int64_t i = 0; i < a->n; i++) {
            int64_t p = i * a->c + ch;
            sw += r->ps[2 * p + 1] * r->rs[unit_of(r, p)];
            sb += r->ps[2 * p];
        }
        if (a->dweight) tn__store((char *)a->dweight + ch * r->es, a->dtype, sw);
        if (a->dbias) tn__store((char *)a->dbias + ch * r->es, a->dtype, sb);
    }
    for (int64_t u = 0; a->dx && !a->fixed && u < r->units; u++) {
        double s1 = 0, s2 = 0;
        for (int64_t j = 0; j < r->per_unit; j++) {
            int64_t p = plane_of(r, u, j);
            double w = param(r, a->weight, p % a->c, 1);
            s1 += w * r->ps[2 * p];
            s2 += w * r->ps[2 * p + 1];
        }
        r->g1[u] = s1;
        r->g2[u] = s2;
    }
}

/* dx = rstd (weight dy - g1 / count - (x - mean) rstd^2 g2 / count); fixed: rstd weight dy */
static void backward(cn_run *r) {
    const tn_cn_args *a = r->a;
    for (int64_t u = 0; u < r->units; u++) {
        r->mean[u] = param(r, a->mean, u, 0);
        r->rs[u] = param(r, a->rstd, u, 0);
    }
    backward_sums(r);
    backward_terms(r);
    if (!a->dx) return;
    const char *x = a->x, *dy = a->dy;
    char *dx = a->dx;
    int nt = tn__threads_for(r->planes * a->s);
    (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t it = 0; it < r->items; it++) {
        int64_t off, len, p = item_at(r, it, &off, &len), u = unit_of(r, p);
        double rs = r->rs[u], gw = rs * param(r, a->weight, p % a->c, 1);
        double sx = a->fixed ? 0 : -rs * rs * rs * r->g2[u] / r->count;
        double c0 = a->fixed ? 0 : -rs * r->g1[u] / r->count;
        r->k->affine(dx + off * r->es, x + off * r->es, dy + off * r->es, len, r->mean[u], sx, c0,
                     gw);
    }
}

tn_status tn__cpu_channel_norm(int dev, const tn_cn_args *a) {
    (void)dev;
    if ((unsigned)a->dtype >= TN_DTYPE_COUNT || !kernels[a->dtype].sum)
        return tn__error(TN_ERR_DTYPE, "batch_norm: no CPU kernel for %s", tn_dtype_name(a->dtype));
    if (a->n == 0 || a->c == 0 || a->s == 0) return TN_OK;
    cn_run r = {.a = a, .k = &kernels[a->dtype], .es = tn__dtype_sizes[a->dtype]};
    r.planes = a->n * a->c;
    r.nk = (a->s + CN_CHUNK - 1) / CN_CHUNK;
    r.items = r.planes * r.nk;
    r.units = a->groups ? a->n * a->groups : a->c;
    r.per_unit = a->groups ? a->c / a->groups : a->n;
    r.count = (double)(r.per_unit * a->s);
    size_t nd = (size_t)(2 * r.items + 2 * r.planes + 4 * r.units);
    double *buf = tn__malloc(nd * sizeof *buf);
    if (!buf) return tn_last_status();
    r.part = buf;
    r.ps = r.part + 2 * r.items;
    r.mean = r.ps + 2 * r.planes;
    r.rs = r.mean + r.units;
    r.g1 = r.rs + r.units;
    r.g2 = r.g1 + r.units;
    if (a->mode == TN_CN_BWD)
        backward(&r);
    else
        forward(&r);
    tn__mfree(buf);
    return TN_OK;
}
