#!/usr/bin/env python3
"""Fails when a stage of the workflow controller's pass imports a stage that runs after it.

The pass (src/controllers/workflow/pass.rs) hands values from stage to stage; a stage that
reached forward (apply calling record) would make the order in `pass` a lie. The order here is
the order of the stages in `pass::pass`, with `record` after `apply`: its first part (prepare,
before_actions) runs before apply but needs nothing of it, and apply must hand its refusals back
to `pass` rather than record them itself.

Usage: scripts/stage-order.py [DIR]   (default src/controllers/workflow)
"""

import re
import sys
from pathlib import Path

STAGES = [
    "resolve",
    "repository",
    "observe",
    "decide",
    "cache",
    "locks",
    "gate",
    "apply",
    "record",
    "artifact_gc",
]

USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+super::(\{[^;]*\}|\w+)", re.M | re.S)


def imported(text: str) -> set[str]:
    """The sibling modules a file names in its `use super::...` lines (tests excluded)."""
    text = text.split("#[cfg(test)]", 1)[0]
    names: set[str] = set()
    for match in USE.finditer(text):
        target = match.group(1)
        if target.startswith("{"):
            names.update(re.findall(r"(?:^|[{,\s])(\w+)(?=::|\s*[,}])", target))
        else:
            names.add(target)
    return names


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "src/controllers/workflow")
    bad = []
    for position, stage in enumerate(STAGES):
        path = folder / f"{stage}.rs"
        if not path.exists():
            bad.append(f"{path}: a stage listed in {__file__} is missing")
            continue
        for name in sorted(imported(path.read_text()) & set(STAGES[position + 1 :])):
            bad.append(f"{path}: stage `{stage}` imports `{name}`, a stage that runs after it")
    for line in bad:
        print(line)
    if not bad:
        print(f"{folder}: each of {len(STAGES)} stages imports only stages before it")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
