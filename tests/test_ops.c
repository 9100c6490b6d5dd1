/* tests/test_ops.c — every op of the op table (tests/ops/) on every dtype and back end.
 *
 * For each row, parameter set, dtype of the row and back end (CUDA when a device is there,
 * scripts/run-cuda-emu runs this test against the emulator), and each input layout (contiguous,
 * transposed: the last two dims of a contiguous tensor swapped, strided: every other element of
 * a wider tensor), the op's values are checked against the row's reference (naive loops over
 * doubles, on the values the inputs actually hold), CUDA's also against the CPU's. Tolerances
 * (|got - want| <= tol * (1 + |want|)):
 *   float64  1e-9    (transcendentals of two libraries, sums in other orders)
 *   float32  2e-5 x the row's tol factor (float32 rounding of each step, ~2^-23 per op; a
 *            row with long reductions or many steps widens it, e.g. layer_norm, attention)
 *   integers and bool: exact.
 * In float64 the gradient of L = sum(out * w) (w fixed) with respect to every differentiable
 * input is checked against central differences (L(x + e) - L(x - e)) / 2e, e = 1e-6, within
 * 1e-5 (1 + |g|), on every back end and layout; in float32 against float64's gradient on the
 * CPU, within ten times the float32 tolerance. Parameter sets include 0-D and empty inputs
 * where the op allows them.
 *
 * Besides the rows: every op declared in include/tenet/ops.h has a row (or is on `exempt`
 * below), tests/ops/op_names.txt matches the table (`test_ops --write-names FILE` rewrites it),
 * and every row's golden ops have committed cases in tests/golden/.
 *
 * TEST_OPS=name[,name...] runs those rows only.
 */
#include "util.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_table.h"

#define MAX_EL 512 /* elements of one input or output */
#define FD_EPS 1e-6
#define FD_TOL 1e-5

enum { L_CONTIG, L_TRANSPOSED, L_STRIDED, L_COUNT };
static const char *const layout_names[L_COUNT] = {"contiguous", "transposed", "strided"};

/* What was checked, for the summary. */
static struct { int combos, cases, grads, fails, row_fails; } tally;

/* ---- inputs ------------------------------------------------------------------------------- */

static bool is_half(tn_dtype dt) { return dt == TN_BF16 || dt == TN_F16; }
static bool is_float(tn_dtype dt) { return dt == TN_F32 || dt == TN_F64 || is_half(dt); }

/* The value of element i of input k: scripts/gen_golden.py's formulas, rounded for integers. */
static double input_value(tt_domain dom, int64_t i, int k, const tt_case *c, bool integer) {
    double s = sin(1.3 * (double)i + 0.7 * k + 0.1), v;
    switch (dom) {
    case TT_INDEX:
    case TT_TARGET:
        return (double)((i * 7 + i / 3 + k) % (c->index_max > 0 ? c->index_max : 1));
    case TT_MASK:
        return (i * 5 + 1 + k) % 3 != 0;
    case TT_POS:
        v = 1.25 + s;
        return integer ? fmax(1, round(v)) : v;
    case TT_AWAY:
        v = (0.5 + fabs(s)) * ((i + k) % 3 ? 1 : -1);
        return integer ? (v < 0 ? -1 : 1) * fmax(1, round(fabs(v))) : v;
    case TT_SMALL:
        v = 1.5 * s;
        return integer ? round(v) : v;
    default:
        v = 2.0 * s;
        return integer ? round(v) : v;
    }
}

static tn_dtype input_dtype(tt_domain dom, tn_dtype dt) {
    return dom == TT_MASK ? TN_BOOL : dom == TT_INDEX || dom == TT_TARGET ? TN_I64 : dt;
}

/* A tensor of logical shape (nd, shape) holding v (row-major), of dtype dt on dev, laid out as
 * asked (falls back to contiguous where the layout needs more dims), requiring grad when rg
 * (the leaf is the storage's tensor; the input is its view). Owned by the open scope. */
