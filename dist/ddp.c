/* DistributedDataParallel (tenet/dist.h): gradients reduced in buckets
 * while backward runs.
 *
 * Per pass: a hook on each parameter (a leaf tensor hook: it runs when the
 * leaf's gradient for the pass is complete) packs .grad + the pass's
 * gradient into the parameter's slice of its bucket and counts the bucket
 * down; the hook that completes a bucket launches, in bucket order, every
 * bucket that is complete (MPI_Iallreduce), so every rank issues the same
 * collectives in the same order whatever the order of its hooks. The first
 * hook of a pass queues `finish` for the end of the pass: it packs what no
 * hook packed, launches the rest, waits, agrees with the other ranks that
 * nobody failed, and sets each .grad to the bucket's mean.
 *
 * Launching is a combining flag rather than a lock: a hook that completes
 * a bucket while another thread is launching leaves the launch to it; the
 * launcher looks again after it lets go (the counts and the flag are
 * seq_cst, so one of the two always sees the other's write).
 */
#include <stdlib.h>
#include <string.h>

#include "dist_internal.h"

#define DEFAULT_BUCKET_BYTES ((size_t)25 << 20)

typedef struct ddp_param {
    struct tn_ddp *d;
    tn_tensor *p;   /* retained */
    tn_hook *hook;
    int index;      /* in the caller's list */
    int bucket;
    int64_t offset; /* elements, in the bucket */
    int64_t numel;
    _Atomic int marked; /* packed in this pass (relaxed: a flag; the bucket count orders the data) */
} ddp_param;

typedef struct ddp_bucket {
    tn_dtype dt;
    int64_t numel;
    void *buf;        /* host memory, numel elements */
    int n_params;
    _Atomic int pending; /* parameters of the bucket not packed yet in this pass */
    MPI_Request req;
    bool launched;
} ddp_bucket;

struct tn_ddp {
    const tn_dist_state *s;
    ddp_param *ps;
    int np;
    ddp_bucket *bs;
    int nb;
    _Atomic bool sync;     /* relaxed: a setting */
    _Atomic int pass_open; /* acq_rel CAS: one hook per pass queues `finish` */
    _Atomic int launching; /* seq_cst: the combining flag (see above) */
    _Atomic int next;      /* next bucket to launch; written by the flag's holder */
    _Atomic int failed;    /* relaxed: a hook failed in this pass; read by finish after the pass */
    tn_ddp_stats stats;    /* buckets_in_backward by the flag's holder, the rest by finish */
};

/* ---- launching -------------------------------------------------------------------- */

static void launch(tn_ddp *d, ddp_bucket *b, bool in_backward) {
    tn__dist_lock();
    int rc = MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)b->numel, tn__dist_type(b->dt, TN_REDUCE_SUM),
                            MPI_SUM, d->s->comm, &b->req);
    tn__dist_unlock();
    if (rc != MPI_SUCCESS) {
        b->req = MPI_REQUEST_NULL;
        atomic_store_explicit(&d->failed, 1, memory_order_relaxed);
    }
    b->launched = true;
    if (in_backward) d->stats.buckets_in_backward++;
    else d->stats.buckets_at_end++;
    d->stats.bytes += b->numel * (int64_t)tn_dtype_size(b->dt);
}

/* Lets MPI progress the reductions in flight (Open MPI progresses
 * non-blocking collectives only inside MPI calls). */
static void progress(tn_ddp *d, int upto) {
    for (int i = 0; i < upto; i++) {
        int flag;
        if (d->bs[i].req == MPI_REQUEST_NULL) continue;
        tn__dist_lock();
        MPI_Test(&d->bs[i].req, &flag, MPI_STATUS_IGNORE);
        tn__dist_unlock();
    }
}

static bool next_ready(tn_ddp *d) {
    int k = atomic_load_explicit(&d->next, memory_order_seq_cst);
    return k < d->nb && atomic_load_explicit(&d->bs[k].pending, memory_order_seq_cst) == 0;
}

