/* engine/cuda/reduce.cu — sum / max / min over one dimension of a strided
 * input, or over all of a contiguous input (tn_red_args).
 *
 * Determinism: which thread reads which elements, in which order it folds
 * them, and the tree that combines threads, blocks and chunks depend on the
 * shape only (never on the GPU's size, timing or the data's address), and
 * no float is ever added atomically; so the same input gives the same bits
 * on every run. Max/min are exact whatever the order: the combine rule
 * (bigger / smaller wins, the first index on ties, a NaN beats any number,
 * the first NaN wins) is associative and commutative, so they also agree
 * with the CPU bit for bit. Sums agree with the CPU to rounding.
 * float32, float64 and the halves accumulate in double (a half's sum or mean
 * rounds once, through float32, as the CPU's), integers and bool in 64-bit
 * integers (wrapping as the CPU's int64 does). The halves are compared in
 * float32, which holds them exactly.
 *
 * Layouts:
 *  - all (dim < 0): a fixed grid of P blocks (P from the element count)
 *    reads 16-byte packs, pack p to thread p mod (P*256), four packs in
 *    flight per thread; each block writes one partial to scratch memory,
 *    then one block combines the P partials in a fixed tree and divides.
 *    A misaligned input is read element by element in the same order, so
 *    its result does not depend on the alignment either.
 *  - one dim, rows (the reduced dim is the faster one in memory, e.g. the
 *    innermost): one warp per (output, chunk), lanes striding over the
 *    reduced dim, combined by a warp tree;
 *  - one dim, columns (the reduced dim strided, the kept dims faster):
 *    one thread per (output, chunk), neighbouring threads on neighbouring
 *    outputs, each folding its chunk in order.
 *   A long reduced dim with few outputs is cut into S chunks (S from the
 *   shape) whose partials a last kernel folds in chunk order.
 */
#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

constexpr int RED_THREADS = 256;
constexpr int ALL_MAX_BLOCKS = 1024;

/* ---- the three reductions: partial type, fold, combine, output ---- */

/* Sum accumulator: double for floats, unsigned 64-bit for integers and
 * bool (wraps, as the CPU's int64 does in practice, without UB). */
template <typename T>
using sum_acc_t = typename std::conditional<is_float_v<T>, double, unsigned long long>::type;

template <typename T> struct sum_red {
    using part = sum_acc_t<T>;
    __device__ __forceinline__ static part identity() { return part(0); }
    __device__ __forceinline__ static part fold(part a, T x, int64_t) {
        return a + static_cast<part>(ld(x));
    }
    /* a holds the earlier elements */
    __device__ __forceinline__ static part combine(part a, part b) { return a + b; }
    /* floats: the total over div in T (the halves through float32); integers: int64 */
    __device__ __forceinline__ static void finish(part p, void *vals, int64_t *, int64_t o,
                                                  double div) {
        if (!vals) return;
        if constexpr (is_float_v<T>)
            static_cast<T *>(vals)[o] = st<T>(static_cast<compute_t<T>>(p / div));
        else
            static_cast<int64_t *>(vals)[o] = static_cast<int64_t>(p);
    }
};

template <typename T> struct ext_part {
    T v;
    int64_t i; /* < 0: empty */
};

/* warp_fold's shuffle of a part */
template <typename T> __device__ __forceinline__ ext_part<T> shfl_down(ext_part<T> p, int off) {
    return ext_part<T>{tnc::shfl_down(p.v, off), tnc::shfl_down(p.i, off)};
}

/* Does (x, xi) replace the running extremum (m, mi)? The first index of the
 * extremum wins; a NaN beats every number; the first NaN wins. */
template <bool MAX, typename T>
__device__ __forceinline__ bool beats(T x, int64_t xi, T m, int64_t mi) {
    if (xi < 0) return false;
    if (mi < 0) return true;
    bool xn = x != x, mn = m != m;
    if (xn || mn) return xn && (!mn || xi < mi);
    if (MAX ? x > m : x < m) return true;
    return x == m && xi < mi;
}

/* The extremum is held and compared in T's compute type (exact for the
 * halves) and stored back as T. */