static tn_tensor *make_input(const double *v, int nd, const int64_t *shape, tn_dtype dt,
                             tn_device dev, int layout, bool rg) {
    int64_t n = tt_numel(nd, shape), bs[TN_MAX_DIMS + 1];
    double buf[2 * MAX_EL];
    int bnd = nd;
    memcpy(bs, shape, (size_t)nd * sizeof *bs);
    if (layout == L_TRANSPOSED && nd >= 2 && n > 0) { /* storage holds the transpose */
        int64_t r = shape[nd - 2], c = shape[nd - 1];
        bs[nd - 2] = c, bs[nd - 1] = r;
        for (int64_t j = 0; j < n; j++) {
            int64_t b = j / (r * c), i = j % (r * c) / c, k = j % c;
            buf[b * r * c + k * r + i] = v[j];
        }
    } else if (layout == L_STRIDED && nd >= 1 && n > 0) { /* [..., n, 2], element 0 of each pair */
        bs[nd] = 2, bnd = nd + 1;
        for (int64_t j = 0; j < n; j++)
            buf[2 * j] = v[j], buf[2 * j + 1] = 7.0 + (double)j;
    } else {
        layout = L_CONTIG;
        memcpy(buf, v, (size_t)n * sizeof *buf);
    }
    tn_tensor *h = tn_tensor_from(buf, TN_F64, bnd, bs, false);
    tn_tensor *t = tn_to(h, dt, dev);
    if (!t) return NULL;
    if (t == h) t = tn_new_tensor(h, TN_DTYPE_SAME, TN_DEVICE_KEEP, false); /* a leaf of its own */
    if (rg && tn_requires_grad_(t, true) != TN_OK) return NULL;
    if (layout == L_TRANSPOSED) return tn_transpose(t, nd - 2, nd - 1);
    if (layout == L_STRIDED) return tn_select(t, nd, 0);
    return t;
}

/* ---- one call ------------------------------------------------------------------------------ */

typedef struct run {
    const tt_op *op;
    const tt_case *c;
    tn_dtype dt;
    tn_device dev;
    int layout;
    double v[TT_MAX_IN][MAX_EL]; /* host values of the inputs, as the dtype holds them */
    tn_tensor *in[TT_MAX_IN];
} run;

static const char *dev_name(tn_device d) { return d.type == TN_CUDA ? "cuda" : "cpu"; }

/* Reports one failure of r (the op, dtype, back end, case and layout), a printf message. */
__attribute__((format(printf, 2, 3))) static void report(const run *r, const char *fmt, ...) {
    tally.fails++;
    if (++tally.row_fails > 12) return; /* the first few of a row say enough */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    print_error("test_ops: %s %s %s [case %s, %s]: %s\n", r->op->name, tn_dtype_name(r->dt),
                dev_name(r->dev), r->c->tag, layout_names[r->layout], msg);
}

static bool wants_grad(const run *r, int k) {
    return is_float(r->dt) && (r->op->diff >> k & 1) && !(r->op->flags & TT_NO_GRAD);
}

/* Makes r's inputs (values v perturbed by d at element j of input k when d != 0). */
static bool make_inputs(run *r, int layout, int k, int64_t j, double d) {
    for (int i = 0; i < r->op->arity; i++) {
        tt_domain dom = r->op->domain[i];
        double v[MAX_EL];
        int64_t n = tt_numel(r->c->ndim[i], r->c->shape[i]);
        memcpy(v, r->v[i], (size_t)n * sizeof *v);
        if (i == k && d != 0) v[j] += d;
        r->in[i] = make_input(v, r->c->ndim[i], r->c->shape[i], input_dtype(dom, r->dt), r->dev,
                              layout, wants_grad(r, i) && d == 0);
        if (!r->in[i]) return false;
    }
    return true;
}

/* Relative tolerances (with an absolute part: |got - want| <= tol (1 + |want|)), per output
 * dtype (docs/design.md, "The op table"): float64 1e-9; float32 2e-5 times the row's factor;
 * the halves about two units in their last place (bfloat16 2^-8 relative, float16 2^-11) for
 * an op computed in float32 and rounded once, times the row's factor up to 4 (an op made of
 * several rounded ops); integers and bool exact. */
static double tol_for(const run *r, tn_dtype out) {
    double f = r->op->tol > 0 ? r->op->tol : 1;
    if (out == TN_F64) return 1e-9;
    if (out == TN_F32) return 2e-5 * f;
    if (out == TN_BF16) return 8e-3 * fmin(f, 4);
    if (out == TN_F16) return 1e-3 * fmin(f, 4);
    return 0;
}

