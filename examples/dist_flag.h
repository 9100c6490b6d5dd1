/* --distributed for the examples: the flag is taken out of argv; under
 * `mpirun -np N` the program becomes rank dist_rank of dist_world
 * (tenet/dist.h), and tn_dist_finalize runs at exit. Without the flag, or in
 * a build without tenet_mpi, dist_world is 1 and nothing else changes. */
#ifndef TN_EXAMPLES_DIST_FLAG_H
#define TN_EXAMPLES_DIST_FLAG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tenet.h>
#ifdef TENET_EXAMPLES_MPI
#include <tenet/dist.h>
#endif
#if defined(TENET_EXAMPLES_MPI) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

static int dist_rank = 0, dist_world = 1;
static bool dist_on = false;

#ifdef TENET_EXAMPLES_MPI
static void dist_finalize_at_exit(void) {
#if defined(__SANITIZE_ADDRESS__)
    __lsan_do_leak_check(); /* while Open MPI's plugins are loaded (tests/dist/lsan.supp) */
#endif
    tn_dist_finalize();
}
#endif

/* false (after a message) when --distributed was asked and cannot be had */
static inline bool dist_flag(int *argc, char ***argv, const char *prog) {
    int a = 1;
    while (a < *argc && strcmp((*argv)[a], "--distributed"))
        a++;
    if (a == *argc) return true;
    for (int b = a; b < *argc; b++)
        (*argv)[b] = (*argv)[b + 1]; /* argv[argc] is NULL */
    --*argc;
#ifdef TENET_EXAMPLES_MPI
    if (tn_dist_init(argc, argv) < 0) {
        fprintf(stderr, "%s: --distributed: %s\n", prog, tn_last_error());
        return false;
    }
    atexit(dist_finalize_at_exit);
    dist_rank = tn_dist_rank();
    dist_world = tn_dist_world_size();
    dist_on = true;
    if (dist_rank != 0) { /* one rank speaks */
        FILE *null = freopen("/dev/null", "w", stdout);
        (void)null;
    }
    return true;
#else
    fprintf(stderr, "%s: --distributed: this build has no MPI (tenet_mpi; configure with "
                    "TENET_MPI=ON and Open MPI installed)\n",
            prog);
    return false;
#endif
}

/* Sums v over the ranks (identity in one process); false on error. Call it
 * outside a scope (it releases what it makes). */
static inline bool dist_sum(double *v, int n) {
#ifdef TENET_EXAMPLES_MPI
    if (!dist_on) return true;
    tn_tensor *t = tn_tensor_from(v, TN_F64, 1, (const int64_t[]){n}, false);
    bool ok = t && tn_dist_allreduce_(t, TN_REDUCE_SUM) == TN_OK &&
              tn_copy_to(t, v, (size_t)n * sizeof *v) == TN_OK;
    tn_release(t);
    return ok;
#else
    (void)v, (void)n;
    return true;
#endif
}

#endif
