/* fuzz/op_table.c — the "table" opcode: any row of the op table (tests/ops/op_table.h), called
 * through its adapter on fuzzed slots, so a new row is fuzzed with no edit here.
 * Operands: row, parameter set, TT_MAX_IN slots (the row takes the first of them, as many as it
 * has inputs: a fixed length, so the bytes after it mean the same whichever row a byte picks),
 * dst.
 * The row is `byte % rows`: adding a row changes which row a saved byte picks (the input still
 * replays; it tests another row). The parameter set is one of the row's, valid by construction:
 * hostile parameters are the specialised opcodes' business; the tensors are fuzzed. */
#include "program.h"

#include "../tests/ops/op_table.h"

/* The bound below is 64 times the product of the inputs' sizes: a row runs when that product
 * is at most 2^20 (a million elements made at worst, milliseconds). */
#define TF_TABLE_MADE (64u << 20)

void tf_op_table(tf_state *s) {
    int n;
    const tt_op *const *ops = tt_ops(&n);
    const tt_op *op = ops[tf_byte(s) % n];
    const tt_case *c = &op->cases[tf_byte(s) % op->ncases];
    tn_tensor *in[TT_MAX_IN] = {0};
    for (int i = 0; i < TT_MAX_IN; i++)
        in[i] = tf_in(s);
    uint8_t dst = tf_dst(s);
    /* No row makes more than the product of its inputs' sizes (broadcasts, products, gathers),
     * their sum (cat, stack) or a parameter set's own small shape (expand): an upper bound, not
     * the lower bound of tf_affordable's "sure to be refused", so the row runs only when the
     * inputs are within the budget and that bound within TF_TABLE_MADE. */
    uint64_t made = 64, read = 0;
    for (int i = 0; i < op->arity; i++) {
        if (!in[i]) return; /* adapters take tensors; NULL is the other opcodes' test */
        uint64_t k = tf_numel(in[i]);
        read += k;
        made = tf_mul_sat(made, k ? k : 1);
    }
    if (read > TF_BUDGET || made > TF_TABLE_MADE) return;
    tf_put(s, dst, op->call(in, c->p));
}
