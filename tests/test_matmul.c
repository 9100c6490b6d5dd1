/* tests/test_matmul.c — tn_matmul and tn_linear: values, grad_fn names and
 * gradients against PyTorch (the references below come from
 * /usr/bin/python3 with torch on the same fixed inputs; names as 2.11
 * prints them), odd and broadcast batch shapes, transposed operands,
 * float64, the blocked kernel (and the CBLAS path, when built) against a
 * naive loop, thread-count independence, double backward, and the error
 * texts. */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas.h"

/* ---- PyTorch references (inputs: pat() below; backward with pattern 3) ---- */
static const double dot_y[] = {-1.578125};
static const double dot_ga[] = {-0.171875, -0.03125, 0.109375, -0.109375, 0.03125};
static const double dot_gb[] = {-0.0, 0.140625, -0.078125, 0.0625, -0.15625};
static const double mv_y[] = {-1.578125, -1.40625, -0.515625};
static const double mv_ga[] = {-0.171875, -0.03125, 0.109375, -0.109375, 0.03125,
                               -1.71875,  -0.3125,  1.09375,  -1.09375,  0.3125,
                               0.6875,    0.125,    -0.4375,  0.4375,    -0.125};
static const double mv_gb[] = {-0.03125, 0.953125, -0.578125, 0.40625, -2.5625};
static const double vm_y[] = {-1.25, -1.171875, -1.09375, 2.21875, 0.5, -1.21875, -1.140625};
static const double vm_ga[] = {-2.171875, -1.140625, 4.5625, 0.203125, -2.0};
static const double vm_gb[] = {0.0,       0.0,      0.0,     0.0,       0.0,       0.0, 0.0,
                               0.140625,  1.40625,  -0.5625, 0.703125,  -1.265625, 0.0, 1.265625,
                               -0.078125, -0.78125, 0.3125,  -0.390625, 0.703125,  0.0, -0.703125,
                               0.0625,    0.625,    -0.25,   0.3125,    -0.5625,   0.0, 0.5625,
                               -0.15625,  -1.5625,  0.625,   -0.78125,  1.40625,   0.0, -1.40625};
static const double mm_y[] = {-1.25,     -1.171875, -1.09375, 2.21875,  0.5,      -1.21875,
                              -1.140625, -1.25,     -1.15625, -1.0625,  2.265625, 0.5625,
                              -1.5,      -1.046875, 2.703125, -2.21875, 1.125,    -0.5625,
                              0.984375,  1.8125,    -2.390625};
static const double mm_ga[] = {-2.171875, -1.140625, 4.5625, 0.203125, -2.0,
                               -1.171875, -2.671875, 0.5,    4.03125,  -2.859375,
                               5.578125,  -0.609375, -2.125, -1.125,   1.671875};
static const double mm_gb[] = {
    0.421875,  0.0,       -0.0625,   0.234375,  -0.1875, -0.25,   0.046875, -1.6875,  1.6875,
    -1.046875, -0.1875,   -0.046875, 0.453125,  1.3125,  1.59375, -0.9375,  0.484375, 0.46875,
    -0.265625, -0.640625, -0.65625,  -0.515625, 0.75,    -0.5,    0.046875, -0.125,   0.0625,
    0.609375,  -1.1875,   -2.59375,  3.546875,  -1.8125, 0.375,   2.921875, -2.4375};
static const double mmt_y[] = {1.734375, 1.828125,  1.921875, 2.015625,  2.109375, -1.75,
                               -1.65625, -1.609375, 1.734375, 1.84375,   1.953125, 2.0625,
                               1.453125, 1.5625,    0.796875, -1.234375, -1.46875, -1.703125,
                               -1.9375,  0.34375,   0.109375};
static const double mmt_ga[] = {1.34375,   0.46875,  2.828125,  -0.921875, 0.203125,
                                -0.46875,  0.765625, -0.78125,  -0.890625, 1.375,
                                -0.328125, 2.640625, -0.171875, -0.234375, -0.65625};
static const double mmt_gb[] = {
    0.15625,  1.015625,  0.078125, -1.21875, -2.15625, 0.71875,  0.03125,  0.78125,   -2.0625,
    -1.3125,  -1.953125, 1.203125, 0.765625, 1.765625, 1.328125, 0.40625,  0.578125,  0.390625,
    -1.59375, -1.78125,  0.96875,  -1.84375, -1.78125, 1.515625, 1.578125, -1.703125, 0.765625,
    1.078125, 1.390625,  1.703125, 0.65625,  0.140625, 0.703125, -1.96875, -1.40625};
static const double bmm_y[] = {1.328125,  -0.421875, 0.703125, -1.046875, 0.078125,  1.953125,
                               0.328125,  -0.9375,   1.03125,  -0.234375, -1.734375, 0.0,
                               -0.421875, 0.234375,  -0.1875,  0.140625,  -0.515625, -0.09375,
                               2.84375,   -0.328125, 0.75,     -1.21875,  0.046875,  -0.84375,
                               -0.65625,  -0.796875, 0.953125, -0.171875, 0.140625,  0.453125};
static const double bmm_ga[] = {-1.75,     -1.4375,   -1.484375, -1.53125, -1.578125, -1.546875,
                                -1.515625, -1.484375, -1.40625,  -1.65625, -1.546875, -1.4375,
                                -1.921875, -1.375,    -1.546875, -1.71875, -1.796875, -1.53125,
                                -1.625,    -1.71875,  -1.671875, -1.6875,  -1.703125, -1.71875};
static const double bmm_gb[] = {
    -0.046875, -1.03125, 0.5,       -0.484375, 1.046875, 0.3125,    -0.109375, 0.546875,
    0.125,     0.78125,  -0.046875, 0.09375,   -0.125,   0.015625,  -0.203125, -0.046875,
    0.65625,   -0.4375,  0.265625,  -0.828125, 0.1875,   -0.515625, 0.578125,  -0.125,
    -0.828125, 0.0,      -0.140625, 0.078125,  -0.0625,  -0.203125, 0.171875,  0.59375,
    -0.0625,   0.359375, 0.78125,   -0.375,    0.609375, -0.921875, 0.0625,    1.046875};
