/* Loader for the digits dataset: gzip'd CSV read line by line with zlib. */
#include "digits.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define LINE_MAX_CHARS 1024 /* a valid row is at most 64 * 3 + 2 chars */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* A damaged or truncated gzip stream explains a bad line better than the
 * line itself: report it when zlib has one. */
static int stream_error(gzFile gz, const char *path, char *err, size_t errlen) {
    int code = Z_OK;
    const char *msg = gzerror(gz, &code);
    if (code == Z_OK || code == Z_STREAM_END) return 0;
    if (code == Z_ERRNO) return fail(err, errlen, "cannot read %s: %s", path, strerror(errno));
    size_t plen = strlen(path); /* zlib prefixes its message with the path */
    if (!strncmp(msg, path, plen) && !strncmp(msg + plen, ": ", 2)) msg += plen + 2;
    return fail(err, errlen, "%s: damaged or truncated gzip data (%s)", path, msg);
}

/* Parses one CSV row of 65 integers into pixels/label. */
static int parse_row(const char *line, float *pixels, int64_t *label, char *why, size_t whylen) {
    const char *p = line;
    for (int col = 0; col <= DIGITS_PIXELS; col++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno) return fail(why, whylen, "column %d is not an integer", col + 1);
        long hi = col < DIGITS_PIXELS ? 16 : DIGITS_CLASSES - 1;
        if (v < 0 || v > hi)
            return fail(why, whylen, "column %d is %ld, outside 0..%ld", col + 1, v, hi);
        if (col < DIGITS_PIXELS)
            pixels[col] = (float)v / 16.0f;
        else
            *label = v;
        p = end;
        char want = col < DIGITS_PIXELS ? ',' : '\0';
        if (want == ',' && *p != ',')
            return fail(why, whylen, "expected %d comma-separated values, found %d",
                        DIGITS_PIXELS + 1, col + 1);
        if (want == ',') p++;
    }
    while (*p == '\r' || *p == '\n' || *p == ' ')
        p++;
    if (*p) return fail(why, whylen, "more than %d values", DIGITS_PIXELS + 1);
    return 0;
}

static int grow(digits *d, int64_t *cap) {
    int64_t ncap = *cap ? *cap * 2 : 2048;
    float *px = realloc(d->pixels, (size_t)ncap * DIGITS_PIXELS * sizeof *px);
    if (!px) return -1;
    d->pixels = px;
    int64_t *lb = realloc(d->labels, (size_t)ncap * sizeof *lb);
    if (!lb) return -1;
    d->labels = lb;
    *cap = ncap;
    return 0;
}

static bool blank(const char *s) {
    while (*s == ' ' || *s == '\r' || *s == '\n' || *s == '\t')
        s++;
    return *s == '\0';
}

/* Reads the rows; returns 0 or -1 with err set. */
static int read_rows(gzFile gz, const char *path, digits *d, char *err, size_t errlen) {
    char line[LINE_MAX_CHARS];
    int64_t cap = 0;
    for (int64_t lineno = 1; gzgets(gz, line, sizeof line); lineno++) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !gzeof(gz))
            return fail(err, errlen, "%s: line %lld is too long for a digits row", path,
                        (long long)lineno);
        if (blank(line)) continue;
        if (d->n == cap && grow(d, &cap) < 0) return fail(err, errlen, "%s: out of memory", path);
        char why[128];
        if (parse_row(line, d->pixels + d->n * DIGITS_PIXELS, &d->labels[d->n], why, sizeof why) <
            0) {
            if (stream_error(gz, path, err, errlen) < 0) return -1;
            return fail(err, errlen, "%s: line %lld: %s", path, (long long)lineno, why);
        }
        d->n++;
    }
    if (stream_error(gz, path, err, errlen) < 0) return -1;
    if (d->n == 0) return fail(err, errlen, "%s: no rows (empty file?)", path);
    return 0;
}

int digits_load(const char *path, digits *out, char *err, size_t errlen) {
    *out = (digits){0};
    if (!path) return fail(err, errlen, "no dataset path given");
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return fail(err, errlen, "cannot open %s: %s", path,
                    errno ? strerror(errno) : "zlib could not allocate its state");
    int rc = read_rows(gz, path, out, err, errlen);
    gzclose(gz);
    if (rc < 0) digits_free(out);
    return rc;
}

void digits_free(digits *d) {
    free(d->pixels);
    free(d->labels);
    *d = (digits){0};
}
