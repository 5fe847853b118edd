"""tests/support/standins/fake_providers.py on its own (no CPA): the providers' wire, scripts, caps, recording."""

from __future__ import annotations

import httpx
import orjson
import pytest
from standins.fake_providers import CHARS_PER_TOKEN, SCRIPTS, Running, anthropic_events, chat_chunks
from streamfix.wire.contract import check
from streamfix.wire.invariants import json_events

STREAMED = [n for n, s in SCRIPTS.items() if s.error_after is None]


@pytest.fixture(scope="module")
def fake():
    r = Running(delay_ms=0)
    yield r
    r.stop()


@pytest.mark.parametrize("name", STREAMED)
def test_anthropic_and_chat_streams_meet_the_contract(name):
    s, cut, tokens = SCRIPTS[name].capped(None)
    assert check("messages", b"".join(anthropic_events(s, "m", cut, tokens, "msg_1"))) == []
    assert check("chat", b"".join(chat_chunks(s, "m", cut, tokens, "c1", True))) == []


def test_cap_cuts_the_output_and_says_so():
    s, cut, tokens = SCRIPTS["long_tool"].capped(20)
    assert cut and tokens == 20
    assert sum(len(p) for p in s.text + tuple(a for c in s.calls for a in c.args)) == 20 * CHARS_PER_TOKEN
    evs = json_events(b"".join(anthropic_events(s, "m", cut, tokens, "msg_1")))
    assert evs[-2]["delta"]["stop_reason"] == "max_tokens" and evs[-2]["usage"]["output_tokens"] == 20
    chunks = json_events(b"".join(chat_chunks(s, "m", cut, tokens, "c1", True)))
    assert [ch["finish_reason"] for e in chunks for ch in e.get("choices", []) if ch["finish_reason"]] == ["length"]
    full, cut, _ = SCRIPTS["long_tool"].capped(100000)
    assert not cut and orjson.loads("".join(full.calls[0].args))["path"] == "index.html"


def _post(fake: Running, path: str, body: dict) -> httpx.Response:
    return httpx.post(fake.url + path, json=body, timeout=10, trust_env=False)


def test_http_endpoints_and_what_they_record(fake):
    fake.fake.default = "text_tool"
    r = _post(fake, "/v1/messages?beta=true", {"model": "claude-x", "stream": True, "max_tokens": 100,
                                                "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    assert r.headers["content-type"].startswith("text/event-stream") and check("messages", r.content) == []
    assert fake.fake.last("anthropic")["path"] == "/v1/messages?beta=true"
    js = _post(fake, "/v1/messages", {"model": "claude-x", "max_tokens": 100, "messages": []}).json()
    assert [b["type"] for b in js["content"]] == ["text", "tool_use"] and js["stop_reason"] == "tool_use"
    assert _post(fake, "/v1/messages/count_tokens", {"messages": []}).json() == {"input_tokens": 42}
    r = _post(fake, "/v1/chat/completions", {"model": "g", "stream": True, "stream_options": {"include_usage": True},
                                              "messages": [{"role": "user", "content": "x [script:two_tools]"}]})  # fmt: skip
    assert check("chat", r.content) == [] and fake.fake.last("chat")["script"] == "two_tools"
    assert b'"usage":{"prompt_tokens":42' in r.content
    r = _post(fake, "/v1beta/interactions", {"model": "gem", "stream": True, "input": [],
                                             "generation_config": {"max_output_tokens": 3}})  # fmt: skip
    evs = json_events(r.content)
    assert evs[0]["event_type"] == "interaction.created" and r.content.endswith(b"event: done\ndata: [DONE]\n\n")
    assert evs[-1]["interaction"]["status"] == "incomplete"  # cut at 3 tokens
    body = _post(fake, "/v1beta/interactions", {"model": "gem", "input": []}).json()
    assert [s["type"] for s in body["steps"]] == ["model_output", "function_call"]
    assert body["status"] == "requires_action"


def test_a_tool_result_gets_the_followup(fake):
    fake.fake.default = "probe"
    first = _post(
        fake, "/v1/messages", {"model": "c", "max_tokens": 99, "messages": [{"role": "user", "content": "go"}]}
    )
    assert first.json()["content"][-1]["type"] == "tool_use"
    msgs = [{"role": "user", "content": "go"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]  # fmt: skip
    second = _post(fake, "/v1/messages", {"model": "c", "max_tokens": 99, "messages": msgs})
    assert second.json()["content"] == [{"type": "text", "text": "ALL DONE"}]
    chat = _post(fake, "/v1/chat/completions", {"model": "g", "messages": [{"role": "tool", "content": "ok"}]}).json()
    assert chat["choices"][0]["message"]["content"] == "ALL DONE"
    inter = _post(fake, "/v1beta/interactions", {"model": "g", "input": [{"type": "function_result", "result": "ok"}]})
    assert inter.json()["steps"][0]["content"][0]["text"] == "ALL DONE"


def test_error_mid_stream(fake):
    fake.fake.default = "error_mid"
    r = _post(fake, "/v1/messages", {"model": "c", "stream": True, "max_tokens": 99, "messages": []})
    evs = json_events(r.content)
    assert evs[-1] == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert [e["delta"]["text"] for e in evs if e.get("type") == "content_block_delta"] == ["Starting ", "the work "]
    r = _post(fake, "/v1/chat/completions", {"model": "g", "stream": True, "messages": []})
    assert json_events(r.content)[-1]["error"]["type"] == "server_error" and b"[DONE]" not in r.content
    r = _post(fake, "/v1beta/interactions", {"model": "g", "stream": True, "input": []})
    assert r.content.rstrip().endswith(b'"message":"The model is overloaded."}}') and b"done" not in r.content
