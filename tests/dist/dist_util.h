/* tests/dist/dist_util.h — what every MPI test program does around its cmocka group. */
#ifndef TN_TEST_DIST_UTIL_H
#define TN_TEST_DIST_UTIL_H

/* tn_dist_init, then this rank and the world size; false after a message. */
bool tt_dist_begin(int *argc, char ***argv, int *rank, int *world);
/* The exit status of the whole run: non-zero on every rank when any rank's
 * group failed (so mpirun and ctest see it), after LeakSanitizer's check
 * (under ASan) and tn_dist_finalize. */
int tt_dist_end(int failed);

#endif
