/* Reading a safetensors header: every number is checked before it is used.
 *
 *   size field   8 bytes LE; the file has them; N <= 100,000,000; 8 + N <= file
 *   text         UTF-8, starts with '{', no control characters (JSON allows
 *                none inside strings; cJSON would take them, and would cut a
 *                string at an escaped NUL, so both are refused first)
 *   JSON         parsed by cJSON; only whitespace after the object (padding)
 *   entries      "__metadata__": an object of strings, at most once; every
 *                other key a tensor: {"dtype": known name, "shape": [ints],
 *                "data_offsets": [begin, end]}, each field once (other fields
 *                are ignored, as the reference implementation does); ints
 *                below 2^53 (exact in cJSON's doubles); begin <= end; the
 *                shape's bytes computed without overflow equal end - begin
 *   names        distinct (a sort, then neighbours compared)
 *   offsets      sorted by (begin, end), each tensor starts where the one
 *                before ends, the first at 0, the last at the end of the file:
 *                no overlap, no gap, nothing out of bounds (the format
 *                forbids holes, against polyglot files)
 *
 * Messages name the reference implementation's error (HeaderTooLarge,
 * InvalidOffset, ...) after "Error while deserializing header: ", as Python's
 * safetensors reports them, then say what is wrong, where.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "io_internal.h"

#define HDR "Error while deserializing header: "

tn_status tn__st_error(const tn_st_source *s, tn_status st, const char *kind, const char *fmt,
                       ...) {
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return tn__error(st, "%s%s%s%s%s%.200s%s", kind ? HDR : "", kind ? kind : "", kind ? ": " : "",
                     detail, s->path ? " (file '" : "", s->path ? s->path : "",
                     s->path ? "')" : "");
}

#define BAD(kind, ...) tn__st_error(s, TN_ERR_FORMAT, kind, __VA_ARGS__)
#define QUOTE(buf, name) tn__quote_name(buf, sizeof buf, name)

/* ---- the text ---------------------------------------------------------------- */

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Control characters outside strings (only JSON's whitespace is allowed) and
 * inside them (none is, nor the escape \u0000). Strings are tracked by their
 * quotes and backslashes only: this is not a parse, cJSON does that. */
static tn_status check_chars(const tn_st_source *s, const unsigned char *t, size_t n) {
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = t[i];
        if (c < 0x20 && (in_str || !is_ws(c)))
            return BAD("InvalidHeaderDeserialization",
                       "control character 0x%02x at byte %zu of "
                       "the header",
                       c, i);
        if (!in_str) {
            in_str = c == '"';
        } else if (c == '"') {
            in_str = false;
        } else if (c == '\\' && i + 1 < n) {
            if (t[i + 1] == 'u' && i + 5 < n && memcmp(t + i + 2, "0000", 4) == 0)
                return BAD("InvalidHeaderDeserialization",
                           "a string holds the NUL character "
                           "(\\u0000) at byte %zu of the header",
                           i);
            i++; /* the escaped character */
        }
    }
    return TN_OK;
}

/* The header's text into a NUL-terminated block (*text, n bytes). */
static tn_status read_text(const tn_st_source *s, char **text, uint64_t *n) {
    *text = NULL;
    unsigned char b[8];
    if (s->size < 8)
        return BAD("HeaderTooSmall", "the file has %llu bytes, fewer than the 8 of the header size",
                   (unsigned long long)s->size);
    tn_status st = tn__st_read(s, 0, b, 8);
    if (st < 0) return st;
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--)
        len = len << 8 | b[i];
    if (len > TN_ST_MAX_HEADER)
        return BAD("HeaderTooLarge", "the header size is %llu bytes, above the limit of %u",
                   (unsigned long long)len, TN_ST_MAX_HEADER);
    if (len > s->size - 8)
        return BAD("InvalidHeaderLength",
                   "the header size is %llu bytes, but the file has only "
                   "%llu after the size",
                   (unsigned long long)len, (unsigned long long)(s->size - 8));
    char *t = tn__malloc((size_t)len + 1);
    if (!t) return tn_last_status();
    if ((st = tn__st_read(s, 8, t, (size_t)len)) < 0) {
        tn__mfree(t);
        return st;
    }
    t[len] = '\0';
    *text = t;
    *n = len;
    return TN_OK;
}

