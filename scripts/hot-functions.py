#!/usr/bin/env python3
"""The functions a callgrind run executed in BINARY, one demangled name per line, for
scripts/link-hot-first.sh, which has the linker lay them out together at the start of `.text`.

    VALGRIND_OPTS=--demangle=no scripts/callgrind-operator.sh PLANE BINARY OUT
    scripts/hot-functions.py OUT BINARY > build/hot-functions.txt

BINARY must be built with symbol-mangling v0 (scripts/build-release.sh): its demangled names
tell each generic instance apart and carry no hash, so the list still names the same functions
after the code or a dependency changes. callgrind is asked for mangled names (`--demangle=no`)
because its own demangler merges instances; they are demangled here through the binary's
symbol table. Only functions the binary defines are kept (not libc's); the order is by name, so
that a regenerated list differs only where the code does.
"""

import re
import subprocess
import sys

# callgrind writes a name once, `fn=(12) name`, and later only `fn=(12)`.
NAMED = re.compile(r"^c?fn=\(\d+\) (.+)$")


def executed(callgrind_out: str) -> set[str]:
    names = set()
    with open(callgrind_out, encoding="utf-8", errors="replace") as out:
        for line in out:
            match = NAMED.match(line.rstrip("\n"))
            if match:
                names.add(match.group(1))
    return names


def symbols(binary: str, *flags: str) -> list[str]:
    return subprocess.run(
        ["nm", "--defined-only", *flags, binary],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def demangled(binary: str) -> dict[str, str]:
    """Each function's mangled name to its demangled one (nm lists both in the same order)."""
    names = {}
    for mangled, readable in zip(symbols(binary), symbols(binary, "--demangle")):
        fields = mangled.split(" ", 2)
        if len(fields) == 3 and fields[1] in "tT":
            names[fields[2]] = readable.split(" ", 2)[2]
    return names


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: hot-functions.py CALLGRIND_OUT BINARY")
    ran = executed(sys.argv[1])
    if not any(name.startswith("_R") for name in ran):
        sys.exit(
            "no mangled names in the callgrind output: run it with VALGRIND_OPTS=--demangle=no"
        )
    if any(name.startswith("_ZN") for name in ran):
        sys.exit(
            f"{sys.argv[2]} has legacy-mangled names: build it with scripts/build-release.sh"
        )
    names = demangled(sys.argv[2])
    for name in sorted({names[m] for m in ran if m in names}):
        print(name)


if __name__ == "__main__":
    main()
