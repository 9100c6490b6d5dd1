/* tn_graph_dot: the autograd graph behind a tensor as Graphviz DOT.
 *
 * Edges point the way data flowed in forward (input -> consumer), as
 * torchviz draws them. Each node lists its saved tensors with the version
 * they were saved at and the version now (red when they differ, orange when
 * the memory was written behind autograd). The node of this thread's last
 * anomaly report is filled red and the writes the report lists hang off it.
 *
 * The walk is iterative with a visited set: graphs may be deep (long chains)
 * and shared (one tensor used many times).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../engine/autograd/autograd_internal.h"
#include "debug_internal.h"

/* ---- pointer -> id map and work stack -------------------------------------------------- */

typedef struct ptr_map {
    const void **key;
    int *id;
    size_t cap, n;
} ptr_map;

static size_t slot_of(const void *p, size_t cap) {
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static bool map_grow(ptr_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const void **key = tn__calloc(cap, sizeof *key);
    int *id = tn__malloc(cap * sizeof *id);
    if (!key || !id) {
        tn__mfree(key);
        tn__mfree(id);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i]) continue;
        size_t k = slot_of(m->key[i], cap);
        while (key[k])
            k = (k + 1) & (cap - 1);
        key[k] = m->key[i];
        id[k] = m->id[i];
    }
    tn__mfree(m->key);
    tn__mfree(m->id);
    m->key = key;
    m->id = id;
    m->cap = cap;
    return true;
}

/* The id of p; a new one (*fresh = true) when p was not seen. -1 on OOM. */
static int map_id(ptr_map *m, const void *p, bool *fresh) {
    *fresh = false;
    if (2 * (m->n + 1) > m->cap && !map_grow(m)) return -1;
    size_t k = slot_of(p, m->cap);
    while (m->key[k] && m->key[k] != p)
        k = (k + 1) & (m->cap - 1);
    if (!m->key[k]) {
        m->key[k] = p;
        m->id[k] = (int)m->n++;
        *fresh = true;
    }
    return m->id[k];
}

typedef struct node_stack {
    tn_node **v;
    size_t n, cap;
} node_stack;

static bool push(node_stack *s, tn_node *n) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        tn_node **v = tn__realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = n;
    return true;
}

/* ---- labels ------------------------------------------------------------------------------ */

