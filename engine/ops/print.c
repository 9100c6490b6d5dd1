/* tn_print / tn_format: torch 1.13's repr of a tensor (torch/_tensor_str.py
 * with the default print options: precision 4, threshold 1000, edgeitems 3,
 * linewidth 80), with our dtype names ("dtype=int32" for torch.int32).
 *
 * The text is built in two passes over the elements that will be shown
 * (all of them, or the 3 first and 3 last along every dimension once the
 * tensor has more than 1000 elements): the first sizes the columns exactly
 * as torch's _Formatter does, the second writes them. It lives with the ops
 * because a tensor's repr names its autograd state (grad_fn, requires_grad).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_internal.h"

enum { PRECISION = 4, THRESHOLD = 1000, EDGEITEMS = 3, LINEWIDTH = 80 };
/* device, size, dtype, grad_fn/requires_grad; a size of 8 int64 dims fits */
enum { MAX_SUFFIXES = 4, SUFFIX_MAX = 200 };

/* ---- growable string ------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *q = tn__realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_spaces(sbuf *b, int n) {
    for (; n > 0; n--)
        sb_put(b, " ", 1);
}

/* ---- the tensor being printed --------------------------------------------------- */

typedef struct printer {
    int ndim;
    const int64_t *shape;
    int64_t stride[TN_MAX_DIMS]; /* of the contiguous copy, in elements */
    bool is_float, is_bool;
    const double *f;  /* float dtypes, as double (exact) */
    const int64_t *i; /* integer and bool dtypes */
    bool summarize;
    /* torch's _Formatter state */
    bool int_mode, sci_mode;
    int max_width;
} printer;

typedef void (*visit_fn)(printer *pr, int64_t idx, void *ctx);

/* Calls fn on every element shown, in order (torch's get_summarized_data). */
static void visit(printer *pr, int dim, int64_t off, visit_fn fn, void *ctx) {
    if (dim == pr->ndim) {
        fn(pr, off, ctx);
        return;
    }
    int64_t n = pr->shape[dim];
    bool cut = pr->summarize && n > 2 * EDGEITEMS;
    for (int64_t k = 0; k < n; k++) {
        if (cut && k == EDGEITEMS) k = n - EDGEITEMS;
        visit(pr, dim + 1, off + k * pr->stride[dim], fn, ctx);
    }
}

/* Python's "{:.Nf}" / "{:.Ne}": like C's, but NaN never gets a sign. */
static int fmt_double(char *out, size_t n, char conv, int prec, double v) {
    if (isnan(v)) return snprintf(out, n, "nan");
    if (isinf(v)) return snprintf(out, n, v < 0 ? "-inf" : "inf");
    return conv == 'e' ? snprintf(out, n, "%.*e", prec, v) : snprintf(out, n, "%.*f", prec, v);
}

/* One element as torch's _Formatter.format writes it, before padding.
 * Fixed notation is only chosen for |values| <= 1e8, so 64 bytes hold it. */
static int fmt_elem_raw(const printer *pr, int64_t idx, char *out, size_t n) {
    if (!pr->is_float) {
        if (pr->is_bool) return snprintf(out, n, "%s", pr->i[idx] ? "True" : "False");
        return snprintf(out, n, "%lld", (long long)pr->i[idx]);
    }
    double v = pr->f[idx];
    if (pr->sci_mode) return fmt_double(out, n, 'e', PRECISION, v);
    if (pr->int_mode) {
        int len = fmt_double(out, n, 'f', 0, v);
        if (isfinite(v) && len + 1 < (int)n) { /* "1." says it is a float */
            out[len++] = '.';
            out[len] = '\0';
        }
        return len;
    }
    return fmt_double(out, n, 'f', PRECISION, v);
}

static int fmt_elem(const printer *pr, int64_t idx, char *out, size_t n) {
    int len = fmt_elem_raw(pr, idx, out, n);
    return len < (int)n ? len : (int)n - 1; /* never read past a truncation */
}

typedef struct float_stats {
    int64_t count;   /* nonzero finite values */
    double min, max; /* of their absolute values */
    bool all_int;
} float_stats;

static void stats_visit(printer *pr, int64_t idx, void *ctx) {
    float_stats *s = ctx;
    double v = pr->f[idx];
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    s->min = s->count ? fmin(s->min, a) : a;
    s->max = s->count ? fmax(s->max, a) : a;
    s->all_int &= v == ceil(v);
    s->count++;
}

