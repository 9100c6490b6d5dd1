/* Gradient inboxes (see inbox.h). */

#include "inbox.h"

tn_status tn__inbox_push(tn_inbox *box, tn_tensor *g, uint64_t seq, int edge) {
    tn_contrib *c = tn__malloc_quiet(sizeof *c);
    if (!c) {
        tn_release(g);
        return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory in backward");
    }
    *c = (tn_contrib){.seq = seq, .edge = edge, .g = g};
    c->next = atomic_load_explicit(box, memory_order_relaxed);
    /* release: publishes *c (and the gradient's data) to the consumer's
     * acquire exchange in tn__inbox_take. */
    while (!atomic_compare_exchange_weak_explicit(box, &c->next, c, memory_order_release,
                                                  memory_order_relaxed)) {
    }
    return TN_OK;
}

/* Delivery order: later producers first, then lower edge index. */
static bool before(const tn_contrib *a, const tn_contrib *b) {
    return a->seq != b->seq ? a->seq > b->seq : a->edge < b->edge;
}

tn_status tn__inbox_take(tn_inbox *box, tn_tensor **out) {
    *out = NULL;
    tn_contrib *list = atomic_exchange_explicit(box, NULL, memory_order_acquire);
    if (!list) return TN_OK;
    /* insertion sort of the (short) list by delivery order */
    tn_contrib *sorted = NULL;
    while (list) {
        tn_contrib *c = list, **p = &sorted;
        list = list->next;
        while (*p && before(*p, c)) p = &(*p)->next;
        c->next = *p;
        *p = c;
    }
    tn_status st = TN_OK;
    tn_tensor *sum = NULL;
    for (tn_contrib *c = sorted, *next; c; c = next) {
        next = c->next;
        if (st == TN_OK && !sum) {
            sum = c->g;
        } else if (st == TN_OK) {
            tn_tensor *s = tn_add(sum, c->g);
            if (!s) st = tn_last_status();
            tn_release(sum);
            tn_release(c->g);
            sum = s;
        } else {
            tn_release(c->g);
        }
        tn__mfree(c);
    }
    if (st < 0) {
        tn_release(sum);
        return st;
    }
    *out = sum;
    return TN_OK;
}

void tn__inbox_clear(tn_inbox *box) {
    tn_contrib *c = atomic_exchange_explicit(box, NULL, memory_order_acquire);
    while (c) {
        tn_contrib *next = c->next;
        tn_release(c->g);
        tn__mfree(c);
        c = next;
    }
}
