"""An upstream cut mid-stream (TCP reset, or a close without the last chunk) through real
mitmdump: every byte the repairer need not hold reaches the client, repaired.

mitmproxy 12.3.1 ends such a flow without a last call of the stream callable (the error
hook, then ``SendHttp(ResponseProtocolError)`` closes the client connection), so what a
repairer holds at that moment would be lost; ``addons/salvage.py`` sends it first. The
repairers also hold only what a repair needs: a chat finish chunk only while a later usage
can still change the verdict, a tool_use stop only while its input is not whole JSON. The
upstream here sends each event as its own chunk, waits until mitmdump has forwarded them,
then cuts. Where a repair must hold (a nameless tool-call header, a finish chunk that
usage may still turn into ``length``, an unfinished event), the held events arrive
repaired as far as a cut stream allows (a nameless header at the gateway's step index 1
goes out at index 0: its name never came, so it stays nameless, as at the end of a
stream), the unfinished event as it came; with ``streamfix_salvage=false`` they are lost
and logged. Whatever the client gets passes the contract's prefix rules
(``wire.contract.check(..., prefix=True)``), but for the one the gateway broke and no
repair can mend (a first tool-call header without a name that never came).
"""

from __future__ import annotations

import socket
import time

import orjson
import pytest
from cutcases import CASES, SALVAGED, CuttingUpstream
from streamfix.wire.apis import api_for_path, stream_repairer
from streamfix.wire.contract import check
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.verdict import Verdict
from support import dechunk as _dechunk
from support import show_logs_on_failure, start_mitmdump

pytestmark = pytest.mark.e2e


TOOL_NAME = "chat.tool_name"
"""The gateway's own defect a cut stream keeps: the name never came, none is made up."""


def _prefix_ok(api: str, got: bytes, sent: bytes) -> None:
    """The client's partial stream satisfies every rule its prefix can, but
    for a first tool-call header without a name, and only where the gateway sent one."""
    bad = {v.rule for v in check(api, got, prefix=True)}
    assert bad <= {TOOL_NAME}, f"the client's partial stream breaks {sorted(bad)}"
    if bad:
        assert TOOL_NAME in {v.rule for v in check(api, sent, prefix=True)}


def _post(port: int, path: str, body: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(
            b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (path.encode(), len(body), body)
        )
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
    return got


def _expected(path: str, request: dict, events: list[bytes], delivered: int | None) -> bytes:
    """The repairer's output for the events, fed one by one (no end of stream); for a case
    that must hold, the first ``delivered`` events fed alone."""
    api = api_for_path(path)
    rep = stream_repairer(api, Rules(), FlowContext(model="m", request=request), Verdict())
    from streamfix.wire.stream import StreamRepair

    s = StreamRepair(rep)
    out = b"".join(s.feed(ev) for ev in events[: delivered if delivered is not None else len(events)])
    if delivered is None:
        assert not rep.held, "this case was meant to hold nothing"
    return out


@pytest.fixture(scope="module", params=["salvage", "no-salvage"])
def proxy(tmp_path_factory: pytest.TempPathFactory, request):
    up = CuttingUpstream()
    d = tmp_path_factory.mktemp("cut")
    args = () if request.param == "salvage" else ("--set", "streamfix_salvage=false")
    # the turn log says how many bytes salvage delivered (streamfix_metrics counts them too)
    args += ("--set", f"streamfix_log={d / 'turns.jsonl'}")
    mitm, port = start_mitmdump(f"http://127.0.0.1:{up.port}", d / "conf", *args)
    mitm.turns = d / "turns.jsonl"
    try:
        yield mitm, port, request.param == "salvage"
    finally:
        mitm.stop()
        up.close()


@pytest.mark.parametrize("cut", ["reset", "close"])
@pytest.mark.parametrize("case", list(CASES))
def test_cut_upstream_loses_nothing(proxy, request, case: str, cut: str) -> None:
    """Every byte the upstream sent before the cut reaches the client: repaired where the
    repair could decide, as it came where it was held when the upstream failed
    (``addons/salvage.py``). With ``streamfix_salvage=false`` the held bytes are lost and
    logged, as mitmproxy alone would have it."""
    mitm, port, salvage = proxy
    show_logs_on_failure(request, {"mitmdump": mitm})
    path, req, events, delivered = CASES[case]
    start = len(mitm.lines)
    raw = _post(port, f"/{case}/{cut}{path}", orjson.dumps(req))
    assert not raw.endswith(b"0\r\n\r\n"), "a cut upstream must not look complete to the client"
    got = _dechunk(raw)
    want = _expected(path, req, events, delivered)
    if delivered is None:
        assert got == want
        # every upstream event arrived, each as repaired (or as it came)
        assert got.count(b"\n\n") == len(events)
        assert b'"index":2' not in got  # the step index was renumbered
    elif salvage and case in SALVAGED:
        # the held events arrive repaired as far as a cut stream allows (hand-written)
        assert got == b"".join(SALVAGED[case])
        assert got.startswith(want)
        m = mitm.wait_for(
            r"(\d+) bytes the repair still held .* sent before the connection closed", timeout=10, start=start
        )
        turn = _last_turn(mitm.turns, f"/{case}/{cut}{path}")
        assert turn["salvaged"] == int(m.group(1)) == len(got) - len(want) > 0, turn
    elif salvage:
        # the events before the held one pass unchanged in these cases; the held ones
        # arrive byte for byte (no rule changed them), and the unfinished one as it came
        assert want == b"".join(events[:delivered])
        assert got == b"".join(events)
        m = mitm.wait_for(
            r"(\d+) bytes the repair still held .* sent before the connection closed", timeout=10, start=start
        )
        turn = _last_turn(mitm.turns, f"/{case}/{cut}{path}")
        assert turn["salvaged"] == int(m.group(1)) == len(got) - len(want) > 0, turn
    else:
        mitm.wait_for(r"not delivered: \d+ held event", timeout=10, start=start)
        assert got == want
        if case not in SALVAGED:
            assert want == b"".join(events[:delivered])
    _prefix_ok(api_for_path(path), got, b"".join(events))
    log = "\n".join(mitm.lines[start:])
    assert "Traceback" not in log and "has crashed" not in log
    if salvage:
        assert "not delivered" not in log
    else:
        assert "salvaged" not in _last_turn(mitm.turns, f"/{case}/{cut}{path}")


def _last_turn(path, request_path: str, timeout: float = 10.0) -> dict:
    """The turn log line of the last flow to ``request_path`` (written at its error hook)."""

    end = time.monotonic() + timeout
    while True:
        lines = [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []
        mine = [t for t in lines if t["path"] == request_path.split("?", 1)[0]]
        if mine or time.monotonic() > end:
            assert mine, f"no turn log line for {request_path}"
            return mine[-1]
        time.sleep(0.05)
