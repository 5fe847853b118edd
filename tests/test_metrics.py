"""addons/metrics.py: off costs no hook, bounded labels, what a turn record counts, health
checks, and check mode's violations agreeing with the turn log (real mitmdump, replay upstream).

The Prometheus server test is tests/test_metrics_prometheus.py."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson
import pytest
from mitmproxy import hooks
from mitmproxy.proxy import layers  # noqa: F401  (registers the HTTP, WebSocket, TLS hooks)
from streamfix.addons import metrics, shared
from support import free_port, replay_and_proxy, start_mitmdump

HOOKS = set(hooks.all_hooks)


def test_off_the_addon_has_no_per_flow_hooks():
    """mitmproxy calls an addon's hooks by name and walks its ``addons``: off, there are none."""
    m = metrics.Metrics()
    assert m.addons == []
    # (mitmproxy's hook registry holds "load" once any module registered it)
    assert {h for h in HOOKS if callable(getattr(m, h, None))} - {"load"} == {"configure", "done"}
    assert not shared.has_turn_sinks() or m.reg is None
    live = {h for h in HOOKS if callable(getattr(metrics.Live, h, None))}
    assert live == {"requestheaders", "responseheaders", "response", "error", "websocket_start", "websocket_end"}
    assert "websocket_message" not in live and "request" not in live  # nothing per event, even when on


def test_bounded_labels():
    seen: list[str] = []
    b = metrics.Bounded("model", 2)
    b.overflow = seen.append
    assert [b(v) for v in ["a", "b", "a", "c", "d", "b", None, ""]] == ["a", "b", "a", "other", "other", "b",
                                                                          "none", "none"]  # fmt: skip
    assert seen == ["model", "model"]
    fixed = metrics.Bounded("model", 5, fixed=["gpt-x"])
    assert [fixed(v) for v in ["gpt-x", "made-up", "gpt-y"]] == ["gpt-x", "other", "other"]
    keys = metrics.Bounded("key", 0, keep=lambda v: v in ("team-a", "-"))
    assert [keys(v) for v in ["team-a", "-", "0123456789ab"]] == ["team-a", "-", "other"]
    assert metrics.Bounded("x", 10)("m" * 500) == "m" * metrics.MAX_LABEL_CHARS


def test_listen_spec():
    assert metrics.parse_listen("9464") == ("127.0.0.1", 9464)
    assert metrics.parse_listen("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert metrics.parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in ("x", "1:70000", "host:"):
        with pytest.raises(Exception, match="HOST:PORT"):
            metrics.parse_listen(bad)


def _samples(reg: metrics.Registry) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(reg.exposition().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_turn_record_is_counted_as_it_reads():
    reg = metrics.Registry(metrics.Bounded("model", 1), metrics.Bounded("key", 1), lambda: False)
    base = {"api": "chat", "transport": "sse", "model": "m1", "key": "k1", "rules": {}, "verdict": None,
            "tokens": {"client": None, "upstream": None}, "ttfb_ms": None, "duration_ms": None}  # fmt: skip
    reg.observe({**base, "ended": "failed_open", "rules": {"tool_index": 2, "changed": 0}, "ttfb_ms": 250,
                 "duration_ms": 1500})  # fmt: skip
    reg.observe({**base, "ended": "upstream_error", "salvaged": 37, "model": "m2", "key": "k2",
                 "tokens": {"client": {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
                            "upstream": {"input_tokens": 11, "output_tokens": 4, "cached_tokens": 5}}})  # fmt: skip
    reg.observe({**base, "api": "responses", "ended": "complete", "violations": {"item.order": 4, "usage": 1},
                 "verdict": {"outcome": "max_tokens", "native": False,
                             "evidence": [{"source": "usage", "says": "complete"},
                                          {"source": "tool_args", "says": "max_tokens"}]}})  # fmt: skip
    s = _samples(reg)
    assert s[("streamfix_turns_total", (("api", "chat"), ("ended", "failed_open"), ("model", "m1"),
                                        ("transport", "sse")))] == 1  # fmt: skip
    assert s[("streamfix_turns_total", (("api", "chat"), ("ended", "upstream_error"), ("model", "other"),
                                        ("transport", "sse")))] == 1  # fmt: skip
    assert s[("streamfix_failed_open_total", (("api", "chat"),))] == 1
    assert s[("streamfix_salvaged_flows_total", (("api", "chat"),))] == 1
    assert s[("streamfix_salvaged_bytes_total", ())] == 37
    assert s[("streamfix_rule_events_total", (("api", "chat"), ("rule", "tool_index")))] == 2
    assert s[("streamfix_check_violations_total", (("api", "responses"), ("rule", "item.order")))] == 4
    assert s[("streamfix_check_violations_total", (("api", "responses"), ("rule", "usage")))] == 1
    assert s[("streamfix_verdicts_total", (("api", "responses"), ("outcome", "max_tokens"),
                                           ("source", "tool_args")))] == 1  # fmt: skip
    tok = {k[1]: v for k, v in s.items() if k[0] == "streamfix_tokens_total"}
    assert tok == {
        (("key", "other"), ("kind", "input"), ("leg", "client"), ("model", "other")): 10,
        (("key", "other"), ("kind", "output"), ("leg", "client"), ("model", "other")): 3,
        (("key", "other"), ("kind", "input"), ("leg", "upstream"), ("model", "other")): 11,
        (("key", "other"), ("kind", "output"), ("leg", "upstream"), ("model", "other")): 4,
        (("key", "other"), ("kind", "cached"), ("leg", "upstream"), ("model", "other")): 5,
    }
    assert s[("streamfix_ttfb_seconds_count", (("api", "chat"), ("transport", "sse")))] == 1
    assert s[("streamfix_ttfb_seconds_bucket", (("api", "chat"), ("le", "0.25"), ("transport", "sse")))] == 1
    assert s[("streamfix_ttfb_seconds_bucket", (("api", "chat"), ("le", "0.1"), ("transport", "sse")))] == 0
    assert s[("streamfix_turn_duration_seconds_sum", (("api", "chat"), ("transport", "sse")))] == 1.5
    assert s[("streamfix_label_overflow_total", (("label", "key"),))] == 1
    assert s[("streamfix_label_overflow_total", (("label", "model"),))] == 1


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
        try:  # mitmproxy answers 502 or drops the connection (issue 19 changes which)
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
