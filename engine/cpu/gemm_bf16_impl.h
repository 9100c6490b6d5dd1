/* engine/cpu/gemm_bf16_impl.h — the bfloat16 product (gemm_bf16.h) on six vector operations
 * that the including file defines, once on AVX512-BF16 (gemm_bf16.c) and once in plain C
 * (gemm_bf16_twin.c), so that both run this code:
 *
 *   vacc                16 float32 lanes, the accumulators
 *   vpairs              16 pairs of bfloat16: lane l's pair is elements 2l (low) and 2l + 1
 *   v_zero()            a vacc of zeros
 *   v_load(p)           the vpairs at p (32 uint16_t, any alignment)
 *   v_bcast(p)          the pair at p (a uint32_t: low half first) in every lane
 *   v_dp(acc, a, b)     vdpbf16ps: lane l += a's odd * b's odd, then += a's even * b's even
 *   v_store(p, acc)     the 16 floats to p
 *   v_loadf(p)          the vacc of the 16 floats at p
 *
 * and GB_ENTRY, the name of the entry (tn_gemm_bf16_fn).
 *
 * Scheme (BLIS's, with k in pairs): B is packed per block of nc columns into GB_NR-column
 * micro-panels whose rows are k pairs, the two values of each column side by side (the lane
 * layout of vdpbf16ps); A per block of mc rows into GB_MR-row micro-panels of 32-bit words, one
 * k pair each, broadcast to every lane. An odd k is padded with a zero pair element, edge rows
 * and columns with zeros. An A block (mc rows by one K block) stays within ~512 KiB (L2). A
 * packed B block (all of k by nc columns) is read from L3 one micro-panel at a time, and each B
 * block packs all of the task's A again, so it is wide: up to 4 MiB (2048 columns to k = 1024,
 * 1024 at k = 2048), and 256 columns past k = 8192 (8 MiB at k = 16384) while that fits 16 MiB,
 * then fewer (32 columns, 64 bytes per k, at least). Measured on Zen 4: a
 * 1 MiB limit made the 2048 x 2048 product 10% slower on two threads (each task of 683 columns
 * packed its 1024 rows of A three times), and letting the block shrink to 32 columns at
 * k = 16384 made the product 1.7x slower.
 *
 * Loops: jc (nc columns: pack B) -> ic (mc rows: pack A) -> pc (GB_KC k pairs) -> jr -> ir. The
 * micro-kernel keeps a GB_MR x GB_NR tile of float32 sums in registers (24 of the 32 ZMM
 * registers) over one K block, and both micro-panels stream from L2: at k = 2048 a B micro-panel
 * is 128 KiB and an A micro-panel 48 KiB; the B one is read again by each row tile of the block.
 * A K block is 1024 pairs (k = 2048) because that was fastest where it was measured (Zen 4, 1 MiB
 * L2, 32 KiB L1): K blocks of 128 pairs, whose B slice (16 KiB) stays in L1 while ir runs, made
 * the 2048 x 2048 product 8.5% slower than none, and 192 or 512 pairs sat between the two (each
 * tile then restarts its short A and B streams every 128 pairs). The K block keeps a very long k
 * within L2: there the row block shrinks (below) and a micro-panel over the whole of k would be
 * re-read from L3 by fewer and fewer row tiles.
 * Between K blocks a tile's sums wait in float32 in the thread's buffer (mc x nc floats, tile by
 * tile): the first block starts from zeros, the others from those sums, and only the last rounds
 * to bfloat16 (gb_store), so each output is still rounded once, and its sum is its k pairs in
 * order in one lane as over the whole of k (a float32 stored and loaded is the same float32):
 * the same bits as without K blocks. When k fits one K block there is no buffer.
 *
 * Threads: each task owns a range of whole row tiles by a range of whole column tiles (gb_one)
 * with its own packing buffers, and batches go one per thread when there are more batches than
 * row tiles (as gemm.c). An element's sum is its k pairs in order in one lane whichever task
 * or tile position computes it, so the bits do not depend on the thread count.
 */
