/* fuzz/operands.c — operand decoding: one byte per operand, mostly small
 * valid values, sometimes hostile ones from the tables below. The tables
 * are part of the input format: extend them only at their ends. */
#include <limits.h>
#include <math.h>

#include "program.h"

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

static const int64_t hostile_sizes[16] = {-1,
                                          -2,
                                          INT64_MIN,
                                          INT64_MAX,
                                          INT64_C(1) << 62,
                                          INT64_C(1) << 31,
                                          INT64_C(1) << 32,
                                          INT64_C(1) << 36, /* 2^36 float32: a 256 GiB request */
                                          INT64_C(1) << 40,
                                          (INT64_C(1) << 62) + 1,
                                          INT64_C(1) << 20,
                                          65536,
                                          255,
                                          INT64_MAX / 2,
                                          INT64_C(3) << 61,
                                          INT64_C(1) << 33};

static const int hostile_dims[8] = {INT_MIN, INT_MAX, -9, 8, 9, 100, -100, 1 << 20};

static const double scalars[32] = {0,
                                   1,
                                   -1,
                                   2,
                                   0.5,
                                   -0.5,
                                   3,
                                   -3,
                                   1e-3,
                                   100,
                                   NAN,
                                   INFINITY,
                                   -INFINITY,
                                   -0.0,
                                   1e30,
                                   3.5e38,
                                   -3.5e38,
                                   1e300,
                                   -1e300,
                                   2147483648.0,
                                   -2147483649.0,
                                   9223372036854775808.0,
                                   -9223372036854775808.0,
                                   18446744073709551616.0,
                                   32767,
                                   32768,
                                   -32769,
                                   1e-310,
                                   0.1,
                                   7,
                                   10,
                                   1e10};

uint8_t tf_byte(tf_state *s) { return s->p < s->end ? *s->p++ : 0; }

bool tf_bool(tf_state *s) { return tf_byte(s) & 1; }

int tf_slot(tf_state *s) { return tf_byte(s) % TF_SLOTS; }

tn_tensor *tf_in(tf_state *s) { return s->slot[tf_slot(s)]; }

tn_dtype tf_dtype(tf_state *s) {
    uint8_t b = tf_byte(s) % (TN_DTYPE_COUNT + 2);
    return b < TN_DTYPE_COUNT ? (tn_dtype)b : b == TN_DTYPE_COUNT ? TN_DTYPE_SAME : (tn_dtype)99;
}

tn_dtype tf_valid_dtype(tf_state *s) { return (tn_dtype)(tf_byte(s) % TN_DTYPE_COUNT); }

int tf_ndim(tf_state *s) {
    static const int hostile[8] = {
        -1, -2, TN_MAX_DIMS, TN_MAX_DIMS + 1, TN_MAX_DIMS + 2, INT_MIN, INT_MAX, 7};
    uint8_t b = tf_byte(s);
    return b < 0xF0 ? b % 5 : hostile[b % 8];
}

int64_t tf_size(tf_state *s) {
    uint8_t b = tf_byte(s);
    return b < 0xF0 ? b % 6 : hostile_sizes[b & 15];
}

void tf_shape(tf_state *s, int ndim, int64_t shape[TF_LIST]) {
    for (int i = 0; i < TF_LIST; i++)
        shape[i] = i < ndim ? tf_size(s) : 1;
}

int tf_dim(tf_state *s) {
    uint8_t b = tf_byte(s);
    return b < 0xE0 ? b % 9 - 4 : hostile_dims[b % COUNT(hostile_dims)];
}

int64_t tf_index(tf_state *s) {
    uint8_t b = tf_byte(s);
    return b < 0xE0 ? b % 9 - 4 : hostile_sizes[b & 15];
}

double tf_scalar(tf_state *s) { return scalars[tf_byte(s) % COUNT(scalars)]; }

tn_device tf_device(tf_state *s) {
    /* the CPU, keep, CUDA devices this build or machine may not have, bad values */
    static const tn_device devices[8] = {{TN_CPU, 0},  {TN_DEVICE_SAME, 0},   {TN_CPU, 0},
                                         {TN_CUDA, 0}, {TN_CUDA, -1},         {TN_CUDA, INT_MAX},
                                         {TN_CPU, 3},  {(tn_device_type)7, 0}};
    return devices[tf_byte(s) % 8];
}

int tf_small_count(tf_state *s, int max) {
    uint8_t b = tf_byte(s);
    return b < 0xF0 ? b % (max + 1) : b & 1 ? -1 : INT_MIN;
}
