/* examples/gpt_plant.h — defects planted in the test build of tenet-gpt
 * (tenet-gpt-planted, GPT_PLANTED), for the numerics comparer's tests: each
 * one changes one call site, chosen at run time by GPT_PLANT:
 *   gelu_erf:L   block L's GELU uses the erf form instead of the tanh one;
 *   sum_order    the final layer norm's output goes through a row sum whose
 *                order depends on the thread count (an order-dependent
 *                reduction: the bits change with the threads, not the values
 *                beyond rounding). */
#ifndef GPT_PLANT_H
#define GPT_PLANT_H

#include <stdbool.h>

#include <tenet.h>

/* Whether block `layer`'s GELU keeps the tanh approximation. */
bool gpt_plant_gelu_tanh(int layer);
/* x, or x through the planted reduction (a new reference either way, as an op's). */
tn_tensor *gpt_plant_reduce(tn_tensor *x);

#endif
