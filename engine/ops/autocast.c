/* Autocast (tenet/autocast.h): per-thread regions, the op policies of
 * torch.autocast, and the weight-cast cache.
 *
 * The policy table is the only place that knows which op does what:
 *   CPU  — torch's AutocastCPU registrations (aten/src/ATen/autocast_mode.cpp),
 *          checked against torch 1.13 by scripts/autocast_policy.py
 *          (tests/golden_amp/autocast_policy.txt); scaled_dot_product_attention,
 *          absent from 1.13, follows torch 2.x (lower precision).
 *   CUDA — torch 2.x's AT_FORALL_LOWER_PRECISION_FP / FP32 /
 *          FP32_SET_OPT_DTYPE / PROMOTE lists (autocast_mode.h) restricted to
 *          tenet's ops; fp32_set_opt_dtype (softmax, log_softmax, sum) runs
 *          the op in float32 on a half input, which casting the input does.
 *
 * State, all thread-local (no sharing, no atomics): the switch
 * tn__autocast_on (core; what the ops read), the enabled mask and dtype per
 * device type, the stack of open regions (what each replaced), and the cache.
 * The switch equals the enabled mask except while an autocast op runs or a
 * backward pass runs (both set it to 0 and restore it).
 */
#include "autocast.h"

#include "ops_internal.h"
#include "tenet/autocast.h"

enum { AC_NONE = 0, AC_LOWER, AC_FP32, AC_PROMOTE };

/* [op][device type]: CPU, CUDA */
static const uint8_t policy[TN_AC_OP_COUNT][2] = {
    [TN_AC_MATMUL] = {AC_LOWER, AC_LOWER},
    [TN_AC_LINEAR] = {AC_LOWER, AC_LOWER},
    [TN_AC_CONV] = {AC_LOWER, AC_LOWER},
    [TN_AC_SDPA] = {AC_LOWER, AC_LOWER},
    [TN_AC_CONV_TRANSPOSE] = {AC_FP32, AC_LOWER}, /* CPU: conv_transpose*d in fp32 */
    [TN_AC_CROSS_ENTROPY] = {AC_FP32, AC_FP32},   /* cross_entropy_loss; CUDA: nll_loss */
    [TN_AC_MSE_LOSS] = {AC_FP32, AC_FP32},
    [TN_AC_LOGSUMEXP] = {AC_NONE, AC_FP32},
    [TN_AC_SOFTMAX] = {AC_NONE, AC_FP32},
    [TN_AC_LOG_SOFTMAX] = {AC_NONE, AC_FP32},
    [TN_AC_LAYER_NORM] = {AC_NONE, AC_FP32},
    [TN_AC_GROUP_NORM] = {AC_NONE, AC_FP32}, /* batch_norm: on neither list (follows x) */
    [TN_AC_EXP] = {AC_NONE, AC_FP32},
    [TN_AC_LOG] = {AC_NONE, AC_FP32},
    [TN_AC_POW] = {AC_NONE, AC_FP32},
    [TN_AC_SUM] = {AC_NONE, AC_FP32},
    [TN_AC_CAT] = {AC_PROMOTE, AC_PROMOTE},
    [TN_AC_STACK] = {AC_PROMOTE, AC_PROMOTE},
    [TN_AC_SCATTER_ADD] = {AC_NONE, AC_PROMOTE},
};

#define N_DEV 2 /* TN_CPU, TN_CUDA */

typedef struct region {
    int dev;
    bool was_enabled;
    tn_dtype was_dtype;
} region;

typedef struct cache_entry {
    tn_tensor *src, *cast; /* both retained until the cache is emptied */
} cache_entry;

static _Thread_local uint8_t tls_enabled;
static _Thread_local tn_dtype tls_dtype[N_DEV] = {TN_BF16, TN_F16};
static _Thread_local region tls_regions[TN_AUTOCAST_MAX_DEPTH];
static _Thread_local int tls_depth;
static _Thread_local cache_entry *tls_cache;
static _Thread_local int tls_cache_n, tls_cache_cap;

/* ---- regions ------------------------------------------------------------------------ */

static tn_status push(const char *fn, tn_device_type device_type, bool enable, tn_dtype dtype) {
    if (device_type != TN_CPU && device_type != TN_CUDA)
        return tn__error(TN_ERR_DEVICE, "%s: device_type %d is not TN_CPU or TN_CUDA", fn,
                         (int)device_type);
    if (enable && dtype != TN_BF16 && dtype != TN_F16)
        return tn__error(TN_ERR_DTYPE, "%s: autocast dtype must be bfloat16 or float16, got %s", fn,
                         (int)dtype >= 0 && dtype < TN_DTYPE_COUNT ? tn_dtype_name(dtype)
                                                                   : "an invalid dtype");
    if (tls_depth == TN_AUTOCAST_MAX_DEPTH)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: more than %d autocast regions are open", fn,
                         TN_AUTOCAST_MAX_DEPTH);
    int d = (int)device_type;
    uint8_t bit = (uint8_t)(1u << d);
    tls_regions[tls_depth++] = (region){d, (tls_enabled & bit) != 0, tls_dtype[d]};
    tls_enabled = enable ? (uint8_t)(tls_enabled | bit) : (uint8_t)(tls_enabled & ~bit);
    if (enable) tls_dtype[d] = dtype;
    tn__autocast_on = tls_enabled;
    return TN_OK;
}

tn_status tn_autocast_begin(tn_device_type device_type, tn_dtype dtype) {
    return push(__func__, device_type, true, dtype);
}

tn_status tn_autocast_begin_disabled(tn_device_type device_type) {
    return push(__func__, device_type, false, TN_DTYPE_SAME);
}

