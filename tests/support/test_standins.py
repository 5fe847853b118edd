"""tests/support/standins/fake_devin.py and tests/support/standins/cpa_standin.py, in process, without the sidecar."""

from __future__ import annotations

import httpx
import orjson
import pytest
from samples import client_digest
from standins import cpa_standin, fake_devin
from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import decode_body, encode_frame
from streamfix.wire.devin import CHAT_PATH, DevinTap
from streamfix.wire.sse import SseParser


@pytest.fixture
async def servers():
    r1, dport, fake = await fake_devin.serve(delay_ms=0)
    r2, sport = await cpa_standin.serve(f"http://127.0.0.1:{dport}", None)
    yield f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{dport}", fake
    await r2.cleanup()
    await r1.cleanup()


def devin_request(prompt: str, max_tokens: int = 128000) -> bytes:
    req = pb.GetChatMessageRequest(
        prompts=[pb.ChatMessagePrompt(source=pb.CHAT_MESSAGE_SOURCE_USER, prompt=prompt)],
        configuration=pb.CompletionConfiguration(max_tokens=max_tokens),
    )
    return encode_frame(req.SerializeToString())


@pytest.mark.parametrize(
    "scenario, stop, ok",
    [("stop", 2, True), ("tool", 10, True), ("max_tokens", 3, True), ("max_tokens_text", 3, True),
     ("content_filter", 11, True), ("gzip", 10, True), ("error", 2, False), ("truncated", 0, False)],
)  # fmt: skip
async def test_fake_devin_scenarios(servers, scenario, stop, ok):
    _, devin, fake = servers
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(devin + CHAT_PATH, content=devin_request(f"hi [scenario:{scenario}] [conv:z9]"))
    assert r.headers["content-type"] == "application/connect+proto"
    frames, end = decode_body(r.content)
    tap = DevinTap(keep_text=True)
    tap.feed(r.content)
    res = tap.close()
    assert res.stop_reason == stop
    assert end.ok is ok
    if scenario == "gzip":
        assert all(f.compressed for f in frames)
    if scenario == "error":
        assert end.trailer.error_code == "resource_exhausted"
    if scenario == "truncated":
        assert end.truncated
    if scenario not in ("error", "truncated"):
        assert b"z9" in bytes(tap.text) + bytes(tap.args)  # the conversation marker is woven in
    assert fake.requests[-1]["scenario"] == scenario and fake.requests[-1]["conv"] == "z9"


async def test_fake_devin_honours_max_tokens(servers):
    _, devin, fake = servers
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(devin + CHAT_PATH, content=devin_request("[scenario:tool]", max_tokens=5))
        full = await c.post(devin + CHAT_PATH, content=devin_request("[scenario:tool]"))
    tap = DevinTap(keep_text=True)
    tap.feed(r.content)
    res = tap.close()
    assert res.stop_reason == 3 and res.usage.output_tokens == 5
    assert len(tap.text) + len(tap.args) == 5 * fake_devin.CHARS_PER_TOKEN
    assert fake.requests[-2]["max_tokens"] == 5
    tap = DevinTap()
    tap.feed(full.content)
    assert tap.close().stop_reason == 10


async def test_fake_devin_rejects_a_non_request(servers):
    _, devin, _ = servers
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(devin + CHAT_PATH, content=b"nope")
    _, end = decode_body(r.content)
    assert end.trailer.error_code == "invalid_argument"


def sse(body: bytes) -> list[tuple[str | None, dict]]:
    p = SseParser()
    out = []
    for ev in p.feed(body) + p.close():
        if ev.data and ev.data != b"[DONE]":
            out.append((ev.event, orjson.loads(ev.data)))
    return out


