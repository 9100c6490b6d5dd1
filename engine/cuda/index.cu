/* engine/cuda/index.cu — the indexing kernels (tn_index_args): embedding,
 * index_select, gather, scatter_add and their backward, every dtype.
 *
 * Deterministic, no atomics, and the sums are the CPU's bit for bit (every
 * output element adds its terms in index order, as engine/cpu/index_kernels.c):
 *  - ROWS, GATHER: one thread per output element (copies).
 *  - ROWS_ADD: up to ROWS_ADD_DEVICE_MAX indices (an embedding backward of
 *    up to that many tokens), on the device alone, with no wait: the first
 *    occurrence of each destination row in idx owns the row and folds, in
 *    index order, every source row that lands on it (rows_add_kernel).
 *    Longer lists are read back and counting-sorted on the host into
 *    segments, one per destination row that occurs, each listing its source
 *    rows in index order; one thread per (outer, segment, inner) element
 *    folds its segment (segments_add_kernel). Two waits, per call.
 *  - SCATTER_ADD: one thread per line along dim (every coordinate but dim
 *    fixed), walking the line in order; all the writes of a line stay in it.
 */
#include <stdlib.h>

#include "cuda_internal.h"
#include "kernel_util.cuh"

namespace tnc {

namespace {

constexpr int IX_THREADS = 256;

/* a + b as T, as the CPU's index adds: bool |, so that true + true stays
 * true; the halves in float32, rounded at each add */
template <typename T> __device__ __forceinline__ T add_el(T a, T b) {
    if constexpr (std::is_same<T, uint8_t>::value)
        return a | b;
    else
        return st<T>(ld(a) + ld(b));
}

/* out (outer, n, inner)[o, j, i] = src (outer, size, inner)[o, idx[j], i] */
template <typename T> __global__ void rows_kernel(tn_index_args a) {
    const int64_t total = a.outer * a.n * a.inner, G = static_cast<int64_t>(gridDim.x) * IX_THREADS;
    const T *src = static_cast<const T *>(a.src);
    T *out = static_cast<T *>(a.out);
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * IX_THREADS + threadIdx.x; e < total;
         e += G) {
        const int64_t i = e % a.inner, r = e / a.inner, j = r % a.n, o = r / a.n;
        out[e] = src[(o * a.size + a.idx[j]) * a.inner + i];
    }
}

/* Exclusive prefix sum of v over the block (IX_THREADS threads) through
 * sh[IX_THREADS]; *total gets the sum. Every thread of the block calls it. */
__device__ int block_scan(int v, int *sh, int *total) {
    const int t = static_cast<int>(threadIdx.x);
    sh[t] = v;
    __syncthreads();
    for (int off = 1; off < IX_THREADS; off <<= 1) {
        const int x = t >= off ? sh[t - off] : 0;
        __syncthreads();
        sh[t] += x;
        __syncthreads();
    }
    const int incl = sh[t];
    *total = sh[IX_THREADS - 1];
    __syncthreads(); /* sh is free again */
    return incl - v;
}

/* ROWS_ADD, out (outer, size, inner)[o, idx[j]] += src (outer, n, inner)[o, j],
 * with no host in the loop: block b takes the positions j = b, b + grid, ...;
 * position j owns its destination row r = idx[j] when it is r's first
 * occurrence in idx (a block that meets r earlier skips j). The owner walks
 * idx from j on in chunks of IX_THREADS, lists each chunk's matches in order
 * (a block scan), and each thread folds them into the (o, i) elements it
 * strides over: every element adds its terms in index order, as the CPU.
 * A row is written by its one owner only: no atomics. Each block reads all
 * of idx, so the work grows as n^2 / IX_THREADS: for long index lists,
 * segments_add_kernel. */
template <typename T> __global__ void rows_add_kernel(tn_index_args a) {
    __shared__ int sh[IX_THREADS], list[IX_THREADS];
    const T *src = static_cast<const T *>(a.src);
    T *out = static_cast<T *>(a.out);
    const int64_t elems = a.outer * a.inner, t = threadIdx.x;
    for (int64_t j = blockIdx.x; j < a.n; j += gridDim.x) {
        const int64_t r = a.idx[j], first = j - j % IX_THREADS;
        bool owner = true;
        for (int64_t base = 0; base < first && owner; base += IX_THREADS)
            owner = !__syncthreads_or(a.idx[base + t] == r);
        for (int64_t base = first; base < a.n && owner; base += IX_THREADS) {
            const bool m = base + t < a.n && a.idx[base + t] == r;
            if (base == first && __syncthreads_or(m && base + t < j)) break; /* r is earlier */
            if (!__syncthreads_or(m && base + t >= j)) continue;
            int count;
            const int at = block_scan(m && base + t >= j, sh, &count);
            if (m && base + t >= j) list[at] = static_cast<int>(t);
            __syncthreads();
            for (int64_t e = t; e < elems; e += IX_THREADS) {
                const int64_t o = e / a.inner, i = e % a.inner;
                T *d = out + (o * a.size + r) * a.inner + i;
                const T *s = src + (o * a.n + base) * a.inner + i;
                T acc = *d;
                for (int q = 0; q < count; q++)
                    acc = add_el<T>(acc, s[list[q] * a.inner]);
                *d = acc;
            }
            __syncthreads(); /* list is free again */
        }
    }
}

/* ROWS_ADD over segments sorted on the host (rows_add_sorted): seg holds
 * nu + 1 starts into order, rows the destination row of each segment; one
 * thread per (outer, segment, inner) element folds its segment in order. */
template <typename T>
__global__ void segments_add_kernel(tn_index_args a, const int64_t *order, const int64_t *rows,
                                    const int64_t *seg, int64_t nu) {
    const int64_t total = a.outer * nu * a.inner, G = static_cast<int64_t>(gridDim.x) * IX_THREADS;
    const T *src = static_cast<const T *>(a.src);
    T *out = static_cast<T *>(a.out);
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * IX_THREADS + threadIdx.x; e < total;
         e += G) {
        const int64_t i = e % a.inner, r = e / a.inner, u = r % nu, o = r / nu;
        T *d = out + (o * a.size + rows[u]) * a.inner + i;
        T acc = *d;
        for (int64_t k = seg[u]; k < seg[u + 1]; k++)
            acc = add_el<T>(acc, src[(o * a.n + order[k]) * a.inner + i]);
        *d = acc;
    }
}

