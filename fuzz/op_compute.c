/* fuzz/op_compute.c — pointwise ops, reductions, matmul and the nn ops.
 * Each reads a variant byte, its operands, then the destination. */
#include "program.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Element count of the broadcast of a and b's shapes (an upper bound when
 * they do not broadcast: the library refuses those). */
static uint64_t broadcast_numel(const tn_tensor *a, const tn_tensor *b) {
    if (!a || !b) return max_u64(tf_numel(a), tf_numel(b));
    int na = tn_ndim(a), nb = tn_ndim(b), n = na > nb ? na : nb;
    const int64_t *sa = tn_shape(a), *sb = tn_shape(b);
    uint64_t r = 1;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
        r = tf_mul_sat(r, (uint64_t)(x > y ? x : y));
    }
    return r;
}

/* Pointwise: the output (allocated before any element is read) has the
 * broadcast shape. */
static bool pair_affordable(const tn_tensor *a, const tn_tensor *b) {
    return tf_affordable(broadcast_numel(a, b), max_u64(tf_numel(a), tf_numel(b)));
}

void tf_op_binary(tf_state *s) {
    uint8_t v = tf_byte(s) % 8;
    tn_tensor *a = tf_in(s), *b = tf_in(s);
    double alpha = tf_scalar(s);
    uint8_t dst = tf_dst(s);
    if (!pair_affordable(a, b)) return;
    tn_tensor *(*const fns[7])(const tn_tensor *, const tn_tensor *) = {
        tn_add, tn_sub, tn_mul, tn_div, tn_pow, tn_maximum, tn_minimum};
    tf_put(s, dst, v < 7 ? fns[v](a, b) : tn_add_alpha(a, b, alpha));
}

void tf_op_compare(tf_state *s) {
    uint8_t v = tf_byte(s) % 6;
    tn_tensor *a = tf_in(s), *b = tf_in(s);
    uint8_t dst = tf_dst(s);
    if (!pair_affordable(a, b)) return;
    tn_tensor *(*const fns[6])(const tn_tensor *, const tn_tensor *) = {tn_eq, tn_ne, tn_lt,
                                                                        tn_le, tn_gt, tn_ge};
    tf_put(s, dst, fns[v](a, b));
}

void tf_op_scalar(tf_state *s) {
    uint8_t v = tf_byte(s) % 6;
    tn_tensor *a = tf_in(s);
    double x = tf_scalar(s);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    if (!tf_affordable(n, n)) return;
    tn_tensor *(*const fns[6])(const tn_tensor *, double) = {
        tn_add_scalar, tn_sub_scalar, tn_mul_scalar, tn_div_scalar, tn_pow_scalar, tn_rsub_scalar};
    tf_put(s, dst, fns[v](a, x));
}

void tf_op_unary(tf_state *s) {
    uint8_t v = tf_byte(s) % 11;
    tn_tensor *a = tf_in(s);
    double lo = tf_scalar(s), hi = tf_scalar(s);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    if (!tf_affordable(n, n)) return;
    tn_tensor *(*const fns[10])(const tn_tensor *) = {
        tn_neg, tn_exp, tn_log, tn_sqrt, tn_abs, tn_sigmoid, tn_tanh, tn_relu, tn_sin, tn_cos};
    tf_put(s, dst, v < 10 ? fns[v](a) : tn_clamp(a, lo, hi));
}

/* out= forms: variant, out, a, b (no destination: out is written) */
void tf_op_out(tf_state *s) {
    uint8_t v = tf_byte(s) % 2;
    tn_tensor *out = tf_in(s), *a = tf_in(s), *b = tf_in(s);
    if (!pair_affordable(a, b)) return;
    tf_snap sn;
    tf_snap_take(&sn, out);
    tn_status st = v ? tn_mul_out(out, a, b) : tn_add_out(out, a, b);
    tf_snap_check(&sn, st, v ? "tn_mul_out" : "tn_add_out");
}

void tf_op_reduce(tf_state *s) {
    uint8_t v = tf_byte(s) % 5;
    tn_tensor *a = tf_in(s);
    uint8_t dst = tf_dst(s);
    if (!tf_affordable(1, tf_numel(a))) return;
    tn_tensor *(*const fns[5])(const tn_tensor *) = {tn_sum, tn_mean, tn_max, tn_min, tn_argmax};
    tf_put(s, dst, fns[v](a));
}

void tf_op_reduce_dim(tf_state *s) {
    uint8_t v = tf_byte(s) % 4;
    tn_tensor *a = tf_in(s);
    int dim = tf_dim(s);
    bool keepdim = tf_bool(s);
    uint8_t dst = tf_dst(s);
    /* the output may be small (a size-1 dim left): no cheap refusal to count on */
    if (!tf_affordable(tf_reduced_numel(a, dim), tf_numel(a))) return;
    tn_tensor *(*const fns[4])(const tn_tensor *, int, bool) = {tn_sum_dim, tn_mean_dim, tn_max_dim,
                                                                tn_argmax_dim};
    tf_put(s, dst, fns[v](a, dim, keepdim));
}

