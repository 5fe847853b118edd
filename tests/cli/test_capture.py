"""streamfix.capture: saved flow -> recording, secrets left out (in process; the command line
and the round trips through real processes are in test_capture_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capturekit import GKEY, KEY, all_bytes, flow_of

from streamfix import capture as cap
from streamfix.recordings import load


def test_capture_trims_and_redacts(tmp_path: Path):
    rec = load("responses-devin-truncated")
    f = flow_of(rec.name, rec.body, rec.expected, path="/v1/responses?key=" + GKEY)
    d = cap.capture(f, "cap", tmp_path, "x.flow")
    meta = json.loads((d / "recording.json").read_text())
    assert KEY.encode() not in all_bytes(d) and GKEY.encode() not in all_bytes(d)
    assert (d / "response.body").read_bytes() == rec.body and (d / "expected.body").read_bytes() == rec.expected
    assert meta["kind"] == "buggy" and meta["api"] == "responses" and meta["started_at"] == 1789012345
    body = meta["request"]["body"]
    assert set(body) == {"model", "stream", "max_output_tokens", "tools"}  # the prompt (input) is gone
    assert body["max_output_tokens"] == 400 and body["tools"] == rec.request["body"]["tools"]
    assert meta["request"]["headers"] == {"content-type": "application/json"}
    assert meta["request"]["path"].startswith("/v1/responses?key=<redacted:")
    assert meta["response"]["headers"] == {"content-type": "text/event-stream"}
    with pytest.raises(cap.CaptureError, match="exists"):
        cap.capture(f, "cap", tmp_path, "x.flow")


def test_clean_flow_and_unrepaired_flow(tmp_path: Path):
    rec = load("chat-openai-clean")
    d = cap.capture(flow_of(rec.name, None, rec.body), "c", tmp_path, "x.flow")
    meta = json.loads((d / "recording.json").read_text())
    assert meta["kind"] == "clean" and not (d / "expected.body").exists()
    assert (d / "response.body").read_bytes() == rec.body


def test_refuses_without_a_body_or_without_the_original(tmp_path: Path):
    rec = load("chat-devin-index1")
    with pytest.raises(cap.CaptureError, match="keep-bodies"):
        cap.capture(flow_of(rec.name, None, None), "a", tmp_path, "x.flow")
    f = flow_of(rec.name, None, rec.expected)
    f.marked = ":wrench:"
    with pytest.raises(cap.CaptureError, match="kept no original"):
        cap.capture(f, "b", tmp_path, "x.flow")
    leaky = flow_of(rec.name, rec.body.replace(b"interaction", KEY.encode()), None)
    with pytest.raises(cap.CaptureError, match="credential"):
        cap.capture(leaky, "c", tmp_path, "x.flow")
    assert list(tmp_path.iterdir()) == []
