#!/usr/bin/env python3
"""Lists the non-test functions longer than N lines (default 120) in Rust sources.

Usage: scripts/long-functions.py [N] [DIR...]   (default: the whole workspace)
A function runs from its `fn` line to the closing brace at its indentation; `#[cfg(test)]`
items, `tests/` and `benches/` are skipped. Exits 1 when it lists any.
"""
import re, sys, pathlib
limit = int(sys.argv[1]) if len(sys.argv) > 1 else 120
roots = sys.argv[2:] or ['src', 'crates']
found = 0
fn_re = re.compile(r'^(\s*)(pub(\([a-z]+\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z0-9_]+)')
for root in roots:
    for path in sorted(pathlib.Path(root).rglob('*.rs')):
        if 'target' in path.parts or '.venv' in path.parts: continue
        if 'tests' in path.parts or 'benches' in path.parts: continue
        if path.name == 'tests.rs' or path.name.endswith('_tests.rs'): continue
        lines = path.read_text().split('\n')
        test_indent = None
        i = 0
        while i < len(lines):
            l = lines[i]
            if re.match(r'^\s*#\[cfg\(test\)\]', l):
                # skip the following item (mod tests { ... })
                j = i + 1
                m = re.match(r'^(\s*)', lines[j]).group(1)
                while j < len(lines) and not (lines[j].startswith(m + '}') and len(lines[j].rstrip()) == len(m) + 1):
                    j += 1
                i = j + 1; continue
            m = fn_re.match(l)
            if m and not l.rstrip().endswith(';'):
                ind = m.group(1)
                j = i
                while j < len(lines) and not (lines[j].rstrip() == ind + '}'):
                    j += 1
                n = j - i + 1
                if n > limit:
                    print(f'{n:5d} {path}:{i+1} {m.group(7)}')
                    found += 1
                i += 1; continue
            i += 1
sys.exit(1 if found else 0)
