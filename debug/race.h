/* debug/race.h — the tensor race detector's hooks inside the engine.
 *
 * A kernel driver brackets the time its kernel runs:
 *
 *     tn__race_note(key, nops, ops);       // where the tensors are known
 *     ...
 *     tn_race_access ra;
 *     tn__race_begin(&ra, key, "pointwise");  // just before the kernel
 *     kernel();
 *     tn__race_end(&ra);
 *
 * ops[0] is written, the others read (an operand on the same storage as a
 * written one, as in an in-place op, is part of the write). The note is kept in a
 * thread-local until the next begin on this thread consumes it; `key`
 * (the tn_iter, the gemm's C pointer) ties the two together, so a note that
 * no kernel consumed (a driver that returned early) is never applied to
 * another kernel. Everything is a relaxed load of one flag while the
 * detector is off.
 */
#ifndef TN_DEBUG_RACE_H
#define TN_DEBUG_RACE_H

#include "../engine/core/internal.h"

#define TN_RACE_MAX_OPS 4

/* The switch. Relaxed: a plain setting read at each kernel; no data is
 * published with it (the per-storage state carries its own ordering). */
extern _Atomic unsigned tn__race_flag;
static inline bool tn__races_on(void) {
    return atomic_load_explicit(&tn__race_flag, memory_order_relaxed) != 0;
}

/* One kernel's registered accesses (n = 0: nothing tracked). */
typedef struct tn_race_access {
    int n;
    struct tn_race_slot *slot[TN_RACE_MAX_OPS];
} tn_race_access;

/* write_mask: bit k set = operand k is written. */
void tn__race_note_slow(const void *key, int nops, const tn_tensor *const *ops,
                        unsigned write_mask);
static inline void tn__race_note(const void *key, int nops, const tn_tensor *const *ops) {
    if (TN_UNLIKELY(tn__races_on())) tn__race_note_slow(key, nops, ops, 1u);
}
/* For drivers whose written operands are not just ops[0] (a reduction
 * writing values and indices from input ops[0]: mask ~1u). */
static inline void tn__race_note_mask(const void *key, int nops, const tn_tensor *const *ops,
                                      unsigned write_mask) {
    if (TN_UNLIKELY(tn__races_on())) tn__race_note_slow(key, nops, ops, write_mask);
}
/* Optional: names the op of the next kernel on this thread (a static
 * string, e.g. the driver's "add_"), shown in reports instead of the name
 * guessed from the stack. Consumed by the next begin. */
void tn__race_op_slow(const char *op);
static inline void tn__race_op(const char *op) {
    if (TN_UNLIKELY(tn__races_on())) tn__race_op_slow(op);
}
/* `kind` is a static string naming the kernel family ("elementwise", "matmul"). */
void tn__race_begin_slow(tn_race_access *ra, const void *key, const char *kind);
static inline void tn__race_begin(tn_race_access *ra, const void *key, const char *kind) {
    ra->n = 0;
    if (TN_UNLIKELY(tn__races_on())) tn__race_begin_slow(ra, key, kind);
}
void tn__race_end_slow(tn_race_access *ra);
/* Always ends what begin registered, even if the detector was switched off
 * in between. */
static inline void tn__race_end(tn_race_access *ra) {
    if (TN_UNLIKELY(ra->n)) tn__race_end_slow(ra);
}

/* Frees a storage's detector state (tn__storage_release, last reference). */
void tn__race_free(tn_storage *s);

#endif
