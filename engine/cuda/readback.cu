/* engine/cuda/readback.cu — reading device memory back without waiting for
 * the device (backend.h, readback_begin / readback_end): the gradient
 * monitor's results, so that a monitored backward pass returns while the
 * device is still running it.
 *
 * A ticket is a page of pinned host memory and an event. begin enqueues the
 * copy into the page on the device's stream and records the event after it;
 * end waits on the event, which covers only the work enqueued before it, and
 * copies the page out. A plain device-to-host copy would wait for the whole
 * stream instead: for a training step, the work the host enqueued after the
 * pass too (the optimiser, the next forward).
 *
 * Pinning pages costs far more than a launch, so ended tickets are kept for
 * reuse, one free list per process under a mutex (a ticket is taken once or
 * twice per monitored pass: not a hot path). An event belongs to the device
 * it was made on: a ticket is reused for that device only.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

namespace tnc {

namespace {

struct ticket {
    ticket *next; /* in the free list */
    int dev;
    cudaEvent_t ev;
    void *page; /* TN_READBACK_MAX bytes, pinned */
    size_t bytes;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
ticket *g_free; /* under g_lock */

ticket *take(int dev) {
    pthread_mutex_lock(&g_lock);
    ticket **at = &g_free;
    while (*at && (*at)->dev != dev)
        at = &(*at)->next;
    ticket *t = *at;
    if (t) *at = t->next;
    pthread_mutex_unlock(&g_lock);
    return t;
}

void give(ticket *t) {
    pthread_mutex_lock(&g_lock);
    t->next = g_free;
    g_free = t;
    pthread_mutex_unlock(&g_lock);
}

/* A new ticket for dev (the caller's current device) in *out. */
tn_status make(int dev, ticket **out) {
    ticket *t = static_cast<ticket *>(calloc(1, sizeof *t));
    if (!t) return tn__error(TN_ERR_OUT_OF_MEMORY, "CUDA readback: out of host memory");
    t->dev = dev;
    cudaError_t e = cudaHostAlloc(&t->page, TN_READBACK_MAX, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        free(t);
        return cuda_fail(e, "cudaHostAlloc (readback)");
    }
    e = cudaEventCreateWithFlags(&t->ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        if (cudaFreeHost(t->page) != cudaSuccess) cudaGetLastError();
        free(t);
        return cuda_fail(e, "cudaEventCreateWithFlags (readback)");
    }
    *out = t;
    return TN_OK;
}

} // namespace

extern "C" tn_status tn__cuda_readback_begin(int dev, const void *src, size_t bytes,
                                             void **out) {
    if (!out) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA readback_begin: ticket is NULL");
    *out = nullptr;
    if (!src || bytes == 0 || bytes > TN_READBACK_MAX)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "CUDA readback_begin: %zu bytes at %p (1 to %d bytes of device memory)",
                         bytes, src, TN_READBACK_MAX);
    device_state *ds;
    tn_status st = device(dev, &ds);
    if (st < 0) return st;
    dev_guard guard(dev);
    ticket *t = take(dev);
    if (!t && (st = make(dev, &t)) < 0) return st;
    cudaError_t e = cudaMemcpyAsync(t->page, src, bytes, cudaMemcpyDeviceToHost, ds->stream);
    if (e == cudaSuccess && (e = cudaEventRecord(t->ev, ds->stream)) != cudaSuccess) {
        /* the copy may still write the page: let it land before the page is reused */
        if (cudaStreamSynchronize(ds->stream) != cudaSuccess) cudaGetLastError();
    }
    if (e != cudaSuccess) {
        give(t);
        return cuda_fail(e, "readback_begin");
    }
    t->bytes = bytes;
    *out = t;
    return TN_OK;
}

extern "C" tn_status tn__cuda_readback_end(void *tk, void *dst) {
    if (!tk) return tn__error(TN_ERR_INVALID_ARGUMENT, "CUDA readback_end: ticket is NULL");
    ticket *t = static_cast<ticket *>(tk);
    dev_guard guard(t->dev);
    cudaError_t e = cudaEventSynchronize(t->ev);
    if (e == cudaSuccess && dst) memcpy(dst, t->page, t->bytes);
    give(t);
    return e == cudaSuccess ? TN_OK : cuda_fail(e, "cudaEventSynchronize (readback)");
}

} // namespace tnc
