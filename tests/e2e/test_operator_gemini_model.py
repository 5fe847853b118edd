"""Gemini names its model in the URL path, not the body: the turn log, the
metrics' ``model`` label and ``streamfix usage`` have it, from a real mitmdump in front of
the replay upstream (streamed, and the JSON form of the same request). The recordings'
paths, read by hand: ``gemini-clean`` asks ``/v1beta/models/gemini-2.5-flash:...``,
``gemini-devin-truncated`` ``/v1beta/models/devin/swe-2:...`` (a model id with a slash).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from streamfix.wire.apis import model_in_path
from support import ROOT, child_env, replay_and_proxy

from streamfix.recordings import load


def test_model_in_path() -> None:
    assert model_in_path("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse") == "gemini-2.5-pro"
    assert model_in_path("/v1beta/models/devin/swe-2:generateContent") == "devin/swe-2"
    assert model_in_path(
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent"
    ) == ("gemini-2.0-flash")
    assert model_in_path("/v1beta/models/gemini%2D2.5:generateContent") == "gemini-2.5"
    assert model_in_path("/v1beta/models/:generateContent") is None
    assert model_in_path("/v1/chat/completions") is None
    assert model_in_path("/v1/models/gpt-4o") is None  # not a Gemini call


@pytest.mark.e2e
def test_gemini_turns_have_their_model(tmp_path: Path) -> None:
    log = tmp_path / "turns.jsonl"
    conf = tmp_path / "conf"
    conf.mkdir()
    with replay_and_proxy(None, conf, "--set", f"streamfix_log={log}", "--set", "streamfix_metrics=127.0.0.1:0") as (
        _,
        _,
        mitm,
        proxy,
    ):
        metrics = mitm.wait_for(r"streamfix: metrics at (http://\S+)/metrics").group(1)
        for name in ("gemini-clean", "gemini-devin-truncated"):
            rec = load(name)
            r = httpx.post(proxy + rec.request["path"], content=rec.request_body,
                           headers={"content-type": "application/json", "x-streamfix-recording": name,
                                    "x-streamfix-delay-ms": "0"}, timeout=30, trust_env=False)  # fmt: skip
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 30
        while len(log.read_bytes().splitlines() if log.exists() else []) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        exposition = httpx.get(metrics + "/metrics", timeout=10, trust_env=False).text
    turns = [json.loads(x) for x in log.read_bytes().splitlines()]
    assert [(t["api"], t["model"]) for t in turns] == [("gemini", "gemini-2.5-flash"), ("gemini", "devin/swe-2")]
    for model in ("gemini-2.5-flash", "devin/swe-2"):
        assert re.search(rf'^streamfix_turns_total\{{api="gemini",[^}}]*model="{re.escape(model)}"[^}}]*\}} 1\.0$',
                         exposition, re.MULTILINE), exposition  # fmt: skip
    assert 'model="none"' not in exposition
    usage = subprocess.run([sys.executable, "-m", "streamfix.usage", "--json", str(log)], capture_output=True,
                           text=True, timeout=60, cwd=ROOT, env=child_env())  # fmt: skip
    assert usage.returncode == 0, usage.stderr
    assert sorted(r["model"] for r in json.loads(usage.stdout)["rows"]) == ["devin/swe-2", "gemini-2.5-flash"]
