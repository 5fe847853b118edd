"""addons/metrics.py in a real mitmdump in front of the replay upstream: health checks, a taken
port, and check mode's violations agreeing with the turn log."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson
import pytest
from mitmproxy.proxy import layers  # noqa: F401  (registers the HTTP, WebSocket, TLS hooks)
from support import free_port, replay_and_proxy, start_mitmdump


# --- real mitmdump ------------------------------------------------------------------
def _metrics_url(mitm) -> str:
    return mitm.wait_for(r"streamfix: metrics at (http://\S+)/metrics", 30).group(1)


def _get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=10, trust_env=False)


@pytest.mark.e2e
def test_check_mode_violations_agree_with_the_turn_log(tmp_path: Path):
    log = tmp_path / "turns.jsonl"
    with replay_and_proxy(None, tmp_path / "conf", "--set", "streamfix_mode=check",
                          "--set", "streamfix_metrics=127.0.0.1:0", "--set", f"streamfix_log={log}") as (
        _, _, mitm, proxy,
    ):  # fmt: skip
        url = _metrics_url(mitm)
        for name in ("responses-devin-toolcall", "chat-devin-truncated-toolcall"):
            api = "/v1/responses" if name.startswith("responses") else "/v1/chat/completions"
            r = httpx.post(proxy + api, json={"model": name, "stream": True, "input": "hi", "messages": []},
                           timeout=30, trust_env=False)  # fmt: skip
            assert r.status_code == 200
        deadline = time.monotonic() + 30
        while (not log.exists() or len(log.read_bytes().splitlines()) < 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        text = _get(url + "/metrics").text
    turns = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    want: dict[tuple[str, str], int] = {}
    for t in turns:
        for rule, n in t["violations"].items():
            want[(t["api"], rule)] = want.get((t["api"], rule), 0) + n
    assert want, "the buggy recordings violate the contract"
    from prometheus_client.parser import text_string_to_metric_families

    got = {
        (s.labels["api"], s.labels["rule"]): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "streamfix_check_violations_total"
    }
    assert got == want


@pytest.mark.e2e
def test_health_live_ready_and_a_dead_gateway(tmp_path: Path):
    with replay_and_proxy(None, tmp_path / "conf", "--set", "streamfix_metrics=127.0.0.1:0",
                          "--set", "streamfix_ready_window=2") as (_, upstream, mitm, proxy):  # fmt: skip
        url = _metrics_url(mitm)
        assert _get(url + "/livez").status_code == 200
        assert _get(url + "/healthz").text == "ok\n"
        r = _get(url + "/readyz")  # no traffic yet: it asks the gateway itself
        assert r.status_code == 200 and "probe" in r.json()["why"] and r.json()["gateway"] == upstream
        httpx.post(proxy + "/v1/responses", json={"model": "responses-devin-toolcall", "stream": True,
                                                  "input": "hi"}, timeout=30, trust_env=False)  # fmt: skip
        r = _get(url + "/readyz")
        assert r.status_code == 200 and r.json()["why"] == "the gateway answered a client request"
        assert _get(url + "/nope").status_code == 404
        assert httpx.post(url + "/metrics", timeout=10, trust_env=False).status_code == 405
    dead = f"http://127.0.0.1:{free_port()}"
    mitm, port = start_mitmdump(dead, tmp_path / "conf", "--set", "streamfix_metrics=127.0.0.1:0")
    try:
        url = _metrics_url(mitm)
        assert _get(url + "/livez").status_code == 200
        r = _get(url + "/readyz")
        assert r.status_code == 503, r.text
        assert r.json()["ready"] is False and "did not answer" in r.json()["why"] and r.json()["gateway"] == dead
        # a client request to the dead gateway is no answer from it either
        try:  # mitmproxy answers 502 or drops the connection (it depends on the version)
            httpx.post(f"http://127.0.0.1:{port}/v1/responses", json={}, timeout=30, trust_env=False)
        except httpx.HTTPError:
            pass
        assert _get(url + "/readyz").status_code == 503
    finally:
        mitm.stop()


@pytest.mark.e2e
def test_a_taken_metrics_port_stops_the_start(tmp_path: Path):
    import socket
    import subprocess

    from support import REPAIR_ADDON, child_env, mitmdump_args

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(
            mitmdump_args(tmp_path / "conf", "--mode", "reverse:http://127.0.0.1:9@127.0.0.1:0",
                          "--set", f"streamfix_metrics=127.0.0.1:{port}", addons=(REPAIR_ADDON,)),
            capture_output=True, text=True, timeout=60, env=child_env(),
        )  # fmt: skip
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert f"streamfix_metrics=127.0.0.1:{port}: port {port} is in use on 127.0.0.1" in out, out
    assert "Traceback" not in out, out  # said by the script's Guard, before configure would raise
