/* Scopes: a thread-local stack of owned references so that nested C
 * expressions do not leak. Frames record where each scope starts.
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
} scope_stack;

static _Thread_local scope_stack tls_scope;
static _Thread_local int tls_internal; /* > 0 inside engine code */

void tn__internal_enter(void) { tls_internal++; }
bool tn__in_engine(void) { return tls_internal > 0; }
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
    if (s->depth == 0) return t;
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

void tn_scope_end(void) {
    scope_stack *s = &tls_scope;
    if (s->depth == 0) return;
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

tn_tensor *tn_keep(tn_tensor *t) {
    scope_stack *s = &tls_scope;
    TN_CHECK_NULL_ARG(t, "t");
    if (s->depth == 0) return t; /* no scope: the caller owns it already */
    int64_t start = s->frames[s->depth - 1];
    for (int64_t i = s->n - 1; i >= start; i--) {
        if (s->items[i] != t) continue;
        if (s->depth == 1) { /* leaves the last scope: the caller owns it */
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
