/* The backend tables, indexed by device type (backend.h). Core reaches a
 * back end only through them; the back ends fill them from constructors. */
#include "internal.h"
#include "backend.h"

/* Written by constructors before main (one thread), read-only afterwards. */
const tn_backend *tn__backends[TN_DEVICE_TYPES];

void tn__backend_register(tn_device_type type, const tn_backend *be) {
    if ((int)type >= 0 && type < TN_DEVICE_TYPES) tn__backends[type] = be;
}
