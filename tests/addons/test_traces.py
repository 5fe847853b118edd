"""addons/traces.py: a turn record as GenAI spans (expected attributes written by hand from the
conventions, semantic-conventions-genai v0.1.0 ``gen_ai.client.inference``), the option and the
environment, and the exporter that says once that its receiver is down."""

from __future__ import annotations

import logging

import pytest
from mitmproxy import exceptions
from streamfix.addons import traces

TRUNCATED_CHAT = {
    "time": "2026-12-07T12:00:01.500Z", "flow": "f1", "key": "team-a", "api": "chat", "transport": "sse",
    "path": "/v1/chat/completions", "model": "gpt-x", "upstream_model": "swe-fake", "status": 200,
    "ended": "truncated",
    "tokens": {"client": {"input_tokens": 30, "output_tokens": 400, "total_tokens": 430, "cached_tokens": 12},
               "upstream": {"input_tokens": 30, "output_tokens": 400, "cached_tokens": 12, "source": "devin"}},
    "finish": {"client": ["length"], "gateway": ["tool_calls"]},
    "response": {"id": "chatcmpl-9", "model": "gpt-x-0613"}, "max_tokens": 400, "gateway": "127.0.0.1:8317",
    "verdict": {"outcome": "max_tokens", "native": False,
                "evidence": [{"source": "usage", "says": "max_tokens", "detail": "output tokens 400 >= max_tokens 400"}]},
    "rules": {"tool_index": 3, "truncation": 1}, "bytes": {"in": 1, "out": 2}, "events": 9,
    "ttfb_ms": 250, "duration_ms": 1500,
    "upstream_call": {"provider": "devin", "flow": "u1", "finish": "MAX_TOKENS", "failed": False,
                      "started": "2026-12-07T12:00:00.100Z", "duration_ms": 1200},
}  # fmt: skip
SECOND = 1_000_000_000


def test_a_truncated_chat_turn_reads_as_the_client_was_told():
    s = traces.client_span(TRUNCATED_CHAT)
    assert s["name"] == "chat gpt-x"
    assert s["end"] - s["start"] == 1.5 * SECOND
    assert s["error"] is None
    assert s["attributes"] == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-x",
        "gen_ai.response.model": "gpt-x-0613", "gen_ai.response.id": "chatcmpl-9",
        "gen_ai.response.finish_reasons": ["length"],
        "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 400,
        "gen_ai.usage.cache_read.input_tokens": 12,
        "gen_ai.request.max_tokens": 400, "gen_ai.request.stream": True,
        "gen_ai.response.time_to_first_chunk": 0.25,
        "server.address": "127.0.0.1", "server.port": 8317, "http.response.status_code": 200,
        "streamfix.api": "chat", "streamfix.transport": "sse", "streamfix.ended": "truncated",
        "streamfix.flow": "f1", "streamfix.key": "team-a",
        "streamfix.gateway.finish_reasons": ["tool_calls"],
        "streamfix.repaired": ["tool_index", "truncation"], "streamfix.repaired.events": 4,
        "streamfix.verdict": "max_tokens",
        "streamfix.verdict.evidence": ["usage: output tokens 400 >= max_tokens 400"],
    }  # fmt: skip


def test_the_providers_call_is_a_child_with_the_providers_own_words():
    c = traces.provider_span(TRUNCATED_CHAT)
    assert c is not None and c["name"] == "chat swe-fake" and c["error"] is None
    assert c["end"] - c["start"] == 1.2 * SECOND
    assert c["start"] - traces.client_span(TRUNCATED_CHAT)["start"] == 0.1 * SECOND  # inside the turn
    assert c["attributes"] == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "devin", "gen_ai.response.model": "swe-fake",
        "gen_ai.response.finish_reasons": ["MAX_TOKENS"],
        "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 400,
        "gen_ai.usage.cache_read.input_tokens": 12,
        "streamfix.flow": "u1", "streamfix.provider.finish": "MAX_TOKENS",
    }  # fmt: skip
    assert traces.provider_span({**TRUNCATED_CHAT, "upstream_call": None}) is None


