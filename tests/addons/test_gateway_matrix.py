"""The gateway matrix (tests/support/gateway_matrix.py): every cell of the real LiteLLM proxy
and Portkey gateway, captured into recordings/gateways/ (tests/support/gateway_recordings.py),
replayed in process through the client leg (tests/support/matrix_replay.py) and through both
legs (tests/support/upstream_replay.py). The live run of every cell, on the installed
gateways: tests/e2e/test_gateways_live.py.

- the captures cover the matrix, cell for cell, with each gateway's provenance (its version
  and the sha256 of the pin file it was installed from);
- each cell's raw stream, replayed, tells the client what the live sidecar told it, on each
  leg; any reads give the same bytes; the repair is idempotent; a spec-correct stream
  passes byte for byte on both legs;
- no stream the gateway got right is made wrong; every cell tells its turn's truth through
  the client leg but those the client stream cannot show, and through both legs but those
  listed (tests/support/gateway_truth.py: exact lists, each entry with why); LiteLLM's
  through both legs: every turn;
- no credential is in any capture; docs/gateways.md's matrix is generated from them.
"""

from __future__ import annotations

import gateway_matrix as gm
import gateway_recordings as gr
import gateway_truth
import matrix_replay as rp
import pytest
import realcpa_matrix as m
import realgateways as rg
import upstream_replay

CELLS = gr.load()
BY_KEY = {c.key: c for c in CELLS}


def _ids(cells: list[gr.Cell]) -> list[str]:
    return ["/".join(c.key) for c in cells]


def test_the_captures_cover_the_matrix():
    want, got = set(gm.cells()), set(BY_KEY)
    assert not (want - got), (
        f"cells not captured: {sorted(want - got)[:20]} (python tests/support/gateway_matrix.py capture)"
    )
    assert not (got - want), f"captures of cells the matrix does not have: {sorted(got - want)[:20]}"
    assert {c.key[0] for c in CELLS} == set(rg.GATEWAYS)


def test_provenance():
    gws = gr.gateways()
    assert set(gws) == set(rg.GATEWAYS)
    for g, info in gws.items():
        assert info == gr.gateway_info(g), f"{g}: captured from another install than its pins say: capture again"
    for c in CELLS:
        g, p, api, t = c.key
        assert c.meta["gateway"] == gws[g]
        assert c.meta["consistent"], f"{c.key}: the gateway answered the legs differently: capture it again"
        assert c.meta["request"]["body"] == gm.request_body(g, p, api, t, gm.nonce(g, p, api, t, "raw"))
        assert c.meta["calls"], c.key
        assert {call["api"] for call in c.meta["calls"]} == {rg.provider_api(g, p, api)}, c.key


def test_no_credentials_in_any_capture():
    for f in sorted(gr.ROOT.rglob("*")):
        if f.is_file():
            text = f.read_bytes().decode("utf-8", "replace")
            assert not [k for k in gr.SECRETS if k in text], f
            assert "key=" not in text or f.suffix == ".body", f
    for c in CELLS:
        assert set(c.meta["request"]["headers"]) <= gr.KEPT_HEADERS
        for call in c.meta["calls"]:
            assert set(call["headers"]) <= gr.KEPT_HEADERS and "key=" not in call["path"]


@pytest.mark.parametrize("cell", CELLS, ids=_ids(CELLS))
def test_replay_tells_what_the_live_sidecar_told(cell):
    """The captured raw stream, in process, through the client leg and through both legs (its
    provider call on the upstream listener first), as the live sidecars turned the live one."""
    meta, body, api = cell.meta, cell.body, cell.api
    st, req = meta["response"]["status"], meta["request"]["body"]
    assert m.same(m.outcome(api, body, st, req), meta["outcome"]["raw"])
    client = rp.replay(meta, body)
    assert m.same(m.outcome(api, client, st, req), meta["outcome"]["client"])
    assert rp.replay(meta, body, chunk=7) == client  # any reads give the same bytes
    assert rp.replay(meta, client) == client  # idempotent
    both = upstream_replay.replay(meta, body, cell.calls())
    assert m.same(m.outcome(api, both, st, req), meta["outcome"]["both"])
    if meta["kind"] == "clean":  # a spec-correct stream that tells the truth passes byte for byte
        assert client == body and both == body


def _untold(leg: str) -> dict[tuple[str, str, str, str], dict]:
    out = {}
    for c in CELLS:
        o = c.meta["outcome"]
        if not gm.told(*c.key, o[leg], o[f"{leg}_ended"]):
            out[c.key] = o[leg]
    return out


@pytest.mark.parametrize(("leg", "listed"), [("client", gateway_truth.CLIENT_LEG), ("both", gateway_truth.BOTH_LEGS)])
def test_every_cell_tells_its_truth_or_says_why(leg, listed):
    """Through the sidecar every cell tells the client its turn's truth, but those listed,
    each with why (the lists are exact)."""
    untold = _untold(leg)
    unexplained = {k: v["ending"] for k, v in untold.items() if k not in listed}
    assert not unexplained, f"cells not told true through the {leg} leg, with no reason: {unexplained}"
    stale = sorted(set(listed) - set(untold))
    assert not stale, f"gateway_truth lists cells told true through the {leg} leg: {stale}"
    assert all(why and not why.startswith("(") for why in listed.values())


def test_litellm_through_both_legs_tells_every_turn():
    assert not [k for k in _untold("both") if k[0] == "litellm"]


def test_no_stream_the_gateway_got_right_is_made_wrong():
    for c in CELLS:
        o = c.meta["outcome"]
        if gm.told(*c.key, o["raw"], c.meta["ended"]):
            for leg in ("client", "both"):
                assert gm.told(*c.key, o[leg], o[f"{leg}_ended"]), (c.key, leg, o[leg]["ending"])
                assert not (set(o[leg]["violations"]) - set(o["raw"]["violations"])), (c.key, leg)


def test_the_docs_matrix_is_generated_from_the_captures():
    assert gr.section() in gr.DOC.read_text(), (
        "docs/gateways.md's matrix is stale: python tests/support/gateway_matrix.py docs"
    )