template <typename T, bool MAX> struct ext_red {
    using C = compute_t<T>;
    using part = ext_part<C>;
    __device__ __forceinline__ static part identity() { return part{C(0), -1}; }
    __device__ __forceinline__ static part fold(part a, T x, int64_t i) {
        const C v = ld(x);
        return beats<MAX>(v, i, a.v, a.i) ? part{v, i} : a;
    }
    __device__ __forceinline__ static part combine(part a, part b) {
        return beats<MAX>(b.v, b.i, a.v, a.i) ? b : a;
    }
    __device__ __forceinline__ static void finish(part p, void *vals, int64_t *idx, int64_t o,
                                                  double) {
        if (vals) static_cast<T *>(vals)[o] = st<T>(p.v);
        if (idx) idx[o] = p.i;
    }
};

/* Lane 0 gets the warp's total: lane l folds in lane l + off, a fixed tree. */
template <class R> __device__ __forceinline__ typename R::part warp_reduce(typename R::part v) {
    using part = typename R::part;
    return warp_fold(v, [](part a, part b) { return R::combine(a, b); });
}

/* Thread 0 gets the block's total (RED_THREADS threads). */
template <class R> __device__ __forceinline__ typename R::part block_reduce(typename R::part v) {
    __shared__ typename R::part sh[RED_THREADS / 32];
    v = warp_reduce<R>(v);
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = l < RED_THREADS / 32 ? sh[l] : R::identity();
        v = warp_reduce<R>(v);
    }
    return v;
}

template <typename T, int V> struct alignas(sizeof(T) * V) vpack { T v[V]; };

/* ---- all elements of a contiguous input ---- */

template <class R, typename T>
__global__ void __launch_bounds__(RED_THREADS)
    all_partial_kernel(const T *in, int64_t n, bool aligned, typename R::part *parts, void *vals,
                       int64_t *idx, double div) {
    constexpr int V = 16 / sizeof(T);
    const int64_t G = static_cast<int64_t>(gridDim.x) * RED_THREADS;
    const int64_t g = static_cast<int64_t>(blockIdx.x) * RED_THREADS + threadIdx.x;
    const int64_t npack = n / V;
    typename R::part acc = R::identity();
    int64_t p = g;
    /* four packs in flight; folded in pack order, as the one-pack loop would */
    for (; p + 3 * G < npack; p += 4 * G) {
        T x[4][V];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (aligned) {
                vpack<T, V> pk = reinterpret_cast<const vpack<T, V> *>(in)[p + u * G];
#pragma unroll
                for (int j = 0; j < V; j++)
                    x[u][j] = pk.v[j];
            } else {
#pragma unroll
                for (int j = 0; j < V; j++)
                    x[u][j] = in[(p + u * G) * V + j];
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int j = 0; j < V; j++)
                acc = R::fold(acc, x[u][j], (p + u * G) * V + j);
    }
    for (; p < npack; p += G) {
        T x[V];
        if (aligned) {
            vpack<T, V> pk = reinterpret_cast<const vpack<T, V> *>(in)[p];
#pragma unroll
            for (int j = 0; j < V; j++)
                x[j] = pk.v[j];
        } else {
#pragma unroll
            for (int j = 0; j < V; j++)
                x[j] = in[p * V + j];
        }
#pragma unroll
        for (int j = 0; j < V; j++)
            acc = R::fold(acc, x[j], p * V + j);
    }
    const int64_t e = npack * V + g; /* the n % V last elements */
    if (e < n) acc = R::fold(acc, in[e], e);
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) {
        if (parts)
            parts[blockIdx.x] = acc;
        else
            R::finish(acc, vals, idx, 0, div);
    }
}

/* One block folds the P block partials: thread t takes t, t + 256, ... */
template <class R>
__global__ void __launch_bounds__(RED_THREADS)
    all_final_kernel(const typename R::part *parts, int nparts, void *vals, int64_t *idx,
                     double div) {
    typename R::part acc = R::identity();
    for (int b = threadIdx.x; b < nparts; b += RED_THREADS)
        acc = R::combine(acc, parts[b]);
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) R::finish(acc, vals, idx, 0, div);
}

/* ---- one dimension ---- */

