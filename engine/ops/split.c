/* The split family: split, split_with_sizes, chunk and unbind; forward and
 * backward.
 *
 * Each returns views of its input made by ONE node with an output per piece
 * (PyTorch's SplitBackward0, SplitWithSizesBackward0, UnbindBackward0). The
 * pieces are multi-output views (TN_VIEW_MULTI): writing one in place while
 * autograd records is PyTorch's error, as is using one after its base was
 * written. Backward concatenates (stacks, for unbind) the pieces' gradients;
 * the engine gives zeros for the pieces that got none. Node layout: input
 * {a}; no saved tensors; parameters: split_params.
 *
 * Ownership: the pieces are written to the caller's array; each is a new
 * reference (owned by the innermost open scope when there is one). On
 * failure nothing is written but NULLs. */
#include "ops_internal.h"

typedef struct split_params {
    int64_t dim; /* wrapped */
} split_params;
TN_NODE_PARAMS(split_params, split_p)

static tn_status split_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    gi[0] = tn_cat(n->n_out, go, (int)split_p(n)->dim);
    return gi[0] ? TN_OK : tn_last_status();
}
static tn_status unbind_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    gi[0] = tn_stack(n->n_out, go, (int)split_p(n)->dim);
    return gi[0] ? TN_OK : tn_last_status();
}

static const tn_fn_info split_fn = {"SplitBackward0", split_bw};
static const tn_fn_info split_sizes_fn = {"SplitWithSizesBackward0", split_bw};
static const tn_fn_info unbind_fn = {"UnbindBackward0", unbind_bw};

/* Piece k of a along d: sizes[k] elements from start (unbind: the element at
 * start, d removed). */
static tn_tensor *piece(const tn_tensor *a, int d, int64_t start, int64_t size, bool drop) {
    int nd = a->ndim;
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    memcpy(sh, a->shape, sizeof sh);
    memcpy(st, a->stride, sizeof st);
    sh[d] = size;
    if (drop) {
        memmove(sh + d, sh + d + 1, (size_t)(nd - d - 1) * sizeof *sh);
        memmove(st + d, st + d + 1, (size_t)(nd - d - 1) * sizeof *st);
        nd--;
    }
    /* wraps only when the piece is empty */
    int64_t off = tn__wrap_add(a->offset, tn__wrap_mul(start, a->stride[d]));
    tn_tensor *v = tn__alias(a, nd, sh, st, off);
    if (v && !tn__is_inference(a)) tn__view_link(v, a, true); /* else a plain inference tensor */
    return v;
}

static void release_all(int n, tn_tensor **out) {
    for (int k = 0; k < n; k++) {
        tn_release(out[k]);
        out[k] = NULL;
    }
}

/* The n pieces of a along d with the given sizes (drop: unbind's), recorded
 * by one node of fn; registered in the caller's scope. */
static tn_status make_pieces(const tn_tensor *a, int d, int n, const int64_t *sizes, bool drop,
                             const tn_fn_info *fn, tn_tensor **out) {
    for (int k = 0; k < n; k++)
        out[k] = NULL;
    int64_t start = 0;
    for (int k = 0; k < n; k++) {
        if (!(out[k] = piece(a, d, start, drop ? 1 : sizes[k], drop))) {
            release_all(k, out);
            return tn_last_status();
        }
        start += drop ? 1 : sizes[k];
    }
    if (n > 0 && tn__needs_grad(1, (const tn_tensor *[]){a})) {
        tn_node *node = tn__node_new(fn, 1, (const tn_tensor *[]){a}, 0, n);
        tn_status st = node ? TN_OK : tn_last_status();
        if (node) split_p(node)->dim = d;
        for (int k = 0; k < n && st == TN_OK; k++)
            st = tn__node_set_output(node, out[k], k);
        tn__node_release(node);
        if (st < 0) {
            release_all(n, out);
            return st;
        }
    }
    for (int k = 0; k < n; k++) {
        if ((out[k] = tn__ret(out[k]))) continue;
        tn_status st = tn_last_status(); /* the scope could not take it */
        for (int j = k + 1; j < n; j++) /* those before belong to the scope now */
            tn_release(out[j]);
        for (int j = 0; j < n; j++)
            out[j] = NULL;
        return st;
    }
    return TN_OK;
}

/* The caller's out[0..cap) set to NULL before anything is checked, so that
 * every failure, the argument checks' included, leaves NULLs there. */
static void clear_out(tn_tensor **out, int cap) {
    for (int k = 0; out && k < cap; k++)
        out[k] = NULL;
}

/* Checks the capacity of the caller's array for n pieces; out NULL asks for
 * the count only. Returns 1 when the pieces are to be made. */
static int fits(const char *fn, int n, tn_tensor **out, int cap, int *n_out) {
    if (n_out) *n_out = n;
    if (!out) return 0;
    if (n > cap) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "%s: %d pieces do not fit in the output array of capacity %d", fn, n, cap);
        return -1;
    }
    return 1;
}

/* a's dim wrapped, a at least 1-dim (PyTorch's "<op> expects at least a
 * 1-dimensional tensor"); -1 on error. */
static int split_dim(const tn_tensor *a, int dim, const char *op) {
    if (a->ndim == 0) {
        tn__error(TN_ERR_SHAPE, "%s expects at least a 1-dimensional tensor", op);
        return -1;
    }
    return tn__wrap_dim(dim, a->ndim);
}

