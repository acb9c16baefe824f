#!/usr/bin/env bash
# The operator's CPU while N workflows run and nothing happens: each one step asleep (pods
# simulated for two hours, the step's timeout two hours), on the embedded control plane, the
# operator as its own process so its CPU is its own. Works with any build that has `dev
# --no-operator` and `run`, so old builds can be compared. Needs .venv (make tools).
#   scripts/bench-idle-running.sh path/to/workflow-operator [N] [SECONDS]
# prints: BUILD N CPU-SECONDS over SECONDS, RSS, and how long setting up took.
set -euo pipefail
bin=$1; n=${2:-10000}; secs=${3:-20}
python=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python
dir=$(mktemp -d)
kc=$dir/kubeconfig
op=
"$bin" dev --no-operator --pods simulated:7200000 --web-addr off --kubeconfig "$kc" > "$dir/dev.log" 2>&1 &
dev=$!
trap 'kill $op $dev 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  [ -s "$kc" ] && KUBECONFIG=$kc kubectl get ns default > /dev/null 2>&1 && break
  sleep 0.2
done
KUBECONFIG=$kc "$bin" run --namespace default --metrics-addr 127.0.0.1:0 > "$dir/op.log" 2>&1 &
op=$!
start=$(date +%s)
"$python" - "$kc" "$n" <<'PY'
import sys, time
from concurrent.futures import ThreadPoolExecutor
from kubernetes import client, config

config.load_kube_config(sys.argv[1])
api = client.CustomObjectsApi()
n = int(sys.argv[2])
group = ("workflow.crd.com", "v1", "default", "workflows")

def create(i: int) -> None:
    step = {"stepName": "nap", "image": "busybox", "command": ["sleep", "7200"], "timeout": 7200}
    body = {"apiVersion": "workflow.crd.com/v1", "kind": "WorkFlow",
            "metadata": {"name": f"idle-{i:05d}"},
            "spec": {"maxStepTimeout": 7200, "containers": [step]}}
    api.create_namespaced_custom_object(*group, body)

with ThreadPoolExecutor(8) as pool:
    list(pool.map(create, range(n)))
# Every workflow has started its step (the status lists it) before the quiet is measured.
deadline = time.time() + 1800
while time.time() < deadline:
    items = api.list_namespaced_custom_object(*group)["items"]
    if sum(1 for w in items if (w.get("status") or {}).get("started")) == n:
        sys.exit(0)
    time.sleep(2)
sys.exit("not every workflow started within 30 minutes")
PY
setup=$(( $(date +%s) - start ))
sleep 5
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$op/stat")
sleep "$secs"
read -r u2 s2 < <(awk '{print $14, $15}' "/proc/$op/stat")
rss=$(awk '/VmRSS/{print $2}' "/proc/$op/status")
python3 -c "print('$(basename "$bin")', $n, 'workflows running:', round(($u2 + $s2 - $u1 - $s1) / $(getconf CLK_TCK), 2), 'CPU seconds over $secs s; RSS', $rss // 1024, 'MiB; set up in', $setup, 's')"
