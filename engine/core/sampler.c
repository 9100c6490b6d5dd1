/* tn_sampler_indices: a rank's share of one epoch (tenet/sampler.h). */
#include "internal.h"

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) without modulo bias: draws below 2^64 mod bound are
 * rejected, so the rest is a whole number of copies of [0, bound). */
static uint64_t below(uint64_t *s, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = splitmix64(s);
        if (r >= threshold) return r % bound;
    }
}

int64_t tn_sampler_indices(int64_t n, int world, int rank, uint64_t seed, int64_t epoch,
                           bool shuffle, bool drop_last, int64_t *out) {
    if (n < 0 || world < 1 || rank < 0 || rank >= world || epoch < 0) {
        tn__error(TN_ERR_INVALID_ARGUMENT,
                  "tn_sampler_indices: need n >= 0, world >= 1, 0 <= rank < world and epoch >= 0 "
                  "(got n %lld, world %d, rank %d, epoch %lld)",
                  (long long)n, world, rank, (long long)epoch);
        return -1;
    }
    /* DistributedSampler's num_samples: ceil((n - world) / world) = floor(n / world) with
     * drop_last and a remainder, else ceil(n / world); formed without n + world, which
     * overflows for n near 2^63 */
    int64_t count = drop_last && n % world ? (n - 1) / world : n ? 1 + (n - 1) / world : 0;
    if (!out || count == 0) return count;
    int64_t *order = NULL;
    if (shuffle && n > 0) {
        order = tn__malloc_quiet((size_t)n * sizeof *order);
        if (!order) {
            tn__error(TN_ERR_OUT_OF_MEMORY, "tn_sampler_indices: out of memory for %lld indices",
                      (long long)n);
            return -1;
        }
        for (int64_t i = 0; i < n; i++)
            order[i] = i;
        uint64_t s = seed ^ (0xd1b54a32d192ed03ULL * ((uint64_t)epoch + 1));
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)below(&s, (uint64_t)i + 1);
            int64_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    /* position p of the padded order is p mod n of the order */
    for (int64_t k = 0; k < count; k++) {
        int64_t p = (int64_t)(((uint64_t)k * (uint64_t)world + (uint64_t)rank) % (uint64_t)n);
        out[k] = order ? order[p] : p;
    }
    tn__mfree(order);
    return count;
}
