/* View ops: view, reshape, transpose, permute, narrow, select, expand,
 * squeeze, unsqueeze, flatten, contiguous; forward and backward.
 *
 * Every view goes through tn__make_view (shares storage and version counter,
 * remembers its root base for CopySlices). Backward formulas use public ops
 * so that create_graph records them.
 * Node layout: input {a}; no saved tensors; the input's shape is in_meta[0];
 * parameters: transpose_params, permute_params, unsqueeze_params,
 * slice_spec (narrow, select and their backward's backward). */
#include <stdio.h>

#include "pointwise_driver.h"

typedef struct transpose_params {
    int64_t dim0, dim1; /* the swapped dims, wrapped */
} transpose_params;
TN_NODE_PARAMS(transpose_params, transpose_p)

typedef struct permute_params {
    int64_t order[TN_MAX_DIMS]; /* in_meta[0].ndim entries */
} permute_params;
TN_NODE_PARAMS(permute_params, permute_p)

typedef struct unsqueeze_params {
    int64_t dim; /* the inserted dim, wrapped */
} unsqueeze_params;
TN_NODE_PARAMS(unsqueeze_params, unsqueeze_p)

/* A narrow (length elements from start along dim) or a select (the element
 * at start; dim removed), validated. */
typedef struct slice_spec {
    int64_t dim, start, length;
    bool is_select;
} slice_spec;
TN_NODE_PARAMS(slice_spec, slice_p)

/* ---- shape inference and view strides ----------------------------------------- */

/* Copies shape into out, inferring one -1 from numel (PyTorch's infer_size). */
static tn_status infer_size(int ndim, const int64_t *shape, int64_t numel, int64_t *out) {
    if (ndim < 0 || ndim > TN_MAX_DIMS)
        return tn__error(TN_ERR_SHAPE, "number of dimensions %d is out of range [0, %d]", ndim,
                         TN_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "shape is NULL for a %d-dim view", ndim);
    int infer = -1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) return tn__error(TN_ERR_SHAPE, "only one dimension can be inferred");
            infer = i;
        } else if (shape[i] < 0) {
            return tn__error(TN_ERR_SHAPE, "invalid shape dimension %lld", (long long)shape[i]);
        }
    }
    int64_t newsize; /* of the given dims: 0 when one is 0, whatever the others */
    if (infer >= 0) out[infer] = 1;
    overflow = !tn__numel_checked(ndim, out, &newsize);
    char buf[192];
    if (!overflow && infer >= 0 && newsize == 0) {
        tn__format_shape(buf, sizeof buf, ndim, shape);
        return tn__error(TN_ERR_SHAPE,
                         "cannot reshape tensor of 0 elements into shape %s because the "
                         "unspecified dimension size -1 can be any value and is ambiguous",
                         buf);
    }
    if (!overflow && (numel == newsize || (infer >= 0 && numel % newsize == 0))) {
        if (infer >= 0) out[infer] = numel / newsize;
        return TN_OK;
    }
    tn__format_shape(buf, sizeof buf, ndim, shape);
    return tn__error(TN_ERR_SHAPE, "shape '%s' is invalid for input of size %lld", buf,
                     (long long)numel);
}

/* Strides that let a (shape/stride) be viewed as nshape, or false (PyTorch's
 * computeStride): dims of a may only be merged or split inside runs that are
 * contiguous with each other ("chunks"). */
