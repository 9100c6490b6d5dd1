/* Text helpers of the I/O layer: UTF-8 validation (the format's header is
 * UTF-8, and names tenet writes must be), names quoted for messages (the
 * system's reason for an I/O error: tn__io_error, engine/core/error.c). */
#include <stdio.h>

#include "io_internal.h"

/* Length of the UTF-8 sequence starting at s[0..n), 0 when it is not a
 * valid one (RFC 3629: shortest form, no surrogates, at most U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

bool tn__utf8_valid(const unsigned char *s, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq(s + i, n - i);
        if (!k) {
            *bad = i;
            return false;
        }
        i += k;
    }
    return true;
}

const char *tn__quote_name(char *buf, size_t size, const char *name) {
    size_t max = size > 8 ? size - 8 : 0, n = strlen(name);
    if (n <= max) {
        snprintf(buf, size, "'%s'", name);
        return buf;
    }
    while (max > 0 && ((unsigned char)name[max] & 0xC0) == 0x80)
        max--; /* a boundary */
    snprintf(buf, size, "'%.*s...'", (int)max, name);
    return buf;
}
