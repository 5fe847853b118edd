"""The real gateway in the loop: real CPA builds in front of fake providers, raw and through the sidecar.

    client -> [mitmdump -s addons/repair.py, reverse mode] -> real CPA -> tests/support/standins/fake_providers.py

Per CPA version (``tests/support/realcpa.py`` finds the binaries; a version not here skips, saying
why) x provider path (``claude-api-key``, ``interactions-api-key``, ``openai-compatibility``,
each pointed at the local fake) x client API (Responses, chat, messages) x SSE/JSON, and
Responses over a WebSocket:

- raw: what the real CPA emits shows the defects the bug reports describe, asserted per
  version as they really are (``RAW_DEFECTS``; docs/real-cpa.md has the table);
- through the sidecar: the contract checker (``wire/contract.py``) finds nothing;
- a fixed path (v7.2.140's Claude translator): the sidecar steps aside (byte-identical,
  no receipt);
- truncation, mid-stream provider failures, non-stream bodies, the README's recipe.

No mitmdump may log a traceback or "has crashed" during any of it (``no_crash``).

The real clients against the real CPA are in tests/e2e/realcpa/test_real_cpa_clients.py.
"""

from __future__ import annotations

import asyncio
import re

import aiohttp
import orjson
import pytest
from cpastacks import (
    APIS,
    HEADERS,
    PROVIDERS,
    TIMEOUT,
    VERSIONS,
    as_sse,
    events,
    request_body,
    rules,
    types,
    ws_turn,
)
from streamfix.wire.contract import check
from support import Proc, fetch, show_logs_on_failure

pytestmark = pytest.mark.e2e


def _done_index(evs: list[dict], item_type: str) -> int:
    return next(i for i, e in enumerate(evs)
                if e.get("type") == "response.output_item.done" and e["item"]["type"] == item_type)  # fmt: skip


def _added_index(evs: list[dict], item_type: str) -> int:
    return next(i for i, e in enumerate(evs)
                if e.get("type") == "response.output_item.added" and e["item"]["type"] == item_type)  # fmt: skip


# --- raw: the defects the bug reports describe, as each real build has them ----------

STREAM_SCRIPTS = ("text_tool", "thinking_text_tool", "two_tools", "no_usage")

