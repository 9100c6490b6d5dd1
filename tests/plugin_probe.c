/* tests/plugin_probe.c — libtenet.so's CUDA plugin, as a program linked with the shared library
 * sees it (engine/core/backend.c; docs/design.md, "Back ends as plugins"). Run by the ctests
 * plugin_* (tests/CMakeLists.txt), one mode each:
 *
 *   cpu                 CPU work only, anomaly mode and memory statistics included: no CUDA
 *                       library (nor the plugin) is mapped in the process afterwards
 *   unavailable TEXT    the plugin cannot be loaded (TENET_CUDA_PLUGIN names a file that is
 *                       missing, not a shared object, or lacks the entry): CUDA reports
 *                       unavailable from several threads at once, tn_last_error() and a copy to
 *                       the device say why (TEXT is part of the message), the CPU still works,
 *                       and no CUDA library is mapped
 *   available           the default search finds the plugin beside libtenet (several threads
 *                       asking at once, one answer); without a GPU CUDA reports "No CUDA GPUs";
 *                       with one, a round trip through the device and a device error (reported
 *                       by the plugin) in the calling thread's error state
 *
 * A plain program (no cmocka): it reports the first failed check and exits 1.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenet.h"

#define THREADS 4

static int g_failed;

static void check(bool ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "plugin_probe: FAILED: %s (last error: %s)\n", what, tn_last_error());
    g_failed = 1;
}

/* Whether a mapping of the process names a file whose name contains `part`. */
static bool mapped(const char *part) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f)) {
        const char *name = strrchr(line, '/');
        hit = name && strstr(name, part);
    }
    fclose(f);
    return hit;
}

static void check_no_cuda_mapped(void) {
    static const char *const libs[] = {"libcuda", "libcublas", "libtenet-cuda"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s* is not mapped", libs[i]);
        check(!mapped(libs[i]), what);
    }
}

/* A CPU forward and backward: sum(x * x) over ones(4) gives 4, grad 2. */
static void cpu_work(void) {
    tn_tensor *x = tn_ones(1, (int64_t[]){4}, TN_F32);
    check(x && tn_requires_grad_(x, true) == TN_OK, "a CPU tensor");
    tn_tensor *xx = tn_mul(x, x);
    tn_tensor *y = xx ? tn_sum(xx) : NULL;
    double v = 0;
    check(y && tn_item(y, &v) == TN_OK && v == 4.0, "sum(x * x) on the CPU");
    check(tn_backward(y, NULL, false) == TN_OK, "backward on the CPU");
    tn_tensor *g = tn_grad(x);
    tn_tensor *gs = g ? tn_sum(g) : NULL;
    check(gs && tn_item(gs, &v) == TN_OK && v == 8.0, "the CPU gradient");
    tn_release(gs);
    tn_release(g);
    tn_release(y);
    tn_release(xx);
    tn_release(x);
}

typedef struct probe {
    pthread_t id;
    int count;
    tn_status status;
    char msg[512];
} probe;

/* Each thread asks once; its own error state says why there are none. */
static void *ask(void *arg) {
    probe *p = arg;
    p->count = tn_cuda_device_count();
    p->status = tn_last_status();
    snprintf(p->msg, sizeof p->msg, "%s", tn_last_error());
    return NULL;
}

/* THREADS threads ask at once (the first use loads the plugin): all get the same count, and
 * when it is 0, each its own TN_ERR_DEVICE with `text` in the message. */
static int ask_from_threads(const char *text) {
    probe p[THREADS];
    for (int i = 0; i < THREADS; i++)
        check(pthread_create(&p[i].id, NULL, ask, &p[i]) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++)
        pthread_join(p[i].id, NULL);
    for (int i = 1; i < THREADS; i++)
        check(p[i].count == p[0].count, "one count for all threads");
    for (int i = 0; p[0].count == 0 && i < THREADS; i++) {
        check(p[i].status == TN_ERR_DEVICE, "TN_ERR_DEVICE in each asking thread");
        check(strstr(p[i].msg, text) != NULL, "each thread's message says why");
    }
    return p[0].count;
}

static void mode_cpu(void) {
    tn_set_detect_anomaly(true, true); /* its backward polls the devices that are loaded */
    cpu_work();
    tn_set_detect_anomaly(false, false);
    tn_memory_stats_t ms;
    check(tn_memory_stats(&ms) == TN_OK && ms.cuda_bytes_live == 0, "tn_memory_stats");
    check(tn_synchronize(TN_DEVICE_CPU) == TN_OK, "tn_synchronize(cpu)");
    check_no_cuda_mapped();
}