@pytest.mark.parametrize(
    ("change", "error_type", "finish"),
    [
        # a stream cut before its terminal: streamfix ended it as a failure in the API's terms
        ({"ended": "upstream_error", "error": "stream ended without a terminal event",
          "finish": {"client": ["error"], "gateway": None}}, "upstream_error", ["error"]),
        ({"ended": "upstream_error", "status": 502, "finish": {"client": None, "gateway": None}}, "502", ["error"]),
        ({"ended": "client_abort", "error": "Client disconnected."}, "client_abort", ["error"]),
        ({"ended": "failed_open", "error": "ValueError: boom"}, "failed_open", ["error"]),
    ],
)  # fmt: skip
def test_a_failed_turn_is_an_error_span(change, error_type, finish):
    s = traces.client_span({**TRUNCATED_CHAT, **change})
    assert s["attributes"]["error.type"] == error_type
    assert s["attributes"]["gen_ai.response.finish_reasons"] == finish
    assert s["error"] == change.get("error", change["ended"])


def test_each_api_names_its_operation_and_provider():
    want = {"chat": ("chat", "openai"), "responses": ("chat", "openai"), "messages": ("chat", "anthropic"),
            "gemini": ("generate_content", "gcp.gemini")}  # fmt: skip
    for api, (op, provider) in want.items():
        a = traces.client_span({**TRUNCATED_CHAT, "api": api})["attributes"]
        assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"]) == (op, provider)


def test_a_json_turn_is_not_a_stream_and_zero_detail_counts_are_left_out():
    a = traces.client_span({
        **TRUNCATED_CHAT, "transport": "json", "ended": "complete", "verdict": None, "rules": {},
        "tokens": {"client": {"input_tokens": 0, "output_tokens": 5, "cached_tokens": 0, "reasoning_tokens": 3}},
        "gateway": "[::1]:8317",
    })["attributes"]  # fmt: skip
    assert "gen_ai.request.stream" not in a and "gen_ai.response.time_to_first_chunk" not in a
    assert a["gen_ai.usage.input_tokens"] == 0 and a["gen_ai.usage.reasoning.output_tokens"] == 3
    assert "gen_ai.usage.cache_read.input_tokens" not in a
    assert (a["server.address"], a["server.port"]) == ("::1", 8317)
    assert "streamfix.verdict" not in a and "streamfix.repaired" not in a and "error.type" not in a


def test_no_key_prompt_or_output_in_a_span():
    """The record holds the key's id or label only; the span holds nothing else of the request."""
    a = traces.client_span(TRUNCATED_CHAT)["attributes"]
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system")) for k in a)
    assert a["streamfix.key"] == "team-a"


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, None),
    ],
)  # fmt: skip
def test_the_environment_turns_traces_on(monkeypatch, env, on):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
                 "OTEL_TRACES_EXPORTER"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert traces._env_on() == on


@pytest.mark.parametrize("value", ["", "off", "http://127.0.0.1:4318/v1/traces", "https://otel.example/v1/traces"])
def test_the_option_takes_off_or_a_url(value):
    traces.check_traces(value)


@pytest.mark.parametrize("value", ["127.0.0.1:4318", "grpc://h:4317", "on", "http://"])
def test_the_option_refuses_what_is_not_a_url(value):
    with pytest.raises(exceptions.OptionsError, match="OTLP/HTTP traces endpoint"):
        traces.check_traces(value)


class _Inner:
    def __init__(self, results):
        self.results = list(results)

    def export(self, spans):
        r = self.results.pop(0)
        if isinstance(r, Exception):
            raise r
        return r


def test_a_receiver_that_is_down_is_said_once_and_again_when_it_answers(caplog):
    from opentelemetry.sdk.trace.export import SpanExportResult as R

    e = traces._Exporter(_Inner([R.SUCCESS, R.FAILURE, ConnectionError("refused"), R.FAILURE, R.SUCCESS]), "http://x")
    with caplog.at_level(logging.INFO, logger="streamfix.traces"):
        results = [e.export([object()] * 2) for _ in range(5)]
    assert results == [R.SUCCESS, R.FAILURE, R.FAILURE, R.FAILURE, R.SUCCESS]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "did not take 2 spans" in lines[0] and "clients are not affected" in lines[0]
    assert "answers again" in lines[1]
    assert (e.sent, e.dropped) == (4, 6)
