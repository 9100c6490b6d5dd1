#!/usr/bin/env bash
# tenet-demo --distributed under mpirun trains as one process does: compares every epoch's loss
# (1e-4 relative: float32 sums in another order) and train accuracy, and the test accuracy.
# usage: check_distributed.sh "MPIRUN ARGS;..." DEMO DATA
set -euo pipefail
IFS=';' read -r -a mpirun <<< "$1"
demo="$2"
data="$3"
one="$("$demo" "$data")"
many="$("${mpirun[@]}" "$demo" --distributed "$data")"
echo "$many"
extract() { grep -E '^(epoch|test accuracy)' | sed -E 's/  [0-9.]+ s$//'; }
paste -d'|' <(echo "$one" | extract) <(echo "$many" | extract) | awk -F'|' '
    { n++
      split($1, a, " "); split($2, b, " ")
      if ($1 ~ /^epoch/) {
          la = a[4]; lb = b[4]; d = la - lb; if (d < 0) d = -d
          if (d > 1e-4 * la + 1e-6) { printf "epoch %s: loss %s in one process, %s distributed\n", a[2], la, lb; bad = 1 }
          if (a[7] != b[7]) { printf "epoch %s: train acc %s vs %s\n", a[2], a[7], b[7]; bad = 1 }
      } else if ($1 != $2) { printf "%s | %s\n", $1, $2; bad = 1 }
    }
    END { if (n < 31) { print "missing lines"; bad = 1 }
          if (bad) exit 1; print "distributed run matches the single-process run (" n " lines)" }'
