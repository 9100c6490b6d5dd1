/* engine/core/files.h — what the layers that read files share: io/ (the
 * safetensors loader) and debug/ (the trace reader, profile_read.c).
 */
#ifndef TN_CORE_FILES_H
#define TN_CORE_FILES_H

#include "internal.h"

/* ---- json.c ---------------------------------------------------------------- */
struct cJSON;
/* Parses text[0..n) (text[n] must be '\0') as JSON with cJSON, under the
 * parse lock; *end gets the offset where parsing stopped (the error's place
 * on failure). NULL on failure: then *oom tells an allocation failed. */
struct cJSON *tn__json_parse(const char *text, size_t n, size_t *end, bool *oom);
void tn__json_free(struct cJSON *j);

/* ---- error.c --------------------------------------------------------------- */
/* TN_ERR_IO: "<what> '<path>': <the system's reason for err>". */
tn_status tn__io_error(const char *what, const char *path, int err);

#endif
