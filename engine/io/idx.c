/* tn_idx_load, tn_idx_load_buffer: IDX files (MNIST's format), plain or
 * gzipped (tenet/io.h). The header is read and checked first; the data's
 * size follows from it and is checked against what the input can hold (a
 * plain input's exact size; for gzip, deflate's largest expansion, 1032:1)
 * before the tensor is allocated, so a corrupt header cannot ask for more
 * memory than the file could fill. The data is then read in blocks and
 * converted into the tensor as it comes; one byte more is asked for at the
 * end, which finds trailing bytes and makes zlib check the gzip trailer
 * (CRC and length).
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io_internal.h"

#define IDX_BLOCK ((size_t)1 << 16) /* a multiple of every element size */
#define IDX_MAX_INFLATE 1032u       /* deflate's largest expansion ratio (zlib's FAQ) */

/* Where the bytes come from: a file through zlib's gzFile (which reads
 * gzip and plain files alike), or memory, inflated when gzipped. */
typedef struct idx_src {
    const char *name; /* for messages */
    gzFile gz;
    const unsigned char *buf; /* memory: size bytes, plain from pos */
    size_t size, pos;
    z_stream z;
    bool inflating, ended; /* memory, gzipped: z is live; the member has ended */
    uint64_t packed;       /* input bytes (compressed size when gzipped) */
    bool gzip;
} idx_src;

static tn_status fmt_error(const idx_src *s, const char *fmt, const char *detail) {
    return tn__error(TN_ERR_FORMAT, "not a valid IDX file '%.300s': %s%s", s->name, fmt, detail);
}

static tn_status gz_error(const idx_src *s, int code, const char *msg) {
    if (code == Z_MEM_ERROR)
        return tn__error(TN_ERR_OUT_OF_MEMORY, "reading '%.300s': zlib is out of memory", s->name);
    if (code == Z_ERRNO) return tn__io_error("cannot read", s->name, errno);
    size_t len = strlen(s->name); /* gzerror puts the path first */
    if (msg && !strncmp(msg, s->name, len) && !strncmp(msg + len, ": ", 2)) msg += len + 2;
    return tn__error(TN_ERR_FORMAT,
                     "not a valid IDX file '%.300s': truncated or damaged gzip data (%s)", s->name,
                     msg && *msg ? msg : "zlib error");
}

/* Up to n (<= IDX_BLOCK) bytes into dst; *got is short only at the end. */
static tn_status src_read(idx_src *s, unsigned char *dst, size_t n, size_t *got) {
    *got = 0;
    if (s->gz) {
        int r = gzread(s->gz, dst, (unsigned)n);
        int code = Z_OK;
        const char *msg = gzerror(s->gz, &code);
        if (r < 0 || (code != Z_OK && code != Z_STREAM_END)) return gz_error(s, code, msg);
        *got = (size_t)r;
        return TN_OK;
    }
    if (!s->inflating) {
        *got = n < s->size - s->pos ? n : s->size - s->pos;
        if (*got) memcpy(dst, s->buf + s->pos, *got); /* buf may be NULL when empty */
        s->pos += *got;
        return TN_OK;
    }
    s->z.next_out = dst;
    s->z.avail_out = (uInt)n;
    while (s->z.avail_out > 0 && !s->ended) {
        int r = inflate(&s->z, Z_NO_FLUSH);
        if (r == Z_STREAM_END)
            s->ended = true;
        else if (r == Z_BUF_ERROR) /* no input left inside the member */
            return fmt_error(s, "the gzip data ends early (truncated?)", "");
        else if (r != Z_OK)
            return gz_error(s, r, s->z.msg);
    }
    *got = n - s->z.avail_out;
    return TN_OK;
}

/* Exactly n bytes, or a truncation error naming `what`. */
static tn_status src_read_all(idx_src *s, unsigned char *dst, size_t n, const char *what) {
    size_t got;
    tn_status st = src_read(s, dst, n, &got);
    if (st == TN_OK && got < n) st = fmt_error(s, "the file ends within ", what);
    return st;
}

/* ---- the header --------------------------------------------------------------- */

typedef struct idx_header {
    int type; /* the format's type code */
    size_t esize;
    int ndim;
    int64_t shape[TN_MAX_DIMS];
    uint64_t bytes; /* of the data */
} idx_header;

static size_t type_size(int type) {
    switch (type) {
    case 0x08: /* unsigned byte */
    case 0x09: /* signed byte */
        return 1;
    case 0x0B: /* short */
        return 2;
    case 0x0C: /* int */
    case 0x0D: /* float */
        return 4;
    case 0x0E: /* double */
        return 8;
    default:
        return 0;
    }
}

/* tenet's dtype for TN_DTYPE_SAME: one that holds every value exactly. */
static tn_dtype type_dtype(int type) {
    return type == 0x0C ? TN_I32 : type == 0x0D ? TN_F32 : type == 0x0E ? TN_F64 : TN_I16;
}

