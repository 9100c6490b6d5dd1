/* Indexing ops, forward and backward: embedding, index_select, gather,
 * scatter_add. Kernels: engine/cpu/index_kernels.c (CPU) and
 * engine/cuda/index.cu, through tn__dev_index (tn_index_args).
 *
 * Every index is checked on the host before anything is written (a device
 * index is read back once), with PyTorch's messages: "index out of range in
 * self" (embedding, index_select), "index 5 is out of bounds for dimension
 * 0 with size 3" (gather, scatter_add).
 *
 * Node layouts:
 *   EmbeddingBackward0:   input {weight}; saved {0: indices (flat, int64)}.
 *   IndexSelectBackward0: input {a}; saved {0: index (flat, int64)}; index_params.
 *   GatherBackward0:      input {a}; saved {0: index}; index_params.
 *   ScatterAddBackward0:  inputs {a, src}; saved {0: index}; index_params.
 * The plain backward of embedding and index_select is one ROWS_ADD pass;
 * with create_graph, every backward is built from recorded public ops
 * (scatter_add, gather), so double backward works.
 */
#include "autocast.h"
#include "pointwise_driver.h"

typedef struct index_params {
    int64_t dim; /* wrapped */
} index_params;
TN_NODE_PARAMS(index_params, index_p)

/* ---- shared: indices -------------------------------------------------------------- */

/* The index as a contiguous int64 tensor on dev (int32 converted when
 * allowed), or NULL + PyTorch's dtype error `dtype_msg`. */
static tn_tensor *index_on(const tn_tensor *idx, tn_device dev, bool int32_ok,
                           const char *dtype_msg) {
    if (idx->dtype != TN_I64 && !(int32_ok && idx->dtype == TN_I32)) {
        tn__error(TN_ERR_DTYPE, dtype_msg, tn_dtype_name(idx->dtype));
        return NULL;
    }
    if (idx->dtype == TN_I64) return tn__contiguous_on(idx, dev);
    return tn__copy_to_device(idx, TN_I64, dev);
}

/* Checks every entry of the contiguous int64 tensor idx lies in [0, size):
 * else TN_ERR_INDEX, embedding's message when dim < 0, gather's otherwise. */
static tn_status check_range(const tn_tensor *idx, int64_t size, int dim) {
    int64_t n = tn_numel(idx);
    if (n == 0) return TN_OK;
    const int64_t *v = (const int64_t *)tn__ptr(idx);
    int64_t *host = NULL;
    if (!tn__on_cpu(idx)) {
        if (!(host = tn__alloc((size_t)n * sizeof *host))) return tn_last_status();
        tn_status st = tn__dev_read(idx, host, (size_t)n * sizeof *host);
        if (st < 0) {
            tn__free(host);
            return st;
        }
        v = host;
    }
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (v[i] < 0 || v[i] >= size) bad = i;
    int64_t val = bad >= 0 ? v[bad] : 0;
    tn__free(host);
    if (bad < 0) return TN_OK;
    if (dim < 0) return tn__error(TN_ERR_INDEX, "index out of range in self");
    return tn__error(TN_ERR_INDEX, "index %lld is out of bounds for dimension %d with size %lld",
                     (long long)val, dim, (long long)size);
}

/* (outer, size, inner) around dim of a shape (0-dim: all 1). */
static void split3(int nd, const int64_t *shape, int dim, int64_t *outer, int64_t *size,
                   int64_t *inner) {
    *outer = nd ? tn__numel(dim, shape) : 1;
    *size = nd ? shape[dim] : 1;
    *inner = nd ? tn__numel(nd - dim - 1, shape + dim + 1) : 1;
}

/* out (outer, n, inner) = src (outer, size, inner) at rows idx (ROWS), or
 * out (outer, size, inner) += src (outer, n, inner) at rows idx (ROWS_ADD);
 * all contiguous on out's device. */
static tn_status run_rows(int mode, tn_tensor *out, const tn_tensor *src, const tn_tensor *idx,
                          int64_t outer, int64_t size, int64_t inner) {
    /* nothing to move (and outer * n * inner of an empty tensor may overflow) */
    if (tn_numel(out) == 0 || tn_numel(src) == 0) return TN_OK;
    tn_index_args a = {.mode = mode,
                       .dtype = out->dtype,
                       .idx = (const int64_t *)tn__ptr(idx),
                       .src = tn__ptr(src),
                       .out = tn__ptr(out),
                       .outer = outer,
                       .size = size,
                       .n = tn_numel(idx),
                       .inner = inner};
    return tn__dev_index(&a, tn__dev(out), (const tn_tensor *[]){out, src, idx});
}

