/* tenet-diverge: where two runs part ways. Reads two numerics records
 * (TENET_NUMERICS=path, tn_numerics_begin, scripts/torch_numerics.py),
 * aligns them op by op and names the first op whose inputs agree and whose
 * outputs do not (the culprit), apart from the ops that only carried a
 * difference on (docs/numerics.md).
 *
 * Alignment: per thread, the forward ops and optimiser updates in order, by
 * name and output shapes (and call sites when both records come from the
 * same producer); backward nodes by identity: the node an aligned op made is
 * aligned with the node its partner made (nodes no op names are matched by
 * name, in order). A difference is measured on the summaries, relative to
 * the tensor's scale: max over min, max, mean and max |x| of |a - b| / max
 * |x|, and of the L2 norms' relative difference; equal statistics with
 * unequal hashes (same dtype) count as the smallest difference there is.
 * Exit status: 0 same, 1 parted, 2 could not align (or could not read).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diverge_record.h"

typedef struct opts {
    double rtol;    /* < 0: by dtypes */
    double run_tol; /* > 0: the runs differ in dtype, every record gets the coarser epsilon */
    bool json, sites;
    int top;
} opts;

static int by_thread_seq(const void *x, const void *y) {
    const dv_rec *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static double dtype_eps(const char *dt) {
    if (!strcmp(dt, "bfloat16")) return 0x1p-7;
    if (!strcmp(dt, "float16")) return 0x1p-10;
    if (!strcmp(dt, "float64")) return 0x1p-52;
    if (!strcmp(dt, "float32")) return 0x1p-23;
    return 0; /* integers and bools: exact */
}

/* The tolerance of two records: a few ulps of the coarser float dtype seen
 * among their outputs (bf16 against float32: bf16's epsilon). */
static double tolerance(const dv_rec *a, const dv_rec *b, const opts *o) {
    if (o->rtol >= 0) return o->rtol;
    if (o->run_tol > 0) return o->run_tol;
    double e = 0;
    bool mixed = false;
    for (int i = 0; i < a->n_out && i < b->n_out; i++) {
        double ea = dtype_eps(a->out[i].dtype), eb = dtype_eps(b->out[i].dtype);
        mixed = mixed || strcmp(a->out[i].dtype, b->out[i].dtype) != 0;
        e = fmax(e, fmax(ea, eb));
    }
    for (int i = 0; e == 0 && i < a->n_in && i < b->n_in; i++) { /* a node with no outputs */
        mixed = mixed || strcmp(a->in[i].dtype, b->in[i].dtype) != 0;
        e = fmax(e, fmax(dtype_eps(a->in[i].dtype), dtype_eps(b->in[i].dtype)));
    }
    return mixed ? e : 4 * e;
}

static double rel(double x, double y, double scale) {
    if (x == y) return 0;
    if (!(scale > 0) || isinf(scale)) return isnan(x) || isnan(y) ? INFINITY : 0;
    return fabs(x - y) / scale;
}

static double diff(const dv_summary *a, const dv_summary *b) {
    if (!a->present || !b->present || a->missing || b->missing) return 0;
    if (a->nan != b->nan || a->inf != b->inf) return INFINITY;
    bool same_dt = !strcmp(a->dtype, b->dtype);
    if (same_dt && a->hash == b->hash) return 0;
    double s = fmax(a->amax, b->amax);
    double d = fmax(fmax(rel(a->min, b->min, s), rel(a->max, b->max, s)),
                    fmax(rel(a->mean, b->mean, s), rel(a->amax, b->amax, s)));
    d = fmax(d, rel(a->l2, b->l2, fmax(a->l2, b->l2)));
    return d == 0 && same_dt ? 0x1p-1074 : d; /* the bits differ, the statistics do not */
}

static bool same_shape(const dv_summary *a, const dv_summary *b) {
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]);
}

/* The largest difference between the tensors of two lists, each of a's paired
 * with the first of b's of its shape not yet paired (the lists of two
 * producers may order an op's tensors differently: PyTorch's embedding takes
 * the indices first); tensors without a partner are not compared. */
