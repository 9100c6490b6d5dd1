/* tn_save, tn_save_tensors, tn_save_buffer: the bytes Python's safetensors
 * writes for the same tensors (its serializer's `prepare`):
 *
 *   - tensors ordered by dtype, the reference's enum order descending (I64,
 *     F64, F32, I32, I16, BOOL: wide types first, so each tensor's data is
 *     aligned to its type when the header is a multiple of 8), then by name;
 *     offsets contiguous in that order;
 *   - the header is compact JSON in that order, "__metadata__" first (only
 *     when there is metadata; its keys sorted, the reference's order being a
 *     hash map's), fields dtype, shape, data_offsets; strings escaped as
 *     serde_json does (\", \\, \b \f \n \r \t, \u00xx for other controls,
 *     UTF-8 as is);
 *   - padded with spaces to a multiple of 8 bytes.
 *
 * A file is written under a temporary name in the same folder, then renamed
 * over the target: a failure leaves no partial file and the old one intact.
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "io_internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian: tenet writes its memory as is");

typedef struct wentry {
    const char *name;
    const tn_tensor *t;
    tn_st_dtype dtype;
    uint64_t begin, end;
} wentry;

typedef struct plan {
    wentry *w;
    int64_t n;
    char *hdr; /* padded header text */
    size_t hlen;
    uint64_t data_len;
} plan;

/* ---- the header text ------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool failed; /* out of memory (error set) */
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = tn__realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* One number: fmt has one conversion and little else. snprintf returns the
 * length it wanted, which may exceed num: only what it wrote is put. */
static void putf(sbuf *b, const char *fmt, unsigned long long v) {
    char num[48];
    int k = snprintf(num, sizeof num, fmt, v);
    if (k < 0) {
        tn__error(TN_ERR_INTERNAL, "safetensors: formatting a number failed");
        b->failed = true;
        return;
    }
    put(b, num, (size_t)k < sizeof num ? (size_t)k : sizeof num - 1);
}

/* A JSON string as serde_json writes it. */
static void put_str(sbuf *b, const char *s) {
    put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *esc = NULL;
        switch (*c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        }
        if (esc)
            puts_(b, esc);
        else if (*c < 0x20)
            putf(b, "\\u%04llx", *c);
        else
            put(b, (const char *)c, 1);
    }
    put(b, "\"", 1);
}

static void put_entry(sbuf *b, const wentry *w) {
    put_str(b, w->name);
    puts_(b, ":{\"dtype\":");
    put_str(b, tn__st_dtype_name(w->dtype));
    puts_(b, ",\"shape\":[");
    int nd = tn_ndim(w->t);
    const int64_t *shape = tn_shape(w->t);
    for (int d = 0; d < nd; d++) {
        if (d) put(b, ",", 1);
        putf(b, "%llu", (unsigned long long)shape[d]);
    }
    puts_(b, "],\"data_offsets\":[");
    putf(b, "%llu,", w->begin);
    putf(b, "%llu]}", w->end);
}

static tn_status header_text(plan *p, const tn_sd_meta *m, int64_t nm) {
    sbuf b = {0};
    put(&b, "{", 1);
    if (nm > 0) {
        puts_(&b, "\"__metadata__\":{");
        for (int64_t i = 0; i < nm; i++) {
            if (i) put(&b, ",", 1);
            put_str(&b, m[i].key);
            put(&b, ":", 1);
            put_str(&b, m[i].value);
        }
        puts_(&b, p->n ? "}," : "}");
    }
    for (int64_t i = 0; i < p->n; i++) {
        if (i) put(&b, ",", 1);
        put_entry(&b, &p->w[i]);
    }
    put(&b, "}", 1);
    while (!b.failed && b.n % 8)
        put(&b, " ", 1);
    if (b.failed) {
        tn__mfree(b.p);
        return tn_last_status();
    }
    p->hdr = b.p;
    p->hlen = b.n;
    return TN_OK;
}

/* ---- the plan ---------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const wentry *)a)->name, ((const wentry *)b)->name);
}

static int cmp_order(const void *a, const void *b) {
    const wentry *x = a, *y = b;
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void plan_free(plan *p) {
    tn__mfree(p->w);
    tn__mfree(p->hdr);
}

/* Sorts the entries into the file's order, sets the offsets, writes the
 * header. The names are checked by the caller. */
