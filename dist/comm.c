/* tenet_mpi's communicator: init, finalize, rank, the thread level MPI
 * granted, and the agreement every collective starts with. */
#define _GNU_SOURCE /* pthread spin locks */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "dist_internal.h"
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI: MPIX_Query_cuda_support (after mpi.h) */
#endif

tn_dist_state tn__dist;
/* 0: not initialised, 1: ready, 2: finalised. Release store after tn__dist
 * is filled in; acquire loads in tn__dist_get pair with it. */
static _Atomic int g_ready;
static pthread_t g_init_thread;
static pthread_mutex_t g_serial = PTHREAD_MUTEX_INITIALIZER;

double tn__dist_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tn_status tn__dist_mpi_error(const char *fn, const char *call, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return tn_set_error(TN_ERR_DIST, "%s: %s failed: %s", fn, call, msg);
}

bool tn__dist_may_call(void) {
    return tn__dist.thread_level >= MPI_THREAD_SERIALIZED ||
           pthread_equal(pthread_self(), g_init_thread);
}

void tn__dist_lock(void) {
    if (tn__dist.thread_level < MPI_THREAD_MULTIPLE) pthread_mutex_lock(&g_serial);
}
void tn__dist_unlock(void) {
    if (tn__dist.thread_level < MPI_THREAD_MULTIPLE) pthread_mutex_unlock(&g_serial);
}

const tn_dist_state *tn__dist_get(const char *fn) {
    int r = atomic_load_explicit(&g_ready, memory_order_acquire);
    if (r != 1) {
        tn_set_error(TN_ERR_DIST, "%s: %s", fn,
                     r == 0 ? "call tn_dist_init first" : "tn_dist_finalize was called");
        return NULL;
    }
    if (!tn__dist_may_call()) {
        tn_set_error(TN_ERR_DIST,
                     "%s: MPI granted only MPI_THREAD_FUNNELED: call it from the thread that "
                     "called tn_dist_init",
                     fn);
        return NULL;
    }
    return &tn__dist;
}

/* Sums of 16-bit integers: tenet's own MPI_Op. Open MPI 4.1's vectorised
 * reduction component (op/avx) returns wrong sums of 16-bit types (caught
 * by tests/dist/test_dist.c); a user-defined op is never routed there. */
static MPI_Op g_sum16 = MPI_OP_NULL;
static void sum16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = (uint16_t)(a[i] + b[i]); /* wraps, as tenet's int16 sums */
}

static bool query_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() == 1;
#else
    return false;
#endif
}

tn_status tn_dist_init(int *argc, char ***argv) {
    static const char *fn = "tn_dist_init";
    int state = atomic_load_explicit(&g_ready, memory_order_acquire);
    if (state == 1) return TN_OK;
    if (state == 2)
        return tn_set_error(TN_ERR_DIST, "%s: MPI cannot be initialised again after "
                                         "tn_dist_finalize", fn);
    int inited = 0, rc;
    MPI_Initialized(&inited);
    tn_dist_state s = {0};
    if (!inited) {
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &s.thread_level);
        if (rc != MPI_SUCCESS) return tn__dist_mpi_error(fn, "MPI_Init_thread", rc);
        s.we_initialised = true;
    } else if ((rc = MPI_Query_thread(&s.thread_level)) != MPI_SUCCESS) {
        return tn__dist_mpi_error(fn, "MPI_Query_thread", rc);
    }
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &s.comm)) != MPI_SUCCESS) {
        if (s.we_initialised) MPI_Finalize();
        return tn__dist_mpi_error(fn, "MPI_Comm_dup", rc);
    }
    MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
    if (g_sum16 == MPI_OP_NULL && (rc = MPI_Op_create(sum16, 1, &g_sum16)) != MPI_SUCCESS) {
        MPI_Comm_free(&s.comm);
        if (s.we_initialised) MPI_Finalize();
        return tn__dist_mpi_error(fn, "MPI_Op_create", rc);
    }
    MPI_Comm_rank(s.comm, &s.rank);
    MPI_Comm_size(s.comm, &s.world);
    s.cuda_aware = query_cuda_aware();
    tn__dist = s;
    g_init_thread = pthread_self();
    atomic_store_explicit(&g_ready, 1, memory_order_release); /* publishes tn__dist */
    return TN_OK;
}

tn_status tn_dist_finalize(void) {
    const tn_dist_state *s = tn__dist_get("tn_dist_finalize");
    if (!s) return tn_last_status();
    atomic_store_explicit(&g_ready, 2, memory_order_release);
    MPI_Comm comm = tn__dist.comm;
    int rc = MPI_Comm_free(&comm);
    if (rc == MPI_SUCCESS && g_sum16 != MPI_OP_NULL) rc = MPI_Op_free(&g_sum16);
    if (rc == MPI_SUCCESS && tn__dist.we_initialised) rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? TN_OK : tn__dist_mpi_error("tn_dist_finalize", "MPI_Finalize", rc);
}