#include "../core/half.h"
#include "gemm.h" /* tn__gemm_work, tn__gemm_batch_item */

#include <math.h>
#include <stdalign.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define GB_MR 12
#define GB_NR 32 /* two vectors */
#define GB_MC 96
#define GB_NC 2048
#define GB_KC 1024           /* k pairs of a K block (above) */
#define GB_A_WORDS (1 << 17) /* 32-bit words of a packed A block, at most */
#define GB_B_WORDS (1 << 20) /* of a packed B block, ... */
#define GB_NC_FLOOR 256      /* ... unless its columns would be fewer (the A repacks, above), */
#define GB_B_MAX_WORDS (1 << 22) /* ... as long as it stays within 16 MiB */

#define GB_PACK_RUN 32 /* pairs of an A row packed at a time: two cache lines */
#define GB_LITTLE_ENDIAN (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)

static int64_t gb_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* x rounded down to a multiple of m, within [m, hi] */
static int64_t gb_fit(int64_t x, int64_t m, int64_t hi) {
    x = x / m * m;
    return x < m ? m : x > hi ? hi : x;
}

/* (k x nc) block of B at b -> GB_NR-column micro-panels of kp = ceil(k/2) pair rows, pair row p
 * of column j at 2j, 2j + 1 (k = 2p, 2p + 1); zeros past k and nc. B read transposed (a weight
 * x^T, rs = 1) has each pair adjacent: GB_PACK_RUN pairs of a column at a time, as gb_pack_a's
 * rows; B row-major interleaves two rows, a fixed-length loop over a whole micro-panel that the
 * compiler vectorises. */
static void gb_pack_b(int64_t k, int64_t nc, const uint16_t *b, int64_t rs, int64_t cs,
                      uint16_t *restrict dst) {
    const int64_t kp = (k + 1) / 2, kw = k / 2; /* kw: the whole pairs */
    for (int64_t j0 = 0; j0 < nc; j0 += GB_NR, dst += 2 * GB_NR * kp) {
        const int nr = (int)gb_min(GB_NR, nc - j0);
        const uint16_t *r = b + j0 * cs;
        if (rs == 1)
            for (int64_t p0 = 0; p0 < kw; p0 += GB_PACK_RUN) {
                const int64_t p1 = gb_min(kw, p0 + GB_PACK_RUN);
                for (int j = 0; j < nr; j++)
                    for (int64_t p = p0; p < p1; p++)
                        memcpy(dst + (p * GB_NR + j) * 2, r + j * cs + 2 * p, 2 * sizeof *dst);
            }
        else if (cs == 1 && nr == GB_NR)
            for (int64_t p = 0; p < kw; p++) {
                const uint16_t *restrict r0 = r + 2 * p * rs, *restrict r1 = r0 + rs;
                uint16_t *restrict d = dst + p * 2 * GB_NR;
                for (int j = 0; j < GB_NR; j++) {
                    d[2 * j] = r0[j];
                    d[2 * j + 1] = r1[j];
                }
            }
        else
            for (int64_t p = 0; p < kw; p++)
                for (int j = 0; j < nr; j++) {
                    dst[(p * GB_NR + j) * 2] = r[2 * p * rs + j * cs];
                    dst[(p * GB_NR + j) * 2 + 1] = r[(2 * p + 1) * rs + j * cs];
                }
        if (k & 1) /* the last pair's second value: zero */
            for (int j = 0; j < nr; j++) {
                dst[(kw * GB_NR + j) * 2] = r[(k - 1) * rs + j * cs];
                dst[(kw * GB_NR + j) * 2 + 1] = 0;
            }
        if (nr < GB_NR)
            for (int64_t p = 0; p < kp; p++)
                memset(dst + (p * GB_NR + nr) * 2, 0, (size_t)(GB_NR - nr) * 2 * sizeof *dst);
    }
}

/* (mc x k) block of A at a -> GB_MR-row micro-panels of kp words, word p of row i holding
 * A(i, 2p) in its low half and A(i, 2p + 1) in its high half; zeros past k and mc. A row-major
 * A's pair is one 32-bit load where the CPU is little-endian (its first element is then the
 * word's low half), taken GB_PACK_RUN pairs of a row at a time: pair by pair across the rows,
 * rows a multiple of 4 KiB apart (k = 2048) would evict each other's lines from L1's sets before
 * their next pair was read (a seventh of the product's time at k = 2048 on Zen 4). */
