"""No file imports the checkout's top-level ``wire``/``addons``: they are
``streamfix.wire``/``streamfix.addons`` (what a wheel installs). Importing both
names would load every module twice (two correlators, two protobuf registrations of
devin.proto). A branch merged with the old names: run ``scripts/dev/rename-imports``."""

from __future__ import annotations

import re
from pathlib import Path

from support import ROOT

OLD = re.compile(r"^\s*(from|import) (wire|addons)\b(?!\s*=)", re.MULTILINE)
SOURCES = ("wire", "addons", "streamfix", "tests")
"""The folders that hold the project's Python files."""


def python_files() -> list[Path]:
    """Every Python file of the project (what ``git ls-files '*.py'`` lists; no installed packages)."""
    skip = {"node_modules", "__pycache__"}
    return sorted(p for d in SOURCES for p in (ROOT / d).rglob("*.py") if not skip & set(p.parts))


def test_no_top_level_wire_or_addons_imports() -> None:
    bad = []
    for path in python_files():
        text = path.read_text()
        for m in OLD.finditer(text):
            bad.append(f"{path.relative_to(ROOT)}: {text[m.start() :].splitlines()[0].strip()}")
    assert not bad, "run scripts/dev/rename-imports:\n" + "\n".join(bad)


def test_the_names_are_one_package() -> None:
    import streamfix.addons
    import streamfix.wire

    assert streamfix.wire.__file__.endswith("wire/__init__.py")
    assert streamfix.addons.__file__.endswith("addons/__init__.py")


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere (a function's lazy import included)."""
    import ast

    package = module if path.stem == "__init__" else module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            subs = {f"{base}.{a.name}" for a in node.names} & known
            out |= subs if len(subs) == len(node.names) else subs | ({base} & known)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & known
    return out - {module}


def test_no_import_cycles_lazy_imports_counted() -> None:
    """No two modules of wire/, addons/ or streamfix/ import each other, directly or
    through others, counting the imports inside functions (a lazy import only hides a
    cycle: which module may be loaded first then depends on the caller)."""
    modules = {}
    for pkg, folder in (("streamfix.wire", "wire"), ("streamfix.addons", "addons"), ("streamfix", "streamfix")):
        for p in sorted((ROOT / folder).glob("*.py")):
            modules[pkg if p.stem == "__init__" else f"{pkg}.{p.stem}"] = p
    graph = {m: _imports(m, p, set(modules)) for m, p in modules.items()}
    cycles = []
    for start, imported in graph.items():  # a path from a module's imports back to it is a cycle
        seen, todo = set(), [(n, [start, n]) for n in imported]
        while todo:
            node, path = todo.pop()
            if node == start:
                cycles.append(" -> ".join(path))
                break
            if node in seen:
                continue
            seen.add(node)
            todo.extend((n, [*path, n]) for n in graph[node])
    assert not cycles, "\n".join(cycles)