/* Width of the nonzero finite values (floats) or of every value (others);
 * in int mode fmt_elem's "1." is torch's len("{:.0f}") + 1. */
static void width_visit(printer *pr, int64_t idx, void *ctx) {
    (void)ctx;
    if (pr->is_float && (!isfinite(pr->f[idx]) || pr->f[idx] == 0)) return;
    char s[64];
    int len = fmt_elem(pr, idx, s, sizeof s);
    if (len > pr->max_width) pr->max_width = len;
}

static void init_formatter(printer *pr) {
    pr->int_mode = true;
    pr->sci_mode = false;
    pr->max_width = 1;
    if (pr->is_float) {
        float_stats s = {0, 0, 0, true};
        visit(pr, 0, 0, stats_visit, &s);
        if (s.count == 0) return; /* only zeros, NaN, inf: "0.", "nan" */
        pr->int_mode = s.all_int;
        pr->sci_mode = s.max / s.min > 1000.0 || s.max > 1.0e8 || (!s.all_int && s.min < 1.0e-4);
    }
    visit(pr, 0, 0, width_visit, NULL);
}

/* ---- layout (torch's _tensor_str_with_formatter) --------------------------------- */

static void put_elem(sbuf *b, const printer *pr, int64_t idx) {
    char s[64];
    int len = fmt_elem(pr, idx, s, sizeof s);
    sb_spaces(b, pr->max_width - len);
    sb_put(b, s, (size_t)len);
}

/* Elements per line: floor((linewidth - indent) / (width + 2)), at least 1. */
static int64_t per_line(const printer *pr, int indent) {
    int room = LINEWIDTH - indent;
    int64_t k = room > 0 ? room / (pr->max_width + 2) : 0;
    return k < 1 ? 1 : k;
}

static void put_vector(sbuf *b, const printer *pr, int64_t off, int indent) {
    int64_t n = pr->shape[pr->ndim - 1], st = pr->stride[pr->ndim - 1];
    bool cut = pr->summarize && n > 2 * EDGEITEMS;
    int64_t items = cut ? 2 * EDGEITEMS + 1 : n, line = per_line(pr, indent);
    sb_str(b, "[");
    for (int64_t j = 0; j < items; j++) {
        if (j > 0) {
            if (j % line == 0) {
                sb_str(b, ",\n");
                sb_spaces(b, indent + 1);
            } else {
                sb_str(b, ", ");
            }
        }
        if (cut && j == EDGEITEMS)
            sb_str(b, " ...");
        else
            put_elem(b, pr, (cut && j > EDGEITEMS ? n - (items - j) : j) * st + off);
    }
    sb_str(b, "]");
}

static void put_tensor(sbuf *b, const printer *pr, int dim, int64_t off, int indent) {
    if (dim == pr->ndim - 1) {
        put_vector(b, pr, off, indent);
        return;
    }
    int64_t n = pr->shape[dim];
    bool cut = pr->summarize && n > 2 * EDGEITEMS;
    int newlines = pr->ndim - dim - 1;
    sb_str(b, "[");
    for (int64_t k = 0; k < n; k++) {
        if (k > 0) {
            sb_str(b, ",");
            for (int j = 0; j < newlines; j++)
                sb_str(b, "\n");
            sb_spaces(b, indent + 1);
        }
        if (cut && k == EDGEITEMS) {
            sb_str(b, "...");
            k = n - EDGEITEMS - 1;
            continue;
        }
        put_tensor(b, pr, dim + 1, off + k * pr->stride[dim], indent + 1);
    }
    sb_str(b, "]");
}

/* ---- suffixes (torch's _str_intern and _add_suffixes) ---------------------------- */

static void add_suffixes(sbuf *b, int nsuf, char suf[][SUFFIX_MAX], int indent) {
    const char *nl = NULL;
    for (size_t k = b->len; !b->oom && k > 0; k--)
        if (b->p[k - 1] == '\n') {
            nl = b->p + k - 1;
            break;
        }
    /* torch: len(s) - s.rfind("\n") + 1, rfind giving -1 when absent */
    int64_t last = b->oom ? 0 : (int64_t)b->len - (nl ? nl - b->p : -1) + 1;
    for (int k = 0; k < nsuf; k++) {
        int64_t len = (int64_t)strlen(suf[k]);
        if (last + len + 2 > LINEWIDTH) {
            sb_str(b, ",\n");
            sb_spaces(b, indent);
            last = indent + len;
        } else {
            sb_str(b, ", ");
            last += len + 2;
        }
        sb_str(b, suf[k]);
    }
    sb_str(b, ")");
}

