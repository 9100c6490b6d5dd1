/* The state dict container (tenet/io.h): names to tensors, and string
 * metadata, each an array sorted by strcmp so that lookups are a binary
 * search and iteration order is the one safetensors' keys() gives. Sets
 * insert in place (a memmove): a model has hundreds of tensors, and a loaded
 * dict is built sorted in one go (tn__sd_adopt). */
#include <stdlib.h>

#include "io_internal.h"

#define SD_CHECK(sd, ret)                                                                          \
    do {                                                                                           \
        if (!(sd)) {                                                                               \
            tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'sd' is NULL", __func__);             \
            return ret;                                                                            \
        }                                                                                          \
    } while (0)

char *tn__strdup_n(const char *s, size_t n) {
    char *c = tn__malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

void tn__sd_entries_free(tn_sd_entry *e, int64_t n) {
    for (int64_t i = 0; e && i < n; i++) {
        tn__mfree(e[i].name);
        tn_release(e[i].t);
    }
    tn__mfree(e);
}

void tn__sd_meta_free(tn_sd_meta *m, int64_t n) {
    for (int64_t i = 0; m && i < n; i++) {
        tn__mfree(m[i].key);
        tn__mfree(m[i].value);
    }
    tn__mfree(m);
}

tn_state_dict *tn_state_dict_new(void) { return tn__calloc(1, sizeof(tn_state_dict)); }

tn_state_dict *tn__sd_adopt(tn_sd_entry *e, int64_t n, tn_sd_meta *m, int64_t nm) {
    tn_state_dict *sd = tn_state_dict_new();
    if (!sd) {
        tn__sd_entries_free(e, n);
        tn__sd_meta_free(m, nm);
        return NULL;
    }
    *sd = (tn_state_dict){e, n, n, m, nm, nm};
    return sd;
}

void tn_state_dict_free(tn_state_dict *sd) {
    if (!sd) return;
    tn__sd_entries_free(sd->e, sd->n);
    tn__sd_meta_free(sd->m, sd->nm);
    tn__mfree(sd);
}

/* Binary search over n records of `stride` bytes whose first member is a
 * char * key. */
static int64_t find_key(const void *base, size_t stride, int64_t n, const char *key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const char *k = *(char *const *)((const char *)base + (size_t)mid * stride);
        int c = strcmp(k, key);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

int64_t tn__sd_find(const tn_state_dict *sd, const char *name) {
    return find_key(sd->e, sizeof *sd->e, sd->n, name);
}

static int64_t meta_find(const tn_state_dict *sd, const char *key) {
    return find_key(sd->m, sizeof *sd->m, sd->nm, key);
}

/* Room for one more record in *arr (capacity *cap, n used). */
static tn_status grow(void **arr, int64_t *cap, int64_t n, size_t stride) {
    if (n < *cap) return TN_OK;
    int64_t c = *cap ? *cap * 2 : 8;
    void *p = tn__realloc(*arr, (size_t)c * stride);
    if (!p) return tn_last_status();
    *arr = p;
    *cap = c;
    return TN_OK;
}

static tn_status check_text(const char *what, const char *s) {
    size_t bad;
    if (!tn__utf8_valid((const unsigned char *)s, strlen(s), &bad))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s is not valid UTF-8 (byte %zu)", what, bad);
    return TN_OK;
}

tn_status tn_state_dict_set(tn_state_dict *sd, const char *name, tn_tensor *t) {
    SD_CHECK(sd, TN_ERR_INVALID_ARGUMENT);
    TN_CHECK_NULL_PTR_ST(name, "name");
    TN_CHECK_NULL_ARG_ST(t, "t");
    tn_status st = check_text("tn_state_dict_set: the name", name);
    if (st < 0) return st;
    if (strcmp(name, "__metadata__") == 0)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_state_dict_set: '__metadata__' is reserved "
                                                  "by the safetensors format");
    int64_t i = tn__sd_find(sd, name);
    if (i >= 0) { /* replace: nothing can fail; retain first, t may be the old one */
        tn_tensor *old = sd->e[i].t;
        sd->e[i].t = tn__retain(t);
        tn_release(old);
        return TN_OK;
    }
    if ((st = grow((void **)&sd->e, &sd->cap, sd->n, sizeof *sd->e)) < 0) return st;
    char *copy = tn__strdup_n(name, strlen(name));
    if (!copy) return tn_last_status();
    i = -i - 1;
    memmove(sd->e + i + 1, sd->e + i, (size_t)(sd->n - i) * sizeof *sd->e);
    sd->e[i] = (tn_sd_entry){copy, tn__retain(t)};
    sd->n++;
    return TN_OK;
}

tn_status tn_state_dict_set_metadata(tn_state_dict *sd, const char *key, const char *value) {
    SD_CHECK(sd, TN_ERR_INVALID_ARGUMENT);
    TN_CHECK_NULL_PTR_ST(key, "key");
    TN_CHECK_NULL_PTR_ST(value, "value");
    tn_status st = check_text("tn_state_dict_set_metadata: the key", key);
    if (st == TN_OK) st = check_text("tn_state_dict_set_metadata: the value", value);
    if (st < 0) return st;
    char *v = tn__strdup_n(value, strlen(value));
    if (!v) return tn_last_status();
    int64_t i = meta_find(sd, key);
    if (i >= 0) {
        tn__mfree(sd->m[i].value);
        sd->m[i].value = v;
        return TN_OK;
    }
    char *k = NULL;
    if ((st = grow((void **)&sd->m, &sd->capm, sd->nm, sizeof *sd->m)) < 0 ||
        !(k = tn__strdup_n(key, strlen(key)))) {
        tn__mfree(v);
        return tn_last_status();
    }
    i = -i - 1;
    memmove(sd->m + i + 1, sd->m + i, (size_t)(sd->nm - i) * sizeof *sd->m);
    sd->m[i] = (tn_sd_meta){k, v};
    sd->nm++;
    return TN_OK;
}

int64_t tn_state_dict_count(const tn_state_dict *sd) {
    SD_CHECK(sd, -1);
    return sd->n;
}

static bool in_range(const char *fn, int64_t i, int64_t n) {
    if (i >= 0 && i < n) return true;
    tn__error(TN_ERR_INDEX, "%s: index %lld is out of range for %lld entries", fn, (long long)i,
              (long long)n);
    return false;
}

const char *tn_state_dict_name(const tn_state_dict *sd, int64_t i) {
    SD_CHECK(sd, NULL);
    return in_range(__func__, i, sd->n) ? sd->e[i].name : NULL;
}

tn_tensor *tn_state_dict_at(const tn_state_dict *sd, int64_t i) {
    SD_CHECK(sd, NULL);
    return in_range(__func__, i, sd->n) ? tn__ret(tn__retain(sd->e[i].t)) : NULL;
}

tn_tensor *tn_state_dict_get(const tn_state_dict *sd, const char *name) {
    SD_CHECK(sd, NULL);
    TN_CHECK_NULL_PTR(name, "name");
    int64_t i = tn__sd_find(sd, name);
    if (i < 0) {
        char q[96];
        tn__error(TN_ERR_INDEX, "key %s not in the state dict", tn__quote_name(q, sizeof q, name));
        return NULL;
    }
    return tn__ret(tn__retain(sd->e[i].t));
}

bool tn_state_dict_contains(const tn_state_dict *sd, const char *name) {
    return sd && name && tn__sd_find(sd, name) >= 0;
}

int64_t tn_state_dict_metadata_count(const tn_state_dict *sd) {
    SD_CHECK(sd, -1);
    return sd->nm;
}

const char *tn_state_dict_metadata_key(const tn_state_dict *sd, int64_t i) {
    SD_CHECK(sd, NULL);
    return in_range(__func__, i, sd->nm) ? sd->m[i].key : NULL;
}

const char *tn_state_dict_metadata(const tn_state_dict *sd, const char *key) {
    SD_CHECK(sd, NULL);
    TN_CHECK_NULL_PTR(key, "key");
    int64_t i = meta_find(sd, key);
    return i >= 0 ? sd->m[i].value : NULL;
}