struct red_geom {
    int nk; /* kept dims (size > 1, coalesced), outermost first */
    int64_t kshape[TN_MAX_DIMS], kstride[TN_MAX_DIMS];
    int64_t M, R, sr; /* outputs, reduced length, reduced stride (elements) */
    int64_t S, C;     /* chunks per output and their length */
};

/* Input offset of output o's slice (o row-major over the kept dims). */
__device__ __forceinline__ int64_t slice_offset(const red_geom &g, int64_t o) {
    int64_t off = 0;
    for (int d = g.nk - 1; d >= 0; d--) {
        int64_t q = o / g.kshape[d];
        off += (o - q * g.kshape[d]) * g.kstride[d];
        o = q;
    }
    return off;
}

/* Warp per item (output o, chunk s), item = o * S + s. */
template <class R, typename T>
__global__ void __launch_bounds__(RED_THREADS)
    rows_kernel(const T *in, red_geom g, typename R::part *parts, void *vals, int64_t *idx,
                double div) {
    const int lane = threadIdx.x % 32;
    const int64_t warp = (static_cast<int64_t>(blockIdx.x) * RED_THREADS + threadIdx.x) / 32;
    const int64_t nwarps = static_cast<int64_t>(gridDim.x) * (RED_THREADS / 32);
    const int64_t items = g.M * g.S, sr = g.sr;
    for (int64_t item = warp; item < items; item += nwarps) { /* warp-uniform */
        const int64_t o = item / g.S, s = item - o * g.S;
        const T *base = in + slice_offset(g, o);
        const int64_t r1 = min(s * g.C + g.C, g.R);
        typename R::part acc = R::identity();
        int64_t r = s * g.C + lane;
        for (; r + 96 < r1; r += 128) {
            T a = base[r * sr], b = base[(r + 32) * sr], c = base[(r + 64) * sr],
              d = base[(r + 96) * sr];
            acc = R::fold(acc, a, r);
            acc = R::fold(acc, b, r + 32);
            acc = R::fold(acc, c, r + 64);
            acc = R::fold(acc, d, r + 96);
        }
        for (; r < r1; r += 32)
            acc = R::fold(acc, base[r * sr], r);
        acc = warp_reduce<R>(acc);
        if (lane == 0) {
            if (parts)
                parts[item] = acc;
            else
                R::finish(acc, vals, idx, o, div);
        }
    }
}

/* Thread per item, item = s * M + o: neighbouring threads, neighbouring
 * outputs. Partial of (o, s) at parts[o * S + s]. */
template <class R, typename T>
__global__ void __launch_bounds__(RED_THREADS)
    cols_kernel(const T *in, red_geom g, typename R::part *parts, void *vals, int64_t *idx,
                double div) {
    const int64_t G = static_cast<int64_t>(gridDim.x) * RED_THREADS;
    const int64_t items = g.M * g.S, sr = g.sr;
    for (int64_t item = static_cast<int64_t>(blockIdx.x) * RED_THREADS + threadIdx.x; item < items;
         item += G) {
        const int64_t s = item / g.M, o = item - s * g.M;
        const T *base = in + slice_offset(g, o);
        const int64_t r1 = min(s * g.C + g.C, g.R);
        typename R::part acc = R::identity();
        int64_t r = s * g.C;
        for (; r + 3 < r1; r += 4) {
            T a = base[r * sr], b = base[(r + 1) * sr], c = base[(r + 2) * sr],
              d = base[(r + 3) * sr];
            acc = R::fold(acc, a, r);
            acc = R::fold(acc, b, r + 1);
            acc = R::fold(acc, c, r + 2);
            acc = R::fold(acc, d, r + 3);
        }
        for (; r < r1; r++)
            acc = R::fold(acc, base[r * sr], r);
        if (parts)
            parts[o * g.S + s] = acc;
        else
            R::finish(acc, vals, idx, o, div);
    }
}

