/* fuzz/op_index.c — the indexing ops (embedding, index_select, gather,
 * scatter_add) and the mask ops (where, masked_fill, masked_fill_, tril,
 * triu). Each reads a variant byte, its operands, then the destination.
 * Indices come from any slot: int64 tensors made by arange, tensor_from or
 * convert reach the kernels, the others the dtype errors. */
#include "program.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Elements of a's shape with dim `dim` (wrapped; any value when invalid:
 * the op refuses it first) resized to k. */
static uint64_t resized_numel(const tn_tensor *a, int dim, uint64_t k) {
    if (!a) return 0;
    int nd = tn_ndim(a);
    int d = dim < 0 ? dim + (nd ? nd : 1) : dim;
    uint64_t r = 1;
    for (int i = 0; i < nd; i++)
        r = tf_mul_sat(r, i == d ? k : (uint64_t)tn_shape(a)[i]);
    return r;
}

/* embedding(a, idx), index_select(a, dim, idx), gather(a, dim, idx),
 * scatter_add(a, dim, idx, src) */
void tf_op_index(tf_state *s) {
    uint8_t v = tf_byte(s) % 4;
    tn_tensor *a = tf_in(s), *idx = tf_in(s), *src = tf_in(s);
    int dim = tf_dim(s);
    uint8_t dst = tf_dst(s);
    uint64_t na = tf_numel(a), ni = tf_numel(idx), made;
    if (v == 0) /* (*idx.shape, a.shape[1]) */
        made = tf_mul_sat(ni, a && tn_ndim(a) == 2 ? (uint64_t)tn_shape(a)[1] : 1);
    else if (v == 1)
        made = resized_numel(a, dim, ni);
    else
        made = v == 2 ? ni : na;
    if (!tf_affordable(made, max_u64(max_u64(na, ni), tf_numel(src)))) return;
    tn_tensor *r = v == 0   ? tn_embedding(a, idx)
                   : v == 1 ? tn_index_select(a, dim, idx)
                   : v == 2 ? tn_gather(a, dim, idx)
                            : tn_scatter_add(a, dim, idx, src);
    tf_put(s, dst, r);
}

/* Elements of the broadcast of three shapes (an upper bound when they do not
 * broadcast: the library refuses those). */
static uint64_t broadcast3(const tn_tensor *const t[3]) {
    int n = 0;
    for (int k = 0; k < 3; k++)
        if (t[k] && tn_ndim(t[k]) > n) n = tn_ndim(t[k]);
    uint64_t r = 1;
    for (int i = 0; i < n; i++) {
        int64_t m = 1;
        for (int k = 0; k < 3; k++) {
            int j = t[k] ? tn_ndim(t[k]) - n + i : -1;
            if (j >= 0 && tn_shape(t[k])[j] > m) m = tn_shape(t[k])[j];
        }
        r = tf_mul_sat(r, (uint64_t)m);
    }
    return r;
}

/* where(c, a, b), masked_fill(a, c, x), masked_fill_(a, c, x), tril(a, k),
 * triu(a, k) */
void tf_op_mask(tf_state *s) {
    uint8_t v = tf_byte(s) % 5;
    tn_tensor *c = tf_in(s), *a = tf_in(s), *b = tf_in(s);
    double x = tf_scalar(s);
    int64_t k = tf_index(s);
    uint8_t dst = tf_dst(s);
    if (v == 2) { /* in place: always runs (a written broadcast must be refused) */
        tf_snap sn;
        tf_snap_take(&sn, a);
        tf_snap_check(&sn, tn_masked_fill_(a, c, x), "tn_masked_fill_");
        return;
    }
    const tn_tensor *ops[3] = {c, a, v == 0 ? b : NULL};
    uint64_t made = v < 2 ? broadcast3(ops) : tf_numel(a);
    uint64_t read = max_u64(max_u64(tf_numel(a), tf_numel(b)), tf_numel(c));
    if (!tf_affordable(made, read)) return;
    tn_tensor *r = v == 0   ? tn_where(c, a, b)
                   : v == 1 ? tn_masked_fill(a, c, x)
                   : v == 3 ? tn_tril(a, k)
                            : tn_triu(a, k);
    tf_put(s, dst, r);
}
