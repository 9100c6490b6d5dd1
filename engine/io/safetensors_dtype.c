/* The safetensors dtypes: names, sizes and tenet's counterparts (F16 and
 * BF16 are tenet's TN_F16 and TN_BF16, bit for bit). */
#include "io_internal.h"

static const struct {
    const char *name;
    unsigned char size;
    signed char tenet; /* tn_dtype, or -1: tenet has no such type */
} dtypes[TN_ST_DTYPE_COUNT] = {
    [TN_ST_BOOL] = {"BOOL", 1, TN_BOOL},  [TN_ST_U8] = {"U8", 1, -1},
    [TN_ST_I8] = {"I8", 1, -1},           [TN_ST_F8_E5M2] = {"F8_E5M2", 1, -1},
    [TN_ST_F8_E4M3] = {"F8_E4M3", 1, -1}, [TN_ST_I16] = {"I16", 2, TN_I16},
    [TN_ST_U16] = {"U16", 2, -1},         [TN_ST_F16] = {"F16", 2, TN_F16},
    [TN_ST_BF16] = {"BF16", 2, TN_BF16},   [TN_ST_I32] = {"I32", 4, TN_I32},
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
    case TN_BF16:
        return TN_ST_BF16;
    case TN_F16:
        return TN_ST_F16;
    default:
        return TN_ST_BOOL;
    }
}
