"""tests/support/standins/fake_providers.py on its own (no CPA): the providers' wire, scripts, caps, recording."""

from __future__ import annotations

import httpx
import orjson
import pytest
from standins.fake_providers import (
    CHARS_PER_TOKEN,
    SCRIPTS,
    TURN_CAPS,
    TURNS,
    Running,
    anthropic_events,
    chat_chunks,
    provider_body,
    unsupported,
)
from standins.frames import ended
from streamfix.wire.contract import check
from streamfix.wire.invariants import json_events

STREAMED = [n for n, s in SCRIPTS.items() if s.error_after is None and s.ending == "clean"]


@pytest.fixture(scope="module")
def fake():
    r = Running(delay_ms=0)
    yield r
    r.stop()


@pytest.mark.parametrize("name", STREAMED)
def test_anthropic_and_chat_streams_meet_the_contract(name):
    s, cut, tokens = SCRIPTS[name].capped(None)
    if unsupported("anthropic", name) is None:
        assert check("messages", b"".join(anthropic_events(s, "m", cut, tokens, "msg_1"))) == []
    if unsupported("chat", name) is None:
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


# --- the turn kinds of the real-CPA matrix, on every provider API -------------------

PROVIDER_CONTRACT = {"anthropic": "messages", "chat": "chat", "gemini": "gemini", "responses": "responses"}
"""The provider APIs whose own wire is a client API the contract defines (interactions is not)."""


def _played(api: str) -> list[str]:
    return [t for t in TURNS if unsupported(api, t) is None]


@pytest.mark.parametrize("api", ["anthropic", "interactions", "chat", "gemini", "responses"])
def test_every_turn_is_played_or_says_why(api):
    for t in TURNS:
        why = unsupported(api, t)
        assert why is None or len(why) > 20, (api, t, why)
    assert {"text_tool", "thoughts", "parallel", "max_tokens", "inband_error", "no_finish", "cut_body",
            "zero_items"} <= set(_played(api))  # fmt: skip


@pytest.mark.parametrize("api", sorted(PROVIDER_CONTRACT))
def test_clean_turns_meet_the_provider_apis_contract(api):
    """A turn that ends cleanly is a correct stream of the provider's API (the Codex
    backend's own events aside: codex.* is Codex's, a keepalive is no Responses event)."""
    for t in _played(api):
        frames, _end, ending = provider_body(api, t, "m", "rid1", TURN_CAPS.get(t))
        if ending != "clean":
            continue
        vs = {v.rule for v in check(PROVIDER_CONTRACT[api], b"".join(frames))}
        assert vs == ({"sse.nonstandard", "sse.vendor"} if t == "vendor" else set()), (api, t, vs)


