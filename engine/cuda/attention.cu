/* engine/cuda/attention.cu — fused scaled dot-product attention (tn_attn_args),
 * float32 and float64, forward and backward, the CPU kernel's semantics
 * (engine/cpu/attention_kernels.c): masks, causal rule, dropout by
 * tn_attn_keep's hash, rows with no key giving 0 and no gradient.
 *
 * One warp per row, lanes splitting the head dims; a block holds 4 warps.
 *  - forward: a warp per query row streams the keys in order with the online
 *    softmax (running max and sum, the accumulated output row rescaled when
 *    the max grows, kept in the output row itself: each lane owns its
 *    elements), then writes o / sum and the log-sum-exp;
 *  - backward: a warp per query row computes dQ (D = rowsum(dO O) first),
 *    a warp per key row computes dK and dV, both recomputing P = exp(s -
 *    lse) from q, k and the saved lse.
 * Every value is summed in a fixed order (keys or queries in order; dot
 * products lane-strided then a fixed shuffle tree): deterministic, no
 * atomics. Simpler than the CPU's tiles: no shared-memory blocking yet.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"
#include "rows.cuh"

namespace tnc {

namespace {

constexpr int WARPS = 4;

/* Offsets (elements) of slice b in q, k, v, the mask, o, dout, dq, dk and dv. */
struct slice_off {
    int64_t q, k, v, m, o, g, dq, dk, dv;
};
__device__ slice_off offsets(const tn_attn_args &a, int64_t b) {
    slice_off o = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int d = a.bdim - 1; d >= 0; d--) {
        int64_t i = b % a.bshape[d];
        b /= a.bshape[d];
        o.q += i * a.bsq[d], o.k += i * a.bsk[d], o.v += i * a.bsv[d], o.m += i * a.bsm[d];
        o.o += i * a.bso[d], o.g += i * a.bsg[d];
        o.dq += i * a.bsdq[d], o.dk += i * a.bsdk[d], o.dv += i * a.bsdv[d];
    }
    return o;
}

/* The score of (i, j) of a slice: scale q_i . k_j + mask, -inf where j does
 * not take part; all lanes return it. */
template <typename T>
__device__ T score(const tn_attn_args &a, const slice_off &so, int64_t i, int64_t j, int lane) {
    if (a.causal && j > i + a.causal_offset) return -INFINITY;
    if (a.mask_kind == TN_ATTN_MASK_BOOL &&
        !static_cast<const uint8_t *>(a.mask)[so.m + i * a.rsm + j * a.csm])
        return -INFINITY;
    const T *q = static_cast<const T *>(a.q) + so.q + i * a.rsq;
    const T *k = static_cast<const T *>(a.k) + so.k + j * a.rsk;
    T s = 0;
    for (int64_t e = lane; e < a.E; e += 32)
        s += q[e] * k[e];
    s = warp_sum(s) * static_cast<T>(a.scale);
    if (a.mask_kind == TN_ATTN_MASK_ADD)
        s += static_cast<const T *>(a.mask)[so.m + i * a.rsm + j * a.csm];
    return s;
}

template <typename T>
__device__ T keep_scale(const tn_attn_args &a, int64_t b, int64_t i, int64_t j) {
    if (a.dropout_p <= 0) return 1;
    if (!tn_attn_keep(a.seed, b, i, j, a.dropout_p)) return 0;
    return a.dropout_p >= 1 ? 0 : static_cast<T>(1 / (1 - a.dropout_p));
}

/* Row r (of nb * L) of the forward. */
template <typename T> __device__ void fwd_row(const tn_attn_args &a, int64_t r, int lane) {
    const int64_t b = r / a.L, i = r % a.L, Ev = a.Ev;
    const slice_off so = offsets(a, b);
    T *o = static_cast<T *>(a.o) + so.o + i * a.rso;
    for (int64_t e = lane; e < Ev; e += 32)
        o[e] = 0;
    T m = -INFINITY, l = 0;
    for (int64_t j = 0; j < a.S; j++) {
        const T s = score<T>(a, so, i, j, lane);
        if (s == -INFINITY) continue;
        const T mn = s > m || s != s ? s : m, alpha = ex(m - mn), p = ex(s - mn); /* NaN sticks */
        l = l * alpha + p;
        m = mn;
        const T pz = p * keep_scale<T>(a, b, i, j);
        const T *v = static_cast<const T *>(a.v) + so.v + j * a.rsv;
        for (int64_t e = lane; e < Ev; e += 32)
            o[e] = o[e] * alpha + pz * v[e];
    }
    const T inv = l > 0 ? 1 / l : (l != l ? l : 0); /* nothing taking part: 0; NaN: NaN */
    for (int64_t e = lane; e < Ev; e += 32)
        o[e] *= inv;
    if (lane == 0) static_cast<T *>(a.lse)[r] = l > 0 ? m + lg(l) : (l != l ? l : -INFINITY);
}

