#!/usr/bin/env python3
"""Lists the pointers in the repository's text that lead nowhere; exits 1 if there is any.

    scripts/stale-pointers.py            # every file git tracks (or, without git, the tree)
    scripts/stale-pointers.py FILE...    # only these files

It looks for four kinds, each printed as `path:line: what: the text`:

- a pointer to the design document's sections: that document is not in the repository, so the
  reader cannot follow it (say what the section said, or point to docs/);
- a pointer into `seeds/`, the directory of the operator this one replaced, which is not here;
- an issue number (or an issue's "acceptance N") in a code comment (`//`, `//!`, `///` in Rust,
  `#` in YAML, Python, shell and Makefiles): the reason for a change belongs in its commit
  message, the comment says why the code is as it is;
- a cargo command naming a target (`--test`, `--bench`, `--example`, `--bin`) that the package
  it runs in does not have, or a test filter `MODULE::` after `--test NAME` naming a module that
  target's root file does not declare. The targets are read from `cargo metadata`; the package
  is the `-p` one, else the root package (commands are given as run from the repository's root,
  as the Makefile runs them), else any with `--workspace`.

A pointer wrapped over two comment lines is found: each line's comment marker is set aside
before matching. Python 3, standard library only; compiles nothing.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

SELF = Path(__file__).resolve()
TEXT_SUFFIXES = {".rs", ".md", ".yaml", ".yml", ".toml", ".py", ".sh", ".txt", ".json"}
HASH_COMMENTS = {".yaml", ".yml", ".py", ".sh", ".toml"}
# What a line's comment marker looks like, set aside so that a pointer can wrap.
MARKER = re.compile(r"^\s*(?://[!/]?|#+)\s?")

DESIGN = re.compile(r"\bDESIGN(?:\.md)?`?(?:\s|\()*(?:sections?|§)|\bDESIGN\.md\b")
SEEDS = re.compile(r"\bseeds/")
ISSUE = re.compile(r"\bissues?\s+#?\d+|\bacceptance\s+\d+", re.IGNORECASE)
CARGO = re.compile(r"(`?)(?:\bcargo|\$\(CARGO\))(?:\s+\+\S+)?\s+(test|bench|run|build|check|clippy)\b")
# Options whose value is the next word, so that it is not read as a test filter.
VALUED = {"-p", "--package", "--test", "--bench", "--example", "--bin", "--features", "-F",
          "--target", "--profile", "-j", "--jobs", "--manifest-path", "--target-dir",
          "--color", "--message-format", "-Z"}
TARGET_KINDS = {"--test": "test", "--bench": "bench", "--example": "example", "--bin": "bin"}


def tracked_files(root):
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             check=True).stdout
        paths = [root / p for p in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        skip = {"target", ".git", ".venv"}
        paths = [p for p in root.rglob("*") if p.is_file() and not skip & set(p.parts)]
    return [p for p in paths if p.suffix in TEXT_SUFFIXES or p.name == "Makefile"]


def packages(root):
    """Each package's directory, name, targets ({(kind, name): root file}) from cargo metadata."""
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                         cwd=root, capture_output=True, text=True, check=True).stdout
    found = []
    for pkg in json.loads(out)["packages"]:
        targets = {}
        for t in pkg["targets"]:
            for kind in t["kind"]:
                targets[(kind, t["name"])] = Path(t["src_path"])
        found.append((Path(pkg["manifest_path"]).parent, pkg["name"], targets))
    return found


