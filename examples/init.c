/* examples/init.c — parameter initialisation shared by the demo and bench/. */
#include <math.h>

#include "init.h"

tn_tensor *uniform_leaf(int ndim, const int64_t *shape, int64_t fan_in) {
    double k = 1.0 / sqrt((double)fan_in);
    if (tn_scope_begin() != TN_OK) return NULL; /* the error is set */
    bool prev = tn_set_grad_enabled(false);
    tn_tensor *w = tn_add_scalar(tn_mul_scalar(tn_rand(ndim, shape, TN_F32), 2 * k), -k);
    tn_set_grad_enabled(prev);
    if (w && (tn_requires_grad_(w, true) < 0 || !tn_keep(w))) w = NULL;
    tn_scope_end();
    return w;
}

void example_shuffle(int64_t *a, int64_t n, uint64_t *state) {
    for (int64_t i = n - 1; i > 0; i--) {
        uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        int64_t j = (int64_t)(z % (uint64_t)(i + 1));
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
