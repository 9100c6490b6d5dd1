#!/usr/bin/env bash
# The shared library exports exactly the public API: every tn_ function declared in
# include/tenet/*.h, and no engine internal (tn__*). The library is built with hidden
# visibility and the public headers bracket their declarations with TN_API_BEGIN/END, so a
# public function whose definition does not see its header would silently be hidden.
# tenet_mpi is checked the same way against its one header: check_exports.sh LIB INCLUDE_DIR dist.h
# usage: check_exports.sh LIBTENET_SO INCLUDE_DIR [HEADER]
set -euo pipefail
lib="$1"
inc="$2"
if [ $# -ge 3 ]; then
    headers=("$inc/tenet/$3")
else # tenet itself: every header but tenet_mpi's
    mapfile -t headers < <(ls "$inc"/tenet/*.h | grep -v '/dist\.h$')
fi
# (function pointer typedefs, "typedef tn_status (*fn)(...)", declare no function)
declared="$(grep -hv '^typedef' "${headers[@]}" | grep -oE '\btn_[a-z0-9_]+[[:space:]]*\(' |
    sed 's/[[:space:]]*(//' | sort -u)"
exported="$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)"
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
[ "$status" -eq 0 ] && echo "exports: $(echo "$exported" | wc -l) public functions, no internals"
exit "$status"
