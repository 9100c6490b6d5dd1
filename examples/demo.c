/* examples/demo.c — what `scripts/run-demo` runs.
 *
 * 1. Trains a 64-128-10 MLP (ReLU, cross-entropy, SGD with momentum) on the
 *    shipped digits dataset and reports the held-out accuracy.
 * 2. The seeds' lesson: writing through .detach() is caught by the version
 *    check at backward; writing through .data is not, and the gradient is
 *    silently wrong.
 *
 * Usage: tenet-demo [--autocast bf16] [DATA]   (DATA defaults to
 * $TENET_DATA, then data/digits.csv.gz relative to the current directory).
 * --autocast bf16 runs the MLP's forward in a bfloat16 autocast region (the
 * float32 parameters stay the master weights; tenet/autocast.h).
 * Exit status 0 when training reaches the target accuracy and the lesson
 * behaves as PyTorch does; 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tenet.h>

#include "digits.h"
#include "init.h"
#include "dist_flag.h"
#include "profile_flag.h"

enum { N_TRAIN = 1500, HIDDEN = 128, EPOCHS = 30, BATCH = 64 };
static const double LR = 0.1, MOMENTUM = 0.9, TARGET_ACCURACY = 0.97;
/* The file's rows are not in random order: trained on the first 1,500 rows
 * with this recipe, PyTorch scores about 0.92 on the last 297, far below what
 * a random held-out sample gives. So the split is a fixed
 * random permutation of the rows: the first 1,500 train, the last 297 test.
 * Over random splits PyTorch's mean accuracy with this recipe ranges from
 * 0.955 to 0.988 depending on the split (0.972 overall); on SPLIT_SEED's it
 * scores 0.983 to 0.990 over eight initialisation seeds (docs/design.md,
 * "The demo's data split"). */
