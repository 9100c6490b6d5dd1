/* engine/cuda/optim.cu — the fused optimiser steps (TN_PW_SGD, TN_PW_ADAM)
 * on the pointwise engine, for every float dtype.
 *
 * Each is the CPU loop of engine/cpu/optim_impl.h line for line: the same
 * scalars converted from double to the compute type C on the host (float
 * for the halves), the same operation order, the same rounding points (R:
 * a half parameter's value rounded where torch's update ends one tensor op;
 * K: a scalar rounded to the dtype where PyTorch converts it; both the
 * identity for float32 and float64) and (built with --fmad=false) no fused
 * multiply-add, so a step gives the CPU's bits.
 */
#include "pointwise.cuh"

namespace tnc {

namespace {

/* v rounded to T and back: optim_impl.h's R(x) */
template <typename T> __host__ __device__ __forceinline__ compute_t<T> R(compute_t<T> v) {
    if constexpr (is_half_v<T>)
        return ld(st<T>(v));
    else
        return v;
}

/* optim_impl.h's K(x): a scalar of an op as the op sees it. PyTorch converts
 * the scalar of mul_, div and add_'s alpha to the tensor's dtype first;
 * addcmul_ and addcdiv_ take theirs in float32 (plain static_cast). */
template <typename T> compute_t<T> K(double v) { return R<T>(static_cast<compute_t<T>>(v)); }

/* operands p, g (momentum == 0):  d = g + wd p;  p += -lr d */
template <typename T> struct sgd_plain_f {
    using T0 = T;
    using T1 = T;
    using T2 = uint8_t;
    using T3 = uint8_t;
    using C = compute_t<T>;
    static constexpr int NOPS = 2;
    static constexpr unsigned LOADS = 3u, STORES = 1u;
    C neg_lr, wd;
    bool use_wd;
    __device__ __forceinline__ void operator()(T &p, T &g, uint8_t &, uint8_t &) const {
        const C pv = ld(p), gv = ld(g);
        const C d = use_wd ? R<T>(gv + wd * pv) : gv;
        p = st<T>(pv + neg_lr * d);
    }
};

/* operands p, g, buf:  d = g + wd p;  buf = first ? d : momentum buf + d;  p += -lr buf */
template <typename T> struct sgd_momentum_f {
    using T0 = T;
    using T1 = T;
    using T2 = T;
    using T3 = uint8_t;
    using C = compute_t<T>;
    static constexpr int NOPS = 3;
    static constexpr unsigned LOADS = 7u, STORES = 5u;
    C neg_lr, mom, wd;
    bool use_wd, first;
    __device__ __forceinline__ void operator()(T &p, T &g, T &b, uint8_t &) const {
        const C pv = ld(p), gv = ld(g);
        C d = use_wd ? R<T>(gv + wd * pv) : gv;
        d = first ? d : R<T>(R<T>(ld(b) * mom) + d);
        b = st<T>(d);
        p = st<T>(pv + neg_lr * d);
    }
};

/* operands p, g, m, v (torch's mul_/add_, addcmul_, addcdiv_ order) */
template <typename T> struct adam_f {
    using T0 = T;
    using T1 = T;
    using T2 = T;
    using T3 = T;
    using C = compute_t<T>;
    static constexpr int NOPS = 4;
    static constexpr unsigned LOADS = 15u, STORES = 13u;
    C b1, b2, a1, a2, wd, eps, bc2s, neg_step, decay;
    bool use_wd, use_decay;
    __device__ __forceinline__ void operator()(T &p, T &g, T &m, T &v) const {
        C pv = ld(p);
        const C gv = ld(g);
        if (use_decay) pv = R<T>(pv * decay);
        const C d = use_wd ? R<T>(gv + wd * pv) : gv;
        const C mi = R<T>(R<T>(ld(m) * b1) + a1 * d);
        const C vi = R<T>(R<T>(ld(v) * b2) + a2 * d * d);
        m = st<T>(mi);
        v = st<T>(vi);
        const C denom = R<T>(R<T>(R<T>(sqrt_of(vi)) / bc2s) + eps);
        p = st<T>(pv + neg_step * mi / denom);
    }
    __device__ __forceinline__ static float sqrt_of(float x) { return ::sqrtf(x); }
    __device__ __forceinline__ static double sqrt_of(double x) { return ::sqrt(x); }
};

template <typename T> tn_status sgd_typed(int dev, const tn_iter *it, const tn_sgd_ctx *c) {
    const bool use_wd = c->wd != 0;
    if (c->momentum == 0) {
        sgd_plain_f<T> f;
        f.neg_lr = K<T>(-c->lr);
        f.wd = K<T>(c->wd);
        f.use_wd = use_wd;
        return pw_launch(dev, f, it, "SGD step");
    }
    sgd_momentum_f<T> f;
    f.neg_lr = K<T>(-c->lr);
    f.mom = K<T>(c->momentum);
    f.wd = K<T>(c->wd);
    f.use_wd = use_wd;
    f.first = c->first;
    return pw_launch(dev, f, it, "SGD step");
}

template <typename T> tn_status adam_typed(int dev, const tn_iter *it, const tn_adam_ctx *c) {
    using C = compute_t<T>;
    adam_f<T> f;
    f.b1 = K<T>(c->beta1);
    f.b2 = K<T>(c->beta2);
    f.a1 = K<T>(c->one_minus_beta1);
    f.a2 = static_cast<C>(c->one_minus_beta2); /* addcmul_'s value */
    f.wd = K<T>(c->wd);
    f.eps = K<T>(c->eps);
    f.bc2s = K<T>(c->bc2_sqrt);
    f.neg_step = static_cast<C>(c->neg_step_size); /* addcdiv_'s value */
    f.use_wd = c->wd != 0;
    f.decay = K<T>(c->decay);
    f.use_decay = c->decay != 1;
    return pw_launch(dev, f, it, "Adam step");
}

tn_status not_float(const char *what, tn_dtype dt) {
    return tn__error(TN_ERR_DTYPE, "CUDA %s: parameters must be a float dtype, got '%s'", what,
                     dtype_name(dt));
}

} // namespace

tn_status sgd_step(int dev, tn_dtype dt, const tn_iter *it, const tn_sgd_ctx *c) {
    return dispatch(dt, "SGD step", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_v<T>)
            return sgd_typed<T>(dev, it, c);
        else
            return not_float("SGD step", dt);
    });
}

tn_status adam_step(int dev, tn_dtype dt, const tn_iter *it, const tn_adam_ctx *c) {
    return dispatch(dt, "Adam step", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_v<T>)
            return adam_typed<T>(dev, it, c);
        else
            return not_float("Adam step", dt);
    });
}

} // namespace tnc
