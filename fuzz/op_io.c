/* fuzz/op_io.c — weights in and out: safetensors files made of the
 * program's bytes (tn_load_buffer), and the slots saved and loaded back
 * (tn_save_buffer, tn_load_state_dict); data in: IDX files made of the
 * program's bytes, plain or gzipped, cut or damaged (tn_idx_load_buffer). */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "program.h"

/* The two dicts hold the same names, metadata and tensors (dtype, shape,
 * bytes): a save followed by a load must give back what was saved. Inside a
 * scope (scoped), the tensors the dicts return belong to it. */
static void same_dicts(const tn_state_dict *a, const tn_state_dict *b, bool scoped) {
    if (tn_state_dict_count(a) != tn_state_dict_count(b) ||
        tn_state_dict_metadata_count(a) != tn_state_dict_metadata_count(b))
        tf_fail("safetensors round trip: %lld tensors and %lld metadata, then %lld and %lld",
                (long long)tn_state_dict_count(a), (long long)tn_state_dict_metadata_count(a),
                (long long)tn_state_dict_count(b), (long long)tn_state_dict_metadata_count(b));
    for (int64_t i = 0; i < tn_state_dict_metadata_count(a); i++) {
        const char *k = tn_state_dict_metadata_key(a, i);
        const char *v = tn_state_dict_metadata(b, k);
        if (!v || strcmp(v, tn_state_dict_metadata(a, k)) != 0)
            tf_fail("safetensors round trip: metadata %lld changed", (long long)i);
    }
    for (int64_t i = 0; i < tn_state_dict_count(a); i++) {
        const char *name = tn_state_dict_name(a, i);
        if (!name || strcmp(name, tn_state_dict_name(b, i)) != 0)
            tf_fail("safetensors round trip: name %lld changed", (long long)i);
        tn_tensor *x = tn_state_dict_at(a, i), *y = tn_state_dict_at(b, i);
        if (!x || !y) { /* a handle needs memory: an injected failure (fail_alloc) */
            tf_check_failed("tn_state_dict_at");
            if (tn_last_status() != TN_ERR_OUT_OF_MEMORY)
                tf_fail("safetensors round trip: tensor %lld unreadable: %s", (long long)i,
                        tn_last_error());
            if (!scoped) {
                tn_release(x);
                tn_release(y);
            }
            continue;
        }
        int nd = tn_ndim(x);
        size_t n = (size_t)tn_numel(x) * tn_dtype_size(tn_dtype_of(x));
        bool same = x && y && tn_dtype_of(x) == tn_dtype_of(y) && nd == tn_ndim(y) &&
                    memcmp(tn_shape(x), tn_shape(y), (size_t)nd * sizeof(int64_t)) == 0;
        char *bx = malloc(n + 1), *by = malloc(n + 1);
        /* reading a view needs memory: an injected failure (fail_alloc) skips the check */
        if (same && bx && by && tn_copy_to(x, bx, n) == TN_OK && tn_copy_to(y, by, n) == TN_OK) {
            if (tn_dtype_of(x) == TN_BOOL) /* saved as 0 or 1 whatever the byte */
                for (size_t k = 0; k < n; k++)
                    bx[k] = bx[k] != 0;
            same = memcmp(bx, by, n) == 0;
        } else if (same && bx && by) {
            tf_check_failed("tn_copy_to");
            if (tn_last_status() != TN_ERR_OUT_OF_MEMORY)
                tf_fail("safetensors round trip: tensor %lld unreadable: %s", (long long)i,
                        tn_last_error());
        }
        free(bx);
        free(by);
        if (!scoped) {
            tn_release(x);
            tn_release(y);
        }
        if (!same) tf_fail("safetensors round trip: tensor %lld changed", (long long)i);
    }
}

/* Saves sd, loads the bytes back (which must succeed unless out of
 * memory) and compares. */
static void round_trip(const tn_state_dict *sd, bool scoped) {
    size_t n;
    void *buf = tn_save_buffer(sd, &n);
    if (!buf) {
        tf_check_failed("tn_save_buffer");
        return;
    }
    tn_state_dict *back = tn_load_buffer(buf, n);
    if (back)
        same_dicts(sd, back, scoped);
    else if (tn_last_status() != TN_ERR_OUT_OF_MEMORY)
        tf_fail("tn_load_buffer refused what tn_save_buffer wrote: %s", tn_last_error());
    tn_state_dict_free(back);
    tn_buffer_free(buf);
}

/* tn_load_buffer of a file made from the program's bytes: flags (bit 0: the
 * size field is 8 bytes of the program, else the header's length; bits 1+:
 * which loaded tensor goes to dst), header length (2 bytes, little-endian),
 * [size field], header bytes, data length, data bytes, dst. A file that
 * loads is saved and loaded again, and must come back the same. */