static void mode_unavailable(const char *text) {
    check(ask_from_threads(text) == 0, "no CUDA device");
    check(!tn_cuda_is_available(), "tn_cuda_is_available is false");
    check(tn_last_status() == TN_ERR_DEVICE, "TN_ERR_DEVICE after tn_cuda_is_available");
    check(strstr(tn_last_error(), "CUDA is not available") != NULL, "the message says so");
    check(strstr(tn_last_error(), text) != NULL, "the message says why");
    printf("tn_last_error(): %s\n", tn_last_error());
    tn_clear_error();
    tn_tensor *x = tn_ones(1, (int64_t[]){3}, TN_F32);
    check(tn_to(x, TN_DTYPE_SAME, TN_DEVICE_CUDA(0)) == NULL, "no copy to cuda:0");
    check(tn_last_status() == TN_ERR_DEVICE && strstr(tn_last_error(), text) != NULL,
          "a copy to the device says why");
    check(tn_synchronize(TN_DEVICE_CUDA(0)) == TN_ERR_DEVICE, "tn_synchronize(cuda:0)");
    tn_release(x);
    cpu_work();
    check_no_cuda_mapped();
}

/* A request the device cannot hold (256 TiB), in a thread of its own: the plugin reports it
 * through libtenet's error state, the thread's own. */
static void *oversized(void *arg) {
    probe *p = arg;
    tn_tensor *one = tn_ones(2, (int64_t[]){1, 1}, TN_F32);
    tn_tensor *d = one ? tn_to(one, TN_DTYPE_SAME, TN_DEVICE_CUDA(0)) : NULL;
    tn_tensor *big = d ? tn_expand(d, 2, (int64_t[]){(int64_t)1 << 26, (int64_t)1 << 20}) : NULL;
    tn_tensor *c = big ? tn_contiguous(big) : NULL;
    p->count = c != NULL;
    p->status = tn_last_status();
    snprintf(p->msg, sizeof p->msg, "%s", tn_last_error());
    tn_release(c);
    tn_release(big);
    tn_release(d);
    tn_release(one);
    return NULL;
}

/* With a GPU: values through the device and back, and an error of the plugin's. */
static void device_round_trip(void) {
    tn_tensor *x = tn_ones(1, (int64_t[]){5}, TN_F32);
    tn_tensor *d = tn_to(x, TN_DTYPE_SAME, TN_DEVICE_CUDA(0));
    tn_tensor *sq = d ? tn_mul(d, d) : NULL;
    tn_tensor *s = sq ? tn_sum(sq) : NULL;
    double v = 0;
    check(s && tn_item(s, &v) == TN_OK && v == 5.0, "sum(x * x) on cuda:0");
    tn_clear_error();
    probe p;
    check(pthread_create(&p.id, NULL, oversized, &p) == 0, "pthread_create");
    pthread_join(p.id, NULL);
    check(p.count == 0 && p.status == TN_ERR_OUT_OF_MEMORY && strstr(p.msg, "CUDA out of memory"),
          "the plugin's out-of-memory error, in the thread that asked");
    check(tn_last_status() == TN_OK, "not in another thread");
    tn_release(s);
    tn_release(sq);
    tn_release(d);
    tn_release(x);
}

static void mode_available(void) {
    int n = ask_from_threads("No CUDA GPUs are available");
    check(mapped("libtenet-cuda"), "the plugin beside libtenet is loaded");
    check(tn_cuda_device_count() == n, "the count stays");
    if (n == 0) {
        check(!tn_cuda_is_available() && strstr(tn_last_error(), "No CUDA GPUs") != NULL,
              "no GPU: tn_last_error() says so");
        printf("plugin loaded, no GPU: %s\n", tn_last_error());
    } else {
        printf("plugin loaded, %d CUDA device(s)\n", n);
        device_round_trip();
    }
    cpu_work();
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "cpu"))
        mode_cpu();
    else if (!strcmp(mode, "unavailable") && argc > 2)
        mode_unavailable(argv[2]);
    else if (!strcmp(mode, "available"))
        mode_available();
    else {
        fprintf(stderr, "usage: plugin_probe cpu | unavailable TEXT | available\n");
        return 2;
    }
    if (!g_failed) printf("plugin_probe %s: ok\n", mode);
    return g_failed;
}
