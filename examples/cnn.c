/* examples/cnn.c — tenet-cnn: a small CNN trained on Fashion-MNIST (Debian's
 * dataset-fashion-mnist), PyTorch's recipe (scripts/cnn_reference.py is the
 * same model in PyTorch):
 *
 *   conv(1->32, 3x3, pad 1)-BN-ReLU-maxpool 2 -> conv(32->64, 3x3, pad 1)-BN-ReLU-maxpool 2
 *   -> linear(3136->128)-ReLU -> linear(128->10), cross entropy,
 *   SGD (momentum 0.9, weight decay 5e-4), shuffled batches (tenet/sampler.h).
 *
 *   tenet-cnn [--epochs E] [--batch B] [--lr X] [--cosine] [options]
 *   tenet-cnn --init W.safetensors --batches I.bin --steps N --expect-losses L.txt ...
 *
 * --data DIR        the four IDX files (default /usr/share/datasets/fashion-mnist;
 *                   exit status 77 when they are missing)
 * --epochs E (3) --batch B (128) --lr X (0.05) --seed S (1)
 * --cosine          the lr decays along a half cosine to 0 over the run
 * --threads N       tenet's threads (default: all)
 * --device D        cpu (default) or cuda (exit status 3 when there is none)
 * --init FILE       start from these weights (safetensors, PyTorch's state_dict
 *                   names: c1.weight, b1.running_mean, ...)
 * --save FILE       write the trained state_dict (the same names)
 * --steps N         stop after N steps (with --batches: the steps to run)
 * --batches FILE    the training batches instead of the sampler's: per step,
 *                   B little-endian int64 indices into the training set
 * --expect-losses FILE [--rtol X]   each step's loss against FILE's lines
 *                   (PyTorch's); exit 1 on a relative difference above X (1e-4)
 * --expect-stats FILE [--stats-tol X]   after the steps, the batch norms'
 *                   running_mean / running_var against FILE's (safetensors);
 *                   exit 1 on a difference above X * max(1, |reference|) (1e-5)
 * --distributed     data-parallel under mpirun -np N (N divides --batch): each
 *                   process trains on its share of every batch (the sampler's
 *                   rank split), DDP averages the gradients; the batch norms
 *                   see the local rows, as PyTorch's DDP without SyncBatchNorm
 * --profile[=PATH]  write a timeline (Chrome trace) and print the top ops
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, isatty */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tenet.h>

#include "cnn_model.h"
#include "dist_flag.h"
#include "expect_losses.h"
#include "profile_flag.h"

/* ---- the data ----------------------------------------------------------------- */

typedef struct split {
    tn_tensor *x, *y; /* (N, 1, 28, 28) float32 in [0, 1]; (N) int64 */
    int64_t n;
} split;

/* images as PyTorch's ToTensor() makes them (v / 255 as float32), labels as int64 */
static bool split_load(split *s, const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte.gz", dir, name);
    tn_tensor *img = tn_idx_load(p, TN_F32, 1.0 / 255);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte.gz", dir, name);
    s->y = tn_idx_load(p, TN_I64, 1.0);
    s->n = s->y ? tn_shape(s->y)[0] : 0;
    if (img && s->y && (tn_ndim(img) != 3 || tn_shape(img)[0] != s->n))
        fprintf(stderr, "tenet-cnn: %s: images and labels do not match\n", dir);
    else if (img)
        s->x = tn_unsqueeze(img, 1);
    tn_release(img);
    return s->x && s->y;
}

/* The rows idx[0..n) of a split, on dev (scope-owned). */
static bool batch_of(const split *s, const int64_t *idx, int64_t n, tn_device dev, tn_tensor **x,
                     tn_tensor **y) {
    tn_tensor *i = tn_tensor_from(idx, TN_I64, 1, &n, false);
    *x = tn_to(tn_index_select(s->x, 0, i), TN_DTYPE_SAME, dev);
    *y = tn_to(tn_index_select(s->y, 0, i), TN_DTYPE_SAME, dev);
    return *x && *y;
}

/* ---- options ------------------------------------------------------------------ */

typedef struct options {
    int epochs, batch, threads, steps;
    double lr, rtol, stats_tol;
    uint64_t seed;
    bool cosine;
    tn_device dev;
    const char *data, *init, *save, *batches, *expect, *expect_stats;
} options;