/* Compares got (n values) with want; false after reporting the first difference. */
static bool compare(const run *r, const char *what, const double *got, const double *want,
                    int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++) {
        bool both_nan = isnan(got[i]) && isnan(want[i]);
        if (both_nan || fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))) continue;
        if (isinf(want[i]) && got[i] == want[i]) continue;
        report(r, "%s: element %lld: got %.17g, expected %.17g (tol %.3g)", what, (long long)i,
               got[i], want[i], tol);
        return false;
    }
    return true;
}

/* The reference's output for r's inputs, read back as their dtype holds them (r->v too), into
 * io and want. */
static bool reference(run *r, tt_ref_io *io, double *want) {
    memset(io, 0, sizeof *io);
    io->op = r->op, io->p = r->c->p, io->nin = r->op->arity, io->out = want, io->out_cap = MAX_EL;
    for (int i = 0; i < r->op->arity; i++) {
        int64_t n = tn_numel(r->in[i]);
        if (tn_copy_to_f64(r->in[i], r->v[i], n) != TN_OK) return false;
        io->x[i] = r->v[i], io->ndim[i] = r->c->ndim[i], io->shape[i] = r->c->shape[i];
    }
    if (r->op->ref(io)) return true;
    report(r, "the reference refuses this case (a bad row)");
    return false;
}

/* The op's output as doubles into got; false after a report when the call failed or the
 * shape is not the reference's. */
static bool output(const run *r, tn_tensor *out, const tt_ref_io *io, double *got) {
    if (!out) {
        report(r, "the call failed: %s (%s)", tn_last_error(), tn_status_string(tn_last_status()));
        return false;
    }
    bool same = tn_ndim(out) == io->out_ndim &&
                !memcmp(tn_shape(out), io->out_shape, (size_t)io->out_ndim * sizeof(int64_t));
    if (!same) {
        report(r, "output shape: %d dims, expected %d dims (or different sizes)", tn_ndim(out),
               io->out_ndim);
        return false;
    }
    return tn_copy_to_f64(out, got, tn_numel(out)) == TN_OK;
}

static double loss_weight(int64_t i) { return cos(0.9 * (double)i + 0.3) + 0.25; }

/* L = sum(op(inputs with element j of input k moved by d) * w). */
static double loss_at(run *r, int k, int64_t j, double d) {
    double got[MAX_EL];
    tn_tensor *saved[TT_MAX_IN];
    memcpy(saved, r->in, sizeof saved);
    double L = NAN;
    if (make_inputs(r, L_CONTIG, k, j, d)) {
        tn_tensor *out = r->op->call(r->in, r->c->p);
        int64_t n = out ? tn_numel(out) : 0;
        if (out && tn_copy_to_f64(out, got, n) == TN_OK) {
            L = 0;
            for (int64_t i = 0; i < n; i++)
                L += got[i] * loss_weight(i);
        }
    }
    memcpy(r->in, saved, sizeof saved);
    return L;
}

/* The gradients of L = sum(out * w) w.r.t. r's differentiable inputs as doubles: g[i] for the
 * i-th of them, ks[i] its input number. Returns their count; -1 after a report. */
static int grads_of(run *r, tn_tensor *out, int *ks, double (*g)[MAX_EL]) {
    tn_tensor *xs[TT_MAX_IN], *gt[TT_MAX_IN] = {0};
    int nx = 0;
    for (int k = 0; k < r->op->arity; k++)
        if (wants_grad(r, k)) xs[nx] = r->in[k], ks[nx++] = k;
    if (!nx) return 0;
    if (!tn_requires_grad(out)) {
        report(r, "the output does not require grad");
        return -1;
    }
    int64_t n = tn_numel(out);
    double w[MAX_EL];
    for (int64_t i = 0; i < n; i++)
        w[i] = loss_weight(i);
    tn_tensor *wt = tn_to(tn_tensor_from(w, TN_F64, tn_ndim(out), tn_shape(out), false),
                          tn_dtype_of(out), r->dev);
    if (tn_autograd_grad(1, &out, &wt, nx, xs, gt, false, false) != TN_OK) {
        report(r, "backward failed: %s", tn_last_error());
        return -1;
    }
    for (int i = 0; i < nx; i++) { /* the scope owns gt[i] */
        int64_t m = tt_numel(r->c->ndim[ks[i]], r->c->shape[ks[i]]);
        if (!gt[i]) {
            memset(g[i], 0, sizeof g[i]); /* unreachable: a zero gradient */
        } else if (tn_numel(gt[i]) != m || tn_copy_to_f64(gt[i], g[i], m) != TN_OK) {
            report(r, "gradient of input %d: wrong size", ks[i]);
            return -1;
        }
    }
    return nx;
}