static tn_status check_text(const tn_st_source *s, const char *text, size_t n) {
    size_t bad;
    if (!tn__utf8_valid((const unsigned char *)text, n, &bad))
        return BAD("InvalidHeader", "the header is not valid UTF-8 (byte %zu)", bad);
    if (n == 0 || text[0] != '{')
        return BAD("InvalidHeaderStart", "the header does not start with '{'");
    return check_chars(s, (const unsigned char *)text, n);
}

static tn_status parse(const tn_st_source *s, const char *text, size_t n, cJSON **out) {
    size_t end;
    bool oom;
    cJSON *j = tn__json_parse(text, n, &end, &oom);
    if (!j && oom)
        return tn__error(TN_ERR_OUT_OF_MEMORY,
                         "out of memory parsing a safetensors header of "
                         "%zu bytes",
                         n);
    if (!j)
        return BAD("InvalidHeaderDeserialization", "invalid JSON at byte %zu of the header", end);
    while (end < n && is_ws((unsigned char)text[end]))
        end++;
    if (end < n || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return BAD("InvalidHeaderDeserialization",
                   "unexpected characters after the JSON object "
                   "at byte %zu of the header",
                   end);
    }
    *out = j;
    return TN_OK;
}

/* ---- one entry ------------------------------------------------------------------- */

/* A JSON integer in [0, 2^53): cJSON keeps numbers as doubles. */
static bool get_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d < TN_ST_MAX_INT) || (double)(uint64_t)d != d) return false;
    *out = (uint64_t)d;
    return true;
}

static tn_status parse_dtype(const tn_st_source *s, const char *q, const cJSON *v, tn_st_info *ti) {
    if (!cJSON_IsString(v))
        return BAD("InvalidHeaderDeserialization", "tensor %s: dtype is not a string", q);
    int d = tn__st_dtype_parse(v->valuestring);
    if (d < 0) {
        char qd[48];
        return BAD("InvalidHeaderDeserialization", "tensor %s: unknown dtype %s", q,
                   QUOTE(qd, v->valuestring));
    }
    if (tn__st_to_tenet((tn_st_dtype)d) < 0)
        return tn__st_error(s, TN_ERR_DTYPE, NULL,
                            "tensor %s has dtype %s, which tenet does not "
                            "have (it reads F32, F64, F16, BF16, I64, I32, I16 and BOOL)",
                            q, tn__st_dtype_name((tn_st_dtype)d));
    ti->dtype = (tn_st_dtype)d;
    return TN_OK;
}

static tn_status parse_shape(const tn_st_source *s, const char *q, const cJSON *v, tn_st_info *ti) {
    if (!cJSON_IsArray(v))
        return BAD("InvalidHeaderDeserialization", "tensor %s: shape is not an array", q);
    int nd = 0;
    for (const cJSON *d = v->child; d; d = d->next, nd++) {
        uint64_t size;
        if (nd == TN_MAX_DIMS)
            return tn__st_error(s, TN_ERR_SHAPE, NULL,
                                "tensor %s has %d dimensions; tenet "
                                "supports at most %d",
                                q, cJSON_GetArraySize(v), TN_MAX_DIMS);
        if (!get_uint(d, &size))
            return BAD("InvalidHeaderDeserialization",
                       "tensor %s: shape[%d] is not an integer "
                       "in [0, 2^53)",
                       q, nd);
        ti->shape[nd] = (int64_t)size;
    }
    ti->ndim = nd;
    return TN_OK;
}

static tn_status parse_offsets(const tn_st_source *s, const char *q, const cJSON *v,
                               tn_st_info *ti) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !get_uint(v->child, &ti->begin) ||
        !get_uint(v->child->next, &ti->end))
        return BAD("InvalidHeaderDeserialization",
                   "tensor %s: data_offsets is not an array of "
                   "two integers in [0, 2^53)",
                   q);
    if (ti->end < ti->begin)
        return BAD("InvalidOffset", "tensor %s: data_offsets [%llu, %llu] run backwards", q,
                   (unsigned long long)ti->begin, (unsigned long long)ti->end);
    return TN_OK;
}