static const double bc_y[] = {1.328125,  -0.421875, 0.703125,  -1.046875, 0.078125,  1.953125,
                              0.328125,  -0.9375,   1.03125,   -0.234375, -1.734375, 0.0,
                              -0.421875, 0.234375,  -0.1875,   0.828125,  -0.921875, 0.203125,
                              1.328125,  -0.421875, -1.078125, 0.890625,  -0.375,    1.953125,
                              0.328125,  -0.46875,  0.1875,    -0.234375, -1.734375, 0.0};
static const double bc_ga[] = {-3.671875, -2.8125,   -3.03125,  -3.25,    -3.375, -3.078125,
                               -3.140625, -3.203125, -3.078125, -3.34375, -3.25,  -3.15625};
static const double bc_gb[] = {
    -0.046875, -1.03125, 0.5,       -0.484375, 1.046875, 0.3125,    -0.109375, 0.546875,
    0.125,     0.78125,  -0.046875, 0.09375,   -0.125,   0.015625,  -0.203125, -0.046875,
    0.65625,   -0.4375,  0.265625,  -0.828125, 0.28125,  -0.703125, 0.828125,  -0.15625,
    -1.140625, 0.453125, 0.03125,   0.6875,    0.265625, -0.15625,  -0.09375,  0.046875,
    -0.171875, -0.03125, 0.109375,  -0.28125,  0.421875, -0.671875, 0.03125,   0.734375};
static const double b3d2_y[] = {1.328125,  -0.421875, 0.703125, -1.046875, 0.078125,  1.953125,
                                0.328125,  -0.9375,   1.03125,  -0.234375, -1.734375, 0.0,
                                -0.421875, 0.234375,  -0.1875,  2.84375,   -0.328125, 0.09375,
                                -0.5625,   -0.140625, -0.84375, -0.65625,  0.609375,  -1.359375,
                                -0.09375,  0.140625,  0.453125, -0.671875, 1.078125,  -0.046875};
static const double b3d2_ga[] = {-1.75,     -1.4375,   -1.484375, -1.53125, -1.578125, -1.546875,
                                 -1.515625, -1.484375, -1.40625,  -1.65625, -1.546875, -1.4375,
                                 -0.515625, -1.40625,  -1.578125, -1.75,    -0.34375,  -1.515625,
                                 -1.609375, -1.703125, -0.171875, -1.625,   -1.640625, -1.65625};
static const double b3d2_gb[] = {0.140625, -1.546875, 1.078125, -0.609375, 0.21875,  0.3125,  -0.25,
                                 0.625,    0.0625,    0.578125, 0.125,     0.6875,   -0.1875, 0.375,
                                 0.578125, -0.421875, 1.265625, -1.359375, 0.328125, 0.21875};
static const double b2d3_y[] = {1.328125,  -0.421875, 0.703125,  -1.046875, 0.078125,  1.953125,
                                0.328125,  -0.9375,   1.03125,   -0.234375, -1.734375, 0.0,
                                -0.421875, 0.234375,  -0.1875,   0.828125,  -0.921875, 0.203125,
                                1.328125,  -0.421875, -1.078125, 0.890625,  -0.375,    1.953125,
                                0.328125,  -0.46875,  0.1875,    -0.234375, -1.734375, 0.0};
static const double b2d3_ga[] = {-3.671875, -2.8125,   -3.03125,  -3.25,    -3.375, -3.078125,
                                 -3.140625, -3.203125, -3.078125, -3.34375, -3.25,  -3.15625};
static const double b2d3_gb[] = {
    -0.046875, -1.03125, 0.5,       -0.484375, 1.046875, 0.3125,    -0.109375, 0.546875,
    0.125,     0.78125,  -0.046875, 0.09375,   -0.125,   0.015625,  -0.203125, -0.046875,
    0.65625,   -0.4375,  0.265625,  -0.828125, 0.28125,  -0.703125, 0.828125,  -0.15625,
    -1.140625, 0.453125, 0.03125,   0.6875,    0.265625, -0.15625,  -0.09375,  0.046875,
    -0.171875, -0.03125, 0.109375,  -0.28125,  0.421875, -0.671875, 0.03125,   0.734375};
static const double b1d3_y[] = {1.328125, -0.421875, 0.703125, -1.046875, 0.078125,
                                0.828125, -0.921875, 0.203125, 1.328125,  -0.421875};
static const double b1d3_ga[] = {-3.203125, -1.421875, -1.4375, -1.453125};
static const double b1d3_gb[] = {
    -0.0,     -0.0,      0.0,       -0.0,      0.0,    0.140625,  1.40625,  -0.5625,
    0.703125, -1.265625, -0.078125, -0.78125,  0.3125, -0.390625, 0.703125, 0.0625,
    0.625,    -0.25,     0.3125,    -0.5625,   0.0,    -0.0,      0.0,      -0.0,
    0.0,      -0.0,      1.265625,  -0.703125, 0.5625, -1.40625,  0.0,      -0.703125,
    0.390625, -0.3125,   0.78125,   -0.0,      0.5625, -0.3125,   0.25,     -0.625};
static const double b3d1_y[] = {-1.265625, 3.28125, -1.15625, 2.671875, -1.765625, -0.453125};
static const double b3d1_ga[] = {-0.171875, -0.03125, 0.109375, -0.109375, -1.71875, -0.3125,
                                 1.09375,   -1.09375, 0.6875,   0.125,     -0.4375,  0.4375,
                                 -0.859375, -0.15625, 0.546875, -0.546875, 1.546875, 0.28125,
                                 -0.984375, 0.984375, 0.0,      0.0,       -0.0,     0.0};
static const double b3d1_gb[] = {-3.140625, 1.953125, 2.015625, -2.953125};
static const double b4bc_y[] = {
    0.640625, -1.46875, 2.140625, 1.234375, -2.109375, 1.421875, 1.015625,  0.703125,  1.71875,
    -2.0625,  -2.25,    2.0,      -1.84375, -0.359375, 1.65625,  -0.328125, 1.5625,    -0.65625,
    1.90625,  1.609375, -2.34375, 1.796875, 0.953125,  -1.96875, 2.046875,  -2.203125, -1.921875,
    1.859375, 0.578125, 0.890625, 1.46875,  -0.984375, 1.375,    -1.3125,   -1.59375,  0.515625};
