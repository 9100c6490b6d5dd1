/* tenet/version.h — the library's version: compile time (these macros) and
 * run time (tn_version_string, tn_library_version: the library actually
 * loaded, which may be newer than the header a program was built with).
 *
 * Versions are MAJOR.MINOR.PATCH. The shared library's SONAME is
 * libtenet.so.MAJOR; its symbols carry the version node TENET_MAJOR.MINOR of
 * the release that added them (a linker version script, engine/tenet.map),
 * so a program built against a newer minor release fails to load on an older
 * one with a clear "version TENET_0.2 not found" instead of a missing symbol
 * at the first call. What bumps what: docs/design.md, "Versions and ABI".
 * (tn_version, of tensor.h, is a tensor's version counter, torch's _version.) */
#ifndef TENET_VERSION_H
#define TENET_VERSION_H

#include "types.h"

#define TENET_VERSION_MAJOR 0
#define TENET_VERSION_MINOR 1
#define TENET_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if */
#define TENET_VERSION_NUMBER                                                                       \
    (TENET_VERSION_MAJOR * 10000 + TENET_VERSION_MINOR * 100 + TENET_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* "0.1.0": the loaded library's version. */
const char *tn_version_string(void);
/* The loaded library's TENET_VERSION_NUMBER. */
int tn_library_version(void);

TN_API_END
#ifdef __cplusplus
}
#endif

#endif