tn_status tn_autocast_end(void) {
    if (tls_depth == 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_autocast_end: no autocast region is open on this thread");
    region r = tls_regions[--tls_depth];
    uint8_t bit = (uint8_t)(1u << r.dev);
    tls_enabled = r.was_enabled ? (uint8_t)(tls_enabled | bit) : (uint8_t)(tls_enabled & ~bit);
    tls_dtype[r.dev] = r.was_dtype;
    tn__autocast_on = tls_enabled;
    if (tls_depth == 0) tn_autocast_clear_cache(); /* torch: at the outermost exit */
    return TN_OK;
}

bool tn_autocast_is_enabled(tn_device_type device_type) {
    if (device_type != TN_CPU && device_type != TN_CUDA) return false;
    return (tls_enabled >> (int)device_type) & 1u;
}

tn_dtype tn_autocast_dtype(tn_device_type device_type) {
    if (device_type != TN_CPU && device_type != TN_CUDA) {
        tn__error(TN_ERR_DEVICE, "tn_autocast_dtype: device_type %d is not TN_CPU or TN_CUDA",
                  (int)device_type);
        return TN_DTYPE_SAME;
    }
    return tls_dtype[(int)device_type];
}

/* ---- the weight-cast cache ------------------------------------------------------------ */

void tn_autocast_clear_cache(void) {
    for (int i = 0; i < tls_cache_n; i++) {
        tn_release(tls_cache[i].cast);
        tn_release(tls_cache[i].src);
    }
    tn__free(tls_cache);
    tls_cache = NULL;
    tls_cache_n = tls_cache_cap = 0;
}

int tn__autocast_cache_size(void) { return tls_cache_n; }

/* torch's rule (cached_cast): a float32 leaf that requires grad, not a view,
 * cast to the region's lower-precision dtype. */
static bool cacheable(const tn_tensor *t, tn_dtype to, int d) {
    return to == tls_dtype[d] && t->dtype == TN_F32 && !t->view_base && tn__requires_grad(t) &&
           tn_is_leaf(t);
}

static tn_tensor *cache_find(const tn_tensor *t) {
    for (int i = 0; i < tls_cache_n; i++) /* one dtype per region: the source is the key */
        if (tls_cache[i].src == t && tls_cache[i].cast->dtype == tls_dtype[tn__dev(t).type])
            return tn__retain(tls_cache[i].cast);
    return NULL;
}

/* Keeps the cast; a full cache that cannot grow just does not keep it. */
static void cache_add(const tn_tensor *t, tn_tensor *cast) {
    if (tls_cache_n == tls_cache_cap) {
        int cap = tls_cache_cap ? 2 * tls_cache_cap : 16;
        cache_entry *c = tn__realloc(tls_cache, (size_t)cap * sizeof *c);
        if (!c) return;
        tls_cache = c, tls_cache_cap = cap;
    }
    tls_cache[tls_cache_n++] = (cache_entry){tn__retain(t), tn__retain(cast)};
}

/* t converted to `to`, recorded (ToCopyBackward0). Casts made with grad mode
 * off are not cached: they have no history (pytorch/pytorch#105211). */
static tn_tensor *cast_one(const tn_tensor *t, tn_dtype to, int d) {
    bool keep = cacheable(t, to, d);
    tn_tensor *c = keep ? cache_find(t) : NULL;
    if (c) return c;
    c = tn__to_dtype_autograd(t, to);
    if (c && keep && tn__grad_enabled()) cache_add(t, c);
    return c;
}

/* ---- the hook ---------------------------------------------------------------------------- */

/* Autocast touches float tensors of the region's device type, float64 excepted. */
static bool eligible(const tn_tensor *t, int d) {
    return t && (int)tn__dev(t).type == d && tn__is_float(t->dtype) && t->dtype != TN_F64;
}

static tn_dtype target_of(int pol, int d, int n, const tn_tensor *const *in) {
    if (pol == AC_LOWER) return tls_dtype[d];
    if (pol == AC_FP32) return TN_F32;
    /* promote: torch starts from the region's dtype; where it fails on the other half type
     * ("Unexpected floating ScalarType"), bfloat16 with float16 promotes to float32 */
    tn_dtype to = tls_dtype[d];
    for (int i = 0; i < n; i++)
        if (eligible(in[i], d)) to = tn__promote_types(to, in[i]->dtype);
    return to;
}

bool tn__autocast_apply(tn_ac_frame *f, tn_ac_op op, int n, const tn_tensor *const *in) {
    int d = -1;
    for (int i = 0; i < n && d < 0; i++)
        if (in[i]) d = (int)tn__dev(in[i]).type;
    if (d < 0 || d >= N_DEV || !((tn__autocast_on >> d) & 1u) || policy[op][d] == AC_NONE)
        return false;
    tn_dtype to = target_of(policy[op][d], d, n, in);
    f->n = n, f->ok = true;
    f->t = n <= TN_AC_INLINE ? f->inline_t : tn__calloc_small((size_t)n * sizeof *f->t);
    f->saved = tn__autocast_on;
    tn__autocast_on = 0;
    if (!f->t) {
        f->n = 0, f->ok = false;
        return true;
    }
    for (int i = 0; i < n; i++) {
        const tn_tensor *t = in[i];
        if (!eligible(t, d) || t->dtype == to) {
            f->t[i] = t ? tn__retain(t) : NULL;
        } else if (!(f->t[i] = cast_one(t, to, d))) {
            f->ok = false;
        }
    }
    return true;
}

tn_tensor *tn__autocast_done(tn_ac_frame *f, tn_tensor *r) {
    tn__autocast_on = f->saved;
    for (int i = 0; i < f->n; i++)
        tn_release(f->t[i]);
    if (f->t && f->t != f->inline_t) tn__free_small(f->t);
    return r;
}
