/* fuzz/program.c — the interpreter loop, result slots, the error-contract
 * checks and the work budget. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "program.h"
#include <tenet/testing.h>

/* The opcode is a byte modulo TF_OPCODES; codes without an op are skipped.
 * Append new ops only, so that saved inputs keep their meaning. */
#define TF_OPCODES 64
static const struct {
    const char *name; /* in traces */
    tf_op run;
} opcodes[TF_OPCODES] = {
    {"create", tf_op_create},
    {"tensor_from", tf_op_tensor_from},
    {"arange", tf_op_arange},
    {"convert", tf_op_convert},
    {"fail_alloc", tf_op_fail_alloc},
    {"inspect", tf_op_inspect},
    {"binary", tf_op_binary},
    {"compare", tf_op_compare},
    {"scalar", tf_op_scalar},
    {"unary", tf_op_unary},
    {"out", tf_op_out},
    {"reduce", tf_op_reduce},
    {"reduce_dim", tf_op_reduce_dim},
    {"matmul", tf_op_matmul},
    {"nn", tf_op_nn},
    {"view", tf_op_view},
    {"transpose", tf_op_transpose},
    {"permute", tf_op_permute},
    {"narrow", tf_op_narrow},
    {"select", tf_op_select},
    {"expand", tf_op_expand},
    {"squeeze", tf_op_squeeze},
    {"flatten", tf_op_flatten},
    {"contiguous", tf_op_contiguous},
    {"join", tf_op_join},
    {"inplace", tf_op_inplace},
    {"inplace_scalar", tf_op_inplace_scalar},
    {"alias", tf_op_alias},
    {"requires_grad", tf_op_requires_grad},
    {"backward", tf_op_backward},
    {"autograd_grad", tf_op_autograd_grad},
    {"grad", tf_op_grad},
    {"grad_mode", tf_op_grad_mode},
    {"anomaly", tf_op_anomaly},
    {"scope", tf_op_scope},
    {"optim", tf_op_optim},
    {"runtime", tf_op_runtime},
    {"slots", tf_op_slots},
    {"backward_multi", tf_op_backward_multi},
    {"grad_unused", tf_op_grad_unused},
    {"graph_walk", tf_op_graph_walk},
    {"hook", tf_op_hook},
    {"safetensors_load", tf_op_safetensors_load},
    {"safetensors_save", tf_op_safetensors_save},
    {"index", tf_op_index},
    {"mask", tf_op_mask},
    {"norm", tf_op_norm},
    {"attention", tf_op_attention},
    {"profile", tf_op_profile},
    {"write_inplace", tf_op_write_inplace},
    {"sampler", tf_op_sampler},
    {"clip", tf_op_clip},
    {"table", tf_op_table},
    {"channel_norm", tf_op_channel_norm},
    {"idx_load", tf_op_idx_load},
};

FILE *tf_report;

_Noreturn void tf_fail(const char *fmt, ...) {
    FILE *f = tf_report ? tf_report : stderr;
    va_list ap;
    va_start(ap, fmt);
    fputs("tenet-fuzz: finding: ", f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
    va_end(ap);
    __builtin_trap();
}

/* ---- results and the error contract ---------------------------------------- */

void tf_check_failed(const char *what) {
    if (tn_last_status() >= 0 || !tn_last_error() || !*tn_last_error())
        tf_fail("%s failed without an error status and message (status %d)", what,
                (int)tn_last_status());
}

void tf_check_status(tn_status st, const char *what) {
    if (st > 0) tf_fail("%s returned the positive status %d", what, (int)st);
    if (st < 0) {
        tf_check_failed(what);
        if (tn_last_status() != st)
            tf_fail("%s returned %d but tn_last_status() is %d", what, (int)st,
                    (int)tn_last_status());
    }
}

uint8_t tf_dst(tf_state *s) { return tf_byte(s); }

void tf_drop(const tf_state *s, tn_tensor *t) {
    if (!s->depth) tn_release(t);
}

void tf_put(tf_state *s, uint8_t b, tn_tensor *t) {
    if (!t) {
        tf_check_failed("a call returning a tensor");
        return;
    }
    /* A small result is read at once: a view whose geometry leaves its
     * storage is a sanitizer report here, next to the call that made it. */
    double v[TF_SNAP];
    if (tf_numel(t) <= TF_SNAP) (void)tn_copy_to_f64(t, v, TF_SNAP);
    if ((b >> 4) % 4 == 3) { /* dropped, as an intermediate of a nested expression */
        tf_drop(s, t);
        return;
    }
    if (s->depth) tn_retain(t); /* the scope keeps its own reference */
    int i = b % TF_SLOTS;
    tn_tensor *old = s->slot[i];
    s->slot[i] = t;
    tn_release(old);
}

void tf_snap_take(tf_snap *sn, const tn_tensor *t) {
    sn->t = t;
    sn->version = t ? tn_version(t) : -1;
    uint64_t n = tf_numel(t);
    sn->has_values = t && n <= TF_SNAP && tn_copy_to_f64(t, sn->v, TF_SNAP) == TN_OK;
    tn_clear_error();
}

static void snap_compare(const tf_snap *sn, const char *what) {
    if (!sn->t) return;
    if (tn_version(sn->t) != sn->version)
        tf_fail("failed %s moved the version from %lld to %lld", what, (long long)sn->version,
                (long long)tn_version(sn->t));
    double now[TF_SNAP]; /* an injected allocation failure may refuse the copy: no check */
    if (sn->has_values && tn_copy_to_f64(sn->t, now, TF_SNAP) == TN_OK &&
        memcmp(now, sn->v, (size_t)tf_numel(sn->t) * sizeof *now) != 0)
        tf_fail("failed %s changed its target's values", what);
}

void tf_snaps_check(const tf_snap *sn, int n, tn_status st, const char *what) {
    tf_check_status(st, what);
    for (int i = 0; i < n && st < 0; i++)
        snap_compare(&sn[i], what);
}

/* ---- the work budget ----------------------------------------------------------- */

uint64_t tf_mul_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t tf_numel_of(int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TN_MAX_DIMS) return 0;
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return 0;
        n = tf_mul_sat(n, (uint64_t)shape[i]);
    }
    return n;
}

