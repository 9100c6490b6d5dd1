/* examples/digits.h — loader for the shipped digits dataset (data/digits.csv.gz).
 *
 * Format (data/README.md): gzip'd CSV, no header, one image per line: 64
 * integer pixel counts 0..16 (an 8x8 image, row-major) then the label 0..9.
 * zlib's gzread also reads an uncompressed CSV transparently.
 */
#ifndef TENET_EXAMPLES_DIGITS_H
#define TENET_EXAMPLES_DIGITS_H

#include <stddef.h>
#include <stdint.h>

#define DIGITS_PIXELS 64
#define DIGITS_CLASSES 10
#define DIGITS_ROWS 1797 /* rows in the shipped file */

typedef struct digits {
    int64_t n;       /* rows */
    float *pixels;   /* n x 64, scaled by 1/16 to [0, 1] */
    int64_t *labels; /* n, in [0, 10) */
} digits;

/* Reads every row of `path` into *out (owned: free with digits_free).
 * Returns 0, or -1 with a one-line reason in err (the file cannot be opened,
 * a line is malformed, a value is out of range, the gzip stream is damaged or
 * truncated, or the file holds no rows); *out is then empty. */
int digits_load(const char *path, digits *out, char *err, size_t errlen);
void digits_free(digits *d);

#endif
