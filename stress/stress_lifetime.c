/* Concurrent creation and release of views, graphs and references.
 *
 * Shared read-only leaves a (4x8, requires grad) and b (8, requires grad).
 * Each worker, in a loop, picks one of:
 *   - views of a (narrow, transpose, view, select, expand, of views), read
 *     and released;
 *   - a small graph over views of a and b, differentiated with
 *     tn_autograd_grad (nothing accumulates into the shared leaves), the
 *     graph dropped with or without having been run;
 *   - a hand-off: a fresh tensor (sometimes a view with a graph behind it)
 *     swapped into a shared mailbox, and whatever was there released by
 *     this thread (so tensors die on another thread than their creator);
 *   - tn_retain/tn_release pairs on the shared leaves.
 * Invariants: every call succeeds; the shared leaves keep version 0 and
 * no .grad; after the run (mailboxes emptied) tensors_live, storages_live
 * and bytes_live are back to their baseline and jemalloc's active bytes
 * roughly so.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#define MAILBOXES 8

typedef struct shared {
    tn_tensor *a, *b;
    _Atomic(tn_tensor *) mailbox[MAILBOXES];
} shared;

static tn_tensor *random_view(st_worker *w, tn_tensor *a) {
    switch (st_randint(w, 6)) {
    case 0:
        return tn_narrow(a, 1, st_randint(w, 4), 4);
    case 1:
        return tn_transpose(a, 0, 1);
    case 2: {
        int64_t shape[] = {8, 4};
        return tn_view(a, 2, shape);
    }
    case 3:
        return tn_select(a, 0, st_randint(w, 4));
    case 4: {
        int64_t shape[] = {3, 4, 8};
        return tn_expand(a, 3, shape);
    }
    default:
        return tn_narrow(tn_transpose(a, 0, 1), 0, 2, 5);
    }
}

static void views(st_worker *w, shared *s) {
    tn_tensor *v = random_view(w, s->a);
    tn_tensor *t = v ? tn_sum(v) : NULL;
    if (!t) st_fail(w, "view/sum failed: %s", tn_last_error());
    w->ops += 2;
}

static void graph(st_worker *w, shared *s) {
    tn_tensor *h = tn_tanh(tn_matmul(tn_narrow(s->a, 0, 1, 2), s->b)); /* (2) */
    tn_tensor *loss = h ? tn_sum(tn_mul(h, h)) : NULL;
    w->ops += 6;
    if (!loss) {
        st_fail(w, "graph failed: %s", tn_last_error());
        return;
    }
    if (st_randint(w, 3) == 0) return; /* dropped unrun */
    tn_tensor *in[2] = {s->a, s->b}, *g[2] = {NULL, NULL};
    if (tn_autograd_grad(1, &loss, NULL, 2, in, g, false, false) != TN_OK || !g[0] || !g[1])
        st_fail(w, "tn_autograd_grad failed: %s", tn_last_error());
    w->ops++; /* the grads belong to the worker's scope */
}

static void handoff(st_worker *w, shared *s) {
    int64_t shape[] = {st_randint(w, 200) + 1};
    tn_tensor *t = tn_randn(1, shape, TN_F32);
    if (t && st_randint(w, 2)) { /* a view with a graph behind it */
        tn_tensor *u = tn_narrow(tn_mul(s->b, s->b), 0, 1, 3);
        t = u ? tn_retain(u) : NULL; /* the scope frees the randn tensor */
    } else if (t) {
        tn_retain(t);
    }
    w->ops += 2;
    if (!t) {
        st_fail(w, "handoff tensor failed: %s", tn_last_error());
        return;
    }
    /* The scope still owns its reference; the mailbox owns the retained one.
     * acq_rel: we publish t to the thread that will release it, and acquire
     * the tensor we take from the one that put it there. */
    tn_tensor *old =
        atomic_exchange_explicit(&s->mailbox[st_randint(w, MAILBOXES)], t, memory_order_acq_rel);
    tn_release(old);
}

static void worker(st_worker *w) {
    shared *s = w->arg;
    for (int64_t i = 0; st_go(w, i); i++) {
        if (tn_scope_begin() != TN_OK) {
            st_fail(w, "tn_scope_begin failed: %s", tn_last_error());
            break;
        }
        switch (st_randint(w, 4)) {
        case 0:
            views(w, s);
            break;
        case 1:
            graph(w, s);
            break;
        case 2:
            handoff(w, s);
            break;
        default:
            tn_release(tn_retain(s->a));
            tn_release(tn_retain(s->b));
            w->ops += 4;
        }
        tn_scope_end();
    }
}

int main(int argc, char **argv) {
    st_opts o = {.threads = 8,
                 .seconds = 30,
                 .iterations = 0,
                 .seed = 3,
                 .quick_seconds = 2,
                 .quick_iterations = 0,
                 .quick_threads = 4};
    st_parse(argc, argv, &o,
             "create/release views, graphs and references from many threads: "
             "no leak");
    tn_memory_stats_t base;
    st_mem_snapshot(&base);
    static shared s;
    int64_t sa[] = {4, 8}, sb[] = {8};
    s.a = tn_randn(2, sa, TN_F32);
    s.b = tn_randn(1, sb, TN_F32);
    if (!s.a || !s.b || tn_requires_grad_(s.a, true) || tn_requires_grad_(s.b, true)) {
        st_fail(NULL, "setup: %s", tn_last_error());
        return st_finish("stress_lifetime", &o);
    }
    st_run(&o, o.threads, worker, &s);
    for (int i = 0; i < MAILBOXES; i++)
        tn_release(atomic_exchange_explicit(&s.mailbox[i], NULL, memory_order_acquire));
    if (tn_version(s.a) != 0 || tn_version(s.b) != 0)
        st_fail(NULL, "shared leaves written: versions %lld, %lld", (long long)tn_version(s.a),
                (long long)tn_version(s.b));
    tn_tensor *ga = tn_grad(s.a), *gb = tn_grad(s.b);
    if (ga || gb) st_fail(NULL, "shared leaves got a .grad");
    tn_release(ga);
    tn_release(gb);
    tn_release(s.a);
    tn_release(s.b);
    st_check_no_leak(&base, 16u << 20);
    return st_finish("stress_lifetime", &o);
}
