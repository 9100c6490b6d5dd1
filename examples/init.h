/* examples/init.h — parameter initialisation and the data shuffle shared by
 * the demo and bench/. */
#ifndef TENET_EXAMPLES_INIT_H
#define TENET_EXAMPLES_INIT_H

#include <tenet.h>

/* torch.nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn
 * under no-grad, then made a leaf that requires grad. A new reference (NULL
 * + tn_last_error() on failure). */
tn_tensor *uniform_leaf(int ndim, const int64_t *shape, int64_t fan_in);

/* Fisher-Yates over a[0..n) with splitmix64 from *state (advanced): the
 * same order on every machine, so the demo, bench/ and compare_torch.py
 * see the same batches. */
void example_shuffle(int64_t *a, int64_t n, uint64_t *state);

#endif
