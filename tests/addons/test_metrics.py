"""addons/metrics.py: off costs no hook, bounded labels, what a turn record counts.

In a real mitmdump: test_metrics_e2e.py; the Prometheus server: test_metrics_prometheus.py."""

from __future__ import annotations

import pytest
from mitmproxy import hooks
from mitmproxy.proxy import layers  # noqa: F401  (registers the HTTP, WebSocket, TLS hooks)
from streamfix.addons import metrics, shared

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


@pytest.mark.parametrize("which", ["worker", "launcher"])
def test_a_request_cancelled_at_shutdown_ends_quietly(which):
    """A drain (SIGTERM) cancels a health or metrics request in the middle: the handler
    task must not end cancelled, or asyncio's start_server done-callback logs
    "Exception in callback ... CancelledError" with a Traceback (Python 3.12)."""
    import asyncio

    from streamfix import workers

    if which == "worker":
        handler = metrics.Metrics()._handle
    else:
        launcher = workers.Launcher.__new__(workers.Launcher)
        handler = launcher._metrics_handle
    reported: list[dict] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /metrics HTTP/1.1\r\n")  # half a head: the handler waits for the rest
        await w.drain()
        await asyncio.sleep(0.05)
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert handlers, "the handler task is running"
        for t in handlers:
            t.cancel()
        await asyncio.sleep(0.05)
        w.close()
        server.close()

    asyncio.run(main())
    assert [c.get("message") for c in reported] == []