/* GATHER / SCATTER_ADD over idx's shape (idx contiguous int64); src and out
 * through their strides, all on out's device. */
static tn_status run_lines(int mode, tn_tensor *out, const tn_tensor *src, const tn_tensor *idx,
                           int dim) {
    if (tn_numel(idx) == 0) return TN_OK; /* no element (its other dims may be huge) */
    /* a 0-dim tensor acts as one of shape [1], as in PyTorch */
    const int nd = idx->ndim ? idx->ndim : 1;
    tn_index_args a = {.mode = mode,
                       .dtype = out->dtype,
                       .idx = (const int64_t *)tn__ptr(idx),
                       .src = tn__ptr(src),
                       .out = tn__ptr(out),
                       .ndim = nd,
                       .dim = dim};
    int64_t cs[TN_MAX_DIMS];
    tn__contiguous_strides(idx->ndim, idx->shape, cs);
    for (int d = 0; d < nd; d++) {
        a.shape[d] = idx->ndim ? idx->shape[d] : 1;
        a.istride[d] = idx->ndim ? cs[d] : 0;
        a.sstride[d] = d < src->ndim ? src->stride[d] : 0;
        a.ostride[d] = d < out->ndim ? out->stride[d] : 0;
    }
    return tn__dev_index(&a, tn__dev(out), (const tn_tensor *[]){out, src, idx});
}

/* Records node fn over inputs (n_in) for out, saving idx, with dim. */
static tn_status record(const tn_fn_info *fn, int n_in, const tn_tensor *const *in, tn_tensor *out,
                        const tn_tensor *idx, int dim) {
    if (!tn__needs_grad(n_in, in)) return TN_OK;
    tn_node *n = tn__node_new(fn, n_in, in, 1, 1);
    tn_status st = n ? tn__node_set_output(n, out, 0) : tn_last_status();
    if (st == TN_OK) {
        index_p(n)->dim = dim;
        st = tn__node_save(n, 0, idx, false);
    }
    tn__node_release(n);
    return st;
}

/* The end of a public entry, which called tn__internal_enter before the op
 * (the public ops an op calls return to it, not to the user's scope). */
static tn_tensor *finish(const char *op, double t0, tn_tensor *out, int n_in,
                         const tn_tensor *const *in) {
    tn__internal_leave();
    tn__op_done(op, t0, out, n_in, in);
    return tn__ret(out);
}

/* ---- index_add of rows: the backward of embedding and index_select ---------------- */

/* zeros(shape) with g's rows j added at rows idx[j] along dim (g: shape with
 * dim's size n = numel(idx)). Plain: one ROWS_ADD pass. create_graph: a
 * recorded scatter_add with the index expanded over g's shape. */