static tn_status plan_make(plan *p, const tn_sd_meta *m, int64_t nm) {
    qsort(p->w, (size_t)p->n, sizeof *p->w, cmp_order);
    uint64_t at = 0;
    for (int64_t i = 0; i < p->n; i++) {
        wentry *w = &p->w[i];
        uint64_t bytes, end; /* an expanded view may stand for more bytes than memory holds */
        if (__builtin_mul_overflow((uint64_t)tn_numel(w->t), tn_dtype_size(tn_dtype_of(w->t)),
                                   &bytes) ||
            __builtin_add_overflow(at, bytes, &end) || end >= (uint64_t)TN_ST_MAX_INT) {
            char q[96];
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "cannot save tensor %s: the data would "
                             "reach 2^53 bytes, beyond the offsets a safetensors header can hold",
                             tn__quote_name(q, sizeof q, w->name));
        }
        for (int d = 0; d < tn_ndim(w->t); d++)
            if ((uint64_t)tn_shape(w->t)[d] >= (uint64_t)TN_ST_MAX_INT) {
                char q[96];
                return tn__error(TN_ERR_INVALID_ARGUMENT,
                                 "cannot save tensor %s: its size %lld in dim %d reaches 2^53, "
                                 "which JSON readers (tenet's included) do not read exactly",
                                 tn__quote_name(q, sizeof q, w->name),
                                 (long long)tn_shape(w->t)[d], d);
            }
        w->begin = at;
        w->end = at = end;
    }
    p->data_len = at;
    return header_text(p, m, nm);
}

/* Entries of a dict: its names are valid and distinct. */
static tn_status plan_dict(plan *p, const tn_state_dict *sd) {
    if (!sd) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_save: argument 'sd' is NULL");
    *p = (plan){tn__calloc((size_t)sd->n, sizeof(wentry)), sd->n, NULL, 0, 0};
    if (!p->w) return tn_last_status();
    for (int64_t i = 0; i < sd->n; i++)
        p->w[i] = (wentry){sd->e[i].name, sd->e[i].t, tn__st_from_tenet(sd->e[i].t->dtype), 0, 0};
    tn_status st = plan_make(p, sd->m, sd->nm);
    if (st < 0) plan_free(p);
    return st;
}

static tn_status check_names(const plan *p) {
    char q[96];
    for (int64_t i = 0; i < p->n; i++) {
        size_t bad;
        const char *nm = p->w[i].name;
        if (!tn__utf8_valid((const unsigned char *)nm, strlen(nm), &bad))
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "tn_save_tensors: name %lld is not valid "
                             "UTF-8 (byte %zu)",
                             (long long)i, bad);
        if (strcmp(nm, "__metadata__") == 0)
            return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_save_tensors: '__metadata__' is "
                                                      "reserved by the safetensors format");
    }
    qsort(p->w, (size_t)p->n, sizeof *p->w, cmp_name);
    for (int64_t i = 1; i < p->n; i++)
        if (strcmp(p->w[i - 1].name, p->w[i].name) == 0)
            return tn__error(TN_ERR_INVALID_ARGUMENT,
                             "tn_save_tensors: the name %s is given "
                             "twice",
                             tn__quote_name(q, sizeof q, p->w[i].name));
    return TN_OK;
}

static tn_status plan_arrays(plan *p, int n, const char *const *names, tn_tensor *const *tensors) {
    *p = (plan){0};
    if (n < 0) return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_save_tensors: n is %d", n);
    if (n > 0 && (!names || !tensors))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_save_tensors: argument '%s' is NULL",
                         names ? "tensors" : "names");
    for (int i = 0; i < n; i++) {
        if (!names[i]) return tn__null_arg(false, "tn_save_tensors: names[%d] is NULL", i);
        if (!tensors[i]) return tn__null_arg(true, "tn_save_tensors: tensors[%d] is NULL", i);
    }
    if (!(p->w = tn__calloc((size_t)n, sizeof(wentry)))) return tn_last_status();
    p->n = n;
    for (int i = 0; i < n; i++)
        p->w[i] = (wentry){names[i], tensors[i], tn__st_from_tenet(tensors[i]->dtype), 0, 0};
    tn_status st = check_names(p);
    if (st == TN_OK) st = plan_make(p, NULL, 0);
    if (st < 0) plan_free(p);
    return st;
}

/* ---- into memory ------------------------------------------------------------------ */

