/* Ops for code that extends tenet and watches it: the timeline profiler
 * switched on and off across any program, writes by the caller's own code
 * (tn_write_inplace), and the epoch sampler with hostile arguments. */
#include <string.h>

#include "program.h"

/* tn_profile_begin / end (no file, /dev/null, a path that cannot be opened)
 * / summary: variant */
void tf_op_profile(tf_state *s) {
    uint8_t v = tf_byte(s) % 5, b = tf_byte(s);
    switch (v) {
    case 0: tf_check_status(tn_profile_begin(), "tn_profile_begin"); break;
    case 1: tf_check_status(tn_profile_end(NULL), "tn_profile_end"); break;
    case 2: tf_check_status(tn_profile_end("/dev/null"), "tn_profile_end"); break;
    case 3: tf_check_status(tn_profile_end("/nonexistent-dir/trace.json"), "tn_profile_end"); break;
    default: tf_check_status(tn_profile_summary(s->sink, (int)(b % 8) - 1), "tn_profile_summary");
    }
}

typedef struct write_ctx {
    uint8_t pattern;
    bool fail, is_bool;
    size_t elsize;
} write_ctx;

/* Fills the bytes with a pattern (bool: 0 or 1 only), or fails. */
static tn_status fill(void *data, int64_t numel, void *ctx) {
    const write_ctx *w = ctx;
    if (w->fail) return tn_set_error(TN_ERR_IO, "the fuzzer's write failed on purpose");
    memset(data, w->is_bool ? (w->pattern >> 1) & 1 : w->pattern, (size_t)numel * w->elsize);
    return TN_OK;
}

/* tn_write_inplace: slot, fail?. A refused call (NULL, not contiguous)
 * changes nothing; an accepted one moves the version by exactly one, also
 * when fn fails. */
void tf_op_write_inplace(tf_state *s) {
    tn_tensor *t = tf_in(s);
    uint8_t b = tf_byte(s);
    write_ctx w = {b, (b & 1) != 0, t && tn_dtype_of(t) == TN_BOOL,
                   t ? tn_dtype_size(tn_dtype_of(t)) : 0};
    tf_snap sn;
    if (t) tf_snap_take(&sn, t);
    int64_t before = t ? tn_version(t) : 0;
    bool contiguous = t && tn_is_contiguous(t);
    tn_status st = tn_write_inplace(t, "fuzz_write_", fill, &w);
    if (!contiguous) {
        if (st >= 0) tf_fail("tn_write_inplace accepted a %s tensor", t ? "non-contiguous" : "NULL");
        if (t) tf_snap_check(&sn, st, "tn_write_inplace");
        else tf_check_status(st, "tn_write_inplace");
        return;
    }
    tf_check_status(st, "tn_write_inplace");
    if ((st < 0) != w.fail) tf_fail("tn_write_inplace returned %d for fn's %d", st, w.fail);
    if (tn_version(t) != before + 1)
        tf_fail("tn_write_inplace moved the version from %lld to %lld", (long long)before,
                (long long)tn_version(t));
}

/* tn_sampler_indices: n, world, rank, seed, epoch, flags. Every index of a
 * share is in [0, n), and the count is what a NULL out said. */
void tf_op_sampler(tf_state *s) {
    int64_t n = tf_index(s), epoch = tf_index(s);
    int world = (int)(int8_t)tf_byte(s), rank = (int)(int8_t)tf_byte(s);
    uint8_t f = tf_byte(s);
    uint64_t seed = tf_byte(s);
    if (n > 4096) n %= 4096; /* the shuffle allocates n indices; a negative n is refused */
    int64_t count = tn_sampler_indices(n, world, rank, seed, epoch, f & 1, f & 2, NULL);
    if (count < 0) {
        tf_check_failed("tn_sampler_indices");
        return;
    }
    int64_t out[512];
    if (count > 512) return;
    int64_t again = tn_sampler_indices(n, world, rank, seed, epoch, f & 1, f & 2, out);
    if (again < 0) { /* the shuffle's n indices: an injected allocation failure */
        tf_check_failed("tn_sampler_indices");
        if (tn_last_status() != TN_ERR_OUT_OF_MEMORY)
            tf_fail("tn_sampler_indices failed on a second call: %s", tn_last_error());
        return;
    }
    if (again != count) tf_fail("tn_sampler_indices: the count changed between calls");
    for (int64_t i = 0; i < count; i++)
        if (out[i] < 0 || out[i] >= n)
            tf_fail("tn_sampler_indices: index %lld outside [0, %lld)", (long long)out[i],
                    (long long)n);
}