static const uint64_t SPLIT_SEED = 3, SHUFFLE_SEED = 0x5eed;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Prints text word-wrapped at `width` columns, each line under `indent`
 * (the version check's message is long). */
static void print_wrapped(const char *text, const char *indent, int width) {
    int col = 0;
    const char *p = text;
    while (*p) {
        const char *w = p;
        while (*w && *w != ' ')
            w++;
        int len = (int)(w - p);
        if (col == 0)
            col = printf("%s", indent);
        else if (col + 1 + len > width) {
            printf("\n");
            col = printf("%s", indent);
        } else {
            col += printf(" ");
        }
        col += printf("%.*s", len, p);
        p = *w ? w + 1 : w;
    }
    if (col) printf("\n");
}

static void report_error(const char *what) {
    fprintf(stderr, "tenet-demo: %s failed: %s: %s\n", what, tn_status_string(tn_last_status()),
            tn_last_error());
}

/* Opens the scope of a step; false (reported) when it cannot, and then there
 * is no scope to end. */
static bool open_scope(const char *what) {
    if (tn_scope_begin() == TN_OK) return true;
    report_error(what);
    return false;
}

/* ---- the model ------------------------------------------------------------ */

typedef struct mlp {
    tn_tensor *w1, *b1, *w2, *b2; /* owned leaves */
} mlp;

static void mlp_free(mlp *m) {
    tn_release(m->w1);
    tn_release(m->b1);
    tn_release(m->w2);
    tn_release(m->b2);
    *m = (mlp){0};
}

static bool mlp_init(mlp *m) {
    tn_manual_seed(0);
    m->w1 = uniform_leaf(2, (int64_t[]){HIDDEN, DIGITS_PIXELS}, DIGITS_PIXELS);
    m->b1 = uniform_leaf(1, (int64_t[]){HIDDEN}, DIGITS_PIXELS);
    m->w2 = uniform_leaf(2, (int64_t[]){DIGITS_CLASSES, HIDDEN}, HIDDEN);
    m->b2 = uniform_leaf(1, (int64_t[]){DIGITS_CLASSES}, HIDDEN);
    if (m->w1 && m->b1 && m->w2 && m->b2) return true;
    report_error("initialising the parameters");
    mlp_free(m);
    return false;
}

/* --autocast: the forward's autocast dtype, TN_DTYPE_SAME when off */
static tn_dtype g_autocast = TN_DTYPE_SAME;

/* x is (N, 64), the result is logits (N, 10), float32 (bfloat16 under
 * --autocast: the loss then runs in float32, autocast's policy). NULL
 * propagates. */
static tn_tensor *mlp_forward(const mlp *m, const tn_tensor *x) {
    if (g_autocast != TN_DTYPE_SAME && tn_autocast_begin(TN_CPU, g_autocast) != TN_OK)
        return NULL;
    tn_tensor *y = tn_linear(tn_relu(tn_linear(x, m->w1, m->b1)), m->w2, m->b2);
    if (g_autocast != TN_DTYPE_SAME && tn_autocast_end() != TN_OK) return NULL;
    return y;
}

/* ---- data ----------------------------------------------------------------- */

typedef struct batch_buf {
    float *x;   /* rows x 64 */
    int64_t *y; /* rows */
    int64_t *pred;
} batch_buf;

/* Copies rows order[0..n) of d into tensors x (n, 64) and y (n). */
static bool make_batch(const digits *d, const int64_t *order, int64_t n, batch_buf *b,
                       tn_tensor **x, tn_tensor **y) {
    for (int64_t i = 0; i < n; i++) {
        memcpy(b->x + i * DIGITS_PIXELS, d->pixels + order[i] * DIGITS_PIXELS,
               DIGITS_PIXELS * sizeof *b->x);
        b->y[i] = d->labels[order[i]];
    }
    *x = tn_tensor_from(b->x, TN_F32, 2, (int64_t[]){n, DIGITS_PIXELS}, false);
    *y = tn_tensor_from(b->y, TN_I64, 1, &n, false);
    return *x && *y;
}

/* Correct predictions among n logits rows whose labels are in b->y; -1 on error. */
static int64_t count_correct(tn_tensor *logits, int64_t n, batch_buf *b) {
    tn_tensor *pred = tn_argmax_dim(logits, 1, false);
    if (!pred || tn_copy_to(pred, b->pred, (size_t)n * sizeof *b->pred) < 0) return -1;
    int64_t ok = 0;
    for (int64_t i = 0; i < n; i++)
        ok += b->pred[i] == b->y[i];
    return ok;
}

/* ---- training --------------------------------------------------------------- */

/* One SGD step on rows order[0..n); adds the summed loss and the correct
 * count to the epoch's totals. Everything it makes dies with its scope; the
 * parameters and the optimiser's momentum buffers live on. */
static bool train_step(const mlp *m, tn_sgd *opt, const digits *d, const int64_t *order, int64_t n,
                       batch_buf *b, double *loss_sum, int64_t *correct) {
    if (!open_scope("a training step")) return false;
    tn_tensor *x, *y, *loss = NULL, *logits = NULL;
    double loss_v = 0;
    int64_t ok = -1;
    bool good = make_batch(d, order, n, b, &x, &y) && (logits = mlp_forward(m, x)) &&
                (loss = tn_cross_entropy(logits, y)) && tn_sgd_zero_grad(opt) == TN_OK &&
                tn_backward(loss, NULL, false) == TN_OK && tn_sgd_step(opt) == TN_OK &&
                tn_item(loss, &loss_v) == TN_OK && (ok = count_correct(logits, n, b)) >= 0;
    if (!good) report_error("a training step");
    tn_scope_end();
    if (good) {
        *loss_sum += loss_v * (double)n;
        *correct += ok;
    }
    return good;
}

/* rows: the N_TRAIN training rows. Each epoch visits them in the order
 * tn_sampler_indices draws from (SHUFFLE_SEED, epoch); with --distributed
 * under mpirun -np N each rank takes its share and batches of BATCH / N,
 * so that every step's N local batches are one process's batch of BATCH,
 * and DDP averages the gradients: the same training, split. */
static bool train(const mlp *m, const digits *d, const int64_t *rows, batch_buf *b,
                  double *train_s) {
    tn_tensor *params[] = {m->w1, m->b1, m->w2, m->b2};
    tn_sgd *opt = tn_sgd_new(4, params, LR, MOMENTUM, 0.0);
    const int64_t per_rank = tn_sampler_indices(N_TRAIN, dist_world, dist_rank, 0, 0, true, false,
                                                NULL), local_batch = BATCH / dist_world;
    int64_t *idx = malloc((size_t)per_rank * sizeof *idx), *order = malloc((size_t)per_rank * 8);
#ifdef TENET_EXAMPLES_MPI
    tn_ddp *ddp = dist_on ? tn_ddp_new(params, 4, 0) : NULL;
    bool good = opt && idx && order && (!dist_on || ddp);
#else
    bool good = opt && idx && order;
#endif
    if (!good) report_error(!opt ? "tn_sgd_new" : "tn_ddp_new");
    double start = now_s();
    for (int epoch = 1; epoch <= EPOCHS && good; epoch++) {
        double t0 = now_s(), totals[2] = {0, 0}; /* loss sum, correct */
        int64_t correct = 0;
        good = tn_sampler_indices(N_TRAIN, dist_world, dist_rank, SHUFFLE_SEED, epoch, true, false,
                                  idx) == per_rank;
        for (int64_t i = 0; i < per_rank && good; i++)
            order[i] = rows[idx[i]];
        for (int64_t s = 0; s < per_rank && good; s += local_batch) {
            int64_t n = per_rank - s < local_batch ? per_rank - s : local_batch;
            good = train_step(m, opt, d, order + s, n, b, &totals[0], &correct);
        }
        totals[1] = (double)correct;
        good = good && dist_sum(totals, 2);
        if (good)
            printf("epoch %d/%d  loss %.4f  train acc %.3f  %.3f s\n", epoch, EPOCHS,
                   totals[0] / N_TRAIN, totals[1] / N_TRAIN, now_s() - t0);
    }
    *train_s = now_s() - start;
#ifdef TENET_EXAMPLES_MPI
    tn_ddp_free(ddp);
#endif
    tn_sgd_free(opt);
    free(idx);
    free(order);
    return good;
}

/* Accuracy on the n rows in `order`, one forward pass under no-grad; -1 on error. */
static double test_accuracy(const mlp *m, const digits *d, const int64_t *order, int64_t n,
                            batch_buf *b, int64_t *correct) {
    if (!open_scope("evaluating the test set")) return -1;
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *x, *y, *logits = NULL;
    *correct = -1;
    if (make_batch(d, order, n, b, &x, &y) && (logits = mlp_forward(m, x)))
        *correct = count_correct(logits, n, b);
    if (*correct < 0) report_error("evaluating the test set");
    tn_set_grad_enabled(prev);
    tn_scope_end();
    return *correct < 0 ? -1 : (double)*correct / (double)n;
}

/* ---- the seeds' lesson -------------------------------------------------------- */

static const double CORRECT_GRAD[3] = {0.1966, 0.1050, 0.0452}; /* sigmoid'(1, 2, 3) */

/* a = tensor([1., 2., 3.], requires_grad=True); out = a.sigmoid() */
static bool lesson_setup(tn_tensor **a, tn_tensor **out) {
    *a = tn_tensor_from((float[]){1, 2, 3}, TN_F32, 1, (int64_t[]){3}, true);
    *out = tn_sigmoid(*a);
    return *out != NULL;
}

static void show_tensor(const char *label, const tn_tensor *t) {
    char buf[256];
    if (!t || tn_format(t, buf, sizeof buf) < 0) {
        printf("    %s <unavailable: %s>\n", label, tn_last_error());
        return;
    }
    buf[strcspn(buf, "\n")] = '\0';
    printf("    %s %s\n", label, buf);
}

/* a.grad after backward, compared with `want` (NULL: zeros). */
static bool grad_is(tn_tensor *a, const double *want) {
    double g[3];
    tn_tensor *grad = tn_grad(a);
    if (!grad || tn_copy_to_f64(grad, g, 3) < 0) return false;
    for (int i = 0; i < 3; i++)
        if (fabs(g[i] - (want ? want[i] : 0.0)) > 1e-4) return false;
    return true;
}

static bool lesson_detach(void) {
    if (!open_scope("the lesson")) return false;
    tn_tensor *a, *out;
    printf("(1) out.detach().zero_(); out.sum().backward()\n");
    bool good = lesson_setup(&a, &out) && tn_zero_(tn_detach(out)) == TN_OK;
    tn_status st = good ? tn_backward(tn_sum(out), NULL, false) : tn_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tn_last_error());
    /* PyTorch's message names the node that saved out and both versions. */
    const char *want = "which is output 0 of SigmoidBackward0, is at version 1; expected version 0";
    if (good && st == TN_ERR_INPLACE_MODIFIED && strstr(msg, want)) {
        printf("    detach() shares out's version counter: out._version is now %lld\n",
               (long long)tn_version(out));
        printf("    backward refused, as in PyTorch:\n");
        print_wrapped(msg, "      ", 96);
    } else {
        printf("    UNEXPECTED: %s (%s); expected TN_ERR_INPLACE_MODIFIED saying \"%s\"\n",
               tn_status_string(st), msg, want);
        good = false;
    }
    tn_scope_end();
    return good;
}

