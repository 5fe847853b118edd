"""The real-CPA matrix (tests/support/realcpa_matrix.py): every provider path x client API x turn kind
of v7.2.89 and v7.2.140, captured from the real builds into recordings/real-cpa/.

In CI (no CPA binaries) the captures are replayed through the sidecar's client leg in
process (tests/support/matrix_replay.py) and must give what the live sidecar gave; with the binaries
(``STREAMFIX_CPA_BIN_DIR``) every cell is run again live and must still be what was captured
(tests/e2e/test_real_cpa_matrix_live.py).

- the captures cover the matrix, cell for cell, with each build's provenance;
- each cell's raw stream repaired in process tells the client what the live sidecar told it
  (``realcpa_matrix.outcome``), in one chunk and in small reads;
- a spec-correct capture passes byte for byte; the repair is idempotent;
- every cell tells its turn's truth (tests/support/matrix_truth.py) through the sidecar, but those
  whose truth the client stream cannot show (``matrix_truth.HIDDEN``, each with why);
- no credential is in any capture;
- docs/real-cpa.md's matrix is the one tests/support/matrix_docs.py writes from the captures.

The live run of every cell is tests/e2e/test_real_cpa_matrix_live.py.
"""

from __future__ import annotations

import re

import matrix_recordings as mr
import matrix_replay as rp
import pytest
import realcpa
import realcpa_matrix as m

CELLS = mr.load()
BY_KEY = {c.key: c for c in CELLS}


def _ids(cells: list[mr.Cell]) -> list[str]:
    return ["/".join(c.key) for c in cells]


same = m.same


def test_the_captures_cover_the_matrix():
    """Every cell of the matrix is captured, and nothing else is (a capture that misses a
    cell, or one left from a matrix that no longer has it, fails here)."""
    want = set(m.cells())
    got = set(BY_KEY)
    assert not (want - got), (
        f"cells not captured: {sorted(want - got)[:20]} (python tests/support/realcpa_matrix.py capture)"
    )
    assert not (got - want), f"captures of cells the matrix does not have: {sorted(got - want)[:20]}"
    assert len(CELLS) == len(got)  # one directory per cell


def test_provenance():
    builds = mr.builds()
    assert set(builds) == set(m.VERSIONS)
    for v, b in builds.items():
        assert b["commit"] == m.COMMITS[v] and re.fullmatch(r"[0-9a-f]{64}", b["binary_sha256"])
    for c in CELLS:
        meta = c.meta
        v, p, api, t = c.key
        assert meta["cpa"] == {k: builds[v][k] for k in ("version", "commit", "binary_sha256")}
        assert meta["provider"]["config_key"] == mr.CONFIG_KEY[p] and meta["provider"]["script"] == t
        assert c.provider_body, c.key  # the provider body CPA read
        assert meta["consistent"], f"{c.key}: captured inconsistent (CPA raced): capture it again"
        assert meta["request"]["body"] == m.request_body(api, t, f"cell {v} {p} {api} {t} raw")


def test_no_credentials_in_any_capture():
    keys = (
        "fake-anthropic",
        "fake-goog",
        "fake-openai",
        "fake-gemini",
        "fake-vertex",
        "fake-codex",
        realcpa.CLIENT_KEY,
        "Bearer",
    )
    for c in CELLS:
        text = (c.dir / "recording.json").read_text()
        assert not [k for k in keys if k in text], c.key
        assert set(c.meta["request"]["headers"]) <= mr.CLIENT_HEADERS
        assert set(c.meta["provider"]["headers"]) <= mr.PROVIDER_HEADERS


@pytest.mark.parametrize("cell", CELLS, ids=_ids(CELLS))
def test_replay_tells_what_the_live_sidecar_told(cell):
    """The captured raw stream through the client leg, in process, as the live sidecar
    turned the live one: the same outcome (ending, text, calls, usage, contract rules)."""
    out = rp.replay(cell.meta, cell.body)
    req = cell.meta["request"]["body"]
    got = m.outcome(cell.api, out, cell.meta["response"]["status"], req)
    assert same(got, cell.meta["outcome"]["sidecar"]), (got, cell.meta["outcome"]["sidecar"])
    assert same(m.outcome(cell.api, cell.body, cell.meta["response"]["status"], req), cell.meta["outcome"]["raw"])
    if cell.meta["transport"] == "http":
        assert rp.replay(cell.meta, cell.body, chunk=7) == out  # any reads give the same bytes
    assert rp.replay(cell.meta | {"started_at": cell.meta["started_at"]}, out) == out  # idempotent
    if cell.meta["kind"] == "clean":
        assert out == cell.body  # a spec-correct stream passes byte for byte


def test_every_cell_tells_its_truth_or_says_why():
    """Through the sidecar, every cell tells the client its turn's truth in the API's terms
    (tests/support/matrix_truth.py), but those whose truth the client stream cannot show
    (``matrix_truth.HIDDEN``, with why): that list is exact."""
    import matrix_truth

    untold = {}
    for c in CELLS:
        v, p, api, t = c.key
        o = c.meta["outcome"]
        if not matrix_truth.told(p, api, t, o["sidecar"], o["sidecar_ended"]):
            untold.setdefault((p, api, t), []).append(v)
    unexplained = {k: v for k, v in untold.items() if k not in matrix_truth.HIDDEN}
    assert not unexplained, f"cells not told true, with no reason: {unexplained}"
    stale = sorted(set(matrix_truth.HIDDEN) - set(untold))
    assert not stale, f"HIDDEN lists cells that are told true: {stale}"
    for (p, api, t), vs in untold.items():
        why = matrix_truth.HIDDEN[(p, api, t)]
        if len(vs) == 1:  # one build only: the reason says which
            assert why.startswith(f"{vs[0]} only"), ((p, api, t), vs, why)
        else:
            assert " only" not in why.split(":")[0], ((p, api, t), why)


def test_the_docs_matrix_is_generated_from_the_captures():
    import matrix_docs

    assert matrix_docs.section() in matrix_docs.DOC.read_text(), (
        "docs/real-cpa.md's matrix is stale: python tests/support/realcpa_matrix.py docs"
    )
