#!/usr/bin/env python3
"""Prints the import circles between a Rust crate's modules; exits 1 if there is any.

    scripts/module-cycles.py crates/kube-devcluster/src [more src dirs ...]
    scripts/module-cycles.py --all        # src/ and crates/*/src of the workspace
    scripts/module-cycles.py --edges DIR  # also print the module graph it read
    scripts/module-cycles.py --no-tests DIR  # leave out `#[cfg(test)]` modules

A module is a file (`a.rs`, `a/mod.rs`, `a/b.rs`, with its inline modules such as `mod tests`).
An edge A -> B is any path in A's code (a `use` tree or a path in an expression) that names B:
`crate::b::..`, `super::b::..`, `self::b::..`, a child module by its name, or a name that a `use`
in A bound to a module. Comments and string literals are skipped; test code counts (it is
compiled with the crate; `--no-tests` leaves out `#[cfg(test)]` modules, inline or in files).

Edges are compared among siblings: an import from `a::x` of `b::y` is the edge `a -> b` between
the top-level modules, and one from `a::x` of `a::y` is `x -> y` inside the folder `a`. A
module's use of its own ancestors or descendants (a `mod.rs` and its children) is not an edge.
Each strongly connected group of siblings is printed with one circle through it and, for every
edge of that circle, the first place that makes it. Python 3, standard library only.
"""

import argparse
import os
import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
KEYWORD_ROOTS = {"crate", "super", "self"}