bool tn_dist_is_initialized(void) {
    return atomic_load_explicit(&g_ready, memory_order_acquire) == 1;
}
int tn_dist_rank(void) {
    const tn_dist_state *s = tn__dist_get("tn_dist_rank");
    return s ? s->rank : -1;
}
int tn_dist_world_size(void) {
    const tn_dist_state *s = tn__dist_get("tn_dist_world_size");
    return s ? s->world : -1;
}
bool tn_dist_thread_multiple(void) {
    return tn_dist_is_initialized() && tn__dist.thread_level >= MPI_THREAD_MULTIPLE;
}
bool tn_dist_cuda_aware(void) { return tn_dist_is_initialized() && tn__dist.cuda_aware; }

/* One MPI_MAX allreduce of each field and its negation gives, on every
 * rank, the largest and the smallest value of each: they agree when equal. */
tn_status tn__dist_agree(const tn_dist_state *s, const char *fn, tn_dist_sig sig) {
    int64_t v[10] = {sig.ok ? 0 : 1, 0, sig.numel, -sig.numel, sig.dtype, -sig.dtype,
                     sig.op, -sig.op, sig.root, -sig.root};
    tn__dist_lock();
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, 10, MPI_INT64_T, MPI_MAX, s->comm);
    tn__dist_unlock();
    if (rc != MPI_SUCCESS) return tn__dist_mpi_error(fn, "MPI_Allreduce", rc);
    if (v[0]) {
        if (!sig.ok) return tn_last_status(); /* this rank's own error */
        return tn_set_error(TN_ERR_DIST, "%s: the call failed on another rank (its error says "
                                         "why); no rank's tensor was changed", fn);
    }
    static const char *const dflt[] = {"element count", "dtype", "operation", "root"};
    const char *const *what = sig.names ? sig.names : dflt;
    for (int k = 0; k < 4; k++) {
        int64_t hi = v[2 + 2 * k], lo = -v[3 + 2 * k];
        if (hi != lo)
            return tn_set_error(TN_ERR_DIST,
                                "%s: the ranks disagree on the %s (%lld on one rank, %lld on "
                                "another); no rank's tensor was changed",
                                fn, what[k], (long long)lo, (long long)hi);
    }
    return TN_OK;
}

MPI_Datatype tn__dist_type(tn_dtype dt, tn_reduce_op op) {
    bool wrap = op == TN_REDUCE_SUM;
    switch (dt) {
    case TN_F32: return MPI_FLOAT;
    case TN_F64: return MPI_DOUBLE;
    case TN_I16: return wrap ? MPI_UINT16_T : MPI_INT16_T;
    case TN_I32: return wrap ? MPI_UINT32_T : MPI_INT32_T;
    case TN_I64: return wrap ? MPI_UINT64_T : MPI_INT64_T;
    case TN_BOOL: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op tn__dist_op(tn_dtype dt, tn_reduce_op op) {
    if (dt == TN_BOOL) return op == TN_REDUCE_MIN ? MPI_LAND : MPI_LOR;
    if (dt == TN_I16 && op == TN_REDUCE_SUM) return g_sum16;
    switch (op) {
    case TN_REDUCE_SUM:
    case TN_REDUCE_MEAN: return MPI_SUM;
    case TN_REDUCE_MAX: return MPI_MAX;
    case TN_REDUCE_MIN: return MPI_MIN;
    }
    return MPI_OP_NULL;
}

int tn__dist_inplace_raw(const tn_dist_state *s, void *buf, int64_t count, size_t elsize,
                         MPI_Datatype type, MPI_Op op, int root) {
    const int64_t chunk = INT64_C(1) << 30;
    int rc = MPI_SUCCESS;
    tn__dist_lock();
    for (int64_t at = 0; at < count && rc == MPI_SUCCESS; at += chunk) {
        int64_t c = count - at < chunk ? count - at : chunk;
        char *p = (char *)buf + (size_t)at * elsize;
        rc = root >= 0 ? MPI_Bcast(p, (int)c, type, root, s->comm)
                       : MPI_Allreduce(MPI_IN_PLACE, p, (int)c, type, op, s->comm);
    }
    tn__dist_unlock();
    return rc;
}

int tn__dist_allreduce_raw(const tn_dist_state *s, void *buf, int64_t count, size_t elsize,
                           MPI_Datatype type, MPI_Op op) {
    return tn__dist_inplace_raw(s, buf, count, elsize, type, op, -1);
}
