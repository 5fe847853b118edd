"""Real clients (AI SDK 5/6/7, openai-python, Codex) against every recording, raw and repaired.

The matrix runs once, in one test, with its own thread pool (so under pytest-xdist it
occupies one worker while the other runs the rest of the suite). It asserts both
directions:

- through the addon every client gets what the recording's hand-checked expected body
  says (``judge.py``: right tool calls, valid, right finish; the documented error for a
  truncated stream);
- straight from the upstream every clean recording works, and every buggy recording
  fails each client exactly the way ``docs/clients.md`` records (which was checked
  against the client research notes); a buggy recording no client fails is named
  there as proving nothing.

``STREAMFIX_CLIENTS_ABLATE=1`` adds the slower ablation test: each repair rule switched
off in turn, and which client run catches it.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from expect import FOLLOWUP, MARKER_FILE, Call, Expected, expected_from_body, output_cap, tools_for
from harness import ABLATIONS, SCRATCH, problems, proves_nothing, run_matrix, stack, transport_counts
from judge import judge
from report import ABL_BEGIN, ABL_END, BEGIN, DOC, END, ablation_table, render_markdown, render_text
from runners import CLIENT_LIST, CLIENTS, installed, run_codex

from streamfix.recordings import load
from streamfix.replay import Replay

pytestmark = pytest.mark.clients


def _client(name):
    return next(c for c in CLIENT_LIST if c.name == name)


# --- fast checks of the harness itself ----------------------------------------------


def test_every_client_is_installed():
    missing = [c.name for c in CLIENT_LIST if not installed(c)]
    assert not missing, f"not installed in {CLIENTS}: {missing}; run scripts/install-clients"


def test_replay_answers_a_tool_result_with_the_followup_recording():
    replay = Replay()
    path = f"/rec/responses-codex-exec,{FOLLOWUP}/v1/responses"
    first = {"input": [{"type": "message", "role": "user", "content": "hi"}]}
    second = {"input": first["input"] + [{"type": "function_call_output", "call_id": "c", "output": "ok"}]}
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c", "content": "ok"}]}
    assert replay.pick(path, {}, first)[0].name == "responses-codex-exec"
    assert replay.pick(path, {}, None)[0].name == "responses-codex-exec"
    assert replay.pick(path, {}, second)[0].name == FOLLOWUP
    assert replay.pick(path, {}, chat)[0].name == FOLLOWUP
    assert replay.pick(path, {}, second)[1] == "/v1/responses"


def test_expected_facts_come_from_the_hand_checked_body():
    exp = expected_from_body("responses", load("responses-codex-exec").expected)
    assert exp.calls == (Call("exec_command", f'{{"cmd":"echo probe-ok > {MARKER_FILE}"}}'),)
    assert exp.finish == "response.completed" and not exp.truncated and exp.writes_marker
    assert exp.aisdk_finish() == "tool-calls"
    nonstream = expected_from_body(
        "chat",
        b'{"choices":[{"index":0,"message":{"role":"assistant","content":null,'
        b'"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},'
        b'"finish_reason":"tool_calls"}]}',
        stream=False,
    )
    assert nonstream.calls == (Call("f", "{}"),) and nonstream.aisdk_finish() == "tool-calls" and not nonstream.stream
    done = expected_from_body("responses", load(FOLLOWUP).expected)
    assert done.calls == () and done.text == "ALL DONE" and done.aisdk_finish() == "stop"
    chat = (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\\"x\\":"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    )
    exp = expected_from_body("chat", chat)
    assert exp.calls == (Call("f", '{"x":'),) and exp.truncated and not exp.calls[0].valid


def test_messages_and_gemini_facts_tools_and_caps():
    msg = (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":'
        b'{"type":"tool_use","id":"t","name":"f","input":{}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":'
        b'{"type":"input_json_delta","partial_json":"{\\"x\\":"}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens"}}\n\n'
    )
    exp = expected_from_body("messages", msg)
    assert exp.calls == (Call("f", '{"x":'),) and exp.truncated and exp.aisdk_finish() == "length"
    gem = (
        b'data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}\r\n\r\n'
        b'data: {"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP"}]}\r\n\r\n'
    )
    exp = expected_from_body("gemini", gem)
    assert exp.calls == (Call("f", "{}"),) and not exp.truncated and exp.aisdk_finish() == "tool-calls"
    tools = tools_for(
        {
            "tools": [
                {"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]},
                {"name": "g", "input_schema": {"type": "object"}},
            ]
        },
        (Call("h", "{}"),),
    )
    assert [(t["name"], t["parameters"]["type"]) for t in tools] == [("f", "object"), ("g", "object"), ("h", "object")]
    assert output_cap({"max_tokens": 400}) == ("max_tokens", 400)
    assert output_cap({"generationConfig": {"maxOutputTokens": 400}}) == ("maxOutputTokens", 400)
    assert output_cap({"stream": True}) is None


CALL = Call("get_weather", '{"city":"Paris"}')
TOOLS = Expected("responses", (CALL,), "response.completed", None, "")
CUT = Expected("responses", (Call("get_weather", '{"ci'),), "response.incomplete", "max_output_tokens", "")
CHAT_CUT = Expected("chat", (Call("get_weather", '{"ci'),), "length", None, "")
FAILED = Expected("responses", (), "response.failed", None, "Partial")
CHAT_FAILED = Expected("chat", (), "error", None, "")


@pytest.mark.parametrize(
    "client, exp, result, ok",
    [
        (
            "aisdk7/responses",
            TOOLS,
            {
                "finishReason": "tool-calls",
                "toolCalls": [{"toolName": "get_weather", "input": {"city": "Paris"}, "invalid": False}],
            },
            True,
        ),
        ("aisdk7/responses", TOOLS, {"finishReason": "error", "errors": ["x"], "toolCalls": []}, False),
        (
            "aisdk7/responses",
            TOOLS,
            {
                "finishReason": "tool-calls",
                "toolCalls": [{"toolName": "get_weather", "input": '{"city":"Par', "invalid": True}],
            },
            False,
        ),
        (
            "aisdk7/responses",
            CUT,
            {
                "finishReason": "length",
                "toolErrors": ["bad json"],
                "toolCalls": [{"toolName": "get_weather", "input": '{"ci', "invalid": True}],
            },
            True,
        ),
        (
            "aisdk7/responses",
            CUT,
            {
                "finishReason": "tool-calls",
                "toolCalls": [{"toolName": "get_weather", "input": '{"ci', "invalid": True}],
            },
            False,
        ),
        ("aisdk6/chat", Expected("chat", (CALL,), "tool_calls", None, ""), {"thrown": "hasFinished"}, False),
        (
            "openai-py/responses.stream",
            TOOLS,
            {"status": "completed", "calls": [["get_weather", '{"city":"Paris"}']]},
            True,
        ),
        ("openai-py/responses.stream", CUT, {"status": "completed", "calls": [["get_weather", '{"ci']]}, False),
        (
            "openai-py/responses.stream",
            CUT,
            {
                "exception": "RuntimeError",
                "types": ["response.incomplete"],
                "message": "Didn't receive a `response.completed` event.",
            },
            True,
        ),
        ("openai-py/chat.stream", CHAT_CUT, {"exception": "LengthFinishReasonError", "message": ""}, True),
        ("openai-py/chat.stream", CHAT_CUT, {"finish": "tool_calls", "calls": [["get_weather", '{"ci']]}, False),
        (
            "openai-py/chat.stream",
            Expected("chat", (CALL,), "tool_calls", None, ""),
            {"exception": "IndexError", "message": "list index out of range"},
            False,
        ),
        ("openai-py/responses", CUT, {"terminal": "response.completed", "calls": [["get_weather", '{"ci']]}, False),
        (
            "openai-py/responses.stream",
            replace(CUT, stream=False),
            {"status": "incomplete", "calls": [["get_weather", '{"ci']]},
            True,
        ),
        (
            "openai-py/responses.stream",
            replace(CUT, stream=False),
            {"status": "completed", "calls": [["get_weather", '{"ci']]},
            False,
        ),
        ("openai-py/chat.stream", replace(CHAT_CUT, stream=False), {"exception": "LengthFinishReasonError"}, True),
        ("codex", TOOLS, {"rc": 0, "last": "ALL DONE", "failures": []}, True),
        ("codex", TOOLS, {"rc": 1, "last": "", "failures": ["failed to parse ResponseCompleted"]}, False),
        ("codex", TOOLS, {"rc": 0, "last": "Let me run that.", "failures": []}, False),
        ("codex", TOOLS, {"rc": "timeout", "failures": []}, False),
        ("codex", CUT, {"rc": 1, "failures": ["Incomplete response returned, reason: max_output_tokens"]}, True),
        ("codex", CUT, {"rc": 0, "last": "ALL DONE", "failures": []}, False),
        # a failure terminal must reach every client as a failure, never as a success
        ("aisdk7/responses", FAILED, {"finishReason": "error", "errors": ["cut"], "toolCalls": []}, True),
        ("aisdk7/responses", FAILED, {"finishReason": "stop", "errors": [], "toolCalls": []}, False),
        ("aisdk5/responses", FAILED, {"finishReason": "unknown", "errors": [], "toolCalls": []}, True),
        ("openai-py/responses", FAILED, {"terminal": "response.failed", "calls": []}, True),
        ("openai-py/responses", FAILED, {"calls": []}, False),
        (
            "openai-py/responses.stream",
            FAILED,
            {
                "exception": "RuntimeError",
                "types": ["response.failed"],
                "message": "Didn't receive a `response.completed` event.",
            },
            True,
        ),
        ("openai-py/responses.stream", FAILED, {"status": "completed", "calls": []}, False),
        ("codex", FAILED, {"rc": 1, "failures": ["stream disconnected before completion: cut"]}, True),
        ("codex", FAILED, {"rc": 0, "last": "Partial", "failures": []}, False),
        ("codex-ws", TOOLS, {"rc": 0, "last": "ALL DONE", "failures": [], "ws_turns": 2, "http_requests": 0}, True),
        ("codex-ws", TOOLS, {"rc": 0, "last": "ALL DONE", "failures": [], "ws_turns": 1, "http_requests": 1}, False),
        ("codex-ws", TOOLS, {"rc": 0, "last": "ALL DONE", "failures": [], "ws_turns": 0, "http_requests": 2}, False),
        ("codex-ws", FAILED, {"rc": 1, "failures": ["closed"], "ws_turns": 1, "http_requests": 1}, True),
        ("codex-ws", FAILED, {"rc": 1, "failures": ["closed"], "ws_turns": 0, "http_requests": 2}, False),
        # an error event as the failure (chat/messages/Gemini; streamfix's for a stream with no event)
        ("openai-py/chat", CHAT_FAILED, {"exception": "APIError", "message": "The upstream sent no event"}, True),
        ("openai-py/chat", CHAT_FAILED, {"calls": [], "text": ""}, False),  # the empty answer
        ("openai-py/chat.stream", CHAT_FAILED, {"exception": "APIError", "message": "x"}, True),
        ("openai-py/chat.stream", CHAT_FAILED, {"exception": "AssertionError", "message": ""}, False),
        ("aisdk7/chat", CHAT_FAILED, {"errors": ["x"], "finishReason": "error"}, True),
        ("aisdk7/chat", CHAT_FAILED, {"errors": [], "finishReason": "stop"}, False),
        ("aisdk6/responses", FAILED, {"thrown": "The upstream sent no event: the stream was empty."}, True),
        ("aisdk6/responses", TOOLS, {"thrown": "The upstream sent no event: the stream was empty."}, False),
        (
            "openai-py/responses.stream",
            FAILED,
            {
                "exception": "RuntimeError",
                "message": "Expected to have received `response.created` before `response.failed`",
            },
            True,
        ),
    ],
)
def test_judge(client, exp, result, ok):
    assert judge(_client(client), exp, result).ok is ok


# --- the matrix ------------------------------------------------------------------------


def _generated(text: str, begin: str, end: str) -> list[str]:
    """The machine-independent lines of a generated block (tables and failure lists,
    not the version lines: openai-python floats within 3.x, node differs by machine)."""
    if begin not in text or end not in text:
        return []
    block = text.split(begin, 1)[1].split(end, 1)[0]
    return [ln for ln in block.splitlines() if ln.startswith(("| ", "- `", "Buggy", "Recordings no"))]


def test_every_client_against_every_recording(record_property):
    m = run_matrix()
    text = render_text(m)
    record_property("terminal_summary", text)
    (CLIENTS / "matrix.txt").write_text(text + "\n")
    found = problems(m)
    assert not m.missing, f"clients not installed: {[c.name for c in m.missing]}; run scripts/install-clients"
    assert not found, "\n".join(found) + "\n\n" + text
    fresh = _generated(f"{BEGIN}\n{render_markdown(m)}\n{END}", BEGIN, END)
    recorded = _generated(DOC.read_text() if DOC.exists() else "", BEGIN, END)
    stale = [f"- {ln}" for ln in recorded if ln not in fresh] + [f"+ {ln}" for ln in fresh if ln not in recorded]
    assert not stale, (
        "docs/clients.md does not describe what the clients do now (raw failures must be the "
        "documented ones). Check the new behaviour against the client notes, then run "
        "`.venv/bin/python tests/support/clients/harness.py --write-docs`:\n" + "\n".join(stale) + "\n\n" + text
    )
    if proves_nothing(m):  # named in the output; not a failure (the addon may still fix it)
        print("proves nothing:", proves_nothing(m))


@pytest.mark.skipif(not os.environ.get("STREAMFIX_CLIENTS_ABLATE"), reason="set STREAMFIX_CLIENTS_ABLATE=1")
def test_which_client_catches_each_rule(record_property):
    modes = {"repaired": ()} | {f"no-{k}": v for k, v in ABLATIONS.items()}
    m = run_matrix(modes, raw=False)
    table = ablation_table(m, markdown=False)
    record_property("terminal_summary", table)
    fresh = _generated(f"{ABL_BEGIN}\n{ablation_table(m)}\n{ABL_END}", ABL_BEGIN, ABL_END)
    recorded = _generated(DOC.read_text() if DOC.exists() else "", ABL_BEGIN, ABL_END)
    assert fresh == recorded, (
        "docs/clients.md's ablation table is stale; run "
        "`.venv/bin/python tests/support/clients/harness.py --ablate --write-docs`\n" + table
    )


@pytest.mark.parametrize("recording", ["responses-devin-emptyusage", "responses-devin-truncated"])
def test_codex_websocket_refused_falls_back_to_https(recording):
    """``streamfix_websocket=refuse``: the real Codex with a WebSocket provider gets a 426
    for its upgrade, falls back to HTTPS streaming at once and gets the repaired SSE
    stream (the replay upstream logs HTTP requests for the run and no WebSocket turn);
    with the default policy the same run stays on the WebSocket and is repaired there."""
    codex = _client("codex-ws")
    if not installed(codex):
        pytest.skip("run scripts/install-clients")
    rec = load(recording)
    exp = expected_from_body(rec.api, rec.expected, rec.streaming)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    # under .cache, not /tmp: Codex refuses to set up a CODEX_HOME under the temp dir
    with tempfile.TemporaryDirectory(prefix="refuse-", dir=SCRATCH) as tmp:
        scratch = Path(tmp)
        with stack({"refuse": ("streamfix_websocket=refuse",), "repaired": ()}, scratch) as st:
            replay = st.procs[0]
            refusing = next(p for p in st.procs if "streamfix_websocket=refuse" in p.cmd)
            for mode in ("refuse", "repaired"):
                run_id = uuid.uuid4().hex[:12]
                base = f"{st.bases[mode]}/rec/{rec.name},{FOLLOWUP}/v1"
                result = run_codex(base, scratch, websocket=True, run_id=run_id)
                replay.wait_for(rf"run={run_id}$", 5)
                counts = transport_counts(replay, run_id)
                assert judge(_client("codex"), exp, result).ok, (mode, result)
                if mode == "refuse":
                    assert counts["ws_turns"] == 0 and counts["http_requests"] >= 1, counts
                    refusing.wait_for(r"WebSocket upgrade refused with 426", 10)
                else:
                    assert counts["ws_turns"] >= 1 and counts["http_requests"] == 0, counts


def test_a_cut_stream_reaches_chat_clients_repaired(tmp_path):
    """Salvage: the upstream resets while the repair holds a nameless tool-call
    header at CPA's step index 1 (``tests/e2e/test_cut_upstream.py``'s
    ``chat-nameless-header-step-index``). Straight from the upstream, openai-python's
    ``chat.completions.stream()`` raises ``IndexError`` on the hole at index 0 before it
    sees the cut; through the addon the held header arrives at index 0 and the client
    reports the cut itself (``APIConnectionError``), as the raw iteration does both ways.
    The AI SDK fails the same way both ways: the name never came, and no repair makes one
    up (7 and 5 throw "Expected 'function.name' to be a string.", 6 "terminated")."""
    from cutcases import CuttingUpstream
    from runners import run_aisdk_batch, run_openai_py
    from support import start_mitmdump

    case = "chat-nameless-header-step-index/reset/v1"
    up = CuttingUpstream()
    mitm, port = start_mitmdump(f"http://127.0.0.1:{up.port}", tmp_path / "conf")
    bases = {"raw": f"http://127.0.0.1:{up.port}/{case}", "repaired": f"http://127.0.0.1:{port}/{case}"}
    tools = [{"name": "write_file", "description": "w", "parameters": {"type": "object", "properties": {}}}]
    got: dict[tuple[str, str], dict] = {}
    try:
        for mode, base in bases.items():
            for c in CLIENT_LIST:
                if c.family == "openai-py" and c.api == "chat":
                    got[(mode, c.name)] = run_openai_py(c, base, [], True, None, timeout=20)
            by_install: dict[Path, list[dict]] = {}
            for c in CLIENT_LIST:
                if c.family == "aisdk" and c.api == "chat" and installed(c):
                    case_ = {"id": c.name, "api": c.variant, "baseURL": base, "tools": tools, "stream": True}
                    by_install.setdefault(c.install_dir, []).append(case_)
            for inst, cases in by_install.items():
                for name, r in run_aisdk_batch(inst, cases, timeout=20).items():
                    got[(mode, name)] = r
    finally:
        mitm.stop()
        up.close()
    assert got[("raw", "openai-py/chat.stream")]["exception"] == "IndexError"
    for mode in bases:
        assert got[(mode, "openai-py/chat")]["exception"] == "APIConnectionError"
    assert got[("repaired", "openai-py/chat.stream")]["exception"] == "APIConnectionError"
    aisdk = sorted({name for _, name in got if name.startswith("aisdk")})
    assert aisdk, "no AI SDK client installed"
    for name in aisdk:
        raw, fixed = got[("raw", name)], got[("repaired", name)]
        assert fixed.get("thrown") and fixed.get("thrown") == raw.get("thrown"), (name, raw, fixed)


@pytest.mark.parametrize("api", ["responses", "chat", "messages", "gemini"])
def test_an_error_event_is_an_expected_failure(api):
    """The empty streams' expected bodies end in the API's failure: every client must
    report one (judge.py), whatever the API."""
    rec = load(f"{api}-empty-stream")
    exp = expected_from_body(api, rec.expected)
    assert exp.failed and not exp.truncated and exp.calls == ()
    clean = load(f"{api}-clean" if api in ("messages", "gemini") else f"{api}-openai-clean")
    assert not expected_from_body(api, clean.body).failed
