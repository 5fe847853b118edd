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