/* First elements of line L (every coordinate but dim, row-major) in idx,
 * src and out. */
__device__ __forceinline__ void line_offsets(const tn_index_args &a, int64_t L, int64_t off[3]) {
    off[0] = off[1] = off[2] = 0;
    for (int d = a.ndim - 1; d >= 0; d--) {
        if (d == a.dim) continue;
        const int64_t c = L % a.shape[d];
        L /= a.shape[d];
        off[0] += c * a.istride[d];
        off[1] += c * a.sstride[d];
        off[2] += c * a.ostride[d];
    }
}

/* out[p] = src[p with p[dim] = idx[p]] */
template <typename T> __global__ void gather_kernel(tn_index_args a, int64_t total) {
    const int64_t G = static_cast<int64_t>(gridDim.x) * IX_THREADS;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * IX_THREADS + threadIdx.x; e < total;
         e += G) {
        int64_t p = e, oi = 0, os = 0, ss = 0;
        for (int d = a.ndim - 1; d >= 0; d--) {
            const int64_t c = p % a.shape[d];
            p /= a.shape[d];
            oi += c * a.istride[d];
            os += c * a.ostride[d];
            if (d != a.dim) ss += c * a.sstride[d];
        }
        static_cast<T *>(a.out)[os] =
            static_cast<const T *>(a.src)[ss + a.idx[oi] * a.sstride[a.dim]];
    }
}

/* out[p with p[dim] = idx[p]] += src[p], one line per thread, in order */
template <typename T> __global__ void scatter_add_kernel(tn_index_args a, int64_t lines) {
    const int64_t G = static_cast<int64_t>(gridDim.x) * IX_THREADS;
    const int64_t m = a.shape[a.dim], is = a.istride[a.dim], ss = a.sstride[a.dim],
                  os = a.ostride[a.dim];
    for (int64_t L = static_cast<int64_t>(blockIdx.x) * IX_THREADS + threadIdx.x; L < lines;
         L += G) {
        int64_t off[3];
        line_offsets(a, L, off);
        const int64_t *ix = a.idx + off[0];
        const T *s = static_cast<const T *>(a.src) + off[1];
        T *o = static_cast<T *>(a.out) + off[2];
        for (int64_t j = 0; j < m; j++) {
            T *d = o + ix[j * is] * os;
            *d = add_el<T>(*d, s[j * ss]);
        }
    }
}

/* Blocks for `work` threads' worth of elements (grid_clamp's bounds). */
unsigned grid_for(const device_state *ds, int64_t work) {
    return grid_clamp(ds, ceil_div(work, IX_THREADS));
}

/* The counting sort of ROWS_ADD, on the host: order (n) lists j by
 * destination row, stable; rows (nu) and seg (nu + 1) describe the
 * segments. One malloc'd block of n + 2 nu + 1 int64, NULL + error. */
int64_t *segments(const int64_t *idx, int64_t n, int64_t size, int64_t *nu_out) {
    int64_t *cnt = static_cast<int64_t *>(calloc(static_cast<size_t>(size) + 1, sizeof *cnt));
    int64_t *buf = static_cast<int64_t *>(malloc((static_cast<size_t>(n) * 3 + 1) * sizeof *buf));
    if (!cnt || !buf) {
        free(cnt);
        free(buf);
        tn__error(TN_ERR_OUT_OF_MEMORY, "CUDA index: out of host memory");
        return nullptr;
    }
    int64_t nu = 0;
    for (int64_t j = 0; j < n; j++)
        nu += cnt[idx[j] + 1]++ == 0;
    for (int64_t r = 0; r < size; r++)
        cnt[r + 1] += cnt[r]; /* cnt[r]: start of row r */
    int64_t *order = buf, *rows = buf + n, *seg = buf + n + nu;
    for (int64_t r = 0, u = 0; r < size; r++)
        if (cnt[r + 1] > cnt[r]) {
            rows[u] = r;
            seg[u++] = cnt[r];
        }
    seg[nu] = n;
    for (int64_t j = 0; j < n; j++)
        order[cnt[idx[j]]++] = j;
    free(cnt);
    *nu_out = nu;
    return buf;
}