static tn_status read_header(idx_src *s, idx_header *h) {
    unsigned char m[4], d[4 * TN_MAX_DIMS];
    tn_status st = src_read_all(s, m, 4, "the magic number");
    if (st < 0) return st;
    char detail[96];
    if (m[0] || m[1]) {
        snprintf(detail, sizeof detail, "0x%02x 0x%02x, not 0 0", m[0], m[1]);
        return fmt_error(s, "bad magic number: its first two bytes are ", detail);
    }
    h->type = m[2];
    h->esize = type_size(h->type);
    h->ndim = m[3];
    if (!h->esize) {
        snprintf(detail, sizeof detail, "0x%02x", h->type);
        return fmt_error(s, "unknown data type ", detail);
    }
    if (h->ndim == 0) return fmt_error(s, "0 dimensions", "");
    if (h->ndim > TN_MAX_DIMS)
        return tn__error(TN_ERR_SHAPE, "IDX file '%.300s' has %d dimensions; tenet has at most %d",
                         s->name, h->ndim, TN_MAX_DIMS);
    if ((st = src_read_all(s, d, 4 * (size_t)h->ndim, "the dimensions")) < 0) return st;
    uint64_t n = h->esize;
    bool over = false;
    for (int i = 0; i < h->ndim; i++) {
        const unsigned char *p = d + 4 * i;
        h->shape[i] =
            (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        over |= __builtin_mul_overflow(n, (uint64_t)h->shape[i], &n);
    }
    if (over || n > (uint64_t)INT64_MAX / 2)
        return fmt_error(s, "the dimensions' product overflows", "");
    h->bytes = n;
    uint64_t head = 4 + 4 * (uint64_t)h->ndim;
    if (!s->gzip && s->packed != head + n) {
        snprintf(detail, sizeof detail, "%llu bytes, the header says %llu",
                 (unsigned long long)s->packed, (unsigned long long)(head + n));
        return fmt_error(s, s->packed < head + n ? "truncated: " : "trailing bytes: ", detail);
    }
    if (s->gzip && n / IDX_MAX_INFLATE > s->packed) {
        snprintf(detail, sizeof detail, "%llu data bytes cannot inflate from %llu",
                 (unsigned long long)n, (unsigned long long)s->packed);
        return fmt_error(s, "truncated or bad dimensions: ", detail);
    }
    return TN_OK;
}

/* ---- the data ----------------------------------------------------------------- */

/* Element i of a block, big-endian, as a double (exact for every type). */
static double value_at(const unsigned char *p, int type) {
    uint64_t u = 0;
    for (size_t k = 0; k < type_size(type); k++)
        u = u << 8 | p[k];
    switch (type) {
    case 0x08:
        return (double)u;
    case 0x09:
        return (double)(int8_t)u;
    case 0x0B:
        return (double)(int16_t)u;
    case 0x0C:
        return (double)(int32_t)(uint32_t)u;
    case 0x0D: {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        return f;
    }
    default: {
        double x;
        memcpy(&x, &u, 8);
        return x;
    }
    }
}

/* n elements of a block into out (dtype dt) from element `at` on. */
static void convert(const unsigned char *b, size_t n, const idx_header *h, tn_dtype dt,
                    double scale, char *out, int64_t at) {
    for (size_t i = 0; i < n; i++) {
        double v = value_at(b + i * h->esize, h->type);
        switch (dt) {
        case TN_F32:
            ((float *)out)[at + (int64_t)i] = (float)(v * scale);
            break;
        case TN_F64:
            ((double *)out)[at + (int64_t)i] = v * scale;
            break;
        case TN_I16: /* integer targets only take integer types they hold (checked) */
            ((int16_t *)out)[at + (int64_t)i] = (int16_t)v;
            break;
        case TN_I32:
            ((int32_t *)out)[at + (int64_t)i] = (int32_t)v;
            break;
        default:
            ((int64_t *)out)[at + (int64_t)i] = (int64_t)v;
            break;
        }
    }
}

/* The dtype the data is read into (halves: float32, then cast), or -1.
 * Integer dtypes take only the integer types whose every value they hold. */
static int target_dtype(const idx_src *s, const idx_header *h, tn_dtype dtype) {
    if (dtype == TN_DTYPE_SAME) return type_dtype(h->type);
    if (tn__is_float(dtype)) return tn__is_half(dtype) ? TN_F32 : dtype;
    bool floats = h->type == 0x0D || h->type == 0x0E;
    if (!floats && (dtype != TN_I16 || h->esize <= 2)) return dtype;
    tn__error(TN_ERR_DTYPE, "IDX file '%.300s' holds %s; %s cannot hold every such value", s->name,
              h->type == 0x0D   ? "floats"
              : h->type == 0x0E ? "doubles"
                                : "ints",
              tn_dtype_name(dtype));
    return -1;
}

static tn_tensor *read_data(idx_src *s, const idx_header *h, tn_dtype dtype, double scale) {
    int dt = target_dtype(s, h, dtype);
    if (dt < 0) return NULL;
    unsigned char *b = tn__malloc(IDX_BLOCK);
    tn_tensor *t = b ? tn__empty(h->ndim, h->shape, (tn_dtype)dt) : NULL;
    tn_status st = t ? TN_OK : tn_last_status();
    int64_t at = 0;
    for (uint64_t left = h->bytes; st == TN_OK && left > 0;) {
        size_t n = left < IDX_BLOCK ? (size_t)left : IDX_BLOCK;
        st = src_read_all(s, b, n, "the data (truncated?)");
        if (st == TN_OK) convert(b, n / h->esize, h, (tn_dtype)dt, scale, tn__ptr(t), at);
        at += (int64_t)(n / h->esize);
        left -= n;
    }
    size_t extra = 0;
    if (st == TN_OK && (st = src_read(s, b, 1, &extra)) == TN_OK && extra)
        st = fmt_error(s, "trailing bytes after the data", "");
    tn__mfree(b);
    if (st == TN_OK && dtype != TN_DTYPE_SAME && (tn_dtype)dt != dtype) {
        tn_tensor *c = tn__cast(t, dtype);
        tn_release(t);
        t = c;
    } else if (st < 0) {
        tn_release(t);
        t = NULL;
    }
    return t;
}

static tn_status check_args(const char *fn, tn_dtype dtype, double scale) {
    if (dtype == TN_BOOL || (dtype != TN_DTYPE_SAME && ((int)dtype < 0 || dtype >= TN_DTYPE_COUNT)))
        return tn__error(TN_ERR_DTYPE, "%s: dtype must be a number type or TN_DTYPE_SAME", fn);
    if (!isfinite(scale))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: scale must be finite, got %g", fn, scale);
    if (scale != 1.0 && !tn__is_float(dtype))
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "%s: scale %g needs a floating point dtype (integers load as they are)",
                         fn, scale);
    return TN_OK;
}

