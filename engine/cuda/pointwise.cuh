/* engine/cuda/pointwise.cuh — the one pointwise kernel engine, shared by the
 * pointwise ops (pointwise.cu), the optimiser steps (optim.cu) and copy/fill
 * (copy.cu).
 *
 * A functor F describes one element of an op over up to four operands:
 *   using T0..T3             operand element types (unused ones: uint8_t)
 *   static constexpr int NOPS
 *   static constexpr unsigned LOADS, STORES   bit k: operand k is read / written
 *   __device__ void operator()(T0 &, T1 &, T2 &, T3 &) const
 * The engine loads the read operands, calls F, stores the written ones.
 *
 * Two kernels:
 *  - flat: every operand contiguous, or an input broadcast from one element
 *    (stride 0), and the iterator one coalesced dimension. Each thread moves
 *    packs of VEC elements (16 bytes of the widest operand) with one vector
 *    load or store per operand, UNROLL packs in flight before the first use,
 *    over a grid-stride loop. Needs every non-broadcast base aligned to its
 *    pack; otherwise the strided kernel runs (on one dimension it divides
 *    nothing).
 *  - strided: any iterator. Element index -> per-operand byte offsets by
 *    dividing over the coalesced shape (innermost first); 32-bit index
 *    arithmetic when the element count allows, 64-bit otherwise.
 */
#ifndef TN_CUDA_POINTWISE_CUH
#define TN_CUDA_POINTWISE_CUH

#include <type_traits>

#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

constexpr int PW_THREADS = 256;
constexpr int PW_UNROLL = 4;

template <typename T, int N> struct alignas(sizeof(T) * N) pack { T v[N]; };

template <class F, int K> struct op_type;
template <class F> struct op_type<F, 0> { using type = typename F::T0; };
template <class F> struct op_type<F, 1> { using type = typename F::T1; };
template <class F> struct op_type<F, 2> { using type = typename F::T2; };
template <class F> struct op_type<F, 3> { using type = typename F::T3; };

template <class F, int K> __host__ __device__ constexpr bool reads() {
    return K < F::NOPS && ((F::LOADS >> K) & 1u);
}
template <class F, int K> __host__ __device__ constexpr bool writes() {
    return K < F::NOPS && ((F::STORES >> K) & 1u);
}
template <class F, int K> __host__ __device__ constexpr size_t used_size() {
    return K < F::NOPS ? sizeof(typename op_type<F, K>::type) : 1;
}
template <class F> __host__ __device__ constexpr size_t widest() {
    size_t a = used_size<F, 0>(), b = used_size<F, 1>(), c = used_size<F, 2>(),
           d = used_size<F, 3>();
    size_t ab = a > b ? a : b, cd = c > d ? c : d;
    return ab > cd ? ab : cd;
}
/* Elements per pack: 16 bytes of the widest operand. */
template <class F> __host__ __device__ constexpr int vec_of() {
    return static_cast<int>(16 / widest<F>());
}

struct flat_args {
    char *p[TN_ITER_MAX_OPS];
    unsigned bcast; /* bit k: operand k is one element broadcast (stride 0) */
    int64_t n;
};

/* Loads pack i of operand K (or its broadcast element) into v. */
template <class F, int K, int VEC>
__device__ __forceinline__ void load_pack(const flat_args &a, int64_t i,
                                          typename op_type<F, K>::type (&v)[VEC]) {
    using T = typename op_type<F, K>::type;
    if constexpr (reads<F, K>()) {
        if ((a.bcast >> K) & 1u) {
            T s = *reinterpret_cast<const T *>(a.p[K]);
#pragma unroll
            for (int j = 0; j < VEC; j++)
                v[j] = s;
        } else {
            pack<T, VEC> pk = reinterpret_cast<const pack<T, VEC> *>(a.p[K])[i];
#pragma unroll
            for (int j = 0; j < VEC; j++)
                v[j] = pk.v[j];
        }
    }
}

template <class F, int K, int VEC>
__device__ __forceinline__ void store_pack(const flat_args &a, int64_t i,
                                           const typename op_type<F, K>::type (&v)[VEC]) {
    using T = typename op_type<F, K>::type;
    if constexpr (writes<F, K>()) {
        pack<T, VEC> pk;
#pragma unroll
        for (int j = 0; j < VEC; j++)
            pk.v[j] = v[j];
        reinterpret_cast<pack<T, VEC> *>(a.p[K])[i] = pk;
    }
}

