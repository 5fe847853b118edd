"""Saved flows: recordings become client-leg flows the addon repairs when loaded, with
the original kept so the diff view works offline (``just offline``)."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from mitmproxy import contentviews, io
from mitmproxy.test import taddons
from streamfix.addons import sseview
from support import REPAIR_ADDON, ROOT, ChunkedUpstream, run_mitmdump, start_mitmdump
from support import dechunk as _dechunk

from streamfix.recordings import load, to_flow


def read(path: Path) -> list:
    with path.open("rb") as fp:
        return list(io.FlowReader(fp).stream())


@pytest.mark.e2e
def test_loaded_with_both_listeners_it_is_repaired_and_keeps_its_original(tmp_path: Path) -> None:
    """As in ``scripts/sidecar --web --upstream-proxy ... -- -r FILE``: with a regular
    listener next to the reverse one, only client-leg flows are repaired, and a
    recording's flow is one. The diff view then shows the change, not a hint."""
    rec = load("responses-devin-truncated")
    src, out = tmp_path / "in.flow", tmp_path / "out.flow"
    to_flow(rec, src)
    r = run_mitmdump(
        tmp_path / "confdir",
        # -n: no listener is opened; the two modes only configure the addon
        "--mode", "reverse:http://127.0.0.1:8317@127.0.0.1:1", "--mode", "regular@127.0.0.1:2",
        "-nr", str(src), "--set", "streamfix_keep_bodies=true", "-w", str(out),
    )  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    (f,) = read(out)
    assert f.response.raw_content == rec.expected
    assert f.metadata[sseview.ORIGINAL] == rec.body
    assert f.comment.split("\n")[1].startswith("verdict max_tokens; fixed status 3")
    with taddons.context():
        md = contentviews.make_metadata(f.response, f)
        view = contentviews.registry.get_view(f.response.raw_content, md)
        assert view.name == "streamfix diff"
        text = view.prettify(f.response.raw_content, md)
    assert "~ #9 response.completed -> response.incomplete" in text.splitlines()


@pytest.mark.e2e
def test_just_offline_keeps_bodies() -> None:
    """The recipe's mitmdump line keeps bodies (else the diff view has nothing)."""
    recipe = (ROOT / "justfile").read_text().split("\noffline NAME:\n", 1)[1].split("\n\n", 1)[0]
    line = next(x for x in recipe.splitlines() if "mitmdump" in x)
    assert "streamfix_keep_bodies=true" in line and str(REPAIR_ADDON.relative_to(ROOT)) in line


# --- -w on live streams: a completed one, an upstream reset, a client abort -------------


class Upstream(ChunkedUpstream):
    """HTTP/1.1 upstream for ``/<how>/v1/responses``: a recording's events, one chunk each
    20 ms apart; ``complete`` ends the chunked body, ``reset`` sends :data:`CUT` events and
    resets the connection (SO_LINGER 0), ``stall`` sends :data:`CUT` events and waits (the
    client aborts meanwhile)."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        super().__init__()

    def respond(self, conn: socket.socket, path: str, body: bytes) -> None:
        how = path.split("/")[1]
        self.start_sse(conn)
        for ev in self.events if how == "complete" else self.events[:CUT]:
            self.chunk(conn, ev)
            time.sleep(0.02)
        if how == "complete":
            conn.sendall(b"0\r\n\r\n")
            time.sleep(0.2)
        elif how == "reset":
            time.sleep(0.3)
            self.reset(conn)
        else:
            time.sleep(5)  # the client aborts meanwhile; mitmproxy then closes this side


CUT = 5
"""Events an early-ended stream sends before the cut."""


def _request(port: int, how: str, body: bytes, abort: str | None = None) -> bytes:
    """POST and read the raw response; ``abort`` (``fin``/``rst``): close the connection
    once :data:`CUT` events have arrived."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall(
            b"POST /%s/v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (how.encode(), len(body), body)
        )
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
            if abort and _dechunk(got).count(b"\n\n") >= CUT:
                if abort == "rst":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
        return got
    finally:
        s.close()


@pytest.mark.e2e
def test_w_saves_both_bodies_of_complete_and_early_ended_streams(tmp_path: Path, capsys) -> None:
    """``mitmdump -s addons/repair.py -w FILE`` with no other option: every
    streamed flow is saved with the body the client got and the gateway's original
    (``streamfix.original``), also when the stream ended early: the upstream reset, the
    client closed (FIN) or reset (RST) its connection mid-body. Before, such a flow kept
    only its comment, with an empty body."""
    from streamfix.wire.contract import check

    rec = load("responses-devin-toolcall")
    events = [e + b"\n\n" for e in rec.body.split(b"\n\n") if e]
    up = Upstream(events)
    out = tmp_path / "saved.flow"
    mitm, port = start_mitmdump(f"http://127.0.0.1:{up.port}", tmp_path / "conf", "-w", str(out))
    try:
        mitm.wait_for("flows are saved .-w.: keeping each streamed flow's bodies")
        got = {}
        for how, abort in [("complete", None), ("reset", None), ("stall", "fin"), ("stall", "rst")]:
            start = len(mitm.lines)
            got[how, abort] = _dechunk(_request(port, how, rec.request_body, abort))
            if how != "complete":
                mitm.wait_for("ended early after", start=start, timeout=15)
            else:
                time.sleep(0.3)
    finally:
        mitm.stop()
        up.close()
    flows = read(out)
    assert len(flows) == 4, [f.comment for f in flows]
    for f, ((how, abort), client_got) in zip(flows, got.items(), strict=True):
        sent = b"".join(events if how == "complete" else events[:CUT])
        assert f.metadata[sseview.ORIGINAL] == sent, (how, abort)
        assert f.response.raw_content == client_got and client_got, (how, abort)
        if how == "complete":
            assert f.error is None and check("responses", client_got) == []
            assert client_got != sent  # repaired: the body is the repaired one, not the original
        else:
            assert f.error is not None and "ended early after 5 events" in f.comment, (how, abort, f.comment)
            assert "client aborted" in f.comment if abort else "upstream reset" in f.comment
    # and the offline checker reads both bodies of each: none is missing, the gateway's
    # original of the completed stream has the violations the client's body no longer has
    from streamfix import check as offline

    assert offline.main([str(out), "--both"]) == 1  # the early-ended ones have no terminal
    lines = capsys.readouterr().out.splitlines()
    assert not [x for x in lines if "no body saved" in x]
    heads = [x.split(" [responses]", 1)[1] for x in lines if " [responses]" in x]
    assert heads[0].startswith(" gateway's original: ") and "violation" in heads[0]
    assert heads[1].startswith(" as the client got it: ok")
    assert len(heads) == 8 and all("violation" in x for x in heads[2:])  # cut: no terminal