/* Pieces of split_size along d (the last may be smaller; one empty piece for
 * an empty dim). */
static tn_status split_impl(const char *fn, const tn_tensor *a, int64_t split_size, int d,
                            tn_tensor **out, int cap, int *n_out) {
    int64_t len = a->shape[d];
    if (split_size < 0)
        return tn__error(TN_ERR_SHAPE,
                         "split expects split_size be non-negative, but got split_size=%lld",
                         (long long)split_size);
    if (split_size == 0 && len != 0)
        return tn__error(TN_ERR_SHAPE,
                         "split_size can only be 0 if dimension size is 0, but got dimension "
                         "size of %lld",
                         (long long)len);
    /* ceil(len / split_size) without forming len + split_size, which overflows for a huge size */
    int64_t n = split_size && len ? 1 + (len - 1) / split_size : 1;
    if (n > INT32_MAX)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: %lld pieces are more than an int counts",
                         fn, (long long)n);
    int go = fits(fn, (int)n, out, cap, n_out);
    if (go <= 0) return go < 0 ? tn_last_status() : TN_OK;
    int64_t *sizes = tn__calloc((size_t)n, sizeof *sizes);
    if (!sizes) return tn_last_status();
    for (int64_t k = 0; k < n; k++)
        sizes[k] = k < n - 1 ? split_size : len - split_size * (n - 1);
    tn_status st = make_pieces(a, d, (int)n, sizes, false, &split_fn, out);
    tn__mfree(sizes);
    return st;
}

tn_status tn_split(const tn_tensor *a, int64_t split_size, int dim, tn_tensor **out, int cap,
                   int *n_out) {
    if (n_out) *n_out = 0;
    clear_out(out, cap);
    TN_CHECK_NULL_ARG_ST(a, "self");
    int d = split_dim(a, dim, "split");
    if (d < 0) return tn_last_status();
    return split_impl("tn_split", a, split_size, d, out, cap, n_out);
}

tn_status tn_split_with_sizes(const tn_tensor *a, int n, const int64_t *sizes, int dim,
                              tn_tensor **out) {
    TN_CHECK_NULL_ARG_ST(a, "self");
    if (n > 0) {
        TN_CHECK_NULL_PTR_ST(sizes, "split_sizes");
        TN_CHECK_NULL_PTR_ST(out, "out");
    }
    if (n < 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_split_with_sizes: n is negative (%d)", n);
    clear_out(out, n);
    int d = split_dim(a, dim, "split_with_sizes");
    if (d < 0) return tn_last_status();
    char buf[256];
    int64_t total = 0;
    bool negative = false;
    for (int k = 0; k < n; k++) {
        negative |= sizes[k] < 0;
        if (!negative && __builtin_add_overflow(total, sizes[k], &total)) total = -1;
    }
    if (negative || total != a->shape[d]) {
        tn__format_shape(buf, sizeof buf, n, sizes);
        if (negative)
            return tn__error(TN_ERR_SHAPE,
                             "split_with_sizes expects split_sizes have only non-negative "
                             "entries, but got split_sizes=%s",
                             buf);
        return tn__error(TN_ERR_SHAPE,
                         "split_with_sizes expects split_sizes to sum exactly to %lld (input "
                         "tensor's size at dimension %d), but got split_sizes=%s",
                         (long long)a->shape[d], d, buf);
    }
    return make_pieces(a, d, n, sizes, false, &split_sizes_fn, out);
}

tn_status tn_chunk(const tn_tensor *a, int chunks, int dim, tn_tensor **out, int *n_out) {
    if (n_out) *n_out = 0;
    clear_out(out, chunks);
    TN_CHECK_NULL_ARG_ST(a, "self");
    int d = split_dim(a, dim, "chunk");
    if (d < 0) return tn_last_status();
    if (chunks <= 0)
        return tn__error(TN_ERR_SHAPE, "chunk expects `chunks` to be greater than 0, got: %d",
                         chunks);
    int64_t len = a->shape[d], size = (len + chunks - 1) / chunks;
    if (size == 0 && len == 0) { /* chunks empty pieces, as PyTorch's */
        if (n_out) *n_out = chunks;
        if (!out) return TN_OK;
        int64_t *sizes = tn__calloc((size_t)chunks, sizeof *sizes);
        if (!sizes) return tn_last_status();
        tn_status st = make_pieces(a, d, chunks, sizes, false, &split_sizes_fn, out);
        tn__mfree(sizes);
        return st;
    }
    return split_impl("tn_chunk", a, size, d, out, chunks, n_out);
}

tn_status tn_unbind(const tn_tensor *a, int dim, tn_tensor **out, int cap, int *n_out) {
    if (n_out) *n_out = 0;
    clear_out(out, cap);
    TN_CHECK_NULL_ARG_ST(a, "self");
    if (a->ndim == 0)
        return tn__error(TN_ERR_INDEX, "Dimension specified as %d but tensor has no dimensions",
                         dim);
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0) return tn_last_status();
    if (a->shape[d] > INT32_MAX)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_unbind: %lld pieces are more than an int "
                         "counts", (long long)a->shape[d]);
    int n = (int)a->shape[d];
    int go = fits("tn_unbind", n, out, cap, n_out);
    if (go <= 0) return go < 0 ? tn_last_status() : TN_OK;
    return make_pieces(a, d, n, NULL, true, &unbind_fn, out);
}
