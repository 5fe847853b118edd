"""mitmdump's own flow lines for streamed flows (addons/flowlines.py), in a real mitmdump."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from mitmproxy.utils import human
from support import ChunkedUpstream, replay_and_proxy, start_mitmdump


@pytest.mark.e2e
def test_a_streamed_flow_line_says_what_was_streamed_not_content_missing(tmp_path: Path):
    """mitmdump prints ``(content missing)`` for every body it did not keep, which every
    stream is: the line says the size the client got and the receipt instead."""
    with replay_and_proxy(None, tmp_path / "conf", "--set", "flow_detail=1") as (_, _, mitm, proxy):
        for name, api in (("responses-devin-toolcall", "/v1/responses"), ("chat-devin-index1", "/v1/chat/completions")):
            r = httpx.post(proxy + api, json={"model": name, "stream": True, "input": "hi", "messages": []},
                           timeout=30, trust_env=False)  # fmt: skip
            assert r.status_code == 200
            sent = len(r.content)
        deadline = time.monotonic() + 20
        while mitm.output.count(" << ") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        out = mitm.output
    lines = [x for x in out.splitlines() if " << " in x]
    assert len(lines) == 2, out
    assert all("(content missing)" not in x for x in lines), lines
    # as read off a run: "<< 200 OK streamed 4.6k (the gateway's 4.5k), fixed schema_fill 3, status 3 (6 events,
    # responses)" and "<< 200 OK streamed 1.8k, fixed tool_index 3 (3 events, chat)"
    assert "200 OK streamed " in lines[0] and "(the gateway's " in lines[0] and "status 3" in lines[0], lines
    assert f"200 OK streamed {human.pretty_size(sent)}, fixed tool_index 3 (3 events, chat)" in lines[1], lines


class _CutStream(ChunkedUpstream):
    """Two chat chunks, then a TCP reset mid-body."""

    def respond(self, conn, path, body):
        self.start_sse(conn)
        chunk = (
            b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
        )
        self.chunk(conn, chunk)
        self.chunk(conn, chunk)
        self.reset(conn)


@pytest.mark.e2e
def test_a_stream_cut_short_has_its_line_too(tmp_path: Path):
    """An upstream reset mid-body: mitmdump's error hook prints the response line as well;
    it says what was streamed and that the flow ended early (as read off a run: "<< 200 OK
    streamed 202b, ended early after 202 bytes, no terminal event; upstream reset (...)"),
    then mitmdump's own error line."""
    up = _CutStream()
    try:
        mitm, port = start_mitmdump(f"http://127.0.0.1:{up.port}", tmp_path / "conf", "--set", "flow_detail=1")
        try:
            with pytest.raises(httpx.HTTPError):
                httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "m", "stream": True},
                           timeout=30, trust_env=False)  # fmt: skip
            deadline = time.monotonic() + 20
            while mitm.output.count(" << ") < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            out = mitm.output
        finally:
            mitm.stop()
    finally:
        up.close()
    lines = [x for x in out.splitlines() if " << " in x]
    assert lines and "(content missing)" not in lines[0], out
    assert " 200 OK streamed 202b, ended early after 202 bytes, no terminal event; upstream reset" in lines[0], lines
