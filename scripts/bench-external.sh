#!/usr/bin/env bash
# The burst (1,000 x 10 diamond) on one build's embedded control plane, served by another
# build's operator (`bench --external`): the operator's steps/s, CPU and peak RSS with the
# control plane held the same, so that an older operator is compared without the cost of a
# heavier control plane (the test tool, in the bench's own process) in its figures.
#   scripts/bench-external.sh PLANE_BUILD OPERATOR_BUILD   # prints one JSON line
set -u
plane=$1; op=$2
dir=$(mktemp -d); kc=$dir/kubeconfig
trap 'kill $oppid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
. "$(dirname "$0")/external-operator.sh"
start_external_operator "$dir" "$kc" "$op"
"$plane" bench --workflows 1000 --steps 10 --shape diamond --external --external-pid "$oppid" \
  --kubeconfig "$kc" --external-wait-secs 60 2>/dev/null | python3 -c "
import json, sys
r = json.load(sys.stdin)
o = r.get('operator') or {}
print(json.dumps({'plane': '$plane', 'operator': '$op', 'stepsPerSecond': r['stepsPerSecond'],
    'operatorCpuSeconds': o.get('cpuSeconds'), 'peakRssMib': o.get('peakRssMib'),
    'p99': r['dispatchLatencyMs'].get('p99'), 'writesPerStep': r['api']['writesPerStep']}))"
