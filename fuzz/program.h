/* fuzz/program.h — the interpreter behind the fuzz harness.
 *
 * An input is a program over TF_SLOTS tensor slots: a sequence of
 * instructions, each an opcode byte followed by the operand bytes its op
 * reads (fuzz/README.md has the format). Every byte string is a program:
 * operand reads past the end give 0, and opcodes without an op are skipped.
 *
 * Each slot owns one reference (NULL when empty: ops then get NULL, which
 * the library must refuse). Results are stored into a destination slot,
 * whose old tensor is released; a result made inside an open scope is
 * retained, so the slot's reference is its own and the scope's is released
 * by tn_scope_end.
 *
 * The interpreter checks the error contract on the way (a failing call sets
 * a status and a message; a failed in-place call leaves its target as it
 * was) and calls tf_fail on a breach. Ops whose work would be large but not
 * refused are skipped, so that an input stays fast (see tf_affordable).
 */
#ifndef TF_PROGRAM_H
#define TF_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tenet.h>

#define TF_SLOTS 16
/* Elements an op may read or make; above it an op runs only when its output
 * is too big to be allocated at all (a refusal is cheap). */
#define TF_BUDGET 4096
/* The longest shape or dims list an op is given: ndim operands may exceed
 * TN_MAX_DIMS (the library must refuse them without reading past 8). */
#define TF_LIST 16
/* Differentiations with create_graph one program may run; beyond, they run
 * without it. Each one can multiply the size of a graph that is fed back into
 * the next (x.grad's history grows with every accumulation), so an unbounded
 * count lets a short input build a graph of millions of nodes: honest work
 * the library must do, but not a finding, and a timeout to libFuzzer. */
#define TF_HIGHER_ORDER 4
/* Hook handles a program may hold at once. */
#define TF_HOOKS 4

/* Sanitized builds cap one allocation at TF_MAX_ALLOC_MB (fuzz/harness.c
 * tells the sanitizer), so a request beyond is refused cheaply on any
 * machine, below the fuzzer's malloc limit (scripts/fuzz). */
#if defined(__SANITIZE_ADDRESS__)
#define TF_MAX_ALLOC_MB 256
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TF_MAX_ALLOC_MB 256
#endif
#endif

typedef struct tf_state {
    const uint8_t *p, *end;
    tn_tensor *slot[TF_SLOTS];
    int depth;  /* scopes this program opened and has not closed */
    int higher_order; /* create_graph differentiations run so far */
    tn_hook *hooks[TF_HOOKS]; /* hook handles (fuzz/op_graph.c) */
    FILE *sink; /* /dev/null: prints, reports, DOT */
} tf_state;

/* Runs one program, then releases every slot and closes its scopes. */
void tf_run(const uint8_t *data, size_t size, FILE *sink);


/* Reports a breach of the library's contract on tf_report (stderr when
 * NULL) and stops (a finding). */
extern FILE *tf_report;
_Noreturn void tf_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- operands (fuzz/operands.c) ------------------------------------------ */
uint8_t tf_byte(tf_state *s);
bool tf_bool(tf_state *s);
/* A slot's tensor (borrowed, may be NULL) / a slot index. */
tn_tensor *tf_in(tf_state *s);
int tf_slot(tf_state *s);
/* Dtypes: the eight, TN_DTYPE_SAME, and an invalid value. */
tn_dtype tf_dtype(tf_state *s);
/* A dtype among the eight valid ones. */
tn_dtype tf_valid_dtype(tf_state *s);
/* ndim: mostly 0..4, sometimes negative or beyond TN_MAX_DIMS. */
int tf_ndim(tf_state *s);
/* Sizes: mostly 0..5, sometimes hostile (negative, 2^62, INT64_MAX, ...). */
int64_t tf_size(tf_state *s);
/* Fills shape[0..min(ndim, TF_LIST)) with sizes; the rest with 1. */
void tf_shape(tf_state *s, int ndim, int64_t shape[TF_LIST]);
/* A count of list entries: 0..max below 0xF0, else -1 or INT_MIN. */
int tf_small_count(tf_state *s, int max);
/* Dims: mostly -4..4, sometimes far out of range. */
int tf_dim(tf_state *s);
/* Indices and lengths: mostly -4..4, sometimes hostile. */
int64_t tf_index(tf_state *s);
/* Scalars: small values, fractions, NaN, ±Inf, beyond float32/int64. */
double tf_scalar(tf_state *s);
/* A device: the CPU mostly, else CUDA devices that do not exist, bad types. */
tn_device tf_device(tf_state *s);

/* ---- results and checks (fuzz/program.c) ---------------------------------- */
/* A destination operand: ops read it with their other operands, before
 * deciding to run, so that a skipped op reads the same bytes. */
uint8_t tf_dst(tf_state *s);
/* Stores a new reference t (NULL: the call failed, checked) into the slot
 * dst names; its high bits may ask to drop the result instead (released at
 * once, or left to the open scope), as in nested expressions. */
void tf_put(tf_state *s, uint8_t dst, tn_tensor *t);
/* Done with t, a tensor an op made for itself: released, unless a scope is open, which owns
 * it (a caller must not release what a scope owns, docs/api.md section 2). */