static double max_diff(int na, const dv_summary *a, int nb, const dv_summary *b) {
    double d = 0;
    bool used[DV_MAX_TENSORS] = {false};
    for (int i = 0; i < na; i++) {
        if (!a[i].present) continue;
        int j = i < nb && !used[i] && b[i].present && same_shape(&a[i], &b[i]) ? i : -1;
        for (int k = 0; k < nb && j < 0; k++)
            if (!used[k] && b[k].present && same_shape(&a[i], &b[k])) j = k;
        if (j < 0) continue;
        used[j] = true;
        d = fmax(d, diff(&a[i], &b[j]));
    }
    return d;
}

static bool same_shapes(int n, const dv_summary *a, int m, const dv_summary *b) {
    if (n != m) return false;
    for (int i = 0; i < n; i++)
        if (a[i].ndim != b[i].ndim ||
            memcmp(a[i].shape, b[i].shape, (size_t)a[i].ndim * sizeof a[i].shape[0]))
            return false;
    return true;
}

/* Two call sites agree when equal, or when the shorter is the end of the
 * longer after a '/' (one build names files by absolute paths, another
 * relative to its tree: "/src/tenet/examples/gpt.c:40", "examples/gpt.c:40"). */
static bool same_site(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na < nb) {
        const char *t = a;
        a = b, b = t;
        size_t k = na;
        na = nb, nb = k;
    }
    return !strcmp(a + na - nb, b) && (na == nb || a[na - nb - 1] == '/');
}

static bool same_key(const dv_rec *a, const dv_rec *b, bool sites) {
    return a->kind == b->kind && a->t == b->t && !strcmp(a->name, b->name) &&
           same_shapes(a->n_out, a->out, b->n_out, b->out) &&
           (!sites || !a->site[0] || !b->site[0] || same_site(a->site, b->site));
}

static void describe(const dv_rec *r) {
    fprintf(stderr, "%s \"%s\"",
            r->kind == DV_NODE ? "node"
            : r->kind == DV_OP ? "op"
                               : "update",
            r->name);
    if (r->site[0]) fprintf(stderr, " at %s", r->site);
    if (r->n_out) {
        fprintf(stderr, " [");
        for (int d = 0; d < r->out[0].ndim; d++)
            fprintf(stderr, d ? ",%lld" : "%lld", (long long)r->out[0].shape[d]);
        fprintf(stderr, "]");
    }
}

/* Forward ops and updates, thread by thread in order. False (and where)
 * when the sequences differ. */
static bool align_forward(dv_run *A, dv_run *B, bool sites) {
    int i = 0, j = 0;
    for (;;) {
        while (i < A->n && A->recs[i].kind == DV_NODE)
            i++;
        while (j < B->n && B->recs[j].kind == DV_NODE)
            j++;
        if (i == A->n || j == B->n) break;
        dv_rec *a = &A->recs[i], *b = &B->recs[j];
        if (!same_key(a, b, sites)) {
            fprintf(stderr,
                    "tenet-diverge: the runs' op sequences differ (thread %d, record %lld "
                    "of A, %lld of B):\n  A: ",
                    a->t, (long long)a->seq, (long long)b->seq);
            describe(a);
            fprintf(stderr, "\n  B: ");
            describe(b);
            fprintf(stderr, "\n");
            return false;
        }
        a->partner = j, b->partner = i;
        i++, j++;
    }
    if (i < A->n || j < B->n) {
        const dv_rec *r = i < A->n ? &A->recs[i] : &B->recs[j];
        fprintf(stderr, "tenet-diverge: run %s has more ops from thread %d record %lld: ",
                i < A->n ? "A" : "B", r->t, (long long)r->seq);
        describe(r);
        fprintf(stderr, "\n");
        return false;
    }
    return true;
}

/* The node record of each node id, -1 when absent (ids are small integers). */
static int find_node(const dv_run *R, int64_t node) {
    for (int k = 0; k < R->n; k++) /* a linear search: records are thousands, not millions */
        if (R->recs[k].kind == DV_NODE && R->recs[k].node == node) return k;
    return -1;
}

static int find_op_of(const dv_run *R, int64_t node) {
    for (int k = 0; k < R->n; k++)
        if (R->recs[k].kind == DV_OP && R->recs[k].node == node) return k;
    return -1;
}

