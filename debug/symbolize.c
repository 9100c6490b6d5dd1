/* Program counter -> function, file:line, at report time only.
 *
 * libdw (elfutils) through one Dwfl per process, built on first use from
 * /proc/self/maps. Function names come from the DWARF scope containing the
 * address (the innermost inlined function, so that the name agrees with the
 * file:line), else from the ELF symbol table; without a module or symbol,
 * dladdr gives the exported name and the shared object. A stripped binary
 * gives function NULL: never a crash.
 *
 * Locking: a Dwfl is not thread-safe, so every lookup holds `dwfl_lock`.
 * Only report code takes it (a report read or printed, an error being
 * built); backtrace capture on hot paths never symbolises and never locks.
 * dwfl_standard_find_debuginfo asks debuginfod when DEBUGINFOD_URLS is set:
 * the first report may then wait on the network (unset it to avoid that).
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "debug_internal.h"

static _Atomic int sym_mode = TN_SYM_FULL; /* relaxed: a test switch */

void tn__symbolize_set_mode(tn_sym_mode m) {
    atomic_store_explicit(&sym_mode, (int)m, memory_order_relaxed);
}

/* ---- the process's Dwfl ------------------------------------------------------------ */

static pthread_once_t dwfl_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t dwfl_lock = PTHREAD_MUTEX_INITIALIZER;
static Dwfl *g_dwfl;                   /* NULL: libdw unusable, dladdr only */
static struct timespec g_last_refresh; /* under dwfl_lock */
static char *g_debuginfo_path;         /* NULL: the default search path */
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &g_debuginfo_path,
};

static bool report_modules(Dwfl *d, bool add) {
    if (add)
        dwfl_report_begin_add(d);
    else
        dwfl_report_begin(d);
    int rc = dwfl_linux_proc_report(d, getpid());
    return dwfl_report_end(d, NULL, NULL) == 0 && rc == 0;
}

static void dwfl_init(void) {
    Dwfl *d = dwfl_begin(&callbacks);
    if (!d) return;
    if (!report_modules(d, false)) {
        dwfl_end(d);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &g_last_refresh);
    g_dwfl = d;
}

/* A pc in no known module may be in a library dlopen()ed after the Dwfl was
 * built: re-read the maps, at most once a second (pcs that are in no module
 * at all, JIT code say, would otherwise re-read them for every frame). */
static Dwfl_Module *module_of(Dwarf_Addr addr) {
    Dwfl_Module *m = dwfl_addrmodule(g_dwfl, addr);
    if (m) return m;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec == g_last_refresh.tv_sec) return NULL;
    g_last_refresh = now;
    if (!report_modules(g_dwfl, true)) return NULL;
    return dwfl_addrmodule(g_dwfl, addr);
}

/* Name of the innermost function (inlined or not) whose code holds addr. */
static const char *scope_name(Dwfl_Module *mod, Dwarf_Addr addr) {
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    if (!cu) return NULL;
    Dwarf_Die *scopes = NULL;
    int n = dwarf_getscopes(cu, addr - bias, &scopes);
    const char *name = NULL;
    for (int i = 0; i < n && !name; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
            name = dwarf_diename(&scopes[i]); /* follows abstract_origin */
    }
    free(scopes); /* libdw's array, not ours */
    return name; /* points into the module's DWARF data, alive with the Dwfl */
}

/* Copies s into the buffer; NULL when s is NULL or nothing fits. */
static const char *put(char **p, size_t *left, const char *s) {
    if (!s || *left < 2) return NULL;
    size_t len = strlen(s);
    if (len >= *left) len = *left - 1;
    char *d = *p;
    memcpy(d, s, len);
    d[len] = '\0';
    *p += len + 1;
    *left -= len + 1;
    return d;
}

static bool lookup_dwfl(void *pc, tn_frame *f, char **p, size_t *left) {
    pthread_once(&dwfl_once, dwfl_init);
    if (!g_dwfl) return false;
    pthread_mutex_lock(&dwfl_lock);
    Dwarf_Addr addr = (Dwarf_Addr)(uintptr_t)pc;
    Dwfl_Module *mod = module_of(addr);
    if (mod) {
        const char *fn = scope_name(mod, addr);
        if (!fn) fn = dwfl_module_addrname(mod, addr);
        f->function = put(p, left, fn);
        Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
        int lineno = 0;
        const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
        if (file && lineno > 0) {
            f->file = put(p, left, file);
            f->line = f->file ? lineno : 0;
        } else { /* no line table: name the object, as dladdr would */
            const char *mainfile = NULL;
            const char *name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
            f->file = put(p, left, mainfile ? mainfile : name);
        }
    }
    pthread_mutex_unlock(&dwfl_lock);
    return f->function != NULL;
}

