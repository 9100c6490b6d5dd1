/* debug/numerics_scan.c — the numerics recorder's summary of a tensor:
 * min, max, mean, L2 norm, max |x|, NaN and Inf counts, and a hash of the
 * values (docs/numerics.md).
 *
 * The tensor is read as a contiguous float32 block (a CPU float32 tensor in
 * place, anything else through a float32 copy on the CPU: bf16 and f16 are
 * exact in it, so their hash still tells equal bits from unequal). The block
 * is cut into fixed pieces of TN_NUM_PIECE elements; each piece is summed in
 * 16 float lanes (a loop the compiler vectorises, with no reassociation to
 * ask of it; compiled with -fno-trapping-math, without which GCC keeps the
 * compares scalar) into float64 partials, and the partials are combined in piece
 * order: the summary does not depend on the number of threads. Pieces are
 * split over OpenMP threads above the grain; below it no parallel region at
 * all (libgomp's team costs more than the scan of a small tensor).
 */
#include <math.h>
#include <string.h>

#include "numerics_internal.h"

#define TN_NUM_PIECE 8192
#define TN_NUM_LANES 16

typedef struct piece {
    double min, max, amax, sum, sumsq;
    int64_t nan, inf;
    uint64_t hash;
} piece;

typedef struct lanes {
    float mn[TN_NUM_LANES], mx[TN_NUM_LANES], am[TN_NUM_LANES], sm[TN_NUM_LANES], sq[TN_NUM_LANES];
    uint32_t h[TN_NUM_LANES];
    int32_t nn[TN_NUM_LANES], ni[TN_NUM_LANES];
} lanes;

/* Element v (bits w) into lane j. A NaN compares false: left out of min and
 * max. The hash step is a rotate, a xor and an add (SSE2 has no 32-bit
 * lane multiply: a multiply would keep the loop scalar on the baseline ISA). */
static inline void lane_add(lanes *l, int j, const float *e) {
    float v = *e;
    uint32_t w;
    memcpy(&w, e, sizeof w);
    bool nan = v != v;
    float a = fabsf(v), f = nan ? 0.0f : v;
    uint32_t x = l->h[j] ^ w;
    l->nn[j] += nan;
    l->ni[j] += a == INFINITY;
    l->mn[j] = v < l->mn[j] ? v : l->mn[j];
    l->mx[j] = v > l->mx[j] ? v : l->mx[j];
    l->am[j] = a > l->am[j] ? a : l->am[j];
    l->sm[j] += f;
    l->sq[j] += f * f;
    l->h[j] = ((x << 13) | (x >> 19)) + w;
}

/* x[0..n), n <= TN_NUM_PIECE. NaNs are left out of min, max and the sums
 * (their count says they were there); Infs are kept. */
static void scan_piece(const float *x, int64_t n, piece *p) {
    lanes l;
    for (int j = 0; j < TN_NUM_LANES; j++) {
        l.mn[j] = INFINITY, l.mx[j] = -INFINITY, l.am[j] = 0, l.sm[j] = 0, l.sq[j] = 0;
        l.h[j] = 0x811c9dc5u + (uint32_t)j, l.nn[j] = 0, l.ni[j] = 0;
    }
    int64_t full = n / TN_NUM_LANES * TN_NUM_LANES;
    for (int64_t i = 0; i < full; i += TN_NUM_LANES)
        for (int j = 0; j < TN_NUM_LANES; j++) /* constant trip count: vectorised */
            lane_add(&l, j, &x[i + j]);
    for (int64_t i = full; i < n; i++)
        lane_add(&l, (int)(i - full), &x[i]);
    const float *mn = l.mn, *mx = l.mx, *am = l.am, *sm = l.sm, *sq = l.sq;
    const uint32_t *h = l.h;
    const int32_t *nn = l.nn, *ni = l.ni;
    *p = (piece){.min = INFINITY, .max = -INFINITY, .hash = 0xcbf29ce484222325ull};
    for (int j = 0; j < TN_NUM_LANES; j++) {
        p->min = mn[j] < p->min ? mn[j] : p->min;
        p->max = mx[j] > p->max ? mx[j] : p->max;
        p->amax = am[j] > p->amax ? am[j] : p->amax;
        p->sum += sm[j];
        p->sumsq += sq[j];
        p->nan += nn[j];
        p->inf += ni[j];
        p->hash = (p->hash ^ h[j]) * 0x100000001b3ull;
    }
}

static void combine(tn_num_summary *s, const piece *p) {
    s->min = p->min < s->min ? p->min : s->min;
    s->max = p->max > s->max ? p->max : s->max;
    s->amax = p->amax > s->amax ? p->amax : s->amax;
    s->mean += p->sum; /* a sum until the end */
    s->l2 += p->sumsq;
    s->nan += p->nan;
    s->inf += p->inf;
    s->hash = (s->hash ^ p->hash) * 0x100000001b3ull;
}

static void scan_pieces(const float *x, int64_t n, int64_t first, int64_t last, piece *out) {
    for (int64_t k = first; k < last; k++) {
        int64_t len = n - k * TN_NUM_PIECE < TN_NUM_PIECE ? n - k * TN_NUM_PIECE : TN_NUM_PIECE;
        scan_piece(x + k * TN_NUM_PIECE, len, &out[k - first]);
    }
}

/* The summary of x[0..n). False out of memory (the scratch of a large block). */
static bool scan_block(const float *x, int64_t n, tn_num_summary *s) {
    int64_t np = (n + TN_NUM_PIECE - 1) / TN_NUM_PIECE;
    const int nt = tn__threads_for(n);
    piece one, *ps = np == 1 ? &one : tn__malloc_quiet((size_t)np * sizeof *ps);
    if (!ps) return false;
    if (nt <= 1) {
        scan_pieces(x, n, 0, np, ps);
    } else {
#pragma omp parallel num_threads(nt)
        {
            TN_OMP_SPAN("numerics");
#pragma omp for schedule(static) nowait
            for (int64_t k = 0; k < np; k++)
                scan_pieces(x, n, k, k + 1, &ps[k]);
        }
    }
    for (int64_t k = 0; k < np; k++)
        combine(s, &ps[k]);
    if (ps != &one) tn__mfree(ps);
    return true;
}

void tn__num_summarize(const tn_tensor *t, tn_num_summary *s) {
    int64_t n = tn__numel(t->ndim, t->shape);
    *s = (tn_num_summary){.n = n, .min = INFINITY, .max = -INFINITY, .hash = 0xcbf29ce484222325ull};
    if (n == 0) {
        s->ok = true;
        return;
    }
    bool direct = t->storage->device.type == TN_CPU && t->dtype == TN_F32 && tn__is_contiguous(t);
    tn_tensor *c = direct ? NULL : tn__copy_to_device(t, TN_F32, TN_DEVICE_CPU);
    if (!direct && !c) return; /* s->ok false: the record says the summary is missing */
    s->ok = scan_block((const float *)tn__ptr(direct ? t : c), n, s);
    tn_release(c);
    int64_t finite = n - s->nan;
    s->mean = finite ? s->mean / (double)finite : 0;
    s->l2 = sqrt(s->l2);
}