static int fail(const char *what) {
    fprintf(stderr, "tenet-cnn: %s: %s: %s\n", what, tn_status_string(tn_last_status()),
            tn_last_error());
    return 1;
}

static void usage(void) {
    fprintf(stderr, "usage: tenet-cnn [--data DIR] [--epochs E] [--batch B] [--lr X] [--cosine]\n"
                    "  [--seed S] [--threads N] [--device cpu|cuda] [--init FILE] [--save FILE]\n"
                    "  [--steps N] [--batches FILE] [--expect-losses FILE] [--rtol X]\n"
                    "  [--expect-stats FILE] [--stats-tol X] [--distributed] [--profile[=PATH]]\n");
}

static bool parse_value(const char *flag, const char *v, int *i, double *d) {
    char *end;
    if (i) {
        long x = strtol(v, &end, 10);
        if (*end || x < 0 || x > 1 << 24) goto bad;
        *i = (int)x;
    } else {
        *d = strtod(v, &end);
        if (*end || !(*d >= 0)) goto bad;
    }
    return true;
bad:
    fprintf(stderr, "tenet-cnn: %s: bad value '%s'\n", flag, v);
    return false;
}

static bool parse_args(int argc, char **argv, options *o) {
    *o = (options){.epochs = 3,
                   .batch = 128,
                   .lr = 0.05,
                   .rtol = 1e-4,
                   .stats_tol = 1e-5,
                   .seed = 1,
                   .data = "/usr/share/datasets/fashion-mnist"};
    struct {
        const char *name;
        int *i;
        double *d;
        const char **s;
    } flags[] = {{"--epochs", &o->epochs, 0, 0},
                 {"--batch", &o->batch, 0, 0},
                 {"--threads", &o->threads, 0, 0},
                 {"--steps", &o->steps, 0, 0},
                 {"--lr", 0, &o->lr, 0},
                 {"--rtol", 0, &o->rtol, 0},
                 {"--stats-tol", 0, &o->stats_tol, 0},
                 {"--data", 0, 0, &o->data},
                 {"--init", 0, 0, &o->init},
                 {"--save", 0, 0, &o->save},
                 {"--batches", 0, 0, &o->batches},
                 {"--expect-losses", 0, 0, &o->expect},
                 {"--expect-stats", 0, 0, &o->expect_stats}};
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--cosine")) {
            o->cosine = true;
            continue;
        }
        if (a + 1 < argc && !strcmp(argv[a], "--seed")) {
            o->seed = strtoull(argv[++a], NULL, 10);
            continue;
        }
        if (a + 1 < argc && !strcmp(argv[a], "--device")) {
            const char *v = argv[++a];
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
                fprintf(stderr, "tenet-cnn: --device: cpu or cuda, not '%s'\n", v);
                return false;
            }
            o->dev = strcmp(v, "cuda") ? TN_DEVICE_CPU : TN_DEVICE_CUDA(0);
            continue;
        }
        size_t k = 0, nf = sizeof flags / sizeof flags[0];
        while (k < nf && strcmp(argv[a], flags[k].name))
            k++;
        if (k == nf || a + 1 >= argc) {
            fprintf(stderr, "tenet-cnn: %s '%s'\n", k == nf ? "unknown option" : "no value for",
                    argv[a]);
            usage();
            return false;
        }
        const char *v = argv[++a];
        if (flags[k].s)
            *flags[k].s = v;
        else if (!parse_value(flags[k].name, v, flags[k].i, flags[k].d))
            return false;
    }
    const char *bad = o->batch < 1 || o->epochs < 1 ? "--batch and --epochs must be positive"
                      : o->batches && !o->steps     ? "--batches needs --steps N"
                      : (o->expect || o->expect_stats) && !o->batches
                          ? "--expect-losses and --expect-stats need --batches (PyTorch's)"
                      : o->batches && dist_world > 1
                          ? "--batches runs one process (the batch norms would see a share)"
                      : o->batch % dist_world
                          ? "--distributed: --batch must split over the processes"
                          : NULL;
    if (bad) {
        fprintf(stderr, "tenet-cnn: %s\n", bad);
        usage();
    }
    return !bad;
}

