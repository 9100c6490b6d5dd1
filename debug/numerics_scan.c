/* debug/numerics_scan.c — the numerics recorder's summary of a tensor:
 * min, max, mean, L2 norm, max |x|, NaN and Inf counts, and a hash of the
 * values (docs/numerics.md).
 *
 * The tensor is read as a contiguous float32 block (a CPU float32 tensor in
 * place, anything else through a float32 copy on the CPU: bf16 and f16 are
 * exact in it, so their hash still tells equal bits from unequal). The block
 * is cut into fixed pieces of TN_NUM_PIECE elements; each piece is summed in
 * 16 float lanes (a loop the compiler vectorises, with no reassociation to
 * ask of it) into float64 partials, and the partials are combined in piece
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

/* x[0..n), n <= TN_NUM_PIECE. NaNs are left out of min, max and the sums
 * (their count says they were there); Infs are kept. */
static void scan_piece(const float *x, int64_t n, piece *p) {
    float mn[TN_NUM_LANES], mx[TN_NUM_LANES], am[TN_NUM_LANES], sm[TN_NUM_LANES],
        sq[TN_NUM_LANES];
    uint32_t h[TN_NUM_LANES];
    int32_t nn[TN_NUM_LANES], ni[TN_NUM_LANES];
    for (int j = 0; j < TN_NUM_LANES; j++) {
        mn[j] = INFINITY, mx[j] = -INFINITY, am[j] = 0, sm[j] = 0, sq[j] = 0;
        h[j] = 0x811c9dc5u + (uint32_t)j, nn[j] = 0, ni[j] = 0;
    }
    int64_t full = n / TN_NUM_LANES * TN_NUM_LANES;
    for (int64_t i = 0; i < n; i += TN_NUM_LANES) {
        int lanes = i < full ? TN_NUM_LANES : (int)(n - i);
        for (int j = 0; j < lanes; j++) {
            float v = x[i + j];
            uint32_t w;
            memcpy(&w, &x[i + j], sizeof w);
            bool nan = v != v;
            float a = fabsf(v), f = nan ? 0.0f : v;
            nn[j] += nan;
            ni[j] += a == INFINITY;
            mn[j] = v < mn[j] ? v : mn[j]; /* a NaN compares false: skipped */
            mx[j] = v > mx[j] ? v : mx[j];
            am[j] = a > am[j] ? a : am[j];
            sm[j] += f;
            sq[j] += f * f;
            h[j] = (h[j] ^ w) * 0x01000193u;
        }
    }
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
    *s = (tn_num_summary){.n = n, .min = INFINITY, .max = -INFINITY,
                          .hash = 0xcbf29ce484222325ull};
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
