/* tenet/dist.h — many processes: collectives on tensors and data-parallel
 * training (DistributedDataParallel) over MPI.
 *
 * A separate library, tenet_mpi (CMake: tenet::tenet_mpi; pkg-config:
 * tenet-mpi), so that tenet itself never depends on MPI. Run the program
 * under mpirun (`mpirun -np 4 ./train`, `mpirun --hostfile hosts ...`, or a
 * scheduler's launcher): every process calls the same collectives in the
 * same order (SPMD). tenet works on a duplicate of MPI_COMM_WORLD, so the
 * program's own MPI traffic never mixes with tenet's.
 *
 * Errors: every function returns a negative tn_status, or -1 or NULL, and
 * sets the thread's message. A collective first checks, with one small
 * allreduce, that every rank called it with the same element count, dtype,
 * operation and root: when they differ, or when the call is invalid on some
 * rank (a non-contiguous tensor, say), every rank returns TN_ERR_DIST and
 * none touches its tensor — nothing hangs waiting for a mismatched peer. An
 * MPI failure is TN_ERR_DIST with MPI's own error string.
 *
 * Threads: tn_dist_init asks MPI for MPI_THREAD_MULTIPLE (Open MPI grants
 * it); then collectives may be called from any thread, but, as in MPI, two
 * threads must not run collectives concurrently (the order on every rank
 * must be the same). When MPI grants only MPI_THREAD_SERIALIZED, tenet
 * serialises its own calls and the program must not call MPI at the same
 * time; with MPI_THREAD_FUNNELED or SINGLE, tenet calls MPI only from the
 * thread that called tn_dist_init (elsewhere collectives return
 * TN_ERR_DIST, and DDP's buckets wait for the end of backward).
 *
 * Devices: CPU tensors are reduced in place. CUDA tensors go through a host
 * copy, or directly when the MPI library is CUDA-aware (Open MPI's
 * MPIX_Query_cuda_support(), asked at tn_dist_init).
 */
#ifndef TENET_DIST_H
#define TENET_DIST_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* Initialises MPI (MPI_Init_thread with MPI_THREAD_MULTIPLE) unless the
 * program already did, then makes tenet's communicator. Call once, before
 * any other tn_dist_ or tn_ddp_ function; again: TN_OK, nothing done. */
tn_status tn_dist_init(int *argc, char ***argv);
/* Frees the communicator; finalises MPI when tn_dist_init initialised it.
 * After it, tn_dist_init cannot be called again (MPI's rule). */
tn_status tn_dist_finalize(void);
bool tn_dist_is_initialized(void);
/* This process's rank and the number of processes; -1 + TN_ERR_DIST before
 * tn_dist_init. */
int tn_dist_rank(void);
int tn_dist_world_size(void);
/* Whether MPI granted MPI_THREAD_MULTIPLE; whether it is CUDA-aware. */
bool tn_dist_thread_multiple(void);
bool tn_dist_cuda_aware(void);

typedef enum tn_reduce_op {
    TN_REDUCE_SUM = 0,  /* integers wrap (two's complement) as tenet's sums; bool: or */
    TN_REDUCE_MEAN = 1, /* the sum divided by the world size: float32/float64 only */
    TN_REDUCE_MAX = 2,  /* bool: or */
    TN_REDUCE_MIN = 3   /* bool: and */
} tn_reduce_op;

/* dist.all_reduce(t, op): every rank's t becomes the reduction of all
 * ranks' t, in place (one version bump, like any in-place op; allowed on
 * leaves that require grad, as a write under no-grad). t contiguous, any
 * dtype, the same numel and dtype on every rank (shapes may differ). */
tn_status tn_dist_allreduce_(tn_tensor *t, tn_reduce_op op);
/* dist.broadcast(t, src=root): every rank's t becomes root's (in place;
 * root's own t is not written and keeps its version). */
tn_status tn_dist_broadcast_(tn_tensor *t, int root);
tn_status tn_dist_barrier(void);

/* ---- DistributedDataParallel ------------------------------------------------------
 * tn_ddp_new(params, n, bucket_bytes) is collective: it checks that every
 * rank passes the same parameters (count, shapes, dtypes) and broadcasts
 * their values from rank 0. params: leaves that require grad, float32 or
 * float64 (retained; released by tn_ddp_free). Gradients are grouped into
 * buckets of about bucket_bytes (0: 25 MiB, DDP's default), in reverse
 * order of params, as DDP (gradients of the last layers are ready first).
 *
 * During every tn_backward that reaches them, a hook on each parameter
 * copies its gradient (the .grad it will have after the pass: the old one
 * plus the pass's) into its bucket as soon as it is complete; a bucket
 * whose gradients are all in is reduced at once with MPI_Iallreduce, so
 * the communication overlaps the rest of backward. Buckets are launched in
 * the same order on every rank. At the end of the pass (a callback queued
 * with tn_backward_queue_callback) tenet launches what is left (parameters
 * that got no gradient contribute their .grad, or zeros), waits, and sets
 * every parameter's .grad to the mean over the ranks: a new tensor, on the
 * parameter's device. All ranks then hold bit-identical gradients, and the
 * same optimiser step keeps their parameters identical. A parameter that
 * no rank used gets a zero .grad (DDP would leave it None).
 *
 * Gradient accumulation: tn_ddp_set_sync(d, false) (DDP's no_sync())
 * makes backward accumulate locally; the next backward with sync on
 * reduces the accumulated .grad. One backward pass at a time per DDP
 * (several passes at once on different threads: TN_ERR_DIST); any
 * number of threads inside that pass (tn_set_parallel_backward).
 *
 * A backward that fails on one rank makes every rank's backward return
 * TN_ERR_DIST (one extra small allreduce at the end of each pass) and
 * leaves .grad unsynchronised; a rank that fails before any of its
 * parameters' gradients was ready never reaches the collectives, and the
 * others wait for it, as with any SPMD program. */
typedef struct tn_ddp tn_ddp;
tn_ddp *tn_ddp_new(tn_tensor *const *params, int n, size_t bucket_bytes);
/* Removes the hooks, waits for what is in flight, releases the parameters. */
void tn_ddp_free(tn_ddp *d);
tn_status tn_ddp_set_sync(tn_ddp *d, bool sync);
int tn_ddp_num_buckets(const tn_ddp *d);

typedef struct tn_ddp_stats {
    int64_t passes;               /* backward passes that synchronised gradients */
    int64_t buckets_in_backward;  /* buckets launched from hooks, while backward ran */
    int64_t buckets_at_end;       /* buckets launched by the end-of-pass callback */
    int64_t bytes;                /* bytes reduced (per rank) */
    double wait_seconds;          /* time blocked in the final wait (not hidden) */
    double end_seconds;           /* the whole end-of-pass callback: launch, wait, unpack */
} tn_ddp_stats;
tn_status tn_ddp_get_stats(const tn_ddp *d, tn_ddp_stats *out);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
