/* Shapes: validation (overflow), broadcasting, dims, formatting. */
#include <stdio.h>

#include "internal.h"

tn_status tn__check_shape(int ndim, const int64_t *shape, tn_dtype dt, int64_t *numel_out) {
    if (ndim < 0 || ndim > TN_MAX_DIMS)
        return tn__error(TN_ERR_SHAPE, "number of dimensions %d is out of range [0, %d]", ndim,
                         TN_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "shape is NULL for a %d-dim tensor", ndim);
    if (!tn__valid_dtype(dt)) return tn__error(TN_ERR_DTYPE, "invalid dtype %d", (int)dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char buf[256];
            tn__format_shape(buf, sizeof buf, ndim, shape);
            return tn__error(TN_ERR_SHAPE, "Trying to create tensor with negative dimension %lld: %s",
                             (long long)shape[i], buf);
        }
    }
    int64_t n;
    if (!tn__numel_checked(ndim, shape, &n)) {
        char buf[256];
        tn__format_shape(buf, sizeof buf, ndim, shape);
        return tn__error(TN_ERR_SHAPE, "the number of elements of shape %s overflows int64", buf);
    }
    if ((uint64_t)n > SIZE_MAX / 2 / tn__dtype_sizes[dt])
        return tn__error(TN_ERR_SHAPE, "tensor of %lld elements is too large to allocate",
                         (long long)n);
    if (numel_out) *numel_out = n;
    return TN_OK;
}

tn_status tn__check_out_shape(const tn_tensor *out, int nd, const int64_t *shape) {
    if (nd == out->ndim && memcmp(shape, out->shape, (size_t)nd * sizeof *shape) == 0)
        return TN_OK;
    char a[160], b[160];
    tn__format_shape(a, sizeof a, out->ndim, out->shape);
    tn__format_shape(b, sizeof b, nd, shape);
    return tn__error(TN_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s", a,
                     b);
}

tn_status tn__check_broadcast_into(const tn_tensor *out, int nd, const int64_t *shape) {
    int nb;
    int64_t b[TN_MAX_DIMS];
    tn_status st = tn__broadcast_shape(out->ndim, out->shape, nd, shape, &nb, b);
    return st < 0 ? st : tn__check_out_shape(out, nb, b);
}

bool tn__numel_checked(int ndim, const int64_t *shape, int64_t *out) {
    *out = 0;
    for (int i = 0; i < ndim; i++) /* one rule for empty shapes: any zero dim */
        if (shape[i] == 0) return true;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(n, shape[i], &n)) return false;
    *out = n;
    return true;
}

int64_t tn__numel(int ndim, const int64_t *shape) {
    int64_t n;
    return tn__numel_checked(ndim, shape, &n) ? n : INT64_MAX;
}

/* PyTorch's rule, products of max(size, 1); they wrap (two's complement)
 * only for empty tensors, whose strides address nothing. */
void tn__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    uint64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = (int64_t)s;
        s *= shape[i] > 1 ? (uint64_t)shape[i] : 1;
    }
}

bool tn__same_shape(const tn_tensor *a, const tn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

bool tn__is_contiguous(const tn_tensor *t) {
    if (tn__numel(t->ndim, t->shape) == 0) return true; /* as PyTorch: nothing to address */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

bool tn__dense_block(const tn_tensor *t, bool skip_broadcast, int64_t *n) {
    int64_t st[TN_MAX_DIMS], sz[TN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) return false;
        if (t->shape[i] == 1 || (skip_broadcast && t->stride[i] == 0)) continue;
        /* insertion by stride: the fastest dim first */
        int j = k++;
        for (; j > 0 && st[j - 1] > t->stride[i]; j--)
            st[j] = st[j - 1], sz[j] = sz[j - 1];
        st[j] = t->stride[i], sz[j] = t->shape[i];
    }
    int64_t expect = 1;
    for (int j = 0; j < k; j++) {
        if (st[j] != expect) return false;
        expect *= sz[j];
    }
    *n = expect;
    return true;
}

tn_status tn__broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout,
                              int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
        if (x != y && x != 1 && y != 1)
            return tn__error(TN_ERR_SHAPE,
                             "The size of tensor a (%lld) must match the size of tensor b (%lld) "
                             "at non-singleton dimension %d",
                             (long long)x, (long long)y, i);
        out[i] = x == 1 ? y : x;
    }
    *nout = n;
    return TN_OK;
}

int tn__wrap_dim(int dim, int ndim) {
    int n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n) {
        tn__error(TN_ERR_INDEX,
                  "Dimension out of range (expected to be in range of [%d, %d], but got %d)", -n,
                  n - 1, dim);
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

void tn__format_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
}
