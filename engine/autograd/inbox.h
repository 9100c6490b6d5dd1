/* engine/autograd/inbox.h — where gradients wait for the node that sums
 * them. Producers push contributions (lock-free, any thread); the consumer
 * takes them all at once and sums them in a fixed order: producer's
 * creation sequence descending, then edge index — the order in which a
 * serial backward would have delivered them — so a parallel backward gives
 * bit-identical results. */
#ifndef TN_AUTOGRAD_INBOX_H
#define TN_AUTOGRAD_INBOX_H

#include "../ops/ops_internal.h"

typedef struct tn_contrib {
    struct tn_contrib *next;
    uint64_t seq; /* producer node's seq (UINT64_MAX for root seeds) */
    int edge;     /* producer's edge index (root index for seeds) */
    tn_tensor *g; /* owned */
} tn_contrib;

typedef _Atomic(tn_contrib *) tn_inbox;

/* Pushes g (consumed). NULL + error on OOM (g released). */
tn_status tn__inbox_push(tn_inbox *box, tn_tensor *g, uint64_t seq, int edge);
/* Takes every contribution and sums them in the fixed order into *out (a new
 * reference, NULL when the box was empty). */
tn_status tn__inbox_take(tn_inbox *box, tn_tensor **out);
/* Releases whatever is left (error paths). */
void tn__inbox_clear(tn_inbox *box);

#endif
