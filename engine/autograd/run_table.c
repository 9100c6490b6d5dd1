/* One backward pass's tables: the state of each node it reached (dependency
 * count, gradient inboxes and buffers) and of each leaf or retain_grad cell,
 * both open-addressed hash tables keyed by address, local to the call. */
#include <stdlib.h>

#include "engine_internal.h"

/* This thread's last run size: the next table starts there, so a training
 * loop's backward never rehashes. */
static _Thread_local size_t tls_cap_hint;

tn_status tn__run_grow(tn_run *r) {
    size_t ncap = r->cap ? r->cap * 2 : (tls_cap_hint ? tls_cap_hint : 64);
    node_state *old = r->tab;
    size_t ocap = r->cap;
    r->tab = tn__calloc_quiet(ncap, sizeof *r->tab);
    if (!r->tab) {
        r->tab = old;
        return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    }
    r->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].node) *tn__run_lookup(r, old[i].node) = old[i];
    tn__mfree(old);
    return TN_OK;
}

node_state *tn__run_insert(tn_run *r, tn_node *n, bool *fresh) {
    if ((r->count + 1) * 2 > r->cap && tn__run_grow(r) < 0) return NULL;
    node_state *s = tn__run_lookup(r, n);
    *fresh = s->node == NULL;
    if (*fresh) {
        s->node = n;
        s->inbuf = tn__calloc_quiet((size_t)n->n_out, sizeof *s->inbuf + sizeof *s->inbox);
        s->inbox = s->inbuf ? (tn_inbox *)(s->inbuf + n->n_out) : NULL;
        if (!s->inbuf) {
            s->node = NULL;
            tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
            return NULL;
        }
        r->count++;
    }
    return s;
}

tn_status tn__run_cell_insert(tn_run *r, tn_grad_cell *c) {
    if ((r->cell_count + 1) * 2 > r->cell_cap) {
        size_t ncap = r->cell_cap ? r->cell_cap * 2 : 16, ocap = r->cell_cap;
        cell_state *old = r->cells, *nt = tn__calloc_quiet(ncap, sizeof *nt);
        if (!nt) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
        r->cells = nt;
        r->cell_cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].cell) *tn__run_cell_lookup(r, old[i].cell) = old[i];
        tn__mfree(old);
    }
    cell_state *cs = tn__run_cell_lookup(r, c);
    if (!cs->cell) {
        cs->cell = c;
        r->cell_count++;
    }
    return TN_OK;
}

void tn__run_free(tn_run *r) {
    for (size_t i = 0; i < r->cap; i++) {
        node_state *s = &r->tab[i];
        if (!s->node) continue;
        for (int k = 0; k < s->node->n_out; k++) {
            tn_release(s->inbuf[k]);
            tn__inbox_clear(&s->inbox[k]);
        }
        tn__mfree(s->inbuf);
    }
    for (size_t i = 0; i < r->cell_cap; i++) {
        if (!r->cells[i].cell) continue;
        tn__inbox_clear(&r->cells[i].inbox);
        tn_release(r->cells[i].ready_g);
        tn__cell_update_drop(&r->cells[i].up);
    }
    tn__mfree(r->cells);
    tn__mfree(r->tab);
    tn__mfree(r->heap);
    tls_cap_hint = r->cap <= 4096 ? r->cap : 4096; /* bounded: a small graph after a
                                                    * huge one stays cheap */
}