static void gb_pack_a(int64_t mc, int64_t k, const uint16_t *a, int64_t rs, int64_t cs,
                      uint32_t *restrict dst) {
    const int64_t kp = (k + 1) / 2, kw = k / 2; /* kw: the whole pairs */
    for (int64_t i0 = 0; i0 < mc; i0 += GB_MR, dst += GB_MR * kp) {
        const int mr = (int)gb_min(GB_MR, mc - i0);
        const uint16_t *r = a + i0 * rs;
        if (cs == 1 && GB_LITTLE_ENDIAN)
            for (int64_t p0 = 0; p0 < kw; p0 += GB_PACK_RUN) {
                const int64_t p1 = gb_min(kw, p0 + GB_PACK_RUN);
                for (int i = 0; i < mr; i++)
                    for (int64_t p = p0; p < p1; p++)
                        memcpy(dst + p * GB_MR + i, r + i * rs + 2 * p, sizeof *dst);
            }
        else
            for (int64_t p = 0; p < kw; p++)
                for (int i = 0; i < mr; i++)
                    dst[p * GB_MR + i] =
                        r[i * rs + 2 * p * cs] | (uint32_t)r[i * rs + (2 * p + 1) * cs] << 16;
        if (k & 1)
            for (int i = 0; i < mr; i++)
                dst[kw * GB_MR + i] = r[i * rs + (k - 1) * cs];
        if (mr < GB_MR)
            for (int64_t p = 0; p < kp; p++)
                for (int i = mr; i < GB_MR; i++)
                    dst[p * GB_MR + i] = 0;
    }
}

/* t (GB_MR x GB_NR, row-major) = the sums over kp pairs of the micro-panels ap and bp, added to
 * t's sums unless first. */
static void gb_ukr(int64_t kp, const uint32_t *restrict ap, const uint16_t *restrict bp, bool first,
                   float *restrict t) {
    vacc acc[GB_MR][2];
    for (int i = 0; i < GB_MR; i++)
        if (first)
            acc[i][0] = acc[i][1] = v_zero();
        else {
            acc[i][0] = v_loadf(t + i * GB_NR);
            acc[i][1] = v_loadf(t + i * GB_NR + GB_NR / 2);
        }
    for (int64_t p = 0; p < kp; p++, ap += GB_MR, bp += 2 * GB_NR) {
        const vpairs b0 = v_load(bp), b1 = v_load(bp + GB_NR);
        _Pragma("GCC unroll 12") for (int i = 0; i < GB_MR; i++) {
            const vpairs ai = v_bcast(ap + i);
            acc[i][0] = v_dp(acc[i][0], ai, b0);
            acc[i][1] = v_dp(acc[i][1], ai, b1);
        }
    }
    for (int i = 0; i < GB_MR; i++) {
        v_store(t + i * GB_NR, acc[i][0]);
        v_store(t + i * GB_NR + GB_NR / 2, acc[i][1]);
    }
}

/* The (mr x nr) corner of the tile t into C at row i0, column j0: C added in float32 when
 * accumulating, each value rounded once. (Locals, not g->...: a store to C may alias *g, see
 * gemm_impl.h.) */
static void gb_store(const tn_gemm *g, const float *t, int64_t i0, int64_t j0, int mr, int nr) {
    tn_bf16 *const c = (tn_bf16 *)g->c + i0 * g->rsc + j0;
    const int64_t rsc = g->rsc;
    const bool acc = g->accumulate;
    for (int i = 0; i < mr; i++) {
        tn_bf16 *restrict cr = c + i * rsc;
        const float *restrict tr = t + i * GB_NR;
        if (acc)
            for (int j = 0; j < nr; j++)
                cr[j] = tn_f32_to_bf16(tn_bf16_to_f32(cr[j]) + tr[j]);
        else
            for (int j = 0; j < nr; j++)
                cr[j] = tn_f32_to_bf16(tr[j]);
    }
}