uint64_t tf_numel(const tn_tensor *t) { return t ? tf_numel_of(tn_ndim(t), tn_shape(t)) : 0; }

uint64_t tf_reduced_numel(const tn_tensor *a, int dim) {
    int nd = a ? tn_ndim(a) : 0;
    if (nd == 0 || dim < -nd || dim >= nd) return 1;
    if (dim < 0) dim += nd;
    uint64_t n = 1;
    for (int i = 0; i < nd; i++)
        if (i != dim) n = tf_mul_sat(n, (uint64_t)tn_shape(a)[i]);
    return n;
}

/* Elements beyond which an allocation is refused whatever the dtype (one
 * byte each): the sanitizer's cap on one allocation in sanitized builds
 * (fuzz/harness.c sets it), else the library's own limit, the machine's
 * memory and swap (engine/core/alloc.c). */
static uint64_t refused_elements(void) {
#ifdef TF_MAX_ALLOC_MB
    return ((uint64_t)TF_MAX_ALLOC_MB << 20) + 1;
#else
    struct sysinfo si;
    if (sysinfo(&si) != 0) return UINT64_MAX;
    uint64_t total = (uint64_t)si.totalram + (uint64_t)si.totalswap;
    return tf_mul_sat(total, si.mem_unit ? si.mem_unit : 1) + 1;
#endif
}

bool tf_affordable(uint64_t made, uint64_t read) {
    static uint64_t refused;
    if (!refused) refused = refused_elements();
    return (made <= TF_BUDGET && read <= TF_BUDGET) || made >= refused;
}

/* ---- the loop ---------------------------------------------------------------------- */

/* Process-wide and per-thread modes back to their defaults, so that an
 * input's run does not depend on the inputs before it. */
static void reset_modes(void) {
    tn_test_fail_alloc_at(0);
    if (tn_profile_enabled()) tn_profile_end(NULL);
    tn_set_grad_enabled(true);
    tn_set_detect_anomaly(false, false);
    tn_set_detect_anomaly_local(-1);
    tn_set_anomaly_untracked_error(false);
    tn_anomaly_clear();
    tn_set_parallel_backward(false);
    tn_set_detect_races(false);
    tn_race_reports_reset();
    tn_set_blas(true);
    tn_set_num_threads(1);
    tn_manual_seed(0);
    tn_clear_error();
}

/* TENET_FUZZ_TRACE=1: each instruction, its operand bytes, its error and
 * the slots after it, on stderr (fuzz/README.md: reading a finding). */
static void trace(const tf_state *s, int code, const uint8_t *from) {
    fprintf(stderr, "%-14s", opcodes[code].name);
    for (const uint8_t *q = from; q < s->p; q++)
        fprintf(stderr, " %02x", *q);
    if (tn_last_status() < 0) fprintf(stderr, "  -> %s", tn_last_error());
    fputc('\n', stderr);
    for (int i = 0; i < TF_SLOTS; i++) {
        tn_tensor *t = s->slot[i];
        if (!t) continue;
        char shape[160] = "";
        size_t used = 0;
        for (int d = 0; d < tn_ndim(t) && used < sizeof shape; d++)
            used += (size_t)snprintf(shape + used, sizeof shape - used, d ? ", %lld" : "%lld",
                                     (long long)tn_shape(t)[d]);
        fprintf(stderr, "    [%2d] %p %s [%s]%s%s%s v%lld\n", i, (void *)t,
                tn_dtype_name(tn_dtype_of(t)), shape, tn_requires_grad(t) ? " rg" : "",
                tn_grad_fn_name(t) ? " " : "", tn_grad_fn_name(t) ? tn_grad_fn_name(t) : "",
                (long long)tn_version(t));
    }
}

void tf_run(const uint8_t *data, size_t size, FILE *sink) {
    static int tracing = -1;
    if (tracing < 0) tracing = getenv("TENET_FUZZ_TRACE") && *getenv("TENET_FUZZ_TRACE") == '1';
    tf_state s = {.p = data, .end = data + size, .sink = sink};
    reset_modes();
    while (s.p < s.end) {
        const uint8_t *from = s.p;
        int code = tf_byte(&s) % TF_OPCODES;
        tn_clear_error();
        if (!opcodes[code].run) continue;
        opcodes[code].run(&s);
        if (tracing) trace(&s, code, from);
    }
    for (int i = 0; i < TF_HOOKS; i++)
        tn_hook_release(s.hooks[i]);
    for (int i = 0; i < TF_SLOTS; i++)
        tn_release(s.slot[i]);
    for (; s.depth > 0; s.depth--)
        tn_scope_end();
    reset_modes();
}
