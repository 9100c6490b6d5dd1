/* engine/core/backend.h — the backend table (plain C, also included by the
 * CUDA sources as C++).
 *
 * Every device type has one: the CPU's (engine/cpu/backend.c, the reference
 * kernels) and CUDA's (engine/cuda/backend.cu, when built). A backend
 * provides one entry per kernel family and, for a device with memory of its
 * own, memory and copies; the op code in engine/ops/ stays device-agnostic
 * and calls tn__dev_*() (engine/core/device.c), which picks the table of the
 * output's device type. Core never names a backend: the CPU's registers its
 * table with tn__backend_register from a constructor in its own folder, and
 * CUDA's either does the same (the static library) or is a plugin, a shared
 * object of its own that core loads on the first use of a CUDA device
 * (tn__backend_load, below; docs/design.md, "Back ends as plugins"). Core
 * sits below the back ends (docs/design.md, "Layers").
 *
 * Contract of every entry:
 *  - stream-ordered and asynchronous: a call enqueues work on the device's
 *    stream and returns; tn_synchronize / a copy to the host waits (the CPU
 *    runs every call to completion before it returns);
 *  - pointers are device pointers of `dev` (copies: see kind);
 *  - failure: a negative tn_status after tn__error() set the message;
 *    nothing was enqueued;
 *  - safe to call from several user threads at once. Each device has one
 *    stream that every thread enqueues on: a tensor handed from one thread
 *    to another was produced by work enqueued before the handover, so the
 *    consumer's kernels run after it; and a freed block can be reused at
 *    once by the caching allocator (any later use is later on that stream).
 */
#ifndef TN_CORE_BACKEND_H
#define TN_CORE_BACKEND_H

#include "kernel_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Anomaly mode's batched NaN/Inf check (nonfinite_check / nonfinite_poll).
 * A check's key is even, nonzero and below 2^63 (the host hands them out in
 * increasing order); key | TN_NONFINITE_INF records an Inf, so that in one
 * tensor a NaN (the smaller key) wins. Word 0 collects forward checks, word
 * 1 backward ones. */
#define TN_NONFINITE_INF 1u
#define TN_NONFINITE_MAX 32 /* tensors per nonfinite_check call */
#define TN_NONFINITE_WORDS 2

typedef struct tn_nf_item {
    const void *p; /* n contiguous elements of dtype dt (device memory) */
    int64_t n;
    uint64_t key;
    tn_dtype dt;
    int word; /* 0 .. TN_NONFINITE_WORDS - 1 */
} tn_nf_item;

typedef enum tn_copy_kind { TN_COPY_H2D, TN_COPY_D2H, TN_COPY_D2D } tn_copy_kind;

typedef struct tn_device_mem_stats {
    size_t bytes_live;     /* handed out to storages */
    size_t bytes_peak;     /* high-water mark of bytes_live */
    size_t bytes_reserved; /* held by the caching allocator (live + cached) */
} tn_device_mem_stats;

/* A back end's answer when it leaves a call it may decline to core (gemm or
 * attention of a half dtype): positive, so neither TN_OK nor an error. */
#define TN__DECLINED ((tn_status)2)

