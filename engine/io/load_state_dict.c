/* tn_load_state_dict: torch.nn.Module.load_state_dict for a list of named
 * parameters. Every check runs before the first write, and the errors are
 * reported together in PyTorch's words (torch/nn/modules/module.py):
 *
 *   Error(s) in loading state_dict:
 *   	Missing key(s) in state_dict: "a", "b".
 *   	Unexpected key(s) in state_dict: "c".
 *   	size mismatch for d: copying a param with shape torch.Size([3]) from
 *   checkpoint, the shape in current model is torch.Size([4]).
 *
 * (PyTorch names the module's class after "for"; tenet has none to name.)
 * A message longer than the error buffer ends with "...". */
#include <stdio.h>
#include <stdlib.h>

#include "io_internal.h"

typedef struct msg {
    char buf[960]; /* + the first line: within tenet's 1024-byte error message */
    size_t n;
    int errors;
    tn_status st; /* of the first error */
} msg;

static void add(msg *m, const char *fmt, ...) TN_PRINTF(2, 3);
static void add(msg *m, const char *fmt, ...) {
    if (m->n >= sizeof m->buf - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(m->buf + m->n, sizeof m->buf - m->n, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    m->n += (size_t)k;
    if (m->n >= sizeof m->buf - 1) { /* cut: mark it */
        m->n = sizeof m->buf - 1;
        memcpy(m->buf + m->n - 3, "...", 3);
    }
}

static void error_line(msg *m, tn_status st) {
    if (m->errors++ == 0) m->st = st;
    add(m, "\n\t");
}

static void size_str(char *buf, size_t n, const tn_tensor *t) {
    char s[200];
    tn__format_shape(s, sizeof s, t->ndim, t->shape);
    snprintf(buf, n, "torch.Size(%s)", s);
}

static void check_param(msg *m, const char *name, const tn_tensor *from, const tn_tensor *to) {
    char a[220], b[220];
    if (!tn__same_shape(from, to)) {
        size_str(a, sizeof a, from);
        size_str(b, sizeof b, to);
        error_line(m, TN_ERR_SHAPE);
        add(m,
            "size mismatch for %s: copying a param with shape %s from checkpoint, the shape "
            "in current model is %s.",
            name, a, b);
    } else if (tn__is_float(from->dtype) != tn__is_float(to->dtype)) {
        error_line(m, TN_ERR_DTYPE);
        add(m,
            "dtype mismatch for %s: copying a param with dtype %s from checkpoint, the dtype "
            "in current model is %s.",
            name, tn_dtype_name(from->dtype), tn_dtype_name(to->dtype));
    }
}

/* Indices of names sorted by name, for lookups; duplicates refused. */
static _Thread_local const char *const *t_names; /* qsort has no context argument */
static int cmp_idx(const void *a, const void *b) {
    return strcmp(t_names[*(const int *)a], t_names[*(const int *)b]);
}

static bool model_has(const int *idx, int n, const char *const *names, const char *key) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(names[idx[mid]], key);
        if (c == 0) return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static tn_status check_args(const tn_state_dict *sd, int n, const char *const *names,
                            tn_tensor *const *params) {
    if (!sd) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_load_state_dict: argument 'sd' is NULL");
    if (n < 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_load_state_dict: n is %d", n);
    if (n > 0 && (!names || !params))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_load_state_dict: argument '%s' is NULL",
                         names ? "params" : "names");
    for (int i = 0; i < n; i++) {
        if (!names[i]) return tn__null_arg(false, "tn_load_state_dict: names[%d] is NULL", i);
        if (!params[i]) return tn__null_arg(true, "tn_load_state_dict: params[%d] is NULL", i);
    }
    return TN_OK;
}

/* Missing and unexpected keys (strict), size and dtype mismatches, in
 * PyTorch's order: missing, unexpected, then the parameters' errors. */
static void check_all(msg *m, const tn_state_dict *sd, int n, const char *const *names,
                      tn_tensor *const *params, const int *idx, bool strict) {
    int miss = 0, unexp = 0;
    for (int i = 0; strict && i < n; i++)
        if (tn__sd_find(sd, names[i]) < 0) {
            if (miss++ == 0) {
                error_line(m, TN_ERR_INVALID_ARGUMENT);
                add(m, "Missing key(s) in state_dict: ");
            }
            add(m, "%s\"%s\"", miss > 1 ? ", " : "", names[i]);
        }
    if (miss) add(m, ". ");
    for (int64_t k = 0; strict && k < sd->n; k++)
        if (!model_has(idx, n, names, sd->e[k].name)) {
            if (unexp++ == 0) {
                error_line(m, TN_ERR_INVALID_ARGUMENT);
                add(m, "Unexpected key(s) in state_dict: ");
            }
            add(m, "%s\"%s\"", unexp > 1 ? ", " : "", sd->e[k].name);
        }
    if (unexp) add(m, ". ");
    for (int i = 0; i < n; i++) {
        int64_t k = tn__sd_find(sd, names[i]);
        if (k >= 0) check_param(m, names[i], sd->e[k].t, params[i]);
    }
}

tn_status tn_load_state_dict(const tn_state_dict *sd, int n, const char *const *names,
                             tn_tensor *const *params, bool strict) {
    tn_status st = check_args(sd, n, names, params);
    if (st < 0) return st;
    int *idx = tn__calloc((size_t)n, sizeof *idx);
    if (!idx) return tn_last_status();
    for (int i = 0; i < n; i++)
        idx[i] = i;
    t_names = names;
    qsort(idx, (size_t)n, sizeof *idx, cmp_idx);
    for (int i = 1; i < n; i++)
        if (strcmp(names[idx[i - 1]], names[idx[i]]) == 0) {
            char q[96];
            tn__quote_name(q, sizeof q, names[idx[i]]);
            tn__mfree(idx);
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "tn_load_state_dict: the parameter name %s "
                             "is given twice",
                             q);
        }
    msg *m = tn__calloc(1, sizeof *m);
    if (!m) {
        tn__mfree(idx);
        return tn_last_status();
    }
    check_all(m, sd, n, names, params, idx, strict);
    tn__mfree(idx);
    if (m->errors) {
        st = tn__error(m->st, "Error(s) in loading state_dict:%s", m->buf);
        tn__mfree(m);
        return st;
    }
    tn__mfree(m);
    bool was = tn_set_grad_enabled(false); /* torch.no_grad(), as load_state_dict */
    for (int i = 0; i < n && st == TN_OK; i++) {
        int64_t k = tn__sd_find(sd, names[i]);
        if (k >= 0) st = tn_copy_(params[i], sd->e[k].t);
    }
    tn_set_grad_enabled(was);
    return st;
}