RAW_DEFECTS: dict[tuple[str, str, str], set[str]] = {
    # (version, provider, api): contract rules the raw stream of "thinking_text_tool" breaks
    ("v7.2.89", "claude", "responses"): {"item.order", "item.output_index", "response.fields"},
    ("v7.2.140", "claude", "responses"): set(),
    ("v7.2.89", "claude", "chat"): {"chat.tool_index"},
    ("v7.2.140", "claude", "chat"): {"chat.tool_index"},
    ("v7.2.89", "interactions", "responses"): {"function_call.status", "response.fields", "reasoning.fields"},
    ("v7.2.140", "interactions", "responses"): {"function_call.status", "response.fields", "reasoning.fields"},
    ("v7.2.89", "interactions", "chat"): {"chat.tool_index"},
    ("v7.2.140", "interactions", "chat"): {"chat.tool_index"},
    **{(v, p, "messages"): set() for v in ("v7.2.89", "v7.2.140") for p in PROVIDERS},
    ("v7.2.89", "openai", "responses"): {"response.fields"},  # created/in_progress without model
    ("v7.2.140", "openai", "responses"): set(),
    **{(v, "openai", "chat"): set() for v in ("v7.2.89", "v7.2.140")},
}
"""Measured on the real builds (docs/real-cpa.md). Versions not listed are not asserted raw."""


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider, api", [(p, a) for p in PROVIDERS for a in APIS])
def test_raw_contract_violations(stacks, request, version, provider, api):
    """What the contract checker finds in the real CPA's raw stream (thinking, text, one call)."""
    st = stacks.get(request, version, provider)
    raw = st.post("cpa", api, "thinking_text_tool")
    assert rules(api, raw) == RAW_DEFECTS[(version, provider, api)], check(api, raw)


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_raw_claude_responses_item_order(stacks, request, version):
    """#4429 on the real build: text then tool_use on /v1/responses. v7.2.89 closes the
    message item only after the function_call was added and done; v7.2.140 (b7299a3d8 is
    in v7.2.90) closes it first."""
    st = stacks.get(request, version, "claude")
    evs = events(st.post("cpa", "responses", "text_tool"))
    msg_done, call_added, call_done = (_done_index(evs, "message"), _added_index(evs, "function_call"),
                                       _done_index(evs, "function_call"))  # fmt: skip
    if version == "v7.2.89":
        assert call_added < call_done < msg_done
        # both items claim output_index 0 and 1 as Claude block indexes: here they are 0, 1
        assert [e["type"] for e in evs[msg_done - 2 : msg_done + 1]] == [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
        ]
    else:
        assert msg_done < call_added < call_done
    assert evs[-1]["type"] == "response.completed"


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_raw_interactions_responses_defects(stacks, request, version):
    """#5851's defects 1-3 on the shared interactions->Responses translator, real build."""
    st = stacks.get(request, version, "interactions")
    evs = events(st.post("cpa", "responses", "thinking_text_tool"))
    calls = [e["item"] for e in evs if e.get("type", "").startswith("response.output_item.")
             and e["item"]["type"] == "function_call"]  # fmt: skip
    assert calls and all("status" not in c for c in calls)  # defect 1: no status
    done = evs[-1]
    assert done["type"] == "response.completed"
    assert all("status" not in o for o in done["response"]["output"] if o["type"] == "function_call")
    # defect 2: usage built from a {} template: without usage upstream it stays {}
    # (v7.2.89); v7.2.140 adds zero details but still no input/output/total tokens
    no_usage = events(st.post("cpa", "responses", "no_usage"))
    assert no_usage[-1]["response"]["usage"] == (
        {} if version == "v7.2.89" else {"output_tokens_details": {"reasoning_tokens": 0},
                                        "input_tokens_details": {"cached_tokens": 0}})  # fmt: skip
    # defect 3: the provider says the turn was cut (status incomplete): still completed
    cut = events(st.post("cpa", "responses", "cut_tool"))
    assert cut[-1]["type"] == "response.completed" and cut[-1]["response"]["status"] == "completed"
    # the output_index is the step index: thought 0, message 1, call 2 (dense here only
    # because the steps are); v7.2.89 has no function_call_arguments.done at all
    assert [e["output_index"] for e in evs if e.get("type") == "response.output_item.added"] == [0, 1, 2]
    has_args_done = "response.function_call_arguments.done" in [e.get("type") for e in evs]
    assert has_args_done is (version != "v7.2.89")


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_raw_interactions_chat_defects(stacks, request, version):
    """The chat side of #5851: tool_calls[].index is the step index (2 after a thought and
    a text step), finish_reason never says length; max_tokens does reach the provider."""
    st = stacks.get(request, version, "interactions")
    evs = events(st.post("cpa", "chat", "thinking_text_tool"))
    idx = {
        tc["index"]
        for e in evs
        for ch in e.get("choices", [])
        for tc in (ch.get("delta") or {}).get("tool_calls") or []
    }
    assert idx == {2}
    cut = events(st.post("cpa", "chat", "cut_tool", cap=300))
    finishes = [ch["finish_reason"] for e in cut for ch in e.get("choices", []) if ch.get("finish_reason")]
    assert finishes == ["tool_calls"]
    sent = stacks.fakes.fake.last("interactions")["body"]
    assert sent["generation_config"]["max_output_tokens"] == 300


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_raw_interactions_responses_drops_max_output_tokens(stacks, request, version):
    """Request side of #5851 (defect 5): /v1/responses max_output_tokens never reaches an
    interactions provider."""
    st = stacks.get(request, version, "interactions")
    st.post("cpa", "responses", "text", cap=300)
    sent = stacks.fakes.fake.last("interactions")["body"]
    assert "max_output_tokens" not in orjson.dumps(sent).decode(), sent


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_raw_claude_chat_tool_index(stacks, request, version):
    """Claude -> chat: the tool call's index is its Claude content-block index (1 after a
    text block, 2 after thinking and text), not 0: the defect class of the interactions
    path, on both builds (not in the bug reports; openai-python's stream() helper fails on it)."""
    st = stacks.get(request, version, "claude")
    for script, want in (("text_tool", {1}), ("thinking_text_tool", {2}), ("tool_only", {0})):
        evs = events(st.post("cpa", "chat", script))
        idx = {tc["index"] for e in evs for ch in e.get("choices", [])
               for tc in (ch.get("delta") or {}).get("tool_calls") or []}  # fmt: skip
        assert idx == want, script


# --- through the sidecar: the contract holds ------------------------------------------


UNREPAIRED: dict[tuple[str, str, str], set[str]] = {
    # (provider, api, script): contract rules the sidecar does not repair yet, found here
    ("openai", "messages", "two_tools"): {"messages.block_order"},
}
"""CPA's OpenAI -> Claude translator (v7.2.89 and v7.2.140) starts every tool_use block
before the first one's deltas and stops them interleaved (block 1 open when block 2
starts). No repair rule exists for /v1/messages block order: a finding for wire/messages.py."""


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("api", APIS)
def test_sidecar_stream_meets_contract(stacks, request, version, provider, api):
    st = stacks.get(request, version, provider)
    for script in STREAM_SCRIPTS:
        got = st.post("sidecar", api, script)
        known = UNREPAIRED.get((provider, api, script), set())
        assert rules(api, got) == known, (script, check(api, got), got.decode()[-3000:])
        if known:  # the raw stream has it too: CPA's, not the sidecar's
            assert known <= rules(api, st.post("cpa", api, script))


def json_problems(api: str, body: bytes) -> list[str]:
    """What a client requires of a non-streamed body (the JSON side of the contract)."""
    obj = orjson.loads(body)
    out: list[str] = []
    if api == "responses":
        for o in obj.get("output", []):
            if o.get("type") == "function_call" and o.get("status") not in ("completed", "incomplete"):
                out.append("function_call without status")
        u = obj.get("usage") or {}
        if not all(isinstance(u.get(k), int) for k in ("input_tokens", "output_tokens", "total_tokens")):
            out.append(f"usage {u}")
    elif api == "chat":
        calls = obj["choices"][0]["message"].get("tool_calls") or []
        if calls and obj["choices"][0]["finish_reason"] != "tool_calls":
            out.append("finish_reason")
    else:
        if obj.get("type") != "message" or not isinstance(obj.get("content"), list):
            out.append("not a message")
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("api", APIS)
def test_sidecar_json(stacks, request, version, provider, api):
    st = stacks.get(request, version, provider)
    for script in ("text_tool", "no_usage"):
        got = st.post("sidecar", api, script, stream=False)
        assert json_problems(api, got) == [], (script, got.decode())


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_sidecar_repairs_interactions_json(stacks, request, version):
    """Non-stream /v1/responses on the interactions path: raw function_call output items
    have no status and usage {} without upstream usage; through the sidecar both are there."""
    st = stacks.get(request, version, "interactions")
    raw = orjson.loads(st.post("cpa", "responses", "no_usage", stream=False))
    assert [o for o in raw["output"] if o["type"] == "function_call" and "status" not in o]
    assert json_problems("responses", st.post("sidecar", "responses", "no_usage", stream=False)) == []


# --- Responses over a WebSocket (GET /v1/responses) --------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_websocket(stacks, request, version, provider):
    """The same translators serve GET /v1/responses: raw they show the SSE defects (where
    the version has them), through the sidecar the contract holds."""
    st = stacks.get(request, version, provider)
    raw = asyncio.run(ws_turn(st.cpa.url, "thinking_text_tool"))
    want = RAW_DEFECTS.get((version, provider, "responses"))
    if want is not None:
        assert rules("responses", as_sse(raw)) == want
    for script in ("thinking_text_tool", "two_tools"):
        got = asyncio.run(ws_turn(st.proxy, script))
        assert check("responses", as_sse(got)) == [], (script, got)


# --- a fixed path: the sidecar steps aside ---------------------------------------------

_STAMP = re.compile(rb'"(created_at|created)":\d+')


def _masked(body: bytes) -> bytes:
    return _STAMP.sub(rb'"\1":0', body)


def test_fixed_claude_path_steps_aside(stacks, request):
    """v7.2.140's Claude translator (#4429 fixed) on /v1/responses: raw and through the
    sidecar the same events; the sidecar's receipt names what it changed."""
    st = stacks.get(request, "v7.2.140", "claude")
    raw = st.post("cpa", "responses", "text_tool")
    n = len(st.mitm.lines)
    got = st.post("sidecar", "responses", "text_tool")
    assert rules("responses", raw) == set()
    assert _masked(got) == _masked(raw)
    assert not [ln for ln in st.mitm.lines[n:] if "fixed" in ln], st.mitm.since(n)


# --- an upstream failure mid-stream ------------------------------------------------------

ERROR_UNREPAIRED: dict[tuple[str, str, str], set[str]] = {}
"""(version, provider, api) -> rules still broken through the sidecar after a mid-stream
provider error: none since rules hidden_failure and eof_terminal on every API. Before them:
interactions -> messages just stopped after the last delta (no message_stop, no error
event; now an error event ends it), v7.2.89's OpenAI -> Claude translator closed the block
and sent message_stop after the provider's error (a success synthesized after a failure;
now an error event in its place), and interactions -> chat ended with ``data: [DONE]`` and no
finish_reason (now an error chunk before it)."""
SILENT_CHAT_END: set[str] = set()
"""Providers whose chat stream says nothing of a failure through the sidecar: none (see above)."""


