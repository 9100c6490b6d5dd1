// tests/cxx_probe.cpp: a C++ program that uses tenet through its public headers and links the
// shared library: the declarations carry C linkage (extern "C") and parse as C++. Run by
// check_cxx_headers.sh; exits 0 when y = sum(x * x) has the value and gradient it must.
#include <tenet.h>

#include <cstdio>
#include <cstring>

int main() {
    if (std::strlen(tn_version_string()) == 0) return 1;
    const int64_t shape[1] = {3};
    tn_tensor *x = tn_full(1, shape, TN_F32, 2.0);
    if (!x || tn_requires_grad_(x, true) != TN_OK) return 1;
    tn_tensor *sq = tn_mul(x, x);
    tn_tensor *y = tn_sum(sq);
    double v = 0, g[3] = {0, 0, 0};
    bool ok = y && tn_item(y, &v) == TN_OK && v == 12.0 && tn_backward(y, NULL, false) == TN_OK;
    tn_tensor *gx = ok ? tn_grad(x) : NULL;
    ok = gx && tn_copy_to_f64(gx, g, 3) == TN_OK && g[0] == 4.0 && g[2] == 4.0;
    if (!ok) std::fprintf(stderr, "cxx_probe: %s\n", tn_last_error());
    tn_release(gx);
    tn_release(y);
    tn_release(sq);
    tn_release(x);
    return ok ? 0 : 1;
}
