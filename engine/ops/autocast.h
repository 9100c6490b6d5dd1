/* engine/ops/autocast.h — the one hook every autocast op calls at its entry
 * (tenet/autocast.h; the policy lists and the regions are autocast.c's).
 *
 * An op listed in tn_ac_op starts with
 *
 *   tn_ac_frame f;
 *   if (tn__autocast(&f, TN_AC_MATMUL, 2, (const tn_tensor *[]){a, b}))
 *       return tn__autocast_done(&f, f.ok ? tn_matmul(f.t[0], f.t[1]) : NULL);
 *
 * With autocast off (no region, or inside another autocast op or backward)
 * that is one thread-local load and a not-taken branch. When the thread's
 * region for the inputs' device type applies, tn__autocast casts the inputs
 * by the op's policy for that device type (recorded casts: ToCopyBackward0),
 * turns autocast off for the thread and returns true; the op then calls
 * itself on f.t[] (its inner ops see autocast off, as torch's autocast
 * excludes its own dispatch key), and tn__autocast_done restores the switch,
 * releases the casts and returns the result. f.ok is false when a cast
 * failed (the error is set; the op returns NULL).
 */
#ifndef TN_OPS_AUTOCAST_H
#define TN_OPS_AUTOCAST_H

#include "../core/internal.h"

/* The ops that have a policy on some device type (autocast.c's table). */
typedef enum tn_ac_op {
    TN_AC_MATMUL,
    TN_AC_LINEAR,
    TN_AC_CONV,
    TN_AC_CONV_TRANSPOSE,
    TN_AC_SDPA,
    TN_AC_CROSS_ENTROPY,
    TN_AC_MSE_LOSS,
    TN_AC_LOGSUMEXP,
    TN_AC_SOFTMAX,
    TN_AC_LOG_SOFTMAX,
    TN_AC_LAYER_NORM,
    TN_AC_GROUP_NORM,
    TN_AC_EXP,
    TN_AC_LOG,
    TN_AC_POW,
    TN_AC_SUM,
    TN_AC_CAT,
    TN_AC_STACK,
    TN_AC_SCATTER_ADD,
    TN_AC_OP_COUNT
} tn_ac_op;

#define TN_AC_INLINE 4 /* inputs held in the frame itself; more are allocated */

typedef struct tn_ac_frame {
    tn_tensor **t; /* n inputs to use: new references (NULL stays NULL) */
    tn_tensor *inline_t[TN_AC_INLINE];
    int n;
    bool ok;       /* every cast succeeded */
    uint8_t saved; /* the switch to restore */
} tn_ac_frame;

bool tn__autocast_apply(tn_ac_frame *f, tn_ac_op op, int n, const tn_tensor *const *in);

static inline bool tn__autocast(tn_ac_frame *f, tn_ac_op op, int n, const tn_tensor *const *in) {
    if (TN_LIKELY(tn__autocast_on == 0)) return false;
    return tn__autocast_apply(f, op, n, in);
}

/* Restores the switch, releases f's inputs, returns r. */
tn_tensor *tn__autocast_done(tn_ac_frame *f, tn_tensor *r);

/* This thread's weight-cast cache entries (for tests). */
int tn__autocast_cache_size(void);

#endif
