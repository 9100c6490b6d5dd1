/* debug/profile_read.c — the per-op table of a trace file
 * (tn_profile_summary_file, the tenet-prof command): its complete events
 * ("ph":"X") read back with cJSON and summarised as a recording is. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/core/files.h"
#include "profile_internal.h"
#include "tenet/profile.h"

/* The whole file, NUL-terminated (owned by the caller), or NULL + error. */
static char *read_text(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tn__io_error("cannot open", path, errno);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = tn__malloc_quiet(cap);
    while (text) {
        len += fread(text + len, 1, cap - len - 1, f);
        if (len < cap - 1) break;
        char *t = tn__realloc(text, cap *= 2);
        if (!t) tn__mfree(text);
        text = t;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!text) {
        tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    } else if (bad) {
        tn__mfree(text);
        tn__io_error("cannot read", path, EIO);
        return NULL;
    } else {
        text[len] = '\0';
        *n = len;
    }
    return text;
}

/* The X events of traceEvents as spans (names borrowed from j). */
static tn_status spans_of(const cJSON *j, const char *path, tn_prof_span **out, size_t *n) {
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(j, "traceEvents");
    if (!cJSON_IsArray(evs))
        return tn__error(TN_ERR_FORMAT, "'%s': no traceEvents array (not a trace?)", path);
    size_t cap = (size_t)cJSON_GetArraySize(evs);
    *out = cap ? tn__malloc_quiet(cap * sizeof **out) : NULL;
    if (cap && !*out) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory reading a trace");
    *n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X")) continue;
        /* OpenMP workers' shares are part of their op's time, not ops of their own */
        if (cJSON_IsString(cat) && !strcmp(cat->valuestring, "omp")) continue;
        if (!cJSON_IsString(name) || !cJSON_IsNumber(ts) || !cJSON_IsNumber(dur))
            return tn__error(TN_ERR_FORMAT, "'%s': an X event without name, ts or dur", path);
        (*out)[(*n)++] =
            (tn_prof_span){name->valuestring, cJSON_IsNumber(tid) ? (uint64_t)tid->valuedouble : 0,
                           ts->valuedouble, dur->valuedouble, 0};
    }
    return TN_OK;
}

tn_status tn_profile_summary_file(const char *path, FILE *f, int top) {
    if (!path || !f)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_profile_summary_file: %s is NULL",
                         path ? "f" : "path");
    size_t n = 0, ns = 0;
    char *text = read_text(path, &n);
    if (!text) return tn_last_status();
    bool oom = false;
    size_t end;
    cJSON *j = tn__json_parse(text, n, &end, &oom);
    tn_prof_span *spans = NULL;
    tn_prof_table t = {0};
    tn_status st = j     ? spans_of(j, path, &spans, &ns)
                   : oom ? tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory reading a trace")
                         : tn__error(TN_ERR_FORMAT, "'%s' is not JSON (at byte %zu)", path, end);
    if (st == TN_OK) st = tn__prof_table_make(&t, spans, ns);
    if (st == TN_OK) st = tn__prof_table_print(&t, f, top);
    tn__prof_table_clear(&t);
    tn__mfree(spans);
    tn__json_free(j);
    tn__mfree(text);
    return st;
}