static bool lesson_data(void) {
    if (!open_scope("the lesson")) return false;
    tn_tensor *a, *out, *clean_a, *clean_out, *alias = NULL;
    printf("(2) out.data.zero_(); out.sum().backward()\n");
    /* A clean run gives the correct gradient to compare with. */
    bool good = lesson_setup(&clean_a, &clean_out) &&
                tn_backward(tn_sum(clean_out), NULL, false) == TN_OK && lesson_setup(&a, &out) &&
                (alias = tn_data(out)) && tn_zero_(alias) == TN_OK &&
                tn_backward(tn_sum(out), NULL, false) == TN_OK;
    if (!good) {
        printf("    UNEXPECTED: %s: %s\n", tn_status_string(tn_last_status()), tn_last_error());
        tn_scope_end();
        return false;
    }
    printf("    .data has a version counter of its own: out._version is still %lld "
           "(.data's is %lld)\n",
           (long long)tn_version(out), (long long)tn_version(alias));
    printf("    backward succeeded, nothing was caught:\n");
    show_tensor("a.grad =", tn_grad(a));
    show_tensor("correct:", tn_grad(clean_a));
    printf("    SigmoidBackward0 computes grad * out * (1 - out) from its saved output,\n"
           "    which .data zeroed behind autograd's back: the gradient is silently 0.\n"
           "    Write through detach() (or under no-grad) and let the version check guard "
           "you.\n");
    if (!grad_is(clean_a, CORRECT_GRAD)) {
        printf("    UNEXPECTED: the clean gradient is not [0.1966, 0.1050, 0.0452]\n");
        good = false;
    }
    if (!grad_is(a, NULL)) {
        printf("    UNEXPECTED: a.grad is not all zeros\n");
        good = false;
    }
    tn_scope_end();
    return good;
}