class Text:
    """A file's lines with their comment markers set aside, joined, and a map back to lines."""

    def __init__(self, path):
        self.lines = path.read_text(errors="replace").split("\n")
        self.comment = [self.comment_of(path, line) for line in self.lines]
        self.flat = "\n".join(MARKER.sub("", line) for line in self.lines)
        self.comments = "\n".join(c if c is not None else "" for c in self.comment)
        self.starts = [0]
        for line in self.flat.split("\n"):
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.comment_starts = [0]
        for c in self.comments.split("\n"):
            self.comment_starts.append(self.comment_starts[-1] + len(c) + 1)

    @staticmethod
    def comment_of(path, line):
        """The comment part of a line, or None. `//` after a space (not `http://`) in Rust."""
        if path.suffix == ".rs":
            m = re.search(r"(?:^|\s)//[!/]?\s?(.*)$", line)
        elif path.suffix in HASH_COMMENTS or path.name == "Makefile":
            m = re.search(r"(?:^|\s)#+\s?(.*)$", line)
        else:
            return None
        return m.group(1) if m else None

    @staticmethod
    def line_at(starts, offset):
        lo, hi = 0, len(starts) - 1
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1


def command_words(flat, m):
    """The words of a cargo command, up to a lone `--`: to the next backtick, and if the command
    did not open with one (it cannot wrap then) at most to the end of the line."""
    rest = flat[m.end():].split("`", 1)[0]
    if not m.group(1):
        rest = rest.split("\n", 1)[0]
    words = rest.split()
    return words[: words.index("--")] if "--" in words else words


def parse_command(words):
    """(package or None, whether --workspace, [(kind, name)], [filters])."""
    pkg, workspace, named, filters = None, False, [], []
    i = 0
    while i < len(words):
        w = words[i].rstrip(".,;)")
        opt, eq, value = w.partition("=")
        if opt in VALUED:
            if not eq:
                i += 1
                value = words[i].rstrip(".,;)") if i < len(words) else ""
            if opt in ("-p", "--package"):
                pkg = value
            elif opt in TARGET_KINDS:
                named.append((TARGET_KINDS[opt], value))
        elif w in ("--workspace", "--all"):
            workspace = True
        elif not w.startswith("-"):
            filters.append(w)
        i += 1
    return pkg, workspace, named, filters


def check_command(words, pkgs, root_pkg):
    pkg_name, workspace, named, filters = parse_command(words)
    if pkg_name:
        candidates = [p for p in pkgs if p[1] == pkg_name]
        if not candidates:
            return f"no package {pkg_name} in the workspace"
    elif workspace:
        candidates = pkgs
    else:
        candidates = [root_pkg]
    for kind, name in named:
        hits = [p[2][(kind, name)] for p in candidates if (kind, name) in p[2]]
        if not hits:
            where = ", ".join(p[1] for p in candidates)
            return f"no {kind} target `{name}` in {where}"
        if kind != "test":
            continue
        declared = set(re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_][a-z0-9_]*)",
                                  hits[0].read_text(), re.MULTILINE))
        for f in filters:
            module = re.match(r"([a-z_][a-z0-9_]*)::", f)
            if module and module.group(1) not in declared:
                return f"the {kind} target `{name}` has no module `{module.group(1)}`"
    return None


def check_file(path, root, pkgs, root_pkg):
    text = Text(path)
    rel = path.relative_to(root)
    found = []

    def report(starts, offset, what):
        n = Text.line_at(starts, offset)
        found.append(f"{rel}:{n}: {what}: {text.lines[n - 1].strip()}")

    for m in DESIGN.finditer(text.flat):
        report(text.starts, m.start(), "points into the design document, not in the repository")
    for m in SEEDS.finditer(text.flat):
        report(text.starts, m.start(), "points into seeds/, not in the repository")
    for m in ISSUE.finditer(text.comments):
        report(text.comment_starts, m.start(), "an issue number in a comment (history goes in "
               "the commit message)")
    for m in CARGO.finditer(text.flat):
        problem = check_command(command_words(text.flat, m), pkgs, root_pkg)
        if problem:
            report(text.starts, m.start(), problem)
    return found


def main():
    root = Path(__file__).resolve().parent.parent
    files = [Path(a).resolve() for a in sys.argv[1:]] or tracked_files(root)
    pkgs = packages(root)
    root_pkg = next(p for p in pkgs if p[0] == root)
    found = []
    for path in sorted(files):
        if path == SELF or not path.is_file():
            continue
        found += check_file(path, root, pkgs, root_pkg)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