def _terminal_types(body: bytes) -> list[str]:
    return [t for t in types(body) if t in ("response.completed", "response.incomplete", "response.failed", "error")]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("api", APIS)
def test_upstream_error_mid_stream(stacks, request, version, provider, api):
    """The provider fails after two deltas: never a success through the sidecar."""
    st = stacks.get(request, version, provider)
    raw = st.post("cpa", api, "error_mid")
    got = st.post("sidecar", api, "error_mid")
    assert rules(api, got) == ERROR_UNREPAIRED.get((version, provider, api), set()), check(api, got)
    if api == "responses":
        assert "response.completed" not in types(got)
        assert _terminal_types(got)[-1] in ("response.failed", "error")
        if version == "v7.2.89":  # the stream just ends: no terminal, no error (raw)
            assert _terminal_types(raw) == []
            assert _terminal_types(got) == ["response.failed"]
        elif version == "v7.2.140":  # event: error with sequence_number 0
            assert _terminal_types(raw) == ["error"] and events(raw)[-1]["sequence_number"] == 0
    elif api == "chat":
        errors = [e for e in events(got) if "error" in e]
        finishes = [
            ch.get("finish_reason") for e in events(got) for ch in e.get("choices", []) if ch.get("finish_reason")
        ]
        assert not finishes
        assert bool(errors) is (provider not in SILENT_CHAT_END)
    else:
        assert "message_delta" not in types(got) and types(got)[-1] == "error"


async def ws_until_end(base: str, script: str, wait: float = 3.0) -> tuple[list[bytes], str]:
    """One turn; (messages, how it ended: ``terminal``, ``closed`` or ``open``)."""
    body = request_body("responses", script)
    body.pop("stream")
    body["type"] = "response.create"
    out: list[bytes] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(
        base.replace("http://", "ws://") + "/v1/responses", headers={"authorization": HEADERS["authorization"]},
    ) as ws:  # fmt: skip
        await ws.send_str(orjson.dumps(body).decode())
        while True:
            try:
                msg = await asyncio.wait_for(ws.receive(), wait)
            except TimeoutError:
                return out, "open"
            if msg.type != aiohttp.WSMsgType.TEXT:
                return out, "closed"
            out.append(msg.data.encode())
            if orjson.loads(msg.data).get("type") in ("response.completed", "response.incomplete", "response.failed"):
                return out, "terminal"


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider", ["claude", "interactions"])
def test_websocket_upstream_error(stacks, request, version, provider):
    """Over the WebSocket, v7.2.89 answers a provider failure with an error message
    (status 408, "stream closed before response.completed") and keeps the socket open;
    v7.2.140 drops the connection without a close frame (as the stand-in does). Neither
    says response.completed, raw or through the sidecar."""
    st = stacks.get(request, version, provider)
    raw, how = asyncio.run(ws_until_end(st.cpa.url, "error_mid"))
    last = orjson.loads(raw[-1])
    if version == "v7.2.89":
        assert how == "open" and last["type"] == "error" and last["status"] == 408, (how, raw[-2:])
    else:
        assert how == "closed" and last["type"] == "response.output_text.delta", (how, raw[-2:])
    got, how = asyncio.run(ws_until_end(st.proxy, "error_mid"))
    assert not [m for m in got if b'"response.completed"' in m]
    # the sidecar passes the failure on as CPA gave it: the error message (numbered after
    # the turn's last event), or the dropped connection
    if version == "v7.2.89":
        err = orjson.loads(got[-1])
        assert how == "open" and err["type"] == "error" and err["sequence_number"] == len(got)
    else:
        assert how == "closed"


# --- the README's recipe, as written --------------------------------------------------


def test_readme_recipe(stacks, request, tmp_path):
    """README "In front of a real CPA": ``scripts/sidecar --upstream <CPA> --listen ...`` in
    front of the real v7.2.89 (its Claude path), a client on the sidecar's address."""
    from support import ROOT, free_port

    st = stacks.get(request, "v7.2.89", "claude")
    port = free_port()
    proc = Proc([str(ROOT / "scripts" / "sidecar"), "--upstream", st.cpa.url, "--listen", f"127.0.0.1:{port}",
                 "--", "--set", f"confdir={tmp_path}"])  # fmt: skip
    show_logs_on_failure(request, {"scripts/sidecar": proc})
    try:
        proc.wait_for(rf"listening at 127\.0\.0\.1:{port}", 60)
        r = fetch(f"http://127.0.0.1:{port}/v1/responses", body=orjson.dumps(request_body("responses", "text_tool")),
                  headers=HEADERS, timeout=TIMEOUT)  # fmt: skip
        assert r.status == 200
        assert rules("responses", st.post("cpa", "responses", "text_tool")) >= {"item.order"}
        assert check("responses", r.body) == []
    finally:
        proc.stop()