/* Thread per output: its S chunk partials folded in chunk order. */
template <class R>
__global__ void __launch_bounds__(RED_THREADS)
    chunks_final_kernel(const typename R::part *parts, int64_t M, int64_t S, void *vals,
                        int64_t *idx, double div) {
    const int64_t G = static_cast<int64_t>(gridDim.x) * RED_THREADS;
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * RED_THREADS + threadIdx.x; o < M; o += G) {
        typename R::part acc = parts[o * S];
        for (int64_t s = 1; s < S; s++)
            acc = R::combine(acc, parts[o * S + s]);
        R::finish(acc, vals, idx, o, div);
    }
}

/* ---- host side ---- */

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

template <class R, typename T>
tn_status reduce_all(int dev, device_state *ds, const tn_red_args *a, int64_t n) {
    constexpr int V = 16 / sizeof(T);
    const T *in = reinterpret_cast<const T *>(a->in);
    const bool aligned = reinterpret_cast<uintptr_t>(in) % 16 == 0;
    int64_t blocks = ceil_div(n / V, RED_THREADS * 4);
    if (blocks < 1) blocks = 1;
    if (blocks > ALL_MAX_BLOCKS) blocks = ALL_MAX_BLOCKS;
    if (blocks == 1) {
        all_partial_kernel<R, T>
            <<<1, RED_THREADS, 0, ds->stream>>>(in, n, aligned, nullptr, a->vals, a->idx, a->div);
        return launch_check("reduce");
    }
    scratch parts(dev, static_cast<size_t>(blocks) * sizeof(typename R::part));
    if (!parts.get()) return TN_ERR_OUT_OF_MEMORY;
    auto *pp = static_cast<typename R::part *>(parts.get());
    all_partial_kernel<R, T><<<static_cast<unsigned>(blocks), RED_THREADS, 0, ds->stream>>>(
        in, n, aligned, pp, nullptr, nullptr, a->div);
    all_final_kernel<R>
        <<<1, RED_THREADS, 0, ds->stream>>>(pp, static_cast<int>(blocks), a->vals, a->idx, a->div);
    return launch_check("reduce");
}

template <class R, typename T>
tn_status reduce_dim(int dev, device_state *ds, const tn_red_args *a, red_geom g) {
    const T *in = reinterpret_cast<const T *>(a->in);
    const bool columns = g.M >= 2 && g.nk >= 1 && abs64(g.kstride[g.nk - 1]) < abs64(g.sr);
    /* Chunks: enough independent items to fill the GPU when the outputs are
     * few and the reduced dim long. A function of the shape only. */
    int64_t S = 1;
    if (columns) {
        const int64_t want = ceil_div(65536, g.M);
        S = ceil_div(g.R, 64) < want ? ceil_div(g.R, 64) : want;
    } else {
        const int64_t want = ceil_div(8192, g.M);
        S = ceil_div(g.R, 1024) < want ? ceil_div(g.R, 1024) : want;
    }
    if (S < 1) S = 1;
    g.C = S > 1 ? ceil_div(g.R, S) : (g.R > 0 ? g.R : 1);
    g.S = S > 1 ? ceil_div(g.R, g.C) : 1;

    const int64_t max_blocks = static_cast<int64_t>(ds->sm_count) * (2048 / RED_THREADS) * 4;
    const int64_t items = g.M * g.S;
    int64_t blocks = columns ? ceil_div(items, RED_THREADS) : ceil_div(items, RED_THREADS / 32);
    if (blocks > max_blocks) blocks = max_blocks;
    if (blocks < 1) blocks = 1;

    scratch parts(dev, g.S > 1 ? static_cast<size_t>(items) * sizeof(typename R::part) : 0);
    auto *pp = g.S > 1 ? static_cast<typename R::part *>(parts.get()) : nullptr;
    if (g.S > 1 && !pp) return TN_ERR_OUT_OF_MEMORY;
    if (columns)
        cols_kernel<R, T><<<static_cast<unsigned>(blocks), RED_THREADS, 0, ds->stream>>>(
            in, g, pp, a->vals, a->idx, a->div);
    else
        rows_kernel<R, T><<<static_cast<unsigned>(blocks), RED_THREADS, 0, ds->stream>>>(
            in, g, pp, a->vals, a->idx, a->div);
    if (pp) {
        int64_t fb = ceil_div(g.M, RED_THREADS);
        if (fb > max_blocks) fb = max_blocks;
        chunks_final_kernel<R><<<static_cast<unsigned>(fb), RED_THREADS, 0, ds->stream>>>(
            pp, g.M, g.S, a->vals, a->idx, a->div);
    }
    return launch_check("reduce");
}