typedef struct tn_backend {
    const char *name;
    /* Devices usable now (0: none, e.g. no driver or no GPU). Never fails. */
    int (*device_count)(void);

    /* ---- memory: caching allocator, stream-ordered ----
     * NULL for the CPU: host memory is core's (engine/core/alloc.c). */
    void *(*alloc)(int dev, size_t bytes); /* NULL + error; 256-byte aligned */
    void (*free)(int dev, void *p, size_t bytes);
    void (*mem_stats)(int dev, tn_device_mem_stats *out);
    /* Copies bytes between host memory and device memory, or within the
     * device. H2D and D2H return when the copy is done (the host buffer may
     * be reused / read at once); D2D is enqueued. */
    tn_status (*memcpy)(int dev, void *dst, const void *src, size_t bytes, tn_copy_kind kind);
    tn_status (*synchronize)(int dev);

    /* ---- kernels ---- */
    /* Pointwise op `code` over the iterator; dt is the compute dtype (the
     * inputs' dtype; the output is bool for comparisons, else dt). ctx:
     * tn_pw_ctx for pw_ops.h codes, tn_sgd_ctx / tn_adam_ctx for those.
     * Codes a dtype lacks (tn_pw_supports) are never passed. */
    tn_status (*pointwise)(int dev, tn_pw_code code, tn_dtype dt, const tn_iter *it,
                           const void *ctx);
    /* operand 0 (dtype dst) = convert(operand 1 (dtype src)), broadcast. */
    tn_status (*copy)(int dev, tn_dtype dst, tn_dtype src, const tn_iter *it);
    /* operand 0 = v converted to dt. */
    tn_status (*fill)(int dev, tn_dtype dt, const tn_iter *it, double v);
    /* Deterministic: the same inputs give the same bits on every run. Never
     * called with an empty input (core/reduce.c fills those results). */
    tn_status (*reduce)(int dev, const tn_red_args *a);
    /* float32 / float64 (integers: TN_ERR_DTYPE), and the half dtypes of
     * gemm_halves. TF32 only when allowed by tn_cuda_set_allow_tf32. */
    tn_status (*gemm)(int dev, tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b);
    /* Bit (1u << dt) for each half dtype (TN_BF16, TN_F16) gemm takes itself:
     * float32 products and sums, each output rounded once (beta = 1 reads C
     * widened), as float32 copies through the float32 gemm give. For the
     * others core makes those copies (engine/core/widen.h). gemm may also
     * decline a product of such a dtype (TN__DECLINED, having touched
     * nothing): core then makes the copies too (the CPU takes only products
     * of a few rows, reading the half weight in place). */
    uint32_t gemm_halves;
    tn_status (*softmax)(int dev, const tn_sm_args *a);
    /* Anomaly mode: for each of the `count` (<= TN_NONFINITE_MAX) items
     * holding a NaN, lowers its word to the item's key when that is smaller;
     * holding an Inf and no NaN, to key | TN_NONFINITE_INF. Enqueued without
     * waiting, in one launch. Integer and bool items are always finite. The
     * host reads the words with nonfinite_poll at its next synchronisation
     * point: the smallest key of each word since the last poll. NULL for the
     * CPU, whose data the host scans directly. */
    tn_status (*nonfinite_check)(int dev, int count, const tn_nf_item *items);
    /* out[w] = word w's smallest recorded key (0: none), and clears the
     * words; waits for the device's stream. A negative status (out all 0)
     * when CUDA failed. */
    tn_status (*nonfinite_poll)(int dev, uint64_t out[TN_NONFINITE_WORDS]);
    /* Fused cross-entropy (tn_ce_args). NULL where the device has none: the
     * op composes log_softmax and the NLL from the other entries instead. */
    tn_status (*cross_entropy)(int dev, const tn_ce_args *a);
    /* Indexing kernels (tn_index_args): embedding, index_select, gather,
     * scatter_add and their backward. Deterministic, no float atomics. */
    tn_status (*index)(int dev, const tn_index_args *a);
    /* Layer norm, forward and backward (tn_ln_args). */
    tn_status (*layer_norm)(int dev, const tn_ln_args *a);
    /* Convolution's im2col / col2im (tn_conv_args); the products are gemm's. */
    tn_status (*conv)(int dev, const tn_conv_args *a);
    /* Max and average pooling, forward and backward (tn_pool_args). The same
     * bits on every back end and for any thread count. */
    tn_status (*pool)(int dev, const tn_pool_args *a);
    /* Fused scaled dot-product attention (tn_attn_args). Deterministic. */
    tn_status (*attention)(int dev, const tn_attn_args *a);
    /* The measure of the gradient monitor and clip_grad_norm_, over `count` (<=
     * TN_GRAD_STATS_MAX) contiguous tensors of float dtype dt, n[i] elements at p[i]: out[2 i] =
     * the sum of squares, out[2 i + 1] = the largest |value| (NaN when one is NaN; 0 for no
     * element), float64, written to out (device memory) by work enqueued without waiting. The
     * same bits on every run (on the CPU, for any thread count). */
    tn_status (*grad_stats)(int dev, tn_dtype dt, int count, const void *const *p,
                            const int64_t *n, double *out);
    /* A read of device memory that does not wait for the device (the gradient monitor's
     * results): readback_begin enqueues a copy of `bytes` (1 to TN_READBACK_MAX) at src into
     * host memory of the backend's and returns a ticket at once; readback_end waits for that
     * copy only, not for work enqueued after it, copies the bytes to dst (NULL: drops them)
     * and ends the ticket, whatever it returns. Each ticket is ended once, on any thread.
     * NULL for the CPU. */
    tn_status (*readback_begin)(int dev, const void *src, size_t bytes, void **ticket);
    tn_status (*readback_end)(void *ticket, void *dst);
    /* Batch norm and group norm, forward and backward (tn_cn_args). Deterministic. */
    tn_status (*channel_norm)(int dev, const tn_cn_args *a);
    /* Bit (1u << dt) for each half dtype whose attention calls the back end may take itself, as
     * gemm_halves: float32 arithmetic and each output rounded once, the bits of core's float32
     * copies. It declines (TN__DECLINED, having touched nothing) those it does not take, and
     * core makes the copies (the CPU takes the forward of a few query rows: a generation step
     * over a half KV cache, read in place). */
    uint32_t attention_halves;
} tn_backend;