def strip_code(text):
    """The text with comments, string and char literals blanked (newlines kept, for line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "rb" and re.match(r"(?:br|r)#*\"", text[i:i + 260]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            m = re.match(r"(?:br|r)(#*)\"", text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (i == 0 or not re.match(r"\w", text[i - 1]))):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'", text[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names; () is the crate root
        self.file = file
        self.children = set()


def without_tests(code):
    """The code with every `#[cfg(test)] mod name { .. }` block blanked (newlines kept)."""
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", code):
        if m.start() < pos:
            continue
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        out.append(code[pos:m.start()])
        out.append(re.sub(r"[^\n]", " ", code[m.start():j]))
        pos = j
    out.append(code[pos:])
    return "".join(out)


def discover(src, tests=True):
    """The crate's file modules: {path tuple: Module}, following `mod name;` from lib.rs/main.rs
    (without `#[cfg(test)] mod name;` unless `tests`)."""
    src = Path(src)
    roots = [p for p in (src / "lib.rs", src / "main.rs") if p.exists()]
    modules = {}

    def visit(path, file, dir_for_children):
        if path in modules:
            return
        mod = Module(path, file)
        modules[path] = mod
        code = strip_code(file.read_text(encoding="utf-8"))
        # Only `mod x;` at the file level declares a file module; inline `mod x { .. }` stays here.
        for m in re.finditer(r"(?m)^\s*((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code):
            attributes, name = m.group(1), m.group(2)
            if not tests and "#[cfg(test)]" in attributes:
                continue
            for cand in (dir_for_children / f"{name}.rs", dir_for_children / name / "mod.rs"):
                if cand.exists():
                    mod.children.add(name)
                    child_dir = cand.parent if cand.name == "mod.rs" else dir_for_children / name
                    visit(path + (name,), cand, child_dir)
                    break

    for root in roots:
        visit((), root, src)
    # Other binaries (src/bin/*.rs) are crates of their own; not followed.
    return modules


def expand_use_tree(tree):
    """`a::{b, c::{d as e}, self}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a'], 'a')]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", tree))
    results = []

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def walk(prefix, s):
        if not s:
            return
        brace = s.find("{")
        if brace >= 0 and s.endswith("}"):
            head_parts = [p for p in s[:brace].split("::") if p]
            for part in split_top(s[brace + 1:-1]):
                walk(prefix + head_parts, part)
            return
        s, _, alias = s.partition("@")
        parts = [p for p in s.split("::") if p]
        if parts and parts[-1] == "self":
            parts = parts[:-1]
        full = prefix + parts
        if not full:
            return
        results.append((full, alias or full[-1]))

    walk([], tree)
    return results


class Crate:
    def __init__(self, src, tests=True):
        self.src = Path(src)
        self.modules = discover(src, tests)
        self.code = {p: strip_code(m.file.read_text(encoding="utf-8")) for p, m in self.modules.items()}
        if not tests:
            self.code = {p: without_tests(c) for p, c in self.code.items()}
        self.aliases = {p: {} for p in self.modules}  # module -> name -> module path bound by `use`
        self.uses = {}  # module -> [(scope path, [segments], line)]
        for p in self.modules:
            self.uses[p] = list(self.read_uses(p))
        # Aliases may chain (a re-export of a re-export): settle them a few times.
        for _ in range(4):
            for p, uses in self.uses.items():
                for scope, segs, _line, name in uses:
                    if name is None or scope != p:
                        continue
                    target = self.resolve(scope, segs, full=True)
                    if target is not None:
                        self.aliases[p][name] = target

    def inline_scopes(self, p):
        """[(start offset, end offset, inline path)] of the `mod x { .. }` blocks of module p."""
        code = self.code[p]
        scopes = []
        for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
            depth, j = 1, m.end()
            while j < len(code) and depth:
                if code[j] == "{":
                    depth += 1
                elif code[j] == "}":
                    depth -= 1
                j += 1
            scopes.append((m.start(), j, m.group(1)))
        return scopes

    def scope_at(self, p, offset, scopes):
        path = p
        for start, end, name in scopes:  # in order of start; nested blocks come later
            if start <= offset < end:
                path = path + (name,)
        return path

    def read_uses(self, p):
        code = self.code[p]
        scopes = self.inline_scopes(p)
        seen = set()
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            scope = self.scope_at(p, m.start(), scopes)
            line = code.count("\n", 0, m.start()) + 1
            tree = m.group(1).strip()
            if tree.startswith("::"):
                continue
            for segs, name in expand_use_tree(tree):
                if segs and segs[-1] == "*":
                    yield (scope, segs[:-1], line, None)
                else:
                    yield (scope, segs, line, name)
            for k in range(m.start(), m.end()):
                seen.add(k)
        # Paths in expressions and types: `crate::a::b`, `super::x`, `name::y` for a bound name.
        for m in re.finditer(r"(?<![\w:])((?:" + IDENT + r"::)+" + IDENT + r")", code):
            if m.start() in seen:
                continue
            before = code[max(0, m.start() - 4):m.start()]
            if before.endswith("in "):  # pub(in crate::a)
                continue
            scope = self.scope_at(p, m.start(), scopes)
            line = code.count("\n", 0, m.start()) + 1
            yield (scope, m.group(1).split("::"), line, None)

    def file_module(self, path):
        """The file module that holds an (inline) module path."""
        while path not in self.modules:
            path = path[:-1]
        return path

    def resolve(self, scope, segs, full=False):
        """The file module a path names (the deepest one it walks through), or None if external.

        With `full`, None unless the whole path is a module (for recording `use` aliases)."""
        segs = list(segs)
        if not segs:
            return None
        if segs[0] == "crate":
            cur, segs = (), segs[1:]
        elif segs[0] in ("super", "self"):
            cur = scope
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    cur = cur[:-1]
                segs = segs[1:]
        else:
            fm = self.file_module(scope)
            first = segs[0]
            if first in self.modules[fm].children:
                cur = fm
            elif first in self.aliases.get(fm, {}):
                cur, segs = self.aliases[fm][first], segs[1:]
            else:
                return None  # another crate, the prelude, or an item of this module
        cur = self.file_module(cur) if cur not in self.modules else cur
        consumed = 0
        for seg in segs:
            if cur + (seg,) in self.modules:
                cur = cur + (seg,)
            elif seg in self.aliases.get(cur, {}):
                cur = self.aliases[cur][seg]
            else:
                break
            consumed += 1
        if full and consumed != len(segs):
            return None
        return cur

    def edges(self):
        """{(parent folder, from child, to child): (file, line)} between siblings."""
        found = {}
        for p, uses in self.uses.items():
            for scope, segs, line, _name in uses:
                target = self.resolve(scope, segs)
                if target is None:
                    continue
                src = p
                k = 0
                while k < len(src) and k < len(target) and src[k] == target[k]:
                    k += 1
                if k == len(src) or k == len(target):
                    continue  # an ancestor or a descendant
                key = (src[:k], src[k], target[k])
                if key not in found:
                    found[key] = (self.modules[p].file, line)
        return found


def strongly_connected(nodes, succ):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def a_cycle(group, succ):
    """One circle through every node of a strongly connected group (a closed walk)."""
    members = set(group)

    def path(a, b):
        prev, queue = {a: None}, [a]
        while queue:
            v = queue.pop(0)
            for w in sorted(succ.get(v, ())):
                if w in members and w not in prev:
                    prev[w] = v
                    queue.append(w)
        steps, v = [], b
        while v != a:
            steps.append(v)
            v = prev[v]
        return list(reversed(steps))

    walk, cur = [group[0]], group[0]
    for target in group[1:] + [group[0]]:
        if target in walk[:-1] and target != group[0]:
            continue
        walk += path(cur, target)
        cur = target
    return walk


def check(src, show_edges, root, tests=True):
    crate = Crate(src, tests)
    edges = crate.edges()
    by_parent = {}
    for (parent, a, b), where in edges.items():
        by_parent.setdefault(parent, {}).setdefault(a, {})[b] = where
    label = os.path.relpath(src, root) if root else str(src)
    problems = 0
    if show_edges:
        for parent in sorted(by_parent):
            for a in sorted(by_parent[parent]):
                for b in sorted(by_parent[parent][a]):
                    print(f"{label}: {'::'.join(parent + (a,))} -> {'::'.join(parent + (b,))}")
    for parent in sorted(by_parent):
        succ = by_parent[parent]
        nodes = set(succ) | {b for bs in succ.values() for b in bs}
        for group in strongly_connected(nodes, succ):
            if len(group) < 2:
                continue
            problems += 1
            folder = "::".join(parent) or "crate"
            print(f"{label}: circle in {folder}: {', '.join(group)} (a closed walk through them:)")
            walk = a_cycle(group, succ)
            for a, b in zip(walk, walk[1:]):
                file, line = succ[a][b]
                print(f"    {a} -> {b}    ({os.path.relpath(file, root) if root else file}:{line})")
    if not problems:
        print(f"{label}: no circles ({len(crate.modules)} modules, {len(edges)} edges between siblings)")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", nargs="*", help="a crate's src directory")
    ap.add_argument("--all", action="store_true", help="src/ and crates/*/src of the workspace")
    ap.add_argument("--edges", action="store_true", help="print every edge between siblings too")
    ap.add_argument("--no-tests", action="store_true", help="leave out #[cfg(test)] inline modules")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(d) for d in args.src]
    if args.all:
        dirs += sorted(p for p in (root / "crates").glob("*/src") if p.is_dir())
        if (root / "src").is_dir():
            dirs.append(root / "src")
    if not dirs:
        ap.error("name a src directory, or --all")
    total = 0
    for d in dirs:
        total += check(d.resolve(), args.edges, root, not args.no_tests)
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