# --- truncation: the provider says the output was cut -------------------------------


def ending(api: str, body: bytes) -> str:
    evs = events(body)
    if api == "responses":
        t = [e for e in evs if e.get("type") in ("response.completed", "response.incomplete", "response.failed")]
        reason = (t[-1]["response"].get("incomplete_details") or {}).get("reason")
        return t[-1]["type"].removeprefix("response.") + (f":{reason}" if reason else "")
    if api == "chat":
        return ",".join(ch["finish_reason"] for e in evs for ch in e.get("choices", []) if ch.get("finish_reason"))
    return ",".join(e["delta"].get("stop_reason") or "" for e in evs if e.get("type") == "message_delta")


INCOMPLETE = "incomplete:max_output_tokens"
TRUNCATION_RAW = {
    # (provider, api) -> how the real CPA ends a turn the provider cut ("cut_tool": a call
    # whose arguments stop mid-string, Anthropic stop_reason max_tokens, interactions status
    # incomplete, chat finish_reason length); v7.2.89 and v7.2.140 alike unless keyed by version
    ("claude", "responses"): "completed",
    ("claude", "chat"): "length",
    ("claude", "messages"): "max_tokens",
    ("interactions", "responses"): "completed",
    ("interactions", "chat"): "tool_calls",
    ("interactions", "messages"): "tool_use",
    ("openai", "responses", "v7.2.89"): "completed",
    ("openai", "responses", "v7.2.140"): INCOMPLETE,
    ("openai", "chat"): "length",
    ("openai", "messages"): "tool_use",
}
TRUNCATION_REPAIRED = {"responses": INCOMPLETE, "chat": "length", "messages": "max_tokens"}


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("api", APIS)
def test_truncation(stacks, request, version, provider, api):
    """A turn the provider cut: raw as each build reports it (a success on most paths);
    through the sidecar the API's truncation ending (here from the last call's arguments
    not parsing)."""
    st = stacks.get(request, version, provider)
    want_raw = TRUNCATION_RAW.get((provider, api, version), TRUNCATION_RAW.get((provider, api)))
    assert ending(api, st.post("cpa", api, "cut_tool")) == want_raw
    got = st.post("sidecar", api, "cut_tool")
    assert ending(api, got) == TRUNCATION_REPAIRED[api]
    assert check(api, got) == []


RAW_JSON: dict[tuple[str, str, str], list[str]] = {
    # (provider, api, script) -> json_problems() of the raw non-stream body, both builds
    ("interactions", "responses", "text_tool"): ["function_call without status"],
    ("interactions", "responses", "no_usage"): ["function_call without status", "usage {}"],
    ("openai", "responses", "no_usage"): ["usage {}"],  # no usage key at all
}


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("api", APIS)
def test_raw_json(stacks, request, version, provider, api):
    """Non-stream bodies raw: the interactions path's Responses output items have no id
    (and calls no status); without upstream usage the Responses body has no usage
    (interactions, OpenAI-compatible). Everything else is clean."""
    st = stacks.get(request, version, provider)
    for script in ("text_tool", "no_usage"):
        raw = st.post("cpa", api, script, stream=False)
        assert json_problems(api, raw) == RAW_JSON.get((provider, api, script), []), (script, raw)
        if api == "responses":
            out = orjson.loads(raw)["output"]
            assert all(("id" in o) is (provider != "interactions") for o in out), out


# --- a fixed v8 (not obtainable here: skips, saying why) ------------------------------

_CREATED_AT = re.compile(rb',"created_at":\d+')


def test_v8_interactions_path_steps_aside(stacks, request):
    """CPA v8's fixed interactions translator (as read in its source and modelled by
    recordings/responses-cpa-v8-fixed): only ``created_at`` is missing from
    response.created; the sidecar adds it and changes no other byte. Never run here: the
    module proxy refuses v8 and the public repository has no v8 tag."""
    st = stacks.get(request, "v8.0.78", "interactions")
    raw = st.post("cpa", "responses", "thinking_text_tool")
    got = st.post("sidecar", "responses", "thinking_text_tool")
    assert rules("responses", raw) <= {"response.fields"}
    first = got.split(b"\n\n", 1)
    assert b'"created_at":' in first[0] and b'"created_at":' not in raw.split(b"\n\n", 1)[0]
    assert _CREATED_AT.sub(b"", first[0]) + b"\n\n" + first[1] == raw