static tn_tensor *index_add_rows(const tn_tensor *g, const tn_tensor *idx, int nd,
                                 const int64_t *shape, int dim) {
    if (nd == 0) return tn__retain(g); /* a 0-dim input: its one index is 0 */
    tn_tensor *z = tn__zeros_on(nd, shape, g->dtype, tn__dev(g));
    if (!z || tn_numel(z) == 0) return z;
    if (tn__grad_enabled()) {
        int64_t vs[TN_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            vs[d] = d == dim ? tn_numel(idx) : 1;
        tn_tensor *v = tn_view(idx, nd, vs);
        tn_tensor *e = v ? tn_expand(v, g->ndim, g->shape) : NULL;
        tn_tensor *r = e ? tn_scatter_add(z, dim, e, g) : NULL;
        tn_release(v);
        tn_release(e);
        tn_release(z);
        return r;
    }
    int64_t outer, size, inner;
    split3(nd, shape, dim, &outer, &size, &inner);
    tn_tensor *gc = tn__contiguous_on(g, tn__dev(g));
    if (!gc || run_rows(TN_IX_ROWS_ADD, z, gc, idx, outer, size, inner) < 0) {
        tn_release(z);
        z = NULL;
    }
    tn_release(gc);
    return z;
}

/* ---- embedding -------------------------------------------------------------------- */

static tn_status embedding_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *idx = tn__node_unpack(n, 0);
    TN_TRY(idx);
    const tn_input_meta *w = &n->in_meta[0];
    int64_t rows[2] = {tn_numel(idx), w->shape[1]};
    tn_tensor *g = tn_reshape(go[0], 2, rows);
    gi[0] = g ? index_add_rows(g, idx, 2, w->shape, 0) : NULL;
    tn_release(g);
    tn_release(idx);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info embedding_fn = {"EmbeddingBackward0", embedding_bw};

static tn_tensor *embedding(const tn_tensor *weight, const tn_tensor *indices) {
    tn_device dev;
    if (tn__result_device(2, (const tn_tensor *[]){weight, indices}, &dev) < 0) return NULL;
    tn_tensor *idx = index_on(indices, dev, true,
                              "Expected tensor for argument #1 'indices' to have one of the "
                              "following scalar types: Long, Int; but got %s instead (while "
                              "checking arguments for embedding)");
    if (!idx) return NULL;
    if (weight->ndim != 2) {
        tn_release(idx);
        tn__error(TN_ERR_SHAPE, "'weight' must be 2-D");
        return NULL;
    }
    int nd = indices->ndim;
    int64_t shape[TN_MAX_DIMS + 1];
    memcpy(shape, indices->shape, (size_t)nd * sizeof *shape);
    shape[nd] = weight->shape[1];
    tn_tensor *flat = NULL, *w = NULL, *out = NULL;
    if (nd + 1 > TN_MAX_DIMS)
        tn__error(TN_ERR_SHAPE, "embedding: the result would have more than %d dims", TN_MAX_DIMS);
    else if (check_range(idx, weight->shape[0], -1) == TN_OK &&
             (flat = tn_reshape(idx, 1, (int64_t[]){tn_numel(idx)})) &&
             (w = tn__contiguous_on(weight, dev)) &&
             (out = tn__empty_on(nd + 1, shape, weight->dtype, dev)) &&
             (run_rows(TN_IX_ROWS, out, w, flat, 1, weight->shape[0], shape[nd]) < 0 ||
              record(&embedding_fn, 1, &weight, out, flat, 0) < 0)) {
        tn_release(out);
        out = NULL;
    }
    tn_release(idx);
    tn_release(flat);
    tn_release(w);
    return out;
}

tn_tensor *tn_embedding(const tn_tensor *weight, const tn_tensor *indices) {
    TN_CHECK_NULL_ARG(weight, "weight");
    TN_CHECK_NULL_ARG(indices, "indices");
    double t0 = tn__prof_start(); /* the profiler: the op\'s span */
    tn__internal_enter();
    return finish("embedding", t0, embedding(weight, indices), 1, &weight);
}

/* ---- index_select ----------------------------------------------------------------- */

static tn_status index_select_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *idx = tn__node_unpack(n, 0);
    TN_TRY(idx);
    const tn_input_meta *a = &n->in_meta[0];
    gi[0] = index_add_rows(go[0], idx, a->ndim, a->shape, (int)index_p(n)->dim);
    tn_release(idx);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info index_select_fn = {"IndexSelectBackward0", index_select_bw};

static tn_tensor *index_select(const tn_tensor *a, int dim, const tn_tensor *index) {
    tn_device dev;
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0 || tn__result_device(2, (const tn_tensor *[]){a, index}, &dev) < 0) return NULL;
    if (index->ndim > 1) {
        tn__error(TN_ERR_INDEX, "index_select(): Index is supposed to be a vector");
        return NULL;
    }
    tn_tensor *idx = index_on(index, dev, true,
                              "index_select(): Expected dtype int32 or int64 for index, got %s");
    if (!idx) return NULL;
    int64_t outer, size, inner, n = tn_numel(idx), shape[TN_MAX_DIMS];
    split3(a->ndim, a->shape, d, &outer, &size, &inner);
    memcpy(shape, a->shape, sizeof shape);
    if (a->ndim) shape[d] = n;
    tn_tensor *flat = NULL, *x = NULL, *out = NULL;
    if (a->ndim == 0 && n != 1)
        tn__error(TN_ERR_INDEX,
                  "index_select(): Index to scalar can have only 1 value, got %lld "
                  "value(s)",
                  (long long)n);
    else if (check_range(idx, size, -1) == TN_OK && (flat = tn_reshape(idx, 1, (int64_t[]){n})) &&
             (x = tn__contiguous_on(a, dev)) &&
             (out = tn__empty_on(a->ndim, shape, a->dtype, dev)) &&
             (run_rows(TN_IX_ROWS, out, x, flat, outer, size, inner) < 0 ||
              record(&index_select_fn, 1, &a, out, flat, d) < 0)) {
        tn_release(out);
        out = NULL;
    }
    tn_release(idx);
    tn_release(flat);
    tn_release(x);
    return out;
}