/* Bytes of the shape == end - begin, the product checked for overflow. A
 * shape with a 0 has no element, whatever its other sizes (tenet's rule). */
static tn_status check_bytes(const tn_st_source *s, const char *q, const tn_st_info *ti) {
    uint64_t numel = 1, bytes = 0;
    bool overflow = false, empty = false;
    for (int i = 0; i < ti->ndim; i++) {
        empty |= ti->shape[i] == 0;
        overflow |= __builtin_mul_overflow(numel, (uint64_t)ti->shape[i], &numel);
    }
    if (!empty)
        overflow |= __builtin_mul_overflow(numel, (uint64_t)tn__st_dtype_size(ti->dtype), &bytes);
    if (!empty && (overflow || bytes > INT64_MAX))
        return BAD("ValidationOverflow", "tensor %s: the bytes of its shape overflow", q);
    if (bytes != ti->end - ti->begin)
        return BAD("TensorInvalidInfo",
                   "tensor %s: its shape holds %llu bytes of %s, its "
                   "data_offsets [%llu, %llu] hold %llu",
                   q, (unsigned long long)bytes, tn__st_dtype_name(ti->dtype),
                   (unsigned long long)ti->begin, (unsigned long long)ti->end,
                   (unsigned long long)(ti->end - ti->begin));
    return TN_OK;
}

static tn_status parse_entry(const tn_st_source *s, const cJSON *e, tn_st_info *ti) {
    char q[96];
    QUOTE(q, e->string);
    if (!cJSON_IsObject(e))
        return BAD("InvalidHeaderDeserialization", "tensor %s: its entry is not an object", q);
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *f[3] = {NULL, NULL, NULL};
    for (const cJSON *c = e->child; c; c = c->next)
        for (int k = 0; k < 3; k++)
            if (strcmp(c->string, fields[k]) == 0) {
                if (f[k])
                    return BAD("InvalidHeaderDeserialization",
                               "tensor %s: duplicate field "
                               "'%s'",
                               q, fields[k]);
                f[k] = c;
            }
    for (int k = 0; k < 3; k++)
        if (!f[k])
            return BAD("InvalidHeaderDeserialization", "tensor %s: missing field '%s'", q,
                       fields[k]);
    ti->name = e->string;
    tn_status st = parse_dtype(s, q, f[0], ti);
    if (st == TN_OK) st = parse_shape(s, q, f[1], ti);
    if (st == TN_OK) st = parse_offsets(s, q, f[2], ti);
    if (st == TN_OK) st = check_bytes(s, q, ti);
    return st;
}

/* ---- metadata ---------------------------------------------------------------------- */

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const tn_sd_meta *)a)->key, ((const tn_sd_meta *)b)->key);
}

/* "__metadata__": an object of strings, copied and sorted; keys distinct. */
static tn_status parse_meta(const tn_st_source *s, const cJSON *m, tn_st_header *h) {
    if (!cJSON_IsObject(m))
        return BAD("InvalidHeaderDeserialization", "__metadata__ is not an object of strings");
    int n = cJSON_GetArraySize(m);
    h->meta = tn__calloc((size_t)n, sizeof *h->meta);
    if (!h->meta) return tn_last_status();
    for (const cJSON *c = m->child; c; c = c->next) {
        char q[96];
        if (!cJSON_IsString(c))
            return BAD("InvalidHeaderDeserialization",
                       "__metadata__: the value of %s is not a "
                       "string",
                       QUOTE(q, c->string));
        tn_sd_meta *e = &h->meta[h->nm];
        if (!(e->key = tn__strdup_n(c->string, strlen(c->string)))) return tn_last_status();
        h->nm++; /* owned from here */
        if (!(e->value = tn__strdup_n(c->valuestring, strlen(c->valuestring))))
            return tn_last_status();
    }
    qsort(h->meta, (size_t)h->nm, sizeof *h->meta, cmp_meta);
    for (int64_t i = 1; i < h->nm; i++)
        if (strcmp(h->meta[i - 1].key, h->meta[i].key) == 0) {
            char q[96];
            return BAD("InvalidHeaderDeserialization", "__metadata__: duplicate key %s",
                       QUOTE(q, h->meta[i].key));
        }
    return TN_OK;
}

