#!/usr/bin/env bash
# The release build the image ships (the Dockerfile runs this): no embedded control plane
# (`--no-default-features`), symbol-mangling v0, and on x86-64 the hot functions laid out first
# (scripts/link-hot-first.sh). Extra arguments go to cargo (e.g. `--target-dir DIR`).
#   scripts/build-release.sh [CARGO_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="${RUSTFLAGS:-} -C symbol-mangling-version=v0"
if [ "$(uname -m)" = x86_64 ] && [ -z "${WORKFLOW_OPERATOR_NO_HOT_ORDER:-}" ]; then
  export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=$PWD/scripts/link-hot-first.sh
fi
exec cargo build --release --locked --no-default-features \
  --bin workflow-operator --bin workflow-agent "$@"
