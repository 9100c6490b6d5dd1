/* The safetensors dtypes: names, sizes, tenet's counterparts, and the
 * conversions of half and bfloat16 to float32 (tenet has neither type). */
#include "io_internal.h"

static const struct {
    const char *name;
    unsigned char size;
    signed char tenet; /* tn_dtype, or -1: tenet has no such type */
} dtypes[TN_ST_DTYPE_COUNT] = {
    [TN_ST_BOOL] = {"BOOL", 1, TN_BOOL},  [TN_ST_U8] = {"U8", 1, -1},
    [TN_ST_I8] = {"I8", 1, -1},           [TN_ST_F8_E5M2] = {"F8_E5M2", 1, -1},
    [TN_ST_F8_E4M3] = {"F8_E4M3", 1, -1}, [TN_ST_I16] = {"I16", 2, TN_I16},
    [TN_ST_U16] = {"U16", 2, -1},         [TN_ST_F16] = {"F16", 2, TN_F32},
    [TN_ST_BF16] = {"BF16", 2, TN_F32},   [TN_ST_I32] = {"I32", 4, TN_I32},
    [TN_ST_U32] = {"U32", 4, -1},         [TN_ST_F32] = {"F32", 4, TN_F32},
    [TN_ST_F64] = {"F64", 8, TN_F64},     [TN_ST_I64] = {"I64", 8, TN_I64},
    [TN_ST_U64] = {"U64", 8, -1},
};

int tn__st_dtype_parse(const char *s) {
    for (int i = 0; i < TN_ST_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) return i;
    return -1;
}

const char *tn__st_dtype_name(tn_st_dtype d) { return dtypes[d].name; }
size_t tn__st_dtype_size(tn_st_dtype d) { return dtypes[d].size; }
int tn__st_to_tenet(tn_st_dtype d) { return dtypes[d].tenet; }

tn_st_dtype tn__st_from_tenet(tn_dtype d) {
    switch (d) {
    case TN_F32:
        return TN_ST_F32;
    case TN_F64:
        return TN_ST_F64;
    case TN_I16:
        return TN_ST_I16;
    case TN_I32:
        return TN_ST_I32;
    case TN_I64:
        return TN_ST_I64;
    default:
        return TN_ST_BOOL;
    }
}

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* IEEE binary16 -> binary32, exact: every half is a float. */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return from_bits(sign | 0x7F800000u | man << 13); /* inf, NaN */
    if (exp != 0) return from_bits(sign | (exp + 112) << 23 | man << 13);
    if (man == 0) return from_bits(sign); /* ±0 */
    /* subnormal: man * 2^-24; normalise so that the leading 1 is bit 10 */
    uint32_t e = 113;
    while (!(man & 0x400u)) {
        man <<= 1;
        e--;
    }
    return from_bits(sign | e << 23 | (man & 0x3FFu) << 13);
}

void tn__f16_to_f32(const unsigned char *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = half_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
}

/* bfloat16 is the high half of a float32. */
void tn__bf16_to_f32(const unsigned char *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = from_bits((uint32_t)src[2 * i] << 16 | (uint32_t)src[2 * i + 1] << 24);
}
