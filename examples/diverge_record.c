/* examples/diverge_record.c — reads a numerics record (JSON lines,
 * docs/numerics.md) with cJSON: the header line, then one record a line. */
#define _GNU_SOURCE /* getline */
#include "diverge_record.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNumber(v)) return v->valuedouble;
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (!strcmp(s, "inf")) return INFINITY;
        if (!strcmp(s, "-inf")) return -INFINITY;
    }
    return NAN;
}

static void str(const cJSON *o, const char *key, char *dst, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(dst, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static void summary(const cJSON *o, dv_summary *s) {
    memset(s, 0, sizeof *s);
    if (!cJSON_IsObject(o)) return;
    s->present = true;
    s->missing = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "missing"));
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape"), *d;
    cJSON_ArrayForEach(d, sh) {
        if (s->ndim < DV_MAX_DIMS) s->shape[s->ndim++] = (int64_t)d->valuedouble;
    }
    str(o, "dtype", s->dtype, sizeof s->dtype);
    s->min = num(o, "min"), s->max = num(o, "max"), s->mean = num(o, "mean");
    s->l2 = num(o, "l2"), s->amax = num(o, "amax");
    s->nan = (int64_t)num(o, "nan"), s->inf = (int64_t)num(o, "inf");
    char h[32];
    str(o, "hash", h, sizeof h);
    s->hash = strtoull(h, NULL, 16);
}

static int list(const cJSON *o, const char *key, dv_summary *out) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, key)) {
        if (n < DV_MAX_TENSORS) summary(e, &out[n++]);
    }
    return n;
}

static bool record(const cJSON *o, dv_rec *r) {
    char kind[16];
    str(o, "k", kind, sizeof kind);
    memset(r, 0, sizeof *r);
    if (!strcmp(kind, "op"))
        r->kind = DV_OP;
    else if (!strcmp(kind, "node"))
        r->kind = DV_NODE;
    else if (!strcmp(kind, "update"))
        r->kind = DV_UPDATE;
    else
        return false;
    r->t = (int)num(o, "t");
    r->seq = (int64_t)num(o, "seq");
    double node = num(o, "node"), param = num(o, "param");
    r->node = node == node ? (int64_t)node : -1;
    r->param = param == param ? (int64_t)param : -1;
    str(o, "name", r->name, sizeof r->name);
    str(o, "site", r->site, sizeof r->site);
    r->n_in = list(o, "in", r->in);
    r->n_out = list(o, "out", r->out);
    r->partner = -1;
    return true;
}

static bool header(const char *line, dv_run *run, const char *path) {
    cJSON *h = cJSON_Parse(line);
    char fmt[32] = "";
    if (h) str(h, "format", fmt, sizeof fmt);
    if (!h || strcmp(fmt, "tenet-numerics") != 0) {
        fprintf(stderr, "tenet-diverge: %s: not a numerics record\n", path);
        cJSON_Delete(h);
        return false;
    }
    if (num(h, "version") > 1)
        fprintf(stderr, "tenet-diverge: %s: format version %g, newer than this reader's 1\n", path,
                num(h, "version"));
    str(h, "producer", run->producer, sizeof run->producer);
    run->threads = (int)num(h, "threads");
    cJSON_Delete(h);
    return true;
}

bool dv_read(const char *path, dv_run *run) {
    memset(run, 0, sizeof *run);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tenet-diverge: cannot open %s\n", path);
        return false;
    }
    char *line = NULL;
    size_t cap = 0, room = 0;
    bool ok = true, first = true;
    while (ok && getline(&line, &cap, f) > 0) {
        if (first) {
            ok = header(line, run, path);
            first = false;
            continue;
        }
        cJSON *o = cJSON_Parse(line);
        if (!o) continue; /* a line cut short by a crash: the rest still counts */
        if (run->n == (int)room) {
            room = room ? 2 * room : 1024;
            dv_rec *r = realloc(run->recs, room * sizeof *r);
            if (!r) ok = false;
            if (r) run->recs = r;
        }
        if (ok && record(o, &run->recs[run->n])) run->n++;
        cJSON_Delete(o);
    }
    if (first) fprintf(stderr, "tenet-diverge: %s is empty\n", path), ok = false;
    free(line);
    fclose(f);
    if (!ok) dv_free(run);
    return ok;
}

void dv_free(dv_run *run) {
    free(run->recs);
    memset(run, 0, sizeof *run);
}
