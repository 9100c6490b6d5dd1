/* stress/replay.h — replayable random programs for the torture programs (stress_mixed,
 * stress_autocast): a program is a function of its seed; workers run programs beside each other
 * and log their checksums, and the main thread then replays each logged seed alone, which must
 * give the same checksum bit for bit (results do not depend on what runs beside them).
 *
 * Threads: an st_prog belongs to the thread running the program; a worker adds only to its own
 * st_log; st_replay runs on the main thread between rounds.
 */
#ifndef TN_STRESS_REPLAY_H
#define TN_STRESS_REPLAY_H

#include "harness.h"

#define ST_LOG 64 /* programs per worker kept for the replay */

/* One program's state: its random stream, the ops it ran, its first error. */
typedef struct st_prog {
    uint64_t r;
    int64_t ops;
    char err[256];
} st_prog;

/* Starts p on the stream of seed. */
void st_prog_start(st_prog *p, uint64_t seed);
/* Uniform in [0, n) from p's stream. */
int st_pick(st_prog *p, int n);
/* Counts an op; when t is NULL, records the first failure ("what: the library's message").
 * Returns t. */
tn_tensor *st_ok(st_prog *p, tn_tensor *t, const char *what);
/* The value of a one-element tensor (counted as an op); NAN when t is NULL or unreadable. */
double st_total(st_prog *p, const tn_tensor *t);

/* A worker's logged programs: the first ST_LOG (seed, checksum) pairs. */
typedef struct st_log {
    uint64_t seed[ST_LOG];
    double sum[ST_LOG];
    int n;
} st_log;

void st_log_add(st_log *l, uint64_t seed, double sum);
/* Replays the programs of logs[0, nlogs) alone: run(arg, seed, p) returns the checksum; a
 * checksum that differs in any bit is a violation. Empties the logs; returns the count. */
int st_replay(st_log *logs, int nlogs, double (*run)(void *arg, uint64_t seed, st_prog *p),
              void *arg);

/* Shared read-only tensors: st_digest is a fingerprint of t's values (any dtype);
 * st_release_shared checks that each of t[0, n) kept version 0, its digest d0[i] and no .grad
 * (violations otherwise), then releases it. */
double st_digest(const tn_tensor *t);
void st_release_shared(tn_tensor **t, int n, const double *d0);

/* The race detector over a phase of rounds: st_race_phase_begin turns it on with its reports
 * counted silently; st_race_phase_end turns it off and records a violation, with the last
 * report, when the phase made any (a race-free workload must make none). */
void st_race_phase_begin(void);
void st_race_phase_end(void);

#endif
