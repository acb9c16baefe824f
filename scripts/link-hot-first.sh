#!/usr/bin/env bash
# A linker for the release build (`scripts/build-release.sh` sets it): runs `cc` with the
# arguments rustc gives, plus lld's `--symbol-ordering-file` naming the functions of
# build/hot-functions.txt, so that the code a burst of workflows runs sits together at the start
# of `.text`. The kernel maps a binary's code 64 KiB around each page a fault touches: spread
# among the code of features a workflow does not use, the few megabytes that run kept most of a
# 30 MB `.text` resident.
#
# The list holds demangled names (symbol-mangling v0: each generic instance its own name, no
# hash), which survive a rebuild; the mangled names of this link, which carry hashes that change
# with any dependency, are looked up in the objects rustc passes. A listed name the build does
# not define is skipped: a stale list costs pages, not correctness. Made by
# scripts/hot-functions.py.
set -euo pipefail
list=${HOT_FUNCTIONS:-$(dirname "$0")/../build/hot-functions.txt}
objects=()
for arg in "$@"; do
  case $arg in *.o) objects+=("$arg") ;; esac
done
if [ ! -s "$list" ] || [ ${#objects[@]} -eq 0 ] || ! command -v nm >/dev/null; then
  exec cc "$@"
fi
order=$(mktemp)
trap 'rm -f "$order"' EXIT
# The two listings are line for line the same symbols, mangled and demangled. An object nm
# cannot read leaves the order empty rather than failing the link.
{ paste -d '\t' <(nm --defined-only "${objects[@]}" 2>/dev/null) \
  <(nm -C --defined-only "${objects[@]}" 2>/dev/null) |
  awk -F'\t' 'NR == FNR { hot[$0] = 1; next }
    { split($1, m, " "); d = $2; sub(/^[0-9a-f]+ [tT] /, "", d) }
    m[2] ~ /^[tT]$/ && (d in hot) { print m[3] }' "$list" - > "$order"; } || : > "$order"
cc "$@" -Wl,--symbol-ordering-file="$order" -Wl,--no-warn-symbol-ordering