static uint64_t size_from_end(const tn_tensor *t, int k) {
    int nd = t ? tn_ndim(t) : 0;
    return nd >= k ? (uint64_t)tn_shape(t)[nd - k] : 1;
}

/* Elements of the product's output (a lower bound: the larger batch) and
 * its multiply-adds. a (.., M, K) @ b (.., K, N); linear: b is w (N, K). */
static void product_cost(const tn_tensor *a, const tn_tensor *b, bool linear, uint64_t *made,
                         uint64_t *flops) {
    int nb = b ? tn_ndim(b) : 0;
    uint64_t k = size_from_end(a, 1), m = tn_ndim(a) >= 2 ? size_from_end(a, 2) : 1;
    uint64_t n = linear ? size_from_end(b, 2) : nb >= 2 ? size_from_end(b, 1) : 1;
    uint64_t batch_a = tf_numel(a) / (k ? k : 1) / (m ? m : 1);
    uint64_t batch_b = linear ? 1 : tf_numel(b) / (k ? k : 1) / (n ? n : 1);
    uint64_t batch = batch_a > batch_b ? batch_a : batch_b;
    *made = tf_mul_sat(tf_mul_sat(batch, m), n);
    *flops = tf_mul_sat(*made, k);
}

/* tn_matmul(a, b) or tn_linear(a, b, bias): variant, a, b, bias, dst */
void tf_op_matmul(tf_state *s) {
    uint8_t v = tf_byte(s) % 3;
    tn_tensor *a = tf_in(s), *b = tf_in(s), *bias = tf_in(s);
    uint8_t dst = tf_dst(s);
    uint64_t made, flops;
    product_cost(a, b, v > 0, &made, &flops);
    uint64_t read = max_u64(max_u64(tf_numel(a), tf_numel(b)), flops / 64);
    if (!tf_affordable(made, read)) return;
    tf_put(s, dst, v == 0 ? tn_matmul(a, b) : tn_linear(a, b, v == 1 ? bias : NULL));
}

/* softmax, log_softmax (a, dim), cross_entropy(a, b), mse_loss(a, b) */
void tf_op_nn(tf_state *s) {
    uint8_t v = tf_byte(s) % 4;
    tn_tensor *a = tf_in(s), *b = tf_in(s);
    int dim = tf_dim(s);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    /* the losses make one element: only their inputs count */
    uint64_t read = n > tf_numel(b) ? n : tf_numel(b);
    if (v < 2 ? !tf_affordable(n, n) : !tf_affordable(1, read)) return;
    tn_tensor *r = v == 0   ? tn_softmax(a, dim)
                   : v == 1 ? tn_log_softmax(a, dim)
                   : v == 2 ? tn_cross_entropy(a, b)
                            : tn_mse_loss(a, b);
    tf_put(s, dst, r);
}

/* Size of dim d counted from the end of t (1 when t has fewer dims). */
static int64_t dim_from_end(const tn_tensor *t, int d) {
    return t && tn_ndim(t) >= d ? tn_shape(t)[tn_ndim(t) - d] : 1;
}

/* scaled_dot_product_attention(q, k, v, mask or NULL, dropout_p, is_causal):
 * variant bits 0 causal, 1 mask, 2 dropout (p from bits 3..6), 7 a p out
 * of range. Cost: the broadcast batch times L x S x (E + Ev). */
void tf_op_attention(tf_state *s) {
    uint8_t v = tf_byte(s);
    tn_tensor *q = tf_in(s), *k = tf_in(s), *val = tf_in(s), *m = tf_in(s);
    uint8_t dst = tf_dst(s);
    double p = v & 0x80 ? 1.5 : v & 4 ? (double)((v >> 3) & 15) / 16 : 0;
    uint64_t nb = 1;
    for (int d = 3; d <= TN_MAX_DIMS; d++) {
        int64_t a = dim_from_end(q, d), b = dim_from_end(k, d), c = dim_from_end(val, d);
        int64_t x = a > b ? a : b;
        nb = tf_mul_sat(nb, (uint64_t)(x > c ? x : c));
    }
    uint64_t L = (uint64_t)dim_from_end(q, 2), S = (uint64_t)dim_from_end(k, 2);
    uint64_t E = (uint64_t)dim_from_end(q, 1), Ev = (uint64_t)dim_from_end(val, 1);
    uint64_t made = tf_mul_sat(tf_mul_sat(nb, L), Ev);
    uint64_t work = tf_mul_sat(tf_mul_sat(tf_mul_sat(nb, L), S), E + Ev + 1);
    if (!tf_affordable(made, max_u64(work / 16, tf_numel(m)))) return;
    tf_put(s, dst, tn_scaled_dot_product_attention(q, k, val, v & 2 ? m : NULL, p, v & 1));
}
