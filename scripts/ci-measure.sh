#!/usr/bin/env bash
# Runs CI (`.ci/run`, as CI runs it) in the checkout DIR and reports its wall time and the peak
# size of DIR/target (sampled every 5 s): what the CI-time figures in docs/performance.md and the
# session notes are measured with. Use a fresh clone, on a machine with nothing else running.
#   scripts/ci-measure.sh /tmp/fresh-clone /tmp/ci.log   # then: cat /tmp/ci.log.summary
set -u
dir=$1
log=$2
cd "$dir" || exit 2
(
  peak=0
  while true; do
    size=$(du -sb target 2>/dev/null | cut -f1)
    size=${size:-0}
    if [ "$size" -gt "$peak" ]; then peak=$size; echo "$peak" > "$log.peak"; fi
    sleep 5
  done
) &
sampler=$!
start=$(date +%s)
CI=true bash .ci/run > "$log" 2>&1 < /dev/null
rc=$?
end=$(date +%s)
kill "$sampler"
echo "rc=$rc wall=$((end - start))s peak_target_bytes=$(cat "$log.peak" 2>/dev/null)" >> "$log.summary"
