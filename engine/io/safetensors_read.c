/* tn_load, tn_load_buffer: the header is read and validated first
 * (safetensors_header.c), then each tensor is made and its bytes read
 * straight into its memory (half and bfloat16 through a block, converted to
 * float32). A file is read with pread, not mapped: a file truncated while
 * mapped faults on access, and a load must fail cleanly instead (a short
 * read is TN_ERR_IO). */
#define _POSIX_C_SOURCE 200809L /* pread, O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian: tenet reads it in place on little-endian hosts");

tn_status tn__st_read(const tn_st_source *s, uint64_t off, void *dst, size_t n) {
    if (s->fd < 0) {
        if (n) memcpy(dst, s->buf + off, n);
        return TN_OK;
    }
    char *p = dst;
    while (n > 0) {
        size_t chunk = n < ((size_t)1 << 30) ? n : (size_t)1 << 30;
        ssize_t r = pread(s->fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tn__io_error("cannot read", s->path, errno);
        if (r == 0)
            return tn__error(TN_ERR_IO,
                             "cannot read '%.300s': the file ends before byte %llu; "
                             "was it truncated while it was read?",
                             s->path, (unsigned long long)(off + n));
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return TN_OK;
}

/* BOOL bytes must be 0 or 1: any other is not a bool (C's, or PyTorch's). */
static tn_status check_bools(const tn_st_source *s, const tn_st_info *ti, const unsigned char *b,
                             size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i] > 1) {
            char q[96];
            return tn__st_error(s, TN_ERR_FORMAT, NULL,
                                "tensor %s: BOOL element %zu is the byte "
                                "%u, neither 0 nor 1",
                                tn__quote_name(q, sizeof q, ti->name), i, b[i]);
        }
    return TN_OK;
}

/* The bytes of ti into t (contiguous, of ti's tenet dtype). */
static tn_status read_data(const tn_st_source *s, uint64_t start, const tn_st_info *ti,
                           tn_tensor *t) {
    size_t bytes = (size_t)(ti->end - ti->begin);
    if (bytes == 0) return TN_OK;
    uint64_t at = start + ti->begin;
    tn_status st = tn__st_read(s, at, tn__ptr(t), bytes);
    if (st == TN_OK && ti->dtype == TN_ST_BOOL)
        st = check_bools(s, ti, (const unsigned char *)tn__ptr(t), bytes);
    return st;
}

static tn_state_dict *load(const tn_st_source *s) {
    tn_st_header h;
    if (tn__st_header_read(s, &h) < 0) return NULL;
    tn_sd_entry *e = tn__calloc((size_t)h.n, sizeof *e);
    int64_t made = 0;
    tn_status st = e ? TN_OK : tn_last_status();
    for (int64_t i = 0; i < h.n && st == TN_OK; i++) { /* h.t is sorted by name */
        const tn_st_info *ti = &h.t[i];
        tn_tensor *t = tn__empty(ti->ndim, ti->shape, (tn_dtype)tn__st_to_tenet(ti->dtype));
        char *name = t ? tn__strdup_n(ti->name, strlen(ti->name)) : NULL;
        if (name)
            e[made++] = (tn_sd_entry){name, t};
        else
            tn_release(t);
        st = name ? read_data(s, h.data_start, ti, t) : tn_last_status();
    }
    tn_sd_meta *m = h.meta;
    int64_t nm = h.nm;
    h.meta = NULL; /* the dict takes them */
    h.nm = 0;
    tn__st_header_free(&h);
    if (st < 0) {
        tn__sd_entries_free(e, made);
        tn__sd_meta_free(m, nm);
        return NULL;
    }
    return tn__sd_adopt(e, made, m, nm);
}

tn_state_dict *tn_load(const char *path) {
    TN_CHECK_NULL_PTR(path, "path");
    int fd;
    do
        fd = open(path,
                  O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block: refused below */
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        tn__io_error("cannot open", path, errno);
        return NULL;
    }
    struct stat sb;
    tn_state_dict *sd = NULL;
    if (fstat(fd, &sb) != 0)
        tn__io_error("cannot stat", path, errno);
    else if (!S_ISREG(sb.st_mode))
        tn__error(TN_ERR_IO, "cannot load '%.300s': not a regular file", path);
    else
        sd = load(&(tn_st_source){fd, NULL, (uint64_t)sb.st_size, path});
    close(fd);
    return sd;
}

tn_state_dict *tn_load_buffer(const void *data, size_t size) {
    if (!data && size) {
        tn__error(TN_ERR_INVALID_ARGUMENT, "tn_load_buffer: argument 'data' is NULL");
        return NULL;
    }
    return load(&(tn_st_source){-1, data, size, NULL});
}