static void try_launch(tn_ddp *d, bool in_backward) {
    if (!tn__dist_may_call()) return; /* FUNNELED: finish launches from the init thread */
    do {
        if (atomic_exchange_explicit(&d->launching, 1, memory_order_seq_cst)) return;
        int k = atomic_load_explicit(&d->next, memory_order_relaxed);
        while (k < d->nb && atomic_load_explicit(&d->bs[k].pending, memory_order_seq_cst) == 0)
            launch(d, &d->bs[k++], in_backward);
        atomic_store_explicit(&d->next, k, memory_order_relaxed);
        if (in_backward) progress(d, k);
        atomic_store_explicit(&d->launching, 0, memory_order_seq_cst);
    } while (next_ready(d));
}

/* One more parameter of bucket b is packed. seq_cst: see the file comment;
 * it also orders this thread's pack before the launcher's MPI call. */
static void bucket_done(tn_ddp *d, int b, bool in_backward) {
    if (atomic_fetch_sub_explicit(&d->bs[b].pending, 1, memory_order_seq_cst) == 1)
        try_launch(d, in_backward);
}

/* ---- packing ---------------------------------------------------------------------- */

/* The parameter's .grad after this pass (old + g; old alone when g is
 * NULL; zeros when neither) into its slice of the bucket. */
static tn_status pack(ddp_param *pp, const tn_tensor *g) {
    ddp_bucket *b = &pp->d->bs[pp->bucket];
    size_t el = tn_dtype_size(b->dt), bytes = (size_t)pp->numel * el;
    void *dst = (char *)b->buf + (size_t)pp->offset * el;
    bool prev = tn_set_grad_enabled(false);
    tn_status st = TN_OK;
    tn_tensor *old = tn_grad(pp->p), *sum = old && g ? tn_add(old, (tn_tensor *)g) : NULL;
    const tn_tensor *v = old && g ? sum : old ? old : g;
    if (old && g && !sum) st = tn_last_status();
    else if (!v) memset(dst, 0, bytes);
    else st = tn_copy_to(v, dst, bytes);
    tn_set_grad_enabled(prev);
    tn_release(sum); /* hooks and callbacks run inside backward: no scope owns these */
    tn_release(old);
    return st;
}

static tn_status finish(tn_status pass, void *ctx);

static tn_status open_pass(tn_ddp *d) {
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&d->pass_open, &expected, 1,
                                                 memory_order_acq_rel, memory_order_relaxed))
        return TN_OK;
    tn_status st = tn_backward_queue_callback(finish, d);
    if (st < 0) atomic_store_explicit(&d->pass_open, 0, memory_order_release);
    return st;
}

static tn_status ddp_hook(const tn_tensor *g, tn_tensor **replace, void *ctx) {
    (void)replace;
    ddp_param *pp = ctx;
    tn_ddp *d = pp->d;
    if (!atomic_load_explicit(&d->sync, memory_order_relaxed)) return TN_OK;
    tn_status st = open_pass(d);
    if (st < 0) return st;
    if (atomic_exchange_explicit(&pp->marked, 1, memory_order_relaxed))
        return tn_set_error(TN_ERR_DIST,
                            "DDP: the gradient of parameter %d arrived twice in one pass (one "
                            "backward pass at a time per tn_ddp)",
                            pp->index);
    st = pack(pp, g);
    if (st < 0) atomic_store_explicit(&d->failed, 1, memory_order_relaxed);
    bucket_done(d, pp->bucket, true); /* launched even so: the ranks' collectives stay matched */
    return st;
}

/* ---- the end of the pass ---------------------------------------------------------- */

