/* tenet-bench — named performance cases with PyTorch's figures in mind.
 *
 *   tenet-bench [--case NAME[,NAME...]]... [--threads N] [--repeat R]
 *               [--warmup W] [--json] [--quick] [--list] [--data PATH]
 *               [--max-user-threads T] [--iters N]
 *
 * docs/performance.md describes the cases, the last table and how to
 * reproduce it.
 *
 * Every figure: calibration (small cases loop until a run lasts long enough
 * to time), W warm-up runs, R timed runs, then median and min-max in a unit
 * people read. bench/compare_torch.py runs the same cases in PyTorch.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tenet/debug.h>
#include <tenet/profile.h>

static const bench_case CASES[] = {
    {"triad", "STREAM-style triad a = b + s*c, 64 Mi float32, OpenMP: the bandwidth limit",
     bench_triad, false},
    {"fma_peak", "independent AVX FMAs on every thread: the float32 FLOP limit", bench_fma_peak,
     false},
    {"add64", "tn_add_out of two 64 Mi float32 tensors into a preallocated output", bench_add64,
     true},
    {"sum64", "tn_sum of 64 Mi float32", bench_sum64, true},
    {"copy_t", "tn_contiguous of a transposed 8192x8192 float32 tensor", bench_copy_t, false},
    {"add16", "tn_add of two 16-element tensors: per-op overhead", bench_add16, false},
    {"tiny", "y = sigmoid(x*2).sum(); backward, 16 elements", bench_tiny, false},
    {"chain100", "100 x (y*a+b) on 16 elements, forward+backward, per op pair", bench_chain100,
     false},
    {"op16_modes",
     "(x + a) * b on 16 elements, x requiring grad: per op in grad mode, no-grad and inference "
     "mode",
     bench_op16_modes, false},
    {"add_1000", "in-place tn_add_ on 1,000 float32", bench_add_inplace, false},
    {"sgemm1024", "tn_matmul 1024x1024 float32", bench_sgemm1024, false},
    {"sgemm2048", "tn_matmul 2048x2048 float32", bench_sgemm2048, false},
    {"sgemm4096", "tn_matmul 4096x4096 float32 (GPU: no TF32)", bench_sgemm4096, true},
    {"bf16gemm2048", "tn_matmul 2048x2048 bfloat16 (float32 accumulation)", bench_bf16gemm2048,
     true},
    {"hgemm2048", "tn_matmul 2048x2048 float16 (float32 accumulation)", bench_hgemm2048, true},
    {"mlp",
     "MLP training step 256x784->256->10, ReLU, cross-entropy, SGD "
     "(--device cuda: batch 4096, 784->1024->10)",
     bench_mlp, true},
    {"tiny_anomaly", "tiny with anomaly mode on, as a ratio to off", bench_tiny_anomaly, false},
    {"tiny_anomaly_nan", "tiny with anomaly mode and its NaN/Inf checks on, as a ratio to off",
     bench_tiny_anomaly_nan, false},
    {"chain100_anomaly", "chain100 with anomaly mode on, as a ratio to off", bench_chain100_anomaly,
     false},
    {"chain100_profile", "chain100 with the timeline profiler on, as a ratio to off",
     bench_chain100_profile, false},
    {"mlp_anomaly", "mlp with anomaly mode on, as a ratio to off", bench_mlp_anomaly, true},
    {"mlp_anomaly_nan", "mlp with anomaly mode and its NaN/Inf checks on, as a ratio to off",
     bench_mlp_anomaly_nan, true},
    {"mlp_monitor", "mlp with the gradient monitor on, as a ratio to off", bench_mlp_monitor, true},
    {"mlp_profile", "mlp with the timeline profiler on, as a ratio to off", bench_mlp_profile,
     true},
    {"mlp_threads", "independent MLP steps on 1..T user threads (1 op thread each)",
     bench_mlp_threads, false},
    {"clip_norm",
     "tn_clip_grad_norm_ (2-norm, no clipping) over 49 gradients, 29.1 M float32 (4 GPT-2 small "
     "blocks)",
     bench_clip_norm, true},
    {"digits", "the digits demo: 64-128-10 MLP, batch 64, 30 epochs, seconds + accuracy",
     bench_digits, false},
    {"embedding",
     "tn_embedding of 16x64 ids into (96, 128) and (50257, 768) float32: forward "
     "GB/s, backward us",
     bench_embedding, true},
    {"layer_norm", "layer_norm (1024x128 float32, weight, bias) forward + backward",
     bench_layer_norm, true},
    {"conv2d", "conv2d forward, x (32, 64, 56, 56) float32, 3x3 weight 64->64, bias, padding 1",
     bench_conv2d, true},
    {"max_pool2d", "max_pool2d 2x2 on x (128, 32, 28, 28) float32, forward + backward",
     bench_max_pool2d, true},
    {"batch_norm2d",
     "batch_norm training (weight, bias, running statistics) on x (128, 32, 28, 28) and (128, 64, "
     "14, 14) float32, forward + backward",
     bench_batch_norm2d, true},
    {"gelu_tanh", "gelu (tanh form) on 1024x128 float32, forward + backward", bench_gelu, true},
    {"attention",
     "scaled_dot_product_attention forward+backward, q,k,v (16,4,L,32) float32 causal, "
     "L = 256 and 64",
     bench_attention, false},
    {"gpt_step",
     "GPT-2 training step: vocab 96, block 64, 4 layers, 4 heads, embd 128, batch 16, AdamW + "
     "clipping",
     bench_gpt_step, true},
    {"gpt_step_bf16", "gpt_step with the forward under autocast bfloat16", bench_gpt_step_bf16,
     true},
    {"gpt2_step",
     "GPT-2 small's dimensions: 12 layers, 12 heads, embd 768, block 256, batch 4, vocab 96, "
     "float32; tokens/s and the products' GFLOP/s",
     bench_gpt2_step, false},
    {"gpt2_step_bf16", "gpt2_step with the forward under autocast bfloat16", bench_gpt2_step_bf16,
     false},
    {"gpt_step_anomaly_nan", "gpt_step with anomaly mode and its NaN/Inf checks, as a ratio to off",
     bench_gpt_step_anomaly_nan, true},
    {"gpt_step_monitor", "gpt_step with the gradient monitor on, as a ratio to off",
     bench_gpt_step_monitor, true},
    {"gpt_step_numerics",
     "gpt_step with the numerics recorder on (summaries and call sites, to /dev/null), as a ratio "
     "to off",
     bench_gpt_step_numerics, true},
    {"cnn_step",
     "Fashion-MNIST CNN training step (examples/cnn_model.h): batch 128, conv-BN-ReLU-pool x2, "
     "linear x2, SGD momentum",
     bench_cnn_step, true},
    {"gpt_generate",
     "GPT-2 generation (12 layers, 12 heads, embd 768, block 256, vocab 96) with a KV cache: "
     "64-token prompt, greedy to position 256, batch 1 and 16; tokens/s",
     bench_gpt_generate, false},
    {"gpt_generate_bf16",
     "gpt_generate with the weights (so the activations and the KV cache) in "
     "bfloat16",
     bench_gpt_generate_bf16, false},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

static bool g_json;

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tn_tensor *bench_on(const bench_opts *o, tn_tensor *t) {
    if (!t || tn_device_of(t).type == o->device.type) return t;
    tn_tensor *d = tn_to(t, TN_DTYPE_SAME, o->device);
    tn_release(t);
    return d;
}

/* One call of the body, finished on the device. */
static int body_run(const bench_opts *o, bench_fn fn, void *state, int64_t iters) {
    if (fn(state, iters) < 0) return -1;
    if (o->device.type != TN_CPU && tn_synchronize(o->device) < 0)
        return bench_fail("bench", "tn_synchronize");
    return 0;
}