/* ---- the same corruptions with anomaly mode on ------------------------------------- */

/* Named functions so that the report's backtraces point at them. */
static tn_tensor *forward_pass(tn_tensor *a) { return tn_sigmoid(a); }
static void corrupt_through_detach(tn_tensor *out) { tn_zero_(tn_detach(out)); }
static void corrupt_through_data(tn_tensor *out) { tn_zero_(tn_data(out)); }

static const char *DOT_PATH = "/tmp/tenet-demo-graph.dot";

static bool lesson_anomaly(void) {
    bool good = true;
    if (!open_scope("the lesson")) return false;
    tn_set_detect_anomaly(true, false);
    tn_tensor *a = tn_tensor_from((float[]){1, 2, 3}, TN_F32, 1, (int64_t[]){3}, true);
    tn_tensor *out = forward_pass(a);
    corrupt_through_detach(out);
    tn_tensor *loss = tn_sum(out);
    printf("(3) tn_set_detect_anomaly(true, false): the same two writes, named\n");
    fflush(stdout); /* the engine's one-line warning goes to stderr: keep the order */
    tn_status st = tn_backward(loss, NULL, false);
    const tn_anomaly_report *r = tn_last_anomaly();
    if (st == TN_ERR_INPLACE_MODIFIED && r && strstr(tn_last_error(), "corrupt_through_detach")) {
        printf("    the error now ends with the write's function and file:line:\n");
        print_wrapped(tn_last_error(), "      ", 96);
        printf("    and tn_anomaly_report_print(tn_last_anomaly(), f) shows both backtraces:\n");
        tn_anomaly_report_print(r, stdout);
        FILE *f = fopen(DOT_PATH, "w");
        if (f && tn_graph_dot(loss, f) == TN_OK)
            printf("    the graph, failing node highlighted: %s (render: dot -Tsvg %s > "
                   "graph.svg)\n", DOT_PATH, DOT_PATH);
        if (f) fclose(f);
    } else {
        printf("    UNEXPECTED: %s: %s\n", tn_status_string(st), tn_last_error());
        good = false;
    }
    /* .data: PyTorch passes silently; anomaly mode reports the write. */
    tn_tensor *out2 = forward_pass(a);
    corrupt_through_data(out2);
    tn_anomaly_clear();
    fflush(stdout); /* the warning goes to stderr: keep the two in order */
    st = tn_backward(tn_sum(out2), NULL, false);
    r = tn_last_anomaly();
    if (st == TN_OK && r && tn_anomaly_report_kind(r) == TN_ANOMALY_UNTRACKED) {
        printf("    out.data.zero_() is no longer silent (a warning, or an error with\n"
               "    tn_set_anomaly_untracked_error(true)):\n");
        tn_anomaly_report_print(r, stdout);
    } else {
        printf("    UNEXPECTED: the .data write was not reported (%s)\n", tn_status_string(st));
        good = false;
    }
    tn_scope_end();
    tn_set_detect_anomaly(false, false);
    tn_anomaly_clear();
    return good;
}

