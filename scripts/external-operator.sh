# Sourced by the scripts that serve a `bench --external` control plane with a given operator
# build. `start_external_operator DIR KUBECONFIG OPERATOR [WRAPPER...]` starts OPERATOR's `run`
# once the control plane has written KUBECONFIG and installed the CRD (an operator checks the
# CRD at start), under WRAPPER if given (e.g. valgrind), its log in DIR/operator.log; `exec`
# keeps the pid the bench reports on, left in `oppid`.
start_external_operator() {
  local dir=$1 kc=$2 op=$3; shift 3
  # Older builds name the log filter `--log`.
  local logflag=--log-level
  "$op" run --help | grep -q -- "--log-level" || logflag=--log
  cat > "$dir/op.sh" <<EOS
#!/bin/sh
while [ ! -s $kc ]; do sleep 0.05; done
until KUBECONFIG=$kc kubectl get crd workflows.workflow.crd.com >/dev/null 2>&1; do sleep 0.1; done
exec env KUBECONFIG=$kc $* $op run --concurrency 64 $logflag warn 2> $dir/operator.log
EOS
  chmod +x "$dir/op.sh"
  "$dir/op.sh" &
  oppid=$!
}
