#!/usr/bin/env bash
# Alternates two release builds of the operator through `bench` ROUNDS times (default 5) and
# prints one JSON line per run with the figures the performance page compares; extra arguments
# go to `bench` (default: the 1,000 x 10 diamond). Compare medians with their ranges.
#   scripts/bench-alternate.sh before/workflow-operator after/workflow-operator [ROUNDS] [-- ARGS...]
set -u
before=$1
after=$2
rounds=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--workflows 1000 --steps 10 --shape diamond)
for round in $(seq "$rounds"); do
  for build in before after; do
    bin=$before
    [ "$build" = after ] && bin=$after
    "$bin" bench "${args[@]}" 2>/dev/null | python3 -c "
import json, sys
r = json.load(sys.stdin)
a, d, o = r['api'], r['dispatchLatencyMs'], r.get('operator') or {}
print(json.dumps({'round': $round, 'build': '$build', 'writesPerStep': a['writesPerStep'],
    'systemWritesPerStep': a.get('systemWritesPerStep'), 'p50': d.get('p50'), 'p99': d.get('p99'),
    'stepsPerSecond': r['stepsPerSecond'], 'peakRssMib': o.get('peakRssMib'), 'operatorCpuSeconds': o.get('cpuSeconds'),
    'completed': r['workflowsCompleted']}))"
  done
done