static const double b4bc_ga[] = {-1.03125,  1.625,     2.125,    -0.609375, 0.609375, 2.015625,
                                 1.265625,  -0.921875, 0.8125,   -2.625,    0.046875, 3.078125,
                                 -1.359375, 1.546875,  2.296875, -0.546875, 0.28125,  1.9375,
                                 1.4375,    -0.859375, 0.484375, -2.703125, 0.21875,  3.140625};
static const double b4bc_gb[] = {0.203125,  -1.484375, 1.5625,    1.0,     1.125,   1.6875,
                                 -1.109375, 0.578125,  -1.296875, 0.96875, 1.0625,  -0.21875,
                                 1.625,     -3.203125, 0.390625,  0.28125, 1.15625, -0.171875,
                                 -0.15625,  1.4375,    -3.265625, 1.25,    0.09375, -0.734375};
static const double dd_ga[] = {1.02734375,  -3.69140625, 3.71875,     2.68359375,
                               6.50390625,  -1.5859375,  -4.46484375, -0.24609375,
                               -5.08984375, 6.1796875,   -2.85546875, -3.71484375};
static const double dd_a[] = {6.50390625,  -1.5859375,  -4.46484375, -0.24609375,
                              -5.08984375, 6.1796875,   -2.85546875, -3.71484375,
                              6.046875,    -0.51953125, -5.37890625, -0.984375};
static const double dd_b[] = {-10.3984375, 0.23828125, 7.0,         4.3203125,
                              13.4375,     -0.8515625, -13.0078125, -5.21484375};
static const double lin2_y[] = {-1.078125, -1.953125, 1.84375, 0.96875,
                                -0.734375, -2.296875, -0.625,  -2.1875};
static const double lin2_gx[] = {-1.0, 0.6875, 2.015625, 1.046875, 0.34375, -1.796875};
static const double lin2_gw[] = {-0.5625, 1.546875, 0.0625,   0.0,     1.40625,  -0.78125,
                                 0.5625,  -1.96875, 0.171875, -0.3125, 1.484375, -0.3125};
static const double lin2_gb[] = {1.0, -1.25, -0.625, 0.0};
static const double lin2nb_y[] = {-0.828125, -0.578125, 1.46875, 1.71875,
                                  -0.484375, -0.921875, -1.0,    -1.4375};
static const double lin2nb_gx[] = {-1.0, 0.6875, 2.015625, 1.046875, 0.34375, -1.796875};
static const double lin2nb_gw[] = {-0.5625, 1.546875, 0.0625,   0.0,     1.40625,  -0.78125,
                                   0.5625,  -1.96875, 0.171875, -0.3125, 1.484375, -0.3125};
static const double lin3_y[] = {
    -1.078125, -1.953125, 1.84375,   0.96875,   -0.734375, -2.296875, -0.625,    -2.1875,
    -1.109375, -1.921875, -0.9375,   -1.75,     2.46875,   0.96875,   -0.171875, -1.671875,
    2.09375,   1.34375,   -0.484375, -1.234375, -0.796875, -2.234375, 2.078125,  0.640625,
    -1.171875, -1.859375, 1.765625,  1.078125,  -0.828125, -2.203125, -0.703125, -2.078125,
    -1.203125, -1.828125, -1.015625, -1.640625, 2.375,     1.0625,    -0.25,     -1.5625};
static const double lin3_gx[] = {-1.0,      0.6875,  2.015625,  1.046875, 0.34375, -1.796875,
                                 0.578125,  0.71875, -1.65625,  1.1875,   -1.0625, 1.359375,
                                 -0.359375, 1.46875, -1.375,    0.25,     -0.3125, 1.640625,
                                 -1.65625,  -1.375,  0.34375,   -0.6875,  0.4375,  1.921875,
                                 1.359375,  0.09375, -1.890625, 0.890625, 0.46875, -1.75};
static const double lin3_gw[] = {-1.375,   3.59375,   0.296875, 0.9375,    0.953125, -4.0625,
                                 3.609375, -1.328125, 0.203125, -1.984375, -0.375,   2.671875};
static const double lin3_gb[] = {0.375, 0.625, 0.875, -1.75};
static const double lin3nc_y[] = {
    -1.078125, -1.953125, 1.84375,   0.96875,   -0.796875, -2.234375, 2.078125,  0.640625,
    -0.734375, -2.296875, -0.625,    -2.1875,   -1.171875, -1.859375, 1.765625,  1.078125,
    -1.109375, -1.921875, -0.9375,   -1.75,     -0.828125, -2.203125, -0.703125, -2.078125,
    2.46875,   0.96875,   -0.171875, -1.671875, -1.203125, -1.828125, -1.015625, -1.640625,
    2.09375,   1.34375,   -0.484375, -1.234375, 2.375,     1.0625,    -0.25,     -1.5625};
static const double lin3nc_gx[] = {-1.0,      0.6875,  2.015625,  0.578125, 0.71875, -1.65625,
                                   -0.359375, 1.46875, -1.375,    -1.65625, -1.375,  0.34375,
                                   1.359375,  0.09375, -1.890625, 1.046875, 0.34375, -1.796875,
                                   1.1875,    -1.0625, 1.359375,  0.25,     -0.3125, 1.640625,
                                   -0.6875,   0.4375,  1.921875,  0.890625, 0.46875, -1.75};
static const double lin3nc_gw[] = {0.125,    -3.171875, 1.4375,  2.796875, 2.8125,    -2.5625,
                                   -3.15625, 0.171875,  1.34375, 3.828125, -2.828125, -0.140625};
static const double lin3nc_gb[] = {0.375, 0.625, 0.875, -1.75};
static const double lin1_y[] = {-1.078125, -1.953125, 1.84375, 0.96875};
static const double lin1_gx[] = {-1.0, 0.6875, 2.015625};
static const double lin1_gw[] = {0.0, 0.140625, -0.078125, 0.0, 1.40625,  -0.78125,
                                 0.0, -0.5625,  0.3125,    0.0, 0.703125, -0.390625};
