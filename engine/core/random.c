/* Random numbers: xoshiro256** per thread, seeded from a global seed that
 * tn_manual_seed sets (threads created later start from it too). */
#include <math.h>

#include "internal.h"

static _Atomic uint64_t g_seed = 0x853c49e6748fea9bULL;
static _Atomic uint64_t g_seed_generation = 1;
static _Thread_local uint64_t tls_state[4];
static _Thread_local uint64_t tls_generation;

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void reseed(uint64_t seed) {
    for (int i = 0; i < 4; i++) tls_state[i] = splitmix(&seed);
}

void tn_manual_seed(uint64_t seed) {
    /* relaxed: other threads pick the new seed up at their next draw; there
     * is no data published with it. */
    atomic_store_explicit(&g_seed, seed, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_seed_generation, 1, memory_order_relaxed);
    reseed(seed);
    tls_generation = atomic_load_explicit(&g_seed_generation, memory_order_relaxed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tn__rand_u64(void) {
    uint64_t gen = atomic_load_explicit(&g_seed_generation, memory_order_relaxed);
    if (tls_generation != gen) {
        reseed(atomic_load_explicit(&g_seed, memory_order_relaxed));
        tls_generation = gen;
    }
    uint64_t *s = tls_state;
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double tn__rand_uniform(void) { return (double)(tn__rand_u64() >> 11) * 0x1.0p-53; }

double tn__rand_normal(void) {
    /* Box-Muller; one value per call keeps the generator state simple. */
    double u1 = tn__rand_uniform(), u2 = tn__rand_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