void tf_drop(const tf_state *s, tn_tensor *t);
/* After a call that returned NULL: it must have set status and message. */
void tf_check_failed(const char *what);
/* After a status-returning call: a failure must have set status and message. */
void tf_check_status(tn_status st, const char *what);
/* A tensor's version and values before an in-place call: a failed call must
 * leave both as they were. Values only for tensors of up to TF_SNAP
 * elements. */
#define TF_SNAP 64
typedef struct tf_snap {
    const tn_tensor *t;
    int64_t version;
    bool has_values;
    double v[TF_SNAP];
} tf_snap;
void tf_snap_take(tf_snap *sn, const tn_tensor *t);
/* tf_check_status, then on failure compares each of the n snapshots. The status is checked
 * once, first: reading a snapshot's tensor back may itself fail (an injected allocation
 * failure) and replace the call's error. */
void tf_snaps_check(const tf_snap *sn, int n, tn_status st, const char *what);
static inline void tf_snap_check(const tf_snap *sn, tn_status st, const char *what) {
    tf_snaps_check(sn, 1, st, what);
}
/* Element count of a shape, saturated at UINT64_MAX (negative sizes: 0, the
 * library must refuse them before any work). */
uint64_t tf_numel_of(int ndim, const int64_t *shape);
uint64_t tf_numel(const tn_tensor *t);
/* Elements of a reduction's output along dim, saturated: every other dim's
 * size (an empty input may have a huge one: [0, 65536, 4, ...] summed over
 * dim 0 makes 2^26 zeros). 1 when dim is out of range (refused before any
 * work). */
uint64_t tf_reduced_numel(const tn_tensor *a, int dim);
/* Whether an op reading `read` elements and making `made` is cheap enough,
 * or sure to be refused for its size: `made` must then be a lower bound of
 * what the op allocates before it reads. */
bool tf_affordable(uint64_t made, uint64_t read);
/* Saturating product. */
uint64_t tf_mul_sat(uint64_t a, uint64_t b);

/* ---- ops (fuzz/op_*.c), in the opcode table of program.c ------------------- */
typedef void (*tf_op)(tf_state *s);
/* op_tensor.c: creation, conversion, metadata */
void tf_op_create(tf_state *s);
void tf_op_tensor_from(tf_state *s);
void tf_op_arange(tf_state *s);
void tf_op_convert(tf_state *s);
void tf_op_fail_alloc(tf_state *s);
void tf_op_inspect(tf_state *s);
/* op_compute.c: pointwise, reductions, matmul, nn */
void tf_op_binary(tf_state *s);
void tf_op_compare(tf_state *s);
void tf_op_scalar(tf_state *s);
void tf_op_unary(tf_state *s);
void tf_op_out(tf_state *s);
void tf_op_reduce(tf_state *s);
void tf_op_reduce_dim(tf_state *s);
void tf_op_matmul(tf_state *s);
void tf_op_nn(tf_state *s);
/* op_view.c: views, cat, stack */
void tf_op_view(tf_state *s);
void tf_op_transpose(tf_state *s);
void tf_op_permute(tf_state *s);
void tf_op_narrow(tf_state *s);
void tf_op_select(tf_state *s);
void tf_op_expand(tf_state *s);
void tf_op_squeeze(tf_state *s);
void tf_op_flatten(tf_state *s);
void tf_op_contiguous(tf_state *s);
void tf_op_join(tf_state *s);
/* op_autograd.c: in place, aliases, backward, grads, modes, scopes, optimisers */
void tf_op_inplace(tf_state *s);
void tf_op_inplace_scalar(tf_state *s);
void tf_op_alias(tf_state *s);
void tf_op_requires_grad(tf_state *s);
void tf_op_backward(tf_state *s);
void tf_op_autograd_grad(tf_state *s);
void tf_op_grad(tf_state *s);
void tf_op_grad_mode(tf_state *s);
void tf_op_anomaly(tf_state *s);
void tf_op_scope(tf_state *s);
void tf_op_optim(tf_state *s);
void tf_op_clip(tf_state *s);
void tf_op_runtime(tf_state *s);
void tf_op_slots(tf_state *s);
/* op_graph.c: several roots, allow_unused, introspection, hooks */
void tf_op_backward_multi(tf_state *s);
void tf_op_grad_unused(tf_state *s);
void tf_op_graph_walk(tf_state *s);
void tf_op_hook(tf_state *s);
/* op_io.c: safetensors files from the program's bytes, slots saved and loaded; IDX files */
void tf_op_safetensors_load(tf_state *s);
void tf_op_safetensors_save(tf_state *s);
void tf_op_idx_load(tf_state *s);
/* op_index.c: embedding, index_select, gather, scatter_add, where, masked_fill(_), tril, triu */
void tf_op_index(tf_state *s);
void tf_op_mask(tf_state *s);
/* op_norm.c: layer_norm, gelu, silu, dropout, logsumexp, var, std */
void tf_op_norm(tf_state *s);
/* op_norm.c: batch_norm, group_norm */
void tf_op_channel_norm(tf_state *s);
/* op_compute.c: scaled_dot_product_attention */
void tf_op_attention(tf_state *s);
void tf_op_profile(tf_state *s);
void tf_op_write_inplace(tf_state *s);
void tf_op_sampler(tf_state *s);
/* op_table.c: any row of the op table (tests/ops/) */
void tf_op_table(tf_state *s);

#endif