int64_t bench_time(const bench_opts *o, bench_fn fn, void *state, double min_run_s, double *secs) {
    if (o->quick) min_run_s /= 20;
    int64_t iters = o->iters > 0 ? o->iters : 1;
    while (o->iters <= 0) { /* calibration doubles as the first warm-up */
        double t0 = bench_now();
        if (body_run(o, fn, state, iters) < 0) return -1;
        double t = bench_now() - t0;
        if (t >= min_run_s || iters >= ((int64_t)1 << 40)) break;
        double grow = t > 0 ? 1.3 * min_run_s / t : 1000;
        iters = (int64_t)((double)iters * (grow < 2 ? 2 : grow > 1000 ? 1000 : grow));
    }
    for (int w = 0; w < o->warmup; w++)
        if (body_run(o, fn, state, iters) < 0) return -1;
    for (int r = 0; r < o->repeat; r++) {
        double t0 = bench_now();
        if (body_run(o, fn, state, iters) < 0) return -1;
        secs[r] = (bench_now() - t0) / (double)iters;
    }
    return iters;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_stats(bench_result *r, const double *v, int n) {
    double s[BENCH_MAX_RUNS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    r->runs = n;
    r->min = s[0];
    r->max = s[n - 1];
    r->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

void bench_extra(bench_result *r, const char *key, double value) {
    size_t len = strlen(r->extra);
    snprintf(r->extra + len, sizeof r->extra - len, ", \"%s\": %.6g", key, value);
}

void bench_extra_str(bench_result *r, const char *key, const char *value) {
    size_t len = strlen(r->extra);
    snprintf(r->extra + len, sizeof r->extra - len, ", \"%s\": \"%s\"", key, value);
}

void bench_emit(const bench_result *r) {
    if (g_json)
        printf("{\"name\": \"%s\", \"unit\": \"%s\", \"higher_is_better\": %s, \"median\": %.6g, "
               "\"min\": %.6g, \"max\": %.6g, \"runs\": %d, \"threads\": %d, \"isa\": \"%s\"%s}\n",
               r->name, r->unit, r->higher_is_better ? "true" : "false", r->median, r->min, r->max,
               r->runs, tn_get_num_threads(), tn_cpu_capability(), r->extra);
    else
        printf("%-22s %12.4g %-10s  [%.4g .. %.4g]  runs %d%s\n", r->name, r->median, r->unit,
               r->min, r->max, r->runs, r->extra);
    fflush(stdout);
}

int bench_fail(const char *case_name, const char *what) {
    fprintf(stderr, "tenet-bench: %s: %s failed: %s: %s\n", case_name, what,
            tn_status_string(tn_last_status()), tn_last_error());
    return -1;
}

int bench_time_pair(const bench_opts *o, bench_fn fn, void *state, double min_run_s,
                    void (*set_mode)(bool), double *secs_off, double *secs_on) {
    /* Calibrate and warm up in both modes, then alternate so that drift in
     * the machine's load hits both sides alike. */
    bench_opts one = *o;
    one.repeat = 1;
    double t;
    set_mode(true);
    if (bench_time(&one, fn, state, min_run_s, &t) < 0) return -1;
    set_mode(false);
    int64_t iters = bench_time(&one, fn, state, min_run_s, &t);
    if (iters < 0) return -1;
    for (int r = 0; r < o->repeat; r++) {
        for (int mode = 0; mode < 2; mode++) {
            set_mode(mode == 1);
            double t0 = bench_now();
            if (fn(state, iters) < 0) return -1;
            (mode ? secs_on : secs_off)[r] = (bench_now() - t0) / (double)iters;
        }
    }
    set_mode(false);
    return 0;
}

static bool g_check_nan;
static void anomaly_mode(bool on) { tn_set_detect_anomaly(on, on && g_check_nan); }

/* A mode's cost: runs alternate off/on, ratio on/off per pair. */
int bench_mode_ratio(const bench_opts *o, const char *name, bench_fn body, void *state,
                     double min_run_s, double per, const char *unit_off, void (*set_mode)(bool)) {
    double off[BENCH_MAX_RUNS], on[BENCH_MAX_RUNS], v[BENCH_MAX_RUNS];
    int rc = bench_time_pair(o, body, state, min_run_s, set_mode, off, on);
    set_mode(false);
    if (rc < 0) return -1;
    bench_result r = {.unit = "x slower", .higher_is_better = false};
    snprintf(r.name, sizeof r.name, "%s", name);
    for (int i = 0; i < o->repeat; i++)
        v[i] = on[i] / off[i];
    bench_stats(&r, v, o->repeat);
    bench_result t_off = r, t_on = r; /* medians of the raw times, for the record */
    for (int i = 0; i < o->repeat; i++)
        v[i] = off[i] / per;
    bench_stats(&t_off, v, o->repeat);
    for (int i = 0; i < o->repeat; i++)
        v[i] = on[i] / per;
    bench_stats(&t_on, v, o->repeat);
    double scale = !strcmp(unit_off, "ms") ? 1e3 : 1e6;
    char key[32];
    snprintf(key, sizeof key, "off_%s", unit_off);
    bench_extra(&r, key, scale * t_off.median);
    snprintf(key, sizeof key, "on_%s", unit_off);
    bench_extra(&r, key, scale * t_on.median);
    bench_emit(&r);
    return 0;
}

/* The timeline profiler recording every op and node (a run's recording is
 * discarded when it ends). */
void bench_profile_mode(bool on) {
    if (on && !tn_profile_enabled()) tn_profile_begin();
    if (!on && tn_profile_enabled()) tn_profile_end(NULL);
}

int bench_profile_ratio(const bench_opts *o, const char *name, bench_fn body, void *state,
                        double min_run_s, double per, const char *unit_off) {
    return bench_mode_ratio(o, name, body, state, min_run_s, per, unit_off, bench_profile_mode);
}

/* Anomaly mode's cost. A name ending in "_nan" turns check_nan on with it. */
int bench_anomaly_ratio(const bench_opts *o, const char *name, bench_fn body, void *state,
                        double min_run_s, double per, const char *unit_off) {
    size_t len = strlen(name);
    g_check_nan = len > 4 && !strcmp(name + len - 4, "_nan");
    return bench_mode_ratio(o, name, body, state, min_run_s, per, unit_off, anomaly_mode);
}

/* ---- options --------------------------------------------------------------- */

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s [--case NAME[,NAME...]]... [--threads N] [--repeat R] [--warmup W]\n"
            "          [--json] [--quick] [--list] [--data PATH] [--max-user-threads T]\n"
            "          [--iters N] [--device cpu|cuda]\n"
            "  --case     cases to run (repeatable or comma-separated; default: all)\n"
            "  --threads  op threads (tn_set_num_threads; default: the online CPUs)\n"
            "  --repeat   timed runs per figure (default 7)\n"
            "  --warmup   warm-up runs after calibration (default 2)\n"
            "  --json     one JSON object per figure on stdout\n"
            "  --quick    tiny runs: checks that every case works, measures nothing\n"
            "  --list     names and descriptions of the cases\n"
            "  --data     digits dataset (default: the source tree's data/digits.csv.gz)\n"
            "  --max-user-threads  mlp_threads runs 1..T threads (default: 2 x CPUs)\n"
            "  --iters    fixed iterations per run instead of calibrating (for callgrind)\n"
            "  --device   cuda: the GPU cases (add64 sum64 sgemm4096 mlp mlp_anomaly) on cuda:0\n",
            argv0);
}

static bool parse_int(const char *s, int lo, int *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || v < lo || v > 1 << 20) return false;
    *out = (int)v;
    return true;
}