static const double lin1_gb[] = {-0.125, -1.25, 0.5, -0.625};
static const double lin1nb_y[] = {-0.828125, -0.578125, 1.46875, 1.71875};
static const double lin1nb_gx[] = {-1.0, 0.6875, 2.015625};
static const double lin1nb_gw[] = {0.0, 0.140625, -0.078125, 0.0, 1.40625,  -0.78125,
                                   0.0, -0.5625,  0.3125,    0.0, 0.703125, -0.390625};
static const double lin3nb_y[] = {
    -0.828125, -0.578125, 1.46875,   1.71875,   -0.484375, -0.921875, -1.0,      -1.4375,
    -0.859375, -0.546875, -1.3125,   -1.0,      2.71875,   2.34375,   -0.546875, -0.921875,
    2.34375,   2.71875,   -0.859375, -0.484375, -0.546875, -0.859375, 1.703125,  1.390625,
    -0.921875, -0.484375, 1.390625,  1.828125,  -0.578125, -0.828125, -1.078125, -1.328125,
    -0.953125, -0.453125, -1.390625, -0.890625, 2.625,     2.4375,    -0.625,    -0.8125};
static const double lin3nb_gx[] = {-1.0,      0.6875,  2.015625,  1.046875, 0.34375, -1.796875,
                                   0.578125,  0.71875, -1.65625,  1.1875,   -1.0625, 1.359375,
                                   -0.359375, 1.46875, -1.375,    0.25,     -0.3125, 1.640625,
                                   -1.65625,  -1.375,  0.34375,   -0.6875,  0.4375,  1.921875,
                                   1.359375,  0.09375, -1.890625, 0.890625, 0.46875, -1.75};
static const double lin3nb_gw[] = {-1.375,   3.59375,   0.296875, 0.9375,    0.953125, -4.0625,
                                   3.609375, -1.328125, 0.203125, -1.984375, -0.375,   2.671875};

/* ---- helpers --------------------------------------------------------------------- */

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* Inputs are ((i*37 + seed*11) % 23 - 11) / 8: exact in float32, so products of
 * short sums are exact and match PyTorch to the last bit. */
static tn_tensor *pat(int nd, const int64_t *shape, int seed, tn_dtype dt, bool rg) {
    double v[512];
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    assert_true(n <= 512);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((i * 37 + seed * 11) % 23 - 11) / 8;
    tn_tensor *f = tt_f64(nd, shape, v, false);
    tn_tensor *t = tn_to(f, dt, TN_DEVICE_KEEP);
    assert_non_null(t);
    if (rg) assert_int_equal(tn_requires_grad_(t, true), TN_OK);
    return t;
}

static void assert_fn(const tn_tensor *t, const char *name) {
    assert_non_null(t);
    const char *got = tn_grad_fn_name(t);
    assert_non_null(got);
    assert_string_equal(got, name);
}

typedef struct mm_case {
    const char *fn;
    int nda, ndb;
    int64_t sa[4], sb[4];
    bool ta, tb; /* operand given transposed (last two dims) */
    const double *y, *ga, *gb;
    int64_t ny, na, nb;
} mm_case;

#define CASE(FN, NA, SA, NB, SB, TA, TB, P)                                                        \
    {                                                                                              \
        FN, NA, NB, SA, SB, TA, TB, P##_y, P##_ga, P##_gb, sizeof P##_y / sizeof(double),          \
            sizeof P##_ga / sizeof(double), sizeof P##_gb / sizeof(double)                         \
    }
#define SH(...)                                                                                    \
    { __VA_ARGS__ }

static const mm_case cases[] = {
    CASE("DotBackward0", 1, SH(5), 1, SH(5), false, false, dot),
    CASE("MvBackward0", 2, SH(3, 5), 1, SH(5), false, false, mv),
    CASE("SqueezeBackward4", 1, SH(5), 2, SH(5, 7), false, false, vm),
    CASE("MmBackward0", 2, SH(3, 5), 2, SH(5, 7), false, false, mm),
    CASE("MmBackward0", 2, SH(5, 3), 2, SH(7, 5), true, true, mmt),
    CASE("UnsafeViewBackward0", 3, SH(2, 3, 4), 3, SH(2, 4, 5), false, false, bmm),
    CASE("UnsafeViewBackward0", 3, SH(1, 3, 4), 3, SH(2, 4, 5), false, false, bc),
    CASE("UnsafeViewBackward0", 3, SH(2, 3, 4), 2, SH(4, 5), false, false, b3d2),
    CASE("CloneBackward0", 2, SH(3, 4), 3, SH(2, 4, 5), false, false, b2d3),
    CASE("UnsafeViewBackward0", 1, SH(4), 3, SH(2, 4, 5), false, false, b1d3),
    CASE("UnsafeViewBackward0", 3, SH(2, 3, 4), 1, SH(4), false, false, b3d1),
    CASE("UnsafeViewBackward0", 4, SH(2, 1, 3, 4), 3, SH(3, 4, 2), false, false, b4bc),
};

/* a @ b with gradient pattern 3, checked against PyTorch (values, grad_fn,
 * gradients) in dtype dt. */
static void run_case(const mm_case *c, tn_dtype dt, double tol) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(c->nda, c->sa, 1, dt, true), *b = pat(c->ndb, c->sb, 2, dt, true);
    tn_tensor *A = c->ta ? tn_transpose(a, -2, -1) : a, *B = c->tb ? tn_transpose(b, -2, -1) : b;
    if (c->ta) assert_false(tn_is_contiguous(A));
    tn_tensor *y = tn_matmul(A, B);
    if (!y) fail_msg("matmul (%s): %s", c->fn, tn_last_error());
    assert_int_equal(tn_dtype_of(y), dt);
    assert_fn(y, c->fn);
    tt_assert_close(y, c->y, c->ny, tol);
    tn_tensor *g = pat(tn_ndim(y), tn_shape(y), 3, dt, false);
    assert_int_equal(tn_backward(y, g, false), TN_OK);
    tt_assert_grad(a, c->ga, c->na, tol);
    tt_assert_grad(b, c->gb, c->nb, tol);
    tn_scope_end();
}

static void matmul_cases_f64(void **state) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], TN_F64, 1e-12);
}

static void matmul_cases_f32(void **state) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], TN_F32, 1e-6);
}