/* ---- main ------------------------------------------------------------------------ */

static const char *data_path(int argc, char **argv) {
    if (argc > 1) return argv[1];
    const char *env = getenv("TENET_DATA");
    return env && *env ? env : "data/digits.csv.gz";
}

static bool run_training(const digits *d) {
    batch_buf b = {malloc((size_t)d->n * DIGITS_PIXELS * sizeof(float)),
                   malloc((size_t)d->n * sizeof(int64_t)), malloc((size_t)d->n * sizeof(int64_t))};
    int64_t *rows = malloc((size_t)d->n * sizeof *rows); /* rows[0..N_TRAIN) train, rest test */
    mlp m = {0};
    bool good = b.x && b.y && b.pred && rows;
    if (!good) fprintf(stderr, "tenet-demo: out of memory\n");
    good = good && mlp_init(&m);
    if (good) {
        uint64_t rng = SPLIT_SEED;
        for (int64_t i = 0; i < d->n; i++)
            rows[i] = i;
        example_shuffle(rows, d->n, &rng);
    }
    double train_s = 0, acc = -1;
    int64_t correct = 0;
    if (good) {
        printf("model: 64-128-10 MLP (ReLU), cross-entropy, SGD lr %.1f momentum %.1f, "
               "batch %d, %d epochs, %d thread(s)\n",
               LR, MOMENTUM, BATCH, EPOCHS, tn_get_num_threads());
        if (dist_on)
            printf("distributed: %d processes, each a batch of %d and its share of each epoch\n",
                   dist_world, BATCH / dist_world);
        good = train(&m, d, rows, &b, &train_s);
    }
    if (good) acc = test_accuracy(&m, d, rows + N_TRAIN, d->n - N_TRAIN, &b, &correct);
    if (acc >= 0) {
        printf("training: %.3f s for %d epochs\n", train_s, EPOCHS);
        printf("test accuracy %.3f (%lld/%lld held-out images)\n", acc, (long long)correct,
               (long long)(d->n - N_TRAIN));
        if (acc < TARGET_ACCURACY)
            printf("UNEXPECTED: test accuracy below %.2f\n", TARGET_ACCURACY);
    }
    mlp_free(&m);
    free(b.x);
    free(b.y);
    free(b.pred);
    free(rows);
    return good && acc >= TARGET_ACCURACY;
}