static void reset_pass(tn_ddp *d) {
    for (int i = 0; i < d->np; i++)
        atomic_store_explicit(&d->ps[i].marked, 0, memory_order_relaxed);
    for (int b = 0; b < d->nb; b++) {
        atomic_store_explicit(&d->bs[b].pending, d->bs[b].n_params, memory_order_relaxed);
        d->bs[b].launched = false;
        d->bs[b].req = MPI_REQUEST_NULL;
    }
    atomic_store_explicit(&d->next, 0, memory_order_relaxed);
    atomic_store_explicit(&d->failed, 0, memory_order_relaxed);
    /* release: the reset is visible to the next pass's first hook (acq_rel CAS) */
    atomic_store_explicit(&d->pass_open, 0, memory_order_release);
}

/* Every bucket's mean, as each parameter's new .grad. */
static tn_status unpack(tn_ddp *d) {
    for (int b = 0; b < d->nb; b++) {
        ddp_bucket *bk = &d->bs[b];
        if (bk->dt == TN_F32) {
            float *f = bk->buf, w = (float)d->s->world;
            for (int64_t i = 0; i < bk->numel; i++)
                f[i] /= w;
        } else {
            double *f = bk->buf, w = (double)d->s->world;
            for (int64_t i = 0; i < bk->numel; i++)
                f[i] /= w;
        }
    }
    tn_status st = TN_OK;
    for (int i = 0; i < d->np && st == TN_OK; i++) {
        ddp_param *pp = &d->ps[i];
        ddp_bucket *bk = &d->bs[pp->bucket];
        tn_tensor *p = pp->p;
        tn_tensor *g = tn_tensor_from((char *)bk->buf + (size_t)pp->offset * tn_dtype_size(bk->dt),
                                      bk->dt, tn_ndim(p), tn_shape(p), false);
        if (g && tn_device_of(p).type != TN_CPU) {
            tn_tensor *on = tn_to(g, TN_DTYPE_SAME, tn_device_of(p));
            tn_release(g);
            g = on;
        }
        st = g ? tn_set_grad(p, g) : tn_last_status();
        tn_release(g); /* a callback runs inside backward: no scope owns g */
    }
    return st;
}

static tn_status finish(tn_status pass, void *ctx) {
    tn_ddp *d = ctx;
    double t0 = tn__dist_now();
    tn_status st = TN_OK;
    if (!tn__dist_may_call())
        st = tn_set_error(TN_ERR_DIST, "DDP: MPI granted only MPI_THREAD_FUNNELED: call "
                                       "backward from the thread that called tn_dist_init");
    /* parameters no hook packed: their .grad (or zeros) */
    for (int i = 0; i < d->np && st == TN_OK; i++) {
        ddp_param *pp = &d->ps[i];
        if (atomic_exchange_explicit(&pp->marked, 1, memory_order_relaxed)) continue;
        if (pack(pp, NULL) < 0) atomic_store_explicit(&d->failed, 1, memory_order_relaxed);
        bucket_done(d, pp->bucket, false);
    }
    if (st == TN_OK) try_launch(d, false); /* FUNNELED: the buckets the hooks could not launch */
    double tw = tn__dist_now();
    int rc = MPI_SUCCESS;
    for (int b = 0; b < d->nb && rc == MPI_SUCCESS; b++) {
        if (!d->bs[b].launched || d->bs[b].req == MPI_REQUEST_NULL) continue;
        tn__dist_lock();
        rc = MPI_Wait(&d->bs[b].req, MPI_STATUS_IGNORE);
        tn__dist_unlock();
    }
    d->stats.wait_seconds += tn__dist_now() - tw;
    if (st == TN_OK && rc != MPI_SUCCESS) st = tn__dist_mpi_error("DDP", "MPI_Wait", rc);
    /* did any rank fail? then no rank sets its gradients */
    int bad = pass < 0 || st < 0 || atomic_load_explicit(&d->failed, memory_order_relaxed), any;
    tn__dist_lock();
    rc = MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, d->s->comm);
    tn__dist_unlock();
    if (rc != MPI_SUCCESS) any = 1;
    if (st == TN_OK && rc != MPI_SUCCESS) st = tn__dist_mpi_error("DDP", "MPI_Allreduce", rc);
    if (!any) st = unpack(d);
    else if (st == TN_OK && pass == TN_OK && !bad)
        st = tn_set_error(TN_ERR_DIST, "DDP: backward failed on another rank (its error says "
                                       "why); the gradients were not synchronised");
    else if (st == TN_OK && pass == TN_OK)
        st = tn_set_error(TN_ERR_DIST, "DDP: a gradient could not be reduced on this rank; the "
                                       "gradients were not synchronised");
    if (!any) d->stats.passes++;
    d->stats.end_seconds += tn__dist_now() - t0;
    reset_pass(d);
    return st;
}