tn_tensor *tn_index_select(const tn_tensor *a, int dim, const tn_tensor *index) {
    TN_CHECK_NULL_ARG(a, "self");
    TN_CHECK_NULL_ARG(index, "index");
    double t0 = tn__prof_start(); /* the profiler: the op\'s span */
    tn__internal_enter();
    return finish("index_select", t0, index_select(a, dim, index), 1, &a);
}

/* ---- gather / scatter_add: checks --------------------------------------------------- */

/* PyTorch's shape rules: index has self's number of dims (and src's), and
 * index.size(d) <= self.size(d) for d != dim (and <= src.size(d) for all d). */
static tn_status check_gather_shapes(const tn_tensor *a, int dim, const tn_tensor *idx,
                                     const tn_tensor *src) {
    int na = a->ndim ? a->ndim : 1, ni = idx->ndim ? idx->ndim : 1;
    if (na != ni)
        return tn__error(TN_ERR_SHAPE,
                         "Index tensor must have the same number of dimensions as %s tensor",
                         src ? "self" : "input");
    if (src && (src->ndim ? src->ndim : 1) != ni)
        return tn__error(TN_ERR_SHAPE,
                         "Index tensor must have the same number of dimensions as src tensor");
    bool bad = false; /* a 0-D self or src counts as size 1, as PyTorch's check */
    for (int d = 0; d < idx->ndim; d++) {
        int64_t ad = a->ndim ? a->shape[d] : 1, sd = src && src->ndim ? src->shape[d] : 1;
        bad |= (d != dim && idx->shape[d] > ad) || (src && idx->shape[d] > sd);
    }
    if (!bad) return TN_OK;
    char si[96], sa[96], ss[96];
    tn__format_shape(si, sizeof si, idx->ndim, idx->shape);
    tn__format_shape(sa, sizeof sa, a->ndim, a->shape);
    if (!src)
        return tn__error(TN_ERR_SHAPE,
                         "Size does not match at dimension %d expected index %s to be smaller "
                         "than self %s apart from dimension %d",
                         dim == 0 && idx->ndim > 1 ? 1 : 0, si, sa, dim);
    tn__format_shape(ss, sizeof ss, src->ndim, src->shape);
    return tn__error(TN_ERR_SHAPE,
                     "Expected index %s to be smaller than self %s apart from dimension %d and "
                     "to be smaller size than src %s",
                     si, sa, dim, ss);
}

/* ---- gather ------------------------------------------------------------------------ */

static tn_status gather_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    tn_tensor *idx = tn__node_unpack(n, 0);
    TN_TRY(idx);
    const tn_input_meta *a = &n->in_meta[0];
    tn_tensor *z = tn__zeros_on(a->ndim, a->shape, go[0]->dtype, tn__dev(go[0]));
    gi[0] = z ? tn_scatter_add(z, (int)index_p(n)->dim, idx, go[0]) : NULL;
    tn_release(z);
    tn_release(idx);
    return gi[0] ? TN_OK : tn_last_status();
}
static const tn_fn_info gather_fn = {"GatherBackward0", gather_bw};

static tn_tensor *gather(const tn_tensor *a, int dim, const tn_tensor *index) {
    tn_device dev;
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0 || tn__result_device(2, (const tn_tensor *[]){a, index}, &dev) < 0) return NULL;
    tn_tensor *idx = index_on(index, dev, false, "gather(): Expected dtype int64 for index");
    if (!idx) return NULL;
    tn_tensor *x = NULL, *out = NULL;
    if (check_gather_shapes(a, d, idx, NULL) == TN_OK &&
        check_range(idx, a->ndim ? a->shape[d] : 1, d) == TN_OK && (x = tn__on_device(a, dev)) &&
        (out = tn__empty_on(idx->ndim, idx->shape, a->dtype, dev)) &&
        (run_lines(TN_IX_GATHER, out, x, idx, d) < 0 ||
         record(&gather_fn, 1, &a, out, idx, d) < 0)) {
        tn_release(out);
        out = NULL;
    }
    tn_release(idx);
    tn_release(x);
    return out;
}

