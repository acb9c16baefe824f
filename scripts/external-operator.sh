# Sourced by the scripts that serve a `bench --external` control plane with a given operator
# build. `start_external_operator DIR KUBECONFIG OPERATOR [WRAPPER...]` starts OPERATOR's `run`
# once the control plane has written KUBECONFIG and installed every CRD of crd/ (an operator
# lists each of its resources at start and stops if one is not served: waiting for the first
# CRD only lost a round now and then to the CronWorkFlow's not being there yet), under WRAPPER
# if given (e.g. valgrind), its log in DIR/operator.log; `exec` keeps the pid the bench reports
# on, left in `oppid`.
start_external_operator() {
  local dir=$1 kc=$2 op=$3; shift 3
  local crds
  crds=$(awk '/^kind: CustomResourceDefinition/ { crd = 1 } crd && /^  name:/ { print $2; crd = 0 }' \
    "$(dirname "${BASH_SOURCE[0]}")/../crd/"*.yaml | tr '\n' ' ')
  # Older builds name the log filter `--log`.
  local logflag=--log-level
  "$op" run --help | grep -q -- "--log-level" || logflag=--log
  cat > "$dir/op.sh" <<EOS
#!/bin/sh
while [ ! -s $kc ]; do sleep 0.05; done
until KUBECONFIG=$kc kubectl get crd $crds >/dev/null 2>&1; do sleep 0.1; done
exec env KUBECONFIG=$kc $* $op run --concurrency 64 $logflag warn 2> $dir/operator.log
EOS
  chmod +x "$dir/op.sh"
  "$dir/op.sh" &
  oppid=$!
}