/* Float64: the analytic gradients against central differences. */
static void gradcheck(run *r, tn_tensor *out) {
    int ks[TT_MAX_IN];
    double ga[TT_MAX_IN][MAX_EL], gn[MAX_EL];
    int nx = grads_of(r, out, ks, ga);
    if (nx > 0) tally.grads++;
    /* a NaN loss (the mean of nothing) leaves no differences to compare with */
    if (nx > 0 && !isfinite(loss_at(r, -1, 0, 0))) return;
    for (int i = 0; i < nx; i++) {
        int k = ks[i];
        int64_t m = tt_numel(r->c->ndim[k], r->c->shape[k]);
        for (int64_t j = 0; j < m; j++)
            gn[j] = (loss_at(r, k, j, FD_EPS) - loss_at(r, k, j, -FD_EPS)) / (2 * FD_EPS);
        char what[64];
        snprintf(what, sizeof what, "gradient of input %d vs finite differences", k);
        compare(r, what, ga[i], gn, m, FD_TOL);
    }
}

/* Float32 and the halves: the analytic gradients against float64's on the CPU (the same input
 * values), within ten times the row's tolerance for the dtype (a backward is several rounded
 * steps; three times for the halves, whose tolerance is already a few units). */
static void grad_vs_f64(run *r, tn_tensor *out) {
    int ks[TT_MAX_IN];
    double g32[TT_MAX_IN][MAX_EL], g64[TT_MAX_IN][MAX_EL];
    run r64 = *r;
    r64.dt = TN_F64, r64.dev = TN_DEVICE_CPU;
    if (!make_inputs(&r64, L_CONTIG, -1, 0, 0)) return;
    tn_tensor *out64 = r->op->call(r64.in, r->c->p);
    int nx = grads_of(r, out, ks, g32);
    if (nx <= 0 || !out64 || grads_of(&r64, out64, ks, g64) != nx) return;
    tally.grads++;
    for (int i = 0; i < nx; i++) {
        char what[64];
        snprintf(what, sizeof what, "gradient of input %d vs float64's", ks[i]);
        compare(r, what, g32[i], g64[i], tt_numel(r->c->ndim[ks[i]], r->c->shape[ks[i]]),
                (is_half(r->dt) ? 3 : 10) * tol_for(r, r->dt));
    }
}

/* One case of one row in one dtype, back end and layout. */
static void check_one(run *r) {
    if (tn_scope_begin() != TN_OK) {
        report(r, "no scope");
        return;
    }
    tt_ref_io io;
    double want[MAX_EL], got[MAX_EL];
    for (int i = 0; i < r->op->arity; i++) {
        tt_domain dom = r->op->domain[i];
        bool integer = !is_float(input_dtype(dom, r->dt));
        for (int64_t j = 0; j < tt_numel(r->c->ndim[i], r->c->shape[i]); j++)
            r->v[i][j] = input_value(dom, j, i, r->c, integer);
    }
    tally.cases++;
    if (!make_inputs(r, r->layout, -1, 0, 0)) {
        report(r, "making the inputs failed: %s", tn_last_error());
    } else if (reference(r, &io, want)) {
        tn_tensor *out = r->op->call(r->in, r->c->p);
        if (output(r, out, &io, got) &&
            compare(r, "value", got, want, tn_numel(out), tol_for(r, tn_dtype_of(out))) &&
            r->dev.type == TN_CUDA) { /* CUDA against the CPU as well */
            run cpu = *r;
            cpu.dev = TN_DEVICE_CPU;
            double gc[MAX_EL];
            if (make_inputs(&cpu, r->layout, -1, 0, 0)) {
                tn_tensor *oc = r->op->call(cpu.in, r->c->p);
                if (output(&cpu, oc, &io, gc))
                    compare(r, "cuda vs cpu", got, gc, tn_numel(out), tol_for(r, tn_dtype_of(out)));
            }
        }
        if (out && r->dt == TN_F64) gradcheck(r, out);
        if (out && (r->dt == TN_F32 || is_half(r->dt))) grad_vs_f64(r, out);
    }
    tn_scope_end();
}