/* Tensors per grad_stats call. */
#define TN_GRAD_STATS_MAX 32
/* Bytes per readback ticket. */
#define TN_READBACK_MAX 4096

/* Device types with a slot in the table. */
#define TN_DEVICE_TYPES (TN_CUDA + 1)

/* Installs the table of a device type (engine/core/backend.c): called by the
 * back ends' constructors, before main, and by the plugin loader. */
void tn__backend_register(tn_device_type type, const tn_backend *be);
/* The tables by device type; NULL where that back end is not there (not
 * built, or a plugin not loaded yet). The CPU's is set before main and read
 * without ordering. A plugin's slot is written once by tn__backend_load:
 * read it plainly only where the reader is ordered after that load (it holds
 * a storage of the device, or called tn__backend_load itself); elsewhere use
 * tn__backend_loaded. */
extern const tn_backend *tn__backends[TN_DEVICE_TYPES];
/* The table of a device type, loading its plugin on the first call (once
 * per process, whichever threads ask at the same time). NULL + TN_ERR_DEVICE
 * saying why when the back end is not there: not built, or its plugin or a
 * library it needs could not be loaded (the loader's message). */
const tn_backend *tn__backend_load(tn_device_type type);
/* The table when it is there already (registered, or a plugin loaded), else
 * NULL; never loads and never sets an error: for the questions a process that
 * has never used the device must answer without loading it (memory
 * statistics, anomaly mode's device polls). */
const tn_backend *tn__backend_loaded(tn_device_type type);

/* ---- back ends as plugins (docs/design.md, "Back ends as plugins") ----
 * The plugin exports one C function, TN_CUDA_PLUGIN_INIT, of type
 * tn_plugin_init_fn: core calls it once with the services the back end takes
 * from core (the host), and it returns its table, or NULL when it was built
 * for another ABI or version (then core unloads it). The plugin does not link
 * libtenet: every core function its files call goes through the host. */
/* Bumped whenever tn_backend, the kernel argument structs (kernel_args.h) or
 * tn_plugin_host change. */
#define TN_PLUGIN_ABI 6u
/* from tenet.h, which the files that use it include */
#define TN_PLUGIN_VERSION                                                                          \
    ((uint32_t)TENET_VERSION_MAJOR * 10000u + TENET_VERSION_MINOR * 100u + TENET_VERSION_PATCH)
#define TN_CUDA_PLUGIN_FILE "libtenet-cuda.so"
#define TN_CUDA_PLUGIN_INIT "tn_cuda_plugin_init"

typedef struct tn_plugin_host {
    uint32_t abi;     /* TN_PLUGIN_ABI of libtenet */
    uint32_t version; /* TN_PLUGIN_VERSION of libtenet: one release's plugin only */
    /* tn__error: sets the calling thread's error state (libtenet's) */
    tn_status (*error)(tn_status st, const char *fmt, ...);
    bool (*tf32_allowed)(void); /* tn__tf32_allowed */
} tn_plugin_host;

typedef const tn_backend *(*tn_plugin_init_fn)(const tn_plugin_host *host);

/* tn_cuda_set_allow_tf32's setting (engine/core/device.c; in the CUDA
 * plugin, engine/cuda/plugin.cu forwards it to the host's). */
bool tn__tf32_allowed(void);

/* Errors from backend code (engine/core/error.c; in the plugin, forwarded to
 * the host's by engine/cuda/plugin.cu). */
tn_status tn__error(tn_status st, const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif
