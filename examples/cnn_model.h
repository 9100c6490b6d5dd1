/* examples/cnn_model.h — the CNN of tenet-cnn (examples/cnn.c) and bench/'s
 * cnn_step, PyTorch's model of scripts/cnn_reference.py:
 *
 *   conv(1->32, 3x3, pad 1)-BN-ReLU-maxpool 2 -> conv(32->64, 3x3, pad 1)-BN-ReLU-maxpool 2
 *   -> linear(3136->128)-ReLU -> linear(128->10)
 *
 * The state_dict in one array, with PyTorch's names: the parameters first
 * (what SGD updates), then the batch norms' buffers. */
#ifndef TENET_EXAMPLES_CNN_MODEL_H
#define TENET_EXAMPLES_CNN_MODEL_H

#include <tenet.h>

// clang-format off
enum {
    C1_W, C1_B, B1_W, B1_B, C2_W, C2_B, B2_W, B2_B, F1_W, F1_B, F2_W, F2_B,
    N_PARAMS,
    B1_MEAN = N_PARAMS, B1_VAR, B1_COUNT, B2_MEAN, B2_VAR, B2_COUNT,
    N_STATE
};
// clang-format on
extern const char *const cnn_names[N_STATE];

typedef struct cnn {
    tn_tensor *t[N_STATE]; /* owned references */
} cnn;

/* PyTorch's default initialisation (the calling thread's generator:
 * tn_manual_seed). false + tn_last_error() on failure; cnn_free either way. */
bool cnn_init(cnn *m);
void cnn_free(cnn *m);
/* The state_dict from / to a safetensors file (strict: every name, shapes). */
bool cnn_load(cnn *m, const char *path);
bool cnn_save(const cnn *m, const char *path);
/* Every tensor moved to dev. */
bool cnn_to(cnn *m, tn_device dev);
/* logits (N, 10) of images x (N, 1, 28, 28); training: batch statistics,
 * running ones updated (scope-owned result). */
tn_tensor *cnn_forward(const cnn *m, tn_tensor *x, bool training);
/* One SGD step on (x, y): forward, cross entropy, backward, step, zero_grad;
 * the loss through *loss. Call inside a scope. */
bool cnn_step(const cnn *m, tn_sgd *opt, tn_tensor *x, tn_tensor *y, double *loss);

#endif
