"""streamfix.capture through real processes: the command line, and round trips.

Round trip: recordings are served by the replay upstream through mitmdump
(bodies kept, ``-w``, redaction off so the saved flows do hold the client's key); each
saved client flow is captured; the captured recordings are served by a second replay
upstream through a second mitmdump, and the client gets the same repaired bytes as the
first time (``created_at`` a repair fills is the request's second, so it is compared
apart); offline (``to-flow`` + ``mitmdump -nr``) the captured recording repairs to the
original flow's repaired body byte for byte.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from capturekit import GKEY, KEY, all_bytes, flow_of
from mitmproxy import io
from support import (
    ROOT,
    assert_same,
    child_env,
    fetch,
    run_mitmdump,
    show_logs_on_failure,
    start_mitmdump,
    start_replay,
)  # fmt: skip

from streamfix import capture as cap
from streamfix.recordings import load, to_flow


def test_cli_picks_one_client_flow(tmp_path: Path):
    flows = tmp_path / "two.flow"
    with flows.open("wb") as fp:
        w = io.FlowWriter(fp)
        for name in ("chat-devin-index1", "messages-devin-truncated"):
            rec = load(name)
            w.add(flow_of(name, rec.body, rec.expected))
    run = lambda *a: subprocess.run([sys.executable, "-m", "streamfix.capture", *a], capture_output=True, check=False,
                                    text=True, cwd=ROOT, env=child_env(), timeout=60)  # fmt: skip
    r = run(str(flows), "x", "--out", str(tmp_path / "recs"))
    assert r.returncode == 2 and "2 client flows" in r.stderr and "/v1/messages" in r.stderr
    r = run(str(flows), "x", "--out", str(tmp_path / "recs"), "--index", "1")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "recs/x/recording.json").read_text())["api"] == "messages"
    h = run("--help")
    assert h.returncode == 0 and "--index" in h.stdout and "recordings/ entry" in h.stdout


# --- round trips through real processes ---------------------------------------------------
ROUND_TRIP = ["responses-devin-truncated", "chat-devin-truncated-toolcall", "messages-devin-truncated",
              "gemini-devin-truncated", "responses-devin-nonstream", "chat-openai-clean"]  # fmt: skip


def _send(port: int, name: str, path: str, body: bytes, headers: dict) -> bytes:
    r = fetch(f"http://127.0.0.1:{port}{path}", body=body,
              headers={"content-type": "application/json", "x-streamfix-recording": name,
                       "x-streamfix-delay-ms": "1", **headers})  # fmt: skip
    assert r.status == 200
    return r.body


def _norm(body: bytes) -> bytes:
    return re.sub(rb'"created_at":\d+', b'"created_at":0', body)


@pytest.mark.e2e
def test_round_trip(tmp_path: Path, request: pytest.FixtureRequest):
    # 1. the originals, through a sidecar that keeps bodies and does not redact
    saved = tmp_path / "saved.flow"
    replay, url = start_replay()
    procs = {"replay": replay}
    try:
        mitm, port = start_mitmdump(url, tmp_path / "conf", "--set", "streamfix_keep_bodies=true",
                                    "--set", "streamfix_redact=false", "-w", str(saved))  # fmt: skip
        procs["mitmdump"] = mitm
        show_logs_on_failure(request, procs)
        first = {}
        for name in ROUND_TRIP:
            rec = load(name)
            path = rec.request["path"] + ("&key=" + GKEY if "?" in rec.request["path"] else "")
            first[name] = _send(port, name, path, rec.request_body, {"authorization": f"Bearer {KEY}"})
        mitm.stop()
    finally:
        for p in procs.values():
            p.stop()
    assert KEY.encode() in saved.read_bytes()  # the saved flows do hold the key: capture must leave it out

    # 2. capture each
    recs = tmp_path / "recs"
    with saved.open("rb") as f:
        flows = cap.client_flows(list(io.FlowReader(f).stream()))
    assert len(flows) == len(ROUND_TRIP)
    for name, flow in zip(ROUND_TRIP, flows):
        cap.capture(flow, "cap-" + name, recs, saved.name)
    for d in recs.iterdir():
        assert KEY.encode() not in all_bytes(d) and GKEY.encode() not in all_bytes(d), d

    # 3. the captured recordings through a fresh replay upstream and mitmdump
    replay, url = start_replay(recs)
    procs = {"replay (captured)": replay}
    try:
        mitm, port = start_mitmdump(url, tmp_path / "conf2")
        procs["mitmdump (captured)"] = mitm
        show_logs_on_failure(request, procs)
        for name in ROUND_TRIP:
            c = load("cap-" + name, recs)
            again = _send(port, c.name, c.request["path"], c.request_body, {})
            assert_same(_norm(again), _norm(first[name]))
            if load(name).kind == "clean":
                assert c.kind == "clean" and again == first[name] == load(name).body
            else:
                assert c.kind == "buggy" and again != c.body
    finally:
        for p in procs.values():
            p.stop()

    # 4. offline: to-flow + mitmdump -nr gives the original flow's repaired body exactly
    src, out = tmp_path / "captured.flow", tmp_path / "captured.out.flow"
    with src.open("wb") as all_flows:
        for name in ROUND_TRIP:
            one = tmp_path / f"{name}.flow"
            to_flow(load("cap-" + name, recs), one)
            all_flows.write(one.read_bytes())  # a flow file is a sequence of flows
    r = run_mitmdump(tmp_path / "conf3", "-nr", str(src), "-w", str(out))
    assert r.returncode == 0, r.stderr + r.stdout
    with out.open("rb") as f:
        done = list(io.FlowReader(f).stream())
    assert len(done) == len(flows)
    for d, flow in zip(done, flows):
        assert_same(d.response.get_content(), flow.response.get_content())
