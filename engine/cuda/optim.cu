/* engine/cuda/optim.cu — the fused optimiser steps (TN_PW_SGD, TN_PW_ADAM)
 * on the pointwise engine.
 *
 * Each is the CPU loop of engine/optim/sgd.c / adam.c line for line: the
 * same scalars converted from double to T on the host, the same operation
 * order, and (built with --fmad=false) no fused multiply-add, so a float
 * step gives the CPU's bits.
 */
#include "pointwise.cuh"

namespace tnc {

namespace {

/* operands p, g (momentum == 0):  d = g + wd p;  p += -lr d */
template <typename T> struct sgd_plain_f {
    using T0 = T;
    using T1 = T;
    using T2 = uint8_t;
    using T3 = uint8_t;
    static constexpr int NOPS = 2;
    static constexpr unsigned LOADS = 3u, STORES = 1u;
    T neg_lr, wd;
    bool use_wd;
    __device__ __forceinline__ void operator()(T &p, T &g, uint8_t &, uint8_t &) const {
        T d = use_wd ? g + wd * p : g;
        p = p + neg_lr * d;
    }
};

/* operands p, g, buf:  d = g + wd p;  buf = first ? d : momentum buf + d;  p += -lr buf */
template <typename T> struct sgd_momentum_f {
    using T0 = T;
    using T1 = T;
    using T2 = T;
    using T3 = uint8_t;
    static constexpr int NOPS = 3;
    static constexpr unsigned LOADS = 7u, STORES = 5u;
    T neg_lr, mom, wd;
    bool use_wd, first;
    __device__ __forceinline__ void operator()(T &p, T &g, T &b, uint8_t &) const {
        T d = use_wd ? g + wd * p : g;
        d = first ? d : b * mom + d;
        b = d;
        p = p + neg_lr * d;
    }
};

/* operands p, g, m, v (torch's mul_/add_, addcmul_, addcdiv_ order) */
template <typename T> struct adam_f {
    using T0 = T;
    using T1 = T;
    using T2 = T;
    using T3 = T;
    static constexpr int NOPS = 4;
    static constexpr unsigned LOADS = 15u, STORES = 13u;
    T b1, b2, a1, a2, wd, eps, bc2s, neg_step, decay;
    bool use_wd, use_decay;
    __device__ __forceinline__ void operator()(T &p, T &g, T &m, T &v) const {
        if (use_decay) p = p * decay;
        T d = use_wd ? g + wd * p : g;
        T mi = m * b1 + a1 * d;
        T vi = v * b2 + a2 * d * d;
        m = mi;
        v = vi;
        T denom = sqrt_of(vi) / bc2s + eps;
        p = p + neg_step * mi / denom;
    }
    __device__ __forceinline__ static float sqrt_of(float x) { return ::sqrtf(x); }
    __device__ __forceinline__ static double sqrt_of(double x) { return ::sqrt(x); }
};

template <typename T> tn_status sgd_typed(int dev, const tn_iter *it, const tn_sgd_ctx *c) {
    const bool use_wd = c->wd != 0;
    if (c->momentum == 0) {
        sgd_plain_f<T> f;
        f.neg_lr = static_cast<T>(-c->lr);
        f.wd = static_cast<T>(c->wd);
        f.use_wd = use_wd;
        return pw_launch(dev, f, it, "SGD step");
    }
    sgd_momentum_f<T> f;
    f.neg_lr = static_cast<T>(-c->lr);
    f.mom = static_cast<T>(c->momentum);
    f.wd = static_cast<T>(c->wd);
    f.use_wd = use_wd;
    f.first = c->first;
    return pw_launch(dev, f, it, "SGD step");
}

template <typename T> tn_status adam_typed(int dev, const tn_iter *it, const tn_adam_ctx *c) {
    adam_f<T> f;
    f.b1 = static_cast<T>(c->beta1);
    f.b2 = static_cast<T>(c->beta2);
    f.a1 = static_cast<T>(c->one_minus_beta1);
    f.a2 = static_cast<T>(c->one_minus_beta2);
    f.wd = static_cast<T>(c->wd);
    f.eps = static_cast<T>(c->eps);
    f.bc2s = static_cast<T>(c->bc2_sqrt);
    f.neg_step = static_cast<T>(c->neg_step_size);
    f.use_wd = c->wd != 0;
    f.decay = static_cast<T>(c->decay);
    f.use_decay = c->decay != 1;
    return pw_launch(dev, f, it, "Adam step");
}

tn_status not_float(const char *what, tn_dtype dt) {
    return tn__error(TN_ERR_DTYPE, "CUDA %s: parameters must be float32 or float64, got '%s'", what,
                     dtype_name(dt));
}

} // namespace

tn_status sgd_step(int dev, tn_dtype dt, const tn_iter *it, const tn_sgd_ctx *c) {
    if (dt == TN_F32) return sgd_typed<float>(dev, it, c);
    if (dt == TN_F64) return sgd_typed<double>(dev, it, c);
    return not_float("SGD step", dt);
}

tn_status adam_step(int dev, tn_dtype dt, const tn_iter *it, const tn_adam_ctx *c) {
    if (dt == TN_F32) return adam_typed<float>(dev, it, c);
    if (dt == TN_F64) return adam_typed<double>(dev, it, c);
    return not_float("Adam step", dt);
}

} // namespace tnc