tn_tensor *tn_gather(const tn_tensor *a, int dim, const tn_tensor *index) {
    TN_CHECK_NULL_ARG(a, "self");
    TN_CHECK_NULL_ARG(index, "index");
    double t0 = tn__prof_start(); /* the profiler: the op\'s span */
    tn__internal_enter();
    return finish("gather", t0, gather(a, dim, index), 1, &a);
}

/* ---- scatter_add ------------------------------------------------------------------- */

/* g (index's shape) padded with zeros at the end of each dim up to shape:
 * src's gradient when src is larger than index. Recorded ops (cat). A 0-D
 * index or src meets a 1-D other (one dim counts as size 1): a 0-D src
 * takes the sum of g's at most one element, a 0-D g becomes [1] first. */
static tn_tensor *pad_to(tn_tensor *g, int nd, const int64_t *shape) {
    tn_tensor *r = tn_ndim(g) == nd ? tn__retain(g)
                   : nd == 0        ? tn_sum(g)
                                    : tn_reshape(g, 1, (const int64_t[]){1});
    for (int d = 0; r && d < nd; d++) {
        if (tn_shape(r)[d] == shape[d]) continue;
        int64_t zs[TN_MAX_DIMS];
        memcpy(zs, tn_shape(r), (size_t)nd * sizeof *zs);
        zs[d] = shape[d] - zs[d];
        tn_tensor *z = tn__zeros_on(nd, zs, g->dtype, tn__dev(g));
        tn_tensor *c = z ? tn_cat(2, (tn_tensor *[]){r, z}, d) : NULL;
        tn_release(z);
        tn_release(r);
        r = c;
    }
    return r;
}

static tn_status scatter_add_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    gi[0] = tn__retain(go[0]);
    if (!tn__edge_valid(&n->edges[1])) return TN_OK; /* src needs no gradient */
    tn_tensor *idx = tn__node_unpack(n, 0);
    TN_TRY(idx);
    const tn_input_meta *s = &n->in_meta[1];
    tn_tensor *g = tn_gather(go[0], (int)index_p(n)->dim, idx);
    gi[1] = g ? pad_to(g, s->ndim, s->shape) : NULL;
    tn_release(g);
    tn_release(idx);
    return gi[1] ? TN_OK : tn_last_status();
}
static const tn_fn_info scatter_add_fn = {"ScatterAddBackward0", scatter_add_bw};

static tn_tensor *scatter_add(const tn_tensor *a, int dim, const tn_tensor *index,
                              const tn_tensor *src) {
    tn_device dev;
    int d = tn__wrap_dim(dim, a->ndim);
    if (d < 0 || tn__result_device(3, (const tn_tensor *[]){a, index, src}, &dev) < 0) return NULL;
    tn_tensor *idx = index_on(index, dev, false, "scatter(): Expected dtype int64 for index");
    if (!idx) return NULL;
    tn_tensor *s = NULL, *out = NULL;
    if (a->dtype != src->dtype)
        tn__error(TN_ERR_DTYPE, "scatter(): Expected self.dtype to be equal to src.dtype");
    else if (check_gather_shapes(a, d, idx, src) == TN_OK &&
             check_range(idx, a->ndim ? a->shape[d] : 1, d) == TN_OK &&
             (s = tn__on_device(src, dev)) && (out = tn__copy_to_device(a, a->dtype, dev)) &&
             (run_lines(TN_IX_SCATTER_ADD, out, s, idx, d) < 0 ||
              record(&scatter_add_fn, 2, (const tn_tensor *[]){a, src}, out, idx, d) < 0)) {
        tn_release(out);
        out = NULL;
    }
    tn_release(idx);
    tn_release(s);
    return out;
}

tn_tensor *tn_scatter_add(const tn_tensor *a, int dim, const tn_tensor *index,
                          const tn_tensor *src) {
    tn_ac_frame f;
    if (tn__autocast(&f, TN_AC_SCATTER_ADD, 3, (const tn_tensor *[]){a, index, src}))
        return tn__autocast_done(&f, f.ok ? tn_scatter_add(f.t[0], dim, f.t[1], f.t[2]) : NULL);
    TN_CHECK_NULL_ARG(a, "self");
    TN_CHECK_NULL_ARG(index, "index");
    TN_CHECK_NULL_ARG(src, "src");
    double t0 = tn__prof_start(); /* the profiler: the op\'s span */
    tn__internal_enter();
    return finish("scatter_add", t0, scatter_add(a, dim, index, src), 2,
                  (const tn_tensor *[]){a, src});
}
