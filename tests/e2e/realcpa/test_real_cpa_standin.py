"""The CPA stand-in against the real thing: the same interactions events through
tests/support/standins/cpa_standin.py's translators and through a real CPA, compared byte for byte.

The stand-in models an unfixed CPA on its Devin path: the Devin executor (Connect frames in,
interactions events out) and the shared ``openai/interactions`` translators (interactions
events out to Responses, chat and messages). The Devin executor is in no build this
machine can run (v7.3.x; the public tags stop at v7.2.140), but the translators are, behind
an ``interactions-api-key`` entry: the fake Interactions provider
(tests/support/standins/fake_providers.py) sends the events, real CPA translates them, and the
stand-in's translators get the very same events. The stand-in follows v7.2.140 (the tag
nearest to the Devin builds); what v7.2.89 does differently is asserted in
:func:`test_v7_2_89_differs_from_the_standin` (docs/real-cpa.md lists every difference).

Masked before comparing: chat ``created`` (a clock), and v7.2.140's estimate of the input
tokens in ``message_start`` (CPA's Claude handler counts the request's tokens; the stand-in
writes the translator's template 0).
"""

from __future__ import annotations

import re

import orjson
import pytest
import realcpa
from cpastacks import APIS, Stacks, events, types
from standins import cpa_standin as cs
from standins.fake_providers import SCRIPTS, _cap, interactions_events

pytestmark = pytest.mark.e2e

UPSTREAM_MODEL = realcpa.UPSTREAM_MODELS["interactions"]
SCRIPT_NAMES = ("text", "thinking_text_tool", "two_tools", "tool_only", "no_usage", "cut_tool")
_CREATED = re.compile(rb'"created":\d+')
_ESTIMATE = re.compile(rb'("type":"message_start".*?"usage":\{"input_tokens":)\d+')


def standin_bytes(stacks: Stacks, api: str, script: str, stream: bool) -> bytes:
    """The stand-in's translator fed the events the fake sent CPA for its last request."""
    sent = stacks.fakes.fake.last("interactions")
    assert sent["script"] == script
    s, cut, tokens = SCRIPTS[script].capped(_cap("interactions", sent["body"]))
    evs = interactions_events(s, UPSTREAM_MODEL, cut, tokens, f"v1_fake{stacks.fakes.fake.ids}{script}")
    if api == "responses":  # v7.2.140: the client's model in response.created; the gemini
        # executor's EnsureResponsesUsageDetails (zero details) on the stream
        out = cs.ResponsesOut(request_model=realcpa.MODEL, ensure_usage_details=True)
    else:
        out = cs.TRANSLATORS[api]()
    if not stream:
        return cs.go_json(out.body(evs))
    return b"".join(out.event(e) for e in evs)


def masked(body: bytes) -> bytes:
    return _ESTIMATE.sub(rb"\g<1>0", _CREATED.sub(b'"created":0', body))


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_standin_matches_v7_2_140(stacks, request, script, api, stream):
    if script == "cut_tool" and not stream:
        pytest.skip("an Interactions JSON body carries a call's arguments as an object: a cut call has none to compare")
    st = stacks.get(request, "v7.2.140", "interactions")
    real = st.post("cpa", api, script, stream)
    mine = standin_bytes(stacks, api, script, stream)
    if stream:
        assert [e.decode() for e in masked(real).split(b"\n\n")] == [e.decode() for e in masked(mine).split(b"\n\n")]
    assert masked(real) == masked(mine)
    if api == "messages" and stream:  # the one masked difference: CPA's input-token estimate
        assert (
            events(real)[0]["message"]["usage"]["input_tokens"]
            > 0
            == events(mine)[0]["message"]["usage"]["input_tokens"]
        )


def test_v7_2_89_differs_from_the_standin(stacks, request):
    """v7.2.89's translators, where they differ from v7.2.140 (the stand-in): response.created
    without ``output`` and with the interaction's model; function_call_arguments.delta keys
    in another order (``item_id`` last); no function_call_arguments.done; ``data: [DONE]``
    after response.completed; no zero usage details; chat JSON with reasoning_content after
    tool_calls (v7.2.140: before);
    no input-token estimate in message_start. Chat streams are the same bytes."""
    st = stacks.get(request, "v7.2.89", "interactions")
    raw = st.post("cpa", "responses", "thinking_text_tool")
    evs = events(raw)
    assert evs[0]["response"] == {"id": evs[0]["response"]["id"], "object": "response", "status": "in_progress",
                                  "model": UPSTREAM_MODEL}  # fmt: skip
    delta = next(e for e in evs if e.get("type") == "response.function_call_arguments.delta")
    assert list(delta) == ["type", "output_index", "delta", "sequence_number", "item_id"]
    assert "response.function_call_arguments.done" not in types(raw)
    assert raw.endswith(b"\n\ndata: [DONE]\n\n\n")
    assert evs[-1]["response"]["usage"] == {"input_tokens": 42, "output_tokens": 19, "total_tokens": 61}
    js = orjson.loads(st.post("cpa", "chat", "thinking_text_tool", stream=False))
    assert list(js["choices"][0]["message"]) == ["role", "content", "tool_calls", "reasoning_content"]
    msg = events(st.post("cpa", "messages", "text"))[0]
    assert msg["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0}
    chat = st.post("cpa", "chat", "two_tools")
    assert masked(chat) == masked(standin_bytes(stacks, "chat", "two_tools", True))


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider", ["claude", "interactions", "openai"])
def test_websocket_messages_are_the_sse_data(stacks, request, version, provider):
    """GET /v1/responses sends one message per SSE event, its data JSON (no event: line,
    no [DONE]), as the stand-in's WebSocket handler does."""
    import asyncio

    from cpastacks import ws_turn

    st = stacks.get(request, version, provider)
    ws = asyncio.run(ws_turn(st.cpa.url, "two_tools"))
    sse = st.post("cpa", "responses", "two_tools")
    data = [ln[6:] for ln in sse.split(b"\n") if ln.startswith(b"data: ") and ln != b"data: [DONE]"]
    assert [masked(_stamp(m)) for m in ws] == [masked(_stamp(d)) for d in data]


def _stamp(b: bytes) -> bytes:
    return re.sub(rb'"created_at":\d+', b'"created_at":0', b)