/* The block sizes for k: rows (a multiple of GB_MR), columns (of GB_NR). A is packed one K
 * block at a time, B over the whole of k. */
static void gb_blocks(int64_t k, int64_t *mc, int64_t *nc) {
    const int64_t kp = (k + 1) / 2;
    *mc = gb_fit(GB_A_WORDS / gb_min(kp, GB_KC), GB_MR, GB_MC);
    *nc = gb_fit(GB_B_WORDS / kp, GB_NR, GB_NC);
    if (*nc < GB_NC_FLOOR) *nc = gb_fit(GB_B_MAX_WORDS / kp, GB_NR, GB_NC_FLOOR);
}

/* A thread's buffers: packed A and B, and the tiles' float32 sums between K blocks (NULL when
 * k fits one K block). */
typedef struct gb_buf {
    uint32_t *a;
    uint16_t *b;
    float *c;
} gb_buf;

/* Rows [i0, i1) and columns [j0, j1) of C, serially. */
static void gb_block(const tn_gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, gb_buf buf) {
    const uint16_t *a = g->a, *b = g->b;
    const int64_t kp = (g->k + 1) / 2;
    int64_t mcb, ncb;
    gb_blocks(g->k, &mcb, &ncb);
    alignas(64) float one[GB_MR * GB_NR]; /* the tile when k fits one K block */
    for (int64_t jc = j0; jc < j1; jc += ncb) {
        const int64_t nc = gb_min(ncb, j1 - jc);
        gb_pack_b(g->k, nc, b + jc * g->csb, g->rsb, g->csb, buf.b);
        for (int64_t ic = i0; ic < i1; ic += mcb) {
            const int64_t mc = gb_min(mcb, i1 - ic), mt = (mc + GB_MR - 1) / GB_MR;
            for (int64_t pc = 0; pc < kp; pc += GB_KC) {
                const int64_t kc = gb_min(GB_KC, kp - pc);
                const bool first = pc == 0, last = pc + kc == kp;
                gb_pack_a(mc, gb_min(g->k - 2 * pc, 2 * kc), a + ic * g->rsa + 2 * pc * g->csa,
                          g->rsa, g->csa, buf.a);
                for (int64_t jr = 0; jr < nc; jr += GB_NR)
                    for (int64_t ir = 0; ir < mc; ir += GB_MR) {
                        float *t =
                            buf.c ? buf.c + (jr / GB_NR * mt + ir / GB_MR) * GB_MR * GB_NR : one;
                        gb_ukr(kc, buf.a + ir * kc, buf.b + (jr * kp + pc * GB_NR) * 2, first, t);
                        if (last)
                            gb_store(g, t, ic + ir, jc + jr, (int)gb_min(GB_MR, mc - ir),
                                     (int)gb_min(GB_NR, nc - jr));
                    }
            }
        }
    }
}

/* Part `part` of `parts` of len elements in whole tiles: [*lo, *hi). */
static void gb_part(int64_t len, int64_t tile, int64_t part, int64_t parts, int64_t *lo,
                    int64_t *hi) {
    const int64_t tiles = (len + tile - 1) / tile;
    *lo = gb_min(len, tiles * part / parts * tile);
    *hi = gb_min(len, tiles * (part + 1) / parts * tile);
}

/* Task t of a grid of rows x cols tasks: a range of whole row tiles by a range of whole column
 * tiles. */
static void gb_task(const tn_gemm *g, int64_t t, int64_t rows, int64_t cols, gb_buf buf) {
    int64_t i0, i1, j0, j1;
    gb_part(g->m, GB_MR, t / cols, rows, &i0, &i1);
    gb_part(g->n, GB_NR, t % cols, cols, &j0, &j1);
    if (i0 < i1 && j0 < j1) gb_block(g, i0, i1, j0, j1, buf);
}

/* The threads' buffers: per bytes each from base (a multiple of 64), the tiles' sums first (c
 * floats, a multiple of 16), then a words of packed A, then packed B. */