/* Only the input that needs a gradient gets one; the other is not saved. */
static void matmul_one_side(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(3, 5), 1, TN_F64, false), *b = pat(2, S(5, 7), 2, TN_F64, true);
    tn_tensor *y = tn_matmul(a, b);
    assert_int_equal(tn_backward(y, pat(2, S(3, 7), 3, TN_F64, false), false), TN_OK);
    tt_assert_grad(b, mm_gb, 35, 1e-12);
    assert_null(tn_grad(a));
    /* b was not saved (a needs no grad): modifying it in place is fine */
    tn_tensor *x = pat(2, S(3, 5), 1, TN_F64, true), *w = pat(2, S(5, 7), 2, TN_F64, false);
    tn_tensor *z = tn_matmul(x, w);
    tn_tensor *x2 = pat(2, S(3, 5), 1, TN_F64, false);
    tn_tensor *z2 = tn_matmul(x2, tn_detach(w));
    (void)z2;
    assert_int_equal(tn_backward(z, pat(2, S(3, 7), 3, TN_F64, false), false), TN_OK);
    tt_assert_grad(x, mm_ga, 15, 1e-12);
    tn_scope_end();
}

/* A saved input modified in place: PyTorch's version error. */
static void matmul_saved_modified(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(3, 5), 1, TN_F32, true), *b = pat(2, S(5, 7), 2, TN_F32, false);
    tn_tensor *y = tn_sum(tn_matmul(a, b));
    assert_int_equal(tn_add_scalar_(b, 1), TN_OK);
    assert_int_equal(tn_backward(y, NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "[float32 [5, 7]] is at version 1; expected version 0");
    tn_scope_end();
}

/* d/da of sum(ga * p) where ga = d sum((a@b)^2) / da, through create_graph. */
static void matmul_double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(3, 4), 1, TN_F64, true), *b = pat(2, S(4, 2), 2, TN_F64, true);
    tn_tensor *ab = tn_matmul(a, b);
    tn_tensor *y = tn_sum(tn_mul(ab, ab));
    tn_tensor *ga = NULL;
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, &a, &ga, true, true), TN_OK);
    tn_keep(ga);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tt_assert_close(ga, dd_ga, 12, 1e-12);
    tn_tensor *z = tn_sum(tn_mul(ga, pat(2, S(3, 4), 4, TN_F64, false)));
    assert_int_equal(tn_backward(z, NULL, false), TN_OK);
    tt_assert_grad(a, dd_a, 12, 1e-12);
    tt_assert_grad(b, dd_b, 8, 1e-12);
    tn_scope_end();
    tn_release(ga);
    tn_scope_end();
}

/* ---- larger products against a naive reference: blocked kernel, edge tiles,
 * strided operands, threads -------------------------------------------------- */

static double ref_at(const double *v, const int64_t *st, int64_t i, int64_t j) {
    return v[i * st[0] + j * st[1]];
}

/* C = A·B for (m,k)·(k,n) with A, B transposed or not, on the matmul path
 * `mode` (blas.h), at 1 and 2 threads; compares to a naive double loop.
 * tenet's kernel sums every element in the same order whatever the split, so
 * its 1- and 2-thread results must be identical bits. The CBLAS path need
 * not be: OpenBLAS takes size-dependent kernel paths for the blocks a
 * thread count cuts (and its own threading is not bit-reproducible either:
 * 1 vs 2 threads differ for sgemm 1024 with 0.3.21), so there the two are
 * compared with a tolerance of a few rounding errors per dot product. */
static void check_big_mode(int64_t m, int64_t k, int64_t n, bool ta, bool tb, tn_dtype dt,
                           tn__blas_mode mode) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(7);
    tn_tensor *a0 = tn_randn(2, ta ? S(k, m) : S(m, k), dt);
    tn_tensor *b0 = tn_randn(2, tb ? S(n, k) : S(k, n), dt);
    tn_tensor *A = ta ? tn_transpose(a0, 0, 1) : a0, *B = tb ? tn_transpose(b0, 0, 1) : b0;
    int old = tn_get_num_threads();
    tn__blas_mode old_mode = tn__blas_get_mode();
    tn__blas_set_mode(mode);
    tn_set_num_threads(1);
    tn_tensor *c1 = tn_matmul(A, B);
    tn_set_num_threads(2);
    tn_tensor *c2 = tn_matmul(A, B);
    tn_set_num_threads(old);
    tn__blas_set_mode(old_mode);
    assert_non_null(c1);
    assert_non_null(c2);
    double *av = malloc(sizeof(double) * (size_t)(m * k)),
           *bv = malloc(sizeof(double) * (size_t)(k * n));
    double *cv = malloc(sizeof(double) * (size_t)(m * n)),
           *cv2 = malloc(sizeof(double) * (size_t)(m * n));
    assert_int_equal(tn_copy_to_f64(a0, av, m * k), TN_OK);
    assert_int_equal(tn_copy_to_f64(b0, bv, k * n), TN_OK);
    assert_int_equal(tn_copy_to_f64(c1, cv, m * n), TN_OK);
    assert_int_equal(tn_copy_to_f64(c2, cv2, m * n), TN_OK);
    int64_t sa[2] = {ta ? 1 : k, ta ? m : 1}, sb[2] = {tb ? 1 : n, tb ? k : 1};
    double tol = dt == TN_F32 ? 1e-4 : 1e-11, worst = 0, worst_threads = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += ref_at(av, sa, i, p) * ref_at(bv, sb, p, j);
            double d = fabs(cv[i * n + j] - s) / (1 + sqrt((double)k));
            if (d > worst) worst = d;
            d = fabs(cv[i * n + j] - cv2[i * n + j]) / (1 + sqrt((double)k));
            if (d > worst_threads) worst_threads = d;
        }
    bool same_bits = !memcmp(tn_data_ptr(c1), tn_data_ptr(c2), (size_t)(m * n) * tn_dtype_size(dt));
    free(av);
    free(bv);
    free(cv);
    free(cv2);
    if (worst > tol)
        fail_msg("%lldx%lldx%lld ta=%d tb=%d mode %d: error %g", (long long)m, (long long)k,
                 (long long)n, ta, tb, (int)mode, worst);
    if (mode == TN__BLAS_OFF && !same_bits)
        fail_msg("%lldx%lldx%lld ta=%d tb=%d: 1 and 2 threads differ on tenet's kernel",
                 (long long)m, (long long)k, (long long)n, ta, tb);
    if (worst_threads > tol)
        fail_msg("%lldx%lldx%lld ta=%d tb=%d mode %d: 1 and 2 threads differ by %g", (long long)m,
                 (long long)k, (long long)n, ta, tb, (int)mode, worst_threads);
    tn_scope_end();
}