/* ---- life ------------------------------------------------------------------------- */

static tn_status check_param(const tn_tensor *p, int i) {
    if (!p) return tn_set_error(TN_ERR_INVALID_ARGUMENT, "tn_ddp_new: params[%d] is NULL", i);
    if (!tn_is_leaf(p) || !tn_requires_grad(p))
        return tn_set_error(TN_ERR_INVALID_ARGUMENT,
                            "tn_ddp_new: params[%d] must be a leaf that requires grad", i);
    tn_dtype dt = tn_dtype_of(p);
    if (dt != TN_F32 && dt != TN_F64)
        return tn_set_error(TN_ERR_DTYPE, "tn_ddp_new: params[%d] is %s (float32 or float64 only)",
                            i, tn_dtype_name(dt));
    if (tn_numel(p) > INT32_MAX)
        return tn_set_error(TN_ERR_SHAPE, "tn_ddp_new: params[%d] has more than 2^31-1 elements",
                            i);
    return TN_OK;
}

/* The same parameters on every rank: count, total size, and a hash of the
 * shapes and dtypes. */
static tn_dist_sig layout_sig(tn_tensor *const *params, int n, bool ok) {
    static const char *const names[] = {"number of elements in all parameters",
                                        "shapes and dtypes of the parameters (a hash)",
                                        "number of parameters", "root"};
    uint64_t h = 1469598103934665603ULL, total = 0;
    for (int i = 0; ok && i < n; i++) {
        h = (h ^ (uint64_t)tn_dtype_of(params[i])) * 1099511628211ULL;
        for (int k = 0; k < tn_ndim(params[i]); k++)
            h = (h ^ (uint64_t)tn_shape(params[i])[k]) * 1099511628211ULL;
        h = (h ^ 0xffu) * 1099511628211ULL;
        total += (uint64_t)tn_numel(params[i]);
    }
    return (tn_dist_sig){ok, (int64_t)total, (int64_t)(h >> 2), n, -1, names};
}

/* Buckets: parameters in reverse order, one dtype per bucket, a new bucket
 * when the next parameter would take it past `cap` bytes. */
static tn_status make_buckets(tn_ddp *d, size_t cap) {
    d->bs = calloc((size_t)d->np, sizeof *d->bs);
    if (!d->bs) return tn_set_error(TN_ERR_OUT_OF_MEMORY, "tn_ddp_new: out of memory");
    int b = -1;
    size_t bytes = 0;
    for (int i = d->np - 1; i >= 0; i--) {
        ddp_param *pp = &d->ps[i];
        tn_dtype dt = tn_dtype_of(pp->p);
        size_t pb = (size_t)pp->numel * tn_dtype_size(dt);
        if (b < 0 || d->bs[b].dt != dt || (bytes + pb > cap && bytes > 0) ||
            d->bs[b].numel + pp->numel > INT32_MAX) {
            b++;
            d->bs[b].dt = dt;
            bytes = 0;
        }
        pp->bucket = b;
        pp->offset = d->bs[b].numel;
        d->bs[b].numel += pp->numel;
        d->bs[b].n_params++;
        bytes += pb;
    }
    d->nb = b + 1;
    for (b = 0; b < d->nb; b++) {
        size_t sz = (size_t)d->bs[b].numel * tn_dtype_size(d->bs[b].dt);
        d->bs[b].buf = aligned_alloc(64, (sz + 63) / 64 * 64 + 64);
        if (!d->bs[b].buf) return tn_set_error(TN_ERR_OUT_OF_MEMORY, "tn_ddp_new: out of memory "
                                                                    "for a bucket of %zu bytes", sz);
    }
    return TN_OK;
}

