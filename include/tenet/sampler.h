/* tenet/sampler.h — which samples each process trains on (DistributedSampler).
 *
 * Data-parallel training (tenet/dist.h) gives each of `world` processes its
 * share of every epoch. The share does not need MPI, so it lives here, in
 * tenet itself: a single-process run (world 1) draws the same permutation as
 * a run of N processes with the same seed, and N processes with a local
 * batch B see, step by step, exactly the global batches of N*B that one
 * process sees (rank r's k-th batch holds positions (k*B + j)*N + r of the
 * epoch's permutation).
 */
#ifndef TENET_SAMPLER_H
#define TENET_SAMPLER_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* torch.utils.data.DistributedSampler(n, num_replicas=world, rank, shuffle,
 * seed, drop_last) at set_epoch(epoch): with shuffle the epoch's order is a
 * permutation of 0..n-1 drawn from (seed, epoch) alone, the same on every
 * rank (Fisher-Yates over splitmix64; not torch's randperm stream), else
 * 0..n-1. Without drop_last the order is padded with its own first indices
 * to a multiple of world; with drop_last it is cut to one. Rank takes
 * positions rank, rank + world, rank + 2*world, ...
 *
 * Returns the number of indices of each rank (the same on every rank) and
 * writes them to out[0..count) when out is not NULL (size it with a first
 * call with out = NULL). -1 + TN_ERR_INVALID_ARGUMENT for n < 0, world < 1,
 * rank outside [0, world), epoch < 0; TN_ERR_OUT_OF_MEMORY. */
int64_t tn_sampler_indices(int64_t n, int world, int rank, uint64_t seed, int64_t epoch,
                           bool shuffle, bool drop_last, int64_t *out);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