/* Marks the cases named in a comma list; false on an unknown name. */
static bool select_cases(const char *list, bool *sel) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < N_CASES && strcmp(CASES[i].name, tok))
            i++;
        if (i == N_CASES) {
            fprintf(stderr, "tenet-bench: unknown case '%s' (--list shows them)\n", tok);
            return false;
        }
        sel[i] = true;
    }
    return true;
}

/* Parses one option at argv[*i] (advancing *i past its value); false on error. */
static bool parse_option(int argc, char **argv, int *i, bench_opts *o, bool *sel, bool *any) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int n;
    if (!strcmp(a, "--json")) return g_json = true;
    if (!strcmp(a, "--quick")) return o->quick = true;
    ++*i; /* every other option takes a value */
    if (!strcmp(a, "--case")) return v && select_cases(v, sel) && (*any = true);
    if (!strcmp(a, "--threads")) return parse_int(v, 1, &o->threads);
    if (!strcmp(a, "--repeat")) return parse_int(v, 1, &o->repeat) && o->repeat <= BENCH_MAX_RUNS;
    if (!strcmp(a, "--warmup")) return parse_int(v, 0, &o->warmup);
    if (!strcmp(a, "--max-user-threads")) return parse_int(v, 1, &o->max_user_threads);
    if (!strcmp(a, "--iters")) return parse_int(v, 1, &n) && (o->iters = n);
    if (!strcmp(a, "--data")) return (o->data = v) != NULL;
    if (!strcmp(a, "--device")) {
        if (v && !strcmp(v, "cpu")) return o->device = (tn_device){TN_CPU, 0}, true;
        if (v && !strcmp(v, "cuda")) return o->device = TN_DEVICE_CUDA(0), true;
        return false;
    }
    return false;
}