static tn_tensor *load(idx_src *s, tn_dtype dtype, double scale) {
    idx_header h;
    tn_tensor *t = read_header(s, &h) == TN_OK ? read_data(s, &h, dtype, scale) : NULL;
    return t ? tn__ret(t) : NULL;
}

/* A zlib allocation through tenet's (the allocation-failure hook reaches it). */
static voidpf z_alloc(voidpf opaque, uInt n, uInt size) {
    (void)opaque;
    return tn__calloc_quiet(n, size);
}

static void z_free(voidpf opaque, voidpf p) {
    (void)opaque;
    tn__mfree(p);
}

tn_tensor *tn_idx_load_buffer(const void *data, size_t size, tn_dtype dtype, double scale) {
    if (!data && size) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "tn_idx_load_buffer: argument 'data' is NULL");
        return NULL;
    }
    if (check_args(__func__, dtype, scale) < 0) return NULL;
    idx_src s = {.name = "<buffer>", .buf = data, .size = size, .packed = size};
    s.gzip = size >= 2 && s.buf[0] == 0x1f && s.buf[1] == 0x8b;
    if (s.gzip) {
        s.z = (z_stream){.next_in = (Bytef *)(uintptr_t)data, .zalloc = z_alloc, .zfree = z_free};
        s.z.avail_in = size > UINT_MAX ? UINT_MAX : (uInt)size; /* more than 4 GiB: truncated */
        int r = inflateInit2(&s.z, 16 + MAX_WBITS);             /* 16: a gzip wrapper */
        if (r != Z_OK) {
            gz_error(&s, r, s.z.msg);
            return NULL;
        }
        s.inflating = true;
    }
    tn_tensor *t = load(&s, dtype, scale);
    if (s.inflating) inflateEnd(&s.z);
    return t;
}

tn_tensor *tn_idx_load(const char *path, tn_dtype dtype, double scale) {
    TN_CHECK_NULL_PTR(path, "path");
    if (check_args(__func__, dtype, scale) < 0) return NULL;
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        tn__io_error("cannot open", path, errno);
        return NULL;
    }
    struct stat sb;
    idx_src s = {.name = path};
    if (fstat(fd, &sb) != 0) {
        tn__io_error("cannot stat", path, errno);
    } else if (!S_ISREG(sb.st_mode)) {
        tn__error(TN_ERR_IO, "cannot load '%.300s': not a regular file", path);
    } else if (!(s.gz = gzdopen(fd, "rb"))) {
        tn__error(TN_ERR_OUT_OF_MEMORY, "reading '%.300s': zlib is out of memory", path);
    } else {
        fd = -1; /* gzclose closes it */
        s.packed = (uint64_t)sb.st_size;
        gzbuffer(s.gz, 1u << 17);
        s.gzip = !gzdirect(s.gz);
        tn_tensor *t = load(&s, dtype, scale);
        gzclose(s.gz);
        return t;
    }
    close(fd);
    return NULL;
}