/* s escaped for an HTML-like label. */
static void put_html(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static void put_type(FILE *f, tn_dtype dt, int ndim, const int64_t *shape) {
    char buf[200];
    tn__format_shape(buf, sizeof buf, ndim, shape);
    fprintf(f, "%s %s", tn_dtype_name(dt), buf);
}

/* What the last anomaly report says, reduced to what the drawing needs. */
typedef struct anomaly_view {
    const tn_anomaly_report *r;
    tn_anomaly_kind kind;
    const char *node;
    bool has_saved;
    tn_dtype dtype;
    int ndim;
    const int64_t *shape;
    uint64_t saved_v, cur_v;
    int highlighted; /* id of the node drawn as the failing one, or -1 */
} anomaly_view;

static void anomaly_view_init(anomaly_view *a) {
    memset(a, 0, sizeof *a);
    a->highlighted = -1;
    a->r = tn_last_anomaly();
    if (!a->r) return;
    a->kind = tn_anomaly_report_kind(a->r);
    a->node = tn_anomaly_report_node(a->r);
    tn_status keep_st = tn_last_status();
    char keep_msg[1024];
    snprintf(keep_msg, sizeof keep_msg, "%s", tn_last_error());
    a->has_saved = tn_anomaly_report_saved(a->r, &a->dtype, &a->ndim, &a->shape, NULL, &a->saved_v,
                                           &a->cur_v) == TN_OK;
    if (!a->has_saved) { /* a report without a saved tensor is not an error here */
        if (keep_st == TN_OK)
            tn_clear_error();
        else
            tn__error(keep_st, "%s", keep_msg);
    }
}

static bool slot_stale(const tn_saved *s) { return tn__version_get(s->orig) != s->version; }

static bool slot_written_behind(const tn_saved *s) {
    return !slot_stale(s) &&
           atomic_load_explicit(&s->orig->storage->write_epoch, memory_order_relaxed) != s->epoch;
}

/* True when slot s is the saved tensor the report is about. */
static bool slot_is_reported(const anomaly_view *a, const tn_saved *s) {
    if (!a->has_saved || !s->defined || !s->orig) return false;
    const tn_tensor *t = s->orig;
    return t->dtype == a->dtype && t->ndim == a->ndim &&
           !memcmp(t->shape, a->shape, (size_t)t->ndim * sizeof(int64_t)) &&
           s->version == a->saved_v && tn__version_get(t) == a->cur_v;
}

/* The report names this node: same name and, when the report is about a
 * saved tensor, one of its slots is that tensor. */
static bool node_is_reported(const anomaly_view *a, const tn_node *n) {
    if (!a->r || a->kind == TN_ANOMALY_NAN_FORWARD) return false;
    for (const tn_node *m = n; m; m = m == n ? n->inner : NULL) {
        if (strcmp(m->fn->name, a->node) != 0) continue;
        if (!a->has_saved) return true;
        for (int i = 0; i < m->n_saved; i++)
            if (slot_is_reported(a, &m->saved[i])) return true;
    }
    return false;
}

static void put_saved_rows(FILE *f, const tn_node *n, const char *prefix) {
    for (int i = 0; i < n->n_saved; i++) {
        const tn_saved *s = &n->saved[i];
        if (!s->defined) continue;
        fprintf(f, "<BR/>");
        if (!s->orig) {
            fprintf(f, "%ssaved[%d]: freed (backward ran without retain_graph)", prefix, i);
            continue;
        }
        uint64_t now = tn__version_get(s->orig);
        bool stale = now != s->version, behind = slot_written_behind(s);
        if (stale)
            fprintf(f, "<FONT COLOR=\"red\">");
        else if (behind)
            fprintf(f, "<FONT COLOR=\"darkorange\">");
        fprintf(f, "%ssaved[%d]: ", prefix, i);
        put_type(f, s->orig->dtype, s->orig->ndim, s->orig->shape);
        fprintf(f, " %s, saved v%" PRIu64 ", now v%" PRIu64, s->is_output ? "output" : "input",
                s->version, now);
        if (behind) fprintf(f, ", memory written behind autograd");
        if (stale || behind) fprintf(f, "</FONT>");
    }
}

static void put_node(FILE *f, int id, const tn_node *n, anomaly_view *a) {
    bool hit = node_is_reported(a, n);
    fprintf(f, "  n%d [label=<<B>", id);
    put_html(f, n->fn->name);
    fprintf(f, "</B>");
    if (n->inner) {
        fprintf(f, " (");
        put_html(f, n->inner->fn->name);
        fprintf(f, ")");
    }
    put_saved_rows(f, n, "");
    if (n->inner) put_saved_rows(f, n->inner, "inner ");
    fprintf(f, ">");
    if (hit) {
        fprintf(f, ", style=filled, fillcolor=\"#ff8080\", penwidth=2");
        if (a->highlighted < 0) a->highlighted = id;
    }
    fprintf(f, "];\n");
}

/* The report's writes as octagons pointing at the failing node. */
static void put_culprits(FILE *f, const anomaly_view *a) {
    if (a->highlighted < 0) return;
    int n = tn_anomaly_report_n_writes(a->r);
    for (int i = 0; i < n && i < 8; i++) {
        const tn_write_event *w = tn_anomaly_report_write(a->r, i);
        if (!w) break;
        fprintf(f, "  w%d [shape=octagon, style=filled, fillcolor=orange, label=<<B>", i);
        put_html(f, w->op);
        char who[64];
        tn__format_thread(who, sizeof who, w->thread_id, w->thread_name);
        fprintf(f, "</B>%s -&gt; v%" PRIu64 ", ", w->tracked ? "" : " (untracked)", w->version);
        put_html(f, who);
        if (w->n_frames > 0) {
            const tn_frame *fr = &w->frames[0];
            char where[600];
            tn__frame_where(where, sizeof where, fr);
            fprintf(f, "<BR/>");
            if (fr->function) put_html(f, fr->function);
            fprintf(f, " (");
            put_html(f, where);
            fprintf(f, ")");
        }
        fprintf(f, ">];\n  w%d -> n%d [style=dashed, color=red, label=\"modified\"];\n", i,
                a->highlighted);
    }
    if (n > 8) fprintf(f, "  /* %d more writes in tn_last_anomaly() */\n", n - 8);
}

/* ---- the walk ------------------------------------------------------------------------------ */

typedef struct walk {
    FILE *f;
    ptr_map ids; /* nodes: n<id>; cells: c<id>; one numbering */
    node_stack todo;
    anomaly_view a;
} walk;

static tn_status visit_edges(walk *w, const tn_node *n, int id) {
    for (int i = 0; i < n->n_in; i++) {
        const tn_edge *e = &n->edges[i];
        bool fresh;
        if (e->node) {
            int cid = map_id(&w->ids, e->node, &fresh);
            if (cid < 0 || (fresh && !push(&w->todo, e->node))) return TN_ERR_OUT_OF_MEMORY;
            fprintf(w->f, "  n%d -> n%d;\n", cid, id);
        } else if (e->cell) {
            int cid = map_id(&w->ids, e->cell, &fresh);
            if (cid < 0) return TN_ERR_OUT_OF_MEMORY;
            if (fresh) {
                const tn_input_meta *m = &n->in_meta[i];
                fprintf(w->f,
                        "  n%d [shape=box, style=filled, fillcolor=lightblue, "
                        "label=<<B>AccumulateGrad</B><BR/>leaf ",
                        cid);
                put_type(w->f, m->dtype, m->ndim, m->shape);
                fprintf(w->f, ">];\n");
            }
            fprintf(w->f, "  n%d -> n%d;\n", cid, id);
        }
    }
    return TN_OK;
}

static tn_status walk_graph(walk *w, const tn_tensor *root) {
    tn_node *top = root->ag->grad_fn;
    bool fresh;
    int rid = map_id(&w->ids, root, &fresh), tid = map_id(&w->ids, top, &fresh);
    if (rid < 0 || tid < 0 || !push(&w->todo, top)) return TN_ERR_OUT_OF_MEMORY;
    fprintf(w->f, "  n%d [shape=oval, style=filled, fillcolor=darkolivegreen1, label=<root<BR/>",
            rid);
    put_type(w->f, root->dtype, root->ndim, root->shape);
    fprintf(w->f, ">];\n  n%d -> n%d;\n", tid, rid);
    while (w->todo.n) {
        tn_node *n = w->todo.v[--w->todo.n];
        int id = map_id(&w->ids, n, &fresh);
        if (id < 0) return TN_ERR_OUT_OF_MEMORY;
        put_node(w->f, id, n, &w->a);
        tn_status st = visit_edges(w, n, id);
        if (st < 0) return st;
    }
    put_culprits(w->f, &w->a);
    return TN_OK;
}

tn_status tn_graph_dot(const tn_tensor *root, FILE *f) {
    TN_CHECK_NULL_ARG_ST(root, "root");
    TN_CHECK_NULL_PTR_ST(f, "f");
    if (tn__view_sync(root) < 0) return tn_last_status();
    if (!tn__grad_fn(root))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_graph_dot: the tensor has no grad_fn (a leaf, or a tensor that does "
                         "not require grad): there is no autograd graph to draw");
    walk w = {.f = f};
    anomaly_view_init(&w.a);
    /* root holds its grad_fn, and each node its inputs' nodes: the graph
     * stays alive while the caller holds root. */
    fprintf(f, "digraph tenet {\n  node [shape=box, fontname=\"monospace\"];\n");
    tn_status st = walk_graph(&w, root);
    fprintf(f, "}\n");
    tn__mfree(w.ids.key);
    tn__mfree(w.ids.id);
    tn__mfree(w.todo.v);
    if (st == TN_ERR_OUT_OF_MEMORY)
        return tn__error(st, "tn_graph_dot: out of memory while walking the graph (the output is "
                             "incomplete)");
    if (ferror(f)) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_graph_dot: writing failed");
    return TN_OK;
}