static bool view_strides(const tn_tensor *a, int nd, const int64_t *nshape, int64_t *nstride) {
    if (a->ndim == 0) {
        for (int i = 0; i < nd; i++)
            nstride[i] = 1;
        return true;
    }
    int64_t numel = tn__numel(a->ndim, a->shape);
    if (numel == 0) {
        if (nd == a->ndim && memcmp(nshape, a->shape, (size_t)nd * sizeof *nshape) == 0) {
            memcpy(nstride, a->stride, (size_t)nd * sizeof *nstride);
        } else {
            tn__contiguous_strides(nd, nshape, nstride);
        }
        return true;
    }
    int vd = nd - 1;
    int64_t chunk_stride = a->stride[a->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int td = a->ndim - 1; td >= 0; td--) {
        tensor_numel *= a->shape[td];
        bool chunk_end =
            td == 0 || (a->shape[td - 1] != 1 && a->stride[td - 1] != tensor_numel * chunk_stride);
        if (!chunk_end) continue;
        while (vd >= 0 && (view_numel < tensor_numel || nshape[vd] == 1)) {
            nstride[vd] = view_numel * chunk_stride;
            view_numel *= nshape[vd];
            vd--;
        }
        if (view_numel != tensor_numel) return false;
        if (td > 0) {
            chunk_stride = a->stride[td - 1];
            tensor_numel = view_numel = 1;
        }
    }
    return vd == -1;
}

/* ---- backward ----------------------------------------------------------------------- */

#define TRY_GI(expr) return (gi[0] = (expr)) ? TN_OK : tn_last_status()

/* view, reshape, squeeze: the gradient takes the input's shape back. */
static tn_status reshape_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    TRY_GI(tn_reshape(go[0], n->in_meta[0].ndim, n->in_meta[0].shape));
}
static tn_status transpose_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    const transpose_params *p = transpose_p(n);
    TRY_GI(tn_transpose(go[0], (int)p->dim0, (int)p->dim1));
}
/* The gradient goes through the inverse permutation. */
static tn_status permute_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    int nd = n->in_meta[0].ndim, inv[TN_MAX_DIMS];
    const int64_t *order = permute_p(n)->order;
    for (int d = 0; d < nd; d++)
        inv[order[d]] = d;
    TRY_GI(tn_permute(go[0], nd, inv));
}
static tn_status expand_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    gi[0] = tn__retain(go[0]); /* the engine sums the broadcast dims back */
    return TN_OK;
}
static tn_status unsqueeze_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    TRY_GI(tn_squeeze_dim(go[0], (int)unsqueeze_p(n)->dim));
}

/* narrow/select backward: g placed into zeros of the input's shape. */
static tn_tensor *embed(tn_tensor *g, const tn_input_meta *m, const slice_spec *p);

static tn_status slice_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    TRY_GI(embed(go[0], &n->in_meta[0], slice_p(n)));
}
/* Backward of embed (create_graph): the slice of the gradient again. */
static tn_status embed_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    const slice_spec *p = slice_p(n);
    if (p->is_select) TRY_GI(tn_select(go[0], (int)p->dim, p->start));
    TRY_GI(tn_narrow(go[0], (int)p->dim, p->start, p->length));
}

static const tn_fn_info view_fn = {"ViewBackward0", reshape_bw};
static const tn_fn_info unsafe_view_fn = {"UnsafeViewBackward0", reshape_bw};
static const tn_fn_info transpose_fn = {"TransposeBackward0", transpose_bw};
static const tn_fn_info permute_fn = {"PermuteBackward0", permute_bw};
static const tn_fn_info slice_fn = {"SliceBackward0", slice_bw};
static const tn_fn_info select_fn = {"SelectBackward0", slice_bw};
static const tn_fn_info expand_fn = {"ExpandBackward0", expand_bw};
static const tn_fn_info squeeze_fn = {"SqueezeBackward0", reshape_bw};
static const tn_fn_info squeeze_dim_fn = {"SqueezeBackward1", reshape_bw};
static const tn_fn_info unsqueeze_fn = {"UnsqueezeBackward0", unsqueeze_bw};
static const tn_fn_info slice_embed_fn = {"SliceBackwardBackward0", embed_bw};
static const tn_fn_info select_embed_fn = {"SelectBackwardBackward0", embed_bw};

/* Geometry of the slice p of a tensor with shape/stride/offset: writes the
 * result's into nshape/nstride, returns its offset. */