/* P, the dropout scale, and dS = P (dP Z - D) scale of (i, j). */
template <typename T> struct pds { T p, z, ds; };
template <typename T>
__device__ pds<T> grad_terms(const tn_attn_args &a, const slice_off &so, int64_t b, int64_t i,
                             int64_t j, T lse, T delta, int lane) {
    pds<T> r = {0, 0, 0};
    const T s = score<T>(a, so, i, j, lane);
    if (s == -INFINITY || lse == -INFINITY) return r;
    r.p = ex(s - lse);
    r.z = keep_scale<T>(a, b, i, j);
    const T *g = static_cast<const T *>(a.dout) + so.g + i * a.rsg;
    const T *v = static_cast<const T *>(a.v) + so.v + j * a.rsv;
    T dp = 0;
    for (int64_t e = lane; e < a.Ev; e += 32)
        dp += g[e] * v[e];
    dp = warp_sum(dp);
    r.ds = r.p * (dp * r.z - delta) * static_cast<T>(a.scale);
    return r;
}

/* D = rowsum(dO O) of query row i of a slice. */
template <typename T>
__device__ T row_delta(const tn_attn_args &a, const slice_off &so, int64_t i, int lane) {
    const T *g = static_cast<const T *>(a.dout) + so.g + i * a.rsg,
            *o = static_cast<const T *>(a.o) + so.o + i * a.rso;
    T d = 0;
    for (int64_t e = lane; e < a.Ev; e += 32)
        d += g[e] * o[e];
    return warp_sum(d);
}

/* dQ of query row r (of nb * L). */
template <typename T> __device__ void dq_row(const tn_attn_args &a, int64_t r, int lane) {
    const int64_t b = r / a.L, i = r % a.L;
    const slice_off so = offsets(a, b);
    T *dq = static_cast<T *>(a.dq) + so.dq + i * a.rsdq;
    for (int64_t e = lane; e < a.E; e += 32)
        dq[e] = 0;
    const T lse = static_cast<const T *>(a.lse)[r], delta = row_delta<T>(a, so, i, lane);
    for (int64_t j = 0; j < a.S; j++) {
        const pds<T> t = grad_terms<T>(a, so, b, i, j, lse, delta, lane);
        if (t.ds == 0) continue;
        const T *k = static_cast<const T *>(a.k) + so.k + j * a.rsk;
        for (int64_t e = lane; e < a.E; e += 32)
            dq[e] += t.ds * k[e];
    }
}

/* dK and dV of key row r (of nb * S). */
template <typename T> __device__ void dkv_row(const tn_attn_args &a, int64_t r, int lane) {
    const int64_t b = r / a.S, j = r % a.S;
    const slice_off so = offsets(a, b);
    T *dk = static_cast<T *>(a.dk) + so.dk + j * a.rsdk;
    T *dv = static_cast<T *>(a.dv) + so.dv + j * a.rsdv;
    for (int64_t e = lane; e < a.E; e += 32)
        dk[e] = 0;
    for (int64_t e = lane; e < a.Ev; e += 32)
        dv[e] = 0;
    const int64_t first = a.causal && j > a.causal_offset ? j - a.causal_offset : 0;
    for (int64_t i = first; i < a.L; i++) {
        const int64_t qr = b * a.L + i;
        const T lse = static_cast<const T *>(a.lse)[qr];
        const pds<T> t = grad_terms<T>(a, so, b, i, j, lse, row_delta<T>(a, so, i, lane), lane);
        if (t.p == 0) continue;
        const T *g = static_cast<const T *>(a.dout) + so.g + i * a.rsg;
        const T *q = static_cast<const T *>(a.q) + so.q + i * a.rsq;
        const T pz = t.p * t.z;
        for (int64_t e = lane; e < a.Ev; e += 32)
            dv[e] += pz * g[e];
        for (int64_t e = lane; e < a.E; e += 32)
            dk[e] += t.ds * q[e];
    }
}

enum { K_FWD, K_DQ, K_DKV };

template <typename T>
__global__ void __launch_bounds__(32 * WARPS) attn_rows(tn_attn_args a, int kind, int64_t rows) {
    const int lane = threadIdx.x % 32;
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * WARPS + threadIdx.x / 32; r < rows;
         r += static_cast<int64_t>(gridDim.x) * WARPS) { /* warp-uniform */
        if (kind == K_FWD)
            fwd_row<T>(a, r, lane);
        else if (kind == K_DQ)
            dq_row<T>(a, r, lane);
        else
            dkv_row<T>(a, r, lane);
    }
}

template <typename T> tn_status launch(device_state *ds, const tn_attn_args *a, int64_t nb) {
    auto run = [&](int kind, int64_t rows) {
        attn_rows<T><<<grid_clamp(ds, ceil_div(rows, WARPS), 16), 32 * WARPS, 0, ds->stream>>>(
            *a, kind, rows);
        return launch_check("attention");
    };
    if (a->mode == TN_ATTN_FWD) return run(K_FWD, nb * a->L);
    tn_status st = run(K_DQ, nb * a->L);
    return st < 0 ? st : run(K_DKV, nb * a->S);
}

} // namespace

extern "C" tn_status tn__cuda_attention(int dev, const tn_attn_args *a) {
    tn_status st = check_float_args("attention", a, TN_ATTN_BWD + 1);
    if (st < 0) return st;
    int64_t nb = 1;
    for (int d = 0; d < a->bdim; d++)
        nb *= a->bshape[d];
    if (nb == 0 || (a->mode == TN_ATTN_FWD && a->L == 0)) return TN_OK; /* L = 0: dK, dV are 0 */
    return on_device_float(dev, a->dtype, [&](device_state *ds, auto t) {
        return launch<decltype(t)>(ds, a, nb);
    });
}

} // namespace tnc
