/* Writes a profile of training steps on three named threads (this one,
 * "prof-a", "prof-b") and of one large add on two OpenMP threads to argv[1]
 * and prints the summary: the input of check_trace.py. Without an argument it only trains (TENET_PROFILE's test). */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdio.h>

#include "prof_step.h"

static void *worker(void *name) {
    pthread_setname_np(pthread_self(), name);
    for (int i = 0; i < 3; i++)
        if (prof_step() < 0) return (void *)1;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 2) return 2;
    pthread_t t[2];
    if (argc == 2 && tn_profile_begin() < 0) return 1;
    pthread_create(&t[0], NULL, worker, "prof-a");
    pthread_create(&t[1], NULL, worker, "prof-b");
    void *r0 = worker("prof-main"), *r1, *r2;
    pthread_join(t[0], &r1);
    pthread_join(t[1], &r2);
    /* an op large enough for two OpenMP threads: its workers' spans ("omp elementwise") */
    tn_set_num_threads(2);
    if (tn_scope_begin() == TN_OK) {
        const int64_t s[] = {512, 1024};
        if (!tn_add(tn_ones(2, s, TN_F32), tn_ones(2, s, TN_F32))) r0 = (void *)1;
        tn_scope_end();
    }
    if (argc == 2 && (tn_profile_end(argv[1]) < 0 || tn_profile_summary(stdout, 0) < 0)) {
        fprintf(stderr, "%s\n", tn_last_error());
        return 1;
    }
    return r0 || r1 || r2;
}