int main(int argc, char **argv) {
    profile_flag(&argc, argv); /* --profile[=PATH] */
    if (!dist_flag(&argc, &argv, "tenet-demo")) return 1; /* --distributed */
    if (BATCH % dist_world) {
        fprintf(stderr, "tenet-demo: --distributed: the batch of %d does not split over %d "
                        "processes\n", BATCH, dist_world);
        return 1;
    }
    if (argc >= 3 && !strcmp(argv[1], "--autocast")) {
        if (strcmp(argv[2], "bf16")) {
            fprintf(stderr, "tenet-demo: --autocast: bf16, not '%s'\n", argv[2]);
            return 2;
        }
        g_autocast = TN_BF16;
        argv[2] = argv[0]; /* drop the two words */
        argv += 2;
        argc -= 2;
    }
    if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        fprintf(argc > 2 ? stderr : stdout,
                "usage: %s [--distributed] [--profile[=PATH]] [--autocast bf16] [DATA]\n"
                "  DATA: the digits CSV (gzip'd or not); default $TENET_DATA, then "
                "data/digits.csv.gz\n"
                "  --distributed: data-parallel under mpirun -np N (N divides 64)\n"
                "  --autocast bf16: the forward in a bfloat16 autocast region\n",
                argv[0]);
        return argc > 2 ? 2 : 0;
    }
    const char *path = data_path(argc, argv);
    digits d;
    char err[512];
    if (digits_load(path, &d, err, sizeof err) < 0) {
        fprintf(stderr, "tenet-demo: %s\n", err);
        return 1;
    }
    if (d.n != DIGITS_ROWS) {
        fprintf(stderr, "tenet-demo: %s: %lld rows, expected %d (the shipped digits file)\n", path,
                (long long)d.n, DIGITS_ROWS);
        digits_free(&d);
        return 1;
    }
    if (g_autocast != TN_DTYPE_SAME) printf("mixed precision: the forward under autocast bfloat16\n");
    printf("tenet demo: digits, %lld images of 8x8 pixels from %s\n"
           "split by a fixed random permutation (seed %llu): %d to train, %lld held out\n\n",
           (long long)d.n, path, (unsigned long long)SPLIT_SEED, N_TRAIN,
           (long long)(d.n - N_TRAIN));
    bool trained = run_training(&d);
    digits_free(&d);

    printf("\nThe seeds' lesson: .detach() is caught, .data is not\n"
           "a = tensor([1., 2., 3.], requires_grad=True); out = a.sigmoid()  "
           "(sigmoid saves out for backward)\n");
    bool lessons = dist_rank == 0; /* with --distributed, the first process only */
    bool detach_ok = !lessons || lesson_detach();
    bool data_ok = !lessons || lesson_data();
    bool anomaly_ok = !lessons || lesson_anomaly();

    /* Scopes released every temporary: nothing may be left alive. */
    tn_memory_stats_t ms = {0};
    bool no_leak = tn_memory_stats(&ms) == TN_OK && ms.tensors_live == 0 && ms.bytes_live == 0;
    printf("\nmemory: %lld tensors alive at the end, peak %.1f KiB of tensor storage\n",
           (long long)ms.tensors_live, (double)ms.bytes_peak / 1024.0);
    if (!no_leak) printf("UNEXPECTED: tensors were leaked\n");

    bool all = trained && detach_ok && data_ok && anomaly_ok && no_leak;
    printf("\n%s\n", all ? "demo: all checks passed" : "demo: FAILED (see above)");
    return all ? 0 : 1;
}
