"""A gateway that does not answer: the sidecar launcher in front of a port
nobody listens on. Every client gets an HTTP 502 in its own API's error shape with the
reason, never an empty reply or a hang; the turn log has an ``upstream_error`` line per
request; the launcher warned at startup. Real clients: openai-python, the AI SDK
(``tests/clients``: OpenAI Responses and chat, Anthropic, Google providers).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest
from support import Proc, child_env, free_port, show_logs_on_failure

pytestmark = pytest.mark.e2e

import runners

REASON = "does not answer (Connection refused)"


@pytest.fixture(scope="module")
def dead(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dead")
    (tmp / "home").mkdir()
    dead_port, listen = free_port(), free_port()
    log = tmp / "turns.jsonl"
    proc = Proc(
        [
            sys.executable,
            "-m",
            "streamfix.sidecar",
            "--upstream",
            f"http://127.0.0.1:{dead_port}",
            "--listen",
            f"127.0.0.1:{listen}",
            "--",
            "--set",
            f"streamfix_log={log}",
            "--set",
            f"confdir={tmp / 'conf'}",
        ],
        env=child_env(HOME=str(tmp / "home")),
    )
    try:
        proc.wait_for(r"streamfix: repair mode, .*clients at 127\.0\.0\.1:\d+ -> upstream http://127\.0\.0\.1:")
        yield proc, f"http://127.0.0.1:{listen}", log, dead_port
    finally:
        proc.stop()


def turns(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_launcher_warns_that_nothing_answers(dead) -> None:
    proc, _, _, port = dead
    assert f"warning: nothing answers at http://127.0.0.1:{port} (Connection refused)" in proc.output


@pytest.mark.parametrize(
    "path, body, shape",
    [
        ("/v1/responses", {"model": "m", "stream": True, "input": "hi"}, "openai"),
        ("/v1/chat/completions", {"model": "m", "stream": True, "messages": []}, "openai"),
        ("/v1/messages", {"model": "m", "stream": True, "max_tokens": 5, "messages": []}, "anthropic"),
        ("/v1beta/models/m:streamGenerateContent?alt=sse", {"contents": []}, "google"),
    ],
)
def test_each_api_gets_its_error_shape(dead, request, path: str, body: dict, shape: str) -> None:
    proc, base, log, port = dead
    show_logs_on_failure(request, {"sidecar": proc})
    before = len(turns(log))
    r = httpx.post(base + path, json=body, timeout=30)
    assert r.status_code == 502 and r.headers["content-type"] == "application/json", r.text
    e = r.json()
    if shape == "openai":
        assert e["error"]["type"] == "server_error" and REASON in e["error"]["message"]
    elif shape == "anthropic":
        assert e["type"] == "error" and e["error"]["type"] == "api_error" and REASON in e["error"]["message"]
    else:
        assert e["error"]["code"] == 502 and e["error"]["status"] == "UNAVAILABLE" and REASON in e["error"]["message"]
    assert f"http://127.0.0.1:{port}" in r.text
    proc.wait_count("answered 502", before + 1)
    t = turns(log)[before:]
    assert [x["ended"] for x in t] == ["upstream_error"] and t[0]["status"] == 502, t
    assert REASON in t[0]["error"]


@pytest.mark.clients
@pytest.mark.parametrize("name", ["openai-py/responses", "openai-py/chat", "openai-py/chat.stream"])
def test_openai_python_sees_the_502(dead, name: str) -> None:
    _, base, _, _ = dead
    client = next(c for c in runners.CLIENT_LIST if c.name == name)
    out = runners.run_openai_py(client, base + "/v1", [])
    assert out.get("exception") == "InternalServerError", out
    assert "502" in out["message"] and REASON in out["message"], out
    assert out["elapsed"] < 10, out


@pytest.mark.clients
def test_ai_sdk_sees_the_502(dead) -> None:
    _, base, _, _ = dead
    install = runners.CLIENTS / "aisdk7"
    if not (install / ".streamfix-installed").exists():
        pytest.skip("AI SDK 7 not installed (scripts/install-clients)")
    cases = [
        {"id": "responses", "api": "responses", "baseURL": base + "/v1"},
        {"id": "chat", "api": "chat", "baseURL": base + "/v1"},
        {"id": "anthropic", "api": "anthropic", "baseURL": base + "/v1"},
        {"id": "google", "api": "google", "baseURL": base + "/v1beta"},
    ]
    got = runners.run_aisdk_batch(install, cases, timeout=30)
    for c in cases:
        r = got[c["id"]]
        seen = " ".join(r.get("errors", [])) + " " + (r.get("thrown") or "")
        assert not r.get("hung") and not r.get("probe_error"), r
        assert REASON in seen, (c["id"], r)
        assert not r.get("text") and not r.get("toolCalls"), r


SHAPES = [
    ("/v1/responses", {"model": "m", "stream": True, "input": "hi"}, "openai"),
    ("/v1/chat/completions", {"model": "m", "stream": True, "messages": []}, "openai"),
    ("/v1/messages", {"model": "m", "stream": True, "max_tokens": 5, "messages": []}, "anthropic"),
    ("/v1beta/models/m:streamGenerateContent?alt=sse", {"contents": []}, "google"),
]


def test_launcher_warns_of_https_to_a_plain_http_gateway(tmp_path: Path) -> None:
    """A gateway that answers, but in plain HTTP where --upstream says https://: the
    launcher says which scheme to use, and every client gets a JSON 502 in its API's shape
    saying the same (not mitmproxy's HTML error page)."""
    from support import start_replay

    replay, base = start_replay()
    listen = free_port()
    wrong = base.replace("http://", "https://")
    proc = Proc(
        [
            sys.executable,
            "-m",
            "streamfix.sidecar",
            "--upstream",
            wrong,
            "--listen",
            f"127.0.0.1:{listen}",
            "--",
            "--set",
            f"confdir={tmp_path}",
        ],
        env=child_env(HOME=str(tmp_path)),
    )
    try:
        proc.wait_for(rf"warning: the gateway at {wrong} speaks plain HTTP, not TLS: use --upstream {base}", 60)
        proc.wait_for(r"streamfix: repair mode")
        for path, body, shape in SHAPES:
            r = httpx.post(f"http://127.0.0.1:{listen}{path}", json=body, timeout=30, trust_env=False)
            assert r.status_code == 502 and r.headers["content-type"] == "application/json", (path, r.text)
            e = r.json()
            say = f"the gateway at {wrong} speaks plain HTTP, not TLS: start the sidecar with --upstream {base}"
            if shape == "openai":
                assert e["error"]["code"] == "gateway_tls_mismatch" and say in e["error"]["message"], e
            elif shape == "anthropic":
                assert e["type"] == "error" and say in e["error"]["message"], e
            else:
                assert e["error"]["status"] == "UNAVAILABLE" and say in e["error"]["message"], e
    finally:
        proc.stop()
        replay.stop()


def _mitmdumps_on(port: int) -> list[int]:
    """Pids of processes whose command line names ``port`` (a sidecar's mitmdump)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"mitmdump" in cmd and f"127.0.0.1:{port}".encode() in cmd:
                pids.append(int(d.name))
    return pids


def test_a_sigterm_at_startup_leaves_no_mitmdump_behind(tmp_path: Path) -> None:
    """systemd (or a test) may stop the launcher while it starts: a SIGTERM that comes
    before mitmdump runs is passed on once it does, so the launcher's exit never leaves a
    mitmdump (its own process group) running without it. (The launcher used to install
    its handler after starting mitmdump: a SIGTERM in between killed it and orphaned
    mitmdump, which hung a CI run; that window is too short to hit on purpose, so this
    sends the signal as close to it as the output allows.)"""
    import signal
    import subprocess
    import time

    listen = free_port()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamfix.sidecar",
            "--upstream",
            f"http://127.0.0.1:{free_port()}",
            "--listen",
            f"127.0.0.1:{listen}",
            "--",
            "--set",
            f"confdir={tmp_path}",
        ],
        env=child_env(HOME=str(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        seen = b""
        while b"Point a client" not in seen:  # the banner: printed right before mitmdump starts
            line = p.stdout.readline()
            assert line, seen
            seen += line
        assert b"nothing answers" in seen, seen
        # a real gateway's banner asks for the operator's key and model, not the demo's
        assert b"with your gateway's key" in seen and b"responses-devin-toolcall" not in seen, seen
        p.send_signal(signal.SIGTERM)  # while mitmdump starts (or just before)
        p.wait(60)
        deadline = time.monotonic() + 20
        while _mitmdumps_on(listen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _mitmdumps_on(listen) == [], "a mitmdump outlived its launcher"
    finally:
        for pid in _mitmdumps_on(listen):
            os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
        p.stdout.close()
