/* fuzz/op_view.c — views with hostile arguments, contiguous, cat and stack.
 * Views cost nothing whatever their sizes, so they always run; the ops
 * that may copy are held to the budget. */
#include <limits.h>

#include "program.h"

/* tn_view / tn_reshape: variant, src, ndim, shape..., dst */
void tf_op_view(tf_state *s) {
    bool reshape = tf_bool(s);
    tn_tensor *a = tf_in(s);
    int ndim = tf_ndim(s);
    int64_t shape[TF_LIST];
    tf_shape(s, ndim, shape);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    if ((reshape && !tf_affordable(n, n))) return;
    tf_put(s, dst, reshape ? tn_reshape(a, ndim, shape) : tn_view(a, ndim, shape));
}

/* A view taking two dims: src, dim, dim, dst */
static void two_dims(tf_state *s, tn_tensor *(*view)(const tn_tensor *, int, int)) {
    tn_tensor *a = tf_in(s);
    int d0 = tf_dim(s), d1 = tf_dim(s);
    tf_put(s, tf_dst(s), view(a, d0, d1));
}

void tf_op_transpose(tf_state *s) { two_dims(s, tn_transpose); }

void tf_op_permute(tf_state *s) {
    tn_tensor *a = tf_in(s);
    int ndim = tf_ndim(s), dims[TF_LIST];
    for (int i = 0; i < TF_LIST; i++)
        dims[i] = i < ndim ? tf_dim(s) : 0;
    tf_put(s, tf_dst(s), tn_permute(a, ndim, dims));
}

void tf_op_narrow(tf_state *s) {
    tn_tensor *a = tf_in(s);
    int dim = tf_dim(s);
    int64_t start = tf_index(s), length = tf_index(s);
    tf_put(s, tf_dst(s), tn_narrow(a, dim, start, length));
}

void tf_op_select(tf_state *s) {
    tn_tensor *a = tf_in(s);
    int dim = tf_dim(s);
    int64_t index = tf_index(s);
    tf_put(s, tf_dst(s), tn_select(a, dim, index));
}

void tf_op_expand(tf_state *s) {
    tn_tensor *a = tf_in(s);
    int ndim = tf_ndim(s);
    int64_t shape[TF_LIST];
    tf_shape(s, ndim, shape);
    uint8_t dst = tf_dst(s);
    tf_put(s, dst, tn_expand(a, ndim, shape));
}

/* squeeze (all), squeeze_dim, unsqueeze: variant, src, dim, dst */
void tf_op_squeeze(tf_state *s) {
    uint8_t v = tf_byte(s) % 3;
    tn_tensor *a = tf_in(s);
    int dim = tf_dim(s);
    tf_put(s, tf_dst(s),
           v == 0   ? tn_squeeze(a)
           : v == 1 ? tn_squeeze_dim(a, dim)
                    : tn_unsqueeze(a, dim));
}

void tf_op_flatten(tf_state *s) { two_dims(s, tn_flatten); }

void tf_op_contiguous(tf_state *s) {
    tn_tensor *a = tf_in(s);
    uint8_t dst = tf_dst(s);
    uint64_t n = tf_numel(a);
    if (!tf_affordable(n, n)) return;
    tf_put(s, dst, tn_contiguous(a));
}

/* tn_cat / tn_stack: variant, count, slots..., dim, dst */
void tf_op_join(tf_state *s) {
    static const int hostile[4] = {-1, -2, INT_MIN, TF_LIST};
    bool stack = tf_bool(s);
    uint8_t b = tf_byte(s);
    int n = b < 0xF0 ? b % 6 : hostile[b % 4];
    tn_tensor *ts[TF_LIST] = {0};
    uint64_t total = 0;
    for (int i = 0; i < n && i < TF_LIST; i++) {
        ts[i] = tf_in(s);
        uint64_t k = tf_numel(ts[i]);
        total = total + k < total ? UINT64_MAX : total + k;
    }
    int dim = tf_dim(s);
    uint8_t dst = tf_dst(s);
    if (!tf_affordable(total, total)) return;
    tf_put(s, dst, stack ? tn_stack(n, ts, dim) : tn_cat(n, ts, dim));
}
