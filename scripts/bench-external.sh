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
# Older builds name the log filter `--log`.
logflag=--log-level
"$op" run --help | grep -q -- "--log-level" || logflag=--log
# The operator starts once the control plane has written its kubeconfig and installed the CRD
# (an operator checks the CRD at start); `exec` keeps the pid the bench reports on.
cat > "$dir/op.sh" <<EOS
#!/bin/sh
while [ ! -s $kc ]; do sleep 0.05; done
until KUBECONFIG=$kc kubectl get crd workflows.workflow.crd.com >/dev/null 2>&1; do sleep 0.1; done
exec env KUBECONFIG=$kc $op run --concurrency 64 $logflag warn 2> $dir/operator.log
EOS
chmod +x "$dir/op.sh"
"$dir/op.sh" & oppid=$!
"$plane" bench --workflows 1000 --steps 10 --shape diamond --external --external-pid "$oppid" \
  --kubeconfig "$kc" --external-wait-secs 60 2>/dev/null | python3 -c "
import json, sys
r = json.load(sys.stdin)
o = r.get('operator') or {}
print(json.dumps({'plane': '$plane', 'operator': '$op', 'stepsPerSecond': r['stepsPerSecond'],
    'operatorCpuSeconds': o.get('cpuSeconds'), 'peakRssMib': o.get('peakRssMib'),
    'p99': r['dispatchLatencyMs'].get('p99'), 'writesPerStep': r['api']['writesPerStep']}))"