static bool layout_applies(const tt_op *op, const tt_case *c, int layout) {
    if (layout == L_CONTIG) return true;
    if (op->flags & TT_CONTIGUOUS_ONLY) return false;
    bool any = false; /* some input has the dims for it, and every one is non-empty */
    for (int i = 0; i < op->arity; i++) {
        if (tt_numel(c->ndim[i], c->shape[i]) == 0) return false;
        any |= c->ndim[i] >= (layout == L_TRANSPOSED ? 2 : 1);
    }
    return any;
}

static int ndevices(tn_device *devs) {
    int n = 0;
    devs[n++] = TN_DEVICE_CPU;
    if (tn_cuda_is_available()) devs[n++] = TN_DEVICE_CUDA(0);
    return n;
}

static void test_row(void **state) {
    const tt_op *op = *state;
    tn_device devs[2];
    int nd = ndevices(devs), fails = tally.fails;
    tally.row_fails = 0;
    for (int b = 0; b < nd; b++) {
        if (!(op->backends & (devs[b].type == TN_CUDA ? TT_CUDA : TT_CPU))) continue;
        for (int dt = 0; dt < TN_DTYPE_COUNT; dt++) {
            if (!(op->dtypes & TT_DT(dt))) continue;
            tally.combos++;
            for (int c = 0; c < op->ncases; c++)
                for (int l = 0; l < L_COUNT; l++) {
                    if (!layout_applies(op, &op->cases[c], l)) continue;
                    run r = {.op = op,
                             .c = &op->cases[c],
                             .dt = (tn_dtype)dt,
                             .dev = devs[b],
                             .layout = l};
                    check_one(&r);
                }
        }
    }
    tn_clear_error();
    if (tally.fails != fails) fail_msg("%s: %d failures", op->name, tally.fails - fails);
}

/* ---- every op has a row --------------------------------------------------------------------- */

/* Ops of include/tenet/ops.h without a row, and why. Keep it short: prefer a row. */
static const char *const exempt[] = {
    NULL,
};

static bool is_exempt(const char *name) {
    for (int i = 0; exempt[i]; i++)
        if (!strcmp(exempt[i], name)) return true;
    return false;
}

/* Every `tn_tensor *tn_xxx(` and `tn_status tn_xxx(` of the header has a row or is exempt. */
static void test_every_op_has_a_row(void **state) {
    (void)state;
    FILE *f = fopen("../include/tenet/ops.h", "r");
    assert_non_null(f);
    char line[512];
    int found = 0, missing = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128];
        if (sscanf(line, "tn_tensor *tn_%127[a-z0-9_](", name) != 1 &&
            sscanf(line, "tn_status tn_%127[a-z0-9_](", name) != 1)
            continue;
        found++;
        if (!tt_op_find(name) && !is_exempt(name)) {
            print_error("test_ops: tn_%s (include/tenet/ops.h) has no row in tests/ops/ and is "
                        "not exempt: add a row (docs/design.md, \"How to add an op\")\n",
                        name);
            missing++;
        }
    }
    fclose(f);
    assert_true(found > 50); /* the parse found the declarations */
    assert_int_equal(missing, 0);
}

/* ---- tests/ops/op_names.txt and the golden cases ------------------------------------------------
 */