/* Both paths: tenet's kernel (exact across threads), and CBLAS when built. */
static void check_big(int64_t m, int64_t k, int64_t n, bool ta, bool tb, tn_dtype dt) {
    check_big_mode(m, k, n, ta, tb, dt, TN__BLAS_OFF);
    if (tn__blas_available()) check_big_mode(m, k, n, ta, tb, dt, TN__BLAS_ALL);
}

static void matmul_big_blocked(void **state) {
    check_big(67, 129, 45, false, false, TN_F32);
    check_big(67, 129, 45, true, true, TN_F32);
    check_big(131, 300, 70, true, false, TN_F64);
    check_big(200, 520, 2100, false, true, TN_F32); /* several KC and NC blocks */
    check_big(3, 400, 300, false, false, TN_F32);   /* short: thin path */
    check_big(3000, 1500, 1, false, false, TN_F64); /* one column: dot products */
    check_big(9, 2000, 600, true, false, TN_F32);   /* split by columns across threads */
    /* one row (a linear layer fed one token): columns across threads, each weight row a dot */
    check_big(1, 768, 2304, false, true, TN_F32);
    check_big(1, 300, 517, false, false, TN_F64);
    check_big(1, 301, 900, true, true, TN_F32);
}

/* A few rows times a weight read transposed (x·Wᵀ, W [out, in]): dot products on tenet's kernel
 * whatever the CBLAS mode but "all" (gemm.c's use_dots). Edge tiles in rows, columns and k; the
 * same bits on 1 and 2 threads; a row's bits do not depend on the rows around it (rows 4..5 of
 * a 7-row product as a product of their own); the accumulating path (a linear layer's bias). */
static void few_rows_mode(tn_dtype dt, tn__blas_mode mode) {
    static const int64_t shapes[][3] = {{2, 64, 300}, {7, 77, 517}, {16, 768, 2304}, {32, 130, 97}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        check_big_mode(shapes[i][0], shapes[i][1], shapes[i][2], false, true, dt, mode);
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(11);
    tn_tensor *x = tn_randn(2, S(7, 300), dt), *w = tn_randn(2, S(101, 300), dt);
    tn_tensor *bias = tn_randn(1, S(101), dt);
    tn__blas_mode old_mode = tn__blas_get_mode();
    tn__blas_set_mode(mode);
    tn_tensor *all = tn_linear(x, w, bias), *two = tn_linear(tn_narrow(x, 0, 4, 2), w, bias);
    tn_tensor *nob = tn_linear(x, w, NULL);
    tn__blas_set_mode(old_mode);
    size_t es = tn_dtype_size(dt);
    assert_memory_equal((const char *)tn_data_ptr(all) + 4 * 101 * es, tn_data_ptr(two),
                        2 * 101 * es);
    tt_assert_close_tensors(all, tn_add(nob, bias), dt == TN_F32 ? 1e-5 : 1e-12);
    tn_scope_end();
}

static void matmul_few_rows(void **state) {
    few_rows_mode(TN_F32, TN__BLAS_OFF);
    few_rows_mode(TN_F64, TN__BLAS_OFF);
    if (tn__blas_available()) few_rows_mode(TN_F32, TN__BLAS_AUTO);
}

/* Many small products: split by batch across threads; on tenet's kernel the
 * same bits as serial (forced: CBLAS need not be, see check_big_mode), on
 * CBLAS within rounding. */
static void many_batches_mode(tn__blas_mode mode) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_manual_seed(3);
    tn_tensor *a = tn_randn(3, S(128, 40, 50), TN_F32), *b = tn_randn(3, S(128, 50, 30), TN_F32);
    int old = tn_get_num_threads();
    tn__blas_mode old_mode = tn__blas_get_mode();
    tn__blas_set_mode(mode);
    tn_set_num_threads(1);
    tn_tensor *c1 = tn_matmul(a, b);
    tn_set_num_threads(2);
    tn_tensor *c2 = tn_matmul(a, b);
    tn_set_num_threads(old);
    /* spot check batch 17 against select + 2-D matmul */
    tn_tensor *ref = tn_matmul(tn_select(a, 0, 17), tn_select(b, 0, 17));
    tn__blas_set_mode(old_mode);
    if (mode == TN__BLAS_OFF) {
        assert_memory_equal(tn_data_ptr(c1), tn_data_ptr(c2), 128 * 40 * 30 * sizeof(float));
    } else {
        const float *x1 = tn_data_ptr(c1), *x2 = tn_data_ptr(c2);
        for (int i = 0; i < 128 * 40 * 30; i++)
            assert_true(fabsf(x1[i] - x2[i]) <= 1e-5f * (1 + fabsf(x1[i])));
    }
    double r[1200], g[1200];
    assert_int_equal(tn_copy_to_f64(ref, r, 1200), TN_OK);
    assert_int_equal(tn_copy_to_f64(tn_select(c1, 0, 17), g, 1200), TN_OK);
    for (int i = 0; i < 1200; i++)
        assert_true(fabs(r[i] - g[i]) <= 1e-5 * (1 + fabs(r[i])));
    tn_scope_end();
}

static void matmul_many_batches(void **state) {
    many_batches_mode(TN__BLAS_OFF);
    if (tn__blas_available()) many_batches_mode(TN__BLAS_ALL);
}

