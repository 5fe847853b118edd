"""The README and docs/ cite nothing a clone lacks."""

from __future__ import annotations

from support import ROOT

README = ROOT / "README.md"


def test_readme_and_docs_cite_nothing_a_clone_lacks() -> None:
    for p in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        assert "../shared/" not in p.read_text(), p
