/* examples/diverge_record.h — a numerics record (docs/numerics.md) read into
 * memory for tenet-diverge. */
#ifndef TN_DIVERGE_RECORD_H
#define TN_DIVERGE_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#define DV_MAX_DIMS 8
#define DV_MAX_TENSORS 8

typedef struct dv_summary {
    bool present, missing;
    int ndim;
    int64_t shape[DV_MAX_DIMS];
    char dtype[16];
    double min, max, mean, l2, amax;
    int64_t nan, inf;
    uint64_t hash;
} dv_summary;

typedef enum { DV_OP, DV_NODE, DV_UPDATE } dv_kind;

typedef struct dv_rec {
    dv_kind kind;
    int t;
    int64_t seq, node, param; /* node: -1 when not linked; param: updates */
    char name[64], site[128];
    int n_in, n_out;
    dv_summary in[DV_MAX_TENSORS], out[DV_MAX_TENSORS];
    int partner; /* index of the aligned record in the other run, -1: none */
} dv_rec;

typedef struct dv_run {
    char producer[64];
    int threads;
    dv_rec *recs;
    int n;
} dv_run;

/* Reads path; false (and a message on stderr) when it cannot. */
bool dv_read(const char *path, dv_run *run);
void dv_free(dv_run *run);

#endif
