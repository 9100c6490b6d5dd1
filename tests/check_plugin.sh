#!/usr/bin/env bash
# libtenet.so and its CUDA plugin, as files (docs/design.md, "Back ends as plugins"): libtenet
# needs no CUDA library (it loads the plugin when a CUDA device is first asked for); the plugin
# exports its entry only, and does not link libtenet (core's services come through the host
# table it is given).
# usage: check_plugin.sh LIBTENET_SO LIBTENET_CUDA_SO
set -euo pipefail
lib="$1"
plugin="$2"
status=0
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
if needed "$lib" | grep -E '^lib(cuda|cublas|nvrtc|tenet-cuda)'; then
    echo "libtenet.so needs the libraries above: it must load CUDA's only through the plugin"
    status=1
fi
if needed "$plugin" | grep -E '^libtenet\.so'; then
    echo "the plugin links libtenet"
    status=1
fi
exported="$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort -u)"
if [ "$exported" != "tn_cuda_plugin_init" ]; then
    echo "the plugin exports more than tn_cuda_plugin_init:" $exported
    status=1
fi
[ "$status" -eq 0 ] && echo "plugin: libtenet needs no CUDA library; the plugin exports its entry only"
exit "$status"