static void matmul_empty_and_int(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *e = tn_matmul(tn_zeros(2, S(2, 0), TN_F32), tn_zeros(2, S(0, 4), TN_F32));
    assert_non_null(e);
    tt_assert_close(e, (const double[]){0, 0, 0, 0, 0, 0, 0, 0}, 8, 0);
    tn_tensor *z = tn_matmul(tn_zeros(2, S(0, 3), TN_F32), tn_zeros(2, S(3, 4), TN_F32));
    assert_int_equal(tn_numel(z), 0);
    int64_t ai[] = {1, 2, 3, 4, 5, 6}, bi[] = {1, -1, 2, 0, 3, 1};
    tn_tensor *ia = tn_tensor_from(ai, TN_I64, 2, S(2, 3), false);
    tn_tensor *ib = tn_tensor_from(bi, TN_I64, 2, S(3, 2), false);
    tn_tensor *ic = tn_matmul(ia, ib);
    assert_int_equal(tn_dtype_of(ic), TN_I64);
    tt_assert_close(ic, (const double[]){14, 2, 32, 2}, 4, 0);
    int32_t v3[] = {1, 2, 3};
    tn_tensor *i3 = tn_tensor_from(v3, TN_I32, 1, S(3), false);
    tn_tensor *d = tn_matmul(i3, i3);
    assert_int_equal(tn_ndim(d), 0);
    tt_assert_close(d, (const double[]){14}, 1, 0);
    tn_scope_end();
}

