/* fuzz/op_norm.c — layer_norm, gelu, silu, dropout, logsumexp, var, std; batch_norm and
 * group_norm (their own opcode).
 * Operands: variant, a, b, c, dim, flag, scalar, dst. */
#include "program.h"

/* layer_norm(a, nn, shape, weight b, bias c, eps): the normalised shape is
 * a's trailing dims (variant 0) or b's shape (variant 7, mostly wrong); nn
 * is the dim operand, hostile values included. */
static tn_tensor *layer_norm(tn_tensor *a, tn_tensor *b, tn_tensor *c, int nn, bool from_b,
                             double eps) {
    int64_t ns[TN_MAX_DIMS] = {0};
    const tn_tensor *src = from_b ? b : a;
    int nd = src ? tn_ndim(src) : 0;
    for (int i = 0; i < nn && i < TN_MAX_DIMS; i++) { /* read only for 1 <= nn <= 8 */
        int k = from_b ? i : nd - nn + i;
        ns[i] = src && k >= 0 && k < nd ? tn_shape(src)[k] : 1;
    }
    return tn_layer_norm(a, nn, ns, from_b ? NULL : b, c, eps);
}

void tf_op_norm(tf_state *s) {
    uint8_t v = tf_byte(s) % 8;
    tn_tensor *a = tf_in(s), *b = tf_in(s), *c = tf_in(s);
    int dim = tf_dim(s);
    bool flag = tf_bool(s);
    double x = tf_scalar(s);
    uint8_t dst = tf_dst(s);
    /* the elementwise variants make numel(a) elements (a size refused before any
     * work); the reductions (logsumexp, var, std) may make few from many */
    uint64_t n = tf_numel(a), made = v >= 4 && v <= 6 ? tf_reduced_numel(a, dim) : n;
    if (!tf_affordable(made, n + tf_numel(b) + tf_numel(c))) return;
    tn_tensor *r = NULL;
    switch (v) {
    case 0:
    case 7:
        r = layer_norm(a, b, c, dim, v == 7, x);
        break;
    case 1:
        r = tn_gelu(a, flag);
        break;
    case 2:
        r = tn_silu(a);
        break;
    case 3:
        r = tn_dropout(a, x, flag);
        break;
    case 4:
        r = tn_logsumexp(a, dim, flag);
        break;
    case 5:
        r = tn_var_dim(a, dim, x, flag);
        break;
    default:
        r = tn_std_dim(a, dim, x, flag);
        break;
    }
    tf_put(s, dst, r);
}

/* batch_norm with b, c as the running statistics (updated in place when training) or as weight
 * and bias, momentum or eps the scalar; group_norm with the dim operand as num_groups (hostile
 * values included), b, c as weight and bias. */
void tf_op_channel_norm(tf_state *s) {
    uint8_t v = tf_byte(s) % 4;
    tn_tensor *a = tf_in(s), *b = tf_in(s), *c = tf_in(s);
    int dim = tf_dim(s);
    bool flag = tf_bool(s);
    double x = tf_scalar(s);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    if (!tf_affordable(n, n + tf_numel(b) + tf_numel(c))) return;
    tn_tensor *r = NULL;
    switch (v) {
    case 0:
        r = tn_batch_norm(a, b, c, NULL, NULL, flag, x, 1e-5);
        break;
    case 1:
        r = tn_batch_norm(a, NULL, NULL, b, c, flag, 0.1, x);
        break;
    case 2:
        r = tn_group_norm(a, dim, b, c, x);
        break;
    default:
        r = tn_group_norm(a, dim, NULL, NULL, 1e-5);
        break;
    }
    tf_put(s, dst, r);
}