static int collect_suffixes(const tn_tensor *t, int64_t numel, char suf[][SUFFIX_MAX]) {
    int n = 0;
    tn_device dev = t->storage->device;
    if (dev.type == TN_CUDA) snprintf(suf[n++], SUFFIX_MAX, "device='cuda:%d'", dev.index);
    if (numel == 0) {
        if (t->ndim != 1) { /* Python's tuple "(0, 3)" from our "[0, 3]" (ndim >= 2 here) */
            char shape[SUFFIX_MAX - 8];
            tn__format_shape(shape, sizeof shape, t->ndim, t->shape);
            shape[0] = '(';
            shape[strlen(shape) - 1] = ')';
            snprintf(suf[n++], SUFFIX_MAX, "size=%s", shape);
        }
        if (t->dtype != TN_F32) snprintf(suf[n++], SUFFIX_MAX, "dtype=%s", tn_dtype_name(t->dtype));
    } else if (t->dtype != TN_F32 && t->dtype != TN_I64 && t->dtype != TN_BOOL) {
        snprintf(suf[n++], SUFFIX_MAX, "dtype=%s", tn_dtype_name(t->dtype));
    }
    const char *fn = tn_grad_fn_name(t);
    if (fn)
        snprintf(suf[n++], SUFFIX_MAX, "grad_fn=<%s>", fn);
    else if (tn__requires_grad(t))
        snprintf(suf[n++], SUFFIX_MAX, "requires_grad=True");
    return n;
}

/* The whole repr into b; TN_OK or an error (b->p is then to be freed). */
static tn_status build(const tn_tensor *t, sbuf *b) {
    static const char prefix[] = "tensor(";
    const int indent = (int)sizeof prefix - 1;
    int64_t numel = tn__numel(t->ndim, t->shape);
    sb_str(b, prefix);
    tn_tensor *c = NULL;
    if (numel == 0) {
        sb_str(b, "[]");
    } else {
        printer pr = {.ndim = t->ndim, .shape = t->shape, .summarize = numel > THRESHOLD};
        pr.is_float = tn__is_float(t->dtype);
        pr.is_bool = t->dtype == TN_BOOL;
        c = tn__copy_to_device(t, pr.is_float ? TN_F64 : TN_I64, TN_DEVICE_CPU);
        if (!c) return tn_last_status();
        if (pr.is_float)
            pr.f = (const double *)tn__ptr(c);
        else
            pr.i = (const int64_t *)tn__ptr(c);
        tn__contiguous_strides(t->ndim, t->shape, pr.stride);
        init_formatter(&pr);
        if (t->ndim == 0)
            put_elem(b, &pr, 0);
        else
            put_tensor(b, &pr, 0, 0, indent);
    }
    tn_release(c);
    char suf[MAX_SUFFIXES][SUFFIX_MAX];
    add_suffixes(b, collect_suffixes(t, numel, suf), suf, indent);
    if (b->oom) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory while formatting a tensor");
    return TN_OK;
}

int tn_format(const tn_tensor *t, char *buf, size_t size) {
    if (buf && size) buf[0] = '\0';
    TN_CHECK_NULL_ARG_ST(t, "t");
    if (!buf && size)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_format: argument 'buf' is NULL");
    sbuf b = {0};
    tn_status st = build(t, &b);
    if (st == TN_OK && b.len > INT_MAX)
        st = tn__error(TN_ERR_INVALID_ARGUMENT, "tn_format: the text is longer than INT_MAX");
    if (st < 0) {
        tn__mfree(b.p);
        return st;
    }
    if (size) {
        size_t n = b.len < size - 1 ? b.len : size - 1;
        memcpy(buf, b.p, n);
        buf[n] = '\0';
    }
    tn__mfree(b.p);
    return (int)b.len;
}

tn_status tn_print(const tn_tensor *t, FILE *f) {
    TN_CHECK_NULL_ARG_ST(t, "t");
    TN_CHECK_NULL_PTR_ST(f, "f");
    sbuf b = {0};
    tn_status st = build(t, &b);
    if (st == TN_OK) {
        sb_str(&b, "\n");
        if (b.oom)
            st = tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory while formatting a tensor");
        else if (fwrite(b.p, 1, b.len, f) != b.len)
            st = tn__error(TN_ERR_INVALID_ARGUMENT, "tn_print: writing to the stream failed");
    }
    tn__mfree(b.p);
    return st;
}
