/* tests/test_invariants.c — the internal-invariant checks of
 * engine/core/base.h: TN_ASSERT compiled out of release builds (its
 * condition never evaluated), TN_ALWAYS / TN_NEVER the condition's value
 * there, and in a debug build (the asan and tsan presets) a broken
 * invariant reported with file:line and the condition, then an abort. */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, dup2 */
#include "util.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/base.h"

static int evaluated;
static bool touch(bool v) {
    evaluated++;
    return v;
}

static void true_conditions_pass(void **state) {
    (void)state;
    evaluated = 0;
    TN_ASSERT(touch(true));
    assert_int_equal(evaluated, TN_DEBUG ? 1 : 0); /* release: not evaluated */
    evaluated = 0;
    assert_true(TN_ALWAYS(touch(true)));
    assert_false(TN_NEVER(touch(false)));
    assert_int_equal(evaluated, 2); /* both forms: evaluated once in every build */
}

/* Runs fn in a child with stderr into a pipe; returns its wait status and
 * what it wrote. */
static int run_child(void (*fn)(void), char *out, size_t cap) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void broken_assert(void) { TN_ASSERT(touch(false)); }
static void broken_never(void) {
    if (TN_NEVER(touch(true))) _exit(3); /* release: the handled path */
}

static void broken_conditions(void **state) {
    (void)state;
    char out[8192];
    int st = run_child(broken_assert, out, sizeof out);
    if (TN_DEBUG) {
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        assert_non_null(strstr(out, "tenet: internal error: "));
        assert_non_null(strstr(out, "test_invariants.c:"));
        assert_non_null(strstr(out, "broken_assert: assertion `touch(false)' failed"));
    } else {
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_string_equal(out, "");
    }
    st = run_child(broken_never, out, sizeof out);
    if (TN_DEBUG) {
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        assert_non_null(strstr(out, "assertion `!(touch(true))' failed"));
    } else {
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TT_TEST(true_conditions_pass),
        TT_TEST(broken_conditions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