int main(int argc, char **argv) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    bench_opts o = {
        .threads = ncpu > 0 ? (int)ncpu : 1, .repeat = 7, .warmup = 2, .data = TENET_BENCH_DATA};
    o.max_user_threads = 2 * o.threads;
    bool sel[N_CASES] = {0}, any = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            for (int c = 0; c < N_CASES; c++)
                printf("%-18s %s\n", CASES[c].name, CASES[c].help);
            return 0;
        }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout, argv[0]);
            return 0;
        }
        const char *a = argv[i];
        if (!parse_option(argc, argv, &i, &o, sel, &any)) {
            fprintf(stderr, "tenet-bench: bad option or value: %s%s%s\n", a, i < argc ? " " : "",
                    i < argc && argv[i] != a ? argv[i] : "");
            usage(stderr, argv[0]);
            return 2;
        }
    }
    tn_set_num_threads(o.threads);
    if (o.device.type == TN_CUDA && !tn_cuda_is_available()) {
        fprintf(stderr, "tenet-bench: --device cuda: no CUDA device (%s)\n",
                tn_cuda_device_count() ? "" : "none found, or built without CUDA");
        return 1;
    }
    if (!g_json)
        printf("tenet-bench: %d op thread(s), %d timed run(s) per figure, %s CPU kernels%s\n",
               o.threads, o.repeat, tn_cpu_capability(),
               o.quick ? " (quick: not a measurement)" : "");
    int failed = 0;
    for (int c = 0; c < N_CASES; c++) {
        if (any ? !sel[c] : o.device.type == TN_CUDA && !CASES[c].on_cuda) continue;
        if (o.device.type == TN_CUDA && !CASES[c].on_cuda) {
            fprintf(stderr, "tenet-bench: %s runs on the CPU only; skipped\n", CASES[c].name);
            continue;
        }
        /* A case that failed may have left anomaly mode on. */
        tn_set_detect_anomaly(false, false);
        if (CASES[c].run(&o) < 0) failed++;
        tn_clear_error();
    }
    return failed ? 1 : 0;
}
