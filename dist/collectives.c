/* Collectives on tensors: allreduce, broadcast, barrier (tenet/dist.h).
 * Each starts with the ranks' agreement (tn__dist_agree), so that a bad
 * call fails on every rank instead of leaving its peers waiting, then
 * writes the tensor through tn_write_inplace: one version bump. */
#include "dist_internal.h"

typedef struct coll {
    const tn_dist_state *s;
    const char *fn;
    tn_reduce_op op;
    int root;
    bool bcast;
    tn_dtype dt;
} coll;

/* Runs the collective on `data` (host memory, or device memory when MPI is
 * CUDA-aware): what tn_write_inplace calls. */
static tn_status run(void *data, int64_t numel, void *ctx) {
    const coll *c = ctx;
    size_t el = tn_dtype_size(c->dt);
    int rc;
    if (c->bcast) {
        rc = tn__dist_inplace_raw(c->s, data, numel, el, tn__dist_type(c->dt, TN_REDUCE_MAX),
                                  MPI_OP_NULL, c->root);
        return rc == MPI_SUCCESS ? TN_OK : tn__dist_mpi_error(c->fn, "MPI_Bcast", rc);
    }
    rc = tn__dist_allreduce_raw(c->s, data, numel, el, tn__dist_type(c->dt, c->op),
                                tn__dist_op(c->dt, c->op));
    if (rc != MPI_SUCCESS) return tn__dist_mpi_error(c->fn, "MPI_Allreduce", rc);
    if (c->op == TN_REDUCE_MEAN) {
        double w = (double)c->s->world;
        if (c->dt == TN_F32) {
            float *f = data, wf = (float)w;
            for (int64_t i = 0; i < numel; i++)
                f[i] /= wf;
        } else {
            double *d = data;
            for (int64_t i = 0; i < numel; i++)
                d[i] /= w;
        }
    }
    return TN_OK;
}

/* This rank's part of the agreement: NULL t, non-contiguous, bad op/root. */
static bool valid(const coll *c, const tn_tensor *t) {
    if (!t) {
        tn_set_error(TN_ERR_INVALID_ARGUMENT, "%s: argument 't' is NULL", c->fn);
        return false;
    }
    if (!tn_is_contiguous(t)) {
        tn_set_error(TN_ERR_INVALID_ARGUMENT, "%s: Tensors must be contiguous", c->fn);
        return false;
    }
    if (c->bcast && (c->root < 0 || c->root >= c->s->world)) {
        tn_set_error(TN_ERR_INVALID_ARGUMENT, "%s: root %d is not a rank of a world of %d",
                     c->fn, c->root, c->s->world);
        return false;
    }
    if (!c->bcast && ((unsigned)c->op > TN_REDUCE_MIN)) {
        tn_set_error(TN_ERR_INVALID_ARGUMENT, "%s: unknown reduce op %d", c->fn, (int)c->op);
        return false;
    }
    if (!c->bcast && c->op == TN_REDUCE_MEAN && c->dt != TN_F32 && c->dt != TN_F64) {
        tn_set_error(TN_ERR_DTYPE, "%s: the mean needs a float32 or float64 tensor, got %s",
                     c->fn, tn_dtype_name(c->dt));
        return false;
    }
    return true;
}

/* A CUDA tensor without a CUDA-aware MPI: through a host copy, written back
 * with one copy_ under no-grad (the one version bump). */
static tn_status via_host(tn_tensor *t, coll *c) {
    if (tn_scope_begin() < 0) return tn_last_status();
    tn_status st = TN_OK;
    tn_tensor *host = tn_to(t, TN_DTYPE_SAME, TN_DEVICE_CPU);
    if (!host) st = tn_last_status();
    if (st == TN_OK) st = run(tn_data_ptr(host), tn_numel(host), c);
    if (st == TN_OK && !(c->bcast && c->s->rank == c->root)) {
        bool prev = tn_set_grad_enabled(false);
        st = tn_copy_(t, host);
        tn_set_grad_enabled(prev);
    }
    tn_scope_end();
    return st;
}

static tn_status collective(tn_tensor *t, coll *c) {
    if (!(c->s = tn__dist_get(c->fn))) return tn_last_status();
    c->dt = t ? tn_dtype_of(t) : TN_F32;
    bool ok = valid(c, t);
    tn_dist_sig sig = {ok, ok ? tn_numel(t) : 0, ok ? (int64_t)c->dt : 0,
                       c->bcast ? -1 : (int64_t)c->op, c->bcast ? c->root : -1, NULL};
    tn_status st = tn__dist_agree(c->s, c->fn, sig);
    if (st < 0) return st;
    if (tn_device_of(t).type != TN_CPU && !c->s->cuda_aware) return via_host(t, c);
    if (c->bcast && c->s->rank == c->root) return run(tn_data_ptr(t), tn_numel(t), c);
    return tn_write_inplace(t, c->bcast ? "broadcast_" : "allreduce_", run, c);
}

tn_status tn_dist_allreduce_(tn_tensor *t, tn_reduce_op op) {
    coll c = {.fn = "tn_dist_allreduce_", .op = op};
    return collective(t, &c);
}

tn_status tn_dist_broadcast_(tn_tensor *t, int root) {
    coll c = {.fn = "tn_dist_broadcast_", .root = root, .bcast = true};
    return collective(t, &c);
}

tn_status tn_dist_barrier(void) {
    const tn_dist_state *s = tn__dist_get("tn_dist_barrier");
    if (!s) return tn_last_status();
    tn__dist_lock();
    int rc = MPI_Barrier(s->comm);
    tn__dist_unlock();
    return rc == MPI_SUCCESS ? TN_OK : tn__dist_mpi_error("tn_dist_barrier", "MPI_Barrier", rc);
}
