/* engine/io/io_internal.h — the state dict behind tenet/io.h and what the
 * safetensors reader and writer share. io/ uses core and the public ops
 * (tn_copy_), nothing above (docs/design.md, "Layers").
 */
#ifndef TN_IO_INTERNAL_H
#define TN_IO_INTERNAL_H

#include "../core/files.h" /* the JSON parser, tn__io_error */
#include "../core/internal.h"

/* The format's limits (safetensors' MAX_HEADER_SIZE; JSON numbers are read
 * as doubles by cJSON, so integers must be exact in one). */
#define TN_ST_MAX_HEADER 100000000u
#define TN_ST_MAX_INT 9007199254740992.0 /* 2^53: sizes and offsets stay below */

typedef struct tn_sd_entry {
    char *name;   /* owned, NUL-terminated UTF-8 */
    tn_tensor *t; /* owned reference */
} tn_sd_entry;

typedef struct tn_sd_meta {
    char *key, *value; /* owned */
} tn_sd_meta;

/* Both arrays sorted by strcmp of name / key, no two equal. */
struct tn_state_dict {
    tn_sd_entry *e;
    int64_t n, cap;
    tn_sd_meta *m;
    int64_t nm, capm;
};

/* ---- state_dict.c ---------------------------------------------------------- */
/* Index of name in sd's entries, or -(insertion point) - 1. */
int64_t tn__sd_find(const tn_state_dict *sd, const char *name);
/* A dict made from entries the loader built: takes ownership of e[0..n) and
 * m[0..nm) (sorted and distinct, checked by the caller) and of the arrays. */
tn_state_dict *tn__sd_adopt(tn_sd_entry *e, int64_t n, tn_sd_meta *m, int64_t nm);
/* Frees entries and metadata arrays (and their strings and references). */
void tn__sd_entries_free(tn_sd_entry *e, int64_t n);
void tn__sd_meta_free(tn_sd_meta *m, int64_t n);
char *tn__strdup_n(const char *s, size_t n); /* NULL + error */

/* ---- text.c ---------------------------------------------------------------- */
/* Whether s[0..n) is valid UTF-8 (no overlong forms, surrogates or code
 * points above U+10FFFF); *bad gets the offset of the first bad byte. */
bool tn__utf8_valid(const unsigned char *s, size_t n, size_t *bad);
/* A name quoted for a message: 'name', cut at `max` bytes (on a character
 * boundary) with "..." when longer. */
const char *tn__quote_name(char *buf, size_t size, const char *name);

/* ---- safetensors dtypes (safetensors_dtype.c) -------------------------------- */
/* The format's dtypes tenet reads; the enum order is the reference
 * implementation's (Rust's Dtype), which orders a file's tensors. */
typedef enum tn_st_dtype {
    TN_ST_BOOL = 0,
    TN_ST_U8 = 1,
    TN_ST_I8 = 2,
    TN_ST_F8_E5M2 = 3,
    TN_ST_F8_E4M3 = 4,
    TN_ST_I16 = 5,
    TN_ST_U16 = 6,
    TN_ST_F16 = 7,
    TN_ST_BF16 = 8,
    TN_ST_I32 = 9,
    TN_ST_U32 = 10,
    TN_ST_F32 = 11,
    TN_ST_F64 = 12,
    TN_ST_I64 = 13,
    TN_ST_U64 = 14,
    TN_ST_DTYPE_COUNT
} tn_st_dtype;
/* The dtype named `s`, or -1 when the format has none of that name. */
int tn__st_dtype_parse(const char *s);
const char *tn__st_dtype_name(tn_st_dtype d);
size_t tn__st_dtype_size(tn_st_dtype d);
/* tenet's dtype for a file's (F16, BF16: float32), or -1 when tenet has none. */
int tn__st_to_tenet(tn_st_dtype d);
tn_st_dtype tn__st_from_tenet(tn_dtype d);
/* n values of half / bfloat16 (little-endian bytes) into float32s. */

/* ---- reading (safetensors_header.c, safetensors_read.c) --------------------- */
/* Where a file's bytes come from: a file descriptor (pread) or memory. */
typedef struct tn_st_source {
    int fd;                   /* -1: buf */
    const unsigned char *buf; /* size bytes */
    uint64_t size;
    const char *path; /* for messages; NULL for a buffer */
} tn_st_source;
/* n bytes at off (checked in bounds by the caller). */
tn_status tn__st_read(const tn_st_source *s, uint64_t off, void *dst, size_t n);
/* A failure to read s: status st; `kind` (may be NULL) is the reference
 * implementation's name for it, after "Error while deserializing header: ";
 * the file's name ends the message. */
tn_status tn__st_error(const tn_st_source *s, tn_status st, const char *kind, const char *fmt, ...)
    TN_PRINTF(4, 5);

/* One tensor of a header, validated: dtype one tenet reads, at most
 * TN_MAX_DIMS dims, bytes of the shape == end - begin, in the data region. */
typedef struct tn_st_info {
    const char *name; /* borrowed from the header's JSON tree */
    tn_st_dtype dtype;
    int ndim;
    int64_t shape[TN_MAX_DIMS];
    uint64_t begin, end; /* relative to data_start */
} tn_st_info;

typedef struct tn_st_header {
    struct cJSON *json; /* the parsed header (owned) */
    tn_st_info *t;      /* n tensors, sorted by name, distinct (owned) */
    int64_t n;
    tn_sd_meta *meta; /* nm entries, sorted by key, distinct (owned) */
    int64_t nm;
    uint64_t data_start; /* 8 + header size */
} tn_st_header;

/* Reads, parses and validates the header of s (every check of the format:
 * tenet/io.h). On failure *h holds nothing. */
tn_status tn__st_header_read(const tn_st_source *s, tn_st_header *h);
void tn__st_header_free(tn_st_header *h);

#endif
