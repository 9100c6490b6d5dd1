#!/usr/bin/env bash
# The public headers are C++ too: each one, on its own, parses as C++11 with -Wall -Wextra
# -pedantic -Werror (so it includes what it uses and uses nothing C++ refuses), and a C++
# program (tests/cxx_probe.cpp) that includes <tenet.h> links the shared library and runs
# (the declarations have C linkage); it passes a const tn_tensor * to every function that does
# not change its tensor, which C++ refuses unless the parameter is const.
# usage: check_cxx_headers.sh CXX INCLUDE_DIR LIBTENET_SO
set -euo pipefail
cxx="$1"
inc="$2"
lib="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for h in "$inc"/tenet.h "$inc"/tenet/*.h; do
    name=${h#"$inc"/}
    printf '#include <%s>\n' "$name" > "$work/one.cpp"
    if ! "$cxx" -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$inc" "$work/one.cpp"; then
        echo "check_cxx_headers: $name does not compile as C++" >&2
        status=1
    fi
done
"$cxx" -std=c++11 -Wall -Wextra -Werror -I"$inc" "$here/cxx_probe.cpp" -o "$work/probe" \
    "$lib" -Wl,-rpath,"$(dirname "$lib")"
"$work/probe" || { echo "check_cxx_headers: the C++ probe failed" >&2; status=1; }
[ $status = 0 ] && echo "check_cxx_headers: $(ls "$inc"/tenet/*.h | wc -l) headers and tenet.h compile as C++; the probe ran"
exit $status
