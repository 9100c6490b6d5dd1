/* examples/gpt_plant.c — the planted defects of gpt_plant.h. */
#include "gpt_plant.h"

#include <stdlib.h>
#include <string.h>

bool gpt_plant_gelu_tanh(int layer) {
    const char *p = getenv("GPT_PLANT");
    return !(p && !strncmp(p, "gelu_erf:", 9) && atoi(p + 9) == layer);
}

/* x [rows, C] scaled row by row by s_threads / s_serial: two float sums of the
 * row, the first as tenet's thread count splits it. Equal with one thread. */
static int reduce_fw(tn_function_ctx *ctx, int n_in, tn_tensor *const *in, int n_out,
                     tn_tensor **out) {
    (void)ctx, (void)n_in, (void)n_out;
    tn_tensor *x = tn_contiguous(in[0]);
    if (!x) return tn_last_status();
    out[0] = tn_clone(x);
    tn_release(x);
    if (!out[0]) return tn_last_status();
    float *y = tn_data_ptr(out[0]);
    int64_t C = tn_size(out[0], -1), rows = tn_numel(out[0]) / C;
    int parts = tn_get_num_threads();
    for (int64_t r = 0; r < rows; r++) {
        float *v = y + r * C, serial = 0, split = 0;
        for (int64_t i = 0; i < C; i++)
            serial += v[i];
        for (int p = 0; p < parts; p++) {
            float part = 0;
            for (int64_t i = C * p / parts; i < C * (p + 1) / parts; i++)
                part += v[i];
            split += part;
        }
        for (int64_t i = 0; i < C && serial != 0; i++)
            v[i] *= split / serial;
    }
    return TN_OK;
}

static int reduce_bw(tn_function_ctx *ctx, int n_out, tn_tensor *const *gout, int n_in,
                     tn_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = tn_clone(gout[0]); /* the scale is 1 but for rounding */
    return gin[0] ? 1 : tn_last_status();
}

static const tn_function planted_sum = {
    .name = "PlantedRowSum", .forward = reduce_fw, .backward = reduce_bw};

tn_tensor *gpt_plant_reduce(tn_tensor *x) {
    const char *p = getenv("GPT_PLANT");
    if (!x || !p || strcmp(p, "sum_order") != 0) return x;
    return tn_function_apply1(&planted_sum, 1, &x);
}
