/* Thread-local error state: status + message, PyTorch's wording; the
 * report of a broken internal invariant (TN_ASSERT, debug builds); the text
 * of an I/O error (files.h). */
#define _POSIX_C_SOURCE 200809L /* the XSI strerror_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#include <unistd.h>
#endif

#include "files.h"

#define TN_ERRMSG_MAX 1024

static _Thread_local tn_status tls_status = TN_OK;
static _Thread_local char tls_msg[TN_ERRMSG_MAX];
/* An error was set and no tensor was returned to the user since (tn__ret). */
_Thread_local bool tn__failed_last;

static void set_error(tn_status st, const char *fmt, va_list ap) {
    /* through a copy: an argument may be tn_last_error() itself (a caller that adds context
     * to the message it got), which vsnprintf must not write while reading */
    char buf[sizeof tls_msg];
    vsnprintf(buf, sizeof buf, fmt, ap);
    memcpy(tls_msg, buf, strlen(buf) + 1);
    tls_status = st;
    tn__failed_last = true;
}

tn_status tn__error(tn_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(st, fmt, ap);
    va_end(ap);
    return st;
}

tn_status tn_set_error(tn_status st, const char *fmt, ...) {
    if (st >= 0 || !fmt)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_set_error: the status must be negative and fmt not NULL");
    va_list ap;
    va_start(ap, fmt);
    set_error(st, fmt, ap);
    va_end(ap);
    return st;
}

tn_status tn__null_arg(bool handle, const char *fmt, ...) {
    if (handle && tn__failed_last && tls_status != TN_OK) return tls_status;
    va_list ap;
    va_start(ap, fmt);
    set_error(TN_ERR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return TN_ERR_INVALID_ARGUMENT;
}

void tn__warn(const char *fmt, ...) {
    char buf[TN_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tenet: warning: %s\n", buf);
}

tn_status tn_last_status(void) { return tls_status; }
const char *tn_last_error(void) { return tls_status == TN_OK ? "" : tls_msg; }

void tn_clear_error(void) {
    tn__failed_last = false;
    tls_status = TN_OK;
    tls_msg[0] = '\0';
}

const char *tn_status_string(tn_status s) {
    switch (s) {
    case TN_OK: return "TN_OK";
    case TN_ERR_INVALID_ARGUMENT: return "TN_ERR_INVALID_ARGUMENT";
    case TN_ERR_SHAPE: return "TN_ERR_SHAPE";
    case TN_ERR_DTYPE: return "TN_ERR_DTYPE";
    case TN_ERR_DEVICE: return "TN_ERR_DEVICE";
    case TN_ERR_OUT_OF_MEMORY: return "TN_ERR_OUT_OF_MEMORY";
    case TN_ERR_AUTOGRAD: return "TN_ERR_AUTOGRAD";
    case TN_ERR_INPLACE_MODIFIED: return "TN_ERR_INPLACE_MODIFIED";
    case TN_ERR_NAN: return "TN_ERR_NAN";
    case TN_ERR_INDEX: return "TN_ERR_INDEX";
    case TN_ERR_INTERNAL: return "TN_ERR_INTERNAL";
    case TN_ERR_IO: return "TN_ERR_IO";
    case TN_ERR_FORMAT: return "TN_ERR_FORMAT";
    case TN_ERR_DIST: return "TN_ERR_DIST";
    }
    return "TN_ERR_UNKNOWN";
}

/* A broken invariant is a bug in the library, not the caller's mistake: no
 * status to return, the state may already be corrupt. Reports and aborts
 * (debug builds only: release builds compile the checks out). */
_Noreturn void tn__assert_fail(const char *cond, const char *file, int line, const char *func) {
    fprintf(stderr, "tenet: internal error: %s:%d: %s: assertion `%s' failed\n", file, line, func,
            cond);
#if defined(__GLIBC__)
    void *pcs[64];
    int n = backtrace(pcs, 64);
    backtrace_symbols_fd(pcs, n, STDERR_FILENO); /* no malloc: the heap may be the bug */
#endif
    fflush(stderr);
    abort();
}

tn_status tn__io_error(const char *what, const char *path, int err) {
    char reason[128];
    if (strerror_r(err, reason, sizeof reason) != 0)
        snprintf(reason, sizeof reason, "error %d", err);
    return tn__error(TN_ERR_IO, "%s '%.300s': %s", what, path, reason);
}
