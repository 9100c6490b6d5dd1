/* The CPU's backend table: the reference kernels of every family. Compiled
 * once per kernel set (isa.h: tn__cpu_backend becomes tn__cpu_backend_avx2,
 * ...); isa.c registers one of them with core (core never names a back end).
 * Host memory is core's own (engine/core/alloc.c), so the memory entries are
 * NULL. */
#include "cpu_backend.h"
#include "gemm.h"
#include "pointwise_loops.h"

static int cpu_device_count(void) { return 1; }

static tn_status cpu_synchronize(int dev) {
    (void)dev; /* every CPU kernel has finished when its call returns */
    return TN_OK;
}

static tn_status cpu_pointwise(int dev, tn_pw_code code, tn_dtype dt, const tn_iter *it,
                               const void *ctx) {
    (void)dev;
    tn_loop_fn loop = tn__pw_loops[code][dt];
    if (TN_UNLIKELY(!loop))
        return tn__error(TN_ERR_INTERNAL, "no CPU loop for pointwise code %d and %s", (int)code,
                         tn_dtype_name(dt));
    tn__iter_run(it, loop, (void *)ctx);
    return TN_OK;
}

static tn_status cpu_gemm(int dev, tn_dtype dt, const tn_gemm *g, const tn_gemm_batch *b) {
    (void)dev;
    return tn__is_half(dt) ? tn__gemm_half(dt, g, b) : tn__gemm(dt, g, b);
}

const tn_backend tn__cpu_backend = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .synchronize = cpu_synchronize,
    .pointwise = cpu_pointwise,
    .copy = tn__cpu_copy,
    .fill = tn__cpu_fill,
    .reduce = tn__cpu_reduce,
    .gemm = cpu_gemm,
    .gemm_halves = (1u << TN_BF16) | (1u << TN_F16), /* a few rows; the rest declined */
    .softmax = tn__cpu_softmax,
    .cross_entropy = tn__cpu_cross_entropy,
    .index = tn__cpu_index,
    .layer_norm = tn__cpu_layer_norm,
    .attention = tn__cpu_attention,
    .conv = tn__cpu_conv,
    .pool = tn__cpu_pool,
    .grad_stats = tn__cpu_grad_stats,
    .channel_norm = tn__cpu_channel_norm,
    .attention_halves = (1u << TN_BF16) | (1u << TN_F16), /* one slice at a time in float32 */
};