static void matmul_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = pat(2, S(2, 3), 1, TN_F32, true);
    assert_null(tn_matmul(a, pat(2, S(4, 5), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    assert_null(tn_matmul(tn_scalar(1, TN_F32), pat(1, S(3), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE,
                    "both arguments to matmul need to be at least 1D, but they are 0D and 1D");
    assert_null(tn_matmul(pat(1, S(3), 2, TN_F32, false), pat(1, S(4), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "inconsistent tensor size, expected tensor [3] and src [4] to "
                                  "have the same number of elements, but got 3 and 4 elements "
                                  "respectively");
    assert_null(tn_matmul(a, pat(1, S(4), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "size mismatch, got input (2), mat (2x3), vec (4)");
    assert_null(tn_matmul(pat(1, S(3), 2, TN_F32, false), pat(2, S(4, 5), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)");
    assert_null(
        tn_matmul(pat(3, S(2, 2, 3), 1, TN_F32, false), pat(3, S(2, 4, 5), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "Expected size for first two dimensions of batch2 tensor to be: "
                                  "[2, 3] but got: [2, 4].");
    assert_null(tn_matmul(pat(3, S(4, 2, 3), 1, TN_F32, false), pat(2, S(2, 3), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (8x3 and 2x3)");
    assert_null(
        tn_matmul(pat(3, S(2, 2, 3), 1, TN_F32, false), pat(3, S(3, 3, 4), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "The size of tensor a (2) must match the size of tensor b (3) "
                                  "at non-singleton dimension 0");
    assert_null(tn_matmul(a, pat(2, S(3, 4), 2, TN_F64, false)));
    tt_assert_error(TN_ERR_DTYPE,
                    "expected m1 and m2 to have the same dtype, but got: float != double");
    assert_null(tn_matmul(a, pat(1, S(3), 2, TN_F64, false)));
    tt_assert_error(TN_ERR_DTYPE, "expected scalar type Float but found Double");
    assert_null(tn_matmul(pat(1, S(3), 2, TN_F32, false), pat(1, S(3), 2, TN_F64, false)));
    tt_assert_error(TN_ERR_DTYPE,
                    "dot : expected both vectors to have same dtype, but found Float and Double");
    assert_null(
        tn_matmul(pat(3, S(2, 2, 3), 1, TN_F32, false), pat(3, S(2, 3, 4), 2, TN_F64, false)));
    tt_assert_error(TN_ERR_DTYPE, "expected scalar type Float but found Double");
    tn_tensor *bl = tn_ones(2, S(2, 2), TN_BOOL);
    assert_null(tn_matmul(bl, bl));
    tt_assert_error(TN_ERR_DTYPE, "\"addmm_impl_cpu_\" not implemented for 'bool'");
    tn_clear_error();
    assert_null(tn_matmul(NULL, a));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    assert_int_equal(tn_version(a), 0);
    tn_scope_end();
}

/* ---- linear ------------------------------------------------------------------------ */

typedef struct lin_case {
    const char *fn;
    int ndx;
    int64_t sx[3];
    bool bias, tx;
    const double *y, *gx, *gw, *gb;
    int64_t ny, nx;
} lin_case;

#define LCASE(FN, NX, SX, BIAS, TX, P, GB)                                                         \
    {                                                                                              \
        FN, NX, SX, BIAS, TX, P##_y, P##_gx, P##_gw, GB, sizeof P##_y / sizeof(double),            \
            sizeof P##_gx / sizeof(double)                                                         \
    }

static const lin_case lin_cases[] = {
    LCASE("AddmmBackward0", 2, SH(2, 3), true, false, lin2, lin2_gb),
    LCASE("MmBackward0", 2, SH(2, 3), false, false, lin2nb, NULL),
    LCASE("ViewBackward0", 3, SH(5, 2, 3), true, false, lin3, lin3_gb),
    LCASE("AddBackward0", 3, SH(2, 5, 3), true, true, lin3nc, lin3nc_gb),
    LCASE("ViewBackward0", 1, SH(3), true, false, lin1, lin1_gb),
    LCASE("SqueezeBackward4", 1, SH(3), false, false, lin1nb, NULL),
    LCASE("UnsafeViewBackward0", 3, SH(5, 2, 3), false, false, lin3nb, NULL),
};

static void run_lin(const lin_case *c, tn_dtype dt, double tol) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = pat(c->ndx, c->sx, 1, dt, true), *w = pat(2, S(4, 3), 2, dt, true);
    tn_tensor *b = c->bias ? pat(1, S(4), 5, dt, true) : NULL;
    tn_tensor *X = c->tx ? tn_transpose(x, 0, 1) : x;
    tn_tensor *y = tn_linear(X, w, b);
    if (!y) fail_msg("linear (%s): %s", c->fn, tn_last_error());
    assert_fn(y, c->fn);
    tt_assert_close(y, c->y, c->ny, tol);
    assert_int_equal(tn_backward(y, pat(tn_ndim(y), tn_shape(y), 3, dt, false), false), TN_OK);
    tt_assert_grad(x, c->gx, c->nx, tol);
    tt_assert_grad(w, c->gw, 12, tol);
    if (b) tt_assert_grad(b, c->gb, 4, tol);
    tn_scope_end();
}

static void linear_cases(void **state) {
    for (size_t i = 0; i < sizeof lin_cases / sizeof lin_cases[0]; i++) {
        run_lin(&lin_cases[i], TN_F64, 1e-12);
        run_lin(&lin_cases[i], TN_F32, 1e-6);
    }
}

/* The bias may broadcast like addmm's: (1, out) and (1). */
static void linear_bias_shapes(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = pat(2, S(2, 3), 1, TN_F64, false), *w = pat(2, S(4, 3), 2, TN_F64, false);
    tn_tensor *b = pat(2, S(1, 4), 5, TN_F64, true);
    tn_tensor *y = tn_linear(x, w, b);
    tt_assert_close(y, lin2_y, 8, 1e-12);
    assert_int_equal(tn_backward(y, pat(2, S(2, 4), 3, TN_F64, false), false), TN_OK);
    tt_assert_grad(b, lin2_gb, 4, 1e-12);
    tn_tensor *b1 = tn_full(1, S(1), TN_F64, 0.5);
    tn_tensor *y1 = tn_linear(x, w, b1), *y0 = tn_linear(x, w, NULL);
    double v1[8], v0[8];
    assert_int_equal(tn_copy_to_f64(y1, v1, 8), TN_OK);
    assert_int_equal(tn_copy_to_f64(y0, v0, 8), TN_OK);
    for (int i = 0; i < 8; i++)
        assert_true(v1[i] == v0[i] + 0.5);
    tn_scope_end();
}

static void linear_double_backward(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = pat(2, S(2, 3), 1, TN_F64, true), *w = pat(2, S(4, 3), 2, TN_F64, true);
    tn_tensor *b = pat(1, S(4), 5, TN_F64, true);
    tn_tensor *y = tn_linear(x, w, b);
    tn_tensor *ref = tn_add(tn_matmul(x, tn_transpose(w, 0, 1)), b);
    tn_tensor *l1 = tn_sum(tn_mul(y, y)), *l2 = tn_sum(tn_mul(ref, ref));
    tn_tensor *in[3] = {x, w, b}, *g1[3] = {0}, *g2[3] = {0};
    assert_int_equal(tn_autograd_grad(1, &l1, NULL, 3, in, g1, true, true), TN_OK);
    assert_int_equal(tn_autograd_grad(1, &l2, NULL, 3, in, g2, true, true), TN_OK);
    tn_tensor *s1 = tn_add(tn_add(tn_sum(tn_mul(g1[0], g1[0])), tn_sum(tn_mul(g1[1], g1[1]))),
                           tn_sum(tn_mul(g1[2], g1[2])));
    tn_tensor *s2 = tn_add(tn_add(tn_sum(tn_mul(g2[0], g2[0])), tn_sum(tn_mul(g2[1], g2[1]))),
                           tn_sum(tn_mul(g2[2], g2[2])));
    tn_tensor *d1[3] = {0}, *d2[3] = {0};
    assert_int_equal(tn_autograd_grad(1, &s1, NULL, 3, in, d1, false, false), TN_OK);
    assert_int_equal(tn_autograd_grad(1, &s2, NULL, 3, in, d2, false, false), TN_OK);
    for (int i = 0; i < 3; i++) {
        double v[16];
        int64_t n = tn_numel(d2[i]);
        assert_int_equal(tn_copy_to_f64(d2[i], v, n), TN_OK);
        tt_assert_close(d1[i], v, n, 1e-12);
        tn_release(g1[i]);
        tn_release(g2[i]);
        tn_release(d1[i]);
        tn_release(d2[i]);
    }
    tn_scope_end();
}

static void linear_errors(void **state) {
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = pat(2, S(2, 5), 1, TN_F32, true), *w = pat(2, S(4, 3), 2, TN_F32, true);
    assert_null(tn_linear(x, w, NULL));
    tt_assert_error(TN_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (2x5 and 3x4)");
    tn_tensor *x3 = pat(2, S(2, 3), 1, TN_F32, false);
    assert_null(tn_linear(x3, w, pat(1, S(5), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "The expanded size of the tensor (4) must match the existing "
                                  "size (5) at non-singleton dimension 1.  Target sizes: [2, 4].  "
                                  "Tensor sizes: [5]");
    assert_null(tn_linear(x3, w, pat(2, S(3, 4), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "The expanded size of the tensor (2) must match the existing "
                                  "size (3) at non-singleton dimension 0.  Target sizes: [2, 4].  "
                                  "Tensor sizes: [3, 4]");
    assert_null(tn_linear(x3, w, pat(3, S(1, 1, 4), 2, TN_F32, false)));
    tt_assert_error(TN_ERR_SHAPE, "expand([float32 [1, 1, 4]], size=[2, 4]): the number of sizes "
                                  "provided (2) must be greater or equal to the number of "
                                  "dimensions in the tensor (3)");
    assert_null(tn_linear(pat(2, S(2, 3), 1, TN_F64, false), w, NULL));
    tt_assert_error(TN_ERR_DTYPE,
                    "mat1 and mat2 must have the same dtype, but got Double and Float");
    assert_null(tn_linear(x3, w, pat(1, S(4), 2, TN_F64, false)));
    tt_assert_error(TN_ERR_DTYPE,
                    "self and mat2 must have the same dtype, but got Double and Float");
    assert_null(tn_linear(tn_scalar(1, TN_F32), w, NULL));
    tt_assert_error(TN_ERR_SHAPE,
                    "both arguments to linear need to be at least 1D, but they are 0D and 2D");
    tn_clear_error();
    assert_null(tn_linear(x3, NULL, NULL));
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "NULL");
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(matmul_cases_f64),       TT_TEST(matmul_cases_f32),
        TT_TEST(matmul_one_side),        TT_TEST(matmul_saved_modified),
        TT_TEST(matmul_double_backward), TT_TEST(matmul_big_blocked),
        TT_TEST(matmul_few_rows),        TT_TEST(matmul_many_batches),
        TT_TEST(matmul_empty_and_int),   TT_TEST(matmul_errors),
        TT_TEST(linear_cases),           TT_TEST(linear_bias_shapes),
        TT_TEST(linear_double_backward), TT_TEST(linear_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