void tf_op_safetensors_load(tf_state *s) {
    uint8_t flags = tf_byte(s);
    size_t hlen = tf_byte(s);
    hlen |= (size_t)tf_byte(s) << 8;
    unsigned char *file = malloc(8 + hlen + 255);
    if (!file) return;
    uint64_t field = hlen;
    if (flags & 1)
        for (int i = 0; i < 8; i++)
            field |= (uint64_t)tf_byte(s) << (8 * i);
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)(field >> (8 * i));
    for (size_t i = 0; i < hlen; i++)
        file[8 + i] = tf_byte(s);
    size_t dlen = tf_byte(s);
    for (size_t i = 0; i < dlen; i++)
        file[8 + hlen + i] = tf_byte(s);
    uint8_t dst = tf_dst(s);
    tn_state_dict *sd = tn_load_buffer(file, 8 + hlen + dlen);
    free(file);
    if (!sd) {
        tf_check_failed("tn_load_buffer");
        return;
    }
    round_trip(sd, s->depth > 0);
    int64_t n = tn_state_dict_count(sd);
    if (n > 0) tf_put(s, dst, tn_state_dict_at(sd, (flags >> 1) % n));
    tn_state_dict_free(sd);
}

/* Names for saved slots: plain, hostile (reserved, not UTF-8, empty, with
 * escapes), and repeated (the dict replaces). */
static const char *const save_names[8] = {
    "w", "b", "layer.0.weight", "", "__metadata__", "bad\xff", "\"q\"\\\n\x01\u00e9", "w"};

/* Slots into a state dict, saved and loaded back, then optionally loaded
 * into the slots (load_state_dict): count (1..4), per tensor a slot and a
 * name byte, flags (bit 0: metadata; bit 1: load_state_dict; bit 2:
 * strict), dst. */
void tf_op_safetensors_save(tf_state *s) {
    int n = tf_byte(s) % 4 + 1;
    tn_tensor *ts[4];
    const char *names[4];
    uint64_t numel = 0;
    for (int i = 0; i < n; i++) {
        ts[i] = tf_in(s);
        names[i] = save_names[tf_byte(s) % 8];
        uint64_t k = tf_numel(ts[i]);
        numel = numel + k < numel ? UINT64_MAX : numel + k;
    }
    uint8_t flags = tf_byte(s), dst = tf_dst(s);
    if (!tf_affordable(numel, numel)) return;
    tn_state_dict *sd = tn_state_dict_new();
    if (!sd) {
        tf_check_failed("tn_state_dict_new");
        return;
    }
    for (int i = 0; i < n; i++)
        tf_check_status(tn_state_dict_set(sd, names[i], ts[i]), "tn_state_dict_set");
    if (flags & 1) tf_check_status(tn_state_dict_set_metadata(sd, "format", "pt"), "set_metadata");
    round_trip(sd, s->depth > 0);
    if (flags & 2) {
        tn_status st = tn_load_state_dict(sd, n, names, ts, flags & 4);
        tf_check_status(st, "tn_load_state_dict");
    }
    if (tn_state_dict_count(sd) > 0) tf_put(s, dst, tn_state_dict_at(sd, 0));
    tn_state_dict_free(sd);
}

/* tn_idx_load_buffer of bytes from the program, plain or gzipped: flags
 * (bit 0: gzip them; bit 1: then cut the gzip's last `cut` bytes; bit 2:
 * then flip the bits of byte `at`; bits 3-5: the dtype, 6 and 7 meaning
 * TN_DTYPE_SAME; bit 6: scale 1/255 (else 1)), length (2 bytes,
 * little-endian), the bytes, cut, at, dst. A load that succeeds must give a
 * contiguous tensor whose bytes can be read. */
void tf_op_idx_load(tf_state *s) {
    static const tn_dtype dtypes[8] = {TN_F32, TN_F64,  TN_I16,        TN_I32,
                                       TN_I64, TN_BF16, TN_DTYPE_SAME, TN_DTYPE_SAME};
    uint8_t flags = tf_byte(s);
    size_t n = tf_byte(s);
    n |= (size_t)tf_byte(s) << 8;
    unsigned char *b = malloc(n + 1);
    if (!b) return;
    for (size_t i = 0; i < n; i++)
        b[i] = tf_byte(s);
    uint8_t cut = tf_byte(s), at = tf_byte(s), dst = tf_dst(s);
    unsigned char *in = b;
    size_t len = n;
    uLongf gn = compressBound((uLong)n) + 32;
    unsigned char *g = flags & 1 ? malloc(gn) : NULL;
    if (g) {
        z_stream z = {0};
        if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK) {
            z.next_in = b;
            z.avail_in = (uInt)n;
            z.next_out = g;
            z.avail_out = (uInt)gn;
            if (deflate(&z, Z_FINISH) == Z_STREAM_END) {
                in = g;
                len = gn - z.avail_out;
            }
            deflateEnd(&z);
        }
        if (flags & 2) len = cut < len ? len - cut : 0;
        if ((flags & 4) && len) g[at % len] ^= 0xff;
    }
    tn_dtype dt = dtypes[(flags >> 3) & 7];
    double scale =
        (flags & 64) && dt != TN_DTYPE_SAME && dt != TN_I16 && dt != TN_I32 && dt != TN_I64
            ? 1.0 / 255
            : 1.0;
    tn_tensor *t = tn_idx_load_buffer(in, len, dt, scale);
    free(g);
    free(b);
    if (!t) {
        tf_check_failed("tn_idx_load_buffer");
        return;
    }
    if (!tn_is_contiguous(t) || tn_ndim(t) < 1)
        tf_fail("tn_idx_load_buffer: a tensor of %d dims, contiguous %d", tn_ndim(t),
                tn_is_contiguous(t));
    tf_put(s, dst, t);
}