static void lookup_dladdr(void *pc, tn_frame *f, char **p, size_t *left) {
    Dl_info info;
    if (!dladdr(pc, &info)) return;
    f->function = put(p, left, info.dli_sname);
    if (info.dli_fname && *info.dli_fname) f->file = put(p, left, info.dli_fname);
}

bool tn__symbolize(void *pc, tn_frame *f, char *buf, size_t n) {
    f->pc = pc;
    f->function = f->file = NULL;
    f->line = 0;
    int mode = atomic_load_explicit(&sym_mode, memory_order_relaxed);
    if (!pc || !buf || mode == TN_SYM_NONE) return false;
    char *p = buf;
    size_t left = n;
    if (mode == TN_SYM_FULL && lookup_dwfl(pc, f, &p, &left)) return true;
    if (!f->function) {
        /* keep what libdw knew of the object; dladdr only adds names */
        tn_frame d = {pc, NULL, NULL, 0};
        lookup_dladdr(pc, &d, &p, &left);
        f->function = d.function;
        if (!f->file) f->file = d.file;
    }
    return f->function != NULL;
}

bool tn__symbol_name(void *pc, char *buf, size_t n) {
    int mode = atomic_load_explicit(&sym_mode, memory_order_relaxed);
    if (!pc || !buf || n < 2 || mode == TN_SYM_NONE) return false;
    const char *name = NULL;
    if (mode == TN_SYM_FULL) {
        pthread_once(&dwfl_once, dwfl_init);
        if (g_dwfl) {
            pthread_mutex_lock(&dwfl_lock);
            Dwfl_Module *mod = module_of((Dwarf_Addr)(uintptr_t)pc);
            name = mod ? dwfl_module_addrname(mod, (Dwarf_Addr)(uintptr_t)pc) : NULL;
            if (name) snprintf(buf, n, "%s", name); /* copied under the lock */
            pthread_mutex_unlock(&dwfl_lock);
        }
    }
    Dl_info info;
    if (!name && dladdr(pc, &info) && info.dli_sname) {
        name = info.dli_sname;
        snprintf(buf, n, "%s", name);
    }
    return name != NULL;
}

/* ---- what counts as tenet's own code --------------------------------------------- */

/* The source tree this file was compiled in, from __FILE__: "/src/tenet/"
 * for "/src/tenet/debug/symbolize.c"; length 0 when __FILE__ is relative. */
static size_t source_root(const char **root) {
    static const char self[] = __FILE__;
    static const char tail[] = "debug/symbolize.c";
    size_t n = sizeof self - 1, t = sizeof tail - 1;
    *root = self;
    if (self[0] != '/' || n < t || strcmp(self + n - t, tail) != 0) return 0;
    return n - t;
}

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* A source file's path inside the tree: past the tree's absolute root, or,
 * for a build that named its sources relatively (a compiler cache's
 * base_dir, -ffile-prefix-map as Debian's package builds use: "../../engine/
 * ops/unary.c", "./tests/x.c" — each target's own directory sets the number
 * of "../"), past the leading "./" and "../". NULL for a file elsewhere. */
static const char *tree_path(const char *file) {
    const char *root;
    size_t n = source_root(&root);
    if (n && strncmp(file, root, n) == 0) return file + n;
    if (file[0] == '/') return NULL;
    for (;;) {
        if (has_prefix(file, "./")) file += 2;
        else if (has_prefix(file, "../")) file += 3;
        else return file;
    }
}

static bool in_source_dir(const char *file, const char *dir) {
    const char *p = tree_path(file);
    return p && has_prefix(p, dir);
}

bool tn__frame_is_engine(const tn_frame *f) {
    if (!f) return false;
    const char *fn = f->function;
    if (fn && (has_prefix(fn, "tn_") || has_prefix(fn, "GOMP_") || has_prefix(fn, "gomp_")))
        return true;
    if (!f->file) return false;
    if (f->line > 0) /* static helpers of the engine have no tn_ prefix */
        return in_source_dir(f->file, "engine/") || in_source_dir(f->file, "debug/") ||
               in_source_dir(f->file, "include/");
    /* no line table: f->file names the shared object */
    const char *base = strrchr(f->file, '/');
    base = base ? base + 1 : f->file;
    return has_prefix(base, "libtenet.so") || has_prefix(base, "libgomp.so");
}

const char *tn__short_path(const char *file) {
    if (!file) return NULL;
    const char *p = tree_path(file);
    if (p) return p;
    char cwd[4096];
    if (file[0] == '/' && getcwd(cwd, sizeof cwd)) {
        size_t c = strlen(cwd);
        if (c > 1 && strncmp(file, cwd, c) == 0 && file[c] == '/') return file + c + 1;
    }
    return file;
}
