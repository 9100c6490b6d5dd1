/* Half operands of a fused kernel widened to float32 around the call
 * (widen.h). */
#include "widen.h"
#include "device.h"

/* The elements t's geometry reaches from its offset (0 when empty): a
 * buffer of this many elements holds a copy with the same strides. */
static int64_t span_of(const tn_tensor *t) {
    int64_t span = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return 0;
        span += (t->shape[d] - 1) * t->stride[d];
    }
    return span;
}

static bool same_view(const tn_tensor *a, const tn_tensor *b) {
    if (a->storage != b->storage || a->offset != b->offset || a->dtype != b->dtype ||
        a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d]) return false;
    return true;
}

/* A float32 copy of t with t's strides, from offset 0 of a fresh buffer. */
static tn_tensor *wide_copy(const tn_tensor *t) {
    int64_t span = span_of(t);
    tn_tensor *buf = tn__empty_on(1, &span, TN_F32, tn__dev(t));
    if (!buf) return NULL;
    tn_tensor *v = tn__alias(buf, t->ndim, t->shape, t->stride, 0);
    tn_release(buf);
    if (v && span && tn__copy_into(v, t) < 0) {
        tn_release(v);
        return NULL;
    }
    return v;
}

tn_status tn__widen_begin(tn_widen *w, int nops, const tn_tensor *const *ops, unsigned written,
                          void *const *fields, int nfields) {
    TN_ASSERT(nops <= TN_WIDEN_MAX);
    *w = (tn_widen){.nops = nops, .written = written};
    tn_status st = TN_OK;
    for (int i = 0; i < nops && st == TN_OK; i++) {
        const tn_tensor *t = ops[i];
        w->orig[i] = w->ops[i] = t;
        if (!t || !tn__is_half(t->dtype)) continue;
        int same = -1; /* one copy per distinct operand: a kernel reading what it wrote sees it */
        for (int j = 0; j < i && same < 0; j++)
            if (w->orig[j] && same_view(w->orig[j], t)) same = j;
        if (same >= 0) {
            w->ops[i] = w->ops[same];
            continue;
        }
        tn_tensor *c = wide_copy(t);
        if (!c) st = tn_last_status();
        w->ops[i] = c ? c : t;
        w->owned[i] = c != NULL;
    }
    for (int f = 0; f < nfields && st == TN_OK; f++) {
        void **p = (void **)fields[f];
        if (!*p) continue;
        int i = 0;
        while (i < nops && !(w->orig[i] && tn__ptr(w->orig[i]) == (char *)*p))
            i++;
        if (i == nops)
            st = tn__error(TN_ERR_INTERNAL, "widen: argument %d is none of the operands", f);
        else
            *p = tn__ptr(w->ops[i]);
    }
    if (st < 0) (void)tn__widen_end(w, st);
    return st;
}

tn_status tn__widen_end(tn_widen *w, tn_status st) {
    for (int i = 0; i < w->nops && st == TN_OK; i++) {
        const tn_tensor *t = w->orig[i];
        if (!(w->written >> i & 1u) || !t || t == w->ops[i] || !span_of(t)) continue;
        st = tn__copy_into((tn_tensor *)t, w->ops[i]);
    }
    for (int i = 0; i < w->nops; i++)
        if (w->owned[i]) tn_release((tn_tensor *)w->ops[i]);
    w->nops = 0;
    return st;
}