template <class F, int K>
__device__ __forceinline__ void load_one(char *const *p, const int64_t *off,
                                         typename op_type<F, K>::type &v) {
    if constexpr (reads<F, K>())
        v = *reinterpret_cast<const typename op_type<F, K>::type *>(p[K] + off[K]);
}
template <class F, int K>
__device__ __forceinline__ void store_one(char *const *p, const int64_t *off,
                                          const typename op_type<F, K>::type &v) {
    if constexpr (writes<F, K>())
        *reinterpret_cast<typename op_type<F, K>::type *>(p[K] + off[K]) = v;
}

template <class F, int VEC>
__global__ void __launch_bounds__(PW_THREADS) pw_flat_kernel(F f, flat_args a) {
    using T0 = typename F::T0;
    using T1 = typename F::T1;
    using T2 = typename F::T2;
    using T3 = typename F::T3;
    const int64_t npack = a.n / VEC;
    const int64_t tile = static_cast<int64_t>(PW_THREADS) * PW_UNROLL;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * tile; base < npack;
         base += static_cast<int64_t>(gridDim.x) * tile) {
        T0 v0[PW_UNROLL][VEC];
        T1 v1[PW_UNROLL][VEC];
        T2 v2[PW_UNROLL][VEC];
        T3 v3[PW_UNROLL][VEC];
        /* every load of the tile first, so UNROLL packs per operand are in flight */
#pragma unroll
        for (int u = 0; u < PW_UNROLL; u++) {
            int64_t i = base + u * PW_THREADS + threadIdx.x;
            if (i < npack) {
                load_pack<F, 0, VEC>(a, i, v0[u]);
                load_pack<F, 1, VEC>(a, i, v1[u]);
                load_pack<F, 2, VEC>(a, i, v2[u]);
                load_pack<F, 3, VEC>(a, i, v3[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < PW_UNROLL; u++) {
            int64_t i = base + u * PW_THREADS + threadIdx.x;
            if (i < npack) {
#pragma unroll
                for (int j = 0; j < VEC; j++)
                    f(v0[u][j], v1[u][j], v2[u][j], v3[u][j]);
                store_pack<F, 0, VEC>(a, i, v0[u]);
                store_pack<F, 1, VEC>(a, i, v1[u]);
                store_pack<F, 2, VEC>(a, i, v2[u]);
                store_pack<F, 3, VEC>(a, i, v3[u]);
            }
        }
    }
    /* the last n % VEC elements, one per thread of the first block */
    if (blockIdx.x == 0 && npack * VEC + threadIdx.x < a.n) {
        int64_t e = npack * VEC + threadIdx.x, off[TN_ITER_MAX_OPS];
        for (int k = 0; k < TN_ITER_MAX_OPS; k++)
            off[k] = ((a.bcast >> k) & 1u) ? 0
                                           : e * static_cast<int64_t>(k == 0   ? sizeof(T0)
                                                                      : k == 1 ? sizeof(T1)
                                                                      : k == 2 ? sizeof(T2)
                                                                               : sizeof(T3));
        T0 x0;
        T1 x1;
        T2 x2;
        T3 x3;
        load_one<F, 0>(a.p, off, x0);
        load_one<F, 1>(a.p, off, x1);
        load_one<F, 2>(a.p, off, x2);
        load_one<F, 3>(a.p, off, x3);
        f(x0, x1, x2, x3);
        store_one<F, 0>(a.p, off, x0);
        store_one<F, 1>(a.p, off, x1);
        store_one<F, 2>(a.p, off, x2);
        store_one<F, 3>(a.p, off, x3);
    }
}

template <typename I> struct strided_args {
    int ndim;
    I n;
    I shape[TN_MAX_DIMS];
    int64_t stride[TN_ITER_MAX_OPS][TN_MAX_DIMS];
    char *p[TN_ITER_MAX_OPS];
};

template <class F, typename I>
__global__ void __launch_bounds__(PW_THREADS) pw_strided_kernel(F f, strided_args<I> a) {
    const I step = static_cast<I>(gridDim.x) * PW_THREADS;
    for (I i = static_cast<I>(blockIdx.x) * PW_THREADS + threadIdx.x; i < a.n; i += step) {
        int64_t off[TN_ITER_MAX_OPS] = {0, 0, 0, 0};
        I idx = i;
        /* innermost first; the outermost dimension takes the quotient as is */
        for (int d = a.ndim - 1; d > 0; d--) {
            I q = idx / a.shape[d];
            int64_t r = static_cast<int64_t>(idx - q * a.shape[d]);
            idx = q;
#pragma unroll
            for (int k = 0; k < F::NOPS; k++)
                off[k] += r * a.stride[k][d];
        }
#pragma unroll
        for (int k = 0; k < F::NOPS; k++)
            off[k] += static_cast<int64_t>(idx) * a.stride[k][0];
        typename F::T0 x0;
        typename F::T1 x1;
        typename F::T2 x2;
        typename F::T3 x3;
        load_one<F, 0>(a.p, off, x0);
        load_one<F, 1>(a.p, off, x1);
        load_one<F, 2>(a.p, off, x2);
        load_one<F, 3>(a.p, off, x3);
        f(x0, x1, x2, x3);
        store_one<F, 0>(a.p, off, x0);
        store_one<F, 1>(a.p, off, x1);
        store_one<F, 2>(a.p, off, x2);
        store_one<F, 3>(a.p, off, x3);
    }
}

template <class F, int K> inline size_t host_size() {
    return K < F::NOPS ? sizeof(typename op_type<F, K>::type) : 1;
}

/* pw_launch's launches on the device made current. */
template <class F>
tn_status pw_run(device_state *ds, const F &f, const tn_iter *it, const char *what) {
    const size_t es[TN_ITER_MAX_OPS] = {host_size<F, 0>(), host_size<F, 1>(), host_size<F, 2>(),
                                        host_size<F, 3>()};
    constexpr int VEC = vec_of<F>();
    const int64_t max_blocks = static_cast<int64_t>(ds->sm_count) * (2048 / PW_THREADS) * 4;

    bool flat = it->ndim == 1;
    flat_args fa = {};
    fa.n = it->numel;
    for (int k = 0; k < F::NOPS && flat; k++) {
        int64_t s = it->stride[k][0];
        bool written = (F::STORES >> k) & 1u;
        uintptr_t addr = reinterpret_cast<uintptr_t>(it->base[k]);
        if (s == 0 && !written && it->numel > 1) {
            fa.bcast |= 1u << k;
        } else if (s == static_cast<int64_t>(es[k]) || it->numel == 1) {
            flat = addr % (es[k] * VEC) == 0;
        } else {
            flat = false;
        }
        fa.p[k] = it->base[k];
    }
    if (flat) {
        int64_t blocks = ceil_div(ceil_div(it->numel, VEC), PW_THREADS * PW_UNROLL);
        if (blocks < 1) blocks = 1;
        if (blocks > max_blocks) blocks = max_blocks;
        pw_flat_kernel<F, VEC><<<static_cast<unsigned>(blocks), PW_THREADS, 0, ds->stream>>>(f, fa);
        return launch_check(what);
    }
    int64_t blocks = ceil_div(it->numel, PW_THREADS);
    if (blocks > max_blocks) blocks = max_blocks;
    if (it->numel < (int64_t(1) << 31)) {
        strided_args<uint32_t> sa = {};
        sa.ndim = it->ndim;
        sa.n = static_cast<uint32_t>(it->numel);
        for (int d = 0; d < it->ndim; d++) {
            sa.shape[d] = static_cast<uint32_t>(it->shape[d]);
            for (int k = 0; k < F::NOPS; k++)
                sa.stride[k][d] = it->stride[k][d];
        }
        for (int k = 0; k < F::NOPS; k++)
            sa.p[k] = it->base[k];
        pw_strided_kernel<F, uint32_t>
            <<<static_cast<unsigned>(blocks), PW_THREADS, 0, ds->stream>>>(f, sa);
    } else {
        strided_args<int64_t> sa = {};
        sa.ndim = it->ndim;
        sa.n = it->numel;
        for (int d = 0; d < it->ndim; d++) {
            sa.shape[d] = it->shape[d];
            for (int k = 0; k < F::NOPS; k++)
                sa.stride[k][d] = it->stride[k][d];
        }
        for (int k = 0; k < F::NOPS; k++)
            sa.p[k] = it->base[k];
        pw_strided_kernel<F, int64_t>
            <<<static_cast<unsigned>(blocks), PW_THREADS, 0, ds->stream>>>(f, sa);
    }
    return launch_check(what);
}

/* Runs functor f over the iterator on dev's stream. */
template <class F> tn_status pw_launch(int dev, const F &f, const tn_iter *it, const char *what) {
    if (it->nops != F::NOPS)
        return tn__error(TN_ERR_INTERNAL, "CUDA %s: iterator has %d operands, the op takes %d",
                         what, it->nops, F::NOPS);
    if (it->ndim < 1 || it->ndim > TN_MAX_DIMS)
        return tn__error(TN_ERR_INTERNAL, "CUDA %s: iterator has %d dimensions", what, it->ndim);
    if (it->numel <= 0) return TN_OK;
    return on_device(dev, [&](device_state *ds) { return pw_run(ds, f, it, what); });
}

} // namespace tnc

#endif
