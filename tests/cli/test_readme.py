"""Nothing committed cites what a clone lacks: the development machine's reference folder
(``../shared``, its documents by name) or this project's issue tracker ("issue 12").

Other projects' reports stay (``LiteLLM #41109``, ``mitmproxy/mitmproxy#5371``): anyone can
read them. The recordings' provenance notes are data (how each was captured) and are not
read here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT

LACKING = re.compile(
    r"\.\./shared|shared/reference|\b(?:cpa-wire|cpa-defects|anchors(?:-\d+)?|mitmproxy)\.md\b"
    r"|\b[Ii]ssues? \d+\b"
)
"""A reference to the machine's reference documents, or to one of this project's issues."""
TEXT = (".py", ".md", ".toml", ".yaml", ".yml", ".mjs", ".service", ".sh", "")
FOLDERS = ("wire", "addons", "streamfix", "tests", "docs", "scripts", "deploy", ".ci")


def committed_text() -> list[Path]:
    skip = {"node_modules", "__pycache__", "fuzz_regressions"}
    files = [ROOT / "README.md", ROOT / "justfile", ROOT / "pyproject.toml"]
    for d in FOLDERS:
        files += [p for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in TEXT and not skip & set(p.parts)]
    return sorted(f for f in files if f.name != "devin_pb2.py")


def test_the_check_finds_what_it_looks_for() -> None:
    found = LACKING.findall("see ../shared/reference/x, cpa-wire.md §2, anchors-3.md; issue 20 and Issue 9")
    assert len(found) == 5
    assert not LACKING.findall("LiteLLM #41109, mitmproxy/mitmproxy#5371, docs/real-cpa.md, the issues of a gateway")


@pytest.mark.parametrize("path", committed_text(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cites_nothing_a_clone_lacks(path: Path) -> None:
    text = path.read_text("utf-8", "replace")
    if path == Path(__file__):
        return
    bad = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in LACKING.finditer(text)]
    assert not bad, f"{path.relative_to(ROOT)} cites what a clone lacks: {bad}"
