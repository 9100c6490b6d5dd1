/* debug/race.h — the tensor race detector's internals (debug/race.c).
 *
 * The engine brackets every kernel in its dispatchers (engine/core/
 * device.h, copy.c) with tn__race_begin / tn__race_end of
 * engine/core/hooks.h, whose entries debug/hooks.c points here: begin
 * notes the operands' byte ranges, then registers the access.
 *
 *     tn__race_note(key, nops, ops);       // where the tensors are known
 *     ...
 *     tn__race_begin_slow(&ra, key, kind); // just before the kernel
 *     kernel();
 *     tn__race_end(&ra);
 *
 * ops[0] is written, the others read (an operand on the same storage as a
 * written one, as in an in-place op, is part of the write). The note is kept
 * in a thread-local until the next begin on this thread consumes it; `key`
 * ties the two together, so a note that no kernel consumed is never applied
 * to another kernel.
 */
#ifndef TN_DEBUG_RACE_H
#define TN_DEBUG_RACE_H

#include "../engine/core/hooks.h"

/* write_mask: bit k set = operand k is written. */
void tn__race_note_slow(const void *key, int nops, const tn_tensor *const *ops,
                        unsigned write_mask);
static inline void tn__race_note(const void *key, int nops, const tn_tensor *const *ops) {
    if (TN_UNLIKELY(tn__races_on())) tn__race_note_slow(key, nops, ops, 1u);
}
/* Optional: names the op of the next kernel on this thread (a static
 * string, e.g. the driver's "add_"), shown in reports instead of the name
 * guessed from the stack. Consumed by the next begin. */
void tn__race_op_slow(const char *op);
/* `kind` is a static string naming the kernel family ("elementwise", "matmul"). */
void tn__race_begin_slow(tn_race_access *ra, const void *key, const char *kind);
void tn__race_end_slow(tn_race_access *ra);

/* Frees a storage's detector state (its last reference is gone). */
void tn__race_free(tn_storage *s);

#endif