static int64_t slice_geometry(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                              const slice_spec *p, int *nd, int64_t *nshape, int64_t *nstride) {
    int dim = (int)p->dim;
    memcpy(nshape, shape, (size_t)ndim * sizeof *nshape);
    memcpy(nstride, stride, (size_t)ndim * sizeof *nstride);
    nshape[dim] = p->length;
    *nd = ndim;
    if (p->is_select) { /* drop the dim */
        memmove(nshape + dim, nshape + dim + 1, (size_t)(ndim - dim - 1) * sizeof *nshape);
        memmove(nstride + dim, nstride + dim + 1, (size_t)(ndim - dim - 1) * sizeof *nstride);
        *nd = ndim - 1;
    }
    return tn__wrap_add(offset, tn__wrap_mul(p->start, stride[dim])); /* wraps only when empty */
}

static tn_tensor *embed(tn_tensor *g, const tn_input_meta *m, const slice_spec *p) {
    tn_tensor *out = tn__zeros_on(m->ndim, m->shape, g->dtype, tn__dev(g));
    if (!out) return NULL;
    int nd;
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    int64_t off = slice_geometry(m->ndim, out->shape, out->stride, 0, p, &nd, sh, st);
    tn_tensor *slice = tn__alias(out, nd, sh, st, off);
    tn_status s = slice ? tn__copy_into(slice, g) : tn_last_status();
    tn_release(slice);
    tn_node *n = NULL;
    if (s == TN_OK && tn__needs_grad(1, (const tn_tensor *[]){g})) {
        n = tn__node_new(p->is_select ? &select_embed_fn : &slice_embed_fn, 1,
                         (const tn_tensor *[]){g}, 0, 1);
        s = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        if (n) *slice_p(n) = *p;
        tn__node_release(n);
    }
    if (s < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

/* ---- view / reshape ------------------------------------------------------------------- */

/* A view of a as shape (already inferred) or NULL when the strides do not
 * allow one (no error set). */
static tn_tensor *try_view(const tn_tensor *a, int nd, const int64_t *shape, const tn_fn_info *fn,
                           bool *impossible) {
    int64_t st[TN_MAX_DIMS];
    *impossible = !view_strides(a, nd, shape, st);
    return *impossible ? NULL : tn__make_view(a, nd, shape, st, a->offset, fn, NULL);
}

static tn_tensor *view_impl(const tn_tensor *a, int ndim, const int64_t *shape) {
    int64_t sh[TN_MAX_DIMS];
    if (infer_size(ndim, shape, tn__numel(a->ndim, a->shape), sh) < 0) return NULL;
    bool impossible;
    tn_tensor *v = try_view(a, ndim, sh, &view_fn, &impossible);
    if (impossible)
        tn__error(TN_ERR_SHAPE,
                  "view size is not compatible with input tensor's size and stride "
                  "(at least one dimension spans across two contiguous subspaces). Use "
                  "tn_reshape(...) instead.");
    return v;
}

/* reshape: a view when the strides allow one, else a contiguous copy
 * (CloneBackward0) reinterpreted as shape (UnsafeViewBackward0, not a view). */
static tn_tensor *reshape_impl(const tn_tensor *a, int ndim, const int64_t *shape) {
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    if (infer_size(ndim, shape, tn__numel(a->ndim, a->shape), sh) < 0) return NULL;
    bool impossible;
    tn_tensor *v = try_view(a, ndim, sh, &view_fn, &impossible);
    if (!impossible) return v;
    tn__internal_enter();
    tn_tensor *c = tn_clone(a);
    tn__internal_leave();
    if (!c) return NULL;
    tn__contiguous_strides(ndim, sh, st);
    tn_tensor *out = tn__alias(c, ndim, sh, st, 0);
    tn_status s = out ? TN_OK : tn_last_status();
    if (out && tn__needs_grad(1, (const tn_tensor *[]){c})) {
        tn_node *n = tn__node_new(&unsafe_view_fn, 1, (const tn_tensor *[]){c}, 0, 1);
        s = n ? tn__node_set_output(n, out, 0) : tn_last_status();
        tn__node_release(n);
    }
    tn_release(c);
    if (s < 0) {
        tn_release(out);
        return NULL;
    }
    return out;
}

tn_tensor *tn_view(const tn_tensor *a, int ndim, const int64_t *shape) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(view_impl(a, ndim, shape));
}

tn_tensor *tn_reshape(const tn_tensor *a, int ndim, const int64_t *shape) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(reshape_impl(a, ndim, shape));
}