typedef struct gb_mem {
    char *base;
    int64_t per, c, a;
} gb_mem;

static gb_buf gb_buf_of(const gb_mem *m, int th) {
    char *p = m->base + m->per * th;
    return (gb_buf){(uint32_t *)(p + m->c * 4), (uint16_t *)(p + (m->c + m->a) * 4),
                    m->c ? (float *)p : NULL};
}

/* One product on nt threads: a few more tasks than threads, taken dynamically (gemm.c), on a
 * grid of row and column ranges about as tall as wide in elements. A task packs the B columns
 * and the A rows it reads; a grid packs less than row ranges alone (there every task would pack
 * all of B, as costly as its multiply-adds at 16 threads on a square product). */
static void gb_one(const tn_gemm *g, int nt, const gb_mem *mem) {
    if (nt == 1) {
        gb_task(g, 0, 1, 1, gb_buf_of(mem, 0));
        return;
    }
    const int64_t mt = (g->m + GB_MR - 1) / GB_MR, ntl = (g->n + GB_NR - 1) / GB_NR;
    const int64_t want = 3 * (int64_t)nt;
    int64_t rows = (int64_t)(sqrt((double)want * (double)g->m / (double)g->n) + 0.5);
    rows = rows < 1 ? 1 : gb_min(rows, gb_min(mt, want));
    const int64_t cols = gb_min(ntl, (want + rows - 1) / rows), ntask = rows * cols;
#pragma omp parallel num_threads(nt)
    {
        TN_OMP_SPAN("gemm bf16");
#ifdef _OPENMP
        const gb_buf buf = gb_buf_of(mem, omp_get_thread_num());
#else
        const gb_buf buf = gb_buf_of(mem, 0);
#endif
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t t = 0; t < ntask; t++)
            gb_task(g, t, rows, cols, buf);
    }
}

tn_status GB_ENTRY(const tn_gemm *g, const tn_gemm_batch *batch) {
    const size_t es = sizeof(tn_bf16);
    const int64_t nbatch = batch ? tn__numel(batch->ndim, batch->shape) : 1;
    if (nbatch == 0 || g->m == 0 || g->n == 0) return TN_OK;
    if (g->k == 0) { /* empty sum: C = 0 (or unchanged) */
        for (int64_t bi = 0; bi < nbatch && !g->accumulate; bi++) {
            tn_gemm one = *g;
            if (batch) tn__gemm_batch_item(g, batch, bi, es, &one);
            for (int64_t i = 0; i < one.m; i++)
                memset((tn_bf16 *)one.c + i * one.rsc, 0, (size_t)one.n * es);
        }
        return TN_OK;
    }
    const int nt = tn__threads_for(tn__gemm_work(g) * nbatch);
    const bool by_batch = nbatch > 1 && nt > 1 && nbatch >= (g->m + GB_MR - 1) / GB_MR;
    int64_t mcb, ncb;
    gb_blocks(g->k, &mcb, &ncb);
    const int64_t kp = (g->k + 1) / 2;
    gb_mem mem = {.c = kp > GB_KC ? mcb * ncb : 0, .a = mcb * gb_min(kp, GB_KC)};
    mem.per = ((mem.c + mem.a + ncb * kp) * 4 + 63) / 64 * 64;
    char *base = mem.base = tn__alloc((size_t)(mem.per * nt));
    if (!base) return TN_ERR_OUT_OF_MEMORY;
    if (by_batch) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int t = 0; t < nt; t++) {
            tn_gemm one;
            for (int64_t bi = nbatch * t / nt; bi < nbatch * (t + 1) / nt; bi++) {
                tn__gemm_batch_item(g, batch, bi, es, &one);
                gb_task(&one, 0, 1, 1, gb_buf_of(&mem, t));
            }
        }
    } else {
        for (int64_t bi = 0; bi < nbatch; bi++) {
            tn_gemm one = *g;
            if (batch) tn__gemm_batch_item(g, batch, bi, es, &one);
            gb_one(&one, nt, &mem);
        }
    }
    tn__free(base);
    return TN_OK;
}
