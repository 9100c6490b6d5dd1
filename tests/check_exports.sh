#!/usr/bin/env bash
# The shared library exports exactly the public API: every tn_ function declared in
# include/tenet/*.h, and no engine internal (tn__*). The library is built with hidden
# visibility and the public headers bracket their declarations with TN_API_BEGIN/END, so a
# public function whose definition does not see its header would silently be hidden.
# tenet_mpi is checked the same way against its one header: check_exports.sh LIB INCLUDE_DIR dist.h
# With SYMBOLS (tests/abi/libtenet.symbols), the exported name@version list must equal it: an
# exported function removed or moved to another version node is an ABI break, a new one must be
# added there on purpose (--write-symbols SYMBOLS rewrites the file from the library).
# usage: check_exports.sh LIBTENET_SO INCLUDE_DIR [HEADER|-] [SYMBOLS|--write-symbols SYMBOLS]
set -euo pipefail
lib="$1"
inc="$2"
if [ $# -ge 3 ] && [ "$3" != - ]; then
    headers=("$inc/tenet/$3")
else # tenet itself: every header but tenet_mpi's
    mapfile -t headers < <(ls "$inc"/tenet/*.h | grep -v '/dist\.h$')
fi
# (function pointer typedefs, "typedef tn_status (*fn)(...)", declare no function)
declared="$(grep -hv '^typedef' "${headers[@]}" | grep -oE '\btn_[a-z0-9_]+[[:space:]]*\(' |
    sed 's/[[:space:]]*(//' | sort -u)"
# name@@VERSION with a version script; the version nodes themselves are absolute symbols
versioned="$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sort -u)"
exported="$(echo "$versioned" | sed 's/@.*//' | sort -u)"
missing="$(comm -23 <(echo "$declared") <(echo "$exported"))"
extra="$(comm -13 <(echo "$declared") <(echo "$exported"))"
status=0
if [ -n "$missing" ]; then
    echo "declared in include/tenet but not exported:" $missing
    status=1
fi
if [ -n "$extra" ]; then
    echo "exported but not public API:" $extra
    status=1
fi
if [ "${4:-}" = --write-symbols ]; then
    echo "$versioned" > "$5"
    echo "wrote $5"
elif [ -n "${4:-}" ]; then
    if ! diff <(sort -u "$4") <(echo "$versioned") > /dev/null; then
        echo "the exported symbols differ from $4 (< the committed list, > the library):"
        diff <(sort -u "$4") <(echo "$versioned") || true
        echo "removed or re-versioned symbols break the ABI (docs/design.md, \"Versions and ABI\");"
        echo "new ones: add them to engine/tenet.map's newest node and rewrite the list with"
        echo "  tests/check_exports.sh LIB include - --write-symbols $4"
        status=1
    fi
fi
[ "$status" -eq 0 ] && echo "exports: $(echo "$exported" | wc -l) public functions, no internals"
exit "$status"