/* ---- training ----------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A whole file of little-endian int64 (*n of them), or NULL (reported). */
static int64_t *read_int64s(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    int64_t *v = NULL;
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        size % 8 == 0 && (v = malloc((size_t)size + 8)) &&
        fread(v, 1, (size_t)size, f) != (size_t)size) {
        free(v);
        v = NULL;
    }
    if (f) fclose(f);
    if (!v) fprintf(stderr, "tenet-cnn: cannot read %s (little-endian int64s)\n", path);
    *n = size / 8;
    return v;
}

static void progress(int epoch, int64_t step, int64_t steps, double loss, double elapsed) {
    if (!isatty(STDOUT_FILENO)) return;
    int bar = (int)(30 * (step + 1) / steps);
    double eta = elapsed / (double)(step + 1) * (double)(steps - step - 1);
    printf("\repoch %d [%.*s%*s] %lld/%lld loss %.4f ETA %dm%02ds ", epoch, bar,
           "##############################", 30 - bar, "", (long long)step + 1, (long long)steps,
           loss, (int)eta / 60, (int)eta % 60);
    fflush(stdout);
}

/* Test accuracy (eval mode: the running statistics), under no-grad. */
static int evaluate(const cnn *m, const split *test, const options *o, double *acc) {
    bool prev = tn_set_grad_enabled(false);
    int64_t right = 0, *idx = malloc(1000 * sizeof *idx);
    int rc = idx ? 0 : fail("evaluating");
    for (int64_t at = 0; rc == 0 && at < test->n; at += 1000) {
        int64_t n = test->n - at < 1000 ? test->n - at : 1000;
        for (int64_t i = 0; i < n; i++)
            idx[i] = at + i;
        double c = 0;
        if (tn_scope_begin() != TN_OK) {
            rc = fail("opening a scope");
            break;
        }
        tn_tensor *x, *y;
        if (!batch_of(test, idx, n, o->dev, &x, &y) ||
            tn_item(tn_sum(tn_eq(tn_argmax_dim(cnn_forward(m, x, false), 1, false), y)), &c) !=
                TN_OK)
            rc = fail("evaluating");
        tn_scope_end();
        right += (int64_t)c;
    }
    free(idx);
    tn_set_grad_enabled(prev);
    *acc = (double)right / (double)test->n;
    return rc;
}

/* The steps of one epoch: the sampler's share of this process, or the
 * --batches file's; `order` holds the indices, `nb` the batches. */
typedef struct plan {
    int64_t *order, count, nb, local; /* count indices in nb batches of local (the last fewer) */
} plan;

static bool plan_epoch(plan *p, const options *o, int64_t n, int epoch) {
    free(p->order);
    p->local = o->batch / dist_world;
    int64_t count = tn_sampler_indices(n, dist_world, dist_rank, o->seed, epoch, true, false, NULL);
    p->order = count >= 0 ? malloc((size_t)(count + 1) * sizeof *p->order) : NULL;
    if (!p->order ||
        tn_sampler_indices(n, dist_world, dist_rank, o->seed, epoch, true, false, p->order) < 0)
        return false;
    p->count = count;
    p->nb = (count + p->local - 1) / p->local;
    return true;
}

static int compare_loss(const options *o, const double *ref, int64_t s, double loss,
                        double *worst) {
    double rel = fabs(loss - ref[s]) / fabs(ref[s]);
    *worst = rel > *worst ? rel : *worst;
    if (rel <= o->rtol) return 0;
    fprintf(stderr,
            "tenet-cnn: step %lld: loss %.8f, the reference's %.8f: relative difference %.3g "
            "above %.3g\n",
            (long long)s, loss, ref[s], rel, o->rtol);
    return 1;
}