/* Nodes by identity: through the op that made each; the rest by name, in order. */
static void align_nodes(dv_run *A, dv_run *B) {
    for (int i = 0; i < A->n; i++) {
        dv_rec *a = &A->recs[i];
        if (a->kind != DV_NODE) continue;
        int op = find_op_of(A, a->node);
        if (op < 0 || A->recs[op].partner < 0) continue;
        int j = find_node(B, B->recs[A->recs[op].partner].node);
        if (j >= 0 && B->recs[j].partner < 0) /* names may differ between producers */
            a->partner = j, B->recs[j].partner = i;
    }
    int j = 0;
    for (int i = 0; i < A->n; i++) {
        dv_rec *a = &A->recs[i];
        if (a->kind != DV_NODE || a->partner >= 0) continue;
        for (int k = j; k < B->n; k++) {
            dv_rec *b = &B->recs[k];
            if (b->kind == DV_NODE && b->partner < 0 && !strcmp(b->name, a->name) &&
                same_shapes(a->n_out, a->out, b->n_out, b->out)) {
                a->partner = k, b->partner = i, j = k + 1;
                break;
            }
        }
    }
}

/* An op whose inputs differ within the tolerance and whose output differs
 * beyond it is a culprit only when it amplified its inputs' difference more
 * than this (else it carried a difference that crossed the line there). */
#define DV_CARRY 16

typedef struct verdict {
    int a, b; /* record indices */
    double din, dout, tol;
} verdict;

static const char *site_of(const dv_run *R, const dv_rec *r) {
    if (r->kind == DV_NODE) { /* a node: the call site of the op that made it */
        int op = find_op_of(R, r->node);
        if (op >= 0) return R->recs[op].site;
    }
    return r->site;
}

static double amplification(const verdict *v) { return v->din > 0 ? v->dout / v->din : INFINITY; }

static void print_verdict(FILE *f, const char *what, const dv_run *A, const dv_run *B,
                          const verdict *v) {
    const dv_rec *a = &A->recs[v->a], *b = &B->recs[v->b];
    fprintf(f, "%s: %s \"%s\" (thread %d, record %lld)\n", what,
            a->kind == DV_NODE ? "backward node"
            : a->kind == DV_OP ? "op"
                               : "optimiser update",
            a->name, a->t, (long long)a->seq);
    fprintf(f, "  called at   A: %s\n              B: %s\n", site_of(A, a)[0] ? site_of(A, a) : "?",
            site_of(B, b)[0] ? site_of(B, b) : "?");
    fprintf(f, "  inputs differ by %.3g, outputs by %.3g (tolerance %.3g: %.3gx)", v->din, v->dout,
            v->tol, v->tol > 0 ? v->dout / v->tol : INFINITY);
    if (v->din > 0) fprintf(f, ", amplified %.3gx", amplification(v));
    fprintf(f, "\n");
}

static void json_verdict(FILE *f, const dv_run *A, const dv_run *B, const verdict *v) {
    const dv_rec *a = &A->recs[v->a], *b = &B->recs[v->b];
    double amp = amplification(v);
    fprintf(f,
            "{\"kind\":\"%s\",\"name\":\"%s\",\"thread\":%d,\"seq_a\":%lld,\"seq_b\":%lld,"
            "\"site_a\":\"%s\",\"site_b\":\"%s\",\"input_diff\":%.6g,\"output_diff\":%.6g,"
            "\"tolerance\":%.6g,\"amplification\":%.6g}",
            a->kind == DV_NODE ? "node"
            : a->kind == DV_OP ? "op"
                               : "update",
            a->name, a->t, (long long)a->seq, (long long)b->seq, site_of(A, a), site_of(B, b),
            v->din, isinf(v->dout) ? 1e308 : v->dout, v->tol, isinf(amp) ? -1.0 : amp);
}

static bool mixed_precision(const dv_run *A, const dv_run *B) {
    for (int i = 0; i < A->n; i++) {
        const dv_rec *a = &A->recs[i];
        if (a->partner < 0) continue;
        const dv_rec *b = &B->recs[a->partner];
        for (int k = 0; k < a->n_out && k < b->n_out; k++)
            if (strcmp(a->out[k].dtype, b->out[k].dtype)) return true;
    }
    return false;
}

static int by_added(const void *x, const void *y) {
    const verdict *a = x, *b = y;
    double ea = a->dout - a->din, eb = b->dout - b->din;
    return (ea < eb) - (ea > eb);
}

