/* engine/cpu/copy_impl.h — the copy and fill loops into one dtype, included
 * by copy_kernels.c once per destination dtype with SUF defined: copy_SUF_SS
 * from every source dtype SS (copy_pair_impl.h), their row copy_from_SUF of
 * the table, and fill_SUF.
 */
#define DT TN_T(SUF)

#define SS f32
#include "copy_pair_impl.h"
#define SS f64
#include "copy_pair_impl.h"
#define SS bf16
#include "copy_pair_impl.h"
#define SS f16
#include "copy_pair_impl.h"
#define SS i16
#include "copy_pair_impl.h"
#define SS i32
#include "copy_pair_impl.h"
#define SS i64
#include "copy_pair_impl.h"
#define SS b8
#include "copy_pair_impl.h"

#define COPY_AT(ID, CT, S) [ID] = TN_NAME(TN_NAME(copy, SUF), S),
static const tn_loop_fn TN_NAME(copy_from, SUF)[TN_DTYPE_COUNT] = {TN_FOR_EACH_DTYPE(COPY_AT)};
#undef COPY_AT

/* every element = the fill value (a double, as DT) */
static void TN_NAME(fill, SUF)(void *ctx, int64_t n, char **p, const int64_t *s) {
    DT v = TN_SCALAR_TO(SUF, *(const double *)ctx);
    if (s[0] == sizeof(DT)) {
        DT *o = (DT *)p[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = v;
    } else {
        for (int64_t i = 0; i < n; i++)
            *(DT *)(p[0] + i * s[0]) = v;
    }
}

#undef DT
#undef SUF
