/* The debug side-car plugs into the engine: its entries of the engine's hook
 * table (engine/core/hooks.h), installed before main. The engine reaches
 * anomaly mode and the race detector only through them. */
#include <stdlib.h>

#include "debug_internal.h"
#include "race.h"

static void storage_free(tn_storage *s) {
    if (atomic_load_explicit(&s->ring, memory_order_relaxed)) tn__ring_free(s);
    if (atomic_load_explicit(&s->race, memory_order_relaxed)) tn__race_free(s);
}

/* The dispatcher knows the tensors and runs the kernel at once: note the
 * operands and begin in one step, keyed by the access record itself. */
static void race_begin(tn_race_access *ra, int nops, const tn_tensor *const *ops,
                       unsigned write_mask, const char *kind) {
    tn__race_note_slow(ra, nops, ops, write_mask);
    tn__race_begin_slow(ra, ra, kind);
}

__attribute__((constructor)) static void install(void) {
    tn__hooks.version_bump = tn__anomaly_record_write;
    tn__hooks.storage_free = storage_free;
    tn__hooks.device_poll = tn__anomaly_device_poll;
    tn__hooks.poll_devices = tn__anomaly_poll_devices;
    tn__hooks.nf_before_write = tn__anomaly_nf_before_write;
    tn__hooks.race_begin = race_begin;
    tn__hooks.race_end = tn__race_end_slow;
    tn__hooks.node_new = tn__anomaly_on_node;
    tn__hooks.node_free = tn__anomaly_node_free;
    tn__hooks.set_running = tn__anomaly_set_running;
    tn__hooks.inplace_report = tn__anomaly_inplace_report;
    tn__hooks.check_untracked = tn__anomaly_check_untracked;
    tn__hooks.backward_error = tn__anomaly_backward_error;
    tn__hooks.check_backward = tn__anomaly_check_backward;
    tn__hooks.check_forward = tn__anomaly_check_forward;
}
