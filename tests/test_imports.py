"""No file imports the checkout's top-level ``wire``/``addons``: they are
``streamfix.wire``/``streamfix.addons`` (what a wheel installs; issue 19). Importing both
names would load every module twice (two correlators, two protobuf registrations of
devin.proto). A branch merged with the old names: run ``scripts/dev/rename-imports``."""

from __future__ import annotations

import re
import subprocess

from support import ROOT

OLD = re.compile(r"^\s*(from|import) (wire|addons)\b(?!\s*=)", re.MULTILINE)


def test_no_top_level_wire_or_addons_imports() -> None:
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    bad = []
    for name in files:
        for m in OLD.finditer((ROOT / name).read_text()):
            line = (ROOT / name).read_text()[m.start() :].splitlines()[0].strip()
            bad.append(f"{name}: {line}")
    assert not bad, "run scripts/dev/rename-imports:\n" + "\n".join(bad)


def test_the_names_are_one_package() -> None:
    import streamfix.addons
    import streamfix.wire

    assert streamfix.wire.__file__.endswith("wire/__init__.py")
    assert streamfix.addons.__file__.endswith("addons/__init__.py")
