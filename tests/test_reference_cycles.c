/* Reference cycles: programs whose graph could lead back to a tensor that
 * owns it. Saved tensors hold data + version + the history to rebuild (not
 * the tensor), and the graph holds gradient cells weakly, so each test's
 * teardown (tt_teardown) finds every tensor freed. Values from PyTorch. */
#include "util.h"

static const int64_t S3[] = {3};

static tn_tensor *vec(double x, double y, double z, bool rg) {
    return tt_f64(1, S3, (const double[]){x, y, z}, rg);
}

/* y = sum(x*x*x) with create_graph: x.grad = 3x^2 carries a graph that
 * saves x, and x's cell holds x.grad. A second backward through x.grad adds
 * 6x. (torch: x.grad after both = [9, 24, 45].) */
static void create_graph_through_saved_input(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true);
    tn_tensor *y = tn_sum(tn_mul(tn_mul(x, x), x));
    assert_int_equal(tn_backward_ex(y, NULL, false, true), TN_OK);
    tn_tensor *g = tn_grad(x);
    assert_non_null(g);
    assert_string_equal(tn_grad_fn_name(g), "AddBackward0");
    tt_assert_close(g, (double[]){3, 12, 27}, 3, 1e-12);
    assert_int_equal(tn_backward(tn_sum(g), NULL, false), TN_OK);
    tt_assert_grad(x, (double[]){9, 24, 45}, 3, 1e-12);
    tn_scope_end();
}

/* The same, dropped without a second backward; and through tn_autograd_grad. */
static void create_graph_grad_dropped(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true);
    tn_tensor *y = tn_sum(tn_mul(tn_exp(x), x));
    assert_int_equal(tn_backward_ex(y, NULL, true, true), TN_OK);
    tn_tensor *g = NULL;
    tn_tensor *in[] = {x};
    assert_int_equal(tn_autograd_grad(1, &y, NULL, 1, in, &g, false, true), TN_OK);
    tn_tensor *gg = NULL;
    assert_int_equal(tn_autograd_grad(1, (tn_tensor *[]){tn_sum(g)}, NULL, 1, in, &gg, false,
                                      false),
                     TN_OK);
    /* d/dx (e^x (x + 1)) = e^x (x + 2) */
    tt_assert_close(gg, (double[]){8.154845485377136, 29.5562243957226, 100.42768461593835}, 3,
                    1e-12);
    tn_release(g);
    tn_release(gg);
    tn_scope_end();
}

/* y.add_(y.abs()) on a non-leaf: abs saved y, the in-place op makes y's
 * history lead to abs. Backward is refused (PyTorch's message names y's
 * CURRENT grad_fn) and nothing leaks. */
static void inplace_with_operand_that_saved_self(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec(1, -2, 3, true);
    tn_tensor *y0 = tn_mul_scalar(a, 2); /* dropped without backward (which frees) */
    assert_int_equal(tn_add_(y0, tn_abs(y0)), TN_OK);
    tn_tensor *y = tn_mul_scalar(a, 2);
    assert_int_equal(tn_add_(y, tn_abs(y)), TN_OK);
    assert_string_equal(tn_grad_fn_name(y), "AddBackward0");
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "[float64 [3]], which is output 0 of AddBackward0, is at version 1; "
                    "expected version 0 instead.");
    /* the same through a view of y */
    tn_tensor *b = tn_mul_scalar(a, 2);
    tn_tensor *v = tn_narrow(b, 0, 0, 2);
    assert_int_equal(tn_mul_(v, tn_sin(v)), TN_OK);
    assert_int_equal(tn_backward(tn_sum(b), NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED, "is at version 1; expected version 0 instead.");
    tn_scope_end();
}

/* y.mul_(y): the op saves its own target. */
static void inplace_on_itself(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *a = vec(1, 2, 3, true);
    tn_tensor *y = tn_mul_scalar(a, 2);
    assert_int_equal(tn_mul_(y, y), TN_OK);
    assert_int_equal(tn_backward(tn_sum(y), NULL, false), TN_ERR_INPLACE_MODIFIED);
    tt_assert_error(TN_ERR_INPLACE_MODIFIED,
                    "[float64 [3]], which is output 0 of MulBackward0, is at version 1; "
                    "expected version 0 instead.");
    tn_scope_end();
}

/* retain_grad on a non-leaf with create_graph: y.grad's graph leads to y's
 * grad_fn, which feeds y's retained cell. (torch: y.grad = 2y = [2, 8, 18].) */
static void retained_grad_with_create_graph(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true);
    tn_tensor *y = tn_mul(x, x);
    assert_int_equal(tn_retain_grad(y), TN_OK);
    assert_int_equal(tn_backward_ex(tn_sum(tn_mul(y, y)), NULL, false, true), TN_OK);
    tn_tensor *gy = tn_grad(y);
    tt_assert_close(gy, (double[]){2, 8, 18}, 3, 1e-12);
    assert_non_null(tn_grad_fn_name(gy));
    tt_assert_grad(x, (double[]){4, 32, 108}, 3, 1e-12);
    tn_scope_end();
}

/* x.grad = y, y.grad = x; x.grad = a view of x: stored as detached aliases
 * (same values and storage), so that no gradient keeps its owner alive. */
static void set_grad_leading_back(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true), *y = vec(4, 5, 6, true);
    assert_int_equal(tn_set_grad(x, y), TN_OK);
    assert_int_equal(tn_set_grad(y, x), TN_OK);
    tt_assert_grad(x, (double[]){4, 5, 6}, 3, 0);
    tt_assert_grad(y, (double[]){1, 2, 3}, 3, 0);
    tn_tensor *z = vec(7, 8, 9, false);
    tn_tensor *v = tn_view(z, 1, S3);
    assert_int_equal(tn_set_grad(z, v), TN_OK);
    assert_int_equal(tn_fill_(z, 1), TN_OK); /* the alias shares z's storage */
    tn_tensor *gz = tn_grad(z);
    tt_assert_close(gz, (double[]){1, 1, 1}, 3, 0);
    tn_scope_end();
}

/* A leaf freed before backward: its gradient reaches no one, and a
 * create_graph backward that rebuilds its history still runs. */
static void leaf_freed_before_backward(void **state) {
    (void)state;
    tn_tensor *x = vec(1, 2, 3, true);
    tn_tensor *y = tn_mul(x, x), *w = tn_mul(x, x);
    tn_release(x);
    tn_tensor *s = tn_sum(y);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tn_tensor *s2 = tn_sum(w);
    assert_int_equal(tn_backward_ex(s2, NULL, false, true), TN_OK);
    tn_release(s);
    tn_release(s2);
    tn_release(y);
    tn_release(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(create_graph_through_saved_input),
        TT_TEST(create_graph_grad_dropped),
        TT_TEST(inplace_with_operand_that_saved_self),
        TT_TEST(inplace_on_itself),
        TT_TEST(retained_grad_with_create_graph),
        TT_TEST(set_grad_leading_back),
        TT_TEST(leaf_freed_before_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
