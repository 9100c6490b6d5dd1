/* tests/dist/dist_util.c — the frame of every MPI test program (dist_util.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tenet.h>
#include <tenet/dist.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "dist_util.h"

bool tt_dist_begin(int *argc, char ***argv, int *rank, int *world) {
    if (tn_dist_init(argc, argv) < 0) {
        fprintf(stderr, "tn_dist_init: %s\n", tn_last_error());
        return false;
    }
    *rank = tn_dist_rank();
    *world = tn_dist_world_size();
    return true;
}

int tt_dist_end(int failed) {
    int any = failed;
    tn_tensor *f = tn_full(0, NULL, TN_I32, failed);
    if (!f || tn_dist_allreduce_(f, TN_REDUCE_MAX) < 0) any = 1;
    else any = *(int32_t *)tn_data_ptr(f);
    tn_release(f);
#if defined(__SANITIZE_ADDRESS__)
    /* LeakSanitizer's check now, while Open MPI's plugins are loaded and lsan.supp can name
     * what they keep; MPI_Finalize unloads them (their frames would be unknown). */
    __lsan_do_leak_check();
#endif
    if (tn_dist_finalize() < 0) any = 1;
    return any ? 1 : 0;
}
