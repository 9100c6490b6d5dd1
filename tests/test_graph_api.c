/* Graph introspection (tn_grad_fn, next_functions), several roots
 * (tn_backward_multi) and allow_unused (tn_autograd_grad_ex). Expected
 * values from PyTorch 1.13 (/usr/bin/python3), scenario in each comment. */
#include <tenet/testing.h>

#include "util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define D(...) ((const double[]){__VA_ARGS__})

static tn_tensor *vec(double a, double b, double c, bool rg) {
    return tt_f64(1, S(3), D(a, b, c), rg);
}

/* x = [1,2,3] rg; w = [4,5,6]; y = x * w; z = y + x
 * z.grad_fn: AddBackward0, next ((MulBackward0, 0), (AccumulateGrad, 0))
 * y.grad_fn.next_functions: ((AccumulateGrad, 0), (None, 0)), [0][0].variable is x */
static void test_next_functions(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true), *w = vec(4, 5, 6, false);
    tn_tensor *y = tn_mul(x, w), *z = tn_add(y, x);
    tn_node *zf = tn_grad_fn(z), *yf = tn_grad_fn(y);
    assert_non_null(zf);
    assert_string_equal(tn_node_name(zf), "AddBackward0");
    assert_int_equal(tn_node_num_next(zf), 2);
    int nr = -1;
    tn_node *n0 = tn_node_next(zf, 0, &nr);
    assert_ptr_equal(n0, yf); /* the same node y holds */
    assert_int_equal(nr, 0);
    assert_string_equal(tn_node_next_name(zf, 0), "MulBackward0");
    assert_null(tn_node_next(zf, 1, &nr));
    assert_int_equal(tn_last_status(), TN_OK);
    assert_string_equal(tn_node_next_name(zf, 1), "AccumulateGrad");
    assert_true(tn_node_next_is_leaf(zf, 1, x));
    assert_false(tn_node_next_is_leaf(zf, 0, x));
    assert_true(tn_node_next_is_leaf(yf, 0, x));
    assert_false(tn_node_next_is_leaf(yf, 0, w));
    assert_null(tn_node_next_name(yf, 1)); /* w needs no gradient: None */
    assert_int_equal(tn_last_status(), TN_OK);
    /* out of range, NULL */
    assert_null(tn_node_next(zf, 2, NULL));
    tt_assert_error(TN_ERR_INDEX, "index 2 is out of range for AddBackward0, which has 2 next");
    assert_null(tn_node_next_name(zf, -1));
    tt_assert_error(TN_ERR_INDEX, "out of range");
    assert_int_equal(tn_node_num_next(NULL), -1);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "argument 'n' is NULL");
    /* leaves and tensors without history have no grad_fn, without error */
    tn_clear_error();
    assert_null(tn_grad_fn(x));
    assert_null(tn_grad_fn(w));
    assert_int_equal(tn_last_status(), TN_OK);
    /* a node outlives its tensors and graph */
    tn_node *keep = tn_node_retain(zf);
    tn_node_release(n0);
    tn_node_release(yf);
    tn_node_release(zf);
    tn_scope_end();
    assert_string_equal(tn_node_name(keep), "AddBackward0");
    assert_string_equal(tn_node_next_name(keep, 0), "MulBackward0");
    tn_node_release(keep);
}

/* x = [1,2,3] rg; a = (x*2).sum(); b = (x*x).sum(); backward([a, b])
 * -> x.grad [4, 6, 8]; then c = x*3, d = (x*x).sum(),
 * backward([c, d], [[1,0,2], None]) -> x.grad += [5, 4, 12] */
static void test_backward_multi(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true);
    tn_tensor *roots[2] = {tn_sum(tn_mul_scalar(x, 2)), tn_sum(tn_mul(x, x))};
    assert_int_equal(tn_backward_multi(2, roots, NULL, false, false), TN_OK);
    tt_assert_grad(x, D(4, 6, 8), 3, 0);
    assert_int_equal(tn_zero_grad(x), TN_OK);
    tn_tensor *r2[2] = {tn_mul_scalar(x, 3), tn_sum(tn_mul(x, x))};
    tn_tensor *g2[2] = {vec(1, 0, 2, false), NULL};
    assert_int_equal(tn_backward_multi(2, r2, g2, false, false), TN_OK);
    tt_assert_grad(x, D(5, 4, 12), 3, 0);
    /* the graphs were freed: a second pass through saved tensors fails */
    assert_int_equal(tn_backward_multi(2, r2, g2, false, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "Trying to backward through the graph a second time");
    tn_scope_end();
}

