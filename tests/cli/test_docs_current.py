"""Lines of the docs that name a fact of the code hold it: a count, a file, an input."""

from __future__ import annotations

import json
import re

from streamfix.wire.rules import declared
from support import ROOT


def test_readme_sample_startup_line_counts_the_rules_there_are() -> None:
    """README shows the startup line with one rule off: its counts are the rules declared."""
    text = (ROOT / "README.md").read_text()
    found = re.findall(r"repair mode, (\d+) of (\d+) rules on \(off: status\)", text)
    assert found, "README shows a sample startup line"
    n = len(declared())
    assert all((int(on), int(of)) == (n - 1, n) for on, of in found), (found, n)


def test_a_cited_mitmproxy_module_is_called_mitmproxys() -> None:
    """``addons/proxyserver.py`` is mitmproxy's, not this project's (which has an
    ``addons/`` of its own): a doc that cites a file of mitmproxy's under its own path
    says whose it is."""
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text()
        for m in re.finditer(r"`(addons|proxy|tools)/[\w/]+\.py`", text):
            path = m.group(0).strip("`")
            if not (ROOT / path).exists():
                before = text[max(0, m.start() - 40) : m.start()]
                assert "mitmproxy" in before, (
                    f"{doc.name}: {path} is not this project's and is not said to be mitmproxy's"
                )


def test_the_dashboard_declares_no_input_it_does_not_use() -> None:
    """Grafana asks for every ``__inputs`` entry on import; one nothing references is a
    question with no use."""
    raw = (ROOT / "docs" / "grafana-dashboard.json").read_text()
    dash = json.loads(raw)
    for entry in dash.get("__inputs", []):
        assert raw.count("${" + entry["name"] + "}") > 0, f"input {entry['name']} is declared and never used"


def test_readme_says_the_client_leg_needs_no_change_to_cpa() -> None:
    """An operator's first worry in front of CPA: what must change in CPA's config. For the
    client leg, nothing; README says so where it puts the sidecar in front of CPA."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## In front of a real CPA") :]
    section = section[: section.index("\n## ", 3)]
    assert "The client leg alone needs no change to CPA or to its config" in section