tn_tensor *tn_flatten(const tn_tensor *a, int start_dim, int end_dim) {
    TN_CHECK_NULL_ARG(a, "self");
    int s = tn__wrap_dim(start_dim, a->ndim), e = s < 0 ? -1 : tn__wrap_dim(end_dim, a->ndim);
    if (e < 0) return NULL;
    if (s > e) {
        tn__error(TN_ERR_INDEX, "flatten() has invalid args: start_dim cannot come after end_dim");
        return NULL;
    }
    if (a->ndim == 0) return tn__ret(reshape_impl(a, 1, (const int64_t[]){1}));
    if (s == e) return tn__ret(tn__retain(a)); /* torch returns self itself */
    int64_t sh[TN_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < s; d++)
        sh[nd++] = a->shape[d];
    if (!tn__numel_checked(e - s + 1, a->shape + s, &sh[nd])) {
        char buf[192];
        tn__format_shape(buf, sizeof buf, a->ndim, a->shape);
        tn__error(TN_ERR_SHAPE,
                  "flatten: the size of dims %d to %d of a tensor of shape %s overflows int64", s, e,
                  buf);
        return NULL;
    }
    nd++;
    for (int d = e + 1; d < a->ndim; d++)
        sh[nd++] = a->shape[d];
    return tn__ret(reshape_impl(a, nd, sh));
}

tn_tensor *tn_contiguous(const tn_tensor *a) {
    TN_CHECK_NULL_ARG(a, "self");
    if (tn__is_contiguous(a)) return tn__ret(tn__retain(a));
    return tn_clone(a); /* contiguous copy, CloneBackward0 (registered by tn_clone) */
}

/* ---- dim shuffles ------------------------------------------------------------------- */

tn_tensor *tn_transpose(const tn_tensor *a, int dim0, int dim1) {
    TN_CHECK_NULL_ARG(a, "self");
    int d0 = tn__wrap_dim(dim0, a->ndim), d1 = d0 < 0 ? -1 : tn__wrap_dim(dim1, a->ndim);
    if (d1 < 0) return NULL;
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    memcpy(sh, a->shape, sizeof sh);
    memcpy(st, a->stride, sizeof st);
    if (a->ndim > 0) {
        sh[d0] = a->shape[d1], sh[d1] = a->shape[d0];
        st[d0] = a->stride[d1], st[d1] = a->stride[d0];
    }
    tn_node *n;
    tn_tensor *v = tn__make_view(a, a->ndim, sh, st, a->offset, &transpose_fn, &n);
    if (n) *transpose_p(n) = (transpose_params){.dim0 = d0, .dim1 = d1};
    return tn__ret(v);
}

tn_tensor *tn_permute(const tn_tensor *a, int ndim, const int *dims) {
    TN_CHECK_NULL_ARG(a, "self");
    if (ndim > 0) TN_CHECK_NULL_PTR(dims, "dims");
    if (ndim != a->ndim) {
        tn__error(TN_ERR_SHAPE,
                  "permute(sparse_coo): number of dimensions in the tensor input "
                  "does not match the length of the desired ordering of dimensions i.e. "
                  "input.dim() = %d is not equal to len(dims) = %d",
                  a->ndim, ndim);
        return NULL;
    }
    int64_t sh[TN_MAX_DIMS] = {0}, st[TN_MAX_DIMS] = {0};
    int p[TN_MAX_DIMS];
    bool seen[TN_MAX_DIMS] = {false};
    for (int d = 0; d < ndim; d++) {
        if ((p[d] = tn__wrap_dim(dims[d], ndim)) < 0) return NULL;
        if (seen[p[d]]) {
            tn__error(TN_ERR_SHAPE, "permute(): duplicate dims are not allowed.");
            return NULL;
        }
        seen[p[d]] = true;
        sh[d] = a->shape[p[d]];
        st[d] = a->stride[p[d]];
    }
    tn_node *n;
    tn_tensor *v = tn__make_view(a, ndim, sh, st, a->offset, &permute_fn, &n);
    for (int d = 0; n && d < ndim; d++)
        permute_p(n)->order[d] = p[d];
    return tn__ret(v);
}

