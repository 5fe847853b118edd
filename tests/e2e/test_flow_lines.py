"""mitmdump's own flow lines for streamed flows (addons/flowlines.py), in a real mitmdump."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from support import mitmdump_args, start_replay

from streamfix.procs import Proc


@pytest.mark.e2e
def test_a_streamed_flow_line_says_what_was_streamed_not_content_missing(tmp_path: Path):
    """mitmdump prints ``(content missing)`` for every body it did not keep, which every
    stream is: the line says the size the client got and the receipt instead."""
    replay, upstream = start_replay()
    cmd = [a if a != "flow_detail=0" else "flow_detail=1" for a in mitmdump_args(tmp_path / "conf")]
    mitm = Proc([*cmd, "--mode", f"reverse:{upstream}@127.0.0.1:0"])
    try:
        proxy = "http://127.0.0.1:" + mitm.wait_for(r"listening at 127\.0\.0\.1:(\d+)", 60).group(1)
        for name, api in (("responses-devin-toolcall", "/v1/responses"), ("chat-devin-index1", "/v1/chat/completions")):
            r = httpx.post(proxy + api, json={"model": name, "stream": True, "input": "hi", "messages": []},
                           timeout=30, trust_env=False)  # fmt: skip
            assert r.status_code == 200
            sent = len(r.content)
        deadline = time.monotonic() + 20
        while mitm.output.count(" << ") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        out = mitm.output
    finally:
        mitm.stop()
        replay.stop()
    lines = [x for x in out.splitlines() if " << " in x]
    assert len(lines) == 2, out
    assert all("(content missing)" not in x for x in lines), lines
    assert all(" 200 OK streamed " in x for x in lines), lines
    assert any("status" in x for x in lines[:1]), lines  # the receipt: the rule that fired
    from mitmproxy.utils import human

    assert human.pretty_size(sent) in lines[1], (sent, lines)
