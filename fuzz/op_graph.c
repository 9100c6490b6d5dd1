/* fuzz/op_graph.c — several roots, allow_unused, graph introspection and
 * hooks: the autograd API beyond one backward. Hook handles live in the
 * program's hook slots and are released at its end. */
#include <limits.h>
#include <string.h>

#include "program.h"

/* tn_backward_multi: n, roots, flags (grads given, retain, create_graph),
 * one grad per root (a NULL slot: a one-element root's seed) */
void tf_op_backward_multi(tf_state *s) {
    tn_tensor *roots[TF_LIST] = {0}, *grads[TF_LIST] = {0};
    int n = tf_small_count(s, 3);
    for (int i = 0; i < n; i++)
        roots[i] = tf_in(s);
    uint8_t flags = tf_byte(s);
    uint64_t seeds = 0; /* as tf_op_backward's seed gradient */
    for (int i = 0; i < n; i++) {
        grads[i] = tf_in(s);
        if (flags & 1 && tf_numel(grads[i]) > seeds) seeds = tf_numel(grads[i]);
    }
    if (!tf_affordable(1, seeds)) return;
    bool create = (flags & 4) && s->higher_order++ < TF_HIGHER_ORDER;
    tf_check_status(tn_backward_multi(n, roots, flags & 1 ? grads : NULL, flags & 2, create),
                    "tn_backward_multi");
}

/* tn_autograd_grad_ex with allow_unused false: output, input, dst. A failed
 * call hands out nothing. */
void tf_op_grad_unused(tf_state *s) {
    tn_tensor *out = tf_in(s), *in[2] = {tf_in(s), tf_in(s)}, *g[2] = {NULL, NULL};
    uint8_t dst = tf_dst(s), flags = tf_byte(s);
    tn_status st = tn_autograd_grad_ex(1, &out, NULL, 2, in, g, flags & 1, false, flags & 2);
    tf_check_status(st, "tn_autograd_grad_ex");
    if (st < 0 && (g[0] || g[1])) tf_fail("failed tn_autograd_grad_ex returned a gradient");
    if (!(flags & 2) && st == TN_OK && (!g[0] || !g[1]))
        tf_fail("tn_autograd_grad_ex without allow_unused returned no gradient");
    for (int i = 0; i < 2; i++)
        if (g[i]) tf_put(s, i ? 0x30 | dst : dst, g[i]); /* the second is dropped */
}

/* Walks t's graph through next_functions (depth-first, a bounded number of
 * nodes), reading names and leaf edges; leaf: a slot compared with the
 * leaf edges. */
void tf_op_graph_walk(tf_state *s) {
    tn_tensor *t = tf_in(s), *leaf = tf_in(s);
    uint8_t limit = tf_byte(s) % 64;
    tn_node *stack[64];
    int top = 0, seen = 0;
    tn_node *root = tn_grad_fn(t);
    if (!root) {
        if (!t || tn_last_status() != TN_OK) tf_check_failed("tn_grad_fn");
        return;
    }
    stack[top++] = root;
    while (top) {
        tn_node *n = stack[--top];
        if (!tn_node_name(n)) tf_fail("a node without a name");
        int k = tn_node_num_next(n);
        if (k < 0) tf_fail("tn_node_num_next of a live node failed");
        for (int i = -1; i <= k; i++) { /* -1 and k: out of range */
            int nr = -1;
            tn_node *c = tn_node_next(n, i, &nr);
            const char *name = tn_node_next_name(n, i);
            bool is_leaf = leaf && tn_node_next_is_leaf(n, i, leaf);
            if (i < 0 || i == k) {
                if (c || name || is_leaf) tf_fail("next_functions[%d] of %d answered", i, k);
                tf_check_failed("tn_node_next out of range");
                tn_clear_error();
                continue;
            }
            if (c && (!name || nr < 0 || strcmp(name, tn_node_name(c)) != 0))
                tf_fail("next_functions[%d]: node %p named %s", i, (void *)c, name ? name : "-");
            if (is_leaf && (c || !name || strcmp(name, "AccumulateGrad") != 0))
                tf_fail("a leaf edge that is not AccumulateGrad");
            if (c && top < 64 && ++seen < limit) stack[top++] = c;
            else tn_node_release(c);
        }
        tn_node_release(n);
    }
}

/* ---- hooks ----------------------------------------------------------------------- */

static double half = 0.5;

static tn_status hook_scale(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    *replace = tn_mul_scalar(g, *(const double *)ctx);
    return *replace ? TN_OK : tn_last_status();
}
static tn_status hook_keep(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g, (void)replace, (void)ctx;
    return TN_OK;
}
static tn_status hook_fail(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)g, (void)replace, (void)ctx;
    return TN_ERR_INVALID_ARGUMENT;
}
static tn_status hook_resize(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)ctx;
    int64_t n = tn_numel(g) + 1;
    *replace = tn_zeros(1, &n, tn_dtype_of(g));
    return *replace ? TN_OK : tn_last_status();
}
static tn_status hook_post_acc(tn_tensor *leaf, void *ctx) {
    (void)ctx;
    tn_tensor *g = tn_grad(leaf);
    if (!g && tn_last_status() != TN_OK) return tn_last_status();
    tn_release(g);
    return TN_OK;
}
static tn_status hook_pre(tn_node *n, int n_out, tn_tensor *const *go, tn_tensor **rep,
                          void *ctx) {
    (void)n, (void)ctx;
    for (int i = 0; i < n_out; i++)
        if (go[i] && !(rep[i] = tn_neg(go[i]))) return tn_last_status();
    return TN_OK;
}
static tn_status hook_post(tn_node *n, int n_in, tn_tensor *const *gi, tn_tensor **rep,
                           int n_out, tn_tensor *const *go, void *ctx) {
    (void)n, (void)n_out, (void)go, (void)ctx;
    for (int i = 0; i < n_in; i++)
        if (gi[i] && !(rep[i] = tn_mul_scalar(gi[i], 2))) return tn_last_status();
    return TN_OK;
}

/* A hook on t or its grad_fn: kind, t, hook slot (its previous handle is
 * released first: removed or kept by the kind's high bit). */
void tf_op_hook(tf_state *s) {
    static tn_tensor_hook_fn const tensor_hooks[4] = {hook_scale, hook_keep, hook_fail,
                                                      hook_resize};
    uint8_t kind = tf_byte(s);
    tn_tensor *t = tf_in(s);
    tn_hook **slot = &s->hooks[tf_byte(s) % TF_HOOKS];
    if (kind & 0x80) tn_hook_remove(*slot);
    else tn_hook_release(*slot);
    *slot = NULL;
    tn_hook *h = NULL;
    switch (kind % 7) {
    case 0: case 1: case 2: case 3:
        h = tn_register_hook(t, tensor_hooks[kind % 7], &half);
        break;
    case 4:
        h = tn_register_post_accumulate_grad_hook(t, hook_post_acc, NULL);
        break;
    default: {
        tn_node *n = tn_grad_fn(t);
        if (!n) {
            if (!t || tn_last_status() != TN_OK) tf_check_failed("tn_grad_fn");
            return;
        }
        h = kind % 7 == 5 ? tn_node_register_prehook(n, hook_pre, NULL)
                          : tn_node_register_hook(n, hook_post, NULL);
        tn_node_release(n);
        break;
    }
    }
    if (!h) tf_check_failed("a hook registration");
    *slot = h;
}