/* ---- slices ------------------------------------------------------------------------- */

static tn_tensor *slice_view(const tn_tensor *a, const slice_spec *p) {
    int nd;
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    int64_t off = slice_geometry(a->ndim, a->shape, a->stride, a->offset, p, &nd, sh, st);
    tn_node *n;
    tn_tensor *v = tn__make_view(a, nd, sh, st, off, p->is_select ? &select_fn : &slice_fn, &n);
    if (n) *slice_p(n) = *p;
    return v;
}

tn_tensor *tn_narrow(const tn_tensor *a, int dim, int64_t start, int64_t length) {
    TN_CHECK_NULL_ARG(a, "self");
    if (a->ndim == 0) {
        tn__error(TN_ERR_SHAPE, "narrow() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    if (length < 0) {
        tn__error(TN_ERR_SHAPE, "narrow(): length must be non-negative.");
        return NULL;
    }
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0) return NULL;
    int64_t size = a->shape[d];
    if (start < -size || start > size) {
        tn__error(TN_ERR_INDEX,
                  "start out of range (expected to be in range of [%lld, %lld], but got %lld)",
                  (long long)-size, (long long)size, (long long)start);
        return NULL;
    }
    if (start < 0) start += size;
    if (start > size - length) {
        tn__error(TN_ERR_SHAPE, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                  (long long)start, (long long)length, (long long)size);
        return NULL;
    }
    return tn__ret(slice_view(a, &(slice_spec){.dim = d, .start = start, .length = length}));
}