/* The names file's text: one line per row, its golden ops or "- no golden: why". */
static size_t names_text(char *buf, size_t size) {
    int n;
    const tt_op *const *ops = tt_ops(&n);
    size_t k = (size_t)snprintf(buf, size,
                                "# Written by `test_ops --write-names`: the rows of tests/ops/, "
                                "each with its ops in scripts/gen_golden.py.\n");
    for (int i = 0; i < n && k < size; i++) {
        if (ops[i]->golden)
            k += (size_t)snprintf(buf + k, size - k, "%s %s\n", ops[i]->name, ops[i]->golden);
        else
            k += (size_t)snprintf(buf + k, size - k, "%s - no golden: %s\n", ops[i]->name,
                                  ops[i]->no_golden ? ops[i]->no_golden : "(no reason given)");
    }
    return k;
}

static void test_names_file_matches(void **state) {
    (void)state;
    static char want[1 << 16], got[1 << 16];
    size_t n = names_text(want, sizeof want);
    FILE *f = fopen("ops/op_names.txt", "r");
    assert_non_null(f);
    size_t m = fread(got, 1, sizeof got, f);
    fclose(f);
    if (n != m || memcmp(want, got, n)) {
        print_error("test_ops: tests/ops/op_names.txt is not the table's: run "
                    "`build/<preset>/tests/test_ops --write-names tests/ops/op_names.txt` from the "
                    "source root\n");
        fail();
    }
}

/* Whether some tests/golden/ file is a case of the golden op g. */
static bool has_golden(const char *dir, const char *g) {
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d))) {
        if (!strstr(e->d_name, ".txt")) continue;
        char path[1024], op[128];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        found = fscanf(f, "op %127s", op) == 1 && !strcmp(op, g);
        fclose(f);
    }
    closedir(d);
    return found;
}

/* A row names its golden ops, each with committed cases, or says why it has none. */
static void test_rows_have_goldens(void **state) {
    (void)state;
    const char *dir = getenv("TENET_GOLDEN_DIR");
    if (!dir) dir = "golden";
    int n, bad = 0;
    const tt_op *const *ops = tt_ops(&n);
    for (int i = 0; i < n; i++) {
        const tt_op *op = ops[i];
        if (!op->golden) {
            if (!op->no_golden)
                print_error("test_ops: %s: no golden ops and no reason\n", op->name);
            bad += !op->no_golden;
            continue;
        }
        char g[128];
        int used = 0;
        for (const char *p = op->golden; sscanf(p, "%127s%n", g, &used) == 1; p += used)
            if (!has_golden(dir, g)) {
                print_error("test_ops: %s: no case of golden op %s in %s (scripts/gen_golden.py)\n",
                            op->name, g, dir);
                bad++;
            }
    }
    assert_int_equal(bad, 0);
}

/* ---- main ---------------------------------------------------------------------------------- */

static bool selected(const char *name) {
    const char *sel = getenv("TEST_OPS");
    if (!sel || !*sel) return true;
    size_t n = strlen(name);
    for (const char *p = sel; (p = strstr(p, name)); p += n)
        if ((p == sel || p[-1] == ',') && (p[n] == ',' || !p[n])) return true;
    return false;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-names")) {
        static char text[1 << 16];
        size_t n = names_text(text, sizeof text);
        FILE *f = fopen(argv[2], "w");
        if (!f || fwrite(text, 1, n, f) != n || fclose(f)) return 1;
        return 0;
    }
    int n, k = 0;
    const tt_op *const *ops = tt_ops(&n);
    struct CMUnitTest *tests = calloc((size_t)n + 3, sizeof *tests);
    for (int i = 0; i < n; i++)
        if (selected(ops[i]->name))
            tests[k++] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
                test_row, tt_setup, tt_teardown, (void *)ops[i]);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_every_op_has_a_row);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_names_file_matches);
    tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_rows_have_goldens);
    for (int i = 0; i < k; i++)
        if (tests[i].test_func == test_row)
            tests[i].name = ((const tt_op *)tests[i].initial_state)->name;
    int rc = _cmocka_run_group_tests("test_ops", tests, (size_t)k, NULL, NULL);
    tn_device devs[2];
    printf("test_ops: %d ops, %d op x dtype x back end combinations (back ends: cpu%s), "
           "%d cases, %d gradient checks, %d failures\n",
           k - 3, tally.combos, ndevices(devs) > 1 ? ", cuda" : "", tally.cases, tally.grads,
           tally.fails);
    free(tests);
    return rc;
}