template <class R, typename T>
tn_status run(int dev, device_state *ds, const tn_red_args *a, bool all, int64_t n,
              const red_geom &g) {
    return all ? reduce_all<R, T>(dev, ds, a, n) : reduce_dim<R, T>(dev, ds, a, g);
}

template <typename T>
tn_status run_typed(int dev, device_state *ds, const tn_red_args *a, bool all, int64_t n,
                    const red_geom &g) {
    switch (a->op) {
    case TN_RED_SUM:
        return run<sum_red<T>, T>(dev, ds, a, all, n, g);
    case TN_RED_MAX:
        return run<ext_red<T, true>, T>(dev, ds, a, all, n, g);
    case TN_RED_MIN:
        return run<ext_red<T, false>, T>(dev, ds, a, all, n, g);
    }
    return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA reduce: unknown op %d", (int)a->op);
}

} // namespace

extern "C" tn_status tn__cuda_reduce(int dev, const tn_red_args *a) {
    if (!a) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA reduce: arguments are NULL");
    if (a->op != TN_RED_SUM && a->op != TN_RED_MAX && a->op != TN_RED_MIN)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA reduce: unknown op %d", (int)a->op);
    if (a->ndim < 0 || a->ndim > TN_MAX_DIMS)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA reduce: %d dimensions", a->ndim);
    if (dtype_size(a->dtype) == 0)
        return tn__error(TN_ERR_DTYPE, "CUDA reduce: unknown dtype %d", (int)a->dtype);
    if (!a->vals && !a->idx) return TN_OK; /* nothing asked for */
    if (a->op == TN_RED_SUM && !a->vals)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA reduce: sum without a value output");

    /* a 0-d input is one element, reduced over its only "dimension" */
    int ndim = a->ndim;
    int64_t shape[TN_MAX_DIMS], stride[TN_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        shape[d] = a->shape[d];
        stride[d] = a->stride[d];
        if (shape[d] < 0) return tn__error(TN_ERR_SHAPE, "CUDA reduce: negative size");
    }
    if (ndim == 0) {
        ndim = 1;
        shape[0] = 1;
        stride[0] = 1;
    }
    const bool all = a->dim < 0;
    if (!all && a->dim >= ndim)
        return tn__error(TN_ERR_INDEX, "CUDA reduce: dim %d out of range for %d dimensions", a->dim,
                         ndim);

    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    red_geom g = {};
    int64_t outputs = 1, reduced = n;
    if (!all) {
        g.R = shape[a->dim];
        g.sr = stride[a->dim];
        g.M = 1;
        for (int d = 0; d < ndim; d++) {
            if (d == a->dim || shape[d] == 1) continue;
            g.M *= shape[d];
            /* coalesce with the previous kept dim when the two walk memory as one */
            if (g.nk > 0 && g.kstride[g.nk - 1] == stride[d] * shape[d]) {
                g.kshape[g.nk - 1] *= shape[d];
                g.kstride[g.nk - 1] = stride[d];
            } else {
                g.kshape[g.nk] = shape[d];
                g.kstride[g.nk] = stride[d];
                g.nk++;
            }
        }
        for (int d = 0; d < ndim; d++)
            if (d != a->dim && shape[d] == 0) g.M = 0;
        outputs = g.M;
        reduced = g.R;
    }
    if (outputs == 0) return TN_OK;
    if (reduced == 0 && a->op != TN_RED_SUM)
        return tn__error(TN_ERR_INDEX, "CUDA reduce: %s of an empty range",
                         a->op == TN_RED_MAX ? "max" : "min");
    if (!a->in && reduced > 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA reduce: input is NULL");

    return on_device(dev, [&](device_state *ds) {
        return dispatch(a->dtype, "reduce", [&](auto tag) {
            return run_typed<typename decltype(tag)::type>(dev, ds, a, all, n, g);
        });
    });
}

} // namespace tnc