/* bf16 against float32: the ops by the difference each added itself (its
 * output's less its inputs'), largest first, one line per name and site. */
static void ranking(FILE *f, const dv_run *A, const dv_run *B, verdict *v, int n, int top,
                    bool json) {
    qsort(v, (size_t)n, sizeof *v, by_added);
    fprintf(f, json ? ",\"ranking\":["
                    : "precision lost, by op (difference added: output's less inputs'):\n");
    int shown = 0;
    for (int i = 0; i < n && shown < top; i++) {
        const dv_rec *a = &A->recs[v[i].a];
        bool seen = false; /* one line per name and site: the worst call */
        for (int k = 0; k < i && !seen; k++) {
            const dv_rec *p = &A->recs[v[k].a];
            seen = !strcmp(p->name, a->name) && !strcmp(site_of(A, p), site_of(A, a));
        }
        if (seen) continue;
        if (json) {
            if (shown) fprintf(f, ",");
            json_verdict(f, A, B, &v[i]);
        } else {
            fprintf(f, "  %2d. %-30s %-32s added %.3g (in %.3g, out %.3g)\n", shown + 1, a->name,
                    site_of(A, a), v[i].dout - v[i].din, v[i].din, v[i].dout);
        }
        shown++;
    }
    if (json) fprintf(f, "]");
}

static int usage(FILE *f, int st) {
    fprintf(f, "usage: tenet-diverge [--json] [--rtol X] [--no-sites] [--top N] A.jsonl B.jsonl\n"
               "  --rtol X    tolerance relative to each tensor's scale (default: by dtypes,\n"
               "              4 ulps when the runs' dtypes agree, else the coarser epsilon)\n"
               "  --no-sites  align without comparing call sites\n"
               "  --top N     ops in the precision ranking of mixed-dtype runs (default 10)\n"
               "exit status: 0 same, 1 parted, 2 could not align\n");
    return st;
}

/* The difference a record was given: its inputs', and for a backward node
 * also its forward op's inputs and output (what it saved). */
static double input_diff(const dv_run *A, const dv_run *B, const dv_rec *a, const dv_rec *b) {
    double d = max_diff(a->n_in, a->in, b->n_in, b->in);
    int op = a->kind == DV_NODE ? find_op_of(A, a->node) : -1;
    if (op >= 0 && A->recs[op].partner >= 0) {
        const dv_rec *fa = &A->recs[op], *fb = &B->recs[fa->partner];
        d = fmax(d, max_diff(fa->n_in, fa->in, fb->n_in, fb->in));
        d = fmax(d, max_diff(fa->n_out, fa->out, fb->n_out, fb->out));
    }
    return d;
}

/* Runs in different dtypes (bf16 against float32): the coarser epsilon of
 * the dtypes that differ, for every record (the float32 master weights of a
 * bf16 run carry bf16's differences). 0 when the dtypes agree everywhere. */
static double run_tolerance(const dv_run *A, const dv_run *B) {
    double e = 0;
    for (int i = 0; i < A->n; i++) {
        const dv_rec *a = &A->recs[i];
        if (a->partner < 0) continue;
        const dv_rec *b = &B->recs[a->partner];
        for (int k = 0; k < a->n_out && k < b->n_out; k++)
            if (strcmp(a->out[k].dtype, b->out[k].dtype))
                e = fmax(e, fmax(dtype_eps(a->out[k].dtype), dtype_eps(b->out[k].dtype)));
    }
    return e;
}

