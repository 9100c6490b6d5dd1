#!/usr/bin/env bash
# tenet.pc carries no private dependency and no build machine's path: `pkg-config --cflags tenet`
# is -I<includedir> alone (the public headers need no dependency's include dir), includedir and
# libdir lie under the prefix, and `pkg-config --static --libs tenet` names no absolute path
# outside the prefix (no CUDA toolkit's, no library given by its file). pkg-config's filtering of
# system dirs is off, so that nothing is hidden. With a C compiler and a program, the program is
# then linked with exactly those flags against the static library (-ltenet read as
# -l:libtenet.a) and run: Libs.private holds what libtenet.a needs. cmake/pkgconfig.cmake writes
# the file.
# usage: check_pkgconfig.sh build TENET_PC PC_DIR [CC PROGRAM.c LIBTENET_A INCLUDE_DIR [LDFLAGS]]
#            a build's tenet.pc, placed at PC_DIR (relative, as installed: lib/pkgconfig) under a
#            temporary prefix, with the static library and the headers linked in for the program;
#            LDFLAGS: what a static user adds (the CUDA toolkit's -L: tenet.pc names no path)
#        check_pkgconfig.sh installed [CC PROGRAM.c [LDFLAGS]]
#            the installed tenet (scripts/check-packages)
set -euo pipefail
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mode="${1:-}"
case "$mode" in
    build)
        mkdir -p "$work/prefix/$3"
        cp "$2" "$work/prefix/$3/tenet.pc"
        export PKG_CONFIG_PATH="$work/prefix/$3${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        cc="${4:-}" program="${5:-}" static_lib="${6:-}" headers="${7:-}" extra_ldflags="${8:-}"
        ;;
    installed) cc="${2:-}" program="${3:-}" extra_ldflags="${4:-}" ;;
    *)
        echo "usage: check_pkgconfig.sh build TENET_PC PC_DIR [CC PROGRAM.c LIBTENET_A INCLUDE_DIR" \
            "[LDFLAGS]] | installed [CC PROGRAM.c [LDFLAGS]]" >&2
        exit 2
        ;;
esac
fail() {
    echo "check_pkgconfig: $*" >&2
    exit 1
}
pc() { pkg-config "$@" tenet || fail "pkg-config $* tenet failed"; }
# pkg-config prints paths as written: ${pcfiledir}/../.. stays unresolved; realpath -m settles them
norm() { realpath -m "$1"; }
prefix="$(norm "$(pc --variable=prefix)")"
includedir="$(norm "$(pc --variable=includedir)")"
libdir="$(norm "$(pc --variable=libdir)")"
under() { [ "$1" = "$prefix" ] || [[ "$1" == "$prefix"/* ]]; }
under "$includedir" || fail "includedir $includedir is not under the prefix $prefix"
under "$libdir" || fail "libdir $libdir is not under the prefix $prefix"

read -r -a cflags <<< "$(pc --cflags)"
[ ${#cflags[@]} = 1 ] && [[ "${cflags[0]}" == -I* ]] &&
    [ "$(norm "${cflags[0]#-I}")" = "$includedir" ] ||
    fail "--cflags must be -I$includedir alone, not: ${cflags[*]}"

read -r -a libs <<< "$(pc --static --libs)"
for flag in "${libs[@]}"; do
    path="${flag#-L}"
    path="${path#-I}"
    case "$path" in
        /*) under "$(norm "$path")" || fail "--static --libs names $flag, outside the prefix $prefix" ;;
        *=/* | *,/* | *:/*) fail "--static --libs carries a path: $flag" ;;
    esac
done
printf '%s\n' "${libs[@]}" | grep -qx -- -ltenet || fail "--static --libs lacks -ltenet: ${libs[*]}"
echo "check_pkgconfig: --cflags ${cflags[*]}; --static --libs ${libs[*]}"

[ -n "$cc" ] || exit 0
if [ "$mode" = build ]; then # the prefix gets the static library and the headers
    mkdir -p "$libdir" "$(dirname "$includedir")"
    ln -s "$(realpath "$static_lib")" "$libdir/libtenet.a"
    ln -s "$(realpath "$headers")" "$includedir"
fi
link=()
for flag in "${libs[@]}"; do
    if [ "$flag" = -ltenet ]; then link+=(-l:libtenet.a); else link+=("$flag"); fi
done
read -r -a extra <<< "${extra_ldflags:-}" # e.g. the CUDA toolkit's -L, a static user's own
"$cc" -std=c11 -o "$work/static-probe" "$program" "${cflags[@]}" "${link[@]}" "${extra[@]}" ||
    fail "a static link with --cflags and --static --libs failed"
"$work/static-probe" > /dev/null || fail "the statically linked program failed"
echo "check_pkgconfig: linked $(basename "$program") against libtenet.a with those flags; it ran"
