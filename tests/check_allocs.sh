#!/usr/bin/env bash
# Every allocation the library makes goes through engine/core/alloc.c (tn__alloc, tn__malloc,
# ... in engine/core/base.h), so that the allocation-failure hook of include/tenet/testing.h
# reaches it and the OOM walk (test_oom_walk) fails it. This fails when engine/ or debug/ calls
# the C library's or jemalloc's allocator directly anywhere else. engine/cuda/ (device memory,
# its own caching allocator) is outside the CPU walk. A line that frees memory another library
# allocated says so with the word "libdw's" (or the library's name) and "not ours".
# usage: check_allocs.sh REPO_ROOT
set -euo pipefail
cd "$1"
calls='(^|[^_[:alnum:].>])(malloc|calloc|realloc|reallocarray|free|aligned_alloc|posix_memalign|memalign|valloc|strdup|strndup|mallocx|rallocx|xallocx|dallocx|sdallocx)[[:space:]]*\('
hits="$(grep -rnE "$calls" engine debug --include='*.c' --include='*.h' |
    grep -v '^engine/cuda/' | grep -v '^engine/core/alloc\.c:' | grep -v 'not ours' || true)"
if [ -n "$hits" ]; then
    echo "direct allocator calls outside engine/core/alloc.c (use tn__malloc & co., base.h):"
    echo "$hits" | sed 's/^/  /'
    exit 1
fi
echo "allocs: every allocation of engine/ and debug/ goes through engine/core/alloc.c"
