/* tests/ops/op_table.h — the op table: one row per public op of include/tenet/ops.h.
 *
 * A row says what the op is (its C name, PyTorch's name, its tensor inputs and which of them are
 * differentiable), where it runs (the dtypes and back ends it supports), what it is given (the
 * input domains and the parameter sets, each with its shapes) and how to check it (a call adapter
 * that runs the op on tensors, and a reference that computes the expected values with naive
 * loops over plain double arrays, independent of every kernel). Rows are plain data, one array
 * per op family (tests/ops/rows_*.c); tt_ops() lists them all.
 *
 * Users: tests/test_ops.c runs every row on every dtype and back end against its reference,
 * checks gradients by finite differences, non-contiguous, empty and 0-D inputs; the fuzzer's
 * "table" opcode (fuzz/op_table.c) calls a row's adapter on fuzzed slots; tests/ops/op_names.txt
 * (written by `test_ops --write-names`) lists the rows with their gen_golden.py ops, which
 * scripts/gen_golden.py checks its cases against.
 *
 * Adding an op: docs/design.md, "How to add an op".
 */
#ifndef TT_OP_TABLE_H
#define TT_OP_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include <tenet.h>

#define TT_MAX_IN 4  /* tensor inputs of one op */
#define TT_MAX_P 6   /* scalar parameters of one parameter set */
#define TT_MAX_DIM 4 /* dims of one input shape in a parameter set */

/* Values an input is given (tests/test_ops.c: smooth, RNG-free formulas, those of
 * scripts/gen_golden.py; integer dtypes get them rounded). */
typedef enum tt_domain {
    TT_ANY = 0, /* in [-2, 2] */
    TT_POS,     /* in [0.25, 2.25]: log, sqrt, pow bases */
    TT_AWAY,    /* |v| in [0.5, 1.5]: divisors */
    TT_SMALL,   /* in [-1.5, 1.5]: exp, softmax */
    TT_INDEX,   /* int64 in [0, the case's index_max): embedding, gather, ... */
    TT_MASK,    /* bool, a fixed pattern with both values */
    TT_TARGET,  /* int64 class indices in [0, the case's index_max) */
} tt_domain;

/* Back ends (bits of tt_op.backends). */
enum { TT_CPU = 1u << 0, TT_CUDA = 1u << 1, TT_ALL_BACKENDS = TT_CPU | TT_CUDA };

/* Dtype bits (tt_op.dtypes): 1u << tn_dtype. */
#define TT_DT(d) (1u << (d))
#define TT_HALVES (TT_DT(TN_BF16) | TT_DT(TN_F16))
#define TT_FLOATS (TT_DT(TN_F32) | TT_DT(TN_F64) | TT_HALVES)
#define TT_INTS (TT_DT(TN_I16) | TT_DT(TN_I32) | TT_DT(TN_I64))
#define TT_NUMERIC (TT_FLOATS | TT_INTS)

/* Row flags. */
enum {
    TT_NO_GRAD = 1u << 0,         /* the output never requires grad (comparisons, argmax, out=) */
    TT_CONTIGUOUS_ONLY = 1u << 1, /* refuses other layouts by contract (view): contiguous only */
};

/* One parameter set: the shapes of the op's inputs and its scalar parameters (what each means is
 * the row's adapter's comment). */
typedef struct tt_case {
    const char *tag;
    int ndim[TT_MAX_IN];
    int64_t shape[TT_MAX_IN][TT_MAX_DIM];
    double p[TT_MAX_P];
    int64_t index_max; /* TT_INDEX / TT_TARGET inputs lie in [0, index_max) */
} tt_case;

/* The reference's view of one call: inputs as row-major doubles with their shapes; it writes
 * the output's shape and values (out has room for out_cap values). */
typedef struct tt_ref_io {
    const struct tt_op *op;
    const double *p;
    int nin;
    const double *x[TT_MAX_IN];
    int ndim[TT_MAX_IN];
    const int64_t *shape[TT_MAX_IN];
    double *out;
    int64_t out_cap;
    int out_ndim;
    int64_t out_shape[TN_MAX_DIMS];
} tt_ref_io;

