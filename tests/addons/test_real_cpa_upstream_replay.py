"""The upstream-leg matrix (tests/support/upstream_matrix.py) in CI: every provider path x client
API x turn kind of v7.2.89 and v7.2.140, captured from the real builds into
recordings/real-cpa-upstream/ (tests/support/upstream_recordings.py), replayed through BOTH legs of
the sidecar in process (tests/support/upstream_replay.py: the addons the sidecar loads; the
provider call on the regular listener, then CPA's client response on the reverse one).

- the captures cover the matrix, cell for cell, with each build's provenance;
- every cell's client hears the provider's truth (``upstream_matrix.expected``, from the fake
  provider's rules; the three JSON bodies CPA itself makes invalid, ``JSON_BROKEN``, stay as
  they came) and exactly what the live run through both legs heard, streamed and JSON;
- every captured client stream (CPA's bytes, before the sidecar) shows the defect its
  build's measured raw table says (a capture that lost its defect fails);
- no credential is in any file of the captures.

With the binaries, tests/e2e/test_real_cpa_upstream_matrix.py checks that the builds still do
what was captured.
"""

from __future__ import annotations

import re

import pytest
import upstream_matrix as um
import upstream_recordings as ur
import upstream_replay as rp
from standins import fake_upstreams as fu

CELLS = ur.load()
BY_KEY = {c.key: c for c in CELLS}


def _ids(cells: list[ur.Cell]) -> list[str]:
    return ["/".join(c.key) for c in cells]


def test_the_captures_cover_the_matrix():
    want = ur.expected_keys()
    got = set(BY_KEY)
    assert not (want - got), (
        f"cells not captured: {sorted(want - got)[:20]} (python tests/support/upstream_recordings.py capture)"
    )
    assert not (got - want), f"captures of cells the matrix does not have: {sorted(got - want)[:20]}"
    assert len(CELLS) == len(got) == 2 * (len(um.cells()) + len(um.json_cells()))
    assert {c.key[1] for c in CELLS} == set(um.PROVIDERS)  # Antigravity included


def test_provenance():
    builds = ur.builds()
    assert set(builds) == set(ur.VERSIONS)
    for v, b in builds.items():
        assert b["commit"] == ur.COMMITS[v] and re.fullmatch(r"[0-9a-f]{64}", b["binary_sha256"])
    for c in CELLS:
        v, alias, _, kind = c.key
        api, meta = c.api, c.meta
        assert meta["cpa"] == {k: builds[v][k] for k in ("version", "commit", "binary_sha256")}
        assert meta["conv"] == ur.conv_of(alias, api, kind, c.stream)
        path, body = um.request(api, alias, kind, meta["conv"], c.stream, tag=ur.tag(alias, api, kind, c.stream))
        if api == "responses_ws":
            body.pop("stream")
        assert (meta["request"]["path"], meta["request"]["body"]) == (path, body)
        assert meta["calls"], f"{c.key}: no provider call captured"
        for call, pbody in c.calls:
            assert call["provider"] == um.PROVIDER_OF[alias] and call["status"] == 200
            assert call["ended"] == ("cut" if kind == "cut" else "complete")
            assert pbody, c.key
            assert f"[cell:{ur.tag(alias, api, kind, c.stream)}]" in str(call["body"])  # the call this turn caused
        if alias == "up-antigravity":  # the Code Assist envelope, on CPA's own paths
            stream_path, json_path = "/v1internal:streamGenerateContent?alt=sse", "/v1internal:generateContent"
            assert c.meta["calls"][0]["path"] == (stream_path if c.stream else json_path)
            assert pbody.startswith(b'data: {"response":' if c.stream else b'{"response":'), pbody[:60]


def test_no_credentials_in_any_capture():
    files = [p for p in ur.ROOT.rglob("*") if p.is_file()]
    assert len(files) > 2 * len(um.cells())
    leaks = {str(p.relative_to(ur.ROOT)): k for p in files for k in ur.SECRETS if k.encode() in p.read_bytes()}
    assert leaks == {}
    for c in CELLS:
        assert set(c.meta["request"]["headers"]) <= {"content-type"}
        assert set(c.meta["response"]["headers"]) <= ur.RESPONSE_HEADERS
        for call, _ in c.calls:
            assert set(call["headers"]) <= fu.KEPT_HEADERS and set(call["response_headers"]) <= ur.RESPONSE_HEADERS
            assert "key=" not in call["path"]


@pytest.mark.parametrize("cell", CELLS, ids=_ids(CELLS))
def test_both_legs_replay_tells_the_providers_truth(cell):
    """The provider call through the upstream leg, then CPA's recorded client response
    through the client leg: the client hears the provider's truth (its rules, not this
    code's output) and exactly what the live run through both legs heard. CPA's bytes
    themselves show the build's measured raw defect."""
    v, alias, _, kind = cell.key
    api, stream, meta = cell.api, cell.stream, cell.meta
    key = f"{alias}/{api}/{kind}"
    status = meta["response"]["status"]
    out = rp.replay(meta, cell.body, cell.calls)
    got = um.truth(api, status, out, stream)
    want = um.expected(alias, kind, meta["conv"])
    assert um.cell(got, want) == ur.legs_label(key, stream), (got, want, out[-800:])
    assert got == meta["outcome"]["legs"], (got, meta["outcome"]["legs"])
    broken = b"\n<connection broken>" if meta["ended"] == "broken" else b""
    captured = um.truth(api, status, cell.body + broken, stream)
    assert captured == meta["outcome"]["captured"]
    raw = um.normalized({key: um.cell(captured, want)})[key]
    assert raw == um.normalized({key: ur.raw_table(v, stream).get(key, "ok")})[key], (raw, captured)