tn_tensor *tn_select(const tn_tensor *a, int dim, int64_t index) {
    TN_CHECK_NULL_ARG(a, "self");
    if (a->ndim == 0) {
        tn__error(TN_ERR_INDEX, "select() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0) return NULL;
    int64_t size = a->shape[d];
    if (index < -size || index >= size) {
        char buf[192];
        tn__format_shape(buf, sizeof buf, a->ndim, a->shape);
        tn__error(TN_ERR_INDEX,
                  "select(): index %lld out of range for tensor of size %s at dimension %d",
                  (long long)index, buf, d);
        return NULL;
    }
    if (index < 0) index += size;
    return tn__ret(
        slice_view(a, &(slice_spec){.dim = d, .start = index, .length = 1, .is_select = true}));
}

/* ---- expand ------------------------------------------------------------------------- */

static tn_status expand_error(const tn_tensor *a, int ndim, const int64_t *shape, int i,
                              int64_t target, int64_t size) {
    char ts[192], as[192];
    tn__format_shape(ts, sizeof ts, ndim, shape);
    tn__format_shape(as, sizeof as, a->ndim, a->shape);
    if (target == -1)
        return tn__error(TN_ERR_SHAPE,
                         "The expanded size of the tensor (-1) isn't allowed in a "
                         "leading, non-existing dimension %d",
                         i);
    if (target < 0)
        return tn__error(TN_ERR_SHAPE, "Trying to create tensor with negative dimension %lld: %s",
                         (long long)target, ts);
    return tn__error(TN_ERR_SHAPE,
                     "The expanded size of the tensor (%lld) must match the "
                     "existing size (%lld) at non-singleton dimension %d.  Target sizes: %s.  "
                     "Tensor sizes: %s",
                     (long long)target, (long long)size, i, ts, as);
}

/* PyTorch's inferExpandGeometry: -1 keeps a size, new dims lead, only size-1
 * dims grow (stride 0). */
static tn_status expand_geometry(const tn_tensor *a, int ndim, const int64_t *shape, int64_t *sh,
                                 int64_t *st) {
    /* ndim is checked before shape is read: shape has ndim entries only if ndim is sane */
    if (ndim > TN_MAX_DIMS)
        return tn__error(TN_ERR_SHAPE, "expand: %d dims requested, at most %d supported", ndim,
                         TN_MAX_DIMS);
    if (ndim < a->ndim) {
        char ts[192], as[192];
        tn__format_shape(ts, sizeof ts, ndim, shape);
        tn__format_shape(as, sizeof as, a->ndim, a->shape);
        return tn__error(TN_ERR_SHAPE,
                         "expand(%s{%s}, size=%s): the number of sizes provided "
                         "(%d) must be greater or equal to the number of dimensions in the "
                         "tensor (%d)",
                         tn_dtype_name(a->dtype), as, ts, ndim, a->ndim);
    }
    for (int i = ndim - 1; i >= 0; i--) {
        int dim = a->ndim - ndim + i;
        int64_t size = dim >= 0 ? a->shape[dim] : 1;
        int64_t stride =
            dim >= 0 ? a->stride[dim] : (i + 1 < ndim ? tn__wrap_mul(sh[i + 1], st[i + 1]) : 1);
        int64_t target = shape[i];
        if (target == -1 && dim >= 0) target = size;
        if (target < 0) return expand_error(a, ndim, shape, i, target, size);
        if (size != target) {
            if (size != 1) return expand_error(a, ndim, shape, i, target, size);
            size = target;
            stride = 0;
        }
        sh[i] = size;
        st[i] = stride;
    }
    return tn__check_shape(ndim, sh, a->dtype, NULL);
}

tn_tensor *tn_expand(const tn_tensor *a, int ndim, const int64_t *shape) {
    TN_CHECK_NULL_ARG(a, "self");
    if (ndim > 0) TN_CHECK_NULL_PTR(shape, "shape");
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    if (ndim < 0) {
        tn__error(TN_ERR_SHAPE, "expand: negative number of dimensions %d", ndim);
        return NULL;
    }
    if (expand_geometry(a, ndim, shape, sh, st) < 0) return NULL;
    return tn__ret(tn__make_view(a, ndim, sh, st, a->offset, &expand_fn, NULL));
}

/* ---- squeeze / unsqueeze ------------------------------------------------------------ */

/* a without dim `only` (or every size-1 dim when only < 0) of size 1. */
static tn_tensor *squeeze_impl(const tn_tensor *a, int only, const tn_fn_info *fn) {
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        bool drop = a->shape[d] == 1 && (only < 0 || only == d);
        if (drop) continue;
        sh[nd] = a->shape[d];
        st[nd++] = a->stride[d];
    }
    return tn__make_view(a, nd, sh, st, a->offset, fn, NULL);
}

tn_tensor *tn_squeeze(const tn_tensor *a) {
    TN_CHECK_NULL_ARG(a, "self");
    return tn__ret(squeeze_impl(a, -1, &squeeze_fn));
}

tn_tensor *tn_squeeze_dim(const tn_tensor *a, int dim) {
    TN_CHECK_NULL_ARG(a, "self");
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0) return NULL;
    return tn__ret(squeeze_impl(a, d, &squeeze_dim_fn));
}

tn_tensor *tn_unsqueeze(const tn_tensor *a, int dim) {
    TN_CHECK_NULL_ARG(a, "self");
    int d = tn__wrap_dim(dim, a->ndim + 1);
    if (d < 0) return NULL;
    if (a->ndim == TN_MAX_DIMS) {
        tn__error(TN_ERR_SHAPE, "unsqueeze: a tensor has at most %d dimensions", TN_MAX_DIMS);
        return NULL;
    }
    int64_t sh[TN_MAX_DIMS], st[TN_MAX_DIMS];
    for (int i = 0, j = 0; i <= a->ndim; i++) {
        if (i == d) {
            sh[i] = 1;
            st[i] = d < a->ndim ? tn__wrap_mul(a->shape[d], a->stride[d]) : 1;
        } else {
            sh[i] = a->shape[j];
            st[i] = a->stride[j++];
        }
    }
    tn_node *n;
    tn_tensor *v = tn__make_view(a, a->ndim + 1, sh, st, a->offset, &unsqueeze_fn, &n);
    if (n) unsqueeze_p(n)->dim = d;
    return tn__ret(v);
}
