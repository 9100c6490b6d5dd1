/* The JSON parser (files.h): Debian's cJSON (libcjson), behind two
 * adjustments. In core because two layers read JSON, io/ (safetensors
 * headers) and debug/ (trace files), and they must share the parse lock.
 *
 * Allocations: cJSON allocates through process-wide hooks. tenet installs
 * them from a constructor, at library load, as the C library's malloc and
 * free behind tenet's failure hook (engine/core/alloc.c), so a load's every
 * allocation is tenet's (the OOM walk reaches cJSON's) and an allocation
 * failure is told apart from bad JSON (a thread-local flag). A constructor,
 * not the first load: a program that sets hooks of its own in main() does
 * so after it, and keeps them (they are then used for tenet's parses too,
 * which is fine: tenet frees through cJSON_Delete). The blocks are the C
 * library's either way, so a program's cJSON objects made before or after
 * may be released with the C library's deallocator.
 *
 * Concurrency: cJSON 1.7 stores the last error position in a process-wide
 * variable on every parse, successful or not; the parse is serialised by a
 * mutex so that concurrent loads do not race on it (the header is parsed
 * once per load, and the tensors' bytes are read outside the lock).
 */
#include <pthread.h>

#include <cjson/cJSON.h>

#include "files.h"

static _Thread_local bool t_json_oom;

static void *json_malloc(size_t n) {
    void *p = tn__malloc_quiet(n);
    if (!p) t_json_oom = true;
    return p;
}

static void json_free(void *p) { tn__mfree(p); }

__attribute__((constructor)) static void json_hooks_install(void) {
    cJSON_Hooks h = {json_malloc, json_free};
    cJSON_InitHooks(&h);
}

static pthread_mutex_t g_parse_lock = PTHREAD_MUTEX_INITIALIZER;

cJSON *tn__json_parse(const char *text, size_t n, size_t *end, bool *oom) {
    const char *stop = text;
    pthread_mutex_lock(&g_parse_lock);
    t_json_oom = false;
    cJSON *j = cJSON_ParseWithLengthOpts(text, n, &stop, false);
    *oom = !j && t_json_oom;
    pthread_mutex_unlock(&g_parse_lock);
    *end = stop && stop >= text ? (size_t)(stop - text) : 0;
    return j;
}

void tn__json_free(cJSON *j) { cJSON_Delete(j); }
