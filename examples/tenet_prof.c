/* tenet-prof: the top ops by self time of a trace written by the profiler
 * (TENET_PROFILE=path, --profile, tn_profile_end), as torch.profiler's
 * key_averages() table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tenet.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: %s TRACE.json [TOP]\n  TOP: rows to print (default 20; 0: all)\n", argv[0]);
        return argc == 2 ? 0 : 2;
    }
    int top = argc == 3 ? atoi(argv[2]) : 20;
    if (tn_profile_summary_file(argv[1], stdout, top) < 0) {
        fprintf(stderr, "tenet-prof: %s\n", tn_last_error());
        return 1;
    }
    return 0;
}