/* Errors, each leaving .grad untouched: a root that does not require grad
 * (PyTorch: "element 1 of tensors does not require grad and does not have a
 * grad_fn"), a non-scalar root without its gradient, a shape mismatch, NULLs. */
static void test_backward_multi_errors(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true), *u = vec(1, 1, 1, false);
    tn_tensor *ok = tn_sum(tn_mul(x, x));
    tn_tensor *r1[2] = {ok, tn_sum(u)};
    assert_int_equal(tn_backward_multi(2, r1, NULL, true, false), TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD,
                    "element 1 of tensors does not require grad and does not have a grad_fn");
    tn_tensor *r2[2] = {ok, tn_mul_scalar(x, 2)};
    assert_int_equal(tn_backward_multi(2, r2, NULL, true, false), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "grad can be implicitly created only for scalar outputs");
    tn_tensor *g3[2] = {NULL, tt_f64(1, S(2), D(1, 1), false)};
    assert_int_equal(tn_backward_multi(2, r2, g3, true, false), TN_ERR_SHAPE);
    tt_assert_error(TN_ERR_SHAPE, "Mismatch in shape: grad_output[1] has a shape of [2] and "
                                  "output[1] has a shape of [3].");
    tn_tensor *r4[2] = {ok, NULL};
    tn_clear_error();
    assert_int_equal(tn_backward_multi(2, r4, NULL, true, false), TN_ERR_INVALID_ARGUMENT);
    tt_assert_error(TN_ERR_INVALID_ARGUMENT, "roots[1] is NULL");
    tn_clear_error();
    assert_int_equal(tn_backward_multi(0, r4, NULL, true, false), TN_ERR_INVALID_ARGUMENT);
    tn_clear_error();
    assert_null(tn_grad(x));
    assert_int_equal(tn_last_status(), TN_OK);
    tn_scope_end();
}

/* The same tensor twice among the roots counts twice; create_graph gives a
 * differentiable gradient: a = (x*x).sum(); backward([a, a], create_graph)
 * -> x.grad = 4x, and d(sum(x.grad))/dx = 4. */
static void test_backward_multi_create_graph(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true), *a = tn_sum(tn_mul(x, x));
    tn_tensor *roots[2] = {a, a};
    assert_int_equal(tn_backward_multi(2, roots, NULL, false, true), TN_OK);
    tn_tensor *g = tn_grad(x);
    tt_assert_close(g, D(4, 8, 12), 3, 0);
    tn_tensor *out = tn_sum(g), *gg = NULL;
    assert_int_equal(tn_autograd_grad(1, &out, NULL, 1, &x, &gg, false, false), TN_OK);
    tt_assert_close(gg, D(4, 4, 4), 3, 0);
    assert_int_equal(tn_zero_grad(x), TN_OK); /* x.grad's graph leads back to x's cell */
    tn_scope_end();
}

/* x, y rg; out = (x*2).sum(); grad(out, [x, y]) -> "One of the
 * differentiated Tensors appears to not have been used in the graph. Set
 * allow_unused=True if this is the desired behavior."; allow_unused:
 * (2,2,2), None. Nothing is handed out on the error. */
static void test_allow_unused(void **state) {
    (void)state;
    assert_int_equal(tn_scope_begin(), TN_OK);
    tn_tensor *x = vec(1, 2, 3, true), *y = vec(1, 1, 1, true);
    tn_tensor *out = tn_sum(tn_mul_scalar(x, 2));
    tn_tensor *in[2] = {x, y}, *g[2] = {NULL, NULL};
    assert_int_equal(tn_autograd_grad_ex(1, &out, NULL, 2, in, g, true, false, false),
                     TN_ERR_AUTOGRAD);
    tt_assert_error(TN_ERR_AUTOGRAD, "One of the differentiated Tensors appears to not have been "
                                     "used in the graph. Set allow_unused=True if this is the "
                                     "desired behavior.");
    assert_null(g[0]);
    assert_null(g[1]);
    assert_int_equal(tn_autograd_grad_ex(1, &out, NULL, 2, in, g, false, false, true), TN_OK);
    tt_assert_close(g[0], D(2, 2, 2), 3, 0);
    assert_null(g[1]);
    tn_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(test_next_functions),
        TT_TEST(test_backward_multi),
        TT_TEST(test_backward_multi_errors),
        TT_TEST(test_backward_multi_create_graph),
        TT_TEST(test_allow_unused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
