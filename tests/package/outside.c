/* A program built outside tenet's tree against the installed packages (scripts/check-packages):
 * by pkg-config and by find_package(tenet). Exit 0 when the library it loads works. */
#include <stdio.h>
#include <string.h>

#include <tenet.h>

int main(void) {
    if (tn_library_version() != TENET_VERSION_NUMBER) {
        fprintf(stderr, "outside: library %s, header %d\n", tn_version_string(),
                TENET_VERSION_NUMBER);
        return 1;
    }
    tn_tensor *x = tn_arange(0, 4, 1, TN_F32);
    if (!x || tn_requires_grad_(x, true) != TN_OK) return 1;
    tn_tensor *y = tn_sum(tn_mul(x, x));
    double v = 0;
    if (!y || tn_backward(y, NULL, false) != TN_OK || tn_item(y, &v) != TN_OK || v != 14.0) {
        fprintf(stderr, "outside: %s\n", tn_last_error());
        return 1;
    }
    tn_tensor *h = tn_to(x, TN_BF16, TN_DEVICE_KEEP);
    printf("outside: tenet %s, sum(x*x) = %g, %s\n", tn_version_string(), v,
           h ? tn_dtype_name(tn_dtype_of(h)) : "?");
    return h ? 0 : 1;
}
