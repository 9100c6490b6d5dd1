/* dist/ — tenet_mpi: collectives and DDP over MPI (include/tenet/dist.h).
 * A layer above tenet: it sees the engine only through the public API. */
#ifndef TN_DIST_INTERNAL_H
#define TN_DIST_INTERNAL_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "tenet.h"
#include "tenet/dist.h"

/* tenet's communicator (a duplicate of MPI_COMM_WORLD, errors returned). */
typedef struct tn_dist_state {
    MPI_Comm comm;
    int rank, world;
    int thread_level; /* what MPI granted */
    bool we_initialised, cuda_aware;
} tn_dist_state;

/* Set once by tn_dist_init before it publishes `tn__dist_ready` (release);
 * read after an acquire load of it (tn__dist_get). */
extern tn_dist_state tn__dist;

/* The state, or NULL + TN_ERR_DIST ("tenet: call tn_dist_init first") when
 * tn_dist_init has not run, or when this thread may not call MPI (FUNNELED). */
const tn_dist_state *tn__dist_get(const char *fn);
/* Whether this thread may call MPI now (FUNNELED/SINGLE: the init thread only). */
bool tn__dist_may_call(void);
/* Brackets every MPI call when MPI granted less than MPI_THREAD_MULTIPLE. */
void tn__dist_lock(void);
void tn__dist_unlock(void);
/* TN_ERR_DIST with MPI's error string for rc (rc != MPI_SUCCESS). */
tn_status tn__dist_mpi_error(const char *fn, const char *call, int rc);

/* The agreement every collective starts with: each rank brings its
 * signature (ok = false when its own arguments are invalid); returns TN_OK
 * when all ranks are ok and agree, else TN_ERR_DIST on every rank (a rank
 * that was not ok keeps its own message). */
typedef struct tn_dist_sig {
    bool ok;
    int64_t numel, dtype, op, root;
    const char *const *names; /* what the four fields mean in a message (NULL: as named) */
} tn_dist_sig;
tn_status tn__dist_agree(const tn_dist_state *s, const char *fn, tn_dist_sig sig);

/* MPI datatype and operation for (dtype, op): sums of integers are done
 * on the unsigned type of the same width (they wrap), bool uses MPI's
 * logical operations. */
MPI_Datatype tn__dist_type(tn_dtype dt, tn_reduce_op op);
MPI_Op tn__dist_op(tn_dtype dt, tn_reduce_op op);
/* In place over count elements, in chunks that fit an int, under the MPI lock: MPI_Bcast from
 * root when root >= 0 (op unused), else MPI_Allreduce with op. */
int tn__dist_inplace_raw(const tn_dist_state *s, void *buf, int64_t count, size_t elsize,
                         MPI_Datatype type, MPI_Op op, int root);
/* MPI_Allreduce in place over count elements, in chunks that fit an int. */
int tn__dist_allreduce_raw(const tn_dist_state *s, void *buf, int64_t count, size_t elsize,
                           MPI_Datatype type, MPI_Op op);

double tn__dist_now(void);

#endif