/* ---- the whole header ------------------------------------------------------------------ */

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const tn_st_info *)a)->name, ((const tn_st_info *)b)->name);
}

static int cmp_offsets(const void *a, const void *b) {
    const tn_st_info *x = *(const tn_st_info *const *)a, *y = *(const tn_st_info *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The tensors tile the data region [0, len) exactly. */
static tn_status check_cover(const tn_st_source *s, tn_st_header *h, uint64_t len) {
    tn_st_info **by = tn__calloc((size_t)h->n, sizeof *by);
    if (!by) return tn_last_status();
    for (int64_t i = 0; i < h->n; i++)
        by[i] = &h->t[i];
    qsort(by, (size_t)h->n, sizeof *by, cmp_offsets);
    tn_status st = TN_OK;
    uint64_t at = 0;
    char q[96], qp[96];
    for (int64_t i = 0; i < h->n && st == TN_OK; i++) {
        const tn_st_info *t = by[i];
        if (t->end > len)
            st = BAD("InvalidOffset",
                     "tensor %s: data_offsets [%llu, %llu] end beyond the data, "
                     "which has %llu bytes",
                     QUOTE(q, t->name), (unsigned long long)t->begin, (unsigned long long)t->end,
                     (unsigned long long)len);
        else if (t->begin != at)
            st = BAD("InvalidOffset",
                     "tensor %s: data_offsets [%llu, %llu] %s %s, which ends at "
                     "byte %llu",
                     QUOTE(q, t->name), (unsigned long long)t->begin, (unsigned long long)t->end,
                     t->begin < at ? "overlap" : "leave a gap after",
                     i ? QUOTE(qp, by[i - 1]->name) : "the start of the data",
                     (unsigned long long)at);
        at = t->end;
    }
    if (st == TN_OK && at != len)
        st = BAD("MetadataIncompleteBuffer",
                 "the tensors cover %llu bytes of the data, which has "
                 "%llu",
                 (unsigned long long)at, (unsigned long long)len);
    tn__mfree(by);
    return st;
}

static tn_status read_entries(const tn_st_source *s, tn_st_header *h) {
    const cJSON *meta = NULL;
    h->t = tn__calloc((size_t)cJSON_GetArraySize(h->json), sizeof *h->t);
    if (!h->t) return tn_last_status();
    tn_status st = TN_OK;
    for (const cJSON *e = h->json->child; e && st == TN_OK; e = e->next) {
        if (strcmp(e->string, "__metadata__") != 0) {
            st = parse_entry(s, e, &h->t[h->n++]);
        } else if (meta) {
            st = BAD("InvalidHeaderDeserialization", "duplicate key '__metadata__'");
        } else {
            st = parse_meta(s, meta = e, h);
        }
    }
    if (st < 0) return st;
    qsort(h->t, (size_t)h->n, sizeof *h->t, cmp_name);
    for (int64_t i = 1; i < h->n; i++)
        if (strcmp(h->t[i - 1].name, h->t[i].name) == 0) {
            char q[96];
            return BAD("InvalidHeaderDeserialization", "duplicate tensor name %s",
                       QUOTE(q, h->t[i].name));
        }
    return TN_OK;
}

void tn__st_header_free(tn_st_header *h) {
    tn__mfree(h->t);
    tn__sd_meta_free(h->meta, h->nm);
    if (h->json) tn__json_free(h->json);
    *h = (tn_st_header){0};
}

tn_status tn__st_header_read(const tn_st_source *s, tn_st_header *h) {
    *h = (tn_st_header){0};
    char *text;
    uint64_t n = 0;
    tn_status st = read_text(s, &text, &n);
    if (st < 0) return st;
    st = check_text(s, text, (size_t)n);
    if (st == TN_OK) st = parse(s, text, (size_t)n, &h->json);
    tn__mfree(text);
    h->data_start = 8 + n;
    if (st == TN_OK) st = read_entries(s, h);
    if (st == TN_OK) st = check_cover(s, h, s->size - h->data_start);
    if (st < 0) tn__st_header_free(h);
    return st;
}
