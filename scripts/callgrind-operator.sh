#!/usr/bin/env bash
# One small burst (WORKFLOWS x 10 diamond, default 100) on PLANE_BUILD's embedded control plane,
# served by OPERATOR_BUILD's operator under valgrind's callgrind: the operator's instructions,
# counted, which this machine's load does not move (timings do). Compare two builds' totals, then
# where they differ: `callgrind_annotate OUT`, `callgrind_annotate --inclusive=yes OUT`. memcpy's
# `rep movsb` counts one instruction per byte, so copies weigh more here than in time.
#   scripts/callgrind-operator.sh PLANE_BUILD OPERATOR_BUILD OUT [WORKFLOWS]
set -u
plane=$1; op=$2; out=$3; n=${4:-100}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
dir=$(mktemp -d); kc=$dir/kubeconfig
trap 'kill $oppid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
. "$(dirname "$0")/external-operator.sh"
start_external_operator "$dir" "$kc" "$op" valgrind --tool=callgrind --callgrind-out-file="$out"
"$plane" bench --workflows "$n" --steps 10 --shape diamond --external --external-pid "$oppid" \
  --kubeconfig "$kc" --external-wait-secs 300 --ceiling-secs 0 2>/dev/null >/dev/null
kill -INT $oppid; wait $oppid 2>/dev/null
grep -E "^==[0-9]+== (Collected|I +refs)" "$dir/operator.log" | tail -1
