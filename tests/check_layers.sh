#!/usr/bin/env bash
# The layering of docs/design.md ("Layers"), checked on the #include lines of the engine:
#   core/        includes nothing above it (no cpu/, cuda/, autograd/, ops/, optim/, debug/)
#   cpu/, cuda/  see only core's base.h, kernel_args.h, backend.h, pw_ops.h (no tensor handles)
#   autograd/    core, and from ops/ only ops_internal.h (the autograd <-> ops loop)
#   ops/         core, autograd (no cpu/, cuda/, optim/, debug/)
#   optim/       core, autograd, ops (no cpu/, cuda/, debug/)
#   io/          core, and ops through the public API (no cpu/, cuda/, autograd/, optim/, debug/)
#   debug/       from engine/, only core's headers for the layers above it (internal.h,
#                device.h, hooks.h, files.h, base.h) and autograd_internal.h: no other
#                folder's private header
#   engine/      never includes debug/ (the side-car is reached through core/hooks.h)
# and on the code: only engine/core calls the back-end table (tn__backends, tn__table_of,
# tn__backend_of, tn__backend_load(ed), a tn_backend entry): every other layer goes through core's tn__dev_*
# dispatchers, which bracket each launch for the race detector; a back end names its own
# table only to register it. tests/ may call the table (the backend tests do).
# usage: check_layers.sh REPO_ROOT
set -euo pipefail
cd "$1"
fail=0
# bad FOLDER REGEX WHY [ALLOWED]: an #include "..." in FOLDER matching REGEX (and not ALLOWED)
# is a violation
bad() {
    local hits
    hits="$(grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$1"/* 2>/dev/null |
        grep -E "$2" | grep -vE "${4:-^$}" || true)"
    if [ -n "$hits" ]; then
        echo "$3:"
        echo "$hits" | sed 's/^/  /'
        fail=1
    fi
}
bad engine/core '"\.\./(cpu|cuda|autograd|ops|optim|io)/|debug/' "core includes a layer above it"
bad engine/cpu '"\.\./core/(internal|device|hooks)\.h"|"\.\./(autograd|ops|optim|io|cuda)/|debug/' \
    "a CPU kernel file sees tensor objects or a layer above"
bad engine/cuda '"\.\./core/(internal|device|hooks)\.h"|"\.\./(autograd|ops|optim|io|cpu)/|debug/' \
    "a CUDA file sees tensor objects or a layer above"
bad engine/autograd '"\.\./(cpu|cuda|optim|ops|io)/|debug/' \
    "autograd includes a back end, optim, debug or an ops header other than ops_internal.h" \
    '"\.\./ops/ops_internal\.h"'
bad engine/ops '"\.\./(cpu|cuda|optim|io)/|debug/' "ops include a back end, optim, io or debug"
bad engine/optim '"\.\./(cpu|cuda|io)/|debug/' "optim includes a back end, io or debug"
bad engine/io '"\.\./(cpu|cuda|autograd|optim)/|"\.\./core/hooks\.h"|debug/' \
    "io includes a back end, autograd, optim, debug or the hook table"
bad debug '"\.\./engine/' "debug includes another folder's private header" \
    '"\.\./engine/(core/(internal|device|hooks|files|base)|autograd/autograd_internal)\.h"'
# uses WORDS WHY FOLDER...: a C/C++ source or header in FOLDER (recursively) naming one of WORDS
# (an extended regex of whole words) is a violation
uses() {
    local words="$1" why="$2" hits
    shift 2
    hits="$(grep -rnwE "$words" --include='*.c' --include='*.h' --include='*.cu' \
        --include='*.cpp' "$@" 2>/dev/null || true)"
    if [ -n "$hits" ]; then
        echo "$why:"
        echo "$hits" | sed 's/^/  /'
        fail=1
    fi
}
table='tn__backends|tn__table_of|tn__backend_of|tn__backend_loaded?'
uses "$table|tn_backend|tn__backend_register" \
    "the back-end table used outside engine/core (call a tn__dev_* dispatcher, device.h)" \
    engine/autograd engine/ops engine/optim engine/io debug dist bench examples fuzz stress
uses "$table" "a back end reaches a table (its own or another's) through core's" \
    engine/cpu engine/cuda
# back ends see launch descriptions, never a tensor handle
handles="$(grep -lw tn_tensor engine/cpu/* engine/cuda/* 2>/dev/null || true)"
if [ -n "$handles" ]; then
    echo "a back-end file names tn_tensor:" $handles
    fail=1
fi
if [ "$fail" -eq 0 ]; then
    echo "layers: every #include goes down (or autograd -> ops_internal.h), and only core calls" \
        "the back-end table"
fi
exit "$fail"
