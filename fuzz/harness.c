/* fuzz/harness.c — the libFuzzer entry points of tenet-fuzz (fuzz/README.md).
 *
 * Each input is a program (fuzz/program.h) run against the library; after
 * it every slot is released and every scope closed, and then no tensor
 * handle and no storage may be alive: a leak is a finding (a trap, which
 * libFuzzer reports with the input), as are crashes, sanitizer reports,
 * breaches of the error contract and hangs. Errors the library returns are
 * expected. */
#define _POSIX_C_SOURCE 200809L /* dup, fdopen, dirent */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

#define TF_STR2(x) #x
#define TF_STR(x) TF_STR2(x)

#ifdef TF_MAX_ALLOC_MB
/* A failed allocation returns NULL (the library reports it) instead of
 * stopping the run, and one allocation beyond TF_MAX_ALLOC_MB fails on any
 * machine: so a huge request is a clean refusal, never the fuzzer's
 * out-of-memory finding (its -malloc_limit_mb is above this cap). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=" TF_STR(TF_MAX_ALLOC_MB);
}
#endif
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

static FILE *g_sink;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    g_sink = fopen("/dev/null", "w");
    if (!g_sink) g_sink = stderr;
    /* Findings go to a copy of stderr made now: -close_fd_mask=2 (scripts/fuzz) closes
     * stderr after this, to silence the library's warnings. */
    int fd = dup(2);
    tf_report = fd >= 0 ? fdopen(fd, "w") : NULL;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tf_run(data, size, g_sink);
    tn_memory_stats_t ms;
    if (tn_memory_stats(&ms) != TN_OK) tf_fail("tn_memory_stats failed: %s", tn_last_error());
    if (ms.tensors_live != 0 || ms.storages_live != 0)
        tf_fail("leak: %lld tensors and %lld storages alive after the program released every "
                "slot",
                (long long)ms.tensors_live, (long long)ms.storages_live);
    return 0;
}
