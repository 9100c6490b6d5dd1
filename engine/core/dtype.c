/* dtypes: sizes, names, element load/store as double, type promotion. */
#include <float.h>
#include <math.h>

#include "convert.h"
#include "half.h"
#include "internal.h"

const size_t tn__dtype_sizes[TN_DTYPE_COUNT] = {4, 8, 2, 4, 8, 1, 2, 2};
static const char *const dtype_names[TN_DTYPE_COUNT] = {
    "float32", "float64", "int16", "int32", "int64", "bool", "bfloat16", "float16"};

const char *tn_dtype_name(tn_dtype dt) {
    return tn__valid_dtype(dt) ? dtype_names[dt] : "invalid";
}

size_t tn_dtype_size(tn_dtype dt) { return tn__valid_dtype(dt) ? tn__dtype_sizes[dt] : 0; }

double tn__load(const void *p, tn_dtype dt) {
    switch (dt) {
    case TN_F32: return *(const float *)p;
    case TN_F64: return *(const double *)p;
    case TN_I16: return *(const int16_t *)p;
    case TN_I32: return *(const int32_t *)p;
    case TN_I64: return (double)*(const int64_t *)p;
    case TN_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case TN_BF16: return tn_bf16_to_f32(*(const tn_bf16 *)p);
    case TN_F16: return tn_f16_to_f32(*(const tn_f16 *)p);
    default: return 0;
    }
}

void tn__store(void *p, tn_dtype dt, double v) {
    switch (dt) {
    case TN_F32: *(float *)p = (float)v; break;
    case TN_F64: *(double *)p = v; break;
    /* integers: through int64, wrapped (convert.h) */
    case TN_I16: *(int16_t *)p = (int16_t)(uint64_t)tn_scalar_to_i64(v); break;
    case TN_I32: *(int32_t *)p = (int32_t)(uint64_t)tn_scalar_to_i64(v); break;
    case TN_I64: *(int64_t *)p = tn_scalar_to_i64(v); break;
    case TN_BOOL: *(uint8_t *)p = v != 0; break;
    /* halves: through float32, as PyTorch's Half(float) and BFloat16(float) */
    case TN_BF16: *(tn_bf16 *)p = tn_f32_to_bf16((float)v); break;
    case TN_F16: *(tn_f16 *)p = tn_f32_to_f16((float)v); break;
    default: break;
    }
}

tn_status tn__check_scalar(double v, tn_dtype dt) {
    const char *type = NULL;
    switch (dt) { /* PyTorch's names, in its message */
    case TN_F32: type = isfinite(v) && fabs(v) > FLT_MAX ? "float" : NULL; break;
    case TN_F16: type = isfinite(v) && fabs(v) > 65504.0 ? "at::Half" : NULL; break;
    case TN_BF16: type = isfinite(v) && fabs(v) > 3.38953138925153547590e38 ? "at::BFloat16" : NULL; break;
    case TN_I16: type = v > -32769.0 && v < 32768.0 ? NULL : "int16_t"; break;
    case TN_I32: type = v > -TN_TWO_31 - 1.0 && v < TN_TWO_31 ? NULL : "int"; break;
    case TN_I64: type = v >= -TN_TWO_63 && v < TN_TWO_63 ? NULL : "int64_t"; break;
    default: break; /* float64 holds any double; bool is v != 0 */
    }
    if (!type) return TN_OK;
    return tn__error(TN_ERR_INVALID_ARGUMENT, "value cannot be converted to type %s without overflow",
                     type);
}

/* Category: bool < integer < floating. */
static int category(tn_dtype d) { return d == TN_BOOL ? 0 : tn__is_float(d) ? 2 : 1; }
static int rank(tn_dtype d) {
    static const int r[TN_DTYPE_COUNT] = {10, 11, 2, 3, 4, 0, 9, 9};
    return r[d];
}

/* torch.promote_types (docs/semantics.md, "Type promotion"): the higher
 * category wins, then the wider type; bfloat16 and float16 are of equal rank
 * and neither holds the other, so together they give float32. */
tn_dtype tn__promote_types(tn_dtype a, tn_dtype b) {
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (rank(a) == rank(b)) return TN_F32; /* bfloat16 with float16 */
    return rank(a) > rank(b) ? a : b;
}

tn_dtype tn__promote(const tn_tensor *a, const tn_tensor *b) {
    /* torch.result_type: dimensioned tensors win over 0-dim ones unless the
     * 0-dim tensor is of a higher category. */
    bool za = a->ndim == 0, zb = b->ndim == 0;
    if (za == zb) return tn__promote_types(a->dtype, b->dtype);
    const tn_tensor *dim = za ? b : a, *zero = za ? a : b;
    return category(zero->dtype) > category(dim->dtype) ? zero->dtype : dim->dtype;
}

tn_dtype tn__promote_scalar(tn_dtype a, double s) {
    if (tn__is_float(a)) return a;
    if (s != floor(s) || !isfinite(s)) return TN_F32;
    return a == TN_BOOL ? TN_I64 : a;
}