/* The batch norms' running statistics against the reference's file. */
static int compare_stats(const cnn *m, const options *o) {
    tn_state_dict *sd = tn_load(o->expect_stats);
    if (!sd) return fail("loading --expect-stats");
    static const int which[] = {B1_MEAN, B1_VAR, B2_MEAN, B2_VAR};
    double worst = 0;
    int rc = 0;
    for (int k = 0; k < 4 && rc == 0; k++) {
        int64_t c = tn_shape(m->t[which[k]])[0];
        float *got = malloc((size_t)c * sizeof *got), *want = malloc((size_t)c * sizeof *want);
        tn_tensor *ref = tn_state_dict_get(sd, cnn_names[which[k]]);
        if (!got || !want || !ref ||
            tn_copy_to(m->t[which[k]], got, (size_t)c * sizeof *got) != TN_OK ||
            tn_copy_to(ref, want, (size_t)c * sizeof *want) != TN_OK)
            rc = fail("reading the running statistics");
        for (int64_t i = 0; rc == 0 && i < c; i++) {
            double d = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
            worst = d > worst ? d : worst;
            if (!(d <= o->stats_tol)) {
                fprintf(stderr, "tenet-cnn: %s[%lld]: %.8g, the reference's %.8g\n",
                        cnn_names[which[k]], (long long)i, got[i], want[i]);
                rc = 1;
            }
        }
        tn_release(ref);
        free(got);
        free(want);
    }
    tn_state_dict_free(sd);
    if (rc == 0)
        printf("running statistics within %.3g of the reference (largest difference %.3g)\n",
               o->stats_tol, worst);
    return rc;
}

/* One epoch (or the --batches steps); 0, or 1 on an error or a mismatch. */
static int train_epoch(const cnn *m, tn_sgd *opt, const split *train, const options *o, int epoch,
                       const int64_t *file, const double *ref, int64_t *step) {
    plan p = {0};
    if (!file && !plan_epoch(&p, o, train->n, epoch)) {
        free(p.order);
        return fail("drawing the epoch's order");
    }
    const int64_t nb = file ? o->steps : p.nb;
    const int64_t total = o->steps ? o->steps : (int64_t)o->epochs * p.nb; /* for --cosine */
    double t0 = now_s(), sum = 0, worst = 0;
    int64_t seen = 0, ran = 0;
    int rc = 0;
    for (int64_t b = 0; b < nb && rc == 0 && !(o->steps && *step >= o->steps); b++, ++*step) {
        const int64_t *idx = file ? file + b * o->batch : p.order + b * p.local;
        int64_t n = file                              ? o->batch
                    : p.count - b * p.local < p.local ? p.count - b * p.local
                                                      : p.local;
        if (o->cosine)
            tn_sgd_set_lr(opt, 0.5 * o->lr * (1 + cos(acos(-1.0) * (double)*step / (double)total)));
        if (tn_scope_begin() != TN_OK) return fail("opening a scope");
        double loss = 0;
        tn_tensor *x, *y;
        if (!batch_of(train, idx, n, o->dev, &x, &y) || !cnn_step(m, opt, x, y, &loss))
            rc = fail("training step");
        tn_scope_end();
        if (rc == 0 && dist_on) { /* the global batch's loss: the mean of the ranks' */
            rc = dist_sum(&loss, 1) ? 0 : fail("averaging the loss");
            loss /= dist_world;
        }
        sum += loss * (double)n;
        seen += n;
        ran++;
        if (file) printf("step %lld loss %.6f\n", (long long)*step, loss);
        if (ref && rc == 0) rc = compare_loss(o, ref, *step, loss, &worst);
        if (!file) progress(epoch + 1, b, nb, loss, now_s() - t0);
    }
    double secs = now_s() - t0;
    if (ref && rc == 0)
        printf("every loss within %.3g of the reference (largest relative difference %.3g)\n",
               o->rtol, worst);
    if (!file && rc == 0) {
        if (isatty(STDOUT_FILENO)) printf("\r%*s\r", 100, "");
        printf("epoch %d: train loss %.4f, %.1f s (%.1f ms/step)", epoch + 1, sum / (double)seen,
               secs, 1e3 * secs / (double)(ran > 0 ? ran : 1));
        fflush(stdout);
    }
    free(p.order);
    return rc;
}

