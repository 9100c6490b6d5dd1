/* Deep and wide graphs: backward over a chain of 10^6 nodes and over a
 * node with 10^5 inputs, and freeing them, with no recursion proportional
 * to the graph's size (a recursive walk would overflow the stack here,
 * under ASan's bigger frames first). */
#include <stdlib.h>

#include "util.h"

enum { DEPTH = 1000000, WIDTH = 100000 };

static const int64_t S1[] = {1};

/* y = x + 1 + 1 + ... (10^6 AddBackward0 nodes). */
static tn_tensor *chain(tn_tensor *x, int depth) {
    tn_tensor *y = tn_retain(x);
    for (int i = 0; i < depth && y; i++) {
        tn_tensor *next = tn_add_scalar(y, 1.0);
        tn_release(y);
        y = next;
    }
    return y;
}

static void chain_backward(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S1, (const double[]){0.5}, true);
    tn_tensor *y = chain(x, DEPTH);
    assert_non_null(y);
    tt_assert_close(y, (double[]){DEPTH + 0.5}, 1, 0);
    tn_tensor *s = tn_sum(y);
    tn_release(y);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tt_assert_grad(x, (double[]){1}, 1, 0);
    tn_release(s); /* frees the whole chain */
    tn_release(x);
}

/* Dropped without backward: the head's release frees 10^6 nodes. */
static void chain_freed_without_backward(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S1, (const double[]){0.5}, true);
    tn_tensor *y = chain(x, DEPTH);
    assert_non_null(y);
    assert_string_equal(tn_grad_fn_name(y), "AddBackward0");
    tn_release(y);
    tn_release(x);
}

/* A chain of ops that save their input and output (x * x, then sigmoid),
 * freed after a backward that kept the graph. */
static void saving_chain_retained(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S1, (const double[]){0.5}, true);
    tn_tensor *y = tn_retain(x);
    for (int i = 0; i < DEPTH / 10 && y; i++) {
        tn_tensor *sq = tn_mul(y, y), *next = tn_sigmoid(sq);
        tn_release(sq);
        tn_release(y);
        y = next;
    }
    assert_non_null(y);
    tn_tensor *s = tn_sum(y);
    assert_int_equal(tn_backward(s, NULL, true), TN_OK);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tn_release(y);
    tn_release(s);
    tn_release(x);
}

/* One node with 10^5 inputs: stack of x * c_i, c_i = i; x.grad = sum(i). */
static void wide_node(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S1, (const double[]){2}, true);
    tn_tensor **parts = calloc(WIDTH, sizeof *parts);
    assert_non_null(parts);
    for (int i = 0; i < WIDTH; i++) {
        parts[i] = tn_mul_scalar(x, (double)i);
        assert_non_null(parts[i]);
    }
    tn_tensor *st = tn_stack(WIDTH, parts, 0);
    for (int i = 0; i < WIDTH; i++) tn_release(parts[i]);
    free(parts);
    assert_non_null(st);
    tn_tensor *s = tn_sum(st);
    tn_release(st);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tt_assert_grad(x, (double[]){(double)WIDTH * (WIDTH - 1) / 2}, 1, 0);
    tn_release(s);
    tn_release(x);
}

/* 10^5 branches summed pairwise into one root (a tree of adds). */
static void wide_tree(void **state) {
    (void)state;
    tn_tensor *x = tt_f64(1, S1, (const double[]){2}, true);
    tn_tensor **v = calloc(WIDTH, sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < WIDTH; i++) v[i] = tn_mul_scalar(x, 1.0);
    for (int n = WIDTH; n > 1; n = (n + 1) / 2) {
        for (int i = 0; i < n / 2; i++) {
            tn_tensor *a = v[2 * i], *b = v[2 * i + 1];
            v[i] = tn_add(a, b);
            assert_non_null(v[i]);
            tn_release(a);
            tn_release(b);
        }
        if (n % 2) v[n / 2] = v[n - 1];
    }
    tn_tensor *s = tn_sum(v[0]);
    tn_release(v[0]);
    free(v);
    assert_int_equal(tn_backward(s, NULL, false), TN_OK);
    tt_assert_grad(x, (double[]){WIDTH}, 1, 0);
    tn_release(s);
    tn_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(chain_backward),        TT_TEST(chain_freed_without_backward),
        TT_TEST(saving_chain_retained), TT_TEST(wide_node),
        TT_TEST(wide_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
