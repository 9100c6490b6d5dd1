/* The loaded library's version (include/tenet/version.h). */
#include "internal.h"

#define TN_STR_(x) #x
#define TN_STR(x) TN_STR_(x)

const char *tn_version_string(void) {
    return TN_STR(TENET_VERSION_MAJOR) "." TN_STR(TENET_VERSION_MINOR) "." TN_STR(
        TENET_VERSION_PATCH);
}

int tn_library_version(void) { return TENET_VERSION_NUMBER; }
