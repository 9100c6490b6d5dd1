/* examples/tour.c — the README's tour of the API, as a program you can build.
 * The comments show what PyTorch prints for the same steps. */
#include <stdio.h>

#include <tenet.h>

int main(void) {
    /* Every tensor returned from here on is released by tn_scope_end(). A scope
     * that cannot be opened (out of memory) is not ended. */
    if (tn_scope_begin() != TN_OK) {
        fprintf(stderr, "tour: %s\n", tn_last_error());
        return 1;
    }

    /* Tensors copy C arrays. w is a leaf that requires grad. */
    float xv[] = {1, 2, 3, 4, 5, 6}, wv[] = {0.1f, -0.2f, 0.3f};
    tn_tensor *x = tn_tensor_from(xv, TN_F32, 2, (int64_t[]){2, 3}, false);
    tn_tensor *w = tn_tensor_from(wv, TN_F32, 1, (int64_t[]){3}, true);

    /* Ops broadcast like PyTorch and nest freely: a NULL (error) propagates. */
    tn_tensor *y = tn_mean(tn_tanh(tn_mul(x, w)));
    if (!y || tn_backward(y, NULL, false) != TN_OK) {
        fprintf(stderr, "tour: %s\n", tn_last_error());
        tn_scope_end();
        return 1;
    }
    tn_print(y, stdout);          /* tensor(0.1669, grad_fn=<MeanBackward0>) */
    tn_print(tn_grad(w), stdout); /* tensor([0.7354, 0.6352, 0.3470]) */

    /* Errors are values: a status and PyTorch's message; nothing aborts. */
    if (!tn_add(x, tn_ones(1, (int64_t[]){2}, TN_F32)))
        printf("%s: %s\n", tn_status_string(tn_last_status()), tn_last_error());
    /* TN_ERR_SHAPE: The size of tensor a (3) must match the size of tensor b (2) at
     * non-singleton dimension 1 */
    if (tn_mul_scalar_(w, 2) != TN_OK) printf("%s\n", tn_last_error());
    /* a leaf Variable that requires grad is being used in an in-place operation. */

    /* Under no-grad, in-place updates of leaves are allowed: an SGD step by hand. */
    bool prev = tn_set_grad_enabled(false);
    tn_status st = tn_sub_(w, tn_mul_scalar(tn_grad(w), 0.1));
    tn_set_grad_enabled(prev);
    if (st != TN_OK) fprintf(stderr, "tour: %s\n", tn_last_error());
    tn_print(w, stdout); /* tensor([ 0.0265, -0.2635,  0.2653], requires_grad=True) */
    printf("w._version = %lld\n", (long long)tn_version(w)); /* 1: one in-place write */

    /* tn_keep moves a tensor out of the scope: it is then yours to release. */
    tn_tensor *kept = tn_keep(tn_detach(w));
    tn_scope_end();
    tn_print(kept, stdout); /* tensor([ 0.0265, -0.2635,  0.2653]) */
    tn_release(kept);
    return st == TN_OK ? 0 : 1;
}
