/* Replayable random programs (see replay.h). */
#include "replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_prog_start(st_prog *p, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->r = seed | 1;
}

int st_pick(st_prog *p, int n) { /* xorshift64* */
    p->r ^= p->r >> 12;
    p->r ^= p->r << 25;
    p->r ^= p->r >> 27;
    return (int)(((p->r * 0x2545F4914F6CDD1DULL) >> 33) % (uint64_t)n);
}

tn_tensor *st_ok(st_prog *p, tn_tensor *t, const char *what) {
    p->ops++;
    if (!t && !p->err[0]) snprintf(p->err, sizeof p->err, "%s: %s", what, tn_last_error());
    return t;
}

double st_total(st_prog *p, const tn_tensor *t) {
    double v = 0;
    if (!t || tn_item(t, &v) != TN_OK) return NAN;
    p->ops++;
    return v;
}

void st_log_add(st_log *l, uint64_t seed, double sum) {
    if (l->n == ST_LOG) return;
    l->seed[l->n] = seed;
    l->sum[l->n++] = sum;
}

int st_replay(st_log *logs, int nlogs, double (*run)(void *arg, uint64_t seed, st_prog *p),
              void *arg) {
    int n = 0;
    for (int t = 0; t < nlogs; t++) {
        for (int k = 0; k < logs[t].n; k++, n++) {
            st_prog p;
            double sum = run(arg, logs[t].seed[k], &p);
            st_count(p.ops);
            if (memcmp(&sum, &logs[t].sum[k], sizeof sum) != 0)
                st_fail(NULL, "program 0x%llx: checksum %.17g alone, %.17g among threads%s%s",
                        (unsigned long long)logs[t].seed[k], sum, logs[t].sum[k],
                        p.err[0] ? ": " : "", p.err);
        }
        logs[t].n = 0;
    }
    return n;
}

double st_digest(const tn_tensor *t) {
    int64_t n = tn_numel(t);
    double *v = malloc((size_t)n * sizeof *v), d = 0;
    if (v && tn_copy_to_f64(t, v, n) == TN_OK)
        for (int64_t i = 0; i < n; i++)
            d = d * 1.0000001 + v[i];
    free(v);
    return d;
}

void st_release_shared(tn_tensor **t, int n, const double *d0) {
    for (int i = 0; i < n; i++) {
        tn_tensor *g = tn_grad(t[i]);
        if (tn_version(t[i]) != 0 || st_digest(t[i]) != d0[i] || g)
            st_fail(NULL, "shared tensor %d was modified (version %lld%s)", i,
                    (long long)tn_version(t[i]), g ? ", has a .grad" : "");
        tn_release(g);
        tn_release(t[i]);
    }
}

void st_race_phase_begin(void) {
    tn_set_race_report_stream(NULL);
    tn_race_reports_reset();
    tn_set_detect_races(true);
}

void st_race_phase_end(void) {
    tn_set_detect_races(false);
    tn_set_race_report_stream(stderr);
    if (tn_race_reports() == 0) return;
    char buf[4096];
    tn_race_last_report(buf, sizeof buf);
    st_fail(NULL, "%llu race reports on a race-free workload; the last:\n%s",
            (unsigned long long)tn_race_reports(), buf);
}