static int compare(dv_run *A, dv_run *B, opts *o, const char *pa, const char *pb) {
    o->run_tol = run_tolerance(A, B);
    verdict *all = calloc((size_t)A->n + 1, sizeof *all), *culprits = calloc(8, sizeof *culprits);
    int n = 0, nc = 0, carried = 0;
    verdict worst_amp = {-1, -1, 0, 0, 0};
    for (int i = 0; i < A->n; i++) {
        const dv_rec *a = &A->recs[i];
        if (a->partner < 0) continue;
        const dv_rec *b = &B->recs[a->partner];
        verdict v = {i, a->partner, input_diff(A, B, a, b),
                     max_diff(a->n_out, a->out, b->n_out, b->out), tolerance(a, b, o)};
        if (a->kind == DV_NODE && (!a->n_out || !b->n_out)) {
            /* a record with only the gradient the op's output received (PyTorch's):
             * that gradient is what is compared, against the forward op's tensors */
            v.dout = max_diff(a->n_in, a->in, b->n_in, b->in);
            v.din = 0;
            int op = find_op_of(A, a->node);
            if (op >= 0 && A->recs[op].partner >= 0) {
                const dv_rec *fa = &A->recs[op], *fb = &B->recs[fa->partner];
                v.din = fmax(max_diff(fa->n_in, fa->in, fb->n_in, fb->in),
                             max_diff(fa->n_out, fa->out, fb->n_out, fb->out));
            }
        }
        all[n++] = v;
        if (v.dout <= v.tol) continue;
        /* inputs within the tolerance yet already apart, amplified by less than
         * DV_CARRY: the op carried a difference that grew past the line */
        if (v.din <= v.tol && (v.din == 0 || v.dout > DV_CARRY * v.din)) {
            if (nc < 8) culprits[nc] = v;
            nc++;
        } else {
            carried++;
            if (worst_amp.a < 0 || amplification(&v) > amplification(&worst_amp)) worst_amp = v;
        }
    }
    FILE *f = stdout;
    bool mixed = mixed_precision(A, B);
    int parted = nc + carried;
    if (o->json) {
        fprintf(f,
                "{\"a\":\"%s\",\"b\":\"%s\",\"aligned\":%d,\"parted\":%d,\"carried\":%d,"
                "\"culprits\":[",
                pa, pb, n, parted, carried);
        for (int k = 0; k < nc && k < 8; k++) {
            if (k) fprintf(f, ",");
            json_verdict(f, A, B, &culprits[k]);
        }
        fprintf(f, "]");
        if (worst_amp.a >= 0) fprintf(f, ",\"most_amplified\":"), json_verdict(f, A, B, &worst_amp);
        if (mixed) ranking(f, A, B, all, n, o->top, true);
        fprintf(f, "}\n");
    } else {
        fprintf(f, "A: %s (%s)\nB: %s (%s)\n%d records aligned", pa, A->producer, pb, B->producer,
                n);
        if (!parted)
            fprintf(f, "; no op parts beyond the tolerance\n");
        else
            fprintf(f,
                    "; %d part beyond the tolerance: %d where the difference starts, %d that "
                    "only carry it on\n",
                    parted, nc, carried);
        for (int k = 0; k < nc && k < 3; k++)
            print_verdict(f, k ? "next culprit" : "first culprit", A, B, &culprits[k]);
        if (worst_amp.a >= 0) print_verdict(f, "most amplifying carrier", A, B, &worst_amp);
        if (mixed) ranking(f, A, B, all, n, o->top, false);
    }
    free(all);
    free(culprits);
    return parted ? 1 : 0;
}

int main(int argc, char **argv) {
    opts o = {.rtol = -1, .run_tol = 0, .sites = true, .top = 10};
    const char *path[2] = {NULL, NULL};
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout, 0);
        if (!strcmp(argv[i], "--json"))
            o.json = true;
        else if (!strcmp(argv[i], "--no-sites"))
            o.sites = false;
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc)
            o.rtol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--top") && i + 1 < argc)
            o.top = atoi(argv[++i]);
        else if (argv[i][0] != '-' && np < 2)
            path[np++] = argv[i];
        else
            return usage(stderr, 2);
    }
    if (np != 2) return usage(stderr, 2);
    dv_run A, B;
    if (!dv_read(path[0], &A)) return 2;
    if (!dv_read(path[1], &B)) {
        dv_free(&A);
        return 2;
    }
    qsort(A.recs, (size_t)A.n, sizeof *A.recs, by_thread_seq);
    qsort(B.recs, (size_t)B.n, sizeof *B.recs, by_thread_seq);
    /* call sites say the same thing only when one producer wrote both */
    bool sites = o.sites && !strcmp(A.producer, B.producer);
    int st = 2;
    if (align_forward(&A, &B, sites)) {
        align_nodes(&A, &B);
        st = compare(&A, &B, &o, path[0], path[1]);
    }
    dv_free(&A);
    dv_free(&B);
    return st;
}
