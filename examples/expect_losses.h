/* examples/expect_losses.h — --expect-losses for the examples: a reference
 * run's per-step losses (PyTorch's: scripts/gpt_reference.py, cnn_reference.py), one per
 * line, read before training and compared step by step. */
#ifndef TN_EXAMPLES_EXPECT_LOSSES_H
#define TN_EXAMPLES_EXPECT_LOSSES_H

#include <stdio.h>
#include <stdlib.h>

/* The first `steps` losses of path; NULL (reported as "prog: ...") on error. */
static inline double *read_losses(const char *prog, const char *path, int steps) {
    FILE *f = fopen(path, "r");
    double *v = f ? malloc((size_t)steps * sizeof *v) : NULL;
    int n = 0;
    while (v && n < steps && fscanf(f, "%lf", &v[n]) == 1)
        n++;
    if (f) fclose(f);
    if (v && n == steps) return v;
    fprintf(stderr, "%s: %s: %s\n", prog, path,
            f ? "fewer losses than --steps" : "cannot open the reference losses");
    free(v);
    return NULL;
}

#endif