/* Runs the op on in[0..arity) with the parameters p; returns a new reference (NULL + the
 * library's error on failure), which an open scope owns as any op's result. An adapter that
 * makes tensors of its own runs in tt_scoped, which releases them; adapters never abort and take
 * any tensors: the fuzzer calls them on fuzzed slots (never NULL ones). */
typedef tn_tensor *(*tt_call_fn)(tn_tensor *const *in, const double *p);
/* Fills io's output; false when the inputs do not fit (then the op must refuse them too). */
typedef bool (*tt_ref_fn)(tt_ref_io *io);
/* A pointwise op's value at x (and y), for the generic pointwise references. */
typedef double (*tt_scalar_fn)(double x, double y, const double *p);

typedef struct tt_op {
    const char *name;  /* the C function is tn_<name> */
    const char *torch; /* PyTorch's name */
    int arity;         /* tensor inputs */
    unsigned diff;     /* bit i: input i is differentiable (checked by finite differences) */
    unsigned dtypes;   /* TT_DT bits: the dtypes of the value inputs */
    unsigned backends; /* TT_CPU | TT_CUDA */
    tt_domain domain[TT_MAX_IN];
    const tt_case *cases;
    int ncases;
    tt_call_fn call;
    tt_ref_fn ref;
    tt_scalar_fn f;        /* for the pointwise references (tt_ref_map1/2), else NULL */
    const char *golden;    /* its ops in scripts/gen_golden.py (space separated), or NULL */
    const char *no_golden; /* why there are none, when golden is NULL */
    double tol;            /* multiplies the float32 tolerance (0: 1) */
    unsigned flags;
} tt_op;

#define TT_CASES(a) .cases = (a), .ncases = (int)(sizeof(a) / sizeof((a)[0]))

/* Every row, in table order; *n receives the count. */
const tt_op *const *tt_ops(int *n);
/* The row named name, or NULL. */
const tt_op *tt_op_find(const char *name);

/* Runs body(in, p) in a scope of its own: what it makes is released at the scope's end, its
 * result kept (moved to the caller's scope, or handed to the caller when none is open). */
tn_tensor *tt_scoped(tt_call_fn body, tn_tensor *const *in, const double *p);

/* The family arrays (tests/ops/rows_*.c). */
extern const tt_op tt_rows_pointwise[], tt_rows_reduce[], tt_rows_nn[], tt_rows_view[],
    tt_rows_index[], tt_rows_inplace[], tt_rows_conv[], tt_rows_pool[], tt_rows_norm[],
    tt_rows_split[], tt_rows_loss[];
extern const int tt_nrows_pointwise, tt_nrows_reduce, tt_nrows_nn, tt_nrows_view, tt_nrows_index,
    tt_nrows_inplace, tt_nrows_conv, tt_nrows_pool, tt_nrows_norm, tt_nrows_split, tt_nrows_loss;

/* ---- reference helpers (tests/ops/ref.c) ------------------------------------------------- */
int64_t tt_numel(int ndim, const int64_t *shape);
/* Broadcasts the shapes of io's first n inputs into io's output shape; false when they do not
 * broadcast or the output does not fit. */
bool tt_ref_broadcast(tt_ref_io *io, int n);
/* Offset in input k (row-major, broadcast) of output element j. */
int64_t tt_ref_bcast_at(const tt_ref_io *io, int k, int64_t j);
/* Pointwise references over broadcast inputs: out = op->f(x0, 0, p) / op->f(x0, x1, p). */
bool tt_ref_map1(tt_ref_io *io);
bool tt_ref_map2(tt_ref_io *io);
/* Normalises dim against ndim (negative counts from the end); false when out of range. */
bool tt_ref_dim(int *dim, int ndim);
/* Sets the output shape to input 0's shape with dim removed (or kept as 1); returns
 * outer/len/inner sizes for slices along dim. */
bool tt_ref_reduce_shape(tt_ref_io *io, int dim, bool keepdim, int64_t *outer, int64_t *len,
                         int64_t *inner);
/* Sets the output shape to ndim/shape (false when it does not fit out_cap). */
bool tt_ref_set_shape(tt_ref_io *io, int ndim, const int64_t *shape);

#endif
