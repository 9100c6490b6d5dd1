// tests/cxx_probe.cpp: a C++ program that uses tenet through its public headers and links the
// shared library: the declarations carry C linkage (extern "C") and parse as C++. Run by
// check_cxx_headers.sh; exits 0 when y = sum(x * x) has the value and gradient it must, and
// when the functions that do not change their tensor take a const tn_tensor * (a gradient hook
// is handed one): C++ refuses a const pointer where a non-const one is declared, so this file
// does not compile when one of them loses its const.
#include <tenet.h>

#include <cstdio>
#include <cstring>

namespace {

// The handles one check made, released together.
struct held {
    tn_tensor *t[32];
    int n = 0;
    tn_tensor *add(tn_tensor *x) {
        if (x && n < 32) t[n++] = x;
        return x;
    }
    ~held() {
        for (int i = 0; i < n; i++)
            tn_release(t[i]);
    }
};

bool shape_is(const tn_tensor *t, int ndim, const int64_t *shape) {
    if (!t || tn_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (tn_shape(t)[d] != shape[d]) return false;
    return true;
}

const int64_t s6[1] = {6}, s3[1] = {3}, s32[2] = {3, 2}, s23[2] = {2, 3}, s22[2] = {2, 2};
const int64_t s21[2] = {2, 1}, s123[3] = {1, 2, 3}, s223[3] = {2, 2, 3};

// The view, alias and copy functions on a const (2, 3) tensor.
bool views_of_const(const tn_tensor *c) {
    held h;
    const int perm[2] = {1, 0};
    bool ok = shape_is(h.add(tn_view(c, 1, s6)), 1, s6) &&
              shape_is(h.add(tn_reshape(c, 2, s32)), 2, s32) &&
              shape_is(h.add(tn_transpose(c, 0, 1)), 2, s32) &&
              shape_is(h.add(tn_permute(c, 2, perm)), 2, s32) &&
              shape_is(h.add(tn_narrow(c, 1, 0, 2)), 2, s22) &&
              shape_is(h.add(tn_select(c, 0, 1)), 1, s3) &&
              shape_is(h.add(tn_expand(c, 3, s223)), 3, s223) &&
              shape_is(h.add(tn_unsqueeze(c, 0)), 3, s123);
    const tn_tensor *u = ok ? h.t[h.n - 1] : NULL; // (1, 2, 3)
    return ok && shape_is(h.add(tn_squeeze(u)), 2, s23) &&
           shape_is(h.add(tn_squeeze_dim(u, 0)), 2, s23) &&
           shape_is(h.add(tn_flatten(c, 0, -1)), 1, s6) &&
           shape_is(h.add(tn_contiguous(c)), 2, s23) && shape_is(h.add(tn_detach(c)), 2, s23) &&
           shape_is(h.add(tn_data(c)), 2, s23) && shape_is(h.add(tn_clone(c)), 2, s23) &&
           shape_is(h.add(tn_to(c, TN_F64, TN_DEVICE_KEEP)), 2, s23);
}

// The split family on a const (2, 3) tensor.
bool pieces_of_const(const tn_tensor *c) {
    held h;
    tn_tensor *p[3] = {NULL, NULL, NULL};
    const int64_t sizes[2] = {1, 2};
    int n = 0;
    bool ok = tn_split(c, 2, 1, p, 3, &n) == TN_OK && n == 2 && h.add(p[0]) && h.add(p[1]) &&
              shape_is(p[1], 2, s21);
    ok = ok && tn_split_with_sizes(c, 2, sizes, 1, p) == TN_OK && h.add(p[0]) && h.add(p[1]) &&
         shape_is(p[1], 2, s22);
    ok = ok && tn_chunk(c, 3, 1, p, &n) == TN_OK && n == 3 && h.add(p[0]) && h.add(p[1]) &&
         h.add(p[2]) && shape_is(p[2], 2, s21);
    return ok && tn_unbind(c, 0, p, 3, &n) == TN_OK && n == 2 && h.add(p[0]) && h.add(p[1]) &&
           shape_is(p[0], 1, s3);
}

// A gradient hook reads the const gradient it is handed through those functions: ctx gets
// grad's last element. No scope is open in it: it releases what it makes.
tn_status read_grad(const tn_tensor *grad, tn_tensor **replace, void *ctx) {
    *replace = NULL;
    tn_tensor *flat = tn_flatten(grad, 0, -1);
    tn_tensor *last = flat ? tn_select(flat, 0, -1) : NULL;
    tn_status st = last ? tn_item(last, static_cast<double *>(ctx)) : tn_last_status();
    tn_release(last);
    tn_release(flat);
    return st;
}

} // namespace

int main() {
    if (std::strlen(tn_version_string()) == 0) return 1;
    const int64_t shape[1] = {3};
    tn_tensor *x = tn_full(1, shape, TN_F32, 2.0);
    tn_tensor *m = tn_arange(0, 6, 1, TN_F32);
    tn_tensor *mv = m ? tn_view(m, 2, s23) : NULL;
    const tn_tensor *c = mv;
    double hooked = 0;
    tn_hook *hook =
        x && tn_requires_grad_(x, true) == TN_OK ? tn_register_hook(x, read_grad, &hooked) : NULL;
    bool ok = hook && c && views_of_const(c) && pieces_of_const(c);
    tn_tensor *sq = ok ? tn_mul(x, x) : NULL;
    tn_tensor *y = sq ? tn_sum(sq) : NULL;
    double v = 0, g[3] = {0, 0, 0};
    ok = y && tn_item(y, &v) == TN_OK && v == 12.0 && tn_backward(y, NULL, false) == TN_OK;
    const tn_tensor *cx = x;
    tn_tensor *gx = ok ? tn_grad(cx) : NULL;
    ok = gx && tn_copy_to_f64(gx, g, 3) == TN_OK && g[0] == 4.0 && g[2] == 4.0 && hooked == 4.0;
    if (!ok) std::fprintf(stderr, "cxx_probe: %s\n", tn_last_error());
    if (hook) tn_hook_release(hook);
    tn_release(gx);
    tn_release(y);
    tn_release(sq);
    tn_release(mv);
    tn_release(m);
    tn_release(x);
    return ok ? 0 : 1;
}