/* ROWS_ADD for long index lists: the indices read back and sorted on the
 * host (two waits for the stream, small beside the work). */
template <typename T>
tn_status rows_add_sorted(int dev, device_state *ds, const tn_index_args *a) {
    const size_t ib = static_cast<size_t>(a->n) * sizeof(int64_t);
    int64_t *host = static_cast<int64_t *>(malloc(ib));
    if (!host) return tn__error(TN_ERR_OUT_OF_MEMORY, "CUDA index: out of host memory");
    cudaError_t e = cudaMemcpyAsync(host, a->idx, ib, cudaMemcpyDeviceToHost, ds->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ds->stream);
    if (e != cudaSuccess) {
        free(host);
        return cuda_fail(e, "index: reading the indices");
    }
    int64_t nu = 0, *seg = segments(host, a->n, a->size, &nu);
    free(host);
    if (!seg) return TN_ERR_OUT_OF_MEMORY; /* segments() set the message */
    const size_t sb =
        (static_cast<size_t>(a->n) + 2 * static_cast<size_t>(nu) + 1) * sizeof(int64_t);
    scratch s(dev, sb);
    int64_t *d = static_cast<int64_t *>(s.get());
    if (!d) {
        free(seg);
        return TN_ERR_OUT_OF_MEMORY; /* alloc() set the message */
    }
    e = cudaMemcpyAsync(d, seg, sb, cudaMemcpyHostToDevice, ds->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ds->stream); /* seg is freed below */
    free(seg);
    if (e != cudaSuccess) return cuda_fail(e, "index: uploading the segments");
    segments_add_kernel<T><<<grid_for(ds, a->outer * nu * a->inner), IX_THREADS, 0, ds->stream>>>(
        *a, d, d + a->n, d + a->n + nu, nu);
    return launch_check("index_add");
}

/* Index lists up to this long are folded on the device alone (rows_add_kernel,
 * whose work grows as n^2); longer ones are sorted on the host. */
constexpr int64_t ROWS_ADD_DEVICE_MAX = 32768;

template <typename T> tn_status rows_add(int dev, device_state *ds, const tn_index_args *a) {
    if (a->n > ROWS_ADD_DEVICE_MAX) return rows_add_sorted<T>(dev, ds, a);
    rows_add_kernel<T><<<grid_clamp(ds, a->n), IX_THREADS, 0, ds->stream>>>(*a);
    return launch_check("index_add");
}

/* T by element width for the copies (bits_t), by dtype for the adds. */
template <typename T> tn_status run(int dev, device_state *ds, const tn_index_args *a) {
    int64_t n = 1, lines = 1;
    for (int d = 0; d < a->ndim; d++) {
        n *= a->shape[d];
        if (d != a->dim) lines *= a->shape[d];
    }
    switch (a->mode) {
    case TN_IX_ROWS:
        rows_kernel<T><<<grid_for(ds, a->outer * a->n * a->inner), IX_THREADS, 0, ds->stream>>>(*a);
        return launch_check("index_select");
    case TN_IX_ROWS_ADD:
        return rows_add<T>(dev, ds, a);
    case TN_IX_GATHER:
        if (n == 0) return TN_OK;
        gather_kernel<T><<<grid_for(ds, n), IX_THREADS, 0, ds->stream>>>(*a, n);
        return launch_check("gather");
    default:
        if (n == 0) return TN_OK;
        scatter_add_kernel<T><<<grid_for(ds, lines), IX_THREADS, 0, ds->stream>>>(*a, lines);
        return launch_check("scatter_add");
    }
}

} // namespace

extern "C" tn_status tn__cuda_index(int dev, const tn_index_args *a) {
    tn_status st = check_args("index", a, TN_IX_SCATTER_ADD + 1);
    if (st < 0) return st;
    const bool rows = a->mode == TN_IX_ROWS || a->mode == TN_IX_ROWS_ADD;
    if (rows ? a->outer * a->n * a->inner == 0 : a->ndim < 1) return TN_OK;
    const bool adds = a->mode == TN_IX_ROWS_ADD || a->mode == TN_IX_SCATTER_ADD;
    return on_device(dev, [&](device_state *ds) {
        return dispatch(a->dtype, "index", [&](auto tag) {
            using T = typename decltype(tag)::type;
            return adds ? run<T>(dev, ds, a) : run<bits_t<T>>(dev, ds, a);
        });
    });
}

} // namespace tnc