@pytest.mark.parametrize("api", ["anthropic", "interactions", "chat", "gemini", "responses"])
def test_endings_cut_where_the_script_says(api):
    """no_finish: the content, then nothing of the provider's finish; cut_body: the last
    content frame cut in half (the server then drops the connection)."""
    full, end, ending = provider_body(api, "no_finish", "m", "rid1")
    assert ending == "no_finish" and 0 < end < len(full)
    finish = b"".join(full[end:])
    assert any(w in finish for w in (b"message_stop", b"interaction.completed",
                                      b'"finish_reason":"stop"', b"finishReason", b"response.completed"))  # fmt: skip
    cut, end, ending = provider_body(api, "cut_body", "m", "rid1")
    written, drop = ended(cut, end, ending)
    assert drop and len(written) == end and written[-1] == cut[end - 1][: len(cut[end - 1]) // 2]


def test_gemini_wire():
    """Gemini's own terms: CRLF frames, thoughts as thought parts, whole functionCall args,
    the parallel turn as [A] then [B, C], usage with candidates excluding thoughts,
    SAFETY without content, an in-band error object."""
    frames, _, _ = provider_body("gemini", "parallel", "gemini-2.5-flash", "r1")
    assert all(f.startswith(b"data: ") and f.endswith(b"}\r\n\r\n") for f in frames)
    chunks = [orjson.loads(f[6:]) for f in frames]
    calls = [[p["functionCall"]["name"] for p in c["candidates"][0]["content"]["parts"] if "functionCall" in p]
             for c in chunks[:-1]]  # fmt: skip
    assert [len(c) for c in calls if c] == [1, 2]
    assert [p["functionCall"]["args"] for c in chunks for p in c["candidates"][0].get("content", {}).get("parts", [])
            if "functionCall" in p] == [{"cmd": "pwd"}, {"cmd": "date"}, {"cmd": "id"}]  # fmt: skip
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    frames, _, _ = provider_body("gemini", "thoughts", "m", "r1")
    chunks = [orjson.loads(f[6:]) for f in frames]
    assert chunks[0]["candidates"][0]["content"]["parts"][0]["thought"] is True
    um = chunks[-1]["usageMetadata"]
    assert um["thoughtsTokenCount"] == 22 and um["candidatesTokenCount"] == 4  # "The answer is 42.": 17 chars
    assert um["totalTokenCount"] == um["promptTokenCount"] + um["candidatesTokenCount"] + um["thoughtsTokenCount"]
    assert "candidatesTokenCount" not in chunks[0]["usageMetadata"]  # partial usage before the finish
    frames, _, _ = provider_body("gemini", "safety", "m", "r1")
    last = orjson.loads(frames[-1][6:])["candidates"][0]
    assert last["finishReason"] == "SAFETY" and "content" not in last and last["safetyRatings"][0]["blocked"]
    frames, _, _ = provider_body("gemini", "inband_error", "m", "r1")
    assert orjson.loads(frames[-1][6:]) == {"error": {"code": 503, "status": "UNAVAILABLE",
                                                      "message": "The model is overloaded. Please try again later."}}  # fmt: skip
    frames, _, _ = provider_body("gemini", "zero_items", "m", "r1")
    assert len(frames) == 1 and orjson.loads(frames[0][6:])["candidates"][0]["content"] == {"role": "model"}


def test_responses_wire():
    """OpenAI's Responses events: numbered from 0, one item at a time, the stop in the terminal."""
    evs = json_events(b"".join(provider_body("responses", "thoughts", "m", "resp_1")[0]))
    assert [e["sequence_number"] for e in evs] == list(range(len(evs)))
    assert [e["item"]["type"] for e in evs if e["type"] == "response.output_item.added"] == ["reasoning", "message"]
    u = evs[-1]["response"]["usage"]
    assert u["output_tokens_details"]["reasoning_tokens"] == 22 and u["output_tokens"] == 26
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"]

    def terminal(turn: str) -> dict:
        return json_events(b"".join(provider_body("responses", turn, "m", "resp_1", TURN_CAPS.get(turn))[0]))[-1]

    assert terminal("max_tokens")["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert terminal("safety")["response"]["incomplete_details"] == {"reason": "content_filter"}
    assert terminal("context_window")["response"]["error"]["code"] == "context_length_exceeded"
    assert terminal("inband_error")["type"] == "response.failed"
    assert terminal("zero_items")["response"]["output"] == []
    ref = json_events(b"".join(provider_body("responses", "refusal", "m", "resp_1")[0]))
    assert [e["delta"] for e in ref if e["type"] == "response.refusal.delta"] == ["I can't help ", "with that."]
    vendor = provider_body("responses", "vendor", "m", "resp_1")[0]
    assert [f.split(b"\n")[0] for f in vendor[:2]] == [b"event: codex.rate_limits", b"event: codex.response.metadata"]
    assert b'{"type":"keepalive"}' in b"".join(vendor)


def test_provider_bodies_are_well_defined():
    """The same script gives the same provider body (every clock fixed): what
    CPA's upstream leg decoders are tested against."""
    for api in ("anthropic", "interactions", "chat", "gemini", "responses"):
        for t in _played(api):
            assert provider_body(api, t, "m", "r1", TURN_CAPS.get(t)) == provider_body(api, t, "m", "r1",
                                                                                      TURN_CAPS.get(t))  # fmt: skip


def test_stop_reasons_in_each_providers_terms():
    def stop(api: str, turn: str) -> bytes:
        return b"".join(provider_body(api, turn, "m", "r1", TURN_CAPS.get(turn))[0])

    assert b'"stop_reason":"refusal"' in stop("anthropic", "refusal")
    assert b'"stop_reason":"model_context_window_exceeded"' in stop("anthropic", "context_window")
    assert b'"stop_reason":"pause_turn"' in stop("anthropic", "pause")
    assert b'"finish_reason":"content_filter"' in stop("chat", "safety")
    assert b'"refusal":"I can\'t help "' in stop("chat", "refusal")
    assert b'"finishReason":"MAX_TOKENS"' in stop("gemini", "max_tokens")
    assert b'"status":"incomplete"' in stop("interactions", "max_tokens")
    # the max_tokens turn reports the request's cap (16) as its output tokens on every provider
    assert b'"output_tokens":16' in stop("anthropic", "max_tokens")
    assert b'"candidatesTokenCount":16' in stop("gemini", "max_tokens")


def test_gemini_and_responses_endpoints(fake):
    fake.fake.default = "text_tool"
    body = {"contents": [{"role": "user", "parts": [{"text": "go [script:parallel]"}]}]}
    r = _post(fake, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
    assert r.headers["content-type"].startswith("text/event-stream") and check("gemini", r.content) == []
    rec = fake.fake.last("gemini")
    assert rec["script"] == "parallel" and rec["response"] == r.content and rec["done"]
    r = _post(fake, "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
    assert check("gemini", r.content) == []  # Vertex's path
    arr = _post(fake, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body).json()
    assert isinstance(arr, list) and arr[-1]["candidates"][0]["finishReason"] == "STOP"
    js = _post(fake, "/v1beta/models/gemini-2.5-flash:generateContent", body).json()
    assert [list(p) for p in js["candidates"][0]["content"]["parts"]] == [["text"]] + [["functionCall"]] * 3
    assert _post(fake, "/v1beta/models/gemini-2.5-flash:countTokens", body).json() == {"totalTokens": 42}
    err = _post(
        fake, "/v1beta/models/g:generateContent", {"contents": [{"parts": [{"text": "[script:inband_error]"}]}]}
    )
    assert err.status_code == 503 and err.json()["error"]["status"] == "UNAVAILABLE"
    rb = {"model": "gpt-5-codex", "stream": True, "input": [{"type": "message", "role": "user",
                                                              "content": [{"type": "input_text", "text": "x"}]}]}  # fmt: skip
    for path in ("/responses", "/v1/responses"):
        r = _post(fake, path, rb)
        assert check("responses", r.content) == [] and json_events(r.content)[-1]["type"] == "response.completed"
    js = _post(fake, "/responses", {"model": "gpt-5-codex", "input": "x"}).json()
    assert js["object"] == "response" and [o["type"] for o in js["output"]] == ["message", "function_call"]
    fol = _post(fake, "/responses", {**rb, "input": [{"type": "function_call_output", "call_id": "c", "output": "ok"},
                                                     {"type": "message", "role": "user", "content": "[script:probe]"}]})  # fmt: skip
    assert b"ALL " in fol.content  # a tool result gets the script's followup


def test_cut_body_drops_the_connection(fake):
    """cut_body: half of the last content frame, then the connection closes inside the
    chunked body (no last chunk): the client's read fails; the record keeps what was written."""
    import httpx

    got = b""
    body = {"contents": [{"parts": [{"text": "[script:cut_body]"}]}]}
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.Client(trust_env=False, timeout=10) as client,
        client.stream("POST", fake.url + "/v1beta/models/g:streamGenerateContent?alt=sse", json=body) as r,
    ):
        for chunk in r.iter_raw():
            got += chunk
    rec = fake.fake.last("gemini")
    assert rec["ended"] == "cut" and rec["response"] == got and not got.endswith(b"\r\n\r\n")
    r = _post(fake, "/v1/chat/completions", {"model": "g", "stream": True, "messages": [
        {"role": "user", "content": "[script:no_finish]"}]})  # fmt: skip
    assert b'finish_reason":"stop' not in r.content and b"[DONE]" not in r.content


def test_code_assist_endpoint(fake):
    """CPA's Antigravity path: the Gemini Code Assist API (``/v1internal:{action}``), the
    request under ``request`` and each chunk under ``response``; an error object as it is."""
    body = {"model": "gemini-3-flash", "project": "p",
            "request": {"contents": [{"role": "user", "parts": [{"text": "go [script:parallel]"}]}]}}  # fmt: skip
    r = _post(fake, "/v1internal:streamGenerateContent?alt=sse", body)
    frames = [orjson.loads(f[6:]) for f in r.content.split(b"\r\n\r\n") if f]
    assert all(set(f) == {"response", "traceId"} for f in frames)
    unwrapped = b"".join(b"data: " + orjson.dumps(f["response"]) + b"\r\n\r\n" for f in frames)
    assert check("gemini", unwrapped) == [] and frames[-1]["response"]["candidates"][0]["finishReason"] == "STOP"
    rec = fake.fake.last("antigravity")
    assert rec["script"] == "parallel" and rec["response"] == r.content
    js = _post(fake, "/v1internal:generateContent", body).json()
    assert [list(p) for p in js["response"]["candidates"][0]["content"]["parts"]] == [["text"]] + [["functionCall"]] * 3
    err = provider_body("antigravity", "inband_error", "m", "r1")[0]
    assert orjson.loads(err[-1][6:])["error"]["status"] == "UNAVAILABLE"
    assert _post(fake, "/v1internal:countTokens", body).json() == {"totalTokens": 42}
    assert provider_body("antigravity", "thoughts", "m", "r1") == provider_body("antigravity", "thoughts", "m", "r1")
