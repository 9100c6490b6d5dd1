/* The backend tables, indexed by device type (backend.h), and the loader of
 * back ends built as plugins. Core reaches a back end only through the
 * tables; the CPU's and, in the static library, CUDA's fill them from
 * constructors, and libtenet.so loads CUDA's plugin (libtenet-cuda.so) on the
 * first use of a CUDA device, so that a process that never uses one loads no
 * CUDA library (docs/design.md, "Back ends as plugins").
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "internal.h"

/* Written by constructors before main (one thread), or for a plugin once, by
 * the loader (see g_present). */
const tn_backend *tn__backends[TN_DEVICE_TYPES];

/* Whether tn__backends[type] is set. Release after the slot is written; pairs
 * with the acquire in tn__backend_loaded, which then reads the slot. */
static _Atomic bool g_present[TN_DEVICE_TYPES];

void tn__backend_register(tn_device_type type, const tn_backend *be) {
    if ((int)type < 0 || type >= TN_DEVICE_TYPES) return;
    tn__backends[type] = be;
    atomic_store_explicit(&g_present[type], be != NULL, memory_order_release);
}

const tn_backend *tn__backend_loaded(tn_device_type type) {
    if ((int)type < 0 || type >= TN_DEVICE_TYPES) return NULL;
    /* acquire: pairs with the release in tn__backend_register */
    return atomic_load_explicit(&g_present[type], memory_order_acquire) ? tn__backends[type] : NULL;
}

/* ---- CUDA's plugin ----------------------------------------------------------------------- */

/* Why CUDA's table is not there, written by load_cuda (under g_cuda_once) and
 * read after pthread_once returned, which orders the two. */
static char g_cuda_why[1024]; /* error.c's bound */
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;

#ifdef TENET_HAVE_CUDA
static const tn_plugin_host g_host = {
    .abi = TN_PLUGIN_ABI,
    .version = TN_PLUGIN_VERSION,
    .error = tn__error,
    .tf32_allowed = tn__tf32_allowed,
};

/* Opens a plugin candidate; NULL with the loader's message in g_cuda_why,
 * which names the file (the loader's names the library it missed, which may
 * be one the plugin needs, e.g. libcudart). from: where the path came from. */
static void *open_plugin(const char *path, const char *from) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (!e) e = "dlopen failed";
        bool named = strncmp(e, path, strlen(path)) == 0;
        snprintf(g_cuda_why, sizeof g_cuda_why, "%.512s%s%s (%s)", named ? "" : path,
                 named ? "" : ": ", e, from);
    }
    return h;
}

/* libtenet-cuda.so beside the libtenet this code is in (dladdr names the file
 * that holds one of its objects), or in its tenet/ subdirectory (where the
 * installed packages keep it), when there is one: dir holds the path. */
static bool beside_libtenet(char *dir, size_t n) {
    Dl_info info;
    if (!dladdr(&g_cuda_once, &info) || !info.dli_fname) return false;
    const char *slash = strrchr(info.dli_fname, '/');
    int len = slash ? (int)(slash - info.dli_fname) : 1;
    const char *base = slash ? info.dli_fname : ".";
    static const char *const sub[2] = {"", "tenet/"};
    for (int i = 0; i < 2; i++) {
        int w = snprintf(dir, n, "%.*s/%s%s", len, base, sub[i], TN_CUDA_PLUGIN_FILE);
        if (w > 0 && (size_t)w < n && access(dir, F_OK) == 0) return true;
    }
    return false;
}

/* The plugin's handle, in the search order: TENET_CUDA_PLUGIN (that file
 * only), else the plugin beside libtenet (when that file exists, it is the
 * one: its failure is reported, no other is tried), else the file name
 * through the loader's path (LD_LIBRARY_PATH, the cache, RUNPATH). path:
 * the one tried. */
static void *find_plugin(char *path, size_t n) {
    const char *env = getenv("TENET_CUDA_PLUGIN");
    if (env && *env) {
        snprintf(path, n, "%s", env);
        return open_plugin(env, "TENET_CUDA_PLUGIN");
    }
    if (beside_libtenet(path, n)) return open_plugin(path, "beside libtenet");
    snprintf(path, n, "%s", TN_CUDA_PLUGIN_FILE);
    return open_plugin(path, "the loader's search path");
}

static void load_cuda_plugin(void) {
    char path[4096];
    void *h = find_plugin(path, sizeof path);
    if (!h) return;
    tn_plugin_init_fn init;
    /* dlsym's object pointer to a function pointer: POSIX defines it */
    *(void **)&init = dlsym(h, TN_CUDA_PLUGIN_INIT);
    const tn_backend *be = init ? init(&g_host) : NULL;
    if (!be) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "%.512s %s", path,
                 init ? "was built for another version of tenet"
                      : "has no " TN_CUDA_PLUGIN_INIT " (not tenet's CUDA plugin)");
        dlclose(h);
        return;
    }
    tn__backend_register(TN_CUDA, be); /* the handle stays open: the table lives in it */
}
#endif

static void load_cuda(void) {
    /* the static library: registered by a constructor before main (CUDA linked in) */
    if (tn__backends[TN_CUDA]) return;
#ifdef TENET_HAVE_CUDA
    load_cuda_plugin();
#else
    snprintf(g_cuda_why, sizeof g_cuda_why,
             "tenet was built without CUDA (configure with -DTENET_CUDA=ON)");
#endif
}

const tn_backend *tn__backend_load(tn_device_type type) {
    if (type == TN_CPU) return tn__backends[TN_CPU];
    if (type != TN_CUDA) {
        tn__error(TN_ERR_DEVICE, "unknown device type %d", (int)type);
        return NULL;
    }
    /* pthread_once: one thread loads, the others wait for it; its return
     * orders the loader's writes (the slot, g_cuda_why) before our reads */
    pthread_once(&g_cuda_once, load_cuda);
    const tn_backend *be = tn__backends[TN_CUDA];
    if (!be) tn__error(TN_ERR_DEVICE, "CUDA is not available: %s", g_cuda_why);
    return be;
}
