/* bench/bench.h — the harness shared by tenet-bench's case files.
 *
 * A case sets up its data, times a body with bench_time() (calibration,
 * warm-up, R timed runs), converts each run's time into the unit people read
 * (GB/s, GFLOP/s, µs/op, ms/step) and emits one result per figure with
 * bench_emit(). A result carries the median, min and max over the runs and
 * optional extra fields (JSON key/value pairs) such as the raw time.
 */
#ifndef TENET_BENCH_H
#define TENET_BENCH_H

#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_barrier */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tenet.h>

#define BENCH_MAX_RUNS 1000

typedef struct bench_opts {
    int threads;          /* tn_set_num_threads and OpenMP threads of the raw kernels */
    int repeat;           /* timed runs per figure (>= 1) */
    int warmup;           /* untimed runs after calibration */
    bool quick;           /* small sizes and short runs: a smoke test, not a measurement */
    int max_user_threads; /* mlp_threads goes 1..this */
    int64_t iters;        /* > 0: fixed iterations per run, no calibration (for profilers) */
    const char *data;     /* digits.csv.gz */
    tn_device device;     /* --device: where the tensors of the device-aware cases live */
} bench_opts;

typedef struct bench_result {
    char name[64];
    const char *unit;
    bool higher_is_better;
    double median, min, max;
    int runs;
    char extra[1024]; /* ", \"key\": value" pairs, JSON */
} bench_result;

/* Runs the timed body `iters` times; returns 0, or -1 after printing why.
 * On a GPU the body only enqueues: bench_time waits for the device after
 * each call, so a run's time covers the work itself. */
typedef int (*bench_fn)(void *state, int64_t iters);

double bench_now(void);
/* Calibrates the iteration count so that one run lasts >= min_run_s (quick
 * mode divides it by 20), warms up, then times o->repeat runs. secs[i] is
 * the time of ONE iteration in run i. Returns the iteration count, or -1. */
int64_t bench_time(const bench_opts *o, bench_fn fn, void *state, double min_run_s, double *secs);
/* As bench_time for two modes of the same body (set_mode(false/true)):
 * runs alternate off/on so that load drift hits both alike. */
int bench_time_pair(const bench_opts *o, bench_fn fn, void *state, double min_run_s,
                    void (*set_mode)(bool), double *secs_off, double *secs_on);
/* Anomaly mode's cost on body: emits `name` as the median on/off ratio, with
 * the medians of both (per `per` units, in unit_off: "us" or "ms") as extras.
 * A name ending in "_nan" measures anomaly mode with check_nan. */
int bench_anomaly_ratio(const bench_opts *o, const char *name, bench_fn body, void *state,
                        double min_run_s, double per, const char *unit_off);
/* The cost of any mode switched by set_mode(true/false), as bench_anomaly_ratio. */
int bench_mode_ratio(const bench_opts *o, const char *name, bench_fn body, void *state,
                     double min_run_s, double per, const char *unit_off, void (*set_mode)(bool));
/* The timeline profiler switched on (a run's recording is discarded when it
 * ends), and its cost on body as bench_anomaly_ratio. */
void bench_profile_mode(bool on);
int bench_profile_ratio(const bench_opts *o, const char *name, bench_fn body, void *state,
                        double min_run_s, double per, const char *unit_off);
/* Fills r's statistics from the per-run values v[0..n) (already in r->unit). */
void bench_stats(bench_result *r, const double *v, int n);
/* Appends `"key": value` to r->extra. */
void bench_extra(bench_result *r, const char *key, double value);
void bench_extra_str(bench_result *r, const char *key, const char *value);
/* Prints the result (JSON line or table row, as the options say). */
void bench_emit(const bench_result *r);
/* Prints "tenet-bench: <case>: <what> failed: <tenet's error>" and returns -1. */
int bench_fail(const char *case_name, const char *what);

/* Converters from one iteration's seconds. */
static inline double bench_gbps(double bytes, double s) { return bytes / s * 1e-9; }
static inline double bench_gflops(double flops, double s) { return flops / s * 1e-9; }

/* Cases. Each returns 0, or -1 after printing the failure. */
typedef struct bench_case {
    const char *name;
    const char *help;
    int (*run)(const bench_opts *o);
    bool on_cuda; /* also runs with --device cuda (the default set there) */
} bench_case;

/* t moved to o->device (t is released; NULL stays NULL). */
tn_tensor *bench_on(const bench_opts *o, tn_tensor *t);

int bench_triad(const bench_opts *o);
int bench_fma_peak(const bench_opts *o);
int bench_add64(const bench_opts *o);
int bench_sum64(const bench_opts *o);
int bench_copy_t(const bench_opts *o);
int bench_add16(const bench_opts *o);
int bench_tiny(const bench_opts *o);
int bench_chain100(const bench_opts *o);
int bench_op16_modes(const bench_opts *o);
int bench_add_inplace(const bench_opts *o);
int bench_tiny_anomaly(const bench_opts *o);
int bench_tiny_anomaly_nan(const bench_opts *o);
int bench_chain100_anomaly(const bench_opts *o);
int bench_chain100_profile(const bench_opts *o);
int bench_sgemm1024(const bench_opts *o);
int bench_sgemm2048(const bench_opts *o);
int bench_sgemm4096(const bench_opts *o);
int bench_bf16gemm2048(const bench_opts *o);
int bench_hgemm2048(const bench_opts *o);
int bench_mlp(const bench_opts *o);
int bench_mlp_anomaly(const bench_opts *o);
int bench_mlp_anomaly_nan(const bench_opts *o);
int bench_mlp_monitor(const bench_opts *o);
int bench_mlp_profile(const bench_opts *o);
int bench_mlp_threads(const bench_opts *o);
int bench_digits(const bench_opts *o);
int bench_clip_norm(const bench_opts *o);
int bench_embedding(const bench_opts *o); /* case_embedding.c */
/* case_norm.c */
int bench_layer_norm(const bench_opts *o);
int bench_conv2d(const bench_opts *o);
int bench_max_pool2d(const bench_opts *o);
int bench_batch_norm2d(const bench_opts *o);
int bench_gelu(const bench_opts *o);
int bench_attention(const bench_opts *o);
int bench_gpt_step(const bench_opts *o);
int bench_gpt_step_bf16(const bench_opts *o);
int bench_gpt2_step(const bench_opts *o);
int bench_gpt2_step_bf16(const bench_opts *o);
int bench_gpt_generate_bf16(const bench_opts *o);
int bench_gpt_step_anomaly_nan(const bench_opts *o);
int bench_gpt_step_monitor(const bench_opts *o);
int bench_gpt_step_numerics(const bench_opts *o);
int bench_cnn_step(const bench_opts *o); /* case_cnn.c */
int bench_gpt_generate(const bench_opts *o); /* case_generate.c */

#endif
