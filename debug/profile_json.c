/* debug/profile_json.c — the profiler's Chrome trace-event file
 * (include/tenet/profile.h): per thread a thread_name record ("M"), the
 * spans of ops and backward nodes ("X", cat "op" / "backward"), each OpenMP
 * worker's share of a region inside an op ("X", cat "omp"), the live-bytes
 * counter ("C"), and a flow ("s" on the forward op's span, "f" on its node's
 * span, same id) for each node that ran whose forward op was recorded. */
#include <stdlib.h>

#include "profile_internal.h"
#include "tenet/tensor.h"

/* A sorted list of flow ids, for the pairing. */
typedef struct flow_ids {
    uint64_t *v;
    size_t n;
} flow_ids;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static bool has_id(const flow_ids *f, uint64_t id) {
    return f->n && bsearch(&id, f->v, f->n, sizeof *f->v, cmp_u64) != NULL;
}

/* The flow ids of the events of `kind` (ops: the nodes they made). */
static tn_status gather(const tn_pbuf *bufs, tn_pev_kind kind, flow_ids *out) {
    size_t n = 0;
    for (const tn_pbuf *b = bufs; b; b = b->next)
        for (const tn_pchunk *c = b->head; c; c = c->next)
            for (int i = 0; i < c->n; i++)
                n += c->ev[i].kind == kind && c->ev[i].flow;
    out->n = 0;
    out->v = n ? tn__malloc_quiet(n * sizeof *out->v) : NULL;
    if (n && !out->v) return tn__error(TN_ERR_OUT_OF_MEMORY, "out of memory writing a profile");
    for (const tn_pbuf *b = bufs; b; b = b->next)
        for (const tn_pchunk *c = b->head; c; c = c->next)
            for (int i = 0; i < c->n; i++)
                if (c->ev[i].kind == kind && c->ev[i].flow) out->v[out->n++] = c->ev[i].flow;
    if (out->n) qsort(out->v, out->n, sizeof *out->v, cmp_u64);
    return TN_OK;
}

/* A JSON string (thread names are the user's). */
static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void put_op_args(FILE *f, const tn_pev *e) {
    fputs(",\"args\":{\"shapes\":[", f);
    const int64_t *dim = e->dims;
    for (int i = 0; i < e->n_in; i++) {
        fputs(i ? ",[" : "[", f);
        for (int d = 0; d < e->ndim[i]; d++)
            fprintf(f, d ? ",%lld" : "%lld", (long long)*dim++);
        fputc(']', f);
    }
    fprintf(f, "],\"dtype\":\"%s\",\"bytes\":%lld", tn_dtype_name((tn_dtype)e->dtype),
            (long long)e->bytes);
    if (e->flops >= 0) fprintf(f, ",\"flops\":%lld", (long long)e->flops);
    fputc('}', f);
}

static void put_event(FILE *f, const tn_pev *e, int pid, uint64_t tid, const flow_ids *ops,
                      const flow_ids *nodes) {
    unsigned long long t = (unsigned long long)tid;
    if (e->kind == TN_PEV_COUNTER) {
        fprintf(f,
                ",\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,"
                "\"args\":{\"bytes_live\":%lld}}",
                pid, t, e->ts, (long long)e->bytes);
        return;
    }
    if (e->kind == TN_PEV_OMP) {
        /* region names are the engine's own literals: nothing to escape */
        fprintf(f,
                ",\n{\"name\":\"omp %s\",\"cat\":\"omp\",\"ph\":\"X\",\"pid\":%d,\"tid\":%llu,"
                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"team\":%d,\"member\":%d}}",
                e->name, pid, t, e->ts, e->dur, (int)e->team, (int)e->member);
        return;
    }
    bool op = e->kind == TN_PEV_OP;
    fprintf(f, ",\n{\"name\":");
    put_str(f, e->name);
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f",
            op ? "op" : "backward", pid, t, e->ts, e->dur);
    if (op)
        put_op_args(f, e);
    else
        fprintf(f, ",\"args\":{\"seq\":%llu}", (unsigned long long)(e->flow - 1));
    fputc('}', f);
    /* the flow: from the op's start (its own slice) to the node's start */
    if (e->flow && has_id(op ? nodes : ops, e->flow))
        fprintf(f,
                ",\n{\"name\":\"grad_fn\",\"cat\":\"autograd\",\"ph\":\"%s\",%s\"id\":%llu,"
                "\"pid\":%d,\"tid\":%llu,\"ts\":%.3f}",
                op ? "s" : "f", op ? "" : "\"bp\":\"e\",", (unsigned long long)e->flow, pid, t,
                e->ts);
}

tn_status tn__prof_write_json(FILE *f, const tn_pbuf *bufs, int pid) {
    flow_ids ops = {0}, nodes = {0};
    tn_status st = gather(bufs, TN_PEV_OP, &ops);
    if (st == TN_OK) st = gather(bufs, TN_PEV_NODE, &nodes);
    if (st == TN_OK) {
        fprintf(f,
                "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"tenet\"}}",
                pid);
        for (const tn_pbuf *b = bufs; b; b = b->next) {
            if (!b->head) continue; /* recorded nothing this time */
            fprintf(f,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%llu,"
                    "\"args\":{\"name\":",
                    pid, (unsigned long long)b->tid);
            put_str(f, b->tname);
            if (b->dropped) /* events lost to out-of-memory on this thread */
                fprintf(f, ",\"dropped_events\":%lld", (long long)b->dropped);
            fputs("}}", f);
            for (const tn_pchunk *c = b->head; c; c = c->next)
                for (int i = 0; i < c->n; i++)
                    put_event(f, &c->ev[i], pid, b->tid, &ops, &nodes);
        }
        fputs("\n]}\n", f);
    }
    tn__mfree(ops.v);
    tn__mfree(nodes.v);
    return st;
}