static void put_u64le(unsigned char *b, uint64_t v) {
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

/* A bool's byte is 0 or 1 in the file (loaders refuse others), whatever
 * tenet's memory holds (tn_empty's, or a write through tn_data_ptr: tenet
 * reads any byte but 0 as true). */
static void bools_01(unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        b[i] = b[i] != 0;
}

static void *to_buffer(const plan *p, size_t *size) {
    uint64_t total = 8 + (uint64_t)p->hlen + p->data_len;
    if (total > SIZE_MAX) {
        tn__error(TN_ERR_OUT_OF_MEMORY, "tn_save_buffer: %llu bytes do not fit in memory",
                  (unsigned long long)total);
        return NULL;
    }
    unsigned char *b = tn__malloc((size_t)total);
    if (!b) return NULL;
    put_u64le(b, p->hlen);
    memcpy(b + 8, p->hdr, p->hlen);
    unsigned char *data = b + 8 + p->hlen;
    for (int64_t i = 0; i < p->n; i++) {
        const wentry *w = &p->w[i];
        size_t bytes = (size_t)(w->end - w->begin);
        if (tn_copy_to(w->t, data + w->begin, bytes) < 0) {
            tn__mfree(b);
            return NULL;
        }
        if (w->dtype == TN_ST_BOOL) bools_01(data + w->begin, bytes);
    }
    *size = (size_t)total;
    return b;
}

void *tn_save_buffer(const tn_state_dict *sd, size_t *size) {
    TN_CHECK_NULL_PTR(size, "size");
    plan p;
    if (plan_dict(&p, sd) < 0) return NULL;
    void *b = to_buffer(&p, size);
    plan_free(&p);
    return b;
}

void tn_buffer_free(void *buffer) { tn__mfree(buffer); }

/* ---- into a file --------------------------------------------------------------------- */

static tn_status write_all(int fd, const char *tmp, const void *data, size_t n) {
    const char *c = data;
    while (n > 0) {
        size_t chunk = n < ((size_t)1 << 30) ? n : (size_t)1 << 30;
        ssize_t r = write(fd, c, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tn__io_error("cannot write", tmp, errno);
        c += r;
        n -= (size_t)r;
    }
    return TN_OK;
}

/* Whether w is written as it is in memory, or through a block. */
static bool direct(const wentry *w) {
    return w->dtype != TN_ST_BOOL && tn_is_contiguous(w->t) && tn_device_of(w->t).type == TN_CPU;
}

/* The tensors' bytes: contiguous CPU tensors from their memory, the others
 * (and bools, made 0 or 1) through one block, contiguous and on the host
 * (tn_copy_to). */
static tn_status write_data(int fd, const char *tmp, const plan *p) {
    size_t most = 0;
    for (int64_t i = 0; i < p->n; i++) {
        size_t bytes = (size_t)(p->w[i].end - p->w[i].begin);
        if (!direct(&p->w[i]) && bytes > most) most = bytes;
    }
    void *block = most ? tn__malloc(most) : NULL;
    if (most && !block) return tn_last_status();
    tn_status st = TN_OK;
    for (int64_t i = 0; i < p->n && st == TN_OK; i++) {
        const tn_tensor *t = p->w[i].t;
        size_t bytes = (size_t)(p->w[i].end - p->w[i].begin);
        if (bytes == 0) continue;
        if (direct(&p->w[i])) {
            st = write_all(fd, tmp, tn_data_ptr(t), bytes);
        } else {
            st = tn_copy_to(t, block, bytes);
            if (p->w[i].dtype == TN_ST_BOOL) bools_01(block, bytes);
            if (st == TN_OK) st = write_all(fd, tmp, block, bytes);
        }
    }
    tn__mfree(block);
    return st;
}

/* Creates a new file beside path: "<path>.tmp-<pid>-<k>". */
static int open_temp(const char *path, char **tmp) {
    static _Atomic unsigned counter;
    size_t n = strlen(path) + 48;
    if (!(*tmp = tn__malloc(n))) return -1;
    for (int tries = 0; tries < 100; tries++) {
        unsigned k = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
        snprintf(*tmp, n, "%s.tmp-%ld-%u", path, (long)getpid(), k);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) return fd;
        if (errno != EEXIST && errno != EINTR) break;
    }
    tn__io_error("cannot save to", path, errno);
    tn__mfree(*tmp);
    *tmp = NULL;
    return -1;
}

static tn_status to_file(const char *path, const plan *p) {
    char *tmp;
    int fd = open_temp(path, &tmp);
    if (fd < 0) return tn_last_status();
    unsigned char size[8];
    put_u64le(size, p->hlen);
    tn_status st = write_all(fd, tmp, size, 8);
    if (st == TN_OK) st = write_all(fd, tmp, p->hdr, p->hlen);
    if (st == TN_OK) st = write_data(fd, tmp, p);
    if (close(fd) != 0 && st == TN_OK) st = tn__io_error("cannot write", tmp, errno);
    if (st == TN_OK && rename(tmp, path) != 0) st = tn__io_error("cannot save to", path, errno);
    if (st < 0) unlink(tmp);
    tn__mfree(tmp);
    return st;
}

tn_status tn_save(const char *path, const tn_state_dict *sd) {
    TN_CHECK_NULL_PTR_ST(path, "path");
    plan p;
    tn_status st = plan_dict(&p, sd);
    if (st < 0) return st;
    st = to_file(path, &p);
    plan_free(&p);
    return st;
}

tn_status tn_save_tensors(const char *path, int n, const char *const *names,
                          tn_tensor *const *tensors) {
    TN_CHECK_NULL_PTR_ST(path, "path");
    plan p;
    tn_status st = plan_arrays(&p, n, names, tensors);
    if (st < 0) return st;
    st = to_file(path, &p);
    plan_free(&p);
    return st;
}