static int train(const cnn *m, const split *train_set, const split *test, const options *o) {
    tn_sgd *opt = tn_sgd_new(N_PARAMS, m->t, o->lr, 0.9, 5e-4);
    if (!opt) return fail("making the optimizer");
    int64_t nfile = 0, step = 0;
    int64_t *file = o->batches ? read_int64s(o->batches, &nfile) : NULL;
    double *ref = o->expect ? read_losses("tenet-cnn", o->expect, o->steps) : NULL;
    int rc = (o->batches && !file) || (o->expect && !ref) ? 1 : 0;
    if (rc == 0 && file && nfile < (int64_t)o->steps * o->batch) {
        fprintf(stderr, "tenet-cnn: %s holds %lld indices, fewer than --steps x --batch\n",
                o->batches, (long long)nfile);
        rc = 1;
    }
    for (int64_t i = 0; rc == 0 && i < nfile; i++)
        if (file[i] < 0 || file[i] >= train_set->n) {
            fprintf(stderr, "tenet-cnn: %s: index %lld outside the training set\n", o->batches,
                    (long long)file[i]);
            rc = 1;
        }
    for (int e = 0; rc == 0 && e < (file ? 1 : o->epochs); e++) {
        rc = train_epoch(m, opt, train_set, o, e, file, ref, &step);
        if (rc == 0 && !file && dist_rank == 0) {
            double acc;
            rc = evaluate(m, test, o, &acc);
            if (rc == 0) printf(", test accuracy %.2f%%\n", 100 * acc);
            fflush(stdout); /* a line per epoch, also into a file or a pipe */
        }
        if (o->steps && step >= o->steps) break;
    }
    if (rc == 0 && o->expect_stats) rc = compare_stats(m, o);
    free(file);
    free(ref);
    tn_sgd_free(opt);
    return rc;
}

static bool have_data(const char *dir) {
    static const char *const files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (access(p, R_OK) != 0) {
            fprintf(stderr,
                    "tenet-cnn: %s is missing (Debian: apt-get install "
                    "dataset-fashion-mnist, or give --data DIR)\n",
                    p);
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv) {
    profile_flag(&argc, argv);                           /* --profile[=PATH] */
    if (!dist_flag(&argc, &argv, "tenet-cnn")) return 1; /* --distributed */
    options o;
    if (!parse_args(argc, argv, &o)) return 2;
    if (o.threads > 0) tn_set_num_threads(o.threads);
    if (o.dev.type == TN_CUDA && !tn_cuda_is_available()) {
        fprintf(stderr, "tenet-cnn: --device cuda: no CUDA device (none found, or tenet was "
                        "built without CUDA)\n");
        return 3;
    }
    if (!have_data(o.data)) return 77;
    split train_set = {0}, test = {0};
    cnn m = {{0}};
    int rc = split_load(&train_set, o.data, "train") && split_load(&test, o.data, "t10k")
                 ? 0
                 : fail("loading the data");
    tn_manual_seed(o.seed);
    if (rc == 0 && !cnn_init(&m)) rc = fail("initialising the model");
    if (rc == 0 && o.init && !cnn_load(&m, o.init)) rc = fail("loading --init");
    if (rc == 0 && o.dev.type != TN_CPU && !cnn_to(&m, o.dev)) rc = fail("moving the model");
#ifdef TENET_EXAMPLES_MPI
    tn_ddp *ddp = NULL; /* gradients averaged over the processes during backward */
    if (rc == 0 && dist_on && !(ddp = tn_ddp_new(m.t, N_PARAMS, 0))) rc = fail("tn_ddp_new");
#endif
    if (rc == 0) {
        printf("tenet-cnn: Fashion-MNIST, %lld training and %lld test images; batch %d, lr %g%s, "
               "%d threads%s",
               (long long)train_set.n, (long long)test.n, o.batch, o.lr,
               o.cosine ? " (cosine)" : "", tn_get_num_threads(),
               o.dev.type == TN_CUDA ? ", on cuda:0" : "");
        if (dist_on) printf(", %d processes of %d rows", dist_world, o.batch / dist_world);
        printf("\n");
        rc = train(&m, &train_set, &test, &o);
    }
    if (rc == 0 && o.save && dist_rank == 0 && !cnn_save(&m, o.save)) rc = fail("saving --save");
#ifdef TENET_EXAMPLES_MPI
    tn_ddp_free(ddp);
#endif
    cnn_free(&m);
    tn_release(train_set.x);
    tn_release(train_set.y);
    tn_release(test.x);
    tn_release(test.y);
    return rc;
}