async def test_standin_responses_is_cpas_buggy_shape(servers):
    standin, _, fake = servers
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(standin + "/v1/responses", json={"model": "devin/swe-2", "stream": True, "max_output_tokens": 9,
                                                          "input": "go [scenario:max_tokens] [conv:q]"})  # fmt: skip
    evs = sse(r.content)
    assert fake.requests[-1]["max_tokens"] == 128000  # max_output_tokens dropped, like CPA
    types = [d["type"] for _, d in evs]
    assert types[0] == "response.created" and types[-1] == "response.completed"  # never incomplete
    assert "response.in_progress" not in types
    calls = [
        d["item"]
        for _, d in evs
        if d["type"].startswith("response.output_item") and d["item"]["type"] == "function_call"
    ]
    assert calls and all("status" not in it for it in calls)  # the missing status
    assert [d["sequence_number"] for _, d in evs] == list(range(1, len(evs) + 1))
    assert r.content.endswith(b"\n\n\n")  # the swallowed [DONE] leaves one newline
    assert b"\\u003c!doctype html\\u003e" in r.content  # Go's HTML escaping
    done = next(d for _, d in evs if d["type"] == "response.function_call_arguments.done")
    args = "".join(d["delta"] for _, d in evs if d["type"] == "response.function_call_arguments.delta")
    assert done["arguments"] == args and not args.endswith("}")
    text = [d["delta"] for _, d in evs if d["type"] == "response.output_text.delta"]
    assert client_digest(text, [args])[1] == len("".join(text).encode())


async def test_standin_chat_and_messages(servers):
    standin, _, fake = servers
    async with httpx.AsyncClient(trust_env=False) as c:
        chat = await c.post(standin + "/v1/chat/completions", json={"model": "m", "stream": True, "max_tokens": 77,
                            "messages": [{"role": "user", "content": "[scenario:tool]"}]})  # fmt: skip
        assert fake.requests[-1]["max_tokens"] == 77  # the chat path maps the cap
        msgs = await c.post(standin + "/v1/messages", json={"model": "m", "stream": True, "max_tokens": 50,
                            "messages": [{"role": "user", "content": "[scenario:max_tokens]"}]})  # fmt: skip
        assert fake.requests[-1]["max_tokens"] == 128000
    evs = sse(chat.content)
    calls = [tc for _, d in evs for ch in d["choices"] for tc in ch["delta"].get("tool_calls", [])]
    assert {tc["index"] for tc in calls} == {2}  # the step index, not 0
    assert evs[-1][1]["choices"][0]["finish_reason"] == "tool_calls" and chat.content.endswith(b"data: [DONE]\n\n")
    mev = sse(msgs.content)
    assert [d["delta"]["stop_reason"] for _, d in mev if d["type"] == "message_delta"] == ["tool_use"]
    assert b"\n\n\nevent: " in msgs.content  # three newlines after each event


@pytest.mark.parametrize("api", ["/v1/responses", "/v1/chat/completions", "/v1/messages"])
async def test_standin_non_stream(servers, api):
    standin, _, _ = servers
    body = {"model": "m", "stream": False, "max_tokens": 100}
    if api == "/v1/responses":
        body["input"] = "[scenario:tool]"
    else:
        body["messages"] = [{"role": "user", "content": "[scenario:tool]"}]
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(standin + api, json=body)
    obj = r.json()
    if api == "/v1/responses":
        assert obj["status"] == "completed"
        fc = next(o for o in obj["output"] if o["type"] == "function_call")
        assert "status" not in fc and orjson.loads(fc["arguments"])["path"] == "index.html"
    elif api == "/v1/chat/completions":
        ch = obj["choices"][0]
        assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None
    else:
        assert obj["stop_reason"] == "tool_use" and obj["content"][-1]["input"]["path"] == "index.html"


async def test_standin_upstream_errors(servers):
    standin, _, _ = servers
    async with httpx.AsyncClient(trust_env=False) as c:
        chat = await c.post(standin + "/v1/chat/completions", json={"model": "m", "stream": True,
                            "messages": [{"role": "user", "content": "[scenario:error]"}]})  # fmt: skip
        trunc = await c.post(standin + "/v1/responses", json={"model": "m", "stream": True,
                             "input": "[scenario:truncated]"})  # fmt: skip
        ns = await c.post(standin + "/v1/responses", json={"model": "m", "input": "[scenario:error]"})
    last = sse(chat.content)[-1][1]
    assert last["error"]["code"] == "resource_exhausted" and b"[DONE]" not in chat.content
    assert sse(trunc.content)[-1] == ("error", {"type": "error", "code": "stream_truncated",
                                                "message": "devin stream terminated prematurely before EOS trailer"})  # fmt: skip
    assert ns.status_code == 502 and ns.json()["error"]["code"] == "resource_exhausted"
