/* tests/ops/op_table.c — the table: every family's rows in one list, and lookup by name. */
#include <string.h>

#include "op_table.h"

#define MAX_ROWS 256

static const struct {
    const tt_op *rows;
    const int *n;
} families[] = {
    {tt_rows_pointwise, &tt_nrows_pointwise},
    {tt_rows_reduce, &tt_nrows_reduce},
    {tt_rows_nn, &tt_nrows_nn},
    {tt_rows_loss, &tt_nrows_loss},
    {tt_rows_conv, &tt_nrows_conv},
    {tt_rows_pool, &tt_nrows_pool},
    {tt_rows_norm, &tt_nrows_norm},
    {tt_rows_view, &tt_nrows_view},
    {tt_rows_split, &tt_nrows_split},
    {tt_rows_index, &tt_nrows_index},
    {tt_rows_inplace, &tt_nrows_inplace},
};

const tt_op *const *tt_ops(int *n) {
    /* filled on the first call (the users call it from one thread) */
    static const tt_op *list[MAX_ROWS];
    static int count;
    if (!count) {
        int k = 0;
        for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
            for (int i = 0; i < *families[f].n && k < MAX_ROWS; i++)
                list[k++] = &families[f].rows[i];
        count = k;
    }
    *n = count;
    return list;
}

const tt_op *tt_op_find(const char *name) {
    int n;
    const tt_op *const *ops = tt_ops(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i]->name, name)) return ops[i];
    return NULL;
}

tn_tensor *tt_scoped(tt_call_fn body, tn_tensor *const *in, const double *p) {
    if (tn_scope_begin() != TN_OK) return NULL;
    tn_tensor *r = body(in, p);
    if (r) r = tn_keep(r);
    tn_scope_end();
    return r;
}
