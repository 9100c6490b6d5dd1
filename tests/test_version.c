/* tests/test_version.c — the loaded library's version is the header's. */
#include <stdio.h>
#include <string.h>

#include "util.h"

static void test_version_matches_header(void **state) {
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TENET_VERSION_MAJOR, TENET_VERSION_MINOR,
             TENET_VERSION_PATCH);
    assert_string_equal(tn_version_string(), want);
    assert_int_equal(tn_library_version(), TENET_VERSION_NUMBER);
    assert_int_equal(TENET_VERSION_NUMBER,
                     TENET_VERSION_MAJOR * 10000 + TENET_VERSION_MINOR * 100 + TENET_VERSION_PATCH);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_version_matches_header)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