tn_ddp *tn_ddp_new(tn_tensor *const *params, int n, size_t bucket_bytes) {
    static const char *fn = "tn_ddp_new";
    const tn_dist_state *s = tn__dist_get(fn);
    if (!s) return NULL;
    tn_status st = TN_OK;
    if (!params || n < 1)
        st = tn_set_error(TN_ERR_INVALID_ARGUMENT, "%s: need at least one parameter", fn);
    for (int i = 0; st == TN_OK && i < n; i++)
        st = check_param(params[i], i);
    /* every rank takes part in the agreement, also one whose arguments are bad */
    tn_status agreed = tn__dist_agree(s, fn, layout_sig(params, n, st == TN_OK));
    if (agreed < 0) return NULL;
    for (int i = 0; i < n; i++) /* rank 0's values everywhere */
        if (tn_dist_broadcast_(params[i], 0) < 0) return NULL;
    tn_ddp *d = calloc(1, sizeof *d);
    if (!d || !(d->ps = calloc((size_t)n, sizeof *d->ps))) {
        free(d);
        tn_set_error(TN_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    d->s = s;
    d->np = n;
    atomic_init(&d->sync, true);
    for (int i = 0; i < n; i++) {
        d->ps[i] = (ddp_param){.d = d, .p = tn_retain(params[i]), .index = i,
                               .numel = tn_numel(params[i])};
    }
    st = make_buckets(d, bucket_bytes ? bucket_bytes : DEFAULT_BUCKET_BYTES);
    for (int i = 0; st == TN_OK && i < n; i++)
        if (!(d->ps[i].hook = tn_register_hook(d->ps[i].p, ddp_hook, &d->ps[i])))
            st = tn_last_status();
    if (st < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tn_last_error());
        tn_ddp_free(d);
        tn_set_error(st, "%s", msg);
        return NULL;
    }
    reset_pass(d);
    return d;
}

void tn_ddp_free(tn_ddp *d) {
    if (!d) return;
    for (int i = 0; i < d->np; i++)
        if (d->ps[i].hook) tn_hook_remove(d->ps[i].hook);
    for (int b = 0; d->bs && b < d->nb; b++) {
        if (d->bs[b].req != MPI_REQUEST_NULL && d->bs[b].launched) {
            tn__dist_lock();
            MPI_Wait(&d->bs[b].req, MPI_STATUS_IGNORE);
            tn__dist_unlock();
        }
        free(d->bs[b].buf);
    }
    for (int i = 0; i < d->np; i++)
        tn_release(d->ps[i].p);
    free(d->bs);
    free(d->ps);
    free(d);
}

tn_status tn_ddp_set_sync(tn_ddp *d, bool sync) {
    if (!d) return tn_set_error(TN_ERR_INVALID_ARGUMENT, "tn_ddp_set_sync: argument 'd' is NULL");
    atomic_store_explicit(&d->sync, sync, memory_order_relaxed);
    return TN_OK;
}

int tn_ddp_num_buckets(const tn_ddp *d) {
    if (!d) {
        tn_set_error(TN_ERR_INVALID_ARGUMENT, "tn_ddp_num_buckets: argument 'd' is NULL");
        return -1;
    }
    return d->nb;
}

tn_status tn_ddp_get_stats(const tn_ddp *d, tn_ddp_stats *out) {
    if (!d || !out)
        return tn_set_error(TN_ERR_INVALID_ARGUMENT, "tn_ddp_get_stats: argument '%s' is NULL",
                            !d ? "d" : "out");
    *out = d->stats;
    return TN_OK;
}
