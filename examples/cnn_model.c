/* examples/cnn_model.c — the CNN of cnn_model.h. */
#include <string.h>

#include "cnn_model.h"
#include "init.h"

// clang-format off
const char *const cnn_names[N_STATE] = {
    "c1.weight", "c1.bias", "b1.weight", "b1.bias", "c2.weight", "c2.bias",
    "b2.weight", "b2.bias", "f1.weight", "f1.bias", "f2.weight", "f2.bias",
    "b1.running_mean", "b1.running_var", "b1.num_batches_tracked",
    "b2.running_mean", "b2.running_var", "b2.num_batches_tracked"};
// clang-format on

#define BN_MOMENTUM 0.1
#define BN_EPS 1e-5

void cnn_free(cnn *m) {
    for (int i = 0; i < N_STATE; i++)
        tn_release(m->t[i]);
}

/* A batch norm's weight (1), bias (0), running mean (0), var (1), count (0). */
static bool init_norm(cnn *m, int w, int stats, int64_t c) {
    const int64_t shape[1] = {c};
    m->t[w] = tn_ones(1, shape, TN_F32);
    m->t[w + 1] = tn_zeros(1, shape, TN_F32);
    m->t[stats] = tn_zeros(1, shape, TN_F32);
    m->t[stats + 1] = tn_ones(1, shape, TN_F32);
    m->t[stats + 2] = tn_zeros(0, NULL, TN_I64);
    return m->t[w] && m->t[w + 1] && tn_requires_grad_(m->t[w], true) == TN_OK &&
           tn_requires_grad_(m->t[w + 1], true) == TN_OK && m->t[stats] && m->t[stats + 1] &&
           m->t[stats + 2];
}

/* PyTorch's default initialisation: convolution and linear weights and biases
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), batch norms at identity. */
bool cnn_init(cnn *m) {
    static const int64_t shapes[][4] = {{32, 1, 3, 3}, {64, 32, 3, 3}, {128, 3136}, {10, 128}};
    static const int ranks[] = {4, 4, 2, 2}, first[] = {C1_W, C2_W, F1_W, F2_W};
    static const int64_t fan_in[] = {9, 288, 3136, 128};
    bool ok = true;
    for (int l = 0; l < 4 && ok; l++) {
        int w = first[l];
        m->t[w] = uniform_leaf(ranks[l], shapes[l], fan_in[l]);
        m->t[w + 1] = uniform_leaf(1, shapes[l], fan_in[l]); /* (out) */
        ok = m->t[w] && m->t[w + 1];
    }
    return ok && init_norm(m, B1_W, B1_MEAN, 32) && init_norm(m, B2_W, B2_MEAN, 64);
}

bool cnn_load(cnn *m, const char *path) {
    tn_state_dict *sd = tn_load(path);
    bool ok = sd && tn_load_state_dict(sd, N_STATE, cnn_names, m->t, true) == TN_OK;
    tn_state_dict_free(sd);
    return ok;
}

bool cnn_save(const cnn *m, const char *path) {
    return tn_save_tensors(path, N_STATE, cnn_names, m->t) == TN_OK;
}

/* Every tensor as a new one on dev (parameters leaves that require grad). */
bool cnn_to(cnn *m, tn_device dev) {
    cnn moved = {{0}};
    bool ok = true;
    for (int i = 0; ok && i < N_STATE; i++)
        ok = (moved.t[i] = tn_new_tensor(m->t[i], TN_DTYPE_SAME, dev, i < N_PARAMS)) != NULL;
    cnn_free(ok ? m : &moved);
    if (ok) *m = moved;
    return ok;
}

/* conv 3x3 (pad 1) - batch norm - ReLU - max pool 2: x (N, C, H, W) -> (N, OC, H/2, W/2).
 * Training normalises with the batch's statistics and updates the running ones. */
static tn_tensor *conv_block(const cnn *m, tn_tensor *x, int conv, int bn, int stats,
                             bool training) {
    const int64_t pad[2] = {1, 1}, two[2] = {2, 2};
    tn_tensor *h = tn_conv2d(x, m->t[conv], m->t[conv + 1], NULL, pad, NULL, 1);
    h = tn_batch_norm(h, m->t[stats], m->t[stats + 1], m->t[bn], m->t[bn + 1], training,
                      BN_MOMENTUM, BN_EPS);
    if (h && training && tn_add_scalar_(m->t[stats + 2], 1) != TN_OK) return NULL;
    return tn_max_pool2d(tn_relu(h), two, NULL, NULL, NULL, false);
}

/* logits (N, 10) of images x (N, 1, 28, 28) */
tn_tensor *cnn_forward(const cnn *m, tn_tensor *x, bool training) {
    tn_tensor *h = conv_block(m, x, C1_W, B1_W, B1_MEAN, training);       /* (N, 32, 14, 14) */
    h = conv_block(m, h, C2_W, B2_W, B2_MEAN, training);                  /* (N, 64, 7, 7) */
    h = tn_relu(tn_linear(tn_flatten(h, 1, -1), m->t[F1_W], m->t[F1_B])); /* (N, 128) */
    return tn_linear(h, m->t[F2_W], m->t[F2_B]);                          /* (N, 10) */
}

/* One optimiser step on (x, y); the batch's loss through *loss. */
bool cnn_step(const cnn *m, tn_sgd *opt, tn_tensor *x, tn_tensor *y, double *loss) {
    tn_tensor *l = tn_cross_entropy(cnn_forward(m, x, true), y);
    return l && tn_backward(l, NULL, false) == TN_OK && tn_sgd_step(opt) == TN_OK &&
           tn_sgd_zero_grad(opt) == TN_OK && tn_item(l, loss) == TN_OK;
}
