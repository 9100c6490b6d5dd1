/* Scopes: a thread-local stack of owned references so that nested C
 * expressions do not leak. Frames record where each scope starts.
 *
 * User code that the engine calls (hooks, custom functions, backward
 * callbacks) runs in a callback frame (tn__callback_enter/leave): the
 * frames open when it starts are hidden from it (`base`), so its own
 * scopes work as anywhere else while what it makes outside them stays its
 * own, and the scopes it forgets to end are closed when it returns.
 *
 * A tensor counts the scope references it has (`scoped`), so that
 * tn_release of a scope-owned tensor can hand the scope's reference back
 * explicitly: the entry becomes a hole and scope_end skips it. */
#include "internal.h"

typedef struct scope_stack {
    tn_tensor **items;
    int64_t n, cap;
    int64_t *frames; /* start index of each open scope */
    int depth, frame_cap;
    int base; /* frames [0, base) belong to the code around the running callback */
} scope_stack;

static _Thread_local scope_stack tls_scope;
static _Thread_local int tls_internal; /* > 0 inside engine code */
static _Thread_local int tls_callbacks; /* > 0 inside a callback: engine code to the checks */

void tn__internal_enter(void) { tls_internal++; }
bool tn__in_engine(void) { return tls_internal > 0 || tls_callbacks > 0; }
void tn__internal_leave(void) { tls_internal--; }

static bool push(scope_stack *s, tn_tensor *t) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        tn_tensor **p = tn__realloc(s->items, (size_t)cap * sizeof *p);
        if (!p) return false;
        s->items = p;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return true;
}

tn_tensor *tn__ret(tn_tensor *t) {
    scope_stack *s = &tls_scope;
    if (!t || tls_internal > 0) return t;
    tn__failed_last = false;
    if (s->depth == s->base) return t;
    if (!push(s, t)) {
        /* Cannot track it: the caller would leak it silently, so fail cleanly. */
        tn_release(t);
        tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory while registering a tensor in a scope");
        return NULL;
    }
    /* relaxed: only this thread writes it; others read it as a hint */
    atomic_fetch_add_explicit(&t->scoped, 1, memory_order_relaxed);
    return t;
}

void tn__scope_on_release(tn_tensor *t) {
    scope_stack *s = &tls_scope;
    if (tls_internal > 0 ||
        atomic_load_explicit(&t->refcount, memory_order_relaxed) !=
            atomic_load_explicit(&t->scoped, memory_order_relaxed))
        return; /* another owner's reference: an ordinary release */
    for (int64_t i = s->n - 1; i >= 0; i--) {
        if (s->items[i] != t) continue;
        s->items[i] = NULL; /* a hole: scope_end skips it */
        atomic_fetch_sub_explicit(&t->scoped, 1, memory_order_relaxed);
        return;
    }
}

tn_status tn_scope_begin(void) {
    scope_stack *s = &tls_scope;
    if (s->depth == s->frame_cap) {
        int cap = s->frame_cap ? s->frame_cap * 2 : 16;
        int64_t *p = tn__realloc(s->frames, (size_t)cap * sizeof *p);
        if (!p) /* no scope opened: the caller must not end it */
            return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory opening a scope");
        s->frames = p;
        s->frame_cap = cap;
    }
    s->frames[s->depth++] = s->n;
    return TN_OK;
}

/* Releases the innermost frame's tensors. */
static void end_frame(scope_stack *s) {
    int64_t start = s->frames[--s->depth];
    tls_internal++; /* these releases are the scope's own references */
    while (s->n > start) {
        tn_tensor *t = s->items[--s->n];
        if (!t) continue;
        atomic_fetch_sub_explicit(&t->scoped, 1, memory_order_relaxed);
        tn_release(t);
    }
    tls_internal--;
    if (s->depth == 0) {
        tn__mfree(s->items);
        tn__mfree(s->frames);
        *s = (scope_stack){0};
    }
}

void tn_scope_end(void) {
    scope_stack *s = &tls_scope;
    if (s->depth > s->base) end_frame(s); /* never a frame of the code around */
}

void tn__callback_enter(tn__callback_frame *f) {
    scope_stack *s = &tls_scope;
    *f = (tn__callback_frame){.internal = tls_internal, .base = s->base};
    tls_internal = 0;
    tls_callbacks++;
    s->base = s->depth;
}

/* A result the callback hands out from a scope it left open is taken as
 * kept: one of that scope's references to it (the newest) becomes the
 * caller's. */
static void keep_result(scope_stack *s, const tn_tensor *r) {
    for (int64_t i = s->n - 1; r && i >= s->frames[s->base]; i--) {
        if (s->items[i] != r) continue;
        s->items[i] = NULL; /* a hole, as tn_keep leaving the last scope */
        /* relaxed: only this thread writes it (tn__ret) */
        atomic_fetch_sub_explicit(&((tn_tensor *)r)->scoped, 1, memory_order_relaxed);
        return;
    }
}

tn_status tn__callback_leave(const tn__callback_frame *f, tn_status st, int n_results,
                             tn_tensor *const *results, const char *what) {
    scope_stack *s = &tls_scope;
    int open = s->depth - s->base;
    for (int k = 0; open > 0 && k < n_results; k++)
        keep_result(s, results[k]);
    while (s->depth > s->base)
        end_frame(s);
    s->base = f->base;
    tls_callbacks--;
    tls_internal = f->internal;
    if (open == 0 || st < 0) return st; /* the callback's own failure comes first */
    return tn__error(TN_ERR_INVALID_ARGUMENT,
                     "%s returned with %d scope%s still open (tn_scope_begin without "
                     "tn_scope_end); tenet closed %s",
                     what, open, open == 1 ? "" : "s", open == 1 ? "it" : "them");
}

tn_tensor *tn_keep(tn_tensor *t) {
    scope_stack *s = &tls_scope;
    TN_CHECK_NULL_ARG(t, "t");
    if (s->depth == s->base) return t; /* no scope: the caller owns it already */
    int64_t start = s->frames[s->depth - 1];
    for (int64_t i = s->n - 1; i >= start; i--) {
        if (s->items[i] != t) continue;
        if (s->depth == s->base + 1) { /* leaves the last scope: the caller owns it */
            s->items[i] = NULL;
            atomic_fetch_sub_explicit(&t->scoped, 1, memory_order_relaxed);
            return t;
        }
        /* Into the enclosing scope: swap it with the inner frame's first
         * entry, then move the frame boundary past it. */
        s->items[i] = s->items[start];
        s->items[start] = t;
        s->frames[s->depth - 1]++;
        return t;
    }
    tn__error(TN_ERR_INVALID_ARGUMENT, "tn_keep: tensor is not owned by the innermost scope");
    return NULL;
}
