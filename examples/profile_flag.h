/* --profile[=PATH] for the examples: the flag is taken out of argv, the
 * timeline profiler runs until exit, then writes PATH (default
 * tenet-profile.json) and prints the top ops by self time. */
#ifndef TN_EXAMPLES_PROFILE_FLAG_H
#define TN_EXAMPLES_PROFILE_FLAG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tenet.h>

static const char *profile_path;

static void profile_report(void) {
    if (tn_profile_end(profile_path) < 0) {
        fprintf(stderr, "--profile: %s\n", tn_last_error());
        return;
    }
    printf("\nprofile: %s (open it in ui.perfetto.dev or chrome://tracing)\n", profile_path);
    tn_profile_summary(stdout, 15);
}

static inline void profile_flag(int *argc, char **argv) {
    for (int a = 1; a < *argc; a++) {
        if (strncmp(argv[a], "--profile", 9) || (argv[a][9] && argv[a][9] != '=')) continue;
        profile_path = argv[a][9] ? argv[a] + 10 : "tenet-profile.json";
        for (int b = a; b < *argc; b++)
            argv[b] = argv[b + 1]; /* argv[argc] is NULL */
        --*argc;
        if (tn_profile_begin() == TN_OK) atexit(profile_report);
        return;
    }
}

#endif
